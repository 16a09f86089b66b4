//! The fan-out controllers (ClusterExternalSecret → one ExternalSecret per selected namespace,
//! ClusterPushSecret → one PushSecret per selected namespace) share one runner: [`run`] watches the
//! parents, their children and the shared Namespace cache, and calls the kind's
//! [`FanOut::reconcile`] through [`reconcile`], which reports to the [`Observe`] hook and resets
//! the retry backoff on success ([`error_policy`] grows it on failure).
//!
//! The children a parent creates carry the parent's labels/annotations and a controller owner
//! reference ([`child_meta`]); an existing child is taken over the same way ([`take_over_meta`]).
//! A child the parent does not own is never touched. Once every owned child was applied for a
//! generation ([`Applied`]), later reconciles compare ([`json_contained`]) instead of replacing
//! each child: a replace from a cache that lags the child controller's own writes would conflict,
//! and retrying would keep conflicting.
//!
//! `refreshTime` (both kinds) defaults to 1h; `0s` turns the periodic requeue off.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Debug;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::core::object::{HasSpec, HasStatus};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{self, ObjectRef, ReflectHandle, Store};
use kube::runtime::{Controller, WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tracing::{debug, info, warn};

use crate::common::namespaces::namespace_changes;
use crate::common::observe::{
    Deletions, Observation, Observe, changed_objects, meta_hash, observe_deletions,
};
use crate::common::refresh::Backoffs;
use crate::metrics::controller::RuntimeMetrics;

/// The Ready message (and error text) of a parent some of whose namespaces failed.
pub const MSG_NAMESPACES_FAILED: &str = "one or more namespaces failed";

/// Errors of a fan-out reconcile (retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Kubernetes API error.
    #[error("kubernetes API error: {0}")]
    Kube(#[from] kube::Error),
    /// The reconcile stopped early (recorded in status as Ready=False Errored; ClusterPushSecret).
    #[error("{message}: {cause}")]
    Errored {
        /// The condition message.
        message: &'static str,
        /// What failed.
        cause: String,
    },
    /// Some namespaces failed (recorded in status as Ready=False).
    #[error("{MSG_NAMESPACES_FAILED}")]
    Namespaces,
}

impl Error {
    /// The Ready condition written before this error (`None` when unknown).
    pub fn ready(&self) -> Option<bool> {
        match self {
            Error::Namespaces | Error::Errored { .. } => Some(false),
            Error::Kube(_) => None,
        }
    }
}

/// Requeue interval when `refreshTime` is unset.
pub const DEFAULT_REFRESH: Duration = Duration::from_secs(3600);

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

/// The requeue after a completed reconcile: the refresh interval, or none.
pub fn refresh_action(interval: Option<Duration>) -> Action {
    match interval {
        Some(d) => Action::requeue(d),
        None => Action::await_change(),
    }
}

/// An existing child relevant to a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildRef {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Controlled by the parent being planned.
    pub owned: bool,
}

/// Whether every failure of a fan-out reconcile is a foreign child (`already_exists`, which no
/// retry fixes), i.e. every child the parent owns was applied.
pub fn only_foreign_failures(failed: &[(String, String)], already_exists: &str) -> bool {
    failed.iter().all(|(_, r)| r == already_exists)
}

/// The namespaces where a child named `target` exists that the parent does not own (a name no
/// write may take over).
pub fn foreign_namespaces<'a>(existing: &'a [ChildRef], target: &str) -> BTreeSet<&'a str> {
    existing
        .iter()
        .filter(|e| e.name == target && !e.owned)
        .map(|e| e.namespace.as_str())
        .collect()
}

/// How one namespace's child `C` is written.
#[derive(Debug, Clone, PartialEq)]
pub enum Write<C> {
    /// Not in the cache: create it (what a conflict means is the kind's to say).
    Create(Box<C>),
    /// Owned but out of date: replace it.
    Replace(Box<C>),
    /// Up to date: nothing to write.
    Keep,
}

