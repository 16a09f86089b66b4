//! The `kubernetes` provider (ESO `providers/v1/kubernetes`): Secrets of a namespace
//! (`remoteNamespace`, default `default`) of the same or a remote cluster.
//!
//! Connection:
//! - `authRef`: a kubeconfig in a Secret (ESO: `clientcmd.RESTConfigFromKubeConfig`);
//! - otherwise `auth` (exactly one of `token.bearerToken`, `serviceAccount` (TokenRequest, 1 h),
//!   `cert {clientCert, clientKey}`) against `server.url` with `server.caBundle`/`caProvider`.
//!
//! Same cluster: when `server.url` is empty or the in-cluster default (`kubernetes.default`,
//! `kubernetes.default.svc[.cluster.local]`, with or without `https://` and `:443`), esr talks to
//! the controller's own API server through [`KubeAccess::with_credentials`]: the controller's
//! endpoint and CA trust, but **the store's credentials**. ESO always builds a client from the
//! store's auth (it reaches `kubernetes.default` through cluster DNS); esr does the same with the
//! identity, which keeps RBAC exactly as in ESO (a store never gets the controller's privileges),
//! and it also works when the controller runs outside the cluster (testkit, `make demo`). Offline
//! (`esr render` with a static [`KubeAccess`]) the Secrets come from the manifests and credentials
//! are not checked.
//!
//! Reading (as ESO): GetSecret without property → JSON of all keys (string values), with
//! `metadataPolicy: Fetch` → `{"annotations":…,"labels":…}`; a property is first a literal data key,
//! else `<key>.<gjson path>`; a missing Secret is the API's `secrets "x" not found` (NOT
//! `NoSecretErr`), GetSecretMap maps it to `NoSecretErr`. find: `tags` → label selector, or
//! `name.regexp`; each result is `name → JSON(data)`.
//!
//! Writing (as ESO): PushSecret creates or updates a Secret (whole Secret without property, one key
//! with property), metadata `PushSecretMetadata {labels, annotations, sourceMergePolicy,
//! targetMergePolicy, remoteNamespace}` (remoteNamespace only for ClusterSecretStore). Like ESO, it
//! does not check a managed-by label before updating an existing Secret. DeleteSecret removes the
//! key (or the Secret when it is the last key / no property).
//!
//! Differences from ESO (supersets): `SecretExists` is implemented (ESO: "not implemented"); a
//! validation that fails with 401/403 reports an error instead of `Unknown`.

mod client;

use std::sync::Arc;

use async_trait::async_trait;
use esr_api::providers::kubernetes::{KubernetesAuth, KubernetesProvider as KubernetesSpec};
use esr_provider::kube_access::{KubeCredentials, config_with_credentials};
use esr_provider::refs::{
    CaProviderRef, SecretKeyRef, fetch_ca_cert, resolve_namespace, resolve_secret_key_ref,
    validate_referent_service_account_selector, validate_secret_selector,
};
use esr_provider::{
    Capabilities, ClientContext, KubeAccess, KubeClientAccess, Provider, ProviderError, Result,
    SecretsClient, StoreInfo, StoreKind,
};

pub use client::KubernetesClient;

/// The `spec.provider` key.
pub const NAME: &str = "kubernetes";
/// Provider label in `externalsecret_provider_api_calls_count` (ESO `constants.ProviderKubernetes`).
pub const METRIC_PROVIDER: &str = "Kubernetes";
/// ESO's admission warning when no CA is configured.
pub const WARN_NO_CA_CONFIGURED: &str =
    "No caBundle or caProvider specified; TLS connections will use system certificate roots.";
/// Default `server.url` (CRD default).
pub const DEFAULT_SERVER_URL: &str = "kubernetes.default";
/// Default `remoteNamespace` (CRD default).
pub const DEFAULT_REMOTE_NAMESPACE: &str = "default";
/// Lifetime of ServiceAccount tokens requested for `auth.serviceAccount` (ESO: 3600 s).
pub const SERVICE_ACCOUNT_TOKEN_SECONDS: i64 = 3600;

/// ESO's error when more than one inline auth method is set.
pub const ERR_MULTIPLE_AUTH: &str =
    "multiple auth methods provided: set exactly one of Token, ServiceAccount, or Cert";
/// ESO's error when `authRef` and inline `auth` are both set.
pub const ERR_AUTHREF_WITH_INLINE: &str = "authRef and inline auth cannot both be set";

/// The kubernetes provider.
#[derive(Clone, Copy, Debug, Default)]
pub struct KubernetesProvider;

impl KubernetesProvider {
    /// The provider.
    pub fn new() -> Self {
        KubernetesProvider
    }
}

/// ESO `IsReferentKubernetesAuth`: any credential selector without namespace.
pub fn is_referent_auth(auth: Option<&KubernetesAuth>) -> bool {
    let Some(auth) = auth else {
        return false;
    };
    if let Some(c) = &auth.cert
        && (c.client_cert.namespace.is_none() || c.client_key.namespace.is_none())
    {
        return true;
    }
    if let Some(sa) = &auth.service_account
        && sa.namespace.is_none()
    {
        return true;
    }
    if let Some(t) = &auth.token
        && t.bearer_token.namespace.is_none()
    {
        return true;
    }
    false
}

