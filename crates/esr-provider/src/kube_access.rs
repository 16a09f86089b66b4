//! The Kubernetes IO providers need: reading credential Secrets / ConfigMaps / ServiceAccounts,
//! TokenRequests, and Secret writes for the kubernetes provider.
//!
//! Two implementations:
//! - [`KubeClientAccess`] over a `kube::Client` (the controller; also used by the kubernetes
//!   provider for remote clusters);
//! - [`StaticKubeAccess`], in memory, from a list of objects (`esr render` offline, and tests).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
    SelfSubjectRulesReview, SelfSubjectRulesReviewSpec,
};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use kube::api::{Api, DeleteParams, ListParams, PostParams};

use crate::error::{ErrorKind, ProviderError, Result, from_kube_error, kube_status_code};

/// Credentials to talk to the controller's own cluster as another identity (the kubernetes
/// provider's store auth).
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum KubeCredentials {
    /// A bearer token.
    Token(String),
    /// A client certificate and key (PEM).
    ClientCert {
        /// PEM certificate.
        cert_pem: Vec<u8>,
        /// PEM private key.
        key_pem: Vec<u8>,
    },
}

impl fmt::Debug for KubeCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KubeCredentials::Token(_) => f.write_str("Token(<redacted>)"),
            KubeCredentials::ClientCert { .. } => f.write_str("ClientCert(<redacted>)"),
        }
    }
}

/// The Kubernetes operations providers need. All methods return provider errors whose messages are
/// the API server's (e.g. `secrets "x" not found`), never secret values.
#[async_trait]
pub trait KubeAccess: Send + Sync {
    /// GET a Secret; `Ok(None)` when it does not exist.
    async fn get_secret(&self, namespace: &str, name: &str) -> Result<Option<Secret>>;

    /// LIST Secrets in a namespace, optionally with a label selector (`a=b,c=d`).
    async fn list_secrets(
        &self,
        namespace: &str,
        label_selector: Option<&str>,
    ) -> Result<Vec<Secret>>;

    /// GET a ConfigMap; `Ok(None)` when it does not exist.
    async fn get_config_map(&self, namespace: &str, name: &str) -> Result<Option<ConfigMap>>;

