//! Store resolution: which (Cluster)SecretStore an ExternalSecret / PushSecret entry uses, and may
//! it use it (controller class, ClusterSecretStore `conditions`, flood gate). ESO's client manager.
//!
//! Order of checks (ESO `Manager.Get`): fetch the store (missing → error), controller class (a store
//! of another class is skipped: the controller does nothing, writes no status), ClusterSecretStore
//! conditions (deny → error), flood gate (store not Ready → error).

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::error::{ProviderError, Result};
use crate::provider::{StoreInfo, StoreKind};

/// The label every namespace carries with its own name.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";
/// The default `--controller-class`.
pub const DEFAULT_CONTROLLER_CLASS: &str = "default";

/// `secretStoreRef` / `sourceRef.storeRef`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StoreRef {
    /// Store kind (default SecretStore).
    pub kind: StoreKind,
    /// Store name.
    pub name: String,
}

impl StoreRef {
    /// A ref from the wire fields (`kind` empty or missing → SecretStore).
    pub fn new(kind: Option<&str>, name: impl Into<String>) -> Self {
        StoreRef {
            kind: StoreKind::from_ref_kind(kind),
            name: name.into(),
        }
    }
}

/// Where stores and namespace labels come from: a reflector cache, the API, or a static list.
#[async_trait]
pub trait StoreLookup: Send + Sync {
    /// The store `kind/name` (for SecretStore: in `namespace`). `Ok(None)` when it does not exist.
    async fn get_store(
        &self,
        kind: StoreKind,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Arc<StoreInfo>>>;

    /// The labels of a namespace. `Ok(None)` when the namespace does not exist.
    async fn namespace_labels(&self, namespace: &str) -> Result<Option<BTreeMap<String, String>>>;
}

/// A fixed list of stores and namespaces (`esr render`, tests). Namespaces that were not added
/// are assumed to exist with only the `kubernetes.io/metadata.name` label.
#[derive(Clone, Debug, Default)]
pub struct StaticStoreLookup {
    stores: Vec<Arc<StoreInfo>>,
    namespaces: BTreeMap<String, BTreeMap<String, String>>,
}

impl StaticStoreLookup {
    /// Empty.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a store.
    pub fn add_store(&mut self, store: StoreInfo) -> &mut Self {
        self.stores.push(Arc::new(store));
        self
    }

    /// Adds a namespace with its labels (`kubernetes.io/metadata.name` is added).
    pub fn add_namespace(&mut self, name: &str, labels: BTreeMap<String, String>) -> &mut Self {
        let mut labels = labels;
        labels.insert(NAMESPACE_NAME_LABEL.to_string(), name.to_string());
        self.namespaces.insert(name.to_string(), labels);
        self
    }

    /// The stores.
    pub fn stores(&self) -> &[Arc<StoreInfo>] {
        &self.stores
    }
}

#[async_trait]
impl StoreLookup for StaticStoreLookup {
    async fn get_store(
        &self,
        kind: StoreKind,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Arc<StoreInfo>>> {
        Ok(self
            .stores
            .iter()
            .find(|s| {
                s.kind == kind
                    && s.name == name
                    && (kind.is_cluster() || s.namespace.as_deref() == Some(namespace))
            })
            .cloned())
    }

    async fn namespace_labels(&self, namespace: &str) -> Result<Option<BTreeMap<String, String>>> {
        Ok(Some(
            self.namespaces.get(namespace).cloned().unwrap_or_else(|| {
                BTreeMap::from([(NAMESPACE_NAME_LABEL.to_string(), namespace.to_string())])
            }),
        ))
    }
}

/// `spec.conditions[]` of a ClusterSecretStore.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSecretStoreCondition {
    /// Namespaces selected by labels.
    #[serde(default)]
    pub namespace_selector: Option<LabelSelector>,
    /// Namespaces by name.
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// Namespaces by Go regexp (unanchored).
    #[serde(default)]
    pub namespace_regexes: Vec<String>,
}

/// Options of store resolution (controller flags).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolveOptions {
    /// `--controller-class`.
    pub controller_class: String,
    /// `--enable-flood-gate` (default true).
    pub flood_gate: bool,
}

