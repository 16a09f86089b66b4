//! ClusterPushSecret (eso-inventory §4): the same PushSecret in every namespace matched by
//! `namespaceSelectors`. A pure planning core ([`plan`], [`status`], [`errored_status`],
//! [`desired_ps`], [`ps_up_to_date`]) and the thin kube IO around it ([`run`]).
//!
//! As in ESO: no finalizer on the ClusterPushSecret nor on namespaces (owned PushSecrets go with
//! their owner through the garbage collector), reconcile is skipped while the ClusterPushSecret is
//! being deleted, a PushSecret it does not own is never touched (the namespace is reported in
//! `failedNamespaces`), PushSecrets are removed from namespaces that stop matching and under the
//! old name when `pushSecretName` changes. Namespaces come from the shared
//! [`NamespaceFeed`](crate::clusterexternalsecret::reconcile::NamespaceFeed) cache (never re-listed per reconcile) and a new
//! matching namespace gets its PushSecret at once.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use esr_api::consts::{
    API_VERSION_V1ALPHA1, CONDITION_FALSE, CONDITION_READY, CONDITION_TRUE,
    EVENT_SOURCE_CLUSTER_PUSHSECRET, REASON_PUSHSECRET_ERRORED,
};
use esr_api::v1alpha1::{
    ClusterPushSecret, ClusterPushSecretNamespaceFailure, ClusterPushSecretSpec,
    ClusterPushSecretStatus, PushSecret, PushSecretStatusCondition,
};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event as KubeEvent, EventType, Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef, ReflectHandle, Store};
use kube::runtime::{Controller, WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use tracing::{debug, info, warn};

use crate::clusterexternalsecret::reconcile::{
    MSG_NAMESPACES_FAILED, NsView, Observation, Observe, Selection, changes, is_status,
    json_contained, meta_hash, namespace_changes, observe_deletions, select,
};

/// Kind of the owner reference on created PushSecrets.
pub const KIND: &str = "ClusterPushSecret";
/// Reason of a namespace holding a PushSecret this ClusterPushSecret does not own.
pub const ERR_ALREADY_EXISTS: &str = "push secret already exists in namespace";
/// Prefix of the reason when creating or updating a PushSecret failed.
pub const ERR_CREATE_OR_UPDATE: &str = "could not create or update push secret";
/// Prefix of the reason when deleting a PushSecret from a namespace that stopped matching failed
/// (ESO's wording, "external secret" included).
pub const ERR_DELETE_OUTDATED: &str =
    "external secret in non matching namespace could not be deleted";
/// Ready=False (Errored) message when the namespace selectors cannot be evaluated.
pub const MSG_TARGET_NAMESPACES: &str = "failed to get target Namespaces";
/// Ready=False (Errored) message when PushSecrets under the old `pushSecretName` cannot be deleted.
pub const MSG_DELETE_OLD: &str = "failed to delete push secret";

/// Name of the created PushSecrets (`pushSecretName`, default the ClusterPushSecret's name).
pub fn ps_name(cps: &ClusterPushSecret) -> String {
    cps.spec
        .push_secret_name
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| cps.name_any())
}

/// `refreshTime` (default 1h); `None` for `0s` (no periodic requeue).
pub fn refresh_interval(spec: &ClusterPushSecretSpec) -> Option<Duration> {
    crate::clusterexternalsecret::reconcile::refresh_from(spec.refresh_time.as_deref())
}

/// The namespace selection: `namespaceSelectors`, ORed (none selects no namespace).
pub fn selection(spec: &ClusterPushSecretSpec) -> Selection {
    Selection::from_selectors(spec.namespace_selectors.clone().unwrap_or_default())
}

/// Whether a PushSecret is controlled by the ClusterPushSecret named `cps_name` (ESO compares the
/// controller reference's apiVersion, kind and name).
pub fn owned_by(ps: &PushSecret, cps_name: &str) -> bool {
    ps.owner_references().iter().any(|o| {
        o.controller == Some(true)
            && o.api_version == API_VERSION_V1ALPHA1
            && o.kind == KIND
            && o.name == cps_name
    })
}

