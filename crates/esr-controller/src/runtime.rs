//! The runtime wiring of the controllers: settings ([`Config`]), the shared [`Context`], the
//! store cache ([`CachedStores`]) and [`Runtime`], which starts the ExternalSecret controller with
//! its watches (ExternalSecrets, managed Secrets, SecretStores, ClusterSecretStores) and the store
//! controllers.

use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use esr_api::v1::{ClusterSecretStore, ExternalSecret, SecretStore};
use esr_provider::store::{StoreLookup, StoreRef};
use esr_provider::{KubeAccess, ProviderError, ProviderRegistry, StoreInfo, StoreKind};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{Controller, WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use tracing::debug;

use crate::common::events::{EventSink, Reporter};
use crate::common::fanout::{SharedChildren, trigger_event};
use crate::common::generators::Generators;
use crate::common::observe::{Deletions, changed_objects, digest};
use crate::common::refresh;
use crate::common::rollout::Rollouts;
use crate::common::storegate::{StoreGate, StoreLimits};
use crate::externalsecret::error::SyncError;
use crate::externalsecret::fairness::FirstSyncs;
use crate::externalsecret::fetch::referenced_stores;
use crate::externalsecret::managed::ManagedSecrets;
use crate::externalsecret::plan::{EsStatus, LABEL_MANAGED};
use crate::externalsecret::reconcile::{es_error_policy, reconcile_es};
use crate::externalsecret::target::VerifiedTarget;
use crate::externalsecret::template::{RenderPool, RenderPoolError, TemplateEngine};
use crate::metrics::Metrics;
use crate::metrics::controller::requeued;

/// Controller settings (the `esr controller` flags that matter here).
#[derive(Debug, Clone)]
pub struct Config {
    /// `--namespace`: watch only this namespace (`None`: cluster-wide).
    pub namespace: Option<String>,
    /// `--controller-class`.
    pub controller_class: String,
    /// `--concurrent`.
    pub concurrency: u16,
    /// `--enable-flood-gate`.
    pub flood_gate: bool,
    /// `--store-requeue-interval`.
    pub store_requeue_interval: Duration,
    /// `--enable-cluster-store-reconciler` (also gates ExternalSecrets using ClusterSecretStores).
    pub cluster_stores: bool,
    /// Identity of this instance in events.
    pub instance: Option<String>,
    /// `--enable-push-secret-reconciler`: the store controllers then also manage the store
    /// finalizer for PushSecrets with `deletionPolicy: Delete` (as ESO).
    pub push_secrets: bool,
    /// `--enable-secret-store-reconciler`: run the SecretStore controller (ExternalSecrets using
    /// SecretStores are reconciled either way, as in ESO).
    pub secret_stores: bool,
    /// `--unsafe-allow-generic-targets`.
    pub allow_generic_targets: bool,
    /// `--template-workers`: size of the [`RenderPool`].
    pub render_workers: usize,
    /// `--store-request-timeout` and `--store-max-in-flight`: the per-store bounds of provider
    /// calls.
    pub store_limits: StoreLimits,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            namespace: None,
            controller_class: "default".to_string(),
            concurrency: 1,
            flood_gate: true,
            store_requeue_interval: Duration::from_secs(300),
            cluster_stores: true,
            instance: None,
            push_secrets: true,
            secret_stores: true,
            allow_generic_targets: false,
            render_workers: crate::externalsecret::template::default_render_workers(),
            store_limits: StoreLimits::default(),
        }
    }
}

/// Errors of a reconcile (all retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Kubernetes API error.
    #[error("kubernetes API error: {0}")]
    Kube(#[from] kube::Error),
    /// A sync failure (already recorded in status and events).
    #[error("{0}")]
    Sync(#[from] SyncError),
    /// A store controller failure (already recorded on the store's status and events).
    #[error("{0}")]
    Store(String),
    /// The render could not run on the [`RenderPool`] (shutdown, or a bug).
    #[error("{0}")]
    Render(#[from] RenderPoolError),
}

impl Error {
    /// The `reason` label of `externalsecret_sync_calls_error` (see [`crate::metrics`]).
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube(_) => "kubernetes",
            Error::Sync(e) => e.metric_label(),
            Error::Store(_) => "store",
            Error::Render(_) => "template",
        }
    }

    /// The backend's retry-after hint when it throttled us.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Error::Sync(e) => e.retry_after(),
            _ => None,
        }
    }
}