impl Default for ResolveOptions {
    fn default() -> Self {
        ResolveOptions {
            controller_class: DEFAULT_CONTROLLER_CLASS.to_string(),
            flood_gate: true,
        }
    }
}

/// Result of store resolution.
#[derive(Clone, Debug, PartialEq)]
pub enum StoreResolution {
    /// Use this store.
    Use(Arc<StoreInfo>),
    /// The store belongs to another controller class: skip silently (no status, no event).
    Skip,
}

/// Why a store cannot be used. `Display` gives ESO's texts.
#[derive(Clone, Debug, thiserror::Error)]
pub enum StoreError {
    /// The store does not exist:
    /// `could not get SecretStore "x", secretstores.external-secrets.io "x" not found`.
    #[error("could not get {kind} {name:?}, {plural}.external-secrets.io {name:?} not found", plural = kind.plural())]
    NotFound {
        /// Store kind.
        kind: StoreKind,
        /// Store name.
        name: String,
    },
    /// Flood gate: `SecretStore "x" is not ready`.
    #[error("{kind} {name:?} is not ready")]
    NotReady {
        /// Store kind.
        kind: StoreKind,
        /// Store name.
        name: String,
    },
    /// ClusterSecretStore conditions deny the namespace.
    #[error(
        "using cluster store {name:?} is not allowed from namespace {namespace:?}: denied by spec.condition"
    )]
    Denied {
        /// Store name.
        name: String,
        /// The ExternalSecret's namespace.
        namespace: String,
    },
    /// The namespace could not be read: `failed to get a namespace "ns": ...`.
    #[error("failed to get a namespace {namespace:?}: {message}")]
    Namespace {
        /// Namespace.
        namespace: String,
        /// Cause.
        message: String,
    },
    /// A condition is malformed (bad selector or regexp).
    #[error("{0}")]
    BadCondition(String),
    /// The lookup itself failed.
    #[error("could not get {kind} {name:?}, {source}")]
    Lookup {
        /// Store kind.
        kind: StoreKind,
        /// Store name.
        name: String,
        /// Cause.
        source: ProviderError,
    },
}

/// ESO `ShouldProcessStore`: a store with an empty class, or with our class, is ours.
pub fn store_is_managed(store: &StoreInfo, controller_class: &str) -> bool {
    match store.controller_class() {
        None => true,
        Some(c) => c == controller_class,
    }
}

/// Resolves the store an entry uses (see the module docs for the order of checks).
pub async fn resolve_store(
    lookup: &dyn StoreLookup,
    namespace: &str,
    store_ref: &StoreRef,
    opts: &ResolveOptions,
) -> std::result::Result<StoreResolution, StoreError> {
    let store = lookup
        .get_store(store_ref.kind, namespace, &store_ref.name)
        .await
        .map_err(|source| StoreError::Lookup {
            kind: store_ref.kind,
            name: store_ref.name.clone(),
            source,
        })?
        .ok_or_else(|| StoreError::NotFound {
            kind: store_ref.kind,
            name: store_ref.name.clone(),
        })?;
    if !store_is_managed(&store, &opts.controller_class) {
        return Ok(StoreResolution::Skip);
    }
    if store.kind.is_cluster() {
        let conditions = store_conditions(&store)?;
        if !conditions.is_empty() {
            let labels = lookup
                .namespace_labels(namespace)
                .await
                .map_err(|e| StoreError::Namespace {
                    namespace: namespace.to_string(),
                    message: e.to_string(),
                })?
                .ok_or_else(|| StoreError::Namespace {
                    namespace: namespace.to_string(),
                    message: format!("namespaces {namespace:?} not found"),
                })?;
            if !namespace_allowed(&conditions, namespace, &labels)? {
                return Err(StoreError::Denied {
                    name: store.name.clone(),
                    namespace: namespace.to_string(),
                });
            }
        }
    }
    if opts.flood_gate && !store.ready {
        return Err(StoreError::NotReady {
            kind: store.kind,
            name: store.name.clone(),
        });
    }
    Ok(StoreResolution::Use(store))
}

