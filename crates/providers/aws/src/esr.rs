//! The esr provider contract (`esr_provider::Provider` / `SecretsClient`) on top of this crate.
//!
//! Register with `registry.register(Arc::new(esr_provider_aws::AwsSecretsManagerProvider::from_env()))`.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use esr_provider::keys::convert_keys;
use esr_provider::metrics::CallRecorder;
use esr_provider::refs::{
    validate_referent_secret_selector, validate_referent_service_account_selector,
};
use esr_provider::{
    CallStatus, Capabilities, ClientContext, FindRequest, KubeAccess, Provider, ProviderError,
    PushRemoteRef, PushRequest, SecretRef, SecretsClient, ValidationResult,
};

use crate::auth::KubeSource;
use crate::calls::{CallObserver, PROVIDER_PS, PROVIDER_SM};
use crate::client::{SmClient, Validation};
use crate::error::{AwsError, AwsErrorKind};
use crate::parameterstore::{PsClient, PushValue};
use crate::provider::{AwsProvider, AwsProviderOptions, StoreClient};
use crate::spec::{AwsProviderSpec, FindRef, RemoteRef, RetrySettings};

/// `spec.provider` key.
pub const PROVIDER_KEY: &str = "aws";
/// Generator kind of [`crate::generators::AwsGenerators::ecr_authorization_token`].
pub const ECR_AUTHORIZATION_TOKEN: &str = "ECRAuthorizationToken";
/// Generator kind of [`crate::generators::AwsGenerators::sts_session_token`].
pub const STS_SESSION_TOKEN: &str = "STSSessionToken";

/// Runs the AWS generator `kind` (`ECRAuthorizationToken` or `STSSessionToken`) named `name`
/// with `spec` for a referrer in `namespace`, recording its AWS calls in `recorder`. AWS endpoints
/// come from the SDK's environment (`AWS_ENDPOINT_URL*`). Errors are messages without secret
/// values.
pub async fn generate(
    kind: &str,
    name: &str,
    namespace: &str,
    spec: &serde_json::Value,
    kube: Arc<dyn KubeAccess>,
    recorder: Arc<dyn CallRecorder>,
) -> Result<crate::generators::Generated, ProviderError> {
    let gens = crate::generators::AwsGenerators::new(
        crate::auth::Endpoints::default(),
        crate::calls::CallLog::with_observer(Arc::new(RecorderBridge(recorder))),
    );
    let input = crate::generators::GenerateInput {
        name,
        namespace,
        kube: Arc::new(KubeBridge(kube)),
    };
    let res = match kind {
        ECR_AUTHORIZATION_TOKEN => {
            let spec = serde_json::from_value(spec.clone())
                .map_err(|e| ProviderError::invalid(format!("unable to parse spec: {e}")))?;
            gens.ecr_authorization_token(&spec, &input).await
        }
        STS_SESSION_TOKEN => {
            let spec = serde_json::from_value(spec.clone())
                .map_err(|e| ProviderError::invalid(format!("unable to parse spec: {e}")))?;
            gens.sts_session_token(&spec, &input).await
        }
        other => {
            return Err(ProviderError::invalid(format!(
                "generator kind {other} is not an AWS generator"
            )));
        }
    };
    res.map_err(|e| {
        let pe = ProviderError::new(esr_kind(e.kind), e.message);
        match e.retry_after {
            Some(d) => pe.with_retry_after(d),
            None => pe,
        }
    })
}

/// Turn a classified AWS error into the esr provider error. Not-found keeps ESO's exact text
/// (`Secret does not exist`); the detailed AWS message stays available as the error source.
pub fn to_provider_error(e: AwsError) -> ProviderError {
    to_provider_error_for(e, PROVIDER_SM)
}

/// [`to_provider_error`] with the `provider` label of the service (`AWS/ParameterStore`, ...).
pub fn to_provider_error_for(e: AwsError, provider: &'static str) -> ProviderError {
    let pe = match e.kind {
        AwsErrorKind::NotFound => ProviderError::not_found().with_source(e.clone()),
        AwsErrorKind::Auth => ProviderError::auth(e.message.clone()),
        AwsErrorKind::Throttled => ProviderError::throttled(e.message.clone(), e.retry_after),
        AwsErrorKind::Invalid => ProviderError::invalid(e.message.clone()),
        AwsErrorKind::Transient => ProviderError::transient(e.message.clone()),
    };
    pe.with_provider(provider)
}

fn kind_of(e: &ProviderError) -> AwsErrorKind {
    match e.kind() {
        esr_provider::ErrorKind::NotFound => AwsErrorKind::NotFound,
        esr_provider::ErrorKind::Auth => AwsErrorKind::Auth,
        esr_provider::ErrorKind::Throttled => AwsErrorKind::Throttled,
        esr_provider::ErrorKind::Transient => AwsErrorKind::Transient,
        _ => AwsErrorKind::Invalid,
    }
}

