//! PushSecret sources, target stores, template and store references, used by
//! the reconciler in [`crate::pushsecret::reconcile`] and by the store finalizer in [`crate::secretstore::reconcile`].
//!
//! A PushSecret has one source: `selector.secret.name`, `selector.secret.selector` (every matching
//! Secret of its namespace) or `selector.generatorRef`. It pushes to `secretStoreRefs[]`, each by
//! name or `labelSelector`, kind `SecretStore` unless it says `ClusterSecretStore`; stores being
//! deleted or of another controller class are skipped. `template` renders each source Secret
//! before the push.
//!
//! Pure helpers ([`source_of`], [`select_stores`], [`data_to_targets`], [`validate_data_to`],
//! [`render_template`], [`store_has_delete_refs`], [`ps_concerns_store`]) and the IO that resolves
//! sources ([`resolve_sources`]), stores ([`resolve_stores`]) and `templateFrom` inputs
//! ([`load_template_sources`]).

use std::collections::{BTreeMap, BTreeSet};

use esr_api::v1::{
    ClusterSecretStore, ExternalSecretTemplate, GeneratorRef, SecretStore, SecretStoreKind,
};
use esr_api::v1alpha1::{PushSecret, PushSecretDeletionPolicy, PushSecretSpec, PushSecretStoreRef};
use esr_provider::store::{StoreError, StoreRef, label_selector_matches};
use esr_provider::{KubeAccess, StoreKind};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::ListParams;
use kube::core::Selector;
use kube::{Api, Client, Resource, ResourceExt};

use crate::common::generators::{Generated, Generators};
use crate::pushsecret::error::{DataToError, PushError, TemplateFromError};

/// Name of the in-memory Secret that carries a generator's output (ESO's name).
pub const GENERATED_SECRET_NAME: &str = "___generated-secret";

/// Where a PushSecret's data comes from. ESO checks `selector.secret.name` first, then
/// `selector.generatorRef`, then `selector.secret.selector`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Source<'a> {
    /// One Secret by name.
    Named(&'a str),
    /// A generator's output, pushed as if it were a Secret's data.
    Generator(&'a GeneratorRef),
    /// Every Secret of the PushSecret's namespace matching the label selector.
    Selector(&'a LabelSelector),
}

/// The source of a spec (ESO: `no secret selector provided` when none is set).
pub fn source_of(spec: &PushSecretSpec) -> Result<Source<'_>, PushError> {
    let secret = spec.selector.secret.as_ref();
    if let Some(n) = secret
        .and_then(|s| s.name.as_deref())
        .filter(|n| !n.is_empty())
    {
        return Ok(Source::Named(n));
    }
    if let Some(g) = &spec.selector.generator_ref {
        return Ok(Source::Generator(g));
    }
    if let Some(sel) = secret.and_then(|s| s.selector.as_ref()) {
        return Ok(Source::Selector(sel));
    }
    Err(PushError::NoSelector)
}

/// The consumer key of a PushSecret's generator (see `GenerateRequest::consumer`).
pub fn generator_consumer(namespace: &str, name: &str) -> String {
    format!("PushSecret/{namespace}/{name}")
}

/// A generator's output as the Secret that is pushed.
pub fn generated_secret(namespace: &str, data: Generated) -> Secret {
    let mut s = Secret::default();
    s.metadata.name = Some(GENERATED_SECRET_NAME.to_string());
    s.metadata.namespace = Some(namespace.to_string());
    s.data = Some(data.into_iter().map(|(k, v)| (k, ByteString(v))).collect());
    s
}

/// `kind` of a store reference with ESO's default (`SecretStore`).
pub fn kind_or_default(k: Option<SecretStoreKind>) -> StoreKind {
    match k {
        Some(SecretStoreKind::ClusterSecretStore) => StoreKind::ClusterSecretStore,
        _ => StoreKind::SecretStore,
    }
}

/// A store a PushSecret pushes to, with its labels (for `dataTo[].storeRef.labelSelector`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct SelectedStore {
    /// Kind and name.
    pub store: StoreRef,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
}

/// A store found through `secretStoreRefs` (by name or label selector), before filtering.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreCandidate {
    /// Kind and name.
    pub store: StoreRef,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// `spec.controller`.
    pub controller: Option<String>,
}

