//! Credentials and SDK configuration for a store, as ESO builds them:
//!
//! 1. base credentials: `auth.jwt` (a service-account token from the TokenRequest API exchanged
//!    with STS AssumeRoleWithWebIdentity, the role taken from the ServiceAccount's
//!    `eks.amazonaws.com/role-arn` annotation), else `auth.secretRef` (static keys from
//!    Kubernetes Secrets), else the SDK default chain (env, web identity file, ECS, IMDS): the
//!    controller's own identity, refused to a namespaced SecretStore (see
//!    [`esr_provider::identity`]);
//! 2. then every `additionalRoles` entry is assumed in order, then `role` (with `externalID`,
//!    session tags and transitive tag keys).
//!
//! Each credentials stage is wrapped in the SDK's lazy identity cache, so STS is called only when
//! the previous credentials are about to expire, not per reconcile.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use aws_config::BehaviorVersion;
use aws_config::SdkConfig;
use aws_config::retry::RetryConfig;
use aws_credential_types::Credentials;
use aws_credential_types::provider::error::CredentialsError;
use aws_credential_types::provider::{self, ProvideCredentials, SharedCredentialsProvider};
use aws_sdk_secretsmanager::config::Region;
use sha2::{Digest, Sha256};

use crate::calls::{CallLog, PROVIDER_STS};
use crate::error::{AwsError, from_sdk};
use crate::spec::{AwsProviderSpec, RetrySettings, SecretKeySelector};

/// ESO's IRSA annotations and defaults.
pub const ROLE_ARN_ANNOTATION: &str = "eks.amazonaws.com/role-arn";
pub const AUDIENCE_ANNOTATION: &str = "eks.amazonaws.com/audience";
pub const DEFAULT_AUDIENCE: &str = "sts.amazonaws.com";
pub const WEB_IDENTITY_SESSION_NAME: &str = "external-secrets-provider-aws";

/// What the AWS provider needs from Kubernetes.
#[async_trait]
pub trait KubeSource: Send + Sync {
    /// `data[key]` of a Secret.
    async fn secret_value(
        &self,
        namespace: &str,
        name: &str,
        key: &str,
    ) -> Result<Vec<u8>, AwsError>;
    /// Annotations of a ServiceAccount.
    async fn service_account_annotations(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<BTreeMap<String, String>, AwsError>;
    /// A token for a ServiceAccount (TokenRequest API).
    async fn service_account_token(
        &self,
        namespace: &str,
        name: &str,
        audiences: &[String],
    ) -> Result<String, AwsError>;
}

pub use esr_provider::StoreKind;

/// Which store (and ExternalSecret namespace) a client is built for: the key of the client and
/// credential caches. The resolved store itself is `esr_provider::StoreInfo`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StoreIdentity {
    pub kind: StoreKind,
    pub name: String,
    /// The store's namespace (namespaced stores only).
    pub namespace: Option<String>,
    pub uid: String,
    pub generation: i64,
}

/// Endpoint overrides, in addition to the standard `AWS_ENDPOINT_URL*` environment variables
/// and profile settings, which the SDK applies by itself.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Endpoints {
    /// For every service (like `AWS_ENDPOINT_URL`).
    pub all: Option<String>,
    /// Secrets Manager only (like `AWS_ENDPOINT_URL_SECRETS_MANAGER`).
    pub secrets_manager: Option<String>,
    /// STS only (like `AWS_ENDPOINT_URL_STS`).
    pub sts: Option<String>,
    /// Parameter Store only (like `AWS_ENDPOINT_URL_SSM`).
    pub parameter_store: Option<String>,
    /// ECR only (like `AWS_ENDPOINT_URL_ECR`).
    pub ecr: Option<String>,
}

/// Base credentials, resolved.
#[derive(Clone)]
pub(crate) enum Base {
    Static(Credentials),
    WebIdentity {
        namespace: String,
        service_account: String,
        role_arn: String,
        audiences: Vec<String>,
    },
    DefaultChain,
}

/// Which namespace a credential reference resolves in (ESO `resolvers.SecretKeyRef`): in a
/// ClusterSecretStore an explicit namespace wins, otherwise the ExternalSecret's namespace;
/// in a SecretStore always the store's namespace.
pub(crate) fn ref_namespace(
    store: &StoreIdentity,
    es_namespace: Option<&str>,
    explicit: Option<&str>,
) -> Result<String, AwsError> {
    match store.kind {
        StoreKind::ClusterSecretStore => explicit
            .or(es_namespace)
            .map(str::to_string)
            .ok_or_else(|| {
                AwsError::invalid(
                    "a namespace is required for credential references in a ClusterSecretStore used without an ExternalSecret namespace",
                )
            }),
        StoreKind::SecretStore => store
            .namespace
            .clone()
            .or_else(|| es_namespace.map(str::to_string))
            .ok_or_else(|| AwsError::invalid("the SecretStore has no namespace")),
    }
}