/// Store lookup over reflector caches, falling back to direct GETs on a cache miss.
#[derive(Clone)]
pub struct CachedStores {
    client: Client,
    ss: Store<SecretStore>,
    css: Store<ClusterSecretStore>,
    infos: StoreInfos,
}

fn store_info<K: serde::Serialize>(obj: &K) -> esr_provider::Result<StoreInfo> {
    let v = serde_json::to_value(obj).map_err(|e| ProviderError::invalid(e.to_string()))?;
    StoreInfo::from_object(&v)
}

/// The [`StoreInfo`] of each cached store at its resourceVersion, made once per version: every
/// reconcile of every ExternalSecret looks its store up, and making one serializes the whole
/// store (a fake store may hold thousands of entries).
#[derive(Clone, Default)]
struct StoreInfos(Arc<Mutex<HashMap<StoreKey, Versioned>>>);

/// A store's kind, namespace and name.
type StoreKey = (StoreKind, String, String);

/// A store's resourceVersion and the info made of it.
type Versioned = (String, Arc<StoreInfo>);

impl StoreInfos {
    /// The info of `obj` (a cached store of `kind`); `live` counts the stores now cached, to
    /// drop the entries of deleted ones.
    fn get<K: kube::Resource + serde::Serialize>(
        &self,
        kind: StoreKind,
        obj: &K,
        live: impl FnOnce() -> usize,
    ) -> esr_provider::Result<Arc<StoreInfo>> {
        let m = obj.meta();
        let key = (
            kind,
            m.namespace.clone().unwrap_or_default(),
            m.name.clone().unwrap_or_default(),
        );
        let version = m.resource_version.clone().unwrap_or_default();
        let mut infos = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((v, info)) = infos.get(&key)
            && !version.is_empty()
            && *v == version
        {
            return Ok(info.clone());
        }
        let info = Arc::new(store_info(obj)?);
        if infos.len() >= 2 * live() + 16 {
            infos.clear();
        }
        infos.insert(key, (version, info.clone()));
        Ok(info)
    }
}

#[async_trait]
impl StoreLookup for CachedStores {
    async fn get_store(
        &self,
        kind: StoreKind,
        namespace: &str,
        name: &str,
    ) -> esr_provider::Result<Option<Arc<StoreInfo>>> {
        let live = || self.ss.len() + self.css.len();
        match kind {
            StoreKind::SecretStore => {
                if let Some(s) = self.ss.get(&ObjectRef::new(name).within(namespace)) {
                    return self.infos.get(kind, &*s, live).map(Some);
                }
                let api: Api<SecretStore> = Api::namespaced(self.client.clone(), namespace);
                match api
                    .get_opt(name)
                    .await
                    .map_err(esr_provider::error::from_kube_error)?
                {
                    Some(s) => store_info(&s).map(|s| Some(Arc::new(s))),
                    None => Ok(None),
                }
            }
            StoreKind::ClusterSecretStore => {
                if let Some(s) = self.css.get(&ObjectRef::new(name)) {
                    return self.infos.get(kind, &*s, live).map(Some);
                }
                let api: Api<ClusterSecretStore> = Api::all(self.client.clone());
                match api
                    .get_opt(name)
                    .await
                    .map_err(esr_provider::error::from_kube_error)?
                {
                    Some(s) => store_info(&s).map(|s| Some(Arc::new(s))),
                    None => Ok(None),
                }
            }
        }
    }

    async fn namespace_labels(
        &self,
        namespace: &str,
    ) -> esr_provider::Result<Option<BTreeMap<String, String>>> {
        let api: Api<Namespace> = Api::all(self.client.clone());
        Ok(api
            .get_opt(namespace)
            .await
            .map_err(esr_provider::error::from_kube_error)?
            .map(|n| n.labels().clone()))
    }
}

