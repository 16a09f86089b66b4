//! ClusterExternalSecret (eso-inventory §3): a pure planning core ([`select`], [`plan`],
//! [`status`], [`desired_es`], [`es_up_to_date`]) and the thin kube IO around it ([`run`]).
//!
//! Namespaces and ExternalSecrets are read from reflector caches (never re-listed per reconcile);
//! namespace events are mapped to the ClusterExternalSecrets whose selection matches, so a new
//! matching namespace gets its ExternalSecret at once.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use esr_api::consts::{
    ANNOTATION_FORCE_SYNC, API_VERSION_V1, FINALIZER_CES, FINALIZER_CES_NAMESPACE_PREFIX,
};
use esr_api::v1::{
    ClusterExternalSecret, ClusterExternalSecretNamespaceFailure, ClusterExternalSecretSpec,
    ClusterExternalSecretStatus, ClusterExternalSecretStatusCondition, ExternalSecret,
};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, OwnerReference};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{self, ObjectRef, ReflectHandle, Store};
use kube::runtime::{Controller, WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use regex::Regex;
use tracing::{debug, info, warn};

/// Reason of a namespace holding an ExternalSecret this ClusterExternalSecret does not own.
pub const ERR_ALREADY_EXISTS: &str = "external secret already exists in namespace";
/// Ready=False message when any namespace failed.
pub const MSG_NAMESPACES_FAILED: &str = "one or more namespaces failed";
/// Requeue interval when `refreshTime` is unset.
pub const DEFAULT_REFRESH: Duration = Duration::from_secs(3600);
/// Kind of the owner reference on created ExternalSecrets.
pub const KIND: &str = "ClusterExternalSecret";

/// The per-CES finalizer put on target namespaces.
pub fn namespace_finalizer(ces_name: &str) -> String {
    format!("{FINALIZER_CES_NAMESPACE_PREFIX}{ces_name}")
}

/// Name of the created ExternalSecrets (`externalSecretName`, default the CES name).
pub fn es_name(ces: &ClusterExternalSecret) -> String {
    ces.spec
        .external_secret_name
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| ces.name_any())
}

/// `refreshTime` (default 1h); `None` for `0s` (no periodic requeue).
pub fn refresh_interval(spec: &ClusterExternalSecretSpec) -> Option<Duration> {
    refresh_from(spec.refresh_time.as_deref())
}

/// A `refreshTime` value (default 1h when unset or invalid); `None` for `0s`.
pub fn refresh_from(refresh_time: Option<&str>) -> Option<Duration> {
    match refresh_time.filter(|s| !s.is_empty()) {
        None => Some(DEFAULT_REFRESH),
        Some(s) => match esr_api::duration::parse(s).ok().and_then(|d| d.to_std()) {
            Some(d) if d.is_zero() => None,
            Some(d) => Some(d),
            None => Some(DEFAULT_REFRESH),
        },
    }
}

/// The namespace selection of a ClusterExternalSecret: `namespaceSelectors`, the deprecated
/// `namespaceSelector` and `namespaces`, and the esr-only `namespaceRegexes`, all ORed.
#[derive(Debug, Clone)]
pub struct Selection {
    selectors: Vec<LabelSelector>,
    names: BTreeSet<String>,
    regexes: Vec<Regex>,
}

impl Selection {
    /// A selection made of label selectors only (ORed), as ClusterPushSecret's
    /// `namespaceSelectors`.
    pub fn from_selectors(selectors: Vec<LabelSelector>) -> Selection {
        Selection {
            selectors,
            names: BTreeSet::new(),
            regexes: Vec::new(),
        }
    }

