//! The SecretStore / ClusterSecretStore executor: one runner generic over the store kind
//! ([`StoreObject`]) checks the store, then writes what [`finish`](super::plan::finish) decides.
//! PushSecrets are watched (a reflector cache, no per-reconcile lists) and a change re-reconciles
//! the stores it concerns, for the store finalizer (see [`super::plan`]).

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use esr_api::consts as c;
use esr_api::v1::{ClusterSecretStore, SecretStore};
use esr_api::v1alpha1::PushSecret;
use esr_provider::{
    ClientContext, Maintenance, ProviderError, StoreInfo, StoreKind, store::store_is_managed,
};
use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use tracing::{debug, warn};

use super::plan::{
    StoreCheck, finalizers_with, finish, maintenance_event, store_finalizer_action, store_interval,
    store_outcome,
};
use crate::common::events::{EventSink, Reporter};
use crate::common::observe::cache_ready;
use crate::externalsecret::plan::EventRec;
use crate::externalsecret::reconcile::Context;
use crate::metrics::controller::watched;
use crate::metrics::{ConditionLabels, Metrics, ResourceLabels};

/// Errors of a store reconcile (retried after 5s).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Kubernetes API error.
    #[error("kubernetes API error: {0}")]
    Kube(#[from] kube::Error),
    /// The store object cannot be read as a store.
    #[error("{0}")]
    Store(#[from] ProviderError),
    /// The store object cannot be serialized.
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    /// The PushSecret cache cannot be filled.
    #[error("PushSecret cache: {0}")]
    PushSecretCache(#[from] reflector::store::WriterDropped),
    /// The check failed with a retryable outcome (recorded in status and events).
    #[error("{0}")]
    Check(String),
}

type GaugeFamily<L> = Family<L, Gauge<f64, std::sync::atomic::AtomicU64>>;

/// A store kind: SecretStore (namespaced) or ClusterSecretStore.
pub trait StoreObject:
    Resource<DynamicType = ()>
    + serde::Serialize
    + Clone
    + std::fmt::Debug
    + serde::de::DeserializeOwned
    + Send
    + Sync
    + 'static
{
    /// The kind.
    const KIND: StoreKind;
    /// The controller name its events carry.
    const EVENT_SOURCE: &'static str;
    /// `spec.refreshInterval`.
    fn refresh_interval(&self) -> Option<&IntOrString>;
    /// The API for objects of this kind in `namespace` (all namespaces when `None`; a
    /// ClusterSecretStore is cluster-scoped).
    fn api(client: Client, namespace: Option<&str>) -> Api<Self>;
    /// The `*_status_condition` and `*_reconcile_duration` families.
    fn families(m: &Metrics) -> (&GaugeFamily<ConditionLabels>, &GaugeFamily<ResourceLabels>);
}

impl StoreObject for SecretStore {
    const KIND: StoreKind = StoreKind::SecretStore;
    const EVENT_SOURCE: &'static str = c::EVENT_SOURCE_SECRET_STORE;
    fn refresh_interval(&self) -> Option<&IntOrString> {
        self.spec.refresh_interval.as_ref()
    }
    fn api(client: Client, namespace: Option<&str>) -> Api<Self> {
        match namespace {
            Some(n) => Api::namespaced(client, n),
            None => Api::all(client),
        }
    }
    fn families(m: &Metrics) -> (&GaugeFamily<ConditionLabels>, &GaugeFamily<ResourceLabels>) {
        (&m.ss_condition, &m.ss_duration)
    }
}

impl StoreObject for ClusterSecretStore {
    const KIND: StoreKind = StoreKind::ClusterSecretStore;
    const EVENT_SOURCE: &'static str = c::EVENT_SOURCE_CLUSTER_SECRET_STORE;
    fn refresh_interval(&self) -> Option<&IntOrString> {
        self.spec.refresh_interval.as_ref()
    }
    fn api(client: Client, _namespace: Option<&str>) -> Api<Self> {
        Api::all(client)
    }
    fn families(m: &Metrics) -> (&GaugeFamily<ConditionLabels>, &GaugeFamily<ResourceLabels>) {
        (&m.css_condition, &m.css_duration)
    }
}

/// Reconciler state of one store kind.
pub struct StoreContext<K> {
    /// The controller context.
    pub ctx: Arc<Context>,
    events: EventSink,
    /// The PushSecret cache, when the store finalizer for PushSecrets is managed.
    push_secrets: Option<Store<PushSecret>>,
    kind: PhantomData<fn() -> K>,
}

impl<K: StoreObject> StoreContext<K> {
    /// A context; `push_secrets` is the PushSecret cache when the store finalizer is managed.
    pub fn new(ctx: Arc<Context>, push_secrets: Option<Store<PushSecret>>) -> Self {
        let events = EventSink::new(
            ctx.events_client.clone(),
            Reporter {
                controller: K::EVENT_SOURCE.to_string(),
                instance: ctx.config.instance.clone(),
            },
        );
        StoreContext {
            ctx,
            events,
            push_secrets,
            kind: PhantomData,
        }
    }

    /// Waits until every event published so far was written.
    pub async fn flush_events(&self) {
        self.events.flush().await;
    }
}

/// Checks a store: registry, static validation, client, `Validate()`. Returns the check, the
/// capabilities string and the provider's maintenance state.
pub async fn check_store(
    ctx: &Context,
    info: &StoreInfo,
) -> (StoreCheck, Option<String>, Maintenance) {
    let provider = match ctx.registry.for_store(info) {
        Ok(p) => p.clone(),
        Err(e) => {
            return (
                StoreCheck::InvalidProvider(e.to_string()),
                None,
                Maintenance::Maintained,
            );
        }
    };
    let caps = Some(provider.capabilities(info).as_str().to_string());
    let maintenance = provider.maintenance();
    if let Err(e) = provider.validate_store(info) {
        return (StoreCheck::ClientError(e.to_string()), caps, maintenance);
    }
    let ns = info.namespace.clone();
    let cctx = ClientContext::new(info, ns.as_deref(), ctx.kube.clone())
        .with_recorder(Arc::new(ctx.metrics.clone()));
    // Within the store's bounds, like the ExternalSecrets' calls: a hung store holds this
    // reconcile only until the deadline.
    let gated = ctx
        .store_gate
        .connect(info.identity(), provider.new_client(&cctx));
    let client = match gated.await {
        Ok(c) => c,
        Err(e) => return (StoreCheck::ClientError(e.to_string()), caps, maintenance),
    };
    (
        StoreCheck::Validated(client.validate().await),
        caps,
        maintenance,
    )
}

/// A PushSecret reflector: the cache the finalizer decision reads and the trigger stream.
fn push_secret_cache(
    client: Client,
    namespace: Option<&str>,
) -> (
    Store<PushSecret>,
    impl futures::Stream<Item = Result<PushSecret, watcher::Error>> + Send + 'static,
) {
    let api: Api<PushSecret> = match namespace {
        Some(n) => Api::namespaced(client, n),
        None => Api::all(client),
    };
    let (reader, writer) = reflector::store();
    let stream = reflector(
        writer,
        watcher(api, watcher::Config::default()).default_backoff(),
    )
    .touched_objects();
    (reader, stream)
}

/// The stores (from the store controller's cache) a PushSecret concerns.
fn stores_for_ps<K: StoreObject>(stores: &Store<K>, ps: &PushSecret) -> Vec<ObjectRef<K>> {
    stores
        .state()
        .iter()
        .filter(|s| {
            crate::pushsecret::source::ps_concerns_store(
                ps,
                K::KIND,
                &s.name_any(),
                s.namespace().as_deref(),
                s.labels(),
            )
        })
        .map(|s| ObjectRef::from_obj(&**s))
        .collect()
}

/// How long a store reconcile waits for the PushSecret cache before leaving the finalizer alone.
const PS_CACHE_WAIT: Duration = Duration::from_secs(10);

/// Adds or removes the store finalizer as [`store_finalizer_action`] decides (merge patch with
/// the resourceVersion, so a concurrent change makes it retry).
async fn manage_store_finalizer<K: StoreObject>(
    store: &K,
    ctx: &Context,
    push_secrets: &Store<PushSecret>,
) -> Result<(), Error> {
    // Never decide on an incomplete cache (that could drop a needed finalizer); if PushSecrets
    // cannot be listed (e.g. the CRD is not installed) the store is still validated.
    match tokio::time::timeout(PS_CACHE_WAIT, cache_ready(push_secrets)).await {
        Ok(res) => res?,
        Err(_) => {
            warn!(store = %store.name_any(), "PushSecret cache not ready; store finalizer left unchanged");
            return Ok(());
        }
    }
    let name = store.name_any();
    let ns = store.namespace();
    let all = push_secrets.state();
    let referenced = crate::pushsecret::source::store_has_delete_refs(
        K::KIND,
        &name,
        ns.as_deref(),
        store.labels(),
        all.iter().map(|p| &**p),
    );
    let has = store.finalizers().iter().any(|f| f == c::FINALIZER_STORE);
    let deleting = store.meta().deletion_timestamp.is_some();
    let Some(add) = store_finalizer_action(referenced, deleting, has) else {
        if deleting && referenced {
            debug!(store = %name, "store is being deleted; PushSecrets with deletionPolicy=Delete still reference it");
        }
        return Ok(());
    };
    let f = finalizers_with(store.finalizers(), add);
    let patch = serde_json::json!({"metadata": {"finalizers": f, "resourceVersion": store.resource_version()}});
    K::api(ctx.client.clone(), ns.as_deref())
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    debug!(store = %name, add, "store finalizer updated for PushSecrets with deletionPolicy=Delete");
    Ok(())
}

fn publish<K: StoreObject>(sctx: &StoreContext<K>, store: &K, ev: &EventRec) {
    sctx.events
        .publish(store.object_ref(&()), ev.type_, &ev.reason, &ev.message);
}

/// Reconciles one store: finalizer, check, events, status, metrics.
pub async fn reconcile<K: StoreObject>(
    store: Arc<K>,
    sctx: Arc<StoreContext<K>>,
) -> Result<Action, Error> {
    let ctx = &sctx.ctx;
    let started = Instant::now();
    let name = store.name_any();
    let ns = store.namespace().unwrap_or_default();
    let raw = serde_json::to_value(&*store)?;
    let info = StoreInfo::from_object(&raw)?;
    if !store_is_managed(&info, &ctx.config.controller_class) {
        return Ok(Action::await_change());
    }
    if let Some(ps) = &sctx.push_secrets {
        manage_store_finalizer(&*store, ctx, ps).await?;
    }
    if store.meta().deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let (check, caps, maintenance) = check_store(ctx, &info).await;
    let outcome = store_outcome(&check);
    if let Some(ev) = maintenance_event(maintenance, &info.annotations) {
        publish(&sctx, &*store, &ev);
    }
    let end = finish(&raw, &outcome, caps, Utc::now());
    if let Some(ev) = &end.event {
        publish(&sctx, &*store, ev);
    }
    if let Some(st) = &end.status {
        let patch = serde_json::json!({ "status": st });
        K::api(ctx.client.clone(), store.namespace().as_deref())
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    let (cond_family, dur_family) = K::families(&ctx.metrics);
    let r = ctx.metrics.resource(&name, &ns);
    Metrics::set_condition(cond_family, &r, "Ready", outcome.status);
    dur_family
        .get_or_create(&r)
        .set(started.elapsed().as_nanos() as f64);
    if outcome.retry {
        return Err(Error::Check(outcome.event.message));
    }
    Ok(Action::requeue(store_interval(
        store.refresh_interval(),
        ctx.config.store_requeue_interval,
    )))
}

/// Runs a store controller: stores of kind `K` watched in `namespace` (all when `None`),
/// PushSecrets in `ps_namespace` when the store finalizer is managed.
async fn run<K: StoreObject>(
    ctx: Arc<Context>,
    namespace: Option<String>,
    push_secrets: Option<Option<String>>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let api = K::api(ctx.client.clone(), namespace.as_deref());
    let metrics = ctx.metrics.runtime.for_kind::<K>(ctx.config.concurrency);
    let mut controller = watched(api, watcher::Config::default(), &metrics);
    let mut ps_cache = None;
    if let Some(ps_ns) = push_secrets {
        let (reader, stream) = push_secret_cache(ctx.client.clone(), ps_ns.as_deref());
        let stores = controller.store();
        controller = controller.watches_stream(
            stream,
            metrics.mapper(move |ps| stores_for_ps(&stores, &ps)),
        );
        ps_cache = Some(reader);
    }
    let concurrency = ctx.config.concurrency;
    let controller = controller
        .with_config(kube::runtime::controller::Config::default().concurrency(concurrency))
        .graceful_shutdown_on(shutdown)
        .run(
            metrics.reconciler(reconcile::<K>),
            metrics.error_policy(|_s, e: &Error, _ctx| {
                warn!(error = %e, kind = ?K::KIND, "store reconcile failed");
                Action::requeue(Duration::from_secs(5))
            }),
            Arc::new(StoreContext::<K>::new(ctx, ps_cache)),
        );
    metrics.results(controller).for_each(|_| async {}).await;
}

/// Runs the two store controllers.
pub struct StoreControllers {
    ctx: Arc<Context>,
    push_secrets: bool,
}

impl StoreControllers {
    /// New (the store finalizer for PushSecrets is managed; see
    /// [`StoreControllers::with_push_secret_finalizer`]).
    pub fn new(ctx: Arc<Context>) -> Self {
        StoreControllers {
            ctx,
            push_secrets: true,
        }
    }

    /// Whether the store finalizer for PushSecrets with `deletionPolicy: Delete` is managed (ESO
    /// does it only when the PushSecret reconciler is enabled). Default true.
    #[must_use]
    pub fn with_push_secret_finalizer(mut self, enabled: bool) -> Self {
        self.push_secrets = enabled;
        self
    }

    /// The SecretStore controller (stores and PushSecrets in `namespace`, all when `None`).
    pub async fn run_secret_stores(
        &self,
        namespace: Option<String>,
        shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
    ) {
        let ps = self.push_secrets.then(|| namespace.clone());
        run::<SecretStore>(self.ctx.clone(), namespace, ps, shutdown).await;
    }

    /// The ClusterSecretStore controller (PushSecrets in the controller's namespace scope).
    pub async fn run_cluster_secret_stores(
        &self,
        shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
    ) {
        let ps = self.push_secrets.then(|| self.ctx.config.namespace.clone());
        run::<ClusterSecretStore>(self.ctx.clone(), None, ps, shutdown).await;
    }
}