/// Shared state of the reconcilers.
pub struct Context {
    /// Kubernetes client.
    pub client: Client,
    /// Settings.
    pub config: Config,
    /// Providers.
    pub registry: ProviderRegistry,
    /// Kubernetes IO for providers and template sources.
    pub kube: Arc<dyn KubeAccess>,
    /// Metrics.
    pub metrics: Metrics,
    /// Store lookup.
    pub stores: CachedStores,
    /// Templates.
    pub templates: Arc<dyn TemplateEngine>,
    /// Where templates render, off the async workers.
    pub render_pool: RenderPool,
    /// Per-store bounds of provider calls.
    pub store_gate: Arc<StoreGate>,
    /// First syncs ahead of refreshes under overload.
    pub first_syncs: FirstSyncs,
    /// The generators behind `generatorRef`s.
    pub generators: Generators,
    /// Rollout on rotation (the workload cache).
    pub rollouts: Rollouts,
    /// Events of the ExternalSecret controller.
    pub(crate) es_events: EventSink,
    /// The client events are written with: the same API server and credentials as `client`, with
    /// its own client-side rate limit, as controller-runtime's event recorder builds its own REST
    /// client (and so its own token bucket) from the manager's configuration. A burst of events
    /// then does not slow the reconciles' own requests.
    pub(crate) events_client: Client,
    /// Per-ExternalSecret failure backoff.
    pub(crate) failures: refresh::Backoffs<(String, String)>,
    /// What the controller keeps of the Secrets labelled
    /// `reconcile.external-secrets.io/managed=true`, from the Secret watch it runs anyway: an
    /// unchanged target needs no GET, and finding a target's orphaned Secrets no LIST.
    pub(crate) managed_secrets: ManagedSecrets,
    /// The last status this controller wrote per ExternalSecret uid, until the watch cache shows
    /// it (see [`effective_status`](crate::externalsecret::reconcile::effective_status)).
    pub(crate) written: Mutex<HashMap<String, EsStatus>>,
    /// The finalizer patches whose object the watch has not delivered yet.
    pub(crate) finalized: crate::externalsecret::reconcile::AddedFinalizers,
    /// What this controller knows of each target Secret (namespace, name) it wrote or read with
    /// data matching the data-hash annotation, so an unchanged Secret is not read again
    /// (forgotten with its ExternalSecret). Keyed by a hash of (namespace, name): two Secrets
    /// whose keys collide cannot be taken for each other, as a target counts as verified only
    /// while the cache shows the very resourceVersion remembered, and no two objects share one.
    pub(crate) verified: Mutex<HashMap<u64, VerifiedTarget>>,
}

impl Context {
    /// Waits until every event the ExternalSecret controller published so far was written.
    pub async fn flush_events(&self) {
        self.es_events.flush().await;
    }
}

fn es_trigger_hash(es: &ExternalSecret) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    es.metadata.generation.hash(&mut h);
    es.labels().hash(&mut h);
    es.annotations().hash(&mut h);
    es.finalizers().hash(&mut h);
    es.metadata
        .deletion_timestamp
        .as_ref()
        .map(|t| t.0.as_second())
        .hash(&mut h);
    h.finish()
}

fn ready_hash<K: serde::Serialize>(obj: &K) -> u64 {
    let Ok(v) = serde_json::to_value(obj) else {
        return 0;
    };
    let ready = v
        .pointer("/status/conditions")
        .and_then(|c| c.as_array())
        .and_then(|c| {
            c.iter()
                .find(|c| c.get("type").and_then(|t| t.as_str()) == Some("Ready"))
        })
        .and_then(|c| c.get("status"))
        .and_then(|s| s.as_str())
        .unwrap_or("")
        .to_string();
    let mut h = std::collections::hash_map::DefaultHasher::new();
    ready.hash(&mut h);
    h.finish()
}

/// The name of the Secret an ExternalSecret writes (`spec.target.name`, else its own name).
pub fn target_of(es: &ExternalSecret) -> &str {
    es.spec
        .target
        .as_ref()
        .and_then(|t| t.name.as_deref())
        .filter(|n| !n.is_empty())
        .or(es.metadata.name.as_deref())
        .unwrap_or_default()
}

/// Names of cached objects by a (namespace, value) key, fed from a watch, so a lookup by that
/// key does not scan the cache. The index may hold stale names (an object deleted, or its key
/// changed, since it was recorded): a lookup re-checks each candidate against the cache and drops
/// those that no longer match. Recording is all it needs from the watch: deletions need no event.
/// Keys of objects deleted since are dropped by a sweep whenever the index has doubled since the
/// last one, so it stays proportional to the cache under create/delete churn.
///
/// A key is kept as a hash of (namespace, value), and each name with its namespace in one string:
/// two keys whose hashes collide share a slot, and since every candidate is re-checked against the
/// cache, a collision costs a spare check, never a wrong answer.
#[derive(Clone, Default)]
pub struct NameIndex(Arc<Mutex<NameMap>>);

/// Hash of (namespace, key value) → "namespace/name" of each object recorded under it, and the
/// size at which the next sweep runs.
#[derive(Default)]
struct NameMap {
    names: HashMap<u64, Vec<Box<str>>>,
    sweep_at: usize,
}