    /// Builds the selection; an invalid regex is an error.
    pub fn from_spec(spec: &ClusterExternalSecretSpec) -> Result<Selection, String> {
        let mut selectors: Vec<LabelSelector> =
            spec.namespace_selectors.clone().unwrap_or_default();
        if let Some(s) = &spec.namespace_selector {
            selectors.push(s.clone());
        }
        let names = spec.namespaces.iter().flatten().cloned().collect();
        let regexes = spec
            .namespace_regexes
            .iter()
            .flatten()
            .map(|r| {
                Regex::new(r).map_err(|e| format!("invalid namespaceRegexes entry {r:?}: {e}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Selection {
            selectors,
            names,
            regexes,
        })
    }

    /// Whether a namespace (name and labels) is selected; an invalid label selector is an error.
    pub fn matches(&self, name: &str, labels: &BTreeMap<String, String>) -> Result<bool, String> {
        if self.names.contains(name) || self.regexes.iter().any(|r| r.is_match(name)) {
            return Ok(true);
        }
        for s in &self.selectors {
            if esr_provider::store::label_selector_matches(s, labels)? {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

/// What the plan needs to know about a namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NsView {
    /// Name.
    pub name: String,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Being deleted.
    pub terminating: bool,
    /// Carries this CES's namespace finalizer.
    pub has_finalizer: bool,
}

/// An existing ExternalSecret relevant to the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EsRef {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Controlled by this ClusterExternalSecret (ownerRef uid).
    pub owned: bool,
}

/// The changes a reconcile makes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CesPlan {
    /// Namespaces that get (or keep) the ExternalSecret, sorted.
    pub apply: Vec<String>,
    /// Namespaces that need the CES finalizer added.
    pub add_finalizer: Vec<String>,
    /// Namespaces whose CES finalizer is removed (no longer matching, or terminating).
    pub remove_finalizer: Vec<String>,
    /// Owned ExternalSecrets to delete (`(namespace, name)`): namespace no longer matches, or an
    /// old name after `externalSecretName` changed.
    pub delete: Vec<(String, String)>,
    /// Namespaces that failed before any write, with the reason.
    pub failed: Vec<(String, String)>,
}

/// Which namespaces are selected (sorted); terminating namespaces are left out.
pub fn select(sel: &Selection, namespaces: &[NsView]) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for ns in namespaces {
        if !ns.terminating && sel.matches(&ns.name, &ns.labels)? {
            out.push(ns.name.clone());
        }
    }
    out.sort();
    Ok(out)
}

/// Plans a reconcile of a live (not deleting) ClusterExternalSecret.
///
/// `existing` holds every ExternalSecret named `target` plus every ExternalSecret owned by this
/// ClusterExternalSecret (any name).
pub fn plan(
    sel: &Result<Selection, String>,
    target: &str,
    namespaces: &[NsView],
    existing: &[EsRef],
) -> CesPlan {
    let mut p = CesPlan::default();
    let selected = match sel
        .as_ref()
        .map_err(Clone::clone)
        .and_then(|s| select(s, namespaces))
    {
        Ok(s) => s,
        Err(e) => {
            p.failed.push(("unknown".to_string(), e));
            return p;
        }
    };
    let selected_set: BTreeSet<&str> = selected.iter().map(String::as_str).collect();
    let foreign: BTreeSet<&str> = existing
        .iter()
        .filter(|e| e.name == target && !e.owned)
        .map(|e| e.namespace.as_str())
        .collect();
    for ns in namespaces {
        let wanted = selected_set.contains(ns.name.as_str());
        if wanted {
            if foreign.contains(ns.name.as_str()) {
                p.failed
                    .push((ns.name.clone(), ERR_ALREADY_EXISTS.to_string()));
                continue;
            }
            p.apply.push(ns.name.clone());
            if !ns.has_finalizer {
                p.add_finalizer.push(ns.name.clone());
            }
        } else if ns.has_finalizer {
            p.remove_finalizer.push(ns.name.clone());
        }
    }
    let terminating: BTreeSet<&str> = namespaces
        .iter()
        .filter(|n| n.terminating)
        .map(|n| n.name.as_str())
        .collect();
    for e in existing.iter().filter(|e| e.owned) {
        let keep = e.name == target && selected_set.contains(e.namespace.as_str());
        if !keep && !terminating.contains(e.namespace.as_str()) {
            p.delete.push((e.namespace.clone(), e.name.clone()));
        }
    }
    p.apply.sort();
    p.failed.sort();
    p.delete.sort();
    p.remove_finalizer.sort();
    p
}

/// The status after a reconcile: provisioned and failed namespaces sorted, Ready condition.
pub fn status(
    es_name: &str,
    mut provisioned: Vec<String>,
    mut failed: Vec<(String, String)>,
) -> ClusterExternalSecretStatus {
    provisioned.sort();
    provisioned.dedup();
    failed.sort();
    let cond = if failed.is_empty() {
        ClusterExternalSecretStatusCondition {
            type_: esr_api::consts::CONDITION_READY.to_string(),
            status: esr_api::consts::CONDITION_TRUE.to_string(),
            message: None,
        }
    } else {
        ClusterExternalSecretStatusCondition {
            type_: esr_api::consts::CONDITION_READY.to_string(),
            status: esr_api::consts::CONDITION_FALSE.to_string(),
            message: Some(MSG_NAMESPACES_FAILED.to_string()),
        }
    };
    ClusterExternalSecretStatus {
        external_secret_name: Some(es_name.to_string()),
        failed_namespaces: (!failed.is_empty()).then(|| {
            failed
                .into_iter()
                .map(
                    |(namespace, reason)| ClusterExternalSecretNamespaceFailure {
                        namespace,
                        reason: Some(reason),
                    },
                )
                .collect()
        }),
        provisioned_namespaces: (!provisioned.is_empty()).then_some(provisioned),
        conditions: Some(vec![cond]),
        observed_generation: None,
    }
}

/// Whether every failure of a fan-out reconcile is a foreign child (`already_exists`, which no
/// retry fixes), i.e. every child the parent owns was applied.
pub fn only_foreign_failures(failed: &[(String, String)], already_exists: &str) -> bool {
    failed.iter().all(|(_, r)| r == already_exists)
}

/// Whether an ExternalSecret is controlled by the ClusterExternalSecret with this uid.
pub fn owned_by(es: &ExternalSecret, uid: &str) -> bool {
    es.owner_references()
        .iter()
        .any(|o| o.controller == Some(true) && o.uid == uid)
}

fn owner_ref(ces: &ClusterExternalSecret) -> OwnerReference {
    OwnerReference {
        api_version: API_VERSION_V1.to_string(),
        kind: KIND.to_string(),
        name: ces.name_any(),
        uid: ces.uid().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

fn desired_labels(ces: &ClusterExternalSecret) -> BTreeMap<String, String> {
    ces.spec
        .external_secret_metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default()
}

/// Annotations of the created ExternalSecret: `externalSecretMetadata.annotations`, plus the CES's
/// `external-secrets.io/force-sync` annotation mirrored (absent when the CES has none).
pub fn desired_annotations(ces: &ClusterExternalSecret) -> BTreeMap<String, String> {
    let mut a = ces
        .spec
        .external_secret_metadata
        .as_ref()
        .and_then(|m| m.annotations.clone())
        .unwrap_or_default();
    a.remove(ANNOTATION_FORCE_SYNC);
    if let Some(v) = ces.annotations().get(ANNOTATION_FORCE_SYNC) {
        a.insert(ANNOTATION_FORCE_SYNC.to_string(), v.clone());
    }
    a
}

/// The ExternalSecret to create in `namespace`.
pub fn desired_es(ces: &ClusterExternalSecret, namespace: &str) -> ExternalSecret {
    ExternalSecret {
        metadata: crate::common::fanout::child_meta(
            es_name(ces),
            namespace,
            desired_labels(ces),
            desired_annotations(ces),
            owner_ref(ces),
        ),
        spec: ces.spec.external_secret_spec.clone(),
        status: None,
    }
}

/// Applies the CES-controlled parts onto an existing ExternalSecret (labels and annotations
/// replaced, spec copied, controller ownerRef set; other owner references kept).
pub fn updated_es(ces: &ClusterExternalSecret, existing: &ExternalSecret) -> ExternalSecret {
    let mut es = existing.clone();
    crate::common::fanout::take_over_meta(
        &mut es.metadata,
        desired_labels(ces),
        desired_annotations(ces),
        owner_ref(ces),
    );
    es.spec = ces.spec.external_secret_spec.clone();
    es.status = None;
    es
}

/// `want` is contained in `have` (objects: every key of `want` present and contained; arrays:
/// same length, elementwise contained; scalars equal). API-server defaults only add fields, so a
/// created object contains what was sent.
pub fn json_contained(want: &serde_json::Value, have: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (want, have) {
        (Value::Object(w), Value::Object(h)) => w
            .iter()
            .all(|(k, v)| v.is_null() || h.get(k).is_some_and(|hv| json_contained(v, hv))),
        (Value::Array(w), Value::Array(h)) => {
            w.len() == h.len() && w.iter().zip(h).all(|(a, b)| json_contained(a, b))
        }
        _ => want == have,
    }
}

/// Whether `existing` already carries everything the CES wants. `spec_checked` false forces an
/// update (the CES changed since the last full apply, so removed fields must go).
pub fn es_up_to_date(
    ces: &ClusterExternalSecret,
    existing: &ExternalSecret,
    spec_checked: bool,
) -> bool {
    let uid = ces.uid().unwrap_or_default();
    if !spec_checked || !owned_by(existing, &uid) {
        return false;
    }
    if existing.labels() != &desired_labels(ces)
        || existing.annotations() != &desired_annotations(ces)
    {
        return false;
    }
    match (
        serde_json::to_value(&ces.spec.external_secret_spec),
        serde_json::to_value(&existing.spec),
    ) {
        (Ok(w), Ok(h)) => json_contained(&w, &h),
        _ => false,
    }
}

/// Builds the namespace view for `ces_name`.
pub fn ns_view(ns: &Namespace, ces_name: &str) -> NsView {
    let fin = namespace_finalizer(ces_name);
    NsView {
        name: ns.name_any(),
        labels: ns.labels().clone(),
        terminating: ns.metadata.deletion_timestamp.is_some()
            || ns.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Terminating"),
        has_finalizer: ns.finalizers().contains(&fin),
    }
}

// ------------------------------------------------------------------------------------------------
// IO
// ------------------------------------------------------------------------------------------------

/// Errors of a ClusterExternalSecret reconcile (retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Kubernetes API error.
    #[error("kubernetes API error: {0}")]
    Kube(#[from] kube::Error),
    /// Some namespaces failed (recorded in status).
    #[error("{0}")]
    Namespaces(String),
}

/// What the [`Observe`] hook is told about an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Observation {
    /// A reconcile took `took`; `ready` is the Ready condition it set (`None` when unknown).
    Reconciled {
        /// Duration of the reconcile.
        took: Duration,
        /// Ready condition status, when known.
        ready: Option<bool>,
    },
    /// The object was deleted: its series go away.
    Deleted,
}

/// Called with the object name after each reconcile and when the object is deleted, for
/// `clusterexternalsecret_reconcile_duration` / `clusterexternalsecret_status_condition` (and the
/// `clusterpushsecret_*` pair for the ClusterPushSecret controller).
pub type Observe = Arc<dyn Fn(&str, Observation) + Send + Sync>;

/// Reconciler state.
pub struct CesContext {
    client: Client,
    namespaces: Store<Namespace>,
    external_secrets: Store<ExternalSecret>,
    observe: Option<Observe>,
    /// CES uid → generation of the last reconcile where every ExternalSecret was applied.
    applied: Mutex<HashMap<String, i64>>,
    failures: crate::common::refresh::Backoffs<String>,
}

pub(crate) fn is_status(e: &kube::Error, code: u16) -> bool {
    esr_provider::error::kube_status_code(e) == Some(code)
}

async fn patch_ns_finalizers(
    api: &Api<Namespace>,
    ns: &Namespace,
    add: Option<&str>,
    remove: Option<&str>,
) -> Result<(), kube::Error> {
    let mut f: Vec<String> = ns
        .finalizers()
        .iter()
        .filter(|f| Some(f.as_str()) != remove)
        .cloned()
        .collect();
    if let Some(a) = add
        && !f.iter().any(|x| x == a)
    {
        f.push(a.to_string());
    }
    let patch = serde_json::json!({"metadata": {"finalizers": f, "resourceVersion": ns.resource_version()}});
    match api
        .patch(
            &ns.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if is_status(&e, 404) => Ok(()),
        Err(e) => Err(e),
    }
}

async fn delete_es(client: &Client, ns: &str, name: &str) -> Result<(), kube::Error> {
    let api: Api<ExternalSecret> = Api::namespaced(client.clone(), ns);
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(()),
        Err(e) if is_status(&e, 404) => Ok(()),
        Err(e) => Err(e),
    }
}

async fn set_ces_finalizers(
    api: &Api<ClusterExternalSecret>,
    ces: &ClusterExternalSecret,
    finalizers: Vec<String>,
) -> Result<(), kube::Error> {
    let patch = serde_json::json!({"metadata": {"finalizers": finalizers, "resourceVersion": ces.resource_version()}});
    api.patch(
        &ces.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .map(|_| ())
}

/// The ClusterExternalSecret reconciler.
pub async fn reconcile(
    ces: Arc<ClusterExternalSecret>,
    ctx: Arc<CesContext>,
) -> Result<Action, Error> {
    let started = Instant::now();
    let name = ces.name_any();
    let res = reconcile_inner(&ces, &ctx).await;
    if let Some(hook) = &ctx.observe {
        // A CES being deleted reports Deleted (its watch deletion may arrive first).
        let obs = if ces.meta().deletion_timestamp.is_some() {
            Observation::Deleted
        } else {
            Observation::Reconciled {
                took: started.elapsed(),
                ready: match &res {
                    Ok((_, ready)) => *ready,
                    // Status was written with Ready=False before the error.
                    Err(Error::Namespaces(_)) => Some(false),
                    Err(Error::Kube(_)) => None,
                },
            }
        };
        hook(&name, obs);
    }
    match res {
        Ok((a, _)) => {
            ctx.failures.reset(&name);
            Ok(a)
        }
        Err(e) => Err(e),
    }
}

async fn reconcile_inner(
    ces: &ClusterExternalSecret,
    ctx: &CesContext,
) -> Result<(Action, Option<bool>), Error> {
    let name = ces.name_any();
    let uid = ces.uid().unwrap_or_default();
    let api: Api<ClusterExternalSecret> = Api::all(ctx.client.clone());
    let ns_api: Api<Namespace> = Api::all(ctx.client.clone());
    let _ = ctx.namespaces.wait_until_ready().await;
    let _ = ctx.external_secrets.wait_until_ready().await;
    let fin = namespace_finalizer(&name);

    if ces.meta().deletion_timestamp.is_some() {
        if ces.finalizers().iter().any(|f| f == FINALIZER_CES) {
            for ns in ctx.namespaces.state() {
                if ns.finalizers().contains(&fin) {
                    patch_ns_finalizers(&ns_api, &ns, None, Some(&fin)).await?;
                }
            }
            for es in ctx.external_secrets.state() {
                if owned_by(&es, &uid) {
                    delete_es(
                        &ctx.client,
                        &es.namespace().unwrap_or_default(),
                        &es.name_any(),
                    )
                    .await?;
                }
            }
            let remaining = ces
                .finalizers()
                .iter()
                .filter(|f| *f != FINALIZER_CES)
                .cloned()
                .collect();
            set_ces_finalizers(&api, ces, remaining).await?;
            info!(ces = %name, "cleaned up ClusterExternalSecret");
        }
        ctx.applied
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&uid);
        return Ok((Action::await_change(), None));
    }
    if !ces.finalizers().iter().any(|f| f == FINALIZER_CES) {
        let mut f = ces.finalizers().to_vec();
        f.push(FINALIZER_CES.to_string());
        set_ces_finalizers(&api, ces, f).await?;
    }

    let target = es_name(ces);
    let namespaces: Vec<Arc<Namespace>> = ctx.namespaces.state();
    let views: Vec<NsView> = namespaces.iter().map(|n| ns_view(n, &name)).collect();
    let by_name: HashMap<String, Arc<Namespace>> = namespaces
        .iter()
        .map(|n| (n.name_any(), n.clone()))
        .collect();
    let es_cache: HashMap<(String, String), Arc<ExternalSecret>> = ctx
        .external_secrets
        .state()
        .into_iter()
        .filter(|e| e.name_any() == target || owned_by(e, &uid))
        .map(|e| ((e.namespace().unwrap_or_default(), e.name_any()), e))
        .collect();
    let existing: Vec<EsRef> = es_cache
        .iter()
        .map(|((ns, n), e)| EsRef {
            namespace: ns.clone(),
            name: n.clone(),
            owned: owned_by(e, &uid),
        })
        .collect();
    let sel = Selection::from_spec(&ces.spec);
    let p = plan(&sel, &target, &views, &existing);

    let generation = ces.meta().generation.unwrap_or_default();
    let spec_checked = ctx
        .applied
        .lock()
        .unwrap_or_else(|pe| pe.into_inner())
        .get(&uid)
        == Some(&generation);

    let mut failed = p.failed.clone();
    let mut provisioned = Vec::new();
    for ns in &p.remove_finalizer {
        if let Some(n) = by_name.get(ns) {
            patch_ns_finalizers(&ns_api, n, None, Some(&fin)).await?;
        }
    }
    for (ns, es) in &p.delete {
        delete_es(&ctx.client, ns, es).await?;
        debug!(ces = %name, namespace = %ns, es = %es, "deleted ExternalSecret");
    }
    let pp = PostParams::default();
    for ns in &p.apply {
        if p.add_finalizer.contains(ns)
            && let Some(n) = by_name.get(ns)
            && let Err(e) = patch_ns_finalizers(&ns_api, n, Some(&fin), None).await
        {
            failed.push((ns.clone(), e.to_string()));
            continue;
        }
        let es_api: Api<ExternalSecret> = Api::namespaced(ctx.client.clone(), ns);
        let res = match es_cache.get(&(ns.clone(), target.clone())) {
            None => match es_api.create(&pp, &desired_es(ces, ns)).await {
                Err(e) if is_status(&e, 409) => Err(e),
                other => other.map(|_| ()),
            },
            Some(cur) if es_up_to_date(ces, cur, spec_checked) => Ok(()),
            Some(cur) => es_api
                .replace(&target, &pp, &updated_es(ces, cur))
                .await
                .map(|_| ()),
        };
        match res {
            Ok(()) => provisioned.push(ns.clone()),
            Err(e) => failed.push((ns.clone(), e.to_string())),
        }
    }
    // Every ExternalSecret this CES owns was applied for this generation (a foreign
    // ExternalSecret is a lasting failure that no retry fixes): later reconciles compare instead
    // of replacing each one (a replace from a cache that lags the ExternalSecret controller's
    // own writes would conflict, and retrying would keep conflicting).
    if only_foreign_failures(&failed, ERR_ALREADY_EXISTS) {
        ctx.applied
            .lock()
            .unwrap_or_else(|pe| pe.into_inner())
            .insert(uid.clone(), generation);
    }

    let mut st = status(&target, provisioned, failed.clone());
    st.observed_generation = ces.meta().generation;
    let ready = failed.is_empty();
    if ces.status.as_ref() != Some(&st) {
        let mut body = serde_json::to_value(&st).unwrap_or_default();
        // Merge patch: clear lists that became empty.
        if let Some(o) = body.as_object_mut() {
            o.entry("failedNamespaces")
                .or_insert(serde_json::Value::Null);
            o.entry("provisionedNamespaces")
                .or_insert(serde_json::Value::Null);
        }
        let patch = serde_json::json!({ "status": body });
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    if !ready {
        let any_transient = failed.iter().any(|(_, r)| r != ERR_ALREADY_EXISTS);
        if any_transient {
            return Err(Error::Namespaces(MSG_NAMESPACES_FAILED.to_string()));
        }
    }
    let action = match refresh_interval(&ces.spec) {
        Some(d) => Action::requeue(d),
        None => Action::await_change(),
    };
    Ok((action, Some(ready)))
}

fn error_policy(ces: Arc<ClusterExternalSecret>, err: &Error, ctx: Arc<CesContext>) -> Action {
    let delay = ctx.failures.failed(ces.name_any());
    warn!(ces = %ces.name_any(), error = %err, retry_in = ?delay, "ClusterExternalSecret reconcile failed");
    Action::requeue(delay)
}

/// CESs (from the cache) that select a namespace or carry their finalizer on it.
pub fn ces_for_namespace(
    store: &Store<ClusterExternalSecret>,
    ns: &Namespace,
) -> Vec<ObjectRef<ClusterExternalSecret>> {
    let name = ns.name_any();
    store
        .state()
        .iter()
        .filter(|c| {
            let has_fin = ns
                .finalizers()
                .iter()
                .any(|f| *f == namespace_finalizer(&c.name_any()));
            has_fin
                || Selection::from_spec(&c.spec)
                    .and_then(|s| s.matches(&name, ns.labels()))
                    .unwrap_or(false)
        })
        .map(|c| ObjectRef::from_obj(&**c))
        .collect()
}

/// CESs (from the cache) owning an ExternalSecret or targeting its name (a foreign one going away).
pub fn ces_for_es(
    store: &Store<ClusterExternalSecret>,
    es: &ExternalSecret,
) -> Vec<ObjectRef<ClusterExternalSecret>> {
    let n = es.name_any();
    store
        .state()
        .iter()
        .filter(|c| owned_by(es, &c.uid().unwrap_or_default()) || es_name(c) == n)
        .map(|c| ObjectRef::from_obj(&**c))
        .collect()
}

pub(crate) fn meta_hash<K: Resource>(o: &K, extra: u64) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let m = o.meta();
    m.generation.hash(&mut h);
    m.labels.hash(&mut h);
    m.annotations.hash(&mut h);
    m.finalizers.hash(&mut h);
    m.owner_references
        .as_ref()
        .map(|r| r.iter().map(|o| o.uid.clone()).collect::<Vec<_>>())
        .hash(&mut h);
    m.deletion_timestamp.is_some().hash(&mut h);
    extra.hash(&mut h);
    h.finish()
}

/// Turns a reflector stream into "changed or deleted" objects: status-only and no-op updates are
/// dropped, deletions always pass.
pub(crate) fn changes<K, S>(
    stream: S,
    hash: fn(&K) -> u64,
) -> impl futures::Stream<Item = Result<K, watcher::Error>> + Send
where
    K: Resource + Clone + Send + 'static,
    S: futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send,
{
    let seen: Arc<Mutex<HashMap<String, u64>>> = Arc::default();
    stream
        .map(move |ev| {
            let seen = seen.clone();
            let out: Vec<Result<K, watcher::Error>> = match ev {
                Err(e) => vec![Err(e)],
                Ok(watcher::Event::Apply(o)) | Ok(watcher::Event::InitApply(o)) => {
                    let key = format!(
                        "{}/{}",
                        o.meta().namespace.clone().unwrap_or_default(),
                        o.meta().name.clone().unwrap_or_default()
                    );
                    let h = hash(&o);
                    let mut s = seen.lock().unwrap_or_else(|p| p.into_inner());
                    if s.insert(key, h) == Some(h) {
                        vec![]
                    } else {
                        vec![Ok(o)]
                    }
                }
                Ok(watcher::Event::Delete(o)) => {
                    let key = format!(
                        "{}/{}",
                        o.meta().namespace.clone().unwrap_or_default(),
                        o.meta().name.clone().unwrap_or_default()
                    );
                    seen.lock().unwrap_or_else(|p| p.into_inner()).remove(&key);
                    vec![Ok(o)]
                }
                Ok(_) => vec![],
            };
            futures::stream::iter(out)
        })
        .flatten()
}

pub(crate) fn ns_hash(ns: &Namespace) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    ns.labels().hash(&mut h);
    ns.metadata.deletion_timestamp.is_some().hash(&mut h);
    ns.status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .hash(&mut h);
    h.finish()
}

fn es_hash(es: &ExternalSecret) -> u64 {
    meta_hash(es, 0)
}

fn ces_hash(ces: &ClusterExternalSecret) -> u64 {
    meta_hash(ces, 0)
}

/// Events each subscriber of the shared Namespace watch may lag behind before the watch waits.
const NS_FEED_BUFFER: usize = 1024;

/// One Namespace watch and reflector cache shared by the ClusterExternalSecret and
/// ClusterPushSecret controllers. Subscribe (once per controller) before [`NamespaceFeed::run`];
/// every subscription must be polled, since the watch waits for the slowest subscriber.
pub struct NamespaceFeed {
    reader: Store<Namespace>,
    writer: reflector::store::Writer<Namespace>,
}

impl Default for NamespaceFeed {
    fn default() -> Self {
        Self::new()
    }
}

impl NamespaceFeed {
    /// An empty cache; nothing is watched until [`NamespaceFeed::run`].
    pub fn new() -> Self {
        let (reader, writer) = reflector::store_shared(NS_FEED_BUFFER);
        NamespaceFeed { reader, writer }
    }