fn from_provider_error(e: ProviderError) -> AwsError {
    AwsError::new(kind_of(&e), e.message().to_string())
}

fn esr_kind(k: AwsErrorKind) -> esr_provider::ErrorKind {
    match k {
        AwsErrorKind::NotFound => esr_provider::ErrorKind::NotFound,
        AwsErrorKind::Auth => esr_provider::ErrorKind::Auth,
        AwsErrorKind::Throttled => esr_provider::ErrorKind::Throttled,
        AwsErrorKind::Invalid => esr_provider::ErrorKind::Invalid,
        AwsErrorKind::Transient => esr_provider::ErrorKind::Transient,
    }
}

/// Forwards call counts to the controller's recorder.
struct RecorderBridge(Arc<dyn CallRecorder>);

impl CallObserver for RecorderBridge {
    fn observe(&self, provider: &str, call: &str, error: Option<AwsErrorKind>) {
        let status = match error {
            None => CallStatus::Success,
            Some(k) => CallStatus::Error(esr_kind(k)),
        };
        self.0.record(provider, call, status);
    }
}

/// [`KubeSource`] over the controller's [`KubeAccess`].
struct KubeBridge(Arc<dyn KubeAccess>);

#[async_trait]
impl KubeSource for KubeBridge {
    async fn secret_value(&self, ns: &str, name: &str, key: &str) -> Result<Vec<u8>, AwsError> {
        self.0
            .get_secret_key(ns, name, key)
            .await
            .map_err(from_provider_error)
    }

    async fn service_account_annotations(
        &self,
        ns: &str,
        name: &str,
    ) -> Result<BTreeMap<String, String>, AwsError> {
        let sa = self
            .0
            .get_service_account(ns, name)
            .await
            .map_err(from_provider_error)?
            .ok_or_else(|| {
                AwsError::invalid(format!(
                    "serviceaccounts {name:?} not found in namespace {ns:?}"
                ))
            })?;
        Ok(sa.metadata.annotations.unwrap_or_default())
    }

    async fn service_account_token(
        &self,
        ns: &str,
        name: &str,
        audiences: &[String],
    ) -> Result<String, AwsError> {
        self.0
            .create_service_account_token(ns, name, audiences, None)
            .await
            .map_err(from_provider_error)
    }
}

/// The `aws` provider, `service: SecretsManager` and `service: ParameterStore`.
#[derive(Debug, Default)]
pub struct AwsSecretsManagerProvider {
    inner: AwsProvider,
}

impl AwsSecretsManagerProvider {
    pub fn new(opts: AwsProviderOptions) -> Self {
        Self {
            inner: AwsProvider::new(opts),
        }
    }

    /// Options from `ESR_AWS_CACHE_TTL` / `ESR_AWS_BATCH_WINDOW` (invalid values fall back to the
    /// defaults with a warning).
    pub fn from_env() -> Self {
        let opts = AwsProviderOptions::from_env().unwrap_or_else(|e| {
            tracing::warn!(error = %e, "ignoring invalid AWS provider settings");
            AwsProviderOptions::default()
        });
        Self::new(opts)
    }

    pub fn inner(&self) -> &AwsProvider {
        &self.inner
    }
}

fn store_info(s: &esr_provider::StoreInfo) -> crate::auth::StoreIdentity {
    crate::auth::StoreIdentity {
        kind: s.kind,
        name: s.name.clone(),
        namespace: s.namespace.clone(),
        uid: s.uid.clone().unwrap_or_else(|| s.identity()),
        generation: s.generation,
    }
}