/// The smallest index that is swept.
const SWEEP_MIN: usize = 1024;

/// The slot of (`namespace`, key `value`).
pub(crate) fn slot(namespace: &str, value: &str) -> u64 {
    digest((namespace, value))
}

fn entry(namespace: &str, name: &str) -> Box<str> {
    format!("{namespace}/{name}").into_boxed_str()
}

impl NameIndex {
    /// Records `name` (in `namespace`) under `key`; `current(namespace, name)` tells the key an
    /// object recorded now has (`None`: gone), for the sweep.
    pub fn insert(
        &self,
        namespace: &str,
        key: &str,
        name: &str,
        mut current: impl FnMut(&str, &str) -> Option<u64>,
    ) {
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let e = entry(namespace, name);
        let names = m.names.entry(slot(namespace, key)).or_default();
        if !names.contains(&e) {
            names.push(e);
            names.shrink_to_fit();
        }
        if m.names.len() >= m.sweep_at.max(SWEEP_MIN) {
            m.names.retain(|slot, names| {
                names.retain(|e| {
                    e.split_once('/')
                        .is_some_and(|(ns, n)| current(ns, n) == Some(*slot))
                });
                !names.is_empty()
            });
            m.sweep_at = 2 * m.names.len();
        }
    }

    /// How many keys the index holds.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).names.len()
    }

    /// The names recorded under (`namespace`, `key`) for which `current` still holds; the others
    /// are forgotten.
    pub fn lookup(
        &self,
        namespace: &str,
        key: &str,
        mut current: impl FnMut(&str) -> bool,
    ) -> Vec<String> {
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let k = slot(namespace, key);
        let Some(names) = m.names.get_mut(&k) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        names.retain(|e| match e.split_once('/') {
            Some((ns, n)) if ns == namespace => {
                let keep = current(n);
                if keep {
                    out.push(n.to_string());
                }
                keep
            }
            // Another namespace's key in the same slot: kept for its own lookups.
            Some(_) => true,
            None => false,
        });
        if names.is_empty() {
            m.names.remove(&k);
        }
        out
    }
}

/// ExternalSecrets by the Secret they write (namespace, name), fed from the ExternalSecret watch,
/// so a Secret event finds its ExternalSecrets without scanning them all. An ExternalSecret that
/// writes the Secret of its own name (no `target.name`, the usual case) is not recorded: the cache
/// answers for it directly.
#[derive(Clone, Default)]
pub struct TargetIndex(NameIndex);

impl TargetIndex {
    /// Records an ExternalSecret as it is now (`store`: the ExternalSecret cache).
    pub fn insert(&self, es: &ExternalSecret, store: &Store<ExternalSecret>) {
        if let (Some(ns), Some(name)) = (es.metadata.namespace.as_ref(), es.metadata.name.as_ref())
        {
            let target = target_of(es);
            if target == name {
                return;
            }
            self.0.insert(ns, target, name, |ns, n| {
                store
                    .get(&ObjectRef::new(n).within(ns))
                    .map(|es| slot(ns, target_of(&es)))
            });
        }
    }

    /// ExternalSecrets (in `store`) writing `namespace/secret`.
    pub fn es_for_secret(
        &self,
        store: &Store<ExternalSecret>,
        namespace: &str,
        secret: &str,
    ) -> Vec<ObjectRef<ExternalSecret>> {
        let writes = |n: &str| {
            let r = ObjectRef::new(n).within(namespace);
            store.get(&r).is_some_and(|es| target_of(&es) == secret)
        };
        let mut names = self.0.lookup(namespace, secret, writes);
        if writes(secret) && !names.iter().any(|n| n == secret) {
            names.push(secret.to_string());
        }
        names
            .into_iter()
            .map(|n| ObjectRef::new(&n).within(namespace))
            .collect()
    }

    /// How many target keys are recorded.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.len()
    }
}

/// ExternalSecrets (from the cache) that use a store.
pub fn es_for_store(
    store: &Store<ExternalSecret>,
    kind: StoreKind,
    namespace: Option<&str>,
    name: &str,
) -> Vec<ObjectRef<ExternalSecret>> {
    let wanted = StoreRef {
        kind,
        name: name.to_string(),
    };
    store
        .state()
        .iter()
        .filter(|es| kind.is_cluster() || es.namespace().as_deref() == namespace)
        .filter(|es| referenced_stores(es).contains(&wanted))
        .map(|es| ObjectRef::from_obj(&**es))
        .collect()
}