    /// The namespace cache.
    pub fn store(&self) -> Store<Namespace> {
        self.reader.clone()
    }

    /// A stream of namespaces as they are listed, created or changed (deletions are not
    /// reported: a namespace is seen terminating first), with the cache as its reader.
    pub fn subscribe(&self) -> Option<ReflectHandle<Namespace>> {
        self.writer.subscribe()
    }

    /// Watches Namespaces into the cache and the subscriptions until `shutdown` resolves.
    pub async fn run(
        self,
        client: Client,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) {
        let api: Api<Namespace> = Api::all(client);
        let feed = reflector::reflector(self.writer, watcher(api, watcher::Config::default()))
            .default_backoff()
            .for_each(|ev| async move {
                if let Err(e) = ev {
                    debug!(error = %e, "Namespace watch");
                }
            });
        tokio::select! {
            _ = feed => {}
            _ = shutdown => {}
        }
    }
}

/// Namespaces from a shared subscription, with unchanged ones (same labels, same terminating
/// state) dropped.
pub(crate) fn namespace_changes(
    handle: ReflectHandle<Namespace>,
) -> impl futures::Stream<Item = Arc<Namespace>> + Send {
    let seen: Arc<Mutex<HashMap<String, u64>>> = Arc::default();
    handle.filter_map(move |ns| {
        let h = ns_hash(&ns);
        let changed = seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(ns.name_any(), h)
            != Some(h);
        async move { changed.then_some(ns) }
    })
}

/// Calls the hook with [`Observation::Deleted`] for each deletion in a watch stream.
pub(crate) fn observe_deletions<K, S>(
    stream: S,
    observe: Option<Observe>,
) -> impl futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send
where
    K: Resource + Send + 'static,
    S: futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send,
{
    stream.inspect(move |ev| {
        if let (Some(hook), Ok(watcher::Event::Delete(o))) = (&observe, ev) {
            hook(
                o.meta().name.as_deref().unwrap_or_default(),
                Observation::Deleted,
            );
        }
    })
}

/// Runs the ClusterExternalSecret controller until `shutdown` resolves. `namespaces` is a
/// subscription to the shared [`NamespaceFeed`] (whose cache is read through the handle).
pub async fn run(
    client: Client,
    concurrency: u16,
    observe: Option<Observe>,
    namespaces: ReflectHandle<Namespace>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let ns_reader = namespaces.reader();
    let (es_reader, es_writer) = reflector::store();
    let (ces_reader, ces_writer) = reflector::store();
    let es_api: Api<ExternalSecret> = Api::all(client.clone());
    let ces_api: Api<ClusterExternalSecret> = Api::all(client.clone());

    let ns_stream = namespace_changes(namespaces);
    let es_stream = changes(
        reflector::reflector(es_writer, watcher(es_api, watcher::Config::default()))
            .default_backoff(),
        es_hash,
    );
    let ces_stream = changes(
        observe_deletions(
            reflector::reflector(ces_writer, watcher(ces_api, watcher::Config::default()))
                .default_backoff(),
            observe.clone(),
        ),
        ces_hash,
    );
    let ctx = Arc::new(CesContext {
        client,
        namespaces: ns_reader,
        external_secrets: es_reader,
        observe,
        applied: Mutex::new(HashMap::new()),
        failures: Default::default(),
    });
    let r1 = ces_reader.clone();
    let r2 = ces_reader.clone();
    Controller::for_stream(ces_stream, ces_reader)
        .with_config(kube::runtime::controller::Config::default().concurrency(concurrency))
        .watches_shared_stream(ns_stream, move |ns: Arc<Namespace>| {
            ces_for_namespace(&r1, &ns)
        })
        .watches_stream(es_stream, move |es: ExternalSecret| ces_for_es(&r2, &es))
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|res| async move {
            if let Err(e) = res {
                debug!(error = %e, "ClusterExternalSecret controller event");
            }
        })
        .await;
}

#[cfg(test)]
#[path = "reconcile_tests.rs"]
mod tests;
