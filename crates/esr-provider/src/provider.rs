//! The provider traits, the registry, and what a provider gets to build a client.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use serde::de::DeserializeOwned;

use crate::error::{ProviderError, Result};
use crate::kube_access::KubeAccess;
use crate::metrics::{CallRecorder, noop_recorder};
use crate::request::{
    Capabilities, FindRequest, Maintenance, PushRemoteRef, PushRequest, SecretRef, ValidationResult,
};

/// `SecretStore` or `ClusterSecretStore`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StoreKind {
    /// Namespaced store (the default of `secretStoreRef.kind`).
    #[default]
    SecretStore,
    /// Cluster-scoped store.
    ClusterSecretStore,
}

impl StoreKind {
    /// The Kubernetes kind.
    pub fn as_str(self) -> &'static str {
        match self {
            StoreKind::SecretStore => "SecretStore",
            StoreKind::ClusterSecretStore => "ClusterSecretStore",
        }
    }

    /// The plural resource name (`secretstores` / `clustersecretstores`).
    pub fn plural(self) -> &'static str {
        match self {
            StoreKind::SecretStore => "secretstores",
            StoreKind::ClusterSecretStore => "clustersecretstores",
        }
    }

    /// Parses `secretStoreRef.kind`: empty or `SecretStore` → SecretStore, `ClusterSecretStore` →
    /// ClusterSecretStore. Anything else is treated as SecretStore, as ESO does (it only compares
    /// with `ClusterSecretStore`).
    pub fn from_ref_kind(kind: Option<&str>) -> Self {
        match kind {
            Some("ClusterSecretStore") => StoreKind::ClusterSecretStore,
            _ => StoreKind::SecretStore,
        }
    }

    /// True for ClusterSecretStore.
    pub fn is_cluster(self) -> bool {
        self == StoreKind::ClusterSecretStore
    }
}

impl fmt::Display for StoreKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A resolved (Cluster)SecretStore, as providers and store resolution see it.
///
/// `spec` is the store's `spec` as JSON, so this type does not depend on the exact Rust shape of
/// the CRD types; providers deserialize their own section with [`StoreInfo::provider_spec`].
/// `Debug` does not print the spec (a fake store's spec holds values).
#[derive(Clone, PartialEq)]
pub struct StoreInfo {
    /// Store kind.
    pub kind: StoreKind,
    /// Store name.
    pub name: String,
    /// Store namespace (`None` for a ClusterSecretStore).
    pub namespace: Option<String>,
    /// `metadata.uid`.
    pub uid: Option<String>,
    /// `metadata.generation`.
    pub generation: i64,
    /// `metadata.annotations`.
    pub annotations: BTreeMap<String, String>,
    /// `spec`, as JSON.
    pub spec: Arc<serde_json::Value>,
    /// Whether the store's `Ready` condition is `True`.
    pub ready: bool,
}

impl fmt::Debug for StoreInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreInfo")
            .field("kind", &self.kind)
            .field("name", &self.name)
            .field("namespace", &self.namespace)
            .field("generation", &self.generation)
            .field("ready", &self.ready)
            .field("provider", &self.provider_key().ok())
            .finish_non_exhaustive()
    }
}

impl StoreInfo {
    /// A store with the given identity and spec (not ready, generation 0).
    pub fn new(
        kind: StoreKind,
        name: impl Into<String>,
        namespace: Option<String>,
        spec: serde_json::Value,
    ) -> Self {
        StoreInfo {
            kind,
            name: name.into(),
            namespace: if kind.is_cluster() { None } else { namespace },
            uid: None,
            generation: 0,
            annotations: BTreeMap::new(),
            spec: Arc::new(spec),
            ready: false,
        }
    }

    /// Sets the ready flag.
    #[must_use]
    pub fn with_ready(mut self, ready: bool) -> Self {
        self.ready = ready;
        self
    }