/// How a completed reconcile ends, from the namespaces that were provisioned and those that
/// failed; `S` is the parent's status.
#[derive(Debug, Clone, PartialEq)]
pub struct Finish<S> {
    /// The status to write (`None`: unchanged).
    pub status: Option<S>,
    /// Every owned child was applied (later reconciles compare instead of replacing).
    pub all_applied: bool,
    /// Ready condition written.
    pub ready: bool,
    /// A namespace failed with a retryable error: retry with backoff rather than at the next
    /// refresh.
    pub retry: bool,
    /// The requeue when not retrying.
    pub requeue: Option<Duration>,
}

impl<S: PartialEq> Finish<S> {
    /// The end of a reconcile whose status becomes `status` (written when it differs from `old`):
    /// Ready when no namespace `failed`, a retry when one failed for another reason than
    /// `already_exists` (a foreign child, which no retry fixes).
    pub fn new(
        old: Option<&S>,
        status: S,
        failed: &[(String, String)],
        already_exists: &str,
        requeue: Option<Duration>,
    ) -> Self {
        Finish {
            status: (old != Some(&status)).then_some(status),
            all_applied: only_foreign_failures(failed, already_exists),
            ready: failed.is_empty(),
            retry: failed.iter().any(|(_, r)| r != already_exists),
            requeue,
        }
    }
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

/// Whether a child already carries the labels, annotations and spec its parent wants (the spec
/// compared with [`json_contained`]).
pub fn child_matches<S: serde::Serialize>(
    existing: &ObjectMeta,
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
    want_spec: &S,
    have_spec: &S,
) -> bool {
    if existing.labels.clone().unwrap_or_default() != *labels
        || existing.annotations.clone().unwrap_or_default() != *annotations
    {
        return false;
    }
    match (
        serde_json::to_value(want_spec),
        serde_json::to_value(have_spec),
    ) {
        (Ok(w), Ok(h)) => json_contained(&w, &h),
        _ => false,
    }
}

/// Whether an object is controlled by an object of `kind` (its controller owner reference).
pub fn controlled_by_kind(meta: &ObjectMeta, kind: &str) -> bool {
    meta.owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.kind == kind)
}

/// The controller owner reference a parent puts on its children.
pub fn controller_ref<K: Resource>(api_version: &str, kind: &str, parent: &K) -> OwnerReference {
    OwnerReference {
        api_version: api_version.to_string(),
        kind: kind.to_string(),
        name: parent.meta().name.clone().unwrap_or_default(),
        uid: parent.meta().uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// Metadata of a new child `namespace/name`.
pub(crate) fn child_meta(
    name: String,
    namespace: &str,
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
    owner: OwnerReference,
) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace: Some(namespace.to_string()),
        labels: Some(labels),
        annotations: Some(annotations),
        owner_references: Some(vec![owner]),
        ..Default::default()
    }
}

/// Puts the parent-controlled parts on an existing child's metadata: labels and annotations
/// replaced, the controller reference set to `owner`, other owner references and finalizers kept,
/// managed fields dropped (the update is a replace).
pub(crate) fn take_over_meta(
    meta: &mut ObjectMeta,
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
    owner: OwnerReference,
) {
    meta.labels = Some(labels);
    meta.annotations = Some(annotations);
    let mut refs: Vec<OwnerReference> = meta
        .owner_references
        .iter()
        .flatten()
        .filter(|o| o.controller != Some(true))
        .cloned()
        .collect();
    refs.push(owner);
    meta.owner_references = Some(refs);
    meta.managed_fields = None;
}

/// Parent uid → generation of the last reconcile where every owned child was applied.
#[derive(Debug, Default)]
pub struct Applied(Mutex<HashMap<String, i64>>);