/// The ClusterPushSecret controlling a PushSecret, if any.
pub fn controller_name(ps: &PushSecret) -> Option<&str> {
    ps.owner_references()
        .iter()
        .find(|o| {
            o.controller == Some(true) && o.api_version == API_VERSION_V1ALPHA1 && o.kind == KIND
        })
        .map(|o| o.name.as_str())
}

/// An existing PushSecret relevant to the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PsRef {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Controlled by this ClusterPushSecret.
    pub owned: bool,
}

/// The changes a reconcile makes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpsPlan {
    /// Owned PushSecrets under another name than `pushSecretName` (`(namespace, name)`): the old
    /// name after a rename. Deleted first; a failure stops the reconcile (Errored).
    pub delete_old: Vec<(String, String)>,
    /// The namespace selectors could not be evaluated (the reconcile stops, Errored).
    pub select_error: Option<String>,
    /// Owned PushSecrets in namespaces that no longer match (`(namespace, name)`).
    pub delete_outdated: Vec<(String, String)>,
    /// Namespaces that get (or keep) the PushSecret, sorted.
    pub apply: Vec<String>,
    /// Namespaces that failed before any write, with the reason.
    pub failed: Vec<(String, String)>,
}

/// Plans a reconcile of a live (not deleting) ClusterPushSecret.
///
/// `existing` holds every PushSecret named `target` plus every PushSecret owned by this
/// ClusterPushSecret (any name). Terminating namespaces are neither provisioned nor cleaned up
/// (their PushSecrets go with them).
pub fn plan(sel: &Selection, target: &str, namespaces: &[NsView], existing: &[PsRef]) -> CpsPlan {
    let mut p = CpsPlan::default();
    let terminating: BTreeSet<&str> = namespaces
        .iter()
        .filter(|n| n.terminating)
        .map(|n| n.name.as_str())
        .collect();
    p.delete_old = existing
        .iter()
        .filter(|e| e.owned && e.name != target && !terminating.contains(e.namespace.as_str()))
        .map(|e| (e.namespace.clone(), e.name.clone()))
        .collect();
    p.delete_old.sort();
    let selected = match select(sel, namespaces) {
        Ok(s) => s,
        Err(e) => {
            p.select_error = Some(e);
            return p;
        }
    };
    let selected_set: BTreeSet<&str> = selected.iter().map(String::as_str).collect();
    p.delete_outdated = existing
        .iter()
        .filter(|e| {
            e.owned
                && e.name == target
                && !selected_set.contains(e.namespace.as_str())
                && !terminating.contains(e.namespace.as_str())
        })
        .map(|e| (e.namespace.clone(), e.name.clone()))
        .collect();
    p.delete_outdated.sort();
    let foreign: BTreeSet<&str> = existing
        .iter()
        .filter(|e| e.name == target && !e.owned)
        .map(|e| e.namespace.as_str())
        .collect();
    for ns in selected {
        if foreign.contains(ns.as_str()) {
            p.failed.push((ns, ERR_ALREADY_EXISTS.to_string()));
        } else {
            p.apply.push(ns);
        }
    }
    p.failed.sort();
    p
}

fn failures(mut failed: Vec<(String, String)>) -> Option<Vec<ClusterPushSecretNamespaceFailure>> {
    failed.sort();
    failed.dedup_by(|a, b| a.0 == b.0);
    (!failed.is_empty()).then(|| {
        failed
            .into_iter()
            .map(|(namespace, reason)| ClusterPushSecretNamespaceFailure {
                namespace,
                reason: Some(reason),
            })
            .collect()
    })
}

/// Replaces the Ready condition, keeping the other conditions (ESO filters the type out, then
/// appends).
fn with_ready(
    prev: Option<&ClusterPushSecretStatus>,
    cond: PushSecretStatusCondition,
) -> Vec<PushSecretStatusCondition> {
    let mut out: Vec<PushSecretStatusCondition> = prev
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default()
        .into_iter()
        .filter(|c| c.type_ != CONDITION_READY)
        .collect();
    out.push(cond);
    out
}