/// ESO's pre-check: true when any of the referenced stores exists and belongs to another
/// controller class (then the whole ExternalSecret is skipped). Missing stores are ignored.
pub async fn any_store_unmanaged(
    lookup: &dyn StoreLookup,
    namespace: &str,
    refs: &[StoreRef],
    controller_class: &str,
) -> Result<bool> {
    for r in refs {
        if let Some(store) = lookup.get_store(r.kind, namespace, &r.name).await?
            && !store_is_managed(&store, controller_class)
        {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Parses `spec.conditions` of a store.
pub fn store_conditions(
    store: &StoreInfo,
) -> std::result::Result<Vec<ClusterSecretStoreCondition>, StoreError> {
    match store.spec.get("conditions") {
        None | Some(serde_json::Value::Null) => Ok(Vec::new()),
        Some(v) => serde_json::from_value(v.clone())
            .map_err(|e| StoreError::BadCondition(format!("invalid spec.conditions: {e}"))),
    }
}

/// ESO's namespace check: OR across conditions and across the entries of each. No conditions
/// allows every namespace.
pub fn namespace_allowed(
    conditions: &[ClusterSecretStoreCondition],
    namespace: &str,
    namespace_labels: &BTreeMap<String, String>,
) -> std::result::Result<bool, StoreError> {
    if conditions.is_empty() {
        return Ok(true);
    }
    for c in conditions {
        if let Some(sel) = &c.namespace_selector
            && label_selector_matches(sel, namespace_labels).map_err(StoreError::BadCondition)?
        {
            return Ok(true);
        }
        for n in &c.namespaces {
            if namespace_labels
                .get(NAMESPACE_NAME_LABEL)
                .map(String::as_str)
                == Some(n.as_str())
            {
                return Ok(true);
            }
        }
        for r in &c.namespace_regexes {
            let re = Regex::new(r).map_err(|e| {
                StoreError::BadCondition(format!("failed to compile regex {r}: {e}"))
            })?;
            if re.is_match(namespace) {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// Kubernetes label selector semantics (`LabelSelectorAsSelector` + `Matches`): `matchLabels` and
/// `matchExpressions` (In, NotIn, Exists, DoesNotExist) ANDed; an empty selector matches everything.
pub fn label_selector_matches(
    selector: &LabelSelector,
    labels: &BTreeMap<String, String>,
) -> std::result::Result<bool, String> {
    if let Some(ml) = &selector.match_labels {
        for (k, v) in ml {
            if labels.get(k) != Some(v) {
                return Ok(false);
            }
        }
    }
    for expr in selector.match_expressions.iter().flatten() {
        let values = expr.values.clone().unwrap_or_default();
        let value = labels.get(&expr.key);
        let ok = match expr.operator.as_str() {
            "In" | "NotIn" if values.is_empty() => {
                return Err(format!(
                    "failed to convert label selector into selector: values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty (key {:?})",
                    expr.key
                ));
            }
            "Exists" | "DoesNotExist" if !values.is_empty() => {
                return Err(format!(
                    "failed to convert label selector into selector: values: Invalid value: values set must be empty for exists and does not exist (key {:?})",
                    expr.key
                ));
            }
            "In" => value.is_some_and(|v| values.contains(v)),
            "NotIn" => value.is_none_or(|v| !values.contains(v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            other => {
                return Err(format!(
                    "failed to convert label selector into selector: {other:?} is not a valid label selector operator"
                ));
            }
        };
        if !ok {
            return Ok(false);
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn css(name: &str, spec_extra: serde_json::Value, ready: bool) -> StoreInfo {
        let mut spec = json!({"provider": {"fake": {"data": []}}});
        if let (Some(s), Some(extra)) = (spec.as_object_mut(), spec_extra.as_object()) {
            for (k, v) in extra {
                s.insert(k.clone(), v.clone());
            }
        }
        StoreInfo::new(StoreKind::ClusterSecretStore, name, None, spec).with_ready(ready)
    }

    fn ss(name: &str, ns: &str, spec_extra: serde_json::Value, ready: bool) -> StoreInfo {
        let mut s = css(name, spec_extra, ready);
        s.kind = StoreKind::SecretStore;
        s.namespace = Some(ns.to_string());
        s
    }

    fn lookup() -> StaticStoreLookup {
        let mut l = StaticStoreLookup::new();
        l.add_store(ss("local", "team-a", json!({}), true))
            .add_store(ss("not-ready", "team-a", json!({}), false))
            .add_store(ss(
                "other-class",
                "team-a",
                json!({"controller": "dev"}),
                true,
            ))
            .add_store(ss(
                "our-class",
                "team-a",
                json!({"controller": "default"}),
                true,
            ))
            .add_store(css("open", json!({}), true))
            .add_store(css(
                "restricted",
                json!({"conditions": [
                    {"namespaceSelector": {"matchLabels": {"team": "payments"}}},
                    {"namespaces": ["explicit"], "namespaceRegexes": ["^dev-"]}
                ]}),
                true,
            ))
            .add_store(css(
                "bad-regex",
                json!({"conditions": [{"namespaceRegexes": ["("]}]}),
                true,
            ))
            .add_namespace("pay", BTreeMap::from([("team".into(), "payments".into())]))
            .add_namespace("team-a", BTreeMap::new());
        l
    }

    async fn resolve(
        ns: &str,
        kind: Option<&str>,
        name: &str,
    ) -> std::result::Result<StoreResolution, String> {
        resolve_store(
            &lookup(),
            ns,
            &StoreRef::new(kind, name),
            &ResolveOptions::default(),
        )
        .await
        .map_err(|e| e.to_string())
    }

    fn used(r: &std::result::Result<StoreResolution, String>) -> Option<String> {
        match r {
            Ok(StoreResolution::Use(s)) => Some(s.name.clone()),
            _ => None,
        }
    }

    #[tokio::test]
    async fn namespaced_store_found_in_own_namespace_only() {
        assert_eq!(
            used(&resolve("team-a", None, "local").await).as_deref(),
            Some("local")
        );
        assert_eq!(
            used(&resolve("team-a", Some("SecretStore"), "local").await).as_deref(),
            Some("local")
        );
        assert_eq!(
            resolve("team-b", None, "local").await.err().as_deref(),
            Some(
                r#"could not get SecretStore "local", secretstores.external-secrets.io "local" not found"#
            )
        );
        assert_eq!(
            resolve("team-a", Some("ClusterSecretStore"), "local")
                .await
                .err()
                .as_deref(),
            Some(
                r#"could not get ClusterSecretStore "local", clustersecretstores.external-secrets.io "local" not found"#
            )
        );
    }

    #[tokio::test]
    async fn flood_gate() {
        assert_eq!(
            resolve("team-a", None, "not-ready").await.err().as_deref(),
            Some(r#"SecretStore "not-ready" is not ready"#)
        );
        let opts = ResolveOptions {
            flood_gate: false,
            ..Default::default()
        };
        let r = resolve_store(
            &lookup(),
            "team-a",
            &StoreRef::new(None, "not-ready"),
            &opts,
        )
        .await;
        assert!(matches!(r, Ok(StoreResolution::Use(_))));
    }

    #[tokio::test]
    async fn controller_class() {
        assert_eq!(
            resolve("team-a", None, "other-class").await.ok(),
            Some(StoreResolution::Skip)
        );
        assert_eq!(
            used(&resolve("team-a", None, "our-class").await).as_deref(),
            Some("our-class")
        );
        let opts = ResolveOptions {
            controller_class: "dev".into(),
            flood_gate: true,
        };
        let r = resolve_store(
            &lookup(),
            "team-a",
            &StoreRef::new(None, "other-class"),
            &opts,
        )
        .await;
        assert!(matches!(r, Ok(StoreResolution::Use(_))));
        let r = resolve_store(
            &lookup(),
            "team-a",
            &StoreRef::new(None, "our-class"),
            &opts,
        )
        .await;
        assert!(matches!(r, Ok(StoreResolution::Skip)));
        let l = lookup();
        let refs = [StoreRef::new(None, "local"), StoreRef::new(None, "missing")];
        assert_eq!(
            any_store_unmanaged(&l, "team-a", &refs, "default")
                .await
                .ok(),
            Some(false)
        );
        let refs = [
            StoreRef::new(None, "local"),
            StoreRef::new(None, "other-class"),
        ];
        assert_eq!(
            any_store_unmanaged(&l, "team-a", &refs, "default")
                .await
                .ok(),
            Some(true)
        );
    }

    #[tokio::test]
    async fn cluster_store_conditions() {
        let css = Some("ClusterSecretStore");
        assert_eq!(
            used(&resolve("anything", css, "open").await).as_deref(),
            Some("open")
        );
        // label selector
        assert_eq!(
            used(&resolve("pay", css, "restricted").await).as_deref(),
            Some("restricted")
        );
        // names
        assert_eq!(
            used(&resolve("explicit", css, "restricted").await).as_deref(),
            Some("restricted")
        );
        // regex (unanchored at the end)
        assert_eq!(
            used(&resolve("dev-x", css, "restricted").await).as_deref(),
            Some("restricted")
        );
        assert_eq!(
            resolve("team-a", css, "restricted").await.err().as_deref(),
            Some(
                r#"using cluster store "restricted" is not allowed from namespace "team-a": denied by spec.condition"#
            )
        );
        assert_eq!(
            resolve("x-dev-y", css, "restricted").await.err().as_deref(),
            Some(
                r#"using cluster store "restricted" is not allowed from namespace "x-dev-y": denied by spec.condition"#
            )
        );
        let e = resolve("team-a", css, "bad-regex")
            .await
            .err()
            .unwrap_or_default();
        assert!(e.starts_with("failed to compile regex ("), "{e}");
    }

    fn sel(v: serde_json::Value) -> LabelSelector {
        serde_json::from_value(v).unwrap_or_default()
    }

    #[test]
    fn label_selectors() {
        let labels = BTreeMap::from([
            ("env".to_string(), "prod".to_string()),
            ("team".to_string(), "a".to_string()),
        ]);
        assert_eq!(label_selector_matches(&sel(json!({})), &labels), Ok(true));
        assert_eq!(
            label_selector_matches(&sel(json!({"matchLabels": {"env": "prod"}})), &labels),
            Ok(true)
        );
        assert_eq!(
            label_selector_matches(&sel(json!({"matchLabels": {"env": "dev"}})), &labels),
            Ok(false)
        );
        let e = |op: &str, vals: serde_json::Value| {
            sel(json!({"matchExpressions": [{"key": "env", "operator": op, "values": vals}]}))
        };
        assert_eq!(
            label_selector_matches(&e("In", json!(["prod", "dev"])), &labels),
            Ok(true)
        );
        assert_eq!(
            label_selector_matches(&e("In", json!(["dev"])), &labels),
            Ok(false)
        );
        assert_eq!(
            label_selector_matches(&e("NotIn", json!(["dev"])), &labels),
            Ok(true)
        );
        assert_eq!(
            label_selector_matches(&e("NotIn", json!(["prod"])), &labels),
            Ok(false)
        );
        assert_eq!(
            label_selector_matches(&e("Exists", json!([])), &labels),
            Ok(true)
        );
        assert_eq!(
            label_selector_matches(&e("DoesNotExist", json!([])), &labels),
            Ok(false)
        );
        assert!(label_selector_matches(&e("In", json!([])), &labels).is_err());
        assert!(label_selector_matches(&e("Exists", json!(["x"])), &labels).is_err());
        assert!(label_selector_matches(&e("Bogus", json!(["x"])), &labels).is_err());
        let missing = sel(
            json!({"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}),
        );
        assert_eq!(label_selector_matches(&missing, &labels), Ok(true));
    }

    #[test]
    fn or_semantics_across_conditions() {
        let conds: Vec<ClusterSecretStoreCondition> = serde_json::from_value(json!([
            {"namespaces": ["a"]},
            {"namespaceRegexes": ["^b$"]}
        ]))
        .unwrap_or_default();
        let labels = |n: &str| BTreeMap::from([(NAMESPACE_NAME_LABEL.to_string(), n.to_string())]);
        assert_eq!(
            namespace_allowed(&conds, "a", &labels("a")).ok(),
            Some(true)
        );
        assert_eq!(
            namespace_allowed(&conds, "b", &labels("b")).ok(),
            Some(true)
        );
        assert_eq!(
            namespace_allowed(&conds, "c", &labels("c")).ok(),
            Some(false)
        );
        assert_eq!(namespace_allowed(&[], "c", &labels("c")).ok(), Some(true));
    }
}