/// ESO's store filtering: stores being deleted and stores of another controller class are
/// skipped; duplicates (a store named and also label-selected) are pushed once. Sorted.
pub fn select_stores(
    candidates: Vec<StoreCandidate>,
    controller_class: &str,
) -> Vec<SelectedStore> {
    let set: BTreeSet<SelectedStore> = candidates
        .into_iter()
        .filter(|c| !c.deleting)
        .filter(|c| {
            c.controller
                .as_deref()
                .is_none_or(|k| k.is_empty() || k == controller_class)
        })
        .map(|c| SelectedStore {
            store: c.store,
            labels: c.labels,
        })
        .collect();
    set.into_iter().collect()
}

/// Whether a `dataTo[].storeRef` targets `store` (ESO: the name wins over the label selector; the
/// kind defaults to `SecretStore`).
pub fn data_to_targets(r: &PushSecretStoreRef, store: &SelectedStore) -> Result<bool, DataToError> {
    let kind_ok = kind_or_default(r.kind) == store.store.kind;
    if let Some(n) = r.name.as_deref().filter(|n| !n.is_empty()) {
        return Ok(kind_ok && n == store.store.name);
    }
    match &r.label_selector {
        None => Ok(false),
        Some(sel) => Ok(kind_ok
            && label_selector_matches(sel, &store.labels).map_err(DataToError::LabelSelector)?),
    }
}

/// ESO's `validateDataToStoreRefs`: every `dataTo[]` has a `storeRef` with a name or a label
/// selector, and a named one must be named in `secretStoreRefs` (with the same kind); a
/// label-selector entry in `secretStoreRefs` does not stand in for it.
pub fn validate_data_to(spec: &PushSecretSpec) -> Result<(), PushError> {
    for (i, d) in spec.data_to.iter().flatten().enumerate() {
        let Some(sr) = &d.store_ref else {
            return Err(PushError::data_to(i, DataToError::NoStoreRef));
        };
        let name = sr.name.as_deref().filter(|n| !n.is_empty());
        if name.is_none() && sr.label_selector.is_none() {
            return Err(PushError::data_to(i, DataToError::NoStoreName));
        }
        if let Some(n) = name {
            let kind = kind_or_default(sr.kind);
            let listed = spec
                .secret_store_refs
                .iter()
                .any(|r| kind_or_default(r.kind) == kind && r.name.as_deref() == Some(n));
            if !listed {
                return Err(PushError::data_to(
                    i,
                    DataToError::NotInStoreRefs(n.to_string()),
                ));
            }
        }
    }
    Ok(())
}

/// After the stores are resolved: a `dataTo[]` whose `storeRef` is a label selector must match
/// at least one of them (ESO), otherwise the PushSecret is `Errored`.
pub fn check_data_to_selectors(
    spec: &PushSecretSpec,
    stores: &[SelectedStore],
) -> Result<(), PushError> {
    for (i, d) in spec.data_to.iter().flatten().enumerate() {
        let Some(sr) = &d.store_ref else { continue };
        if sr.name.as_deref().is_some_and(|n| !n.is_empty()) || sr.label_selector.is_none() {
            continue;
        }
        let mut matched = false;
        for st in stores {
            if data_to_targets(sr, st).map_err(|e| PushError::data_to(i, e))? {
                matched = true;
                break;
            }
        }
        if !matched {
            return Err(PushError::data_to(i, DataToError::NoStoreMatches));
        }
    }
    Ok(())
}

/// ESO's `storeMatchesRef` (store finalizer): the kind matches (an empty kind matches both), and
/// the name is equal or the label selector matches the store's labels (invalid selectors never
/// match).
pub fn store_matches_ref(
    r: &PushSecretStoreRef,
    kind: StoreKind,
    name: &str,
    labels: &BTreeMap<String, String>,
) -> bool {
    if r.kind.is_some() && kind_or_default(r.kind) != kind {
        return false;
    }
    if r.name.as_deref() == Some(name) {
        return true;
    }
    r.label_selector
        .as_ref()
        .is_some_and(|s| label_selector_matches(s, labels).unwrap_or(false))
}

fn store_key_of(kind: StoreKind, name: &str) -> String {
    crate::pushsecret::plan::store_key(&StoreRef {
        kind,
        name: name.to_string(),
    })
}