/// The status after a completed reconcile: provisioned and failed namespaces sorted, and the
/// Ready condition (True without message; False with `one or more namespaces failed`; as in ESO,
/// without reason or transition time).
pub fn status(
    prev: Option<&ClusterPushSecretStatus>,
    ps_name: &str,
    mut provisioned: Vec<String>,
    failed: Vec<(String, String)>,
) -> ClusterPushSecretStatus {
    provisioned.sort();
    provisioned.dedup();
    let cond = if failed.is_empty() {
        PushSecretStatusCondition {
            type_: CONDITION_READY.to_string(),
            status: CONDITION_TRUE.to_string(),
            ..Default::default()
        }
    } else {
        PushSecretStatusCondition {
            type_: CONDITION_READY.to_string(),
            status: CONDITION_FALSE.to_string(),
            message: Some(MSG_NAMESPACES_FAILED.to_string()),
            ..Default::default()
        }
    };
    ClusterPushSecretStatus {
        failed_namespaces: failures(failed),
        provisioned_namespaces: (!provisioned.is_empty()).then_some(provisioned),
        push_secret_name: Some(ps_name.to_string()),
        conditions: Some(with_ready(prev, cond)),
    }
}

/// The status of a reconcile that stopped early (ESO's `markAsFailed`): Ready=False with reason
/// `Errored` and `message`; the transition time is kept when the status did not change.
/// `failed`, when given, replaces `failedNamespaces`; provisioned namespaces are kept.
pub fn errored_status(
    prev: Option<&ClusterPushSecretStatus>,
    ps_name: &str,
    message: &str,
    failed: Option<Vec<(String, String)>>,
    now: Time,
) -> ClusterPushSecretStatus {
    let mut st = prev.cloned().unwrap_or_default();
    let cur = prev
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == CONDITION_READY));
    let mut cond = PushSecretStatusCondition {
        type_: CONDITION_READY.to_string(),
        status: CONDITION_FALSE.to_string(),
        reason: Some(REASON_PUSHSECRET_ERRORED.to_string()),
        message: Some(message.to_string()),
        last_transition_time: Some(now),
    };
    match cur {
        Some(c)
            if c.status == cond.status && c.reason == cond.reason && c.message == cond.message =>
        {
            cond = c.clone();
        }
        Some(c) if c.status == cond.status && c.last_transition_time.is_some() => {
            cond.last_transition_time = c.last_transition_time.clone();
        }
        _ => {}
    }
    st.conditions = Some(with_ready(prev, cond));
    st.push_secret_name = Some(ps_name.to_string());
    if let Some(f) = failed {
        st.failed_namespaces = failures(f);
    }
    st
}