async fn read_ref(
    kube: &dyn KubeSource,
    store: &StoreIdentity,
    es_namespace: Option<&str>,
    sel: &SecretKeySelector,
    what: &str,
) -> Result<String, AwsError> {
    let ns = ref_namespace(store, es_namespace, sel.namespace.as_deref())?;
    let key = sel.key.as_deref().unwrap_or_default();
    let bytes = kube
        .secret_value(&ns, &sel.name, key)
        .await
        .map_err(|e| AwsError::new(e.kind, format!("could not fetch {what} secret: {e}")))?;
    String::from_utf8(bytes)
        .map_err(|_| AwsError::invalid(format!("could not fetch {what} secret: not UTF-8")))
}

/// Resolve the base credentials of a store.
pub(crate) async fn resolve_base(
    spec: &AwsProviderSpec,
    store: &StoreIdentity,
    es_namespace: Option<&str>,
    kube: &dyn KubeSource,
) -> Result<Base, AwsError> {
    if let Some(jwt) = &spec.auth.jwt {
        let sa = jwt
            .service_account_ref
            .as_ref()
            .ok_or_else(|| AwsError::invalid("auth.jwt.serviceAccountRef is required"))?;
        let ns = match store.kind {
            StoreKind::ClusterSecretStore => {
                sa.namespace.clone().or(es_namespace.map(str::to_string))
            }
            StoreKind::SecretStore => store.namespace.clone(),
        }
        .ok_or_else(|| AwsError::invalid("cannot determine the ServiceAccount namespace"))?;
        let annotations = kube.service_account_annotations(&ns, &sa.name).await?;
        let role_arn = annotations
            .get(ROLE_ARN_ANNOTATION)
            .filter(|r| !r.is_empty())
            .cloned()
            .ok_or_else(|| {
                AwsError::invalid(format!(
                    "an IAM role must be associated with service account {} (namespace: {ns})",
                    sa.name
                ))
            })?;
        let mut audiences = vec![
            annotations
                .get(AUDIENCE_ANNOTATION)
                .filter(|a| !a.is_empty())
                .cloned()
                .unwrap_or_else(|| DEFAULT_AUDIENCE.to_string()),
        ];
        audiences.extend(sa.audiences.iter().cloned());
        return Ok(Base::WebIdentity {
            namespace: ns,
            service_account: sa.name.clone(),
            role_arn,
            audiences,
        });
    }
    if let Some(sr) = &spec.auth.secret_ref {
        let secret = read_ref(
            kube,
            store,
            es_namespace,
            &sr.secret_access_key,
            "SecretAccessKey",
        )
        .await?;
        let akid = read_ref(kube, store, es_namespace, &sr.access_key_id, "accessKeyID").await?;
        let token = match &sr.session_token {
            Some(t) => Some(read_ref(kube, store, es_namespace, t, "SessionToken").await?),
            None => None,
        };
        let token = token.filter(|t| !t.is_empty());
        return Ok(Base::Static(Credentials::new(
            akid,
            secret,
            token,
            None,
            "esr-secretRef",
        )));
    }
    default_chain_allowed(store)?;
    Ok(Base::DefaultChain)
}

/// Whether `store` may use the SDK default chain (the controller's own identity): never a
/// namespaced SecretStore unless the controller allows it (see [`esr_provider::identity`]).
pub(crate) fn default_chain_allowed(store: &StoreIdentity) -> Result<(), AwsError> {
    let kind = match store.kind {
        StoreKind::SecretStore => esr_provider::StoreKind::SecretStore,
        StoreKind::ClusterSecretStore => esr_provider::StoreKind::ClusterSecretStore,
    };
    esr_provider::identity::check_controller_identity(
        kind,
        esr_provider::identity::namespaced_controller_identity_allowed(),
        "aws auth without jwt or secretRef (the SDK default credential chain)",
        "set auth.secretRef or auth.jwt.serviceAccountRef",
    )
    .map_err(|e| AwsError::auth(e.message()))
}