impl Applied {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, i64>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether every child was applied for this generation (children are then compared, not
    /// replaced).
    pub fn checked(&self, uid: &str, generation: i64) -> bool {
        self.map().get(uid) == Some(&generation)
    }

    /// Records that every child was applied for `generation`.
    pub fn record(&self, uid: &str, generation: i64) {
        self.map().insert(uid.to_string(), generation);
    }

    /// Forgets a parent (it is being deleted).
    pub fn forget(&self, uid: &str) {
        self.map().remove(uid);
    }
}

/// Whether a kube error is an API status with this code.
pub(crate) fn is_status(e: &kube::Error, code: u16) -> bool {
    esr_provider::error::kube_status_code(e) == Some(code)
}

/// Deletes a child in the background; a child already gone is no error.
pub(crate) async fn delete_child<K>(
    client: &Client,
    ns: &str,
    name: &str,
) -> Result<(), kube::Error>
where
    K: Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Debug,
{
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(()),
        Err(e) if is_status(&e, 404) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Merge-patches a parent's status; `failedNamespaces` and `provisionedNamespaces` absent from
/// `status` are cleared (a merge patch keeps what it does not name).
pub(crate) async fn patch_fanout_status<K, S>(
    api: &Api<K>,
    name: &str,
    status: &S,
) -> Result<(), kube::Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
    S: serde::Serialize,
{
    let mut body = serde_json::to_value(status).unwrap_or_default();
    if let Some(o) = body.as_object_mut() {
        o.entry("failedNamespaces")
            .or_insert(serde_json::Value::Null);
        o.entry("provisionedNamespaces")
            .or_insert(serde_json::Value::Null);
    }
    let patch = serde_json::json!({ "status": body });
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
}

/// What a kind's reconcile ended with.
#[derive(Debug, Clone)]
pub struct Reconciled {
    /// When to look again.
    pub action: Action,
    /// The Ready condition it set (`None` when it set none).
    pub ready: Option<bool>,
}

/// An object a fan-out controller watches and caches.
pub trait Watched:
    Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static
{
}

impl<K> Watched for K where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static
{
}

/// The parents (from the cache) a change of a `T` concerns.
pub type ParentsOf<P, T> = fn(&Store<P>, &T) -> Vec<ObjectRef<P>>;

/// A fan-out kind: the parent, its children and the reconcile of one parent. The parent's kind
/// (for logs and owner references) is its [`Resource::kind`].
pub trait FanOut: Sized + Send + Sync + 'static {
    /// The cluster-scoped parent (ClusterExternalSecret, ClusterPushSecret).
    type Parent: Watched;
    /// The namespaced child (ExternalSecret, PushSecret).
    type Child: Watched + HasSpec<Spec: Default> + HasStatus;

    /// Parents a namespace change concerns.
    const PARENTS_FOR_NAMESPACE: ParentsOf<Self::Parent, Namespace>;

    /// Parents a child change concerns.
    const PARENTS_FOR_CHILD: ParentsOf<Self::Parent, Self::Child>;

    /// Reconciles one parent (live or being deleted).
    fn reconcile(
        parent: &Self::Parent,
        ctx: &FanOutContext<Self>,
    ) -> impl Future<Output = Result<Reconciled, Error>> + Send;
}

/// Trims a child before it is cached. Only a child that a parent of this kind controls keeps its
/// spec (the plan compares it with what the parent wants); any other child is only ever read for
/// its metadata (a name taken by a foreign object), and no child's status or managed fields are
/// read. With thousands of children not made by a parent this keeps the cache small.
fn slim<F: FanOut>(child: &mut F::Child) {
    child.meta_mut().managed_fields = None;
    *child.status_mut() = None;
    if !controlled_by_kind(child.meta(), &F::Parent::kind(&())) {
        *child.spec_mut() = Default::default();
    }
}

/// The children cache of a fan-out controller when the children's own controller keeps it (the
/// ClusterExternalSecret controller reads the ExternalSecret controller's cache, rather than a
/// second watch and a second copy of every ExternalSecret): that cache, and the events of its
/// watch as [`trigger_event`] copies them, for the fan-out's triggers.
pub struct SharedChildren<C: Watched> {
    /// The children cache.
    pub store: Store<C>,
    /// The watch's events, in order.
    pub events: tokio::sync::mpsc::Receiver<watcher::Event<C>>,
}

/// A child's watch event as the fan-out's triggers read it: the child's metadata only (which
/// parents it concerns and whether that changed; the plan reads children from the cache).
pub fn trigger_event<C>(ev: &watcher::Event<C>) -> watcher::Event<C>
where
    C: Watched + HasSpec<Spec: Default> + HasStatus,
{
    let meta_only = |c: &C| {
        let mut c = c.clone();
        *c.spec_mut() = Default::default();
        *c.status_mut() = None;
        c.meta_mut().managed_fields = None;
        c
    };
    match ev {
        watcher::Event::Apply(c) => watcher::Event::Apply(meta_only(c)),
        watcher::Event::InitApply(c) => watcher::Event::InitApply(meta_only(c)),
        watcher::Event::Delete(c) => watcher::Event::Delete(meta_only(c)),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitDone => watcher::Event::InitDone,
    }
}

/// Reconciler state of a fan-out kind.
pub struct FanOutContext<F: FanOut> {
    /// Kubernetes client.
    pub client: Client,
    /// The parents cache (the controller's own).
    pub parents: Store<F::Parent>,
    /// The shared Namespace cache.
    pub namespaces: Store<Namespace>,
    /// The children cache.
    pub children: Store<F::Child>,
    /// Per-kind state.
    pub kind: F,
    /// Which parents had every child applied, per generation.
    pub applied: Applied,
    observe: Option<Observe>,
    /// Serialises the [`Observe`] hook calls of reconciles with those of watch deletions.
    observing: Arc<Mutex<()>>,
    failures: Backoffs<String>,
}

impl<F: FanOut> FanOutContext<F> {
    /// A context over these caches.
    pub fn new(
        client: Client,
        parents: Store<F::Parent>,
        namespaces: Store<Namespace>,
        children: Store<F::Child>,
        kind: F,
        observe: Option<Observe>,
    ) -> Self {
        FanOutContext {
            client,
            parents,
            namespaces,
            children,
            kind,
            applied: Applied::default(),
            observe,
            observing: Arc::default(),
            failures: Backoffs::default(),
        }
    }

