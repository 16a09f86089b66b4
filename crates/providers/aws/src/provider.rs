//! The AWS provider: builds (and keeps) one client per store, credentials and namespace: an
//! [`SmClient`] for `service: SecretsManager`, a [`PsClient`] for `service: ParameterStore`.

use std::sync::Arc;
use std::time::Duration;

use moka::future::Cache;

use crate::api::SmApi;
use crate::auth::{
    Base, BuildInput, Endpoints, KubeSource, StoreIdentity, StoreKind, build_config,
    credentials_identity, resolve_base, retry_config,
};
use crate::calls::CallLog;
use crate::client::SmClient;
use crate::error::AwsError;
use crate::fetcher::{CostOptions, Fetcher};
use crate::parameterstore::PsClient;
use crate::spec::{AwsProviderSpec, RetrySettings};
use crate::ssm::PsApi;

/// Options of the provider (not of a store).
#[derive(Debug, Clone, Default)]
pub struct AwsProviderOptions {
    /// Endpoint overrides on top of `AWS_ENDPOINT_URL*`.
    pub endpoints: Endpoints,
    pub cost: CostOptions,
    /// Where calls are counted.
    pub calls: CallLog,
}

impl AwsProviderOptions {
    /// Defaults, overridden by `ESR_AWS_CACHE_TTL` and `ESR_AWS_BATCH_WINDOW` (Go durations;
    /// `0` disables the feature) and `ESR_AWS_PREFETCH` (`true`/`false`).
    pub fn from_env() -> Result<Self, AwsError> {
        let mut o = Self::default();
        if let Ok(v) = std::env::var("ESR_AWS_CACHE_TTL") {
            o.cost.cache_ttl = esr_api::duration::parse_std(v.trim())
                .map_err(|e| AwsError::invalid(format!("ESR_AWS_CACHE_TTL: {e}")))?;
        }
        if let Ok(v) = std::env::var("ESR_AWS_BATCH_WINDOW") {
            o.cost.batch_window = esr_api::duration::parse_std(v.trim())
                .map_err(|e| AwsError::invalid(format!("ESR_AWS_BATCH_WINDOW: {e}")))?;
        }
        if let Ok(v) = std::env::var("ESR_AWS_PREFETCH") {
            o.cost.prefetch = match v.as_str() {
                "1" | "true" | "on" => true,
                "0" | "false" | "off" => false,
                other => {
                    return Err(AwsError::invalid(format!(
                        "ESR_AWS_PREFETCH: expected true or false, got {other:?}"
                    )));
                }
            };
        }
        Ok(o)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ClientKey {
    uid: String,
    name: String,
    kind: StoreKind,
    generation: i64,
    referent_unresolved: bool,
    credentials: String,
    spec_hash: String,
}

/// The client of one store, by service.
#[derive(Debug, Clone)]
pub enum StoreClient {
    SecretsManager(Arc<SmClient>),
    ParameterStore(Arc<PsClient>),
}

/// The `aws` provider (`service: SecretsManager` and `service: ParameterStore`).
pub struct AwsProvider {
    opts: AwsProviderOptions,
    clients: Cache<ClientKey, StoreClient>,
}

impl std::fmt::Debug for AwsProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsProvider")
            .field("opts", &self.opts)
            .field("clients", &self.clients.entry_count())
            .finish()
    }
}

impl Default for AwsProvider {
    fn default() -> Self {
        Self::new(AwsProviderOptions::default())
    }
}

fn spec_hash(spec: &AwsProviderSpec, retry: Option<&RetrySettings>) -> String {
    use sha2::{Digest, Sha256};
    let text = serde_json::to_string(&(spec, retry)).unwrap_or_default();
    hex::encode(&Sha256::digest(text.as_bytes())[..16])
}

impl AwsProvider {
    pub fn new(opts: AwsProviderOptions) -> Self {
        Self {
            opts,
            clients: Cache::builder()
                .max_capacity(2_000)
                .time_to_idle(Duration::from_secs(30 * 60))
                .build(),
        }
    }

    pub fn options(&self) -> &AwsProviderOptions {
        &self.opts
    }

    /// The Secrets Manager client for `store` (see [`AwsProvider::store_client`]).
    pub async fn client(
        &self,
        spec_json: &serde_json::Value,
        retry: Option<&RetrySettings>,
        store: &StoreIdentity,
        es_namespace: Option<&str>,
        kube: Arc<dyn KubeSource>,
    ) -> Result<Arc<SmClient>, AwsError> {
        match self
            .store_client(spec_json, retry, store, es_namespace, kube)
            .await?
        {
            StoreClient::SecretsManager(c) => Ok(c),
            StoreClient::ParameterStore(_) => Err(AwsError::invalid(
                "the store is a ParameterStore store, not a SecretsManager one",
            )),
        }
    }