    /// GET a ServiceAccount; `Ok(None)` when it does not exist.
    async fn get_service_account(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ServiceAccount>>;

    /// TokenRequest for a ServiceAccount; returns the token.
    async fn create_service_account_token(
        &self,
        namespace: &str,
        name: &str,
        audiences: &[String],
        expiration_seconds: Option<i64>,
    ) -> Result<String>;

    /// CREATE a Secret (namespace taken from its metadata).
    async fn create_secret(&self, secret: &Secret) -> Result<Secret>;

    /// UPDATE (replace) a Secret; its `resourceVersion` guards against lost updates.
    async fn update_secret(&self, secret: &Secret) -> Result<Secret>;

    /// DELETE a Secret; `Ok(false)` when it did not exist.
    async fn delete_secret(&self, namespace: &str, name: &str) -> Result<bool>;

    /// Whether the current identity may `get` Secrets in `namespace` (SelfSubjectRulesReview, then
    /// SelfSubjectAccessReview, as ESO's kubernetes provider validates; where the review APIs are
    /// not served, a GET of a probe name: 404 or 200 = allowed, 403 = denied).
    async fn can_get_secrets(&self, namespace: &str) -> Result<bool>;

    /// The same cluster, as another identity. Offline implementations return themselves.
    async fn with_credentials(&self, credentials: &KubeCredentials) -> Result<Arc<dyn KubeAccess>>;

    /// True for offline implementations (no API server; identities are not checked).
    fn is_offline(&self) -> bool {
        false
    }

    /// One key of a Secret. Errors (kind Invalid) with ESO's texts:
    /// `cannot get Kubernetes secret "N" from namespace "NS": secrets "N" not found` and
    /// `cannot find secret data for key: "K"`.
    async fn get_secret_key(&self, namespace: &str, name: &str, key: &str) -> Result<Vec<u8>> {
        let secret = self.get_secret(namespace, name).await.map_err(|e| {
            e.wrap(format_args!(
                "cannot get Kubernetes secret {name:?} from namespace {namespace:?}"
            ))
        })?;
        let secret = secret.ok_or_else(|| {
            ProviderError::invalid(format!(
                "cannot get Kubernetes secret {name:?} from namespace {namespace:?}: secrets {name:?} not found"
            ))
        })?;
        secret
            .data
            .as_ref()
            .and_then(|d| d.get(key))
            .map(|v| v.0.clone())
            .ok_or_else(|| {
                ProviderError::invalid(format!("cannot find secret data for key: {key:?}"))
            })
    }

    /// One key of a ConfigMap (`data`, then `binaryData`).
    async fn get_config_map_key(&self, namespace: &str, name: &str, key: &str) -> Result<Vec<u8>> {
        let cm = self.get_config_map(namespace, name).await.map_err(|e| {
            e.wrap(format_args!(
                "cannot get Kubernetes configmap {name:?} from namespace {namespace:?}"
            ))
        })?;
        let cm = cm.ok_or_else(|| {
            ProviderError::invalid(format!(
                "cannot get Kubernetes configmap {name:?} from namespace {namespace:?}: configmaps {name:?} not found"
            ))
        })?;
        if let Some(v) = cm.data.as_ref().and_then(|d| d.get(key)) {
            return Ok(v.clone().into_bytes());
        }
        if let Some(v) = cm.binary_data.as_ref().and_then(|d| d.get(key)) {
            return Ok(v.0.clone());
        }
        Err(ProviderError::invalid(format!(
            "cannot find configmap data for key: {key:?}"
        )))
    }
}

/// [`KubeAccess`] over a `kube::Client`.
///
/// Clones share two caches, so that a provider building a client on every reconcile does not cost
/// an API call and a TLS handshake each time:
/// - ServiceAccount tokens are reused for half of their lifetime, at most 10 minutes (so a
///   recreated ServiceAccount is picked up quickly);
/// - [`KubeAccess::with_credentials`] reuses the client of identical credentials for up to 15 min.
#[derive(Clone)]
pub struct KubeClientAccess {
    client: kube::Client,
    config: Option<kube::Config>,
    caches: Arc<Caches>,
}

type TokenKey = (String, String, Vec<String>, Option<i64>);

/// Secret name used to probe read access when the access-review APIs are not served.
const ACCESS_PROBE_NAME: &str = "esr-access-probe";

/// Upper bound of cached identities / tokens (beyond it, the cache is cleared).
const CACHE_LIMIT: usize = 1024;
/// How long a client for a given set of credentials is reused.
const IDENTITY_TTL: std::time::Duration = std::time::Duration::from_secs(15 * 60);
/// Longest reuse of a requested ServiceAccount token.
const MAX_TOKEN_REUSE: std::time::Duration = std::time::Duration::from_secs(10 * 60);
/// Lifetime assumed for tokens requested without an expiration.
const DEFAULT_TOKEN_LIFETIME: i64 = 3600;

#[derive(Default)]
struct Caches {
    tokens: std::sync::Mutex<std::collections::HashMap<TokenKey, (String, std::time::Instant)>>,
    identities: std::sync::Mutex<
        std::collections::HashMap<KubeCredentials, (Arc<KubeClientAccess>, std::time::Instant)>,
    >,
}

impl fmt::Debug for KubeClientAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KubeClientAccess")
            .field(
                "cluster_url",
                &self.config.as_ref().map(|c| c.cluster_url.to_string()),
            )
            .finish()
    }
}

impl KubeClientAccess {
    /// Wraps a client. Without the config, [`KubeAccess::with_credentials`] is unavailable.
    pub fn new(client: kube::Client) -> Self {
        KubeClientAccess {
            client,
            config: None,
            caches: Arc::default(),
        }
    }

    /// Wraps a client together with the config it was built from (enables `with_credentials`).
    pub fn with_config(client: kube::Client, config: kube::Config) -> Self {
        KubeClientAccess {
            client,
            config: Some(config),
            caches: Arc::default(),
        }
    }