/// Everything needed to run the controllers.
pub struct Runtime {
    /// Shared context.
    pub ctx: Arc<Context>,
    ss_writer: reflector::store::Writer<SecretStore>,
    css_writer: reflector::store::Writer<ClusterSecretStore>,
    es_reader: Store<ExternalSecret>,
    es_writer: reflector::store::Writer<ExternalSecret>,
    /// Where the ExternalSecret watch's events go for the ClusterExternalSecret controller (see
    /// [`Runtime::share_external_secrets`]).
    es_feed: Option<tokio::sync::mpsc::Sender<watcher::Event<ExternalSecret>>>,
}

/// Events the ClusterExternalSecret controller may lag behind the ExternalSecret watch before
/// the watch waits for it.
const ES_FEED_BUFFER: usize = 1024;

/// The API clients of the controllers: one for their own requests, one for the events they
/// record (the same server and settings, its own rate-limit bucket; see
/// `Context::events_client`).
#[derive(Clone)]
pub struct Clients {
    /// Reads, watches and writes.
    pub api: Client,
    /// Events.
    pub events: Client,
}

impl Clients {
    /// One client for both (tests).
    pub fn shared(client: Client) -> Self {
        Clients {
            api: client.clone(),
            events: client,
        }
    }
}

impl Runtime {
    /// Builds the context.
    pub fn new(
        clients: Clients,
        config: Config,
        registry: ProviderRegistry,
        kube: Arc<dyn KubeAccess>,
        metrics: Metrics,
        templates: Arc<dyn TemplateEngine>,
        generators: Generators,
    ) -> Self {
        let Clients {
            api: client,
            events,
        } = clients;
        let (ss_reader, ss_writer) = reflector::store();
        let (css_reader, css_writer) = reflector::store();
        let reporter = Reporter {
            controller: esr_api::consts::EVENT_SOURCE_ES.to_string(),
            instance: config.instance.clone(),
        };
        let ctx = Arc::new(Context {
            es_events: EventSink::new(events.clone(), reporter),
            events_client: events,
            stores: CachedStores {
                client: client.clone(),
                ss: ss_reader.clone(),
                css: css_reader.clone(),
                infos: StoreInfos::default(),
            },
            render_pool: RenderPool::new(config.render_workers),
            store_gate: Arc::new(StoreGate::new(config.store_limits)),
            first_syncs: FirstSyncs::default(),
            client,
            config,
            registry,
            kube,
            metrics,
            templates,
            generators,
            rollouts: Rollouts::default(),
            failures: Default::default(),
            managed_secrets: ManagedSecrets::default(),
            written: Mutex::new(HashMap::new()),
            finalized: Default::default(),
            verified: Mutex::new(HashMap::new()),
        });
        let (es_reader, es_writer) = reflector::store();
        Runtime {
            ctx,
            ss_writer,
            css_writer,
            es_reader,
            es_writer,
            es_feed: None,
        }
    }

    /// Shares the ExternalSecret cache with the ClusterExternalSecret controller, which then
    /// runs no ExternalSecret watch and keeps no second copy of every ExternalSecret: it reads
    /// this cache, and gets the watch's events (metadata only) for its triggers. Only when this
    /// controller watches the whole cluster (`None` with `--namespace`, whose cache holds one
    /// namespace); call before [`Runtime::run`], once (a second call replaces the first).
    pub fn share_external_secrets(&mut self) -> Option<SharedChildren<ExternalSecret>> {
        if self.ctx.config.namespace.is_some() {
            return None;
        }
        let (tx, rx) = tokio::sync::mpsc::channel(ES_FEED_BUFFER);
        self.es_feed = Some(tx);
        Some(SharedChildren {
            store: self.es_reader.clone(),
            events: rx,
        })
    }