    /// Builds a StoreInfo from a whole store object as JSON (`apiVersion`, `kind`, `metadata`,
    /// `spec`, `status`), e.g. `serde_json::to_value(&secret_store)`.
    pub fn from_object(object: &serde_json::Value) -> Result<Self> {
        let kind = match object.get("kind").and_then(|k| k.as_str()) {
            Some("SecretStore") => StoreKind::SecretStore,
            Some("ClusterSecretStore") => StoreKind::ClusterSecretStore,
            other => {
                return Err(ProviderError::invalid(format!(
                    "not a SecretStore or ClusterSecretStore: kind {other:?}"
                )));
            }
        };
        let meta = object.get("metadata");
        let s = |field: &str| {
            meta.and_then(|m| m.get(field))
                .and_then(|v| v.as_str())
                .map(str::to_string)
        };
        let name =
            s("name").ok_or_else(|| ProviderError::invalid("store without metadata.name"))?;
        let annotations = meta
            .and_then(|m| m.get("annotations"))
            .and_then(|a| serde_json::from_value::<BTreeMap<String, String>>(a.clone()).ok())
            .unwrap_or_default();
        let generation = meta
            .and_then(|m| m.get("generation"))
            .and_then(|g| g.as_i64())
            .unwrap_or(0);
        let ready = object
            .get("status")
            .and_then(|st| st.get("conditions"))
            .and_then(|c| c.as_array())
            .map(|conds| {
                conds.iter().any(|c| {
                    c.get("type").and_then(|t| t.as_str()) == Some("Ready")
                        && c.get("status").and_then(|t| t.as_str()) == Some("True")
                })
            })
            .unwrap_or(false);
        Ok(StoreInfo {
            kind,
            name,
            namespace: if kind.is_cluster() {
                None
            } else {
                s("namespace")
            },
            uid: s("uid"),
            generation,
            annotations,
            spec: Arc::new(
                object
                    .get("spec")
                    .cloned()
                    .unwrap_or(serde_json::Value::Null),
            ),
            ready,
        })
    }

    /// `spec.controller` (empty → `None`).
    pub fn controller_class(&self) -> Option<&str> {
        self.spec
            .get("controller")
            .and_then(|c| c.as_str())
            .filter(|c| !c.is_empty())
    }

    /// The single key of `spec.provider` (null entries ignored). Errors like ESO when there is not
    /// exactly one: `secret stores must only have exactly one backend specified, found N`.
    pub fn provider_key(&self) -> Result<&str> {
        let provider = self.spec.get("provider").and_then(|p| p.as_object());
        let keys: Vec<&String> = provider
            .map(|p| {
                p.iter()
                    .filter(|(_, v)| !v.is_null())
                    .map(|(k, _)| k)
                    .collect()
            })
            .unwrap_or_default();
        match keys.as_slice() {
            [one] => Ok(one.as_str()),
            other => Err(ProviderError::invalid(format!(
                "store error for {}: secret stores must only have exactly one backend specified, found {}",
                self.name,
                other.len()
            ))),
        }
    }

    /// `spec.provider.<key>` as raw JSON.
    pub fn provider_json(&self, key: &str) -> Option<&serde_json::Value> {
        self.spec
            .get("provider")
            .and_then(|p| p.get(key))
            .filter(|v| !v.is_null())
    }

    /// Deserializes `spec.provider.<key>` into the provider's config type (e.g. an esr-api type).
    pub fn provider_spec<T: DeserializeOwned>(&self, key: &str) -> Result<T> {
        let raw = self.provider_json(key).ok_or_else(|| {
            ProviderError::invalid(format!(
                "no store type or wrong store type: missing spec.provider.{key}"
            ))
        })?;
        // Read in place: a clone of the JSON first would copy the whole provider block (a fake
        // store's data can hold thousands of entries) on every client built.
        T::deserialize(raw)
            .map_err(|e| ProviderError::invalid(format!("invalid spec.provider.{key}: {e}")))
    }

    /// `spec.retrySettings`, if any: `(maxRetries, retryInterval)`.
    pub fn retry_settings(&self) -> (Option<i32>, Option<String>) {
        let rs = self.spec.get("retrySettings");
        let max = rs
            .and_then(|r| r.get("maxRetries"))
            .and_then(|m| m.as_i64())
            .and_then(|m| i32::try_from(m).ok());
        let interval = rs
            .and_then(|r| r.get("retryInterval"))
            .and_then(|m| m.as_str())
            .map(str::to_string);
        (max, interval)
    }

    /// A stable identity string: `Kind/namespace/name` (cluster stores: `Kind//name`).
    pub fn identity(&self) -> String {
        format!(
            "{}/{}/{}",
            self.kind,
            self.namespace.as_deref().unwrap_or(""),
            self.name
        )
    }
}

/// Everything a provider gets to build a client.
#[derive(Clone)]
pub struct ClientContext<'a> {
    /// The store.
    pub store: &'a StoreInfo,
    /// The namespace of the ExternalSecret / PushSecret being reconciled (referent auth). For a
    /// SecretStore this is the store's namespace. `None` when a ClusterSecretStore is being validated
    /// by the store controller (ESO passes an empty namespace then).
    pub namespace: Option<&'a str>,
    /// Kubernetes IO (credential Secrets, TokenRequests, ...).
    pub kube: Arc<dyn KubeAccess>,
    /// API-call metrics.
    pub recorder: Arc<dyn CallRecorder>,
}

