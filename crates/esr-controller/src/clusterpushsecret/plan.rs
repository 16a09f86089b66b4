//! The ClusterPushSecret plan (pure): the same PushSecret in every namespace matched by
//! `namespaceSelectors` ([`plan`]), the ordered steps of a reconcile ([`steps`]) and how their
//! results become the status and the requeue ([`finish`], [`errored_status`]).
//!
//! As in ESO: no finalizer on the ClusterPushSecret nor on namespaces (owned PushSecrets go with
//! their owner through the garbage collector), reconcile is skipped while the ClusterPushSecret is
//! being deleted, a PushSecret it does not own is never touched (the namespace is reported in
//! `failedNamespaces` with `push secret already exists in namespace`), PushSecrets are removed from
//! namespaces that stop matching and under the old name when `pushSecretName` changes (the old
//! names first: a failure there, or selectors that cannot be evaluated, stop the reconcile with
//! Ready=False reason `Errored` and a Warning event, ESO's `markAsFailed`). Namespaces come from
//! the shared [`NamespaceFeed`](crate::common::namespaces::NamespaceFeed) cache (never re-listed
//! per reconcile) and a new matching namespace gets its PushSecret at once. Status: Ready=True, or
//! Ready=False `one or more namespaces failed` (no reason nor transition time, as in ESO);
//! `provisionedNamespaces` and `failedNamespaces` sorted. `refreshTime` (default 1h, `0s` none)
//! requeues the parent.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use esr_api::consts::{
    API_VERSION_V1ALPHA1, CONDITION_FALSE, CONDITION_READY, CONDITION_TRUE,
    REASON_PUSHSECRET_ERRORED,
};
use esr_api::v1alpha1::{
    ClusterPushSecret, ClusterPushSecretNamespaceFailure, ClusterPushSecretSpec,
    ClusterPushSecretStatus, PushSecret, PushSecretStatusCondition,
};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};

use crate::common::events::kube_error_text;
use crate::common::fanout::{
    ChildRef, child_matches, child_meta, controller_ref, foreign_namespaces, refresh_from,
    take_over_meta,
};
use crate::common::namespaces::{NsView, Selection, SelectionError, select};

/// Ready=False message when any namespace failed.
pub use crate::common::fanout::MSG_NAMESPACES_FAILED;
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

/// An existing PushSecret relevant to the plan.
pub type PsRef = ChildRef;

/// Why a namespace's PushSecret could not be applied (its `failedNamespaces` reason).
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The API server refused the create or the update.
    #[error("{ERR_CREATE_OR_UPDATE}: {}", kube_error_text(.0))]
    CreateOrUpdate(#[source] kube::Error),
    /// The create conflicted, but the PushSecret was gone when read back.
    #[error("{ERR_CREATE_OR_UPDATE}: PushSecret {namespace}/{name} changed concurrently")]
    Vanished {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
    },
    /// A PushSecret of that name exists and another owner controls it.
    #[error("{ERR_ALREADY_EXISTS}")]
    AlreadyExists,
}