    /// Builds a client from a config.
    pub fn from_config(config: kube::Config) -> Result<Self> {
        let client = kube::Client::try_from(config.clone()).map_err(|e| {
            ProviderError::invalid(format!("error configuring kubernetes client: {e}"))
        })?;
        Ok(Self::with_config(client, config))
    }

    /// The underlying client.
    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    /// The config, when known.
    pub fn config(&self) -> Option<&kube::Config> {
        self.config.as_ref()
    }
}

fn not_found_to_none<T>(r: std::result::Result<T, kube::Error>) -> Result<Option<T>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if kube_status_code(&e) == Some(404) => Ok(None),
        Err(e) => Err(from_kube_error(e)),
    }
}

#[async_trait]
impl KubeAccess for KubeClientAccess {
    async fn get_secret(&self, namespace: &str, name: &str) -> Result<Option<Secret>> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        not_found_to_none(api.get(name).await)
    }

    async fn list_secrets(
        &self,
        namespace: &str,
        label_selector: Option<&str>,
    ) -> Result<Vec<Secret>> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        let mut lp = ListParams::default();
        if let Some(sel) = label_selector.filter(|s| !s.is_empty()) {
            lp = lp.labels(sel);
        }
        let list = api.list(&lp).await.map_err(from_kube_error)?;
        Ok(list.items)
    }

    async fn get_config_map(&self, namespace: &str, name: &str) -> Result<Option<ConfigMap>> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), namespace);
        not_found_to_none(api.get(name).await)
    }

    async fn get_service_account(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ServiceAccount>> {
        let api: Api<ServiceAccount> = Api::namespaced(self.client.clone(), namespace);
        not_found_to_none(api.get(name).await)
    }

    async fn create_service_account_token(
        &self,
        namespace: &str,
        name: &str,
        audiences: &[String],
        expiration_seconds: Option<i64>,
    ) -> Result<String> {
        let key: TokenKey = (
            namespace.to_string(),
            name.to_string(),
            audiences.to_vec(),
            expiration_seconds,
        );
        let lifetime = expiration_seconds.unwrap_or(DEFAULT_TOKEN_LIFETIME).max(0);
        let reuse_for = std::time::Duration::from_secs(u64::try_from(lifetime / 2).unwrap_or(0))
            .min(MAX_TOKEN_REUSE);
        if let Ok(tokens) = self.caches.tokens.lock()
            && let Some((token, at)) = tokens.get(&key)
            && at.elapsed() < reuse_for
        {
            return Ok(token.clone());
        }
        let api: Api<ServiceAccount> = Api::namespaced(self.client.clone(), namespace);
        let req = TokenRequest {
            spec: TokenRequestSpec {
                audiences: audiences.to_vec(),
                expiration_seconds,
                ..Default::default()
            },
            ..Default::default()
        };
        let resp = api
            .create_token_request(name, &PostParams::default(), &req)
            .await
            .map_err(from_kube_error)?;
        let token = resp
            .status
            .map(|s| s.token)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| ProviderError::transient("TokenRequest returned no token"))?;
        if let Ok(mut tokens) = self.caches.tokens.lock() {
            if tokens.len() >= CACHE_LIMIT {
                tokens.clear();
            }
            tokens.insert(key, (token.clone(), std::time::Instant::now()));
        }
        Ok(token)
    }

    async fn create_secret(&self, secret: &Secret) -> Result<Secret> {
        let ns = secret.metadata.namespace.as_deref().unwrap_or("default");
        let api: Api<Secret> = Api::namespaced(self.client.clone(), ns);
        api.create(&PostParams::default(), secret)
            .await
            .map_err(from_kube_error)
    }

    async fn update_secret(&self, secret: &Secret) -> Result<Secret> {
        let ns = secret.metadata.namespace.as_deref().unwrap_or("default");
        let name = secret.metadata.name.as_deref().unwrap_or_default();
        let api: Api<Secret> = Api::namespaced(self.client.clone(), ns);
        api.replace(name, &PostParams::default(), secret)
            .await
            .map_err(from_kube_error)
    }

    async fn delete_secret(&self, namespace: &str, name: &str) -> Result<bool> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(true),
            Err(e) if kube_status_code(&e) == Some(404) => Ok(false),
            Err(e) => Err(from_kube_error(e)),
        }
    }

    async fn can_get_secrets(&self, namespace: &str) -> Result<bool> {
        let rules: Api<SelfSubjectRulesReview> = Api::all(self.client.clone());
        let review = SelfSubjectRulesReview {
            spec: SelfSubjectRulesReviewSpec {
                namespace: Some(namespace.to_string()),
            },
            ..Default::default()
        };
        let resp = match rules.create(&PostParams::default(), &review).await {
            Ok(r) => r,
            // The review APIs are not served (a minimal API server): probe with a GET instead; a
            // 404 for the probe name means the identity may read Secrets there.
            Err(e) if kube_status_code(&e) == Some(404) => {
                let api: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
                return match api.get(ACCESS_PROBE_NAME).await {
                    Ok(_) => Ok(true),
                    Err(e) if kube_status_code(&e) == Some(404) => Ok(true),
                    Err(e) if kube_status_code(&e) == Some(403) => Ok(false),
                    Err(e) => Err(from_kube_error(e)),
                };
            }
            Err(e) => return Err(from_kube_error(e)),
        };
        let has = |v: &Vec<String>, s: &str| v.iter().any(|x| x == s);
        if let Some(status) = resp.status {
            for rule in &status.resource_rules {
                let resources = rule.resources.clone().unwrap_or_default();
                let groups = rule.api_groups.clone().unwrap_or_default();
                if (has(&resources, "secrets") || has(&resources, "*"))
                    && (has(&rule.verbs, "get") || has(&rule.verbs, "*"))
                    && (groups.is_empty() || has(&groups, "") || has(&groups, "*"))
                {
                    return Ok(true);
                }
            }
        }
        let access: Api<SelfSubjectAccessReview> = Api::all(self.client.clone());
        let review = SelfSubjectAccessReview {
            spec: SelfSubjectAccessReviewSpec {
                resource_attributes: Some(ResourceAttributes {
                    resource: Some("secrets".to_string()),
                    namespace: Some(namespace.to_string()),
                    verb: Some("get".to_string()),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let resp = access
            .create(&PostParams::default(), &review)
            .await
            .map_err(from_kube_error)?;
        Ok(resp.status.map(|s| s.allowed).unwrap_or(false))
    }

    async fn with_credentials(&self, credentials: &KubeCredentials) -> Result<Arc<dyn KubeAccess>> {
        let base = self.config.as_ref().ok_or_else(|| {
            ProviderError::unsupported(
                "the controller's cluster connection details are unknown; set server.url",
            )
        })?;
        if let Ok(ids) = self.caches.identities.lock()
            && let Some((access, at)) = ids.get(credentials)
            && at.elapsed() < IDENTITY_TTL
        {
            return Ok(access.clone());
        }
        let config = config_with_credentials(base, credentials);
        let access = Arc::new(KubeClientAccess::from_config(config)?);
        if let Ok(mut ids) = self.caches.identities.lock() {
            ids.retain(|_, (_, at)| at.elapsed() < IDENTITY_TTL);
            if ids.len() >= CACHE_LIMIT {
                ids.clear();
            }
            ids.insert(
                credentials.clone(),
                (access.clone(), std::time::Instant::now()),
            );
        }
        Ok(access)
    }
}

/// A copy of `base` (same server, same CA trust) authenticating with `credentials` instead.
pub fn config_with_credentials(base: &kube::Config, credentials: &KubeCredentials) -> kube::Config {
    use base64::Engine as _;
    let mut config = base.clone();
    let mut auth = kube::config::AuthInfo::default();
    match credentials {
        KubeCredentials::Token(t) => {
            auth.token = Some(secrecy::SecretString::from(t.clone()));
        }
        KubeCredentials::ClientCert { cert_pem, key_pem } => {
            let b64 = base64::engine::general_purpose::STANDARD;
            auth.client_certificate_data = Some(b64.encode(cert_pem));
            auth.client_key_data = Some(secrecy::SecretString::from(b64.encode(key_pem)));
        }
    }
    config.auth_info = auth;
    config
}

/// In-memory [`KubeAccess`]: `esr render` uses it with the Secrets / ConfigMaps / ServiceAccounts
/// from the manifest files; tests use it too. Writes are kept in memory. TokenRequests succeed only
/// for tokens registered with [`StaticKubeAccess::add_token`].
#[derive(Default)]
pub struct StaticKubeAccess {
    secrets: RwLock<BTreeMap<(String, String), Secret>>,
    config_maps: RwLock<BTreeMap<(String, String), ConfigMap>>,
    service_accounts: RwLock<BTreeMap<(String, String), ServiceAccount>>,
    tokens: RwLock<BTreeMap<(String, String), String>>,
    denied_namespaces: RwLock<Vec<String>>,
    resource_version: std::sync::atomic::AtomicU64,
}

impl fmt::Debug for StaticKubeAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.secrets.read().map(|s| s.len()).unwrap_or(0);
        f.debug_struct("StaticKubeAccess")
            .field("secrets", &n)
            .finish()
    }
}

fn key_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> (String, String) {
    (
        meta.namespace
            .clone()
            .unwrap_or_else(|| "default".to_string()),
        meta.name.clone().unwrap_or_default(),
    )
}

fn poisoned() -> ProviderError {
    ProviderError::transient("internal lock poisoned")
}

fn api_not_found(resource: &str, name: &str) -> ProviderError {
    ProviderError::invalid(format!("{resource} {name:?} not found"))
}

impl StaticKubeAccess {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) a Secret. A missing namespace means `default`; `stringData` is merged
    /// into `data` as the API server would do.
    pub fn add_secret(&self, mut secret: Secret) {
        if let Some(sd) = secret.string_data.take() {
            let data = secret.data.get_or_insert_with(BTreeMap::new);
            for (k, v) in sd {
                data.insert(k, k8s_openapi::ByteString(v.into_bytes()));
            }
        }
        let key = key_of(&secret.metadata);
        secret.metadata.namespace = Some(key.0.clone());
        if let Ok(mut s) = self.secrets.write() {
            s.insert(key, secret);
        }
    }

    /// Adds (or replaces) a ConfigMap.
    pub fn add_config_map(&self, mut cm: ConfigMap) {
        let key = key_of(&cm.metadata);
        cm.metadata.namespace = Some(key.0.clone());
        if let Ok(mut s) = self.config_maps.write() {
            s.insert(key, cm);
        }
    }

    /// Adds (or replaces) a ServiceAccount.
    pub fn add_service_account(&self, mut sa: ServiceAccount) {
        let key = key_of(&sa.metadata);
        sa.metadata.namespace = Some(key.0.clone());
        if let Ok(mut s) = self.service_accounts.write() {
            s.insert(key, sa);
        }
    }

    /// Registers the token a TokenRequest for `namespace/name` returns.
    pub fn add_token(&self, namespace: &str, name: &str, token: &str) {
        if let Ok(mut t) = self.tokens.write() {
            t.insert((namespace.to_string(), name.to_string()), token.to_string());
        }
    }

    /// Makes [`KubeAccess::can_get_secrets`] answer false for `namespace` (tests).
    pub fn deny_namespace(&self, namespace: &str) {
        if let Ok(mut d) = self.denied_namespaces.write() {
            d.push(namespace.to_string());
        }
    }

    /// Adds every supported object (Secret, ConfigMap, ServiceAccount) found in a list of
    /// Kubernetes objects (e.g. parsed manifests); returns how many were taken.
    pub fn add_objects<'a>(
        &self,
        objects: impl IntoIterator<Item = &'a serde_json::Value>,
    ) -> usize {
        let mut n = 0;
        for obj in objects {
            let api_version = obj.get("apiVersion").and_then(|v| v.as_str()).unwrap_or("");
            if api_version != "v1" {
                continue;
            }
            match obj.get("kind").and_then(|v| v.as_str()) {
                Some("Secret") => {
                    if let Ok(s) = serde_json::from_value::<Secret>(obj.clone()) {
                        self.add_secret(s);
                        n += 1;
                    }
                }
                Some("ConfigMap") => {
                    if let Ok(c) = serde_json::from_value::<ConfigMap>(obj.clone()) {
                        self.add_config_map(c);
                        n += 1;
                    }
                }
                Some("ServiceAccount") => {
                    if let Ok(s) = serde_json::from_value::<ServiceAccount>(obj.clone()) {
                        self.add_service_account(s);
                        n += 1;
                    }
                }
                _ => {}
            }
        }
        n
    }

    /// All Secrets currently held (tests).
    pub fn secrets(&self) -> Vec<Secret> {
        self.secrets
            .read()
            .map(|s| s.values().cloned().collect())
            .unwrap_or_default()
    }

    fn next_rv(&self) -> String {
        let v = self
            .resource_version
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
            + 1;
        v.to_string()
    }
}