    /// The Parameter Store client for `store` (see [`AwsProvider::store_client`]).
    pub async fn ps_client(
        &self,
        spec_json: &serde_json::Value,
        retry: Option<&RetrySettings>,
        store: &StoreIdentity,
        es_namespace: Option<&str>,
        kube: Arc<dyn KubeSource>,
    ) -> Result<Arc<PsClient>, AwsError> {
        match self
            .store_client(spec_json, retry, store, es_namespace, kube)
            .await?
        {
            StoreClient::ParameterStore(c) => Ok(c),
            StoreClient::SecretsManager(_) => Err(AwsError::invalid(
                "the store is a SecretsManager store, not a ParameterStore one",
            )),
        }
    }

    /// The client for `store` used from `es_namespace` (None: the store controller validating).
    /// Clients are reused while the store uid/generation/spec and the resolved credentials stay
    /// the same, so STS and the caches are not rebuilt per reconcile. ExternalSecrets of different
    /// namespaces share a client when their credentials resolve identically (the credentials
    /// identity covers the keys, the role chain and the session tags, which carry the namespace
    /// under `sessionTagsPolicy`).
    pub async fn store_client(
        &self,
        spec_json: &serde_json::Value,
        retry: Option<&RetrySettings>,
        store: &StoreIdentity,
        es_namespace: Option<&str>,
        kube: Arc<dyn KubeSource>,
    ) -> Result<StoreClient, AwsError> {
        let spec = AwsProviderSpec::from_json(spec_json)?;
        spec.validate()?;
        let retry_cfg = retry_config(retry)?;
        let referent = store.kind == StoreKind::ClusterSecretStore && spec.is_referent();
        let referent_unresolved = referent && es_namespace.is_none();
        let base = if referent_unresolved {
            Base::DefaultChain
        } else {
            resolve_base(&spec, store, es_namespace, kube.as_ref()).await?
        };
        let session_tags =
            spec.effective_session_tags(&store.name, store.kind.as_str(), es_namespace);
        let key = ClientKey {
            uid: store.uid.clone(),
            name: store.name.clone(),
            kind: store.kind,
            generation: store.generation,
            referent_unresolved,
            credentials: credentials_identity(&base, &spec, &session_tags),
            spec_hash: spec_hash(&spec, retry),
        };
        let opts = self.opts.clone();
        self.clients
            .try_get_with(key, async move {
                let built = build_config(BuildInput {
                    spec: &spec,
                    retry: retry_cfg,
                    base,
                    session_tags,
                    endpoints: &opts.endpoints,
                    kube,
                    calls: opts.calls.clone(),
                })
                .await?;
                if spec.service == crate::spec::SERVICE_PARAMETER_STORE {
                    let mut b = aws_sdk_ssm::config::Builder::from(&built.sdk);
                    if let Some(ep) = &opts.endpoints.parameter_store {
                        b = b.endpoint_url(ep);
                    }
                    let ssm = aws_sdk_ssm::Client::from_conf(b.build());
                    let api = Arc::new(PsApi::new(ssm, opts.calls.clone()));
                    let fetcher = Fetcher::new(api, &opts.cost);
                    return Ok::<_, AwsError>(StoreClient::ParameterStore(Arc::new(
                        PsClient::new(fetcher, spec.prefix.clone(), referent_unresolved, built.sdk),
                    )));
                }
                let mut b = aws_sdk_secretsmanager::config::Builder::from(&built.sdk);
                if let Some(ep) = &opts.endpoints.secrets_manager {
                    b = b.endpoint_url(ep);
                }
                let sm = aws_sdk_secretsmanager::Client::from_conf(b.build());
                let api = Arc::new(SmApi::new(sm, opts.calls.clone()));
                let fetcher = Fetcher::new(api, &opts.cost);
                Ok::<_, AwsError>(StoreClient::SecretsManager(Arc::new(SmClient::new(
                    fetcher,
                    spec.prefix.clone(),
                    spec.secrets_manager.clone(),
                    referent_unresolved,
                    built.sdk,
                ))))
            })
            .await
            .map_err(|e| (*e).clone())
    }

    /// Number of live store clients (for tests and diagnostics).
    pub async fn client_count(&self) -> u64 {
        self.clients.run_pending_tasks().await;
        self.clients.entry_count()
    }
}