/// True when `server.url` designates the cluster the controller runs in (see the crate docs).
pub fn is_same_cluster_url(url: Option<&str>) -> bool {
    let Some(url) = url.map(str::trim).filter(|u| !u.is_empty()) else {
        return true;
    };
    let host = url.strip_prefix("https://").unwrap_or(url);
    let host = host.trim_end_matches('/');
    let host = host.strip_suffix(":443").unwrap_or(host);
    matches!(
        host,
        "kubernetes.default" | "kubernetes.default.svc" | "kubernetes.default.svc.cluster.local"
    )
}

fn spec_of(store: &StoreInfo) -> Result<KubernetesSpec> {
    store
        .provider_spec::<KubernetesSpec>(NAME)
        .map_err(|e| e.with_message("no store type or wrong store type"))
}

#[async_trait]
impl Provider for KubernetesProvider {
    fn name(&self) -> &'static str {
        NAME
    }

    fn metric_provider(&self) -> &'static str {
        METRIC_PROVIDER
    }

    fn capabilities(&self, _store: &StoreInfo) -> Capabilities {
        Capabilities::ReadWrite
    }

    fn validate_store(&self, store: &StoreInfo) -> Result<Vec<String>> {
        let spec = spec_of(store)?;
        let server = spec.server.clone().unwrap_or_default();
        let mut warnings = Vec::new();
        if spec.auth_ref.is_none() && server.ca_bundle.is_none() && server.ca_provider.is_none() {
            warnings.push(WARN_NO_CA_CONFIGURED.to_string());
        }
        if let Some(cp) = &server.ca_provider {
            if store.kind.is_cluster() && cp.namespace.is_none() {
                return Err(ProviderError::invalid(
                    "CAProvider.namespace must not be empty with ClusterSecretStore",
                ));
            }
            if !store.kind.is_cluster() && cp.namespace.is_some() {
                return Err(ProviderError::invalid(
                    "CAProvider.namespace must be empty with SecretStore",
                ));
            }
        }
        if let Some(auth) = &spec.auth {
            if let Some(cert) = &auth.cert {
                if cert.client_cert.name.as_deref().unwrap_or("").is_empty() {
                    return Err(ProviderError::invalid("ClientCert.Name cannot be empty"));
                }
                if cert.client_cert.key.as_deref().unwrap_or("").is_empty() {
                    return Err(ProviderError::invalid("ClientCert.Key cannot be empty"));
                }
                validate_secret_selector(store, cert.client_cert.namespace.as_deref())?;
            }
            if let Some(token) = &auth.token {
                if token.bearer_token.name.as_deref().unwrap_or("").is_empty() {
                    return Err(ProviderError::invalid("BearerToken.Name cannot be empty"));
                }
                if token.bearer_token.key.as_deref().unwrap_or("").is_empty() {
                    return Err(ProviderError::invalid("BearerToken.Key cannot be empty"));
                }
                validate_secret_selector(store, token.bearer_token.namespace.as_deref())?;
            }
            if let Some(sa) = &auth.service_account {
                validate_referent_service_account_selector(store, sa.namespace.as_deref())?;
            }
        }
        Ok(warnings)
    }

    async fn new_client(&self, ctx: &ClientContext<'_>) -> Result<Arc<dyn SecretsClient>> {
        let spec = spec_of(ctx.store)?;
        let remote_namespace = spec
            .remote_namespace
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| DEFAULT_REMOTE_NAMESPACE.to_string());
        let referent = ctx.store.kind == StoreKind::ClusterSecretStore
            && spec.auth_ref.is_none()
            && is_referent_auth(spec.auth.as_ref());
        // The store controller validates a referent ClusterSecretStore without an ExternalSecret
        // namespace: the credentials cannot be resolved yet (ESO returns a client whose Validate
        // says Unknown).
        if referent && ctx.is_store_validation() {
            return Ok(Arc::new(KubernetesClient::new(
                None,
                remote_namespace,
                ctx.store.kind,
                true,
                ctx.recorder.clone(),
            )));
        }
        let kube = connect(ctx, &spec)
            .await
            .map_err(|e| e.wrap("failed to prepare auth"))?;
        Ok(Arc::new(KubernetesClient::new(
            Some(kube),
            remote_namespace,
            ctx.store.kind,
            referent,
            ctx.recorder.clone(),
        )))
    }
}