fn owner_ref(cps: &ClusterPushSecret) -> OwnerReference {
    OwnerReference {
        api_version: API_VERSION_V1ALPHA1.to_string(),
        kind: KIND.to_string(),
        name: cps.name_any(),
        uid: cps.uid().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

fn desired_labels(cps: &ClusterPushSecret) -> BTreeMap<String, String> {
    cps.spec
        .push_secret_metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default()
}

fn desired_annotations(cps: &ClusterPushSecret) -> BTreeMap<String, String> {
    cps.spec
        .push_secret_metadata
        .as_ref()
        .and_then(|m| m.annotations.clone())
        .unwrap_or_default()
}

/// The PushSecret to create in `namespace`: labels and annotations from `pushSecretMetadata`,
/// spec copied, a controller owner reference to the ClusterPushSecret.
pub fn desired_ps(cps: &ClusterPushSecret, namespace: &str) -> PushSecret {
    PushSecret {
        metadata: crate::common::fanout::child_meta(
            ps_name(cps),
            namespace,
            desired_labels(cps),
            desired_annotations(cps),
            owner_ref(cps),
        ),
        spec: cps.spec.push_secret_spec.clone(),
        status: None,
    }
}

/// Applies the ClusterPushSecret-controlled parts onto an existing PushSecret (labels and
/// annotations replaced, spec copied, controller reference set; other owner references and
/// finalizers kept).
pub fn updated_ps(cps: &ClusterPushSecret, existing: &PushSecret) -> PushSecret {
    let mut ps = existing.clone();
    crate::common::fanout::take_over_meta(
        &mut ps.metadata,
        desired_labels(cps),
        desired_annotations(cps),
        owner_ref(cps),
    );
    ps.spec = cps.spec.push_secret_spec.clone();
    ps.status = None;
    ps
}

/// Whether `existing` already carries everything the ClusterPushSecret wants. `spec_checked`
/// false forces an update (the ClusterPushSecret changed since the last full apply, so removed
/// fields must go).
pub fn ps_up_to_date(cps: &ClusterPushSecret, existing: &PushSecret, spec_checked: bool) -> bool {
    if !spec_checked || !owned_by(existing, &cps.name_any()) {
        return false;
    }
    let uid = cps.uid().unwrap_or_default();
    if !existing
        .owner_references()
        .iter()
        .any(|o| o.controller == Some(true) && o.uid == uid)
    {
        return false;
    }
    if existing.labels() != &desired_labels(cps)
        || existing.annotations() != &desired_annotations(cps)
    {
        return false;
    }
    match (
        serde_json::to_value(&cps.spec.push_secret_spec),
        serde_json::to_value(&existing.spec),
    ) {
        (Ok(w), Ok(h)) => json_contained(&w, &h),
        _ => false,
    }
}

/// Builds the namespace view (ClusterPushSecrets put no finalizer on namespaces).
pub fn ns_view(ns: &Namespace) -> NsView {
    NsView {
        name: ns.name_any(),
        labels: ns.labels().clone(),
        terminating: ns.metadata.deletion_timestamp.is_some()
            || ns.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Terminating"),
        has_finalizer: false,
    }
}

/// ClusterPushSecrets (from the cache) whose selectors match a namespace or whose status lists it
/// as provisioned (it may have stopped matching).
pub fn cps_for_namespace(
    store: &Store<ClusterPushSecret>,
    ns: &Namespace,
) -> Vec<ObjectRef<ClusterPushSecret>> {
    let name = ns.name_any();
    store
        .state()
        .iter()
        .filter(|c| {
            let provisioned = c
                .status
                .as_ref()
                .and_then(|s| s.provisioned_namespaces.as_ref())
                .is_some_and(|p| p.contains(&name));
            provisioned
                || selection(&c.spec)
                    .matches(&name, ns.labels())
                    .unwrap_or(false)
        })
        .map(|c| ObjectRef::from_obj(&**c))
        .collect()
}

/// ClusterPushSecrets (from the cache) owning a PushSecret or targeting its name (a foreign one
/// going away).
pub fn cps_for_ps(
    store: &Store<ClusterPushSecret>,
    ps: &PushSecret,
) -> Vec<ObjectRef<ClusterPushSecret>> {
    let n = ps.name_any();
    let owner = controller_name(ps);
    store
        .state()
        .iter()
        .filter(|c| owner == Some(c.name_any().as_str()) || ps_name(c) == n)
        .map(|c| ObjectRef::from_obj(&**c))
        .collect()
}

// ------------------------------------------------------------------------------------------------
// IO
// ------------------------------------------------------------------------------------------------

/// Errors of a ClusterPushSecret reconcile (retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Kubernetes API error.
    #[error("kubernetes API error: {0}")]
    Kube(#[from] kube::Error),
    /// The reconcile stopped early (recorded in status as Ready=False Errored).
    #[error("{message}: {cause}")]
    Errored {
        /// The condition message.
        message: String,
        /// What failed.
        cause: String,
    },
    /// Some namespaces failed with a retryable error (recorded in status).
    #[error("{0}")]
    Namespaces(String),
}

/// Reconciler state.
pub struct CpsContext {
    client: Client,
    namespaces: Store<Namespace>,
    push_secrets: Store<PushSecret>,
    observe: Option<Observe>,
    recorder: Recorder,
    /// ClusterPushSecret uid → generation of the last reconcile where every PushSecret was applied.
    applied: Mutex<HashMap<String, i64>>,
    failures: crate::common::refresh::Backoffs<String>,
}

async fn delete_ps(client: &Client, ns: &str, name: &str) -> Result<(), kube::Error> {
    let api: Api<PushSecret> = Api::namespaced(client.clone(), ns);
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(()),
        Err(e) if is_status(&e, 404) => Ok(()),
        Err(e) => Err(e),
    }
}

async fn warn_event(ctx: &CpsContext, cps: &ClusterPushSecret, note: &str) {
    let e = KubeEvent {
        type_: EventType::Warning,
        reason: REASON_PUSHSECRET_ERRORED.to_string(),
        note: Some(note.to_string()),
        action: REASON_PUSHSECRET_ERRORED.to_string(),
        secondary: None,
    };
    if let Err(err) = ctx.recorder.publish(&e, &cps.object_ref(&())).await {
        warn!(error = %err, "failed to publish event");
    }
}

async fn patch_status(
    api: &Api<ClusterPushSecret>,
    cps: &ClusterPushSecret,
    st: &ClusterPushSecretStatus,
) -> Result<(), kube::Error> {
    if cps.status.as_ref() == Some(st) {
        return Ok(());
    }
    let mut body = serde_json::to_value(st).unwrap_or_default();
    // Merge patch: clear lists that became empty.
    if let Some(o) = body.as_object_mut() {
        o.entry("failedNamespaces")
            .or_insert(serde_json::Value::Null);
        o.entry("provisionedNamespaces")
            .or_insert(serde_json::Value::Null);
    }
    let patch = serde_json::json!({ "status": body });
    api.patch_status(
        &cps.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .map(|_| ())
}

/// Creates the PushSecret, or updates it when it exists and is owned (the cache may lag behind).
async fn apply_ps(
    ctx: &CpsContext,
    cps: &ClusterPushSecret,
    ns: &str,
    cached: Option<&Arc<PushSecret>>,
    spec_checked: bool,
) -> Result<(), String> {
    let target = ps_name(cps);
    let api: Api<PushSecret> = Api::namespaced(ctx.client.clone(), ns);
    let pp = PostParams::default();
    let current: Option<PushSecret> = match cached {
        Some(c) => Some((**c).clone()),
        None => match api.create(&pp, &desired_ps(cps, ns)).await {
            Ok(_) => return Ok(()),
            Err(e) if is_status(&e, 409) => api
                .get_opt(&target)
                .await
                .map_err(|e| format!("{ERR_CREATE_OR_UPDATE}: {e}"))?,
            Err(e) => return Err(format!("{ERR_CREATE_OR_UPDATE}: {e}")),
        },
    };
    let Some(cur) = current else {
        return Err(format!(
            "{ERR_CREATE_OR_UPDATE}: PushSecret {ns}/{target} changed concurrently"
        ));
    };
    if !owned_by(&cur, &cps.name_any()) {
        return Err(ERR_ALREADY_EXISTS.to_string());
    }
    if ps_up_to_date(cps, &cur, spec_checked) {
        return Ok(());
    }
    api.replace(&target, &pp, &updated_ps(cps, &cur))
        .await
        .map(|_| ())
        .map_err(|e| format!("{ERR_CREATE_OR_UPDATE}: {e}"))
}

/// The ClusterPushSecret reconciler.
pub async fn reconcile(cps: Arc<ClusterPushSecret>, ctx: Arc<CpsContext>) -> Result<Action, Error> {
    let started = Instant::now();
    let name = cps.name_any();
    let deleting = cps.meta().deletion_timestamp.is_some();
    let res = if deleting {
        // ESO skips a ClusterPushSecret being deleted; the garbage collector removes its
        // PushSecrets through their owner references.
        debug!(cps = %name, "skipping ClusterPushSecret in deletion");
        ctx.applied
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&cps.uid().unwrap_or_default());
        Ok((Action::await_change(), None))
    } else {
        reconcile_inner(&cps, &ctx).await
    };
    if let Some(hook) = &ctx.observe {
        let obs = if deleting {
            Observation::Deleted
        } else {
            Observation::Reconciled {
                took: started.elapsed(),
                ready: match &res {
                    Ok((_, r)) => *r,
                    // Status was written with Ready=False before these errors.
                    Err(Error::Namespaces(_) | Error::Errored { .. }) => Some(false),
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
    cps: &ClusterPushSecret,
    ctx: &CpsContext,
) -> Result<(Action, Option<bool>), Error> {
    let name = cps.name_any();
    let uid = cps.uid().unwrap_or_default();
    let api: Api<ClusterPushSecret> = Api::all(ctx.client.clone());
    let _ = ctx.namespaces.wait_until_ready().await;
    let _ = ctx.push_secrets.wait_until_ready().await;

    let target = ps_name(cps);
    let views: Vec<NsView> = ctx.namespaces.state().iter().map(|n| ns_view(n)).collect();
    let ps_cache: HashMap<(String, String), Arc<PushSecret>> = ctx
        .push_secrets
        .state()
        .into_iter()
        .filter(|p| p.name_any() == target || owned_by(p, &name))
        .map(|p| ((p.namespace().unwrap_or_default(), p.name_any()), p))
        .collect();
    let existing: Vec<PsRef> = ps_cache
        .iter()
        .map(|((ns, n), p)| PsRef {
            namespace: ns.clone(),
            name: n.clone(),
            owned: owned_by(p, &name),
        })
        .collect();
    let p = plan(&selection(&cps.spec), &target, &views, &existing);

    // Old-name PushSecrets first; a failure stops the reconcile (ESO's deleteOldPushSecrets).
    let mut old_failed = Vec::new();
    for (ns, ps) in &p.delete_old {
        match delete_ps(&ctx.client, ns, ps).await {
            Ok(()) => {
                debug!(cps = %name, namespace = %ns, ps = %ps, "deleted PushSecret under the old name")
            }
            Err(e) => old_failed.push((ns.clone(), format!("{ERR_DELETE_OUTDATED}: {e}"))),
        }
    }
    if !old_failed.is_empty() {
        let cause = old_failed
            .iter()
            .map(|(n, r)| format!("{n}: {r}"))
            .collect::<Vec<_>>()
            .join("; ");
        return fail(
            ctx,
            &api,
            cps,
            &target,
            MSG_DELETE_OLD,
            Some(old_failed),
            cause,
        )
        .await;
    }
    if let Some(e) = p.select_error.clone() {
        return fail(ctx, &api, cps, &target, MSG_TARGET_NAMESPACES, None, e).await;
    }

    let generation = cps.meta().generation.unwrap_or_default();
    let spec_checked = ctx
        .applied
        .lock()
        .unwrap_or_else(|pe| pe.into_inner())
        .get(&uid)
        == Some(&generation);

    let mut failed = p.failed.clone();
    for (ns, ps) in &p.delete_outdated {
        match delete_ps(&ctx.client, ns, ps).await {
            Ok(()) => {
                debug!(cps = %name, namespace = %ns, ps = %ps, "deleted PushSecret from a namespace that stopped matching")
            }
            Err(e) => failed.push((ns.clone(), format!("{ERR_DELETE_OUTDATED}: {e}"))),
        }
    }
    let mut provisioned = Vec::new();
    for ns in &p.apply {
        match apply_ps(
            ctx,
            cps,
            ns,
            ps_cache.get(&(ns.clone(), target.clone())),
            spec_checked,
        )
        .await
        {
            Ok(()) => provisioned.push(ns.clone()),
            Err(reason) => failed.push((ns.clone(), reason)),
        }
    }
    // Every PushSecret this ClusterPushSecret owns was applied (a foreign PushSecret is a lasting
    // failure): later reconciles compare instead of replacing each one.
    if crate::clusterexternalsecret::reconcile::only_foreign_failures(&failed, ERR_ALREADY_EXISTS) {
        ctx.applied
            .lock()
            .unwrap_or_else(|pe| pe.into_inner())
            .insert(uid.clone(), generation);
    }

    let st = status(cps.status.as_ref(), &target, provisioned, failed.clone());
    patch_status(&api, cps, &st).await?;
    let ready = failed.is_empty();
    if failed.iter().any(|(_, r)| r != ERR_ALREADY_EXISTS) {
        // Retry transient failures with backoff rather than at the next refresh.
        return Err(Error::Namespaces(MSG_NAMESPACES_FAILED.to_string()));
    }
    let action = match refresh_interval(&cps.spec) {
        Some(d) => Action::requeue(d),
        None => Action::await_change(),
    };
    Ok((action, Some(ready)))
}

/// ESO's `markAsFailed`: Ready=False Errored with `message`, a Warning event, and an error so the
/// reconcile is retried with backoff.
async fn fail(
    ctx: &CpsContext,
    api: &Api<ClusterPushSecret>,
    cps: &ClusterPushSecret,
    target: &str,
    message: &str,
    failed: Option<Vec<(String, String)>>,
    cause: String,
) -> Result<(Action, Option<bool>), Error> {
    let st = errored_status(cps.status.as_ref(), target, message, failed, now_seconds());
    warn_event(ctx, cps, message).await;
    patch_status(api, cps, &st).await?;
    Err(Error::Errored {
        message: message.to_string(),
        cause,
    })
}

/// Now, truncated to seconds (metav1.Time precision).
fn now_seconds() -> Time {
    let now = k8s_openapi::jiff::Timestamp::now();
    Time(k8s_openapi::jiff::Timestamp::from_second(now.as_second()).unwrap_or(now))
}

fn error_policy(cps: Arc<ClusterPushSecret>, err: &Error, ctx: Arc<CpsContext>) -> Action {
    let delay = ctx.failures.failed(cps.name_any());
    warn!(cps = %cps.name_any(), error = %err, retry_in = ?delay, "ClusterPushSecret reconcile failed");
    Action::requeue(delay)
}

fn ps_hash(ps: &PushSecret) -> u64 {
    meta_hash(ps, 0)
}

fn cps_hash(cps: &ClusterPushSecret) -> u64 {
    meta_hash(cps, 0)
}

/// Runs the ClusterPushSecret controller until `shutdown` resolves. `namespaces` is a
/// subscription to the shared [`NamespaceFeed`](crate::clusterexternalsecret::reconcile::NamespaceFeed); `instance` names
/// this replica in events.
pub async fn run(
    client: Client,
    concurrency: u16,
    observe: Option<Observe>,
    namespaces: ReflectHandle<Namespace>,
    instance: Option<String>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let ns_reader = namespaces.reader();
    let (ps_reader, ps_writer) = reflector::store();
    let (cps_reader, cps_writer) = reflector::store();
    let ps_api: Api<PushSecret> = Api::all(client.clone());
    let cps_api: Api<ClusterPushSecret> = Api::all(client.clone());

    let ns_stream = namespace_changes(namespaces);
    let ps_stream = changes(
        reflector::reflector(ps_writer, watcher(ps_api, watcher::Config::default()))
            .default_backoff(),
        ps_hash,
    );
    let cps_stream = changes(
        observe_deletions(
            reflector::reflector(cps_writer, watcher(cps_api, watcher::Config::default()))
                .default_backoff(),
            observe.clone(),
        ),
        cps_hash,
    );
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: EVENT_SOURCE_CLUSTER_PUSHSECRET.to_string(),
            instance,
        },
    );
    let ctx = Arc::new(CpsContext {
        client,
        namespaces: ns_reader,
        push_secrets: ps_reader,
        observe,
        recorder,
        applied: Mutex::new(HashMap::new()),
        failures: Default::default(),
    });
    let r1 = cps_reader.clone();
    let r2 = cps_reader.clone();
    info!("ClusterPushSecret controller starting");
    Controller::for_stream(cps_stream, cps_reader)
        .with_config(kube::runtime::controller::Config::default().concurrency(concurrency))
        .watches_shared_stream(ns_stream, move |ns: Arc<Namespace>| {
            cps_for_namespace(&r1, &ns)
        })
        .watches_stream(ps_stream, move |ps: PushSecret| cps_for_ps(&r2, &ps))
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|res| async move {
            if let Err(e) = res {
                debug!(error = %e, "ClusterPushSecret controller event");
            }
        })
        .await;
}

#[cfg(test)]
#[path = "reconcile_tests.rs"]
mod tests;