/// A hash identifying the credentials a client uses (never the credentials themselves).
pub(crate) fn credentials_identity(
    base: &Base,
    spec: &AwsProviderSpec,
    tags: &[(String, String)],
) -> String {
    let mut h = Sha256::new();
    match base {
        Base::Static(c) => {
            h.update(b"static\0");
            h.update(c.access_key_id().as_bytes());
            h.update(b"\0");
            h.update(c.secret_access_key().as_bytes());
            h.update(b"\0");
            h.update(c.session_token().unwrap_or_default().as_bytes());
        }
        Base::WebIdentity {
            namespace,
            service_account,
            role_arn,
            audiences,
        } => {
            h.update(b"jwt\0");
            for p in [namespace, service_account, role_arn] {
                h.update(p.as_bytes());
                h.update(b"\0");
            }
            for a in audiences {
                h.update(a.as_bytes());
                h.update(b"\0");
            }
        }
        Base::DefaultChain => h.update(b"default\0"),
    }
    for r in spec
        .additional_roles
        .iter()
        .chain(std::iter::once(&spec.role))
    {
        h.update(r.as_bytes());
        h.update(b"\0");
    }
    h.update(spec.external_id.as_bytes());
    for (k, v) in tags {
        h.update(k.as_bytes());
        h.update(b"=");
        h.update(v.as_bytes());
        h.update(b"\0");
    }
    for k in &spec.transitive_tag_keys {
        h.update(k.as_bytes());
        h.update(b"\0");
    }
    hex::encode(&h.finalize()[..16])
}

/// Retry configuration from `spec.retrySettings` (ESO: maxRetries → max attempts, default 3;
/// retryInterval → fixed delay).
pub(crate) fn retry_config(settings: Option<&RetrySettings>) -> Result<RetryConfig, AwsError> {
    let Some(settings) = settings else {
        return Ok(RetryConfig::standard());
    };
    let (attempts, delay) = settings.resolve()?;
    let mut rc = RetryConfig::standard().with_max_attempts(attempts);
    if let Some(d) = delay.filter(|d| !d.is_zero()) {
        rc = rc.with_initial_backoff(d).with_max_backoff(d);
    }
    Ok(rc)
}

/// Everything needed to build the SDK clients of one store client.
pub(crate) struct BuiltConfig {
    pub sdk: SdkConfig,
}

pub(crate) struct BuildInput<'a> {
    pub spec: &'a AwsProviderSpec,
    pub retry: RetryConfig,
    pub base: Base,
    pub session_tags: Vec<(String, String)>,
    pub endpoints: &'a Endpoints,
    pub kube: std::sync::Arc<dyn KubeSource>,
    pub calls: CallLog,
}

pub(crate) fn sts_client(sdk: &SdkConfig, endpoints: &Endpoints) -> aws_sdk_sts::Client {
    let mut b = aws_sdk_sts::config::Builder::from(sdk);
    if let Some(ep) = &endpoints.sts {
        b = b.endpoint_url(ep);
    }
    aws_sdk_sts::Client::from_conf(b.build())
}

/// Build the SDK configuration with the credential chain of the store.
pub(crate) async fn build_config(input: BuildInput<'_>) -> Result<BuiltConfig, AwsError> {
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new(input.spec.region.clone()))
        .retry_config(input.retry.clone())
        .app_name(
            aws_config::AppName::new("esr")
                .map_err(|e| AwsError::invalid(format!("bad app name: {e}")))?,
        );
    if let Some(ep) = &input.endpoints.all {
        loader = loader.endpoint_url(ep);
    }
    match &input.base {
        Base::Static(c) => {
            loader = loader.credentials_provider(c.clone());
        }
        Base::WebIdentity { .. } | Base::DefaultChain => {}
    }
    let mut sdk = loader.load().await;

    if let Base::WebIdentity {
        namespace,
        service_account,
        role_arn,
        audiences,
    } = &input.base
    {
        // AssumeRoleWithWebIdentity is unsigned; the STS client needs no credentials.
        let anon = sdk
            .clone()
            .into_builder()
            .credentials_provider(SharedCredentialsProvider::new(Credentials::new(
                "",
                "",
                None,
                None,
                "anonymous",
            )));
        let sts = sts_client(&anon.build(), input.endpoints);
        let p = WebIdentityProvider {
            sts,
            kube: input.kube.clone(),
            namespace: namespace.clone(),
            service_account: service_account.clone(),
            role_arn: role_arn.clone(),
            audiences: audiences.clone(),
            calls: input.calls.clone(),
        };
        sdk = sdk
            .into_builder()
            .credentials_provider(SharedCredentialsProvider::new(p))
            .build();
    }

    for role in &input.spec.additional_roles {
        let p = AssumeRoleProvider {
            sts: sts_client(&sdk, input.endpoints),
            role_arn: role.clone(),
            external_id: None,
            tags: Vec::new(),
            transitive: Vec::new(),
            calls: input.calls.clone(),
        };
        sdk = sdk
            .into_builder()
            .credentials_provider(SharedCredentialsProvider::new(p))
            .build();
    }
    if !input.spec.role.is_empty() {
        let p = AssumeRoleProvider {
            sts: sts_client(&sdk, input.endpoints),
            role_arn: input.spec.role.clone(),
            external_id: Some(input.spec.external_id.clone()).filter(|s| !s.is_empty()),
            tags: input.session_tags.clone(),
            transitive: if input.session_tags.is_empty() {
                Vec::new()
            } else {
                input.spec.transitive_tag_keys.clone()
            },
            calls: input.calls.clone(),
        };
        sdk = sdk
            .into_builder()
            .credentials_provider(SharedCredentialsProvider::new(p))
            .build();
    }
    Ok(BuiltConfig { sdk })
}