impl fmt::Debug for ClientContext<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientContext")
            .field("store", &self.store.identity())
            .field("namespace", &self.namespace)
            .finish()
    }
}

impl<'a> ClientContext<'a> {
    /// A context with a no-op recorder.
    pub fn new(
        store: &'a StoreInfo,
        namespace: Option<&'a str>,
        kube: Arc<dyn KubeAccess>,
    ) -> Self {
        ClientContext {
            store,
            namespace,
            kube,
            recorder: noop_recorder(),
        }
    }

    /// Sets the recorder.
    #[must_use]
    pub fn with_recorder(mut self, recorder: Arc<dyn CallRecorder>) -> Self {
        self.recorder = recorder;
        self
    }

    /// The namespace used for references without an explicit namespace: the ExternalSecret's
    /// namespace, or for a SecretStore its own namespace.
    pub fn default_namespace(&self) -> Option<&str> {
        self.namespace
            .filter(|n| !n.is_empty())
            .or(self.store.namespace.as_deref())
    }

    /// True when a ClusterSecretStore is being validated without an ExternalSecret namespace.
    pub fn is_store_validation(&self) -> bool {
        self.store.kind.is_cluster() && self.namespace.filter(|n| !n.is_empty()).is_none()
    }
}

/// A client for one store, used during one or more reconciles. Reads take `&self` and may run
/// concurrently.
#[async_trait]
pub trait SecretsClient: Send + Sync {
    /// One value (ESO `GetSecret`). A missing secret / version / property is
    /// [`ProviderError::not_found`] where ESO returns `NoSecretErr`.
    async fn get_secret(&self, r: &SecretRef) -> Result<Vec<u8>>;

    /// Batching hook: many values at once, results in the same order. Providers that can batch
    /// or coalesce (AWS `BatchGetSecretValue`) override it; the default calls `get_secret` in turn.
    async fn get_secrets(&self, refs: &[SecretRef]) -> Vec<Result<Vec<u8>>> {
        let mut out = Vec::with_capacity(refs.len());
        for r in refs {
            out.push(self.get_secret(r).await);
        }
        out
    }

    /// A map of values (ESO `GetSecretMap`, used by `dataFrom.extract`).
    async fn get_secret_map(&self, r: &SecretRef) -> Result<BTreeMap<String, Vec<u8>>>;

    /// All secrets matching a find (ESO `GetAllSecrets`), keys already converted with the
    /// request's conversion strategy.
    async fn get_all_secrets(&self, f: &FindRequest) -> Result<BTreeMap<String, Vec<u8>>>;

    /// Writes one PushSecret entry. Read-only providers keep the default (Unsupported).
    async fn push_secret(&self, req: &PushRequest) -> Result<()> {
        let _ = req;
        Err(ProviderError::unsupported("not implemented"))
    }

    /// Deletes a pushed value. Read-only providers keep the default (Unsupported).
    async fn delete_secret(&self, r: &PushRemoteRef) -> Result<()> {
        let _ = r;
        Err(ProviderError::unsupported("not implemented"))
    }

    /// Whether a pushed value exists (PushSecret `updatePolicy: IfNotExists`).
    async fn secret_exists(&self, r: &PushRemoteRef) -> Result<bool> {
        let _ = r;
        Err(ProviderError::unsupported("not implemented"))
    }

    /// Validates the store (the store controller calls this).
    async fn validate(&self) -> ValidationResult;
}

/// A backend (one `spec.provider` key). Registered in a [`ProviderRegistry`] by the binary.
#[async_trait]
pub trait Provider: Send + Sync {
    /// The `spec.provider` key, e.g. `aws`, `kubernetes`, `fake`.
    fn name(&self) -> &'static str;

    /// The provider label of `externalsecret_provider_api_calls_count`, e.g. `AWS/SecretsManager`.
    fn metric_provider(&self) -> &'static str;

    /// What stores of this provider can do.
    fn capabilities(&self, store: &StoreInfo) -> Capabilities;

    /// Maintenance status (ESO emits `StoreUnmaintained` warnings for NotMaintained providers).
    fn maintenance(&self) -> Maintenance {
        Maintenance::Maintained
    }

    /// Static validation of the store spec (ESO's `ValidateStore`, i.e. the webhook): warnings or
    /// an error.
    fn validate_store(&self, store: &StoreInfo) -> Result<Vec<String>>;