/// Parses a simple equality label selector (`a=b,c==d,e!=f,g,!h`) and matches labels.
pub fn simple_selector_matches(selector: &str, labels: &BTreeMap<String, String>) -> bool {
    selector
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .all(|term| {
            if let Some((k, v)) = term.split_once("!=") {
                labels.get(k.trim()).map(String::as_str) != Some(v.trim())
            } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                labels.get(k.trim()).map(String::as_str) == Some(v.trim())
            } else if let Some(k) = term.strip_prefix('!') {
                !labels.contains_key(k.trim())
            } else {
                labels.contains_key(term)
            }
        })
}

#[async_trait]
impl KubeAccess for StaticKubeAccess {
    async fn get_secret(&self, namespace: &str, name: &str) -> Result<Option<Secret>> {
        let s = self.secrets.read().map_err(|_| poisoned())?;
        Ok(s.get(&(namespace.to_string(), name.to_string())).cloned())
    }

    async fn list_secrets(
        &self,
        namespace: &str,
        label_selector: Option<&str>,
    ) -> Result<Vec<Secret>> {
        let s = self.secrets.read().map_err(|_| poisoned())?;
        let empty = BTreeMap::new();
        Ok(s.iter()
            .filter(|((ns, _), _)| ns == namespace)
            .filter(|(_, sec)| match label_selector {
                Some(sel) => {
                    simple_selector_matches(sel, sec.metadata.labels.as_ref().unwrap_or(&empty))
                }
                None => true,
            })
            .map(|(_, sec)| sec.clone())
            .collect())
    }