    /// The hook for the parent watch's deletions, serialised with the reconciles' reports (see
    /// [`reconcile`]).
    fn deletion_hook(&self) -> Option<Observe> {
        let hook = self.observe.clone()?;
        let gate = self.observing.clone();
        Some(Arc::new(move |name: &str, obs: Observation| {
            let _g = gate.lock().unwrap_or_else(|p| p.into_inner());
            hook(name, obs)
        }))
    }
}

/// Reconciles one parent: the kind's reconcile, then the [`Observe`] hook and the backoff reset.
///
/// A parent being deleted, or gone from the cache by the time its reconcile ends, reports
/// [`Observation::Deleted`]: its watch deletion may arrive first, and a report of a reconcile that
/// was still running when the parent was deleted would otherwise bring back the series the
/// deletion removed. The cache is updated before the watch deletion is reported, and both reports
/// take the same lock, so the last report of a deleted parent is always `Deleted`.
pub async fn reconcile<F: FanOut>(
    parent: Arc<F::Parent>,
    ctx: Arc<FanOutContext<F>>,
) -> Result<Action, Error> {
    let started = Instant::now();
    let name = parent.name_any();
    let deleting = parent.meta().deletion_timestamp.is_some();
    let res = F::reconcile(&parent, &ctx).await;
    if deleting {
        ctx.applied.forget(&parent.uid().unwrap_or_default());
    }
    if let Some(hook) = &ctx.observe {
        let _g = ctx.observing.lock().unwrap_or_else(|p| p.into_inner());
        let gone = ctx
            .parents
            .get(&ObjectRef::from_obj(&*parent))
            .is_none_or(|p| p.uid() != parent.uid());
        let obs = if deleting || gone {
            Observation::Deleted
        } else {
            Observation::Reconciled {
                took: started.elapsed(),
                ready: match &res {
                    Ok(r) => r.ready,
                    Err(e) => e.ready(),
                },
            }
        };
        hook(&name, obs);
    }
    let r = res?;
    ctx.failures.reset(&name);
    Ok(r.action)
}

/// Retries a failed parent with a growing backoff.
pub fn error_policy<F: FanOut>(
    parent: Arc<F::Parent>,
    err: &Error,
    ctx: Arc<FanOutContext<F>>,
) -> Action {
    let delay = ctx.failures.failed(parent.name_any());
    warn!(name = %parent.name_any(), error = %err, retry_in = ?delay, "{} reconcile failed", F::Parent::kind(&()));
    Action::requeue(delay)
}

/// Where a fan-out controller takes its namespaces and children from.
pub struct Sources<C: Watched> {
    /// A subscription to the shared [`NamespaceFeed`](crate::common::namespaces::NamespaceFeed)
    /// (whose cache is read through the handle).
    pub namespaces: ReflectHandle<Namespace>,
    /// The children's cache kept by their own controller; `None`: the fan-out controller watches
    /// them itself (cluster-wide, [`slim`] copies).
    pub children: Option<SharedChildren<C>>,
}

/// Runs a fan-out controller until `shutdown` resolves.
pub async fn run<F: FanOut>(
    client: Client,
    concurrency: u16,
    metrics: RuntimeMetrics,
    observe: Option<Observe>,
    sources: Sources<F::Child>,
    kind: F,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let Sources {
        namespaces,
        children,
    } = sources;
    let ns_reader = namespaces.reader();
    let (parent_reader, parent_writer) = reflector::store();
    let parent_api: Api<F::Parent> = Api::all(client.clone());
    let (child_reader, child_events) = match children {
        Some(shared) => {
            let events = futures::stream::unfold(shared.events, |mut rx| async move {
                rx.recv().await.map(|ev| (Ok(ev), rx))
            });
            (shared.store, events.boxed())
        }
        None => {
            let (reader, writer) = reflector::store();
            let api: Api<F::Child> = Api::all(client.clone());
            let events = reflector::reflector(
                writer,
                watcher(api, watcher::Config::default()).modify(slim::<F>),
            )
            .default_backoff();
            (reader, events.boxed())
        }
    };

    let ctx = Arc::new(FanOutContext::new(
        client.clone(),
        parent_reader.clone(),
        ns_reader,
        child_reader,
        kind,
        observe,
    ));
    let ns_stream = namespace_changes(namespaces);
    let child_stream = changed_objects(child_events, meta_hash::<F::Child>, Deletions::Pass);
    let parent_stream = changed_objects(
        observe_deletions(
            reflector::reflector(
                parent_writer,
                watcher(parent_api, watcher::Config::default()),
            )
            .default_backoff(),
            ctx.deletion_hook(),
        ),
        meta_hash::<F::Parent>,
        Deletions::Pass,
    );
    let r1 = parent_reader.clone();
    let r2 = parent_reader.clone();
    let workqueue = metrics.for_kind::<F::Parent>(concurrency);
    info!("{} controller starting", F::Parent::kind(&()));
    let controller = Controller::for_stream(workqueue.triggers(parent_stream), parent_reader)
        .with_config(kube::runtime::controller::Config::default().concurrency(concurrency))
        .watches_shared_stream(
            ns_stream,
            workqueue.mapper(move |ns: Arc<Namespace>| (F::PARENTS_FOR_NAMESPACE)(&r1, &ns)),
        )
        .watches_stream(
            child_stream,
            workqueue.mapper(move |c: F::Child| (F::PARENTS_FOR_CHILD)(&r2, &c)),
        )
        .graceful_shutdown_on(shutdown)
        .run(
            workqueue.reconciler(reconcile::<F>),
            workqueue.error_policy(error_policy::<F>),
            ctx,
        );
    workqueue
        .results(controller)
        .for_each(|res| async move {
            if let Err(e) = res {
                debug!(error = %e, "{} controller event", F::Parent::kind(&()));
            }
        })
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(name: &str, controller: bool) -> OwnerReference {
        OwnerReference {
            api_version: "v1".into(),
            kind: "K".into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            controller: Some(controller),
            ..Default::default()
        }
    }

    #[test]
    fn take_over_replaces_only_the_controller_reference() {
        let mut meta = child_meta(
            "c".into(),
            "ns",
            BTreeMap::from([("old".into(), "l".into())]),
            BTreeMap::new(),
            owner("old-controller", true),
        );
        meta.owner_references
            .get_or_insert_default()
            .push(owner("other", false));
        meta.finalizers = Some(vec!["f".into()]);
        take_over_meta(
            &mut meta,
            BTreeMap::from([("new".into(), "l".into())]),
            BTreeMap::from([("a".into(), "b".into())]),
            owner("parent", true),
        );
        let names: Vec<_> = meta
            .owner_references
            .iter()
            .flatten()
            .map(|o| o.name.as_str())
            .collect();
        assert_eq!(names, vec!["other", "parent"]);
        assert_eq!(meta.labels.unwrap().keys().collect::<Vec<_>>(), vec!["new"]);
        assert_eq!(meta.annotations.unwrap()["a"], "b");
        assert_eq!(meta.finalizers.unwrap(), vec!["f"]);
        assert_eq!(meta.name.as_deref(), Some("c"));
    }
}