#[async_trait]
impl Provider for AwsSecretsManagerProvider {
    fn name(&self) -> &'static str {
        PROVIDER_KEY
    }

    fn metric_provider(&self) -> &'static str {
        PROVIDER_SM
    }

    fn capabilities(&self, _store: &esr_provider::StoreInfo) -> Capabilities {
        Capabilities::ReadWrite
    }

    fn validate_store(&self, store: &esr_provider::StoreInfo) -> esr_provider::Result<Vec<String>> {
        let raw = store.provider_json(PROVIDER_KEY).ok_or_else(|| {
            ProviderError::invalid("no store type or wrong store type: missing spec.provider.aws")
        })?;
        let spec = AwsProviderSpec::from_json(raw).map_err(to_provider_error)?;
        if spec.service == "CertificateManager" {
            // Valid for ESO, but a service esr does not implement.
            return Err(ProviderError::unsupported(format!(
                "AWS service {} is not supported by esr (esr supports SecretsManager and ParameterStore)",
                spec.service
            ))
            .with_provider(PROVIDER_SM));
        }
        spec.validate().map_err(to_provider_error)?;
        if let Some(sr) = &spec.auth.secret_ref {
            for (what, sel) in [
                ("AccessKeyID", Some(&sr.access_key_id)),
                ("SecretAccessKey", Some(&sr.secret_access_key)),
                ("SessionToken", sr.session_token.as_ref()),
            ] {
                if let Some(sel) = sel {
                    validate_referent_secret_selector(store, sel.namespace.as_deref())
                        .map_err(|e| e.wrap(format_args!("invalid Auth.SecretRef.{what}")))?;
                }
            }
        }
        if let Some(sa) = spec
            .auth
            .jwt
            .as_ref()
            .and_then(|j| j.service_account_ref.as_ref())
        {
            validate_referent_service_account_selector(store, sa.namespace.as_deref())
                .map_err(|e| e.wrap("invalid Auth.JWT.ServiceAccountRef"))?;
        }
        if spec.auth.secret_ref.is_none() && spec.auth.jwt.is_none() {
            crate::auth::default_chain_allowed(&store_info(store)).map_err(to_provider_error)?;
        }
        let (max, interval) = store.retry_settings();
        RetrySettings {
            max_retries: max,
            retry_interval: interval,
        }
        .resolve()
        .map_err(to_provider_error)?;
        Ok(Vec::new())
    }

    async fn new_client(
        &self,
        ctx: &ClientContext<'_>,
    ) -> esr_provider::Result<Arc<dyn SecretsClient>> {
        let raw = ctx.store.provider_json(PROVIDER_KEY).ok_or_else(|| {
            ProviderError::invalid("no store type or wrong store type: missing spec.provider.aws")
        })?;
        let retry = ctx
            .store
            .spec
            .get("retrySettings")
            .filter(|r| !r.is_null())
            .map(|_| {
                let (max, interval) = ctx.store.retry_settings();
                RetrySettings {
                    max_retries: max,
                    retry_interval: interval,
                }
            });
        self.inner
            .options()
            .calls
            .set_observer(Arc::new(RecorderBridge(ctx.recorder.clone())));
        let es_ns = ctx.namespace.filter(|n| !n.is_empty());
        let client = self
            .inner
            .store_client(
                raw,
                retry.as_ref(),
                &store_info(ctx.store),
                es_ns,
                Arc::new(KubeBridge(ctx.kube.clone())),
            )
            .await
            .map_err(|e| to_provider_error(e).wrap("unable to create session"))?;
        Ok(match client {
            StoreClient::SecretsManager(c) => Arc::new(EsrClient(c)),
            StoreClient::ParameterStore(c) => Arc::new(EsrPsClient(c)),
        })
    }
}

/// [`SecretsClient`] over [`SmClient`].
pub struct EsrClient(pub Arc<SmClient>);

fn remote(r: &SecretRef) -> RemoteRef {
    RemoteRef {
        key: r.key.clone(),
        version: r.version().map(str::to_string),
        property: r.property().map(str::to_string),
        fetch_metadata: r.fetch_metadata(),
    }
}

fn keyed(e: AwsError, key: &str) -> ProviderError {
    keyed_for(e, key, PROVIDER_SM)
}

/// A read error of `key` from the service labelled `provider`.
fn keyed_for(e: AwsError, key: &str, provider: &'static str) -> ProviderError {
    to_provider_error_for(e, provider).with_key(key.to_string())
}

/// The results of a batched read, each error keyed with its reference.
fn keyed_all<T>(
    results: Vec<Result<T, AwsError>>,
    refs: &[SecretRef],
    provider: &'static str,
) -> Vec<esr_provider::Result<T>> {
    results
        .into_iter()
        .zip(refs)
        .map(|(res, r)| res.map_err(|e| keyed_for(e, &r.key, provider)))
        .collect()
}

/// The provider's find from an ExternalSecret's `find`.
fn find_ref(f: &FindRequest) -> FindRef {
    FindRef {
        name_regexp: f.name_regexp().map(str::to_string),
        tags: f.tags.clone().unwrap_or_default(),
        path: f.path().map(str::to_string),
    }
}

#[async_trait]
impl SecretsClient for EsrClient {
    async fn get_secret(&self, r: &SecretRef) -> esr_provider::Result<Vec<u8>> {
        self.0
            .get_secret(&remote(r))
            .await
            .map_err(|e| keyed(e, &r.key))
    }

    async fn get_secrets(&self, refs: &[SecretRef]) -> Vec<esr_provider::Result<Vec<u8>>> {
        let rs: Vec<RemoteRef> = refs.iter().map(remote).collect();
        keyed_all(self.0.get_secrets(&rs).await, refs, PROVIDER_SM)
    }