    async fn get_config_map(&self, namespace: &str, name: &str) -> Result<Option<ConfigMap>> {
        let s = self.config_maps.read().map_err(|_| poisoned())?;
        Ok(s.get(&(namespace.to_string(), name.to_string())).cloned())
    }

    async fn get_service_account(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ServiceAccount>> {
        let s = self.service_accounts.read().map_err(|_| poisoned())?;
        Ok(s.get(&(namespace.to_string(), name.to_string())).cloned())
    }

    async fn create_service_account_token(
        &self,
        namespace: &str,
        name: &str,
        _audiences: &[String],
        _expiration_seconds: Option<i64>,
    ) -> Result<String> {
        let t = self.tokens.read().map_err(|_| poisoned())?;
        t.get(&(namespace.to_string(), name.to_string()))
            .cloned()
            .ok_or_else(|| {
                ProviderError::unsupported(format!(
                    "cannot request a token for service account {name:?} in namespace {namespace:?}: no API server (offline)"
                ))
            })
    }

    async fn create_secret(&self, secret: &Secret) -> Result<Secret> {
        let key = key_of(&secret.metadata);
        let mut s = self.secrets.write().map_err(|_| poisoned())?;
        if s.contains_key(&key) {
            return Err(ProviderError::new(
                ErrorKind::Transient,
                format!("secrets {:?} already exists", key.1),
            ));
        }
        let mut stored = secret.clone();
        stored.metadata.namespace = Some(key.0.clone());
        stored.metadata.resource_version = Some(self.next_rv());
        s.insert(key, stored.clone());
        Ok(stored)
    }

    async fn update_secret(&self, secret: &Secret) -> Result<Secret> {
        let key = key_of(&secret.metadata);
        let mut s = self.secrets.write().map_err(|_| poisoned())?;
        let current = s
            .get(&key)
            .ok_or_else(|| api_not_found("secrets", &key.1))?;
        if let (Some(want), Some(have)) = (
            secret.metadata.resource_version.as_deref(),
            current.metadata.resource_version.as_deref(),
        ) && want != have
        {
            return Err(ProviderError::transient(format!(
                "Operation cannot be fulfilled on secrets {:?}: the object has been modified; please apply your changes to the latest version and try again",
                key.1
            )));
        }
        let mut stored = secret.clone();
        stored.metadata.namespace = Some(key.0.clone());
        stored.metadata.resource_version = Some(self.next_rv());
        s.insert(key, stored.clone());
        Ok(stored)
    }

    async fn delete_secret(&self, namespace: &str, name: &str) -> Result<bool> {
        let mut s = self.secrets.write().map_err(|_| poisoned())?;
        Ok(s.remove(&(namespace.to_string(), name.to_string()))
            .is_some())
    }

    async fn can_get_secrets(&self, namespace: &str) -> Result<bool> {
        let d = self.denied_namespaces.read().map_err(|_| poisoned())?;
        Ok(!d.iter().any(|n| n == namespace))
    }

    async fn with_credentials(
        &self,
        _credentials: &KubeCredentials,
    ) -> Result<Arc<dyn KubeAccess>> {
        Err(ProviderError::unsupported(
            "StaticKubeAccess cannot switch identities; use StaticKubeAccess through an Arc (see shared_with_credentials)",
        ))
    }

    fn is_offline(&self) -> bool {
        true
    }
}

/// `with_credentials` for an `Arc<dyn KubeAccess>`: offline implementations are returned as they are
/// (identities are not checked offline), online ones switch identity.
pub async fn shared_with_credentials(
    kube: &Arc<dyn KubeAccess>,
    credentials: &KubeCredentials,
) -> Result<Arc<dyn KubeAccess>> {
    if kube.is_offline() {
        return Ok(kube.clone());
    }
    kube.with_credentials(credentials).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn secret(ns: &str, name: &str, pairs: &[(&str, &str)]) -> Secret {
        Secret {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(ns.into()),
                ..Default::default()
            },
            data: Some(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                    .collect(),
            ),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn static_get_secret_key_with_eso_errors() {
        let k = StaticKubeAccess::new();
        k.add_secret(secret("ns", "creds", &[("token", "abc")]));
        assert_eq!(
            k.get_secret_key("ns", "creds", "token").await.ok(),
            Some(b"abc".to_vec())
        );
        let e = k
            .get_secret_key("ns", "nope", "token")
            .await
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some(
                r#"cannot get Kubernetes secret "nope" from namespace "ns": secrets "nope" not found"#
            )
        );
        let e = k.get_secret_key("ns", "creds", "other").await.err();
        assert_eq!(
            e.as_ref().map(|e| e.to_string()).as_deref(),
            Some(r#"cannot find secret data for key: "other""#)
        );
        assert_eq!(e.map(|e| e.kind()), Some(ErrorKind::Invalid));
        // Another namespace is another secret.
        assert!(k.get_secret_key("other", "creds", "token").await.is_err());
    }

    #[tokio::test]
    async fn static_string_data_and_objects() {
        let k = StaticKubeAccess::new();
        let objs = [
            serde_json::json!({"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"a"},"stringData":{"k":"v"}}),
            serde_json::json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"ca":"PEM"}}),
            serde_json::json!({"apiVersion":"external-secrets.io/v1","kind":"SecretStore","metadata":{"name":"x"}}),
        ];
        assert_eq!(k.add_objects(objs.iter()), 2);
        assert_eq!(
            k.get_secret_key("a", "s", "k").await.ok(),
            Some(b"v".to_vec())
        );
        assert_eq!(
            k.get_config_map_key("default", "c", "ca").await.ok(),
            Some(b"PEM".to_vec())
        );
        assert!(k.get_config_map_key("default", "c", "zz").await.is_err());
    }

    #[tokio::test]
    async fn static_writes_and_selectors() {
        let k = StaticKubeAccess::new();
        let mut s = secret("ns", "a", &[("x", "1")]);
        s.metadata.labels = Some(BTreeMap::from([("team".to_string(), "x".to_string())]));
        let created = k.create_secret(&s).await.unwrap_or_else(|e| panic!("{e}"));
        assert!(k.create_secret(&s).await.is_err());
        assert_eq!(
            k.list_secrets("ns", Some("team=x"))
                .await
                .map(|v| v.len())
                .ok(),
            Some(1)
        );
        assert_eq!(
            k.list_secrets("ns", Some("team=y"))
                .await
                .map(|v| v.len())
                .ok(),
            Some(0)
        );
        assert_eq!(
            k.list_secrets("ns", None).await.map(|v| v.len()).ok(),
            Some(1)
        );
        let mut stale = created.clone();
        stale.metadata.resource_version = Some("0".into());
        assert!(k.update_secret(&stale).await.is_err());
        assert!(k.update_secret(&created).await.is_ok());
        assert_eq!(k.delete_secret("ns", "a").await.ok(), Some(true));
        assert_eq!(k.delete_secret("ns", "a").await.ok(), Some(false));
    }

    #[tokio::test]
    async fn static_tokens_and_access() {
        let k: Arc<dyn KubeAccess> = Arc::new(StaticKubeAccess::new());
        assert!(
            k.create_service_account_token("ns", "sa", &[], None)
                .await
                .is_err()
        );
        let s = StaticKubeAccess::new();
        s.add_token("ns", "sa", "tok");
        s.deny_namespace("secret-ns");
        assert_eq!(
            s.create_service_account_token("ns", "sa", &[], Some(600))
                .await
                .ok()
                .as_deref(),
            Some("tok")
        );
        assert_eq!(s.can_get_secrets("secret-ns").await.ok(), Some(false));
        assert_eq!(s.can_get_secrets("other").await.ok(), Some(true));
        let same = shared_with_credentials(&k, &KubeCredentials::Token("t".into())).await;
        assert!(same.is_ok());
        assert_eq!(
            format!("{:?}", KubeCredentials::Token("secret".into())),
            "Token(<redacted>)"
        );
    }

    #[test]
    fn selector_matching() {
        let labels = BTreeMap::from([
            ("a".to_string(), "1".to_string()),
            ("b".to_string(), "2".to_string()),
        ]);
        assert!(simple_selector_matches("a=1,b==2", &labels));
        assert!(simple_selector_matches("a", &labels));
        assert!(simple_selector_matches("!c", &labels));
        assert!(simple_selector_matches("a!=2", &labels));
        assert!(!simple_selector_matches("a=2", &labels));
        assert!(!simple_selector_matches("!a", &labels));
        assert!(simple_selector_matches("", &labels));
    }

    #[test]
    fn credentials_replace_auth_keep_server() {
        let base = kube::Config::new("https://10.0.0.1:6443".parse().unwrap_or_default());
        let c = config_with_credentials(&base, &KubeCredentials::Token("t".into()));
        assert_eq!(c.cluster_url, base.cluster_url);
        assert!(c.auth_info.token.is_some());
        let c = config_with_credentials(
            &base,
            &KubeCredentials::ClientCert {
                cert_pem: b"CERT".to_vec(),
                key_pem: b"KEY".to_vec(),
            },
        );
        assert_eq!(
            c.auth_info.client_certificate_data.as_deref(),
            Some("Q0VSVA==")
        );
        assert!(c.auth_info.token.is_none());
    }
}
