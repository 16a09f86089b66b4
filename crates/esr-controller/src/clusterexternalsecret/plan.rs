//! The ClusterExternalSecret plan (pure): which namespaces get the ExternalSecret, what is
//! deleted, the ordered steps of a reconcile ([`steps`]) and how their results become the status
//! and the requeue ([`finish`]).
//!
//! A ClusterExternalSecret creates the ExternalSecret `externalSecretName` (default: its own name)
//! in every namespace matched by `namespaceSelectors`, the deprecated `namespaceSelector`,
//! `namespaces` or esr's `namespaceRegexes` (all ORed). The ExternalSecret carries
//! `externalSecretMetadata` labels/annotations (plus the parent's
//! `external-secrets.io/force-sync` annotation mirrored) and a controller owner reference. As in
//! ESO the ClusterExternalSecret carries the
//! `externalsecrets.external-secrets.io/clusterexternalsecret-cleanup` finalizer and puts
//! `externalsecrets.external-secrets.io/ces-<name>` on each target namespace (removed, and the
//! namespace skipped, once it is terminating); on deletion the namespace finalizers are removed
//! and the owned ExternalSecrets deleted before its own finalizer goes. An
//! ExternalSecret of the same name it does not own is never touched: the namespace is reported in
//! `failedNamespaces` with `external secret already exists in namespace` (a lasting failure that
//! no retry fixes); any other failed namespace is retried with backoff. Status: Ready=True, or
//! Ready=False `one or more namespaces failed`; `provisionedNamespaces`, `failedNamespaces`
//! sorted. `refreshTime` (default 1h, `0s` none) requeues the parent.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use esr_api::consts::{
    ANNOTATION_FORCE_SYNC, API_VERSION_V1, FINALIZER_CES, FINALIZER_CES_NAMESPACE_PREFIX,
};
use esr_api::v1::{
    ClusterExternalSecret, ClusterExternalSecretNamespaceFailure, ClusterExternalSecretSpec,
    ClusterExternalSecretStatus, ClusterExternalSecretStatusCondition, ExternalSecret,
};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};

use crate::common::fanout::{
    ChildRef, child_matches, child_meta, controller_ref, foreign_namespaces, refresh_from,
    take_over_meta,
};
use crate::common::namespaces::{NsView, Selection, SelectionError, select};

/// Reason of a namespace holding an ExternalSecret this ClusterExternalSecret does not own.
pub const ERR_ALREADY_EXISTS: &str = "external secret already exists in namespace";
/// Ready=False message when any namespace failed.
pub use crate::common::fanout::MSG_NAMESPACES_FAILED;
/// Kind of the owner reference on created ExternalSecrets.
pub const KIND: &str = "ClusterExternalSecret";

/// An existing ExternalSecret relevant to the plan.
pub type EsRef = ChildRef;

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

/// Plans a reconcile of a live (not deleting) ClusterExternalSecret.
///
/// `existing` holds every ExternalSecret named `target` plus every ExternalSecret owned by this
/// ClusterExternalSecret (any name).
pub fn plan(
    sel: &Result<Selection, SelectionError>,
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
            p.failed.push(("unknown".to_string(), e.to_string()));
            return p;
        }
    };
    let selected_set: BTreeSet<&str> = selected.iter().map(String::as_str).collect();
    let foreign = foreign_namespaces(existing, target);
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

/// How one namespace's ExternalSecret is written (a create that conflicts is a failure of the
/// namespace).
pub type Write = crate::common::fanout::Write<ExternalSecret>;

/// One selected namespace: its finalizer first (a failure skips the write), then the write.
#[derive(Debug, Clone, PartialEq)]
pub struct ApplyStep {
    /// The namespace.
    pub namespace: String,
    /// Whether the namespace finalizer must be added first.
    pub add_finalizer: bool,
    /// The ExternalSecret write.
    pub write: Write,
}

/// The ordered steps of a reconcile.
#[derive(Debug, Clone, PartialEq)]
pub enum Steps {
    /// Being deleted without the CES finalizer: nothing to do.
    Done,
    /// Being deleted: namespace finalizers removed, owned ExternalSecrets deleted, then the CES's
    /// finalizers set to `finalizers` (its own removed). A failure stops the reconcile.
    Cleanup {
        /// Namespaces carrying the namespace finalizer.
        namespaces: Vec<String>,
        /// Owned ExternalSecrets (`(namespace, name)`).
        delete: Vec<(String, String)>,
        /// The CES's finalizers afterwards.
        finalizers: Vec<String>,
    },
    /// Live: the steps in order (a failure of the first three stops the reconcile; a failed
    /// namespace is recorded and the next one applied).
    Sync {
        /// The CES's finalizers, when its own must be added first.
        add_own_finalizer: Option<Vec<String>>,
        /// Namespaces whose finalizer is removed.
        remove_finalizer: Vec<String>,
        /// Owned ExternalSecrets to delete (`(namespace, name)`).
        delete: Vec<(String, String)>,
        /// Namespaces to apply, sorted.
        apply: Vec<ApplyStep>,
        /// Namespaces that failed before any write, with the reason.
        failed: Vec<(String, String)>,
    },
}