    /// Builds a client (ESO's `NewClient`).
    async fn new_client(&self, ctx: &ClientContext<'_>) -> Result<Arc<dyn SecretsClient>>;
}

/// `name → provider`, built by the binary. Adding a provider touches no controller code.
#[derive(Clone, Default)]
pub struct ProviderRegistry {
    providers: BTreeMap<&'static str, Arc<dyn Provider>>,
}

impl fmt::Debug for ProviderRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.providers.keys()).finish()
    }
}

impl ProviderRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a provider under its [`Provider::name`] (replacing any previous one).
    pub fn register(&mut self, provider: Arc<dyn Provider>) -> &mut Self {
        self.providers.insert(provider.name(), provider);
        self
    }

    /// Builder form of [`ProviderRegistry::register`].
    #[must_use]
    pub fn with(mut self, provider: Arc<dyn Provider>) -> Self {
        self.register(provider);
        self
    }

    /// The provider registered under `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Provider>> {
        self.providers.get(name)
    }

    /// Registered names, sorted.
    pub fn names(&self) -> Vec<&'static str> {
        self.providers.keys().copied().collect()
    }

    /// The provider for a store. Errors: the store's own provider-key error, or
    /// `provider <name> is not supported by esr` (kind Unsupported).
    pub fn for_store(&self, store: &StoreInfo) -> Result<&Arc<dyn Provider>> {
        let key = store.provider_key()?;
        self.get(key).ok_or_else(|| unsupported_provider(key))
    }
}