    /// Runs the ExternalSecret controller and the store controllers until `shutdown` resolves.
    pub async fn run(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
    ) {
        let ctx = self.ctx.clone();
        let client = ctx.client.clone();
        let ns = ctx.config.namespace.clone();
        let es_api: Api<ExternalSecret> = match &ns {
            Some(n) => Api::namespaced(client.clone(), n),
            None => Api::all(client.clone()),
        };
        let secret_api: Api<PartialObjectMeta<Secret>> = match &ns {
            Some(n) => Api::namespaced(client.clone(), n),
            None => Api::all(client.clone()),
        };
        let ss_api: Api<SecretStore> = match &ns {
            Some(n) => Api::namespaced(client.clone(), n),
            None => Api::all(client.clone()),
        };
        let css_api: Api<ClusterSecretStore> = Api::all(client.clone());

        let es_metrics = ctx
            .metrics
            .runtime
            .for_kind::<ExternalSecret>(ctx.config.concurrency);
        let es_reader = self.es_reader;
        ctx.first_syncs.attach(es_reader.clone());
        let targets = TargetIndex::default();
        let index = targets.clone();
        let index_cache = es_reader.clone();
        // managedFields are dropped before caching: nothing reads them, and they are a large
        // part of each cached object.
        let es_stream = changed_objects(
            reflector::reflector(
                self.es_writer,
                watcher(es_api, watcher::Config::default()).modify(|es: &mut ExternalSecret| {
                    es.metadata.managed_fields = None;
                }),
            )
            .default_backoff()
            .inspect({
                let ctx = ctx.clone();
                move |ev| {
                    if let Ok(watcher::Event::Apply(es) | watcher::Event::InitApply(es)) = ev {
                        index.insert(es, &index_cache);
                        ctx.delivered(es);
                    }
                }
            })
            .then({
                let feed = self.es_feed;
                move |ev| {
                    let feed = feed.clone();
                    async move {
                        if let (Some(feed), Ok(e)) = (feed, &ev) {
                            // An error: the ClusterExternalSecret controller stopped.
                            let _ = feed.send(trigger_event(e)).await;
                        }
                        ev
                    }
                }
            }),
            es_trigger_hash,
            Deletions::Drop,
        );
        let es_stream = es_metrics.triggers(es_stream);

        let managed = format!("{LABEL_MANAGED}=true");
        // Kept compact in the managed-Secret cache (see `ManagedSecrets`), which also tells the
        // changes that requeue an ExternalSecret from a relist's unchanged copies.
        let secret_stream = watcher(secret_api, watcher::Config::default().labels(&managed))
            .default_backoff()
            .filter_map({
                let cache = ctx.managed_secrets.clone();
                let forget = ctx.clone();
                move |ev| {
                    let out = match ev {
                        Err(e) => Some(Err(e)),
                        Ok(ev) => {
                            let changed = cache.apply(&ev);
                            match ev {
                                watcher::Event::Delete(s) => {
                                    let key = (s.namespace().unwrap_or_default(), s.name_any());
                                    forget.remember_target(key, None);
                                    Some(Ok(s))
                                }
                                watcher::Event::Apply(s) | watcher::Event::InitApply(s) => {
                                    changed.then_some(Ok(s))
                                }
                                // A relist: Secrets deleted while the watch was away leave
                                // without an event.
                                watcher::Event::Init => {
                                    forget.forget_targets();
                                    None
                                }
                                watcher::Event::InitDone => None,
                            }
                        }
                    };
                    futures::future::ready(out)
                }
            });

        let ss_stream = changed_objects(
            reflector::reflector(self.ss_writer, watcher(ss_api, watcher::Config::default()))
                .default_backoff(),
            ready_hash::<SecretStore>,
            Deletions::Drop,
        );
        let css_stream = changed_objects(
            reflector::reflector(
                self.css_writer,
                watcher(css_api.clone(), watcher::Config::default()),
            )
            .default_backoff(),
            ready_hash::<ClusterSecretStore>,
            Deletions::Drop,
        );

        let r1 = es_reader.clone();
        let r2 = es_reader.clone();
        let r3 = es_reader.clone();
        let shutdown_all = futures::future::FutureExt::shared(shutdown);
        let s1 = shutdown_all.clone();
        // Refresh requeues wait in the metrics' queue model, not in kube-runtime's scheduler.
        let requeues = es_metrics.requeues::<ExternalSecret>();
        let mut es_controller = Controller::for_stream(es_stream, es_reader)
            .with_config(
                kube::runtime::controller::Config::default().concurrency(ctx.config.concurrency),
            )
            .watches_stream(requeues, requeued)
            .watches_stream(
                secret_stream,
                es_metrics.mapper(move |s: PartialObjectMeta<Secret>| {
                    let ns = s.namespace().unwrap_or_default();
                    targets.es_for_secret(&r1, &ns, &s.name_any())
                }),
            )
            .watches_stream(
                ss_stream,
                es_metrics.mapper(move |s: SecretStore| {
                    let ns = s.namespace();
                    es_for_store(&r2, StoreKind::SecretStore, ns.as_deref(), &s.name_any())
                }),
            );
        // ClusterSecretStores are watched (cluster-wide) only when their reconciler runs.
        if ctx.config.cluster_stores {
            es_controller = es_controller.watches_stream(
                css_stream,
                es_metrics.mapper(move |s: ClusterSecretStore| {
                    es_for_store(&r3, StoreKind::ClusterSecretStore, None, &s.name_any())
                }),
            );
        }
        let es_controller = es_controller.graceful_shutdown_on(s1).run(
            es_metrics.reconciler(reconcile_es),
            es_metrics.error_policy(es_error_policy),
            ctx.clone(),
        );
        let es_controller = es_metrics
            .results(es_controller)
            .for_each(|res| async move {
                if let Err(e) = res {
                    debug!(error = %e, "controller event");
                }
            });

        let stores = crate::secretstore::reconcile::StoreControllers::new(ctx.clone())
            .with_push_secret_finalizer(ctx.config.push_secrets);
        let s2 = shutdown_all.clone();
        let s3 = shutdown_all.clone();
        let ss_enabled = ctx.config.secret_stores;
        let ss_run = stores.run_secret_stores(ns.clone(), s2);
        let ss_ctrl = async move {
            if ss_enabled {
                ss_run.await;
            }
        };
        let css_ctrl = stores.run_cluster_secret_stores(s3);
        if ctx.config.cluster_stores {
            tokio::join!(es_controller, ss_ctrl, css_ctrl);
        } else {
            tokio::join!(es_controller, ss_ctrl);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::watcher::Event;

    fn es(ns: &str, name: &str, spec: serde_json::Value) -> ExternalSecret {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
            "metadata": {"name": name, "namespace": ns}, "spec": spec
        }))
        .unwrap()
    }

    fn cache<K>(items: Vec<K>) -> Store<K>
    where
        K: kube::Resource<DynamicType = ()> + Clone + 'static,
    {
        let (reader, mut writer) = reflector::store();
        writer.apply_watcher_event(&Event::Init);
        for i in items {
            writer.apply_watcher_event(&Event::InitApply(i));
        }
        writer.apply_watcher_event(&Event::InitDone);
        reader
    }

    #[test]
    fn a_store_info_is_made_once_per_resource_version() {
        let store = |name: &str, version: &str| -> ClusterSecretStore {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "external-secrets.io/v1", "kind": "ClusterSecretStore",
                "metadata": {"name": name, "resourceVersion": version},
                "spec": {"provider": {"fake": {"data": [{"key": "k", "value": "v"}]}}}
            }))
            .unwrap()
        };
        let infos = StoreInfos::default();
        let kind = StoreKind::ClusterSecretStore;
        let a = infos.get(kind, &store("fake", "1"), || 1).unwrap();
        let again = infos.get(kind, &store("fake", "1"), || 1).unwrap();
        assert!(
            Arc::ptr_eq(&a, &again),
            "the same version is not made again"
        );
        let changed = infos.get(kind, &store("fake", "2"), || 1).unwrap();
        assert!(!Arc::ptr_eq(&a, &changed), "a new version is made anew");
        // Entries of stores no longer cached do not pile up.
        for i in 0..100 {
            infos
                .get(kind, &store(&format!("gone-{i}"), "1"), || 1)
                .unwrap();
        }
        assert!(infos.0.lock().unwrap().len() <= 2 + 16);
    }

    #[test]
    fn secrets_map_to_external_secrets_by_target_name() {
        let store = cache(vec![
            es("a", "db", serde_json::json!({})),
            es(
                "a",
                "other",
                serde_json::json!({"target": {"name": "db-copy"}}),
            ),
            es("b", "db", serde_json::json!({})),
        ]);
        let index = TargetIndex::default();
        for es in store.state() {
            index.insert(&es, &store);
        }
        let es_for_secret = |store: &Store<ExternalSecret>, ns: &str, name: &str| {
            index.es_for_secret(store, ns, name)
        };
        let names = |v: Vec<ObjectRef<ExternalSecret>>| -> Vec<String> {
            v.into_iter().map(|r| r.name).collect()
        };
        assert_eq!(
            names(es_for_secret(&store, "a", "db")),
            vec!["db".to_string()]
        );
        assert_eq!(
            names(es_for_secret(&store, "a", "db-copy")),
            vec!["other".to_string()]
        );
        assert!(es_for_secret(&store, "c", "db").is_empty());
        // Only the ExternalSecret writing another name than its own is recorded.
        assert_eq!(index.len(), 1);
        // Retargeted or deleted ExternalSecrets are no longer found under their old Secret.
        let moved = cache(vec![es(
            "a",
            "other",
            serde_json::json!({"target": {"name": "db"}}),
        )]);
        index.insert(&moved.state()[0], &moved);
        assert!(index.es_for_secret(&moved, "a", "db-copy").is_empty());
        assert_eq!(
            names(index.es_for_secret(&moved, "a", "db")),
            vec!["other".to_string()]
        );
        // Two writers of one Secret: the one of that name and another one.
        let both = cache(vec![
            es("a", "db", serde_json::json!({})),
            es("a", "other", serde_json::json!({"target": {"name": "db"}})),
        ]);
        let mut found = names(index.es_for_secret(&both, "a", "db"));
        found.sort();
        assert_eq!(found, vec!["db".to_string(), "other".to_string()]);
    }

    #[test]
    fn a_slot_shared_by_two_keys_answers_each_with_its_own_names() {
        let index = NameIndex::default();
        index.insert("a", "db", "es-a", |_, _| None);
        // Another namespace's name in the same slot, as a hash collision would put it.
        index
            .0
            .lock()
            .unwrap()
            .names
            .entry(slot("a", "db"))
            .or_default()
            .push(entry("b", "es-b"));
        assert_eq!(index.lookup("a", "db", |_| true), vec!["es-a".to_string()]);
        // A candidate that no longer holds is dropped; the other namespace's name stays.
        assert!(index.lookup("a", "db", |_| false).is_empty());
        let names = index.0.lock().unwrap().names[&slot("a", "db")].clone();
        assert_eq!(names, vec![entry("b", "es-b")]);
    }

    #[test]
    fn the_name_index_sweeps_names_no_longer_current_when_it_doubles() {
        let index = NameIndex::default();
        // Names of deleted objects: never looked up again, dropped by the sweep.
        for i in 0..SWEEP_MIN - 1 {
            index.insert("ns", &format!("gone-{i}"), "x", |_, _| None);
        }
        assert_eq!(index.len(), SWEEP_MIN - 1);
        // The insert that reaches the sweep size keeps only what is current.
        index.insert("ns", "live", "y", |ns, n| {
            (n == "y").then(|| slot(ns, "live"))
        });
        assert_eq!(index.len(), 1);
        assert_eq!(index.lookup("ns", "live", |_| true), vec!["y".to_string()]);
        // The next sweep waits until the index has doubled again (here: the minimum size).
        for i in 0..10 {
            index.insert("ns", &format!("more-{i}"), "z", |_, _| None);
        }
        assert_eq!(index.len(), 11);
    }

    #[test]
    fn stores_map_to_the_external_secrets_using_them() {
        let store = cache(vec![
            es(
                "a",
                "x",
                serde_json::json!({"secretStoreRef": {"name": "s"}}),
            ),
            es(
                "b",
                "y",
                serde_json::json!({"secretStoreRef": {"name": "s"}}),
            ),
            es(
                "a",
                "z",
                serde_json::json!({"secretStoreRef": {"name": "c", "kind": "ClusterSecretStore"}}),
            ),
            es(
                "b",
                "w",
                serde_json::json!({"data": [{"secretKey": "k", "remoteRef": {"key": "r"},
                    "sourceRef": {"storeRef": {"name": "c", "kind": "ClusterSecretStore"}}}]}),
            ),
        ]);
        let mut got: Vec<String> = es_for_store(&store, StoreKind::SecretStore, Some("a"), "s")
            .into_iter()
            .map(|r| r.name)
            .collect();
        assert_eq!(got, vec!["x".to_string()]);
        got = es_for_store(&store, StoreKind::ClusterSecretStore, None, "c")
            .into_iter()
            .map(|r| r.name)
            .collect();
        got.sort();
        assert_eq!(got, vec!["w".to_string(), "z".to_string()]);
    }

    #[test]
    fn trigger_hash_ignores_status_only_changes() {
        let a = es("a", "x", serde_json::json!({}));
        let mut b = a.clone();
        b.status = Some(Default::default());
        assert_eq!(es_trigger_hash(&a), es_trigger_hash(&b));
        let mut c = a.clone();
        c.metadata.labels = Some([("l".to_string(), "v".to_string())].into());
        assert_ne!(es_trigger_hash(&a), es_trigger_hash(&c));
        let mut d = a.clone();
        d.metadata.generation = Some(2);
        assert_ne!(es_trigger_hash(&a), es_trigger_hash(&d));
    }
}