/// Builds the user-scoped Kubernetes access of a store (ESO `getAuth`).
async fn connect(ctx: &ClientContext<'_>, spec: &KubernetesSpec) -> Result<Arc<dyn KubeAccess>> {
    if let Some(auth_ref) = &spec.auth_ref {
        if spec.auth.is_some() {
            return Err(ProviderError::invalid(ERR_AUTHREF_WITH_INLINE));
        }
        let kubeconfig = resolve_secret_key_ref(ctx, &SecretKeyRef::from(auth_ref)).await?;
        return Ok(Arc::new(from_kubeconfig(&kubeconfig).await?));
    }
    let auth = spec
        .auth
        .as_ref()
        .ok_or_else(|| ProviderError::invalid("no auth provider given"))?;
    let methods = [
        auth.token.is_some(),
        auth.service_account.is_some(),
        auth.cert.is_some(),
    ];
    match methods.iter().filter(|m| **m).count() {
        0 => return Err(ProviderError::invalid("no auth provider given")),
        1 => {}
        _ => return Err(ProviderError::invalid(ERR_MULTIPLE_AUTH)),
    }
    let server = spec.server.clone().unwrap_or_default();
    let same_cluster = is_same_cluster_url(server.url.as_deref());
    if same_cluster && ctx.kube.is_offline() {
        // Offline: the Secrets come from the manifests; identities are not checked.
        return Ok(ctx.kube.clone());
    }
    let ca = if same_cluster {
        None
    } else {
        let ca_provider = server.ca_provider.as_ref().map(CaProviderRef::from);
        fetch_ca_cert(
            ctx,
            server.ca_bundle.as_deref().map(str::as_bytes),
            ca_provider.as_ref(),
        )
        .await?
    };
    let credentials = credentials(ctx, auth).await?;
    if same_cluster {
        return ctx.kube.with_credentials(&credentials).await;
    }
    let url = server.url.as_deref().unwrap_or(DEFAULT_SERVER_URL);
    Ok(Arc::new(remote_access(url, ca.as_deref(), &credentials)?))
}

/// Resolves the store's inline credentials (ESO `applyInlineAuth`).
async fn credentials(ctx: &ClientContext<'_>, auth: &KubernetesAuth) -> Result<KubeCredentials> {
    if let Some(token) = &auth.token {
        let v = resolve_secret_key_ref(ctx, &SecretKeyRef::from(&token.bearer_token))
            .await
            .map_err(|e| e.wrap("could not fetch Auth.Token.BearerToken"))?;
        return Ok(KubeCredentials::Token(
            String::from_utf8_lossy(&v).into_owned(),
        ));
    }
    if let Some(sa) = &auth.service_account {
        let wrap = |e: ProviderError| {
            let msg = format!(
                "could not fetch Auth.ServiceAccount: cannot create service account token: {:?}",
                e.to_string()
            );
            e.with_message(msg)
        };
        let ns = resolve_namespace(
            ctx.store,
            ctx.namespace,
            sa.namespace.as_deref(),
            &format!("service account {:?}", sa.name),
        )
        .map_err(wrap)?;
        let audiences = sa.audiences.clone().unwrap_or_default();
        let token = ctx
            .kube
            .create_service_account_token(
                &ns,
                &sa.name,
                &audiences,
                Some(SERVICE_ACCOUNT_TOKEN_SECONDS),
            )
            .await
            .map_err(wrap)?;
        return Ok(KubeCredentials::Token(token));
    }
    if let Some(cert) = &auth.cert {
        let wrap = "could not fetch client key and cert";
        let cert_pem = resolve_secret_key_ref(ctx, &SecretKeyRef::from(&cert.client_cert))
            .await
            .map_err(|e| e.wrap("unable to fetch client certificate").wrap(wrap))?;
        let key_pem = resolve_secret_key_ref(ctx, &SecretKeyRef::from(&cert.client_key))
            .await
            .map_err(|e| e.wrap("unable to fetch client key").wrap(wrap))?;
        return Ok(KubeCredentials::ClientCert { cert_pem, key_pem });
    }
    Err(ProviderError::invalid("no auth provider given"))
}

/// A client for a remote API server.
pub fn remote_access(
    url: &str,
    ca_pem: Option<&[u8]>,
    credentials: &KubeCredentials,
) -> Result<KubeClientAccess> {
    let url = if url.contains("://") {
        url.to_string()
    } else {
        format!("https://{url}")
    };
    let uri = url
        .parse()
        .map_err(|e| ProviderError::invalid(format!("invalid server URL {url:?}: {e}")))?;
    let mut config = kube::Config::new(uri);
    if let Some(pem) = ca_pem {
        let certs = pem::parse_many(pem)
            .map_err(|e| ProviderError::invalid(format!("failed to parse CA bundle: {e}")))?;
        config.root_cert = Some(certs.into_iter().map(|p| p.into_contents()).collect());
    }
    KubeClientAccess::from_config(config_with_credentials(&config, credentials))
}

/// A client from a kubeconfig (`authRef`).
pub async fn from_kubeconfig(kubeconfig: &[u8]) -> Result<KubeClientAccess> {
    let text = std::str::from_utf8(kubeconfig)
        .map_err(|_| ProviderError::invalid("kubeconfig is not valid UTF-8"))?;
    // The parser's message may quote parts of the document (credentials): do not pass it on.
    let kc = kube::config::Kubeconfig::from_yaml(text).map_err(|_| {
        ProviderError::invalid("invalid kubeconfig: cannot parse the YAML document")
    })?;
    let config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .map_err(|e| ProviderError::invalid(format!("invalid kubeconfig: {e}")))?;
    KubeClientAccess::from_config(config)
}

#[cfg(test)]
mod tests;