/// The ExternalSecrets relevant to a plan (named `target` or owned), by `(namespace, name)`.
pub fn relevant_children(
    ces: &ClusterExternalSecret,
    children: &[Arc<ExternalSecret>],
) -> HashMap<(String, String), Arc<ExternalSecret>> {
    let uid = ces.uid().unwrap_or_default();
    let target = es_name(ces);
    children
        .iter()
        .filter(|e| e.name_any() == target || owned_by(e, &uid))
        .map(|e| ((e.namespace().unwrap_or_default(), e.name_any()), e.clone()))
        .collect()
}

/// Plans the steps of a reconcile from the caches. `spec_checked`: every ExternalSecret was
/// applied for this generation already (they are compared, not replaced).
pub fn steps(
    ces: &ClusterExternalSecret,
    namespaces: &[NsView],
    children: &[Arc<ExternalSecret>],
    spec_checked: bool,
) -> Steps {
    let uid = ces.uid().unwrap_or_default();
    let own = |f: &String| f == FINALIZER_CES;
    if ces.meta().deletion_timestamp.is_some() {
        if !ces.finalizers().iter().any(own) {
            return Steps::Done;
        }
        return Steps::Cleanup {
            namespaces: namespaces
                .iter()
                .filter(|n| n.has_finalizer)
                .map(|n| n.name.clone())
                .collect(),
            delete: children
                .iter()
                .filter(|e| owned_by(e, &uid))
                .map(|e| (e.namespace().unwrap_or_default(), e.name_any()))
                .collect(),
            finalizers: ces
                .finalizers()
                .iter()
                .filter(|f| !own(f))
                .cloned()
                .collect(),
        };
    }
    let add_own_finalizer = (!ces.finalizers().iter().any(own)).then(|| {
        let mut f = ces.finalizers().to_vec();
        f.push(FINALIZER_CES.to_string());
        f
    });
    let target = es_name(ces);
    let cache = relevant_children(ces, children);
    let existing: Vec<EsRef> = cache
        .iter()
        .map(|((ns, n), e)| EsRef {
            namespace: ns.clone(),
            name: n.clone(),
            owned: owned_by(e, &uid),
        })
        .collect();
    let p = plan(
        &Selection::from_spec(&ces.spec),
        &target,
        namespaces,
        &existing,
    );
    let apply = p
        .apply
        .iter()
        .map(|ns| ApplyStep {
            namespace: ns.clone(),
            add_finalizer: p.add_finalizer.contains(ns),
            write: match cache.get(&(ns.clone(), target.clone())) {
                None => Write::Create(Box::new(desired_es(ces, ns))),
                Some(cur) if es_up_to_date(ces, cur, spec_checked) => Write::Keep,
                Some(cur) => Write::Replace(Box::new(updated_es(ces, cur))),
            },
        })
        .collect();
    Steps::Sync {
        add_own_finalizer,
        remove_finalizer: p.remove_finalizer,
        delete: p.delete,
        apply,
        failed: p.failed,
    }
}

/// How a reconcile ends.
pub type Finish = crate::common::fanout::Finish<ClusterExternalSecretStatus>;

/// Maps a reconcile's results to its status and requeue.
pub fn finish(
    ces: &ClusterExternalSecret,
    provisioned: Vec<String>,
    failed: Vec<(String, String)>,
) -> Finish {
    let mut st = status(&es_name(ces), provisioned, failed.clone());
    st.observed_generation = ces.meta().generation;
    Finish::new(
        ces.status.as_ref(),
        st,
        &failed,
        ERR_ALREADY_EXISTS,
        refresh_interval(&ces.spec),
    )
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

/// Whether an ExternalSecret is controlled by the ClusterExternalSecret with this uid.
pub fn owned_by(es: &ExternalSecret, uid: &str) -> bool {
    es.owner_references()
        .iter()
        .any(|o| o.controller == Some(true) && o.uid == uid)
}

fn owner_ref(ces: &ClusterExternalSecret) -> OwnerReference {
    controller_ref(API_VERSION_V1, KIND, ces)
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
        metadata: child_meta(
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
    take_over_meta(
        &mut es.metadata,
        desired_labels(ces),
        desired_annotations(ces),
        owner_ref(ces),
    );
    es.spec = ces.spec.external_secret_spec.clone();
    es.status = None;
    es
}

/// Whether `existing` already carries everything the CES wants. `spec_checked` false forces an
/// update (the CES changed since the last full apply, so removed fields must go).
pub fn es_up_to_date(
    ces: &ClusterExternalSecret,
    existing: &ExternalSecret,
    spec_checked: bool,
) -> bool {
    let uid = ces.uid().unwrap_or_default();
    spec_checked
        && owned_by(existing, &uid)
        && child_matches(
            &existing.metadata,
            &desired_labels(ces),
            &desired_annotations(ces),
            &ces.spec.external_secret_spec,
            &existing.spec,
        )
}

/// Builds the namespace view for `ces_name`.
pub fn ns_view(ns: &Namespace, ces_name: &str) -> NsView {
    NsView::of(ns, Some(&namespace_finalizer(ces_name)))
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

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