/// Whether `ps` may concern the store: the store is in `status.syncedPushSecrets` or a
/// `secretStoreRefs` entry matches it (ESO's `shouldReconcileSecretStoreForPushSecret`). A
/// SecretStore only concerns PushSecrets of its namespace.
pub fn ps_concerns_store(
    ps: &PushSecret,
    kind: StoreKind,
    name: &str,
    namespace: Option<&str>,
    labels: &BTreeMap<String, String>,
) -> bool {
    if kind == StoreKind::SecretStore && ps.namespace().as_deref() != namespace {
        return false;
    }
    let key = store_key_of(kind, name);
    let synced = ps
        .status
        .as_ref()
        .and_then(|s| s.synced_push_secrets.as_ref())
        .is_some_and(|m| m.contains_key(&key));
    synced
        || ps
            .spec
            .secret_store_refs
            .iter()
            .any(|r| store_matches_ref(r, kind, name, labels))
}

/// ESO's `hasPushSecretsWithDeletePolicy`: some PushSecret with `deletionPolicy: Delete` (in the
/// store's namespace for a SecretStore) has pushed to the store or references it.
pub fn store_has_delete_refs<'a>(
    kind: StoreKind,
    name: &str,
    namespace: Option<&str>,
    labels: &BTreeMap<String, String>,
    pushsecrets: impl IntoIterator<Item = &'a PushSecret>,
) -> bool {
    pushsecrets.into_iter().any(|ps| {
        ps.spec.deletion_policy == Some(PushSecretDeletionPolicy::Delete)
            && ps_concerns_store(ps, kind, name, namespace, labels)
    })
}

/// Renders `template` over a source Secret as ESO does for PushSecrets: the template data is the
/// Secret's data, and the rendered keys, labels and annotations are laid over the Secret itself
/// (keys the template does not produce stay). Errors never contain values.
pub fn render_template(
    template: &ExternalSecretTemplate,
    source: &Secret,
    sources: &esr_template::eso::TemplateSources,
) -> Result<Secret, esr_template::TemplateError> {
    use esr_template::eso::{RenderInput, RenderedSecret, render_secret};
    let data: BTreeMap<String, Vec<u8>> = source
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect();
    let base = RenderedSecret {
        data: data.clone(),
        labels: source.labels().clone(),
        annotations: source.annotations().clone(),
        type_: source.type_.clone(),
    };
    let empty = BTreeMap::new();
    let out = render_secret(&RenderInput {
        template: Some(template),
        data: &data,
        sources,
        base: &base,
        es_labels: &empty,
        es_annotations: &empty,
    })?;
    let mut s = source.clone();
    s.data = Some(
        out.data
            .into_iter()
            .map(|(k, v)| (k, ByteString(v)))
            .collect(),
    );
    s.metadata.labels = Some(out.labels);
    s.metadata.annotations = Some(out.annotations);
    s.type_ = out.type_;
    Ok(s)
}

// ------------------------------------------------------------------------------------------------
// IO
// ------------------------------------------------------------------------------------------------

/// Loads the ConfigMaps and Secrets a template's `templateFrom` references (in `namespace`).
/// Errors read like ESO's (`error fetching templateFrom data: ...` is added by the renderer).
pub async fn load_template_sources(
    kube: &dyn KubeAccess,
    namespace: &str,
    template: &ExternalSecretTemplate,
) -> Result<esr_template::eso::TemplateSources, TemplateFromError> {
    let mut out = esr_template::eso::TemplateSources::default();
    for tf in template.template_from.iter().flatten() {
        if let Some(cm) = &tf.config_map
            && !out.config_maps.contains_key(&cm.name)
        {
            let c = kube
                .get_config_map(namespace, &cm.name)
                .await
                .map_err(TemplateFromError::Read)?
                .ok_or_else(|| TemplateFromError::ConfigMapNotFound(cm.name.clone()))?;
            out.config_maps
                .insert(cm.name.clone(), c.data.unwrap_or_default());
        }
        if let Some(sr) = &tf.secret
            && !out.secrets.contains_key(&sr.name)
        {
            let s = kube
                .get_secret(namespace, &sr.name)
                .await
                .map_err(TemplateFromError::Read)?
                .ok_or_else(|| TemplateFromError::SecretNotFound(sr.name.clone()))?;
            out.secrets.insert(
                sr.name.clone(),
                s.data
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, v.0))
                    .collect(),
            );
        }
    }
    Ok(out)
}

/// Why the sources could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The Secret named in `selector.secret.name` does not exist.
    #[error("source secret {0} does not exist")]
    NotFound(String),
    /// Anything else (API error, bad selector, generator failure).
    #[error("{0}")]
    Failed(#[from] PushError),
}