fn sts_credentials(
    out: Option<&aws_sdk_sts::types::Credentials>,
    source: &'static str,
) -> provider::Result {
    let c = out.ok_or_else(|| CredentialsError::unhandled("STS returned no credentials"))?;
    let expiry = SystemTime::try_from(*c.expiration()).ok();
    Ok(Credentials::new(
        c.access_key_id(),
        c.secret_access_key(),
        Some(c.session_token().to_string()),
        expiry,
        source,
    ))
}

fn session_name() -> String {
    let secs = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs();
    format!("esr-provider-aws-{secs}")
}

/// sts:AssumeRole with the previous stage's credentials.
#[derive(Debug)]
struct AssumeRoleProvider {
    sts: aws_sdk_sts::Client,
    role_arn: String,
    external_id: Option<String>,
    tags: Vec<(String, String)>,
    transitive: Vec<String>,
    calls: CallLog,
}

impl AssumeRoleProvider {
    async fn fetch(&self) -> provider::Result {
        let mut req = self
            .sts
            .assume_role()
            .role_arn(&self.role_arn)
            .role_session_name(session_name())
            .set_external_id(self.external_id.clone());
        for (k, v) in &self.tags {
            let tag = aws_sdk_sts::types::Tag::builder()
                .key(k)
                .value(v)
                .build()
                .map_err(CredentialsError::invalid_configuration)?;
            req = req.tags(tag);
        }
        for k in &self.transitive {
            req = req.transitive_tag_keys(k);
        }
        let res = req.send().await.map_err(|e| from_sdk("AssumeRole", &e));
        self.calls.record(
            PROVIDER_STS,
            "AssumeRole",
            res.as_ref().err().map(|e| e.kind),
        );
        match res {
            Ok(out) => sts_credentials(out.credentials(), "esr-assume-role"),
            Err(err) => Err(CredentialsError::provider_error(AwsError::new(
                err.kind,
                format!("assuming role {} failed: {}", self.role_arn, err.message),
            ))),
        }
    }
}

impl ProvideCredentials for AssumeRoleProvider {
    fn provide_credentials<'a>(&'a self) -> provider::future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        provider::future::ProvideCredentials::new(self.fetch())
    }
}

/// IRSA: TokenRequest for the ServiceAccount, then sts:AssumeRoleWithWebIdentity.
struct WebIdentityProvider {
    sts: aws_sdk_sts::Client,
    kube: std::sync::Arc<dyn KubeSource>,
    namespace: String,
    service_account: String,
    role_arn: String,
    audiences: Vec<String>,
    calls: CallLog,
}

impl std::fmt::Debug for WebIdentityProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebIdentityProvider")
            .field("namespace", &self.namespace)
            .field("service_account", &self.service_account)
            .field("role_arn", &self.role_arn)
            .finish()
    }
}

impl WebIdentityProvider {
    async fn fetch(&self) -> provider::Result {
        let token = self
            .kube
            .service_account_token(&self.namespace, &self.service_account, &self.audiences)
            .await
            .map_err(|e| {
                CredentialsError::provider_error(AwsError::new(
                    e.kind,
                    format!(
                        "cannot get a token for service account {}/{}: {}",
                        self.namespace, self.service_account, e.message
                    ),
                ))
            })?;
        let res = self
            .sts
            .assume_role_with_web_identity()
            .role_arn(&self.role_arn)
            .role_session_name(WEB_IDENTITY_SESSION_NAME)
            .web_identity_token(token)
            .send()
            .await
            .map_err(|e| from_sdk("AssumeRoleWithWebIdentity", &e));
        self.calls.record(
            PROVIDER_STS,
            "AssumeRoleWithWebIdentity",
            res.as_ref().err().map(|e| e.kind),
        );
        match res {
            Ok(out) => sts_credentials(out.credentials(), "esr-web-identity"),
            Err(err) => Err(CredentialsError::provider_error(AwsError::new(
                err.kind,
                format!(
                    "assuming role {} with web identity failed: {}",
                    self.role_arn, err.message
                ),
            ))),
        }
    }
}

impl ProvideCredentials for WebIdentityProvider {
    fn provide_credentials<'a>(&'a self) -> provider::future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        provider::future::ProvideCredentials::new(self.fetch())
    }
}