/// The error for a `spec.provider` key esr does not implement.
pub fn unsupported_provider(name: &str) -> ProviderError {
    ProviderError::unsupported(format!("provider {name} is not supported by esr"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube_access::StaticKubeAccess;
    use serde_json::json;

    struct Dummy;

    #[async_trait]
    impl Provider for Dummy {
        fn name(&self) -> &'static str {
            "dummy"
        }
        fn metric_provider(&self) -> &'static str {
            "Dummy"
        }
        fn capabilities(&self, _store: &StoreInfo) -> Capabilities {
            Capabilities::ReadOnly
        }
        fn validate_store(&self, _store: &StoreInfo) -> Result<Vec<String>> {
            Ok(vec![])
        }
        async fn new_client(&self, _ctx: &ClientContext<'_>) -> Result<Arc<dyn SecretsClient>> {
            Ok(Arc::new(DummyClient))
        }
    }

    struct DummyClient;

    #[async_trait]
    impl SecretsClient for DummyClient {
        async fn get_secret(&self, r: &SecretRef) -> Result<Vec<u8>> {
            if r.key == "missing" {
                Err(ProviderError::not_found())
            } else {
                Ok(r.key.clone().into_bytes())
            }
        }
        async fn get_secret_map(&self, _r: &SecretRef) -> Result<BTreeMap<String, Vec<u8>>> {
            Ok(BTreeMap::new())
        }
        async fn get_all_secrets(&self, _f: &FindRequest) -> Result<BTreeMap<String, Vec<u8>>> {
            Ok(BTreeMap::new())
        }
        async fn validate(&self) -> ValidationResult {
            ValidationResult::Ready
        }
    }

    fn store(provider: serde_json::Value) -> StoreInfo {
        StoreInfo::new(
            StoreKind::SecretStore,
            "s",
            Some("ns".into()),
            json!({ "provider": provider }),
        )
    }

    #[tokio::test]
    async fn registry_lookup_and_unsupported() {
        let reg = ProviderRegistry::new().with(Arc::new(Dummy));
        assert_eq!(reg.names(), vec!["dummy"]);
        let s = store(json!({"dummy": {}}));
        let p = reg.for_store(&s).unwrap_or_else(|e| panic!("{e}"));
        let ctx = ClientContext::new(&s, Some("ns"), Arc::new(StaticKubeAccess::new()));
        let client = p.new_client(&ctx).await.unwrap_or_else(|e| panic!("{e}"));
        let results = client
            .get_secrets(&[SecretRef::new("a"), SecretRef::new("missing")])
            .await;
        assert_eq!(results[0].as_ref().ok(), Some(&b"a".to_vec()));
        assert!(
            results[1]
                .as_ref()
                .err()
                .map(|e| e.is_not_found())
                .unwrap_or(false)
        );
        assert!(client.push_secret_unsupported().await);

        let e = reg
            .for_store(&store(json!({"gcpsm": {"projectID": "x"}})))
            .err()
            .map(|e| (e.kind(), e.to_string()));
        assert_eq!(
            e,
            Some((
                crate::error::ErrorKind::Unsupported,
                "provider gcpsm is not supported by esr".to_string()
            ))
        );
        let e = reg
            .for_store(&store(json!({"a": {}, "b": {}})))
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some(
                "store error for s: secret stores must only have exactly one backend specified, found 2"
            )
        );
        assert!(
            reg.for_store(&store(json!({"dummy": {}, "aws": null})))
                .is_ok()
        );
    }

    #[async_trait]
    trait PushProbe {
        async fn push_secret_unsupported(&self) -> bool;
    }

    #[async_trait]
    impl PushProbe for Arc<dyn SecretsClient> {
        async fn push_secret_unsupported(&self) -> bool {
            let r = self.delete_secret(&PushRemoteRef::new("x")).await;
            matches!(r, Err(e) if e.kind() == crate::error::ErrorKind::Unsupported)
        }
    }

    #[test]
    fn store_info_from_object() {
        let obj = json!({
            "apiVersion": "external-secrets.io/v1",
            "kind": "ClusterSecretStore",
            "metadata": {"name": "css", "generation": 3, "uid": "u1", "namespace": "ignored",
                         "annotations": {"a": "b"}},
            "spec": {"controller": "dev", "provider": {"fake": {"data": []}},
                     "retrySettings": {"maxRetries": 5, "retryInterval": "10s"}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}
        });
        let s = StoreInfo::from_object(&obj).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.kind, StoreKind::ClusterSecretStore);
        assert_eq!(s.namespace, None);
        assert_eq!(s.generation, 3);
        assert!(s.ready);
        assert_eq!(s.controller_class(), Some("dev"));
        assert_eq!(s.provider_key().ok(), Some("fake"));
        assert_eq!(s.retry_settings(), (Some(5), Some("10s".to_string())));
        assert_eq!(s.identity(), "ClusterSecretStore//css");
        #[derive(serde::Deserialize)]
        struct Fake {
            data: Vec<serde_json::Value>,
        }
        let f: Fake = s.provider_spec("fake").unwrap_or_else(|e| panic!("{e}"));
        assert!(f.data.is_empty());
        assert!(s.provider_spec::<Fake>("aws").is_err());

        let not_ready = json!({"kind": "SecretStore", "metadata": {"name": "x", "namespace": "n"},
                               "spec": {}, "status": {"conditions": [{"type": "Ready", "status": "False"}]}});
        let s = StoreInfo::from_object(&not_ready).unwrap_or_else(|e| panic!("{e}"));
        assert!(!s.ready);
        assert_eq!(s.namespace.as_deref(), Some("n"));
        assert_eq!(s.controller_class(), None);
        assert!(StoreInfo::from_object(&json!({"kind": "Secret"})).is_err());
    }

    #[test]
    fn store_info_debug_hides_the_spec() {
        let s = StoreInfo::new(
            StoreKind::SecretStore,
            "s",
            Some("ns".into()),
            json!({"provider": {"fake": {"data": [{"key": "k", "value": "top-secret-value"}]}}}),
        );
        let d = format!("{s:?}");
        assert!(!d.contains("top-secret-value"), "{d}");
        assert!(d.contains("fake"), "{d}");
    }

    #[test]
    fn store_kind_parsing() {
        assert_eq!(StoreKind::from_ref_kind(None), StoreKind::SecretStore);
        assert_eq!(StoreKind::from_ref_kind(Some("")), StoreKind::SecretStore);
        assert_eq!(
            StoreKind::from_ref_kind(Some("ClusterSecretStore")),
            StoreKind::ClusterSecretStore
        );
        assert_eq!(
            StoreKind::ClusterSecretStore.plural(),
            "clustersecretstores"
        );
    }

    #[test]
    fn context_namespaces() {
        let css = StoreInfo::new(StoreKind::ClusterSecretStore, "c", None, json!({}));
        let kube: Arc<dyn KubeAccess> = Arc::new(StaticKubeAccess::new());
        let ctx = ClientContext::new(&css, None, kube.clone());
        assert!(ctx.is_store_validation());
        assert_eq!(ctx.default_namespace(), None);
        let ctx = ClientContext::new(&css, Some("app"), kube.clone());
        assert!(!ctx.is_store_validation());
        assert_eq!(ctx.default_namespace(), Some("app"));
        let ss = StoreInfo::new(StoreKind::SecretStore, "s", Some("team".into()), json!({}));
        let ctx = ClientContext::new(&ss, None, kube);
        assert!(!ctx.is_store_validation());
        assert_eq!(ctx.default_namespace(), Some("team"));
    }
}