fn selector_params(sel: &LabelSelector) -> Result<ListParams, PushError> {
    let s = Selector::try_from(sel.clone()).map_err(PushError::Labels)?;
    Ok(ListParams::default().labels_from(&s))
}

/// The Secrets a PushSecret pushes: the named Secret, the generator's output, or every Secret of
/// the namespace matching the label selector (sorted by name).
pub async fn resolve_sources(
    client: &Client,
    kube: &dyn KubeAccess,
    generators: &Generators,
    spec: &PushSecretSpec,
    namespace: &str,
    name: &str,
) -> Result<Vec<Secret>, SourceError> {
    match source_of(spec)? {
        Source::Named(n) => {
            let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
            match api.get_opt(n).await.map_err(PushError::GetSource)? {
                Some(s) => Ok(vec![s]),
                None => Err(SourceError::NotFound(n.to_string())),
            }
        }
        Source::Generator(g) => {
            let data = generators
                .generate(g, namespace, &generator_consumer(namespace, name))
                .await
                .map_err(|cause| PushError::Generator {
                    kind: g.kind.as_str().to_string(),
                    name: g.name.clone(),
                    cause,
                })?;
            Ok(vec![generated_secret(namespace, data)])
        }
        Source::Selector(sel) => {
            let s = Selector::try_from(sel.clone()).map_err(PushError::Labels)?;
            let sel = s.to_string();
            let mut list = kube
                .list_secrets(namespace, Some(sel.as_str()).filter(|s| !s.is_empty()))
                .await
                .map_err(PushError::ListSources)?;
            list.sort_by_key(|s| s.name_any());
            Ok(list)
        }
    }
}

fn candidate<K: Resource>(
    store: &K,
    kind: StoreKind,
    controller: Option<String>,
) -> StoreCandidate {
    StoreCandidate {
        store: StoreRef {
            kind,
            name: store.meta().name.clone().unwrap_or_default(),
        },
        labels: store.meta().labels.clone().unwrap_or_default(),
        deleting: store.meta().deletion_timestamp.is_some(),
        controller,
    }
}

/// The stores of `secretStoreRefs`: named stores are read (an error when missing, as ESO), label
/// selectors list SecretStores of `namespace` or ClusterSecretStores.
pub async fn resolve_stores(
    client: &Client,
    spec: &PushSecretSpec,
    namespace: &str,
) -> Result<Vec<StoreCandidate>, PushError> {
    let ss: Api<SecretStore> = Api::namespaced(client.clone(), namespace);
    let css: Api<ClusterSecretStore> = Api::all(client.clone());
    let mut out = Vec::new();
    for r in &spec.secret_store_refs {
        let kind = kind_or_default(r.kind);
        if let Some(sel) = &r.label_selector {
            let lp = selector_params(sel)?;
            match kind {
                StoreKind::SecretStore => {
                    let l = ss
                        .list(&lp)
                        .await
                        .map_err(|source| PushError::ListStores { kind, source })?;
                    out.extend(
                        l.items
                            .iter()
                            .map(|s| candidate(s, kind, s.spec.controller.clone())),
                    );
                }
                StoreKind::ClusterSecretStore => {
                    let l = css
                        .list(&lp)
                        .await
                        .map_err(|source| PushError::ListStores { kind, source })?;
                    out.extend(
                        l.items
                            .iter()
                            .map(|s| candidate(s, kind, s.spec.controller.clone())),
                    );
                }
            }
            continue;
        }
        let Some(n) = r.name.as_deref().filter(|n| !n.is_empty()) else {
            return Err(PushError::NoStoreName);
        };
        // ESO's texts: `could not get SecretStore "x", secretstores.external-secrets.io "x" not
        // found` (the API server's message for other errors), never kube's Debug rendering.
        let get_err = |source| PushError::GetStore {
            kind,
            name: n.to_string(),
            source,
        };
        let not_found = || {
            PushError::Store(StoreError::NotFound {
                kind,
                name: n.to_string(),
            })
        };
        match kind {
            StoreKind::SecretStore => {
                let s = ss
                    .get_opt(n)
                    .await
                    .map_err(get_err)?
                    .ok_or_else(not_found)?;
                out.push(candidate(&s, kind, s.spec.controller.clone()));
            }
            StoreKind::ClusterSecretStore => {
                let s = css
                    .get_opt(n)
                    .await
                    .map_err(get_err)?
                    .ok_or_else(not_found)?;
                out.push(candidate(&s, kind, s.spec.controller.clone()));
            }
        }
    }
    Ok(out)
}