    async fn get_secret_map(
        &self,
        r: &SecretRef,
    ) -> esr_provider::Result<BTreeMap<String, Vec<u8>>> {
        self.0
            .get_secret_map(&remote(r))
            .await
            .map_err(|e| keyed(e, &r.key))
    }

    async fn get_all_secrets(
        &self,
        f: &FindRequest,
    ) -> esr_provider::Result<BTreeMap<String, Vec<u8>>> {
        let find = find_ref(f);
        let found = self
            .0
            .get_all_secrets(&find)
            .await
            .map_err(to_provider_error)?;
        convert_keys(f.conversion_strategy, found)
    }

    async fn push_secret(&self, req: &PushRequest) -> esr_provider::Result<()> {
        self.0
            .push_secret(
                req.remote_key(),
                req.property(),
                &req.value,
                req.metadata.as_ref(),
            )
            .await
            .map_err(|e| keyed(e, req.remote_key()))
    }

    async fn delete_secret(&self, r: &PushRemoteRef) -> esr_provider::Result<()> {
        self.0
            .delete_secret(&r.remote_key, r.property())
            .await
            .map_err(|e| keyed(e, &r.remote_key))
    }

    async fn secret_exists(&self, r: &PushRemoteRef) -> esr_provider::Result<bool> {
        self.0
            .secret_exists(&r.remote_key)
            .await
            .map_err(|e| keyed(e, &r.remote_key))
    }

    async fn validate(&self) -> ValidationResult {
        match self.0.validate().await {
            Validation::Ready => ValidationResult::Ready,
            Validation::Unknown => ValidationResult::Unknown,
            Validation::Error(e) => ValidationResult::Error(e.message),
        }
    }
}

/// [`SecretsClient`] over [`PsClient`] (`service: ParameterStore`).
pub struct EsrPsClient(pub Arc<PsClient>);

fn ps_keyed(e: AwsError, key: &str) -> ProviderError {
    keyed_for(e, key, PROVIDER_PS)
}

#[async_trait]
impl SecretsClient for EsrPsClient {
    async fn get_secret(&self, r: &SecretRef) -> esr_provider::Result<Vec<u8>> {
        self.0
            .get_secret(&remote(r))
            .await
            .map_err(|e| ps_keyed(e, &r.key))
    }

    async fn get_secrets(&self, refs: &[SecretRef]) -> Vec<esr_provider::Result<Vec<u8>>> {
        let rs: Vec<RemoteRef> = refs.iter().map(remote).collect();
        keyed_all(self.0.get_secrets(&rs).await, refs, PROVIDER_PS)
    }

    async fn get_secret_map(
        &self,
        r: &SecretRef,
    ) -> esr_provider::Result<BTreeMap<String, Vec<u8>>> {
        self.0
            .get_secret_map(&remote(r))
            .await
            .map_err(|e| ps_keyed(e, &r.key))
    }

    async fn get_all_secrets(
        &self,
        f: &FindRequest,
    ) -> esr_provider::Result<BTreeMap<String, Vec<u8>>> {
        let find = find_ref(f);
        // As ESO's Parameter Store: the parameter names come back as they are (`/a/b`); the
        // controller applies `conversionStrategy` only when the find has no rewrite.
        self.0
            .get_all_secrets(&find)
            .await
            .map_err(|e| to_provider_error_for(e, PROVIDER_PS))
    }

    /// Parameter Store has no properties: `match.remoteRef.property` is ignored (as in ESO).
    async fn push_secret(&self, req: &PushRequest) -> esr_provider::Result<()> {
        let whole: BTreeMap<String, Vec<u8>>;
        let value = match &req.secret_key {
            Some(_) => PushValue::Key(&req.value),
            None => {
                whole = req
                    .source
                    .data
                    .as_ref()
                    .map(|d| d.iter().map(|(k, v)| (k.clone(), v.0.clone())).collect())
                    .unwrap_or_default();
                PushValue::Whole(&whole)
            }
        };
        self.0
            .push_secret(req.remote_key(), value, req.metadata.as_ref())
            .await
            .map_err(|e| ps_keyed(e, req.remote_key()))
    }

    async fn delete_secret(&self, r: &PushRemoteRef) -> esr_provider::Result<()> {
        self.0
            .delete_secret(&r.remote_key)
            .await
            .map_err(|e| ps_keyed(e, &r.remote_key))
    }

    async fn secret_exists(&self, r: &PushRemoteRef) -> esr_provider::Result<bool> {
        self.0
            .secret_exists(&r.remote_key)
            .await
            .map_err(|e| ps_keyed(e, &r.remote_key))
    }

    async fn validate(&self) -> ValidationResult {
        match self.0.validate().await {
            Validation::Ready => ValidationResult::Ready,
            Validation::Unknown => ValidationResult::Unknown,
            Validation::Error(e) => ValidationResult::Error(e.message),
        }
    }
}