/// Why deleting a PushSecret failed (its `failedNamespaces` reason).
#[derive(Debug, thiserror::Error)]
#[error("{ERR_DELETE_OUTDATED}: {}", kube_error_text(.0))]
pub struct DeleteError(#[source] pub kube::Error);

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
    refresh_from(spec.refresh_time.as_deref())
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

/// The changes a reconcile makes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CpsPlan {
    /// Owned PushSecrets under another name than `pushSecretName` (`(namespace, name)`): the old
    /// name after a rename. Deleted first; a failure stops the reconcile (Errored).
    pub delete_old: Vec<(String, String)>,
    /// The namespace selectors could not be evaluated (the reconcile stops, Errored).
    pub select_error: Option<SelectionError>,
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
    let foreign = foreign_namespaces(existing, target);
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
    controller_ref(API_VERSION_V1ALPHA1, KIND, cps)
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
        metadata: child_meta(
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
    take_over_meta(
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
    child_matches(
        &existing.metadata,
        &desired_labels(cps),
        &desired_annotations(cps),
        &cps.spec.push_secret_spec,
        &existing.spec,
    )
}

/// Builds the namespace view (ClusterPushSecrets put no finalizer on namespaces).
pub fn ns_view(ns: &Namespace) -> NsView {
    NsView::of(ns, None)
}

/// How one namespace's PushSecret is written (on a create that conflicts the live one is read
/// back and [`write_existing`] decides again).
pub type Write = crate::common::fanout::Write<PushSecret>;

/// One selected namespace and its write.
#[derive(Debug, Clone, PartialEq)]
pub struct ApplyStep {
    /// The namespace.
    pub namespace: String,
    /// The PushSecret write.
    pub write: Write,
}

/// The ordered steps of a reconcile.
#[derive(Debug, PartialEq)]
pub enum Steps {
    /// Being deleted: skipped (the garbage collector removes the PushSecrets).
    Skip,
    /// Live: delete the old-name PushSecrets (a failure stops with [`MSG_DELETE_OLD`]), stop with
    /// [`MSG_TARGET_NAMESPACES`] on `select_error`, delete the outdated ones, apply each namespace.
    Sync {
        /// Owned PushSecrets under an old name (`(namespace, name)`).
        delete_old: Vec<(String, String)>,
        /// The selectors could not be evaluated.
        select_error: Option<SelectionError>,
        /// Owned PushSecrets in namespaces that no longer match (`(namespace, name)`).
        delete_outdated: Vec<(String, String)>,
        /// Namespaces to apply, sorted.
        apply: Vec<ApplyStep>,
        /// Namespaces that failed before any write, with the reason.
        failed: Vec<(String, String)>,
    },
}

/// The write for a PushSecret that exists (from the cache, or read back after a conflict).
pub fn write_existing(
    cps: &ClusterPushSecret,
    cur: &PushSecret,
    spec_checked: bool,
) -> Result<Write, ApplyError> {
    if !owned_by(cur, &cps.name_any()) {
        return Err(ApplyError::AlreadyExists);
    }
    Ok(if ps_up_to_date(cps, cur, spec_checked) {
        Write::Keep
    } else {
        Write::Replace(Box::new(updated_ps(cps, cur)))
    })
}

/// Plans the steps of a reconcile from the caches. `spec_checked`: every PushSecret was applied
/// for this generation already (they are compared, not replaced).
pub fn steps(
    cps: &ClusterPushSecret,
    namespaces: &[NsView],
    children: &[Arc<PushSecret>],
    spec_checked: bool,
) -> Steps {
    if cps.meta().deletion_timestamp.is_some() {
        return Steps::Skip;
    }
    let name = cps.name_any();
    let target = ps_name(cps);
    let cache: HashMap<(String, String), Arc<PushSecret>> = children
        .iter()
        .filter(|p| p.name_any() == target || owned_by(p, &name))
        .map(|p| ((p.namespace().unwrap_or_default(), p.name_any()), p.clone()))
        .collect();
    let existing: Vec<PsRef> = cache
        .iter()
        .map(|((ns, n), p)| PsRef {
            namespace: ns.clone(),
            name: n.clone(),
            owned: owned_by(p, &name),
        })
        .collect();
    let p = plan(&selection(&cps.spec), &target, namespaces, &existing);
    let mut failed = p.failed;
    let mut apply = Vec::new();
    for ns in p.apply {
        let write = match cache.get(&(ns.clone(), target.clone())) {
            None => Ok(Write::Create(Box::new(desired_ps(cps, &ns)))),
            Some(cur) => write_existing(cps, cur, spec_checked),
        };
        match write {
            Ok(write) => apply.push(ApplyStep {
                namespace: ns,
                write,
            }),
            Err(e) => failed.push((ns, e.to_string())),
        }
    }
    Steps::Sync {
        delete_old: p.delete_old,
        select_error: p.select_error,
        delete_outdated: p.delete_outdated,
        apply,
        failed,
    }
}

/// How a completed reconcile ends.
pub type Finish = crate::common::fanout::Finish<ClusterPushSecretStatus>;

/// Maps a completed reconcile's results to its status and requeue.
pub fn finish(
    cps: &ClusterPushSecret,
    provisioned: Vec<String>,
    failed: Vec<(String, String)>,
) -> Finish {
    let st = status(
        cps.status.as_ref(),
        &ps_name(cps),
        provisioned,
        failed.clone(),
    );
    Finish::new(
        cps.status.as_ref(),
        st,
        &failed,
        ERR_ALREADY_EXISTS,
        refresh_interval(&cps.spec),
    )
}

/// A reconcile that stopped early: the Errored status (`None`: unchanged), the Warning event's
/// note and the error's cause.
#[derive(Debug, Clone, PartialEq)]
pub struct Stopped {
    /// The status to write (`None`: unchanged).
    pub status: Option<ClusterPushSecretStatus>,
    /// Condition message and Warning event note.
    pub message: &'static str,
    /// What failed.
    pub cause: String,
}

/// Old-name PushSecrets that could not be deleted stop the reconcile ([`MSG_DELETE_OLD`], the
/// namespaces in `failedNamespaces`).
pub fn stop_delete_old(
    cps: &ClusterPushSecret,
    failed: Vec<(String, String)>,
    now: Time,
) -> Stopped {
    let cause = failed
        .iter()
        .map(|(n, r)| format!("{n}: {r}"))
        .collect::<Vec<_>>()
        .join("; ");
    stopped(cps, MSG_DELETE_OLD, Some(failed), cause, now)
}

/// Selectors that cannot be evaluated stop the reconcile ([`MSG_TARGET_NAMESPACES`]).
pub fn stop_select(cps: &ClusterPushSecret, err: &SelectionError, now: Time) -> Stopped {
    stopped(cps, MSG_TARGET_NAMESPACES, None, err.to_string(), now)
}

fn stopped(
    cps: &ClusterPushSecret,
    message: &'static str,
    failed: Option<Vec<(String, String)>>,
    cause: String,
    now: Time,
) -> Stopped {
    let st = errored_status(cps.status.as_ref(), &ps_name(cps), message, failed, now);
    Stopped {
        status: (cps.status.as_ref() != Some(&st)).then_some(st),
        message,
        cause,
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

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
