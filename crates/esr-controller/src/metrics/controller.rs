//! controller-runtime's controller and workqueue metrics, measured on kube-runtime's controllers.
//!
//! ESO runs on controller-runtime, whose metrics registry exports, per controller (`controller`
//! label: `externalsecret`, `secretstore`, `clustersecretstore`, `pushsecret`,
//! `clusterexternalsecret`, `clusterpushsecret`; the workqueue's `name` label is the same value):
//!
//! | family | type | what esr measures |
//! |---|---|---|
//! | `controller_runtime_reconcile_total{controller,result}` | counter | finished reconciles; `result` is `success`, `error` or `requeue_after` (`requeue`, a rate-limited requeue without error, never happens in esr and stays 0) |
//! | `controller_runtime_reconcile_errors_total{controller}` | counter | reconciles that returned an error |
//! | `controller_runtime_reconcile_time_seconds{controller}` | histogram | duration of the reconcile function |
//! | `controller_runtime_max_concurrent_reconciles{controller}` | gauge | `--concurrent` |
//! | `controller_runtime_active_workers{controller}` | gauge | reconciles running now |
//! | `workqueue_depth{name,controller}` | gauge | objects due for a reconcile that has not started |
//! | `workqueue_adds_total{name,controller}` | counter | objects that became due while not already due |
//! | `workqueue_queue_duration_seconds{name,controller}` | histogram | from due to reconcile start |
//! | `workqueue_work_duration_seconds{name,controller}` | histogram | from reconcile start to end |
//! | `workqueue_retries_total{name,controller}` | counter | retries scheduled by the error policy |
//! | `workqueue_unfinished_work_seconds{name,controller}` | gauge | summed age of the running reconciles |
//! | `workqueue_longest_running_processor_seconds{name,controller}` | gauge | age of the oldest running reconcile |
//!
//! kube-runtime has no workqueue object to instrument: its scheduler keeps one entry per object
//! (the earliest requested time wins) and its runner holds an object back while a reconcile of it
//! runs. [`ControllerMetrics`] models exactly that from the three places where requests enter it:
//! the trigger streams and mappers ([`ControllerMetrics::triggers`],
//! [`ControllerMetrics::mapper`]), the `Action` a reconcile returns, and the `Action` of the error
//! policy. An object is *due* when a trigger arrives or a requested requeue time passes; it leaves
//! the queue when its reconcile starts. Where this differs from client-go's workqueue: a
//! requeue-after that is still pending when a watch event arrives is merged into one entry (client-go
//! would count a second add when the delay expires), and a due requeue is counted at the next scrape
//! or queue event after its time passes rather than at the exact instant.
//!
//! A controller can leave its requeues to this queue instead of kube-runtime's scheduler
//! ([`ControllerMetrics::requeues`]; the ExternalSecret controller does, as every ExternalSecret
//! waits there for its refresh): the reconcile's `Action` then reaches kube-runtime as
//! `await_change`, and the queue hands the object back to the controller when its time comes, so
//! such a requeue is counted when it becomes due. One entry per object either way, with one
//! shared namespace/name key where kube-runtime's scheduler keeps two full `ObjectRef`s.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::{FutureExt, Stream, StreamExt};
use kube::Resource;
use kube::core::PartialObjectMeta;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tokio::sync::Notify;
use tracing::Instrument;

use super::FloatGauge;

/// The buckets of `controller_runtime_reconcile_time_seconds` (controller-runtime's).
pub const RECONCILE_BUCKETS: [f64; 40] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0,
    25.0, 30.0, 40.0, 50.0, 60.0,
];

/// The values of the `result` label of `controller_runtime_reconcile_total`.
pub const RESULTS: [&str; 4] = ["success", "error", "requeue", "requeue_after"];

/// `controller`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabels {
    /// The controller's name (ESO's: the lower-case kind).
    pub controller: String,
}

/// `controller, result`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    /// The controller's name.
    pub controller: String,
    /// One of [`RESULTS`].
    pub result: String,
}

/// `name, controller` of the workqueue metrics (both the controller's name).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueLabels {
    /// The queue's name.
    pub name: String,
    /// The controller's name.
    pub controller: String,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

fn reconcile_histogram() -> Histogram {
    Histogram::new(RECONCILE_BUCKETS)
}

/// client-go's workqueue buckets: 10ns to 1000s, ×10.
fn queue_histogram() -> Histogram {
    Histogram::new(exponential_buckets(10e-9, 10.0, 12))
}

/// The families of every controller, and the controllers' queue models.
#[derive(Clone)]
pub struct RuntimeMetrics {
    reconcile_total: Family<ResultLabels, Counter>,
    reconcile_errors: Family<ControllerLabels, Counter>,
    reconcile_time: Histograms<ControllerLabels>,
    max_concurrent: Family<ControllerLabels, Gauge>,
    active_workers: Family<ControllerLabels, Gauge>,
    depth: Family<QueueLabels, Gauge>,
    adds: Family<QueueLabels, Counter>,
    queue_duration: Histograms<QueueLabels>,
    work_duration: Histograms<QueueLabels>,
    unfinished: Family<QueueLabels, FloatGauge>,
    longest: Family<QueueLabels, FloatGauge>,
    retries: Family<QueueLabels, Counter>,
    controllers: Arc<Mutex<Vec<ControllerMetrics>>>,
}

impl RuntimeMetrics {
    /// New families, registered in `registry` with controller-runtime's names and help texts.
    pub fn register(registry: &mut Registry) -> Self {
        let m = RuntimeMetrics {
            reconcile_total: Family::default(),
            reconcile_errors: Family::default(),
            reconcile_time: Family::new_with_constructor(reconcile_histogram),
            max_concurrent: Family::default(),
            active_workers: Family::default(),
            depth: Family::default(),
            adds: Family::default(),
            queue_duration: Family::new_with_constructor(queue_histogram),
            work_duration: Family::new_with_constructor(queue_histogram),
            unfinished: Family::default(),
            longest: Family::default(),
            retries: Family::default(),
            controllers: Arc::default(),
        };
        registry.register(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            m.reconcile_total.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            m.reconcile_errors.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            m.reconcile_time.clone(),
        );
        registry.register(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            m.max_concurrent.clone(),
        );
        registry.register(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            m.active_workers.clone(),
        );
        registry.register(
            "workqueue_depth",
            "Current depth of workqueue",
            m.depth.clone(),
        );
        registry.register(
            "workqueue_adds",
            "Total number of adds handled by workqueue",
            m.adds.clone(),
        );
        registry.register(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            m.queue_duration.clone(),
        );
        registry.register(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.",
            m.work_duration.clone(),
        );
        registry.register(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been observed \
             by work_duration. Large values indicate stuck threads. One can deduce the number of \
             stuck threads by observing the rate at which this increases.",
            m.unfinished.clone(),
        );
        registry.register(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running.",
            m.longest.clone(),
        );
        registry.register(
            "workqueue_retries",
            "Total number of retries handled by workqueue",
            m.retries.clone(),
        );
        m
    }

    /// The metrics of the controller of `K`, named as controller-runtime's builder names it (the
    /// lower-case kind: `externalsecret`, `clustersecretstore`, …), running up to
    /// `max_concurrent` reconciles at once.
    pub fn for_kind<K>(&self, max_concurrent: u16) -> ControllerMetrics
    where
        K: Resource<DynamicType = ()>,
    {
        self.controller(&K::kind(&()).to_lowercase(), max_concurrent)
    }

    /// The metrics of the controller `name` running up to `max_concurrent` reconciles at once.
    /// Every series of the controller is created at once (0), as controller-runtime does.
    pub fn controller(&self, name: &str, max_concurrent: u16) -> ControllerMetrics {
        let c = ControllerLabels {
            controller: name.to_string(),
        };
        let q = QueueLabels {
            name: name.to_string(),
            controller: name.to_string(),
        };
        let results = RESULTS.map(|r| {
            self.reconcile_total
                .get_or_create(&ResultLabels {
                    controller: name.to_string(),
                    result: r.to_string(),
                })
                .clone()
        });
        self.max_concurrent
            .get_or_create(&c)
            .set(i64::from(max_concurrent));
        let cm = ControllerMetrics {
            name: Arc::from(name),
            queue: Arc::default(),
            owns_requeues: Arc::default(),
            wake: Arc::default(),
            failed: Arc::default(),
            s: Arc::new(Series {
                results,
                errors: self.reconcile_errors.get_or_create(&c).clone(),
                time: self.reconcile_time.get_or_create(&c).clone(),
                active: self.active_workers.get_or_create(&c).clone(),
                depth: self.depth.get_or_create(&q).clone(),
                adds: self.adds.get_or_create(&q).clone(),
                queue_duration: self.queue_duration.get_or_create(&q).clone(),
                work_duration: self.work_duration.get_or_create(&q).clone(),
                unfinished: self.unfinished.get_or_create(&q).clone(),
                longest: self.longest.get_or_create(&q).clone(),
                retries: self.retries.get_or_create(&q).clone(),
            }),
        };
        self.controllers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(cm.clone());
        cm
    }

    /// Brings the time-dependent values (due requeues, depth, running reconciles' ages) up to
    /// `now`; called before each scrape.
    pub fn refresh(&self, now: Instant) {
        let all = self
            .controllers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        for c in all {
            c.refresh_at(now);
        }
    }
}

/// One controller's series.
struct Series {
    results: [Counter; 4],
    errors: Counter,
    time: Histogram,
    active: Gauge,
    depth: Gauge,
    adds: Counter,
    queue_duration: Histogram,
    work_duration: Histogram,
    unfinished: FloatGauge,
    longest: FloatGauge,
    retries: Counter,
}

/// An object waiting in the scheduler.
#[derive(Debug, Clone, Copy)]
struct Pending {
    /// When it is (or was) due.
    due: Instant,
    /// Whether it has been counted as added (it is due).
    added: bool,
    /// Whether this queue, not kube-runtime's scheduler, holds the request (a requeue of a
    /// controller that [owns its requeues](ControllerMetrics::requeues)): it must hand the object
    /// to kube-runtime when it becomes due.
    owned: bool,
}

/// The namespace/name of an object in the queue, shared by its entries (one allocation).
type Key = Arc<str>;

/// The model of kube-runtime's scheduler and runner for one controller, and the holder of the
/// requeues of a controller that owns them. Every operation is O(log n) in the objects waiting:
/// with 10,000 ExternalSecrets each waiting for its refresh, a scan per reconcile would cost more
/// than the reconcile.
#[derive(Debug, Default)]
struct Queue {
    pending: HashMap<Key, Pending>,
    /// The pending requests not yet due (not added), by due time.
    scheduled: BTreeSet<(Instant, Key)>,
    /// How many pending requests are due (added): the queue depth.
    due: usize,
    running: HashMap<u64, Instant>,
    next_token: u64,
    /// Owned requests that became due, for [`ControllerMetrics::requeues`] to hand over.
    ready: VecDeque<Key>,
}

impl Queue {
    /// Marks the request of `key` as due (added); true when it was not yet.
    fn add(&mut self, key: &str) -> bool {
        let Some((k, p)) = self.pending.get_key_value(key) else {
            return false;
        };
        if p.added {
            return false;
        }
        let entry = (p.due, k.clone());
        self.scheduled.remove(&entry);
        if let Some(p) = self.pending.get_mut(key) {
            p.added = true;
        }
        self.due += 1;
        true
    }

    /// A request for `key` due at `at`; merged with a pending one (the earliest time wins).
    /// `owned`: this queue hands it over when due.
    fn request(&mut self, key: &str, at: Instant, owned: bool) {
        match self.pending.get_key_value(key) {
            Some((k, p)) if at < p.due => {
                let (k, old, added) = (k.clone(), p.due, p.added);
                if !added {
                    self.scheduled.remove(&(old, k.clone()));
                    self.scheduled.insert((at, k.clone()));
                }
                if let Some(p) = self.pending.get_mut(&k) {
                    p.due = at;
                    p.owned |= owned;
                }
            }
            Some(_) => {}
            None => {
                let k: Key = Arc::from(key);
                self.pending.insert(
                    k.clone(),
                    Pending {
                        due: at,
                        added: false,
                        owned,
                    },
                );
                self.scheduled.insert((at, k));
            }
        }
    }

    /// Removes the request of `key`.
    fn remove(&mut self, key: &str) -> Option<Pending> {
        let (k, p) = self.pending.remove_entry(key)?;
        if p.added {
            self.due -= 1;
        } else {
            self.scheduled.remove(&(p.due, k));
        }
        Some(p)
    }

    /// Marks the requests due by `now` as added, in due order (the owned ones become ready to
    /// hand over); how many.
    fn add_due(&mut self, now: Instant) -> usize {
        let mut n = 0;
        while self.scheduled.first().is_some_and(|(due, _)| *due <= now) {
            if let Some((_, key)) = self.scheduled.pop_first()
                && let Some(p) = self.pending.get_mut(&key)
            {
                p.added = true;
                self.due += 1;
                n += 1;
                if p.owned {
                    self.ready.push_back(key);
                }
            }
        }
        n
    }

    /// The next owned request to hand over: due, and not started or forgotten meanwhile.
    fn pop_ready(&mut self) -> Option<Key> {
        while let Some(key) = self.ready.pop_front() {
            if self.pending.get(&key).is_some_and(|p| p.added && p.owned) {
                return Some(key);
            }
        }
        None
    }

    /// When the next scheduled request becomes due.
    fn next_due(&self) -> Option<Instant> {
        self.scheduled.first().map(|(t, _)| *t)
    }
}

/// How a reconcile ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// `Ok`, to be reconciled again after the given time (`None`: on the next change only).
    Done(Option<Duration>),
    /// `Err`: the error policy decides the retry.
    Failed,
}

/// The metrics of one controller and its queue model. Cheap to clone.
#[derive(Clone)]
pub struct ControllerMetrics {
    name: Arc<str>,
    s: Arc<Series>,
    queue: Arc<Mutex<Queue>>,
    /// Whether the queue holds this controller's requeues (see [`ControllerMetrics::requeues`]).
    owns_requeues: Arc<AtomicBool>,
    /// Woken when a requeue is scheduled or becomes ready.
    wake: Arc<Notify>,
    /// The span of each failed reconcile, until its error policy runs in it.
    failed: Arc<Mutex<HashMap<String, tracing::Span>>>,
}

/// The requeue time of an `Action` (`None` for `await_change`). kube-runtime keeps the field
/// private; its `Debug` form (`Action { requeue_after: Some(5s) }`, a Rust `Duration`'s debug
/// text, which Go's duration syntax reads) is the only view of it, and a unit test pins that form.
pub fn requeue_after(action: &Action) -> Option<Duration> {
    if *action == Action::await_change() {
        return None;
    }
    let text = format!("{action:?}");
    let inner = text.split_once("Some(")?.1.split_once(')')?.0;
    esr_api::duration::parse_std(inner).ok()
}

fn key_of(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_string(),
    }
}

fn ref_key<K: Resource>(r: &ObjectRef<K>) -> String {
    key_of(r.namespace.as_deref(), &r.name)
}

fn obj_key<K: Resource>(o: &K) -> String {
    let m = o.meta();
    key_of(
        m.namespace.as_deref(),
        m.name.as_deref().unwrap_or_default(),
    )
}

/// The object a requeue hands over: only its name and namespace (from its queue key).
fn requeued_meta<K: Resource>(key: &str) -> PartialObjectMeta<K> {
    let (namespace, name) = match key.split_once('/') {
        Some((ns, name)) => (Some(ns.to_string()), name),
        None => (None, key),
    };
    PartialObjectMeta {
        types: None,
        metadata: kube::core::ObjectMeta {
            name: Some(name.to_string()),
            namespace,
            ..Default::default()
        },
        _phantom: std::marker::PhantomData,
    }
}

/// The `watches_stream` mapper of [`ControllerMetrics::requeues`]: the object to reconcile.
pub fn requeued<K: Resource<DynamicType = ()>>(m: PartialObjectMeta<K>) -> Option<ObjectRef<K>> {
    let name = m.metadata.name?;
    let r = ObjectRef::new(&name);
    Some(match m.metadata.namespace {
        Some(ns) => r.within(&ns),
        None => r,
    })
}

impl ControllerMetrics {
    /// The controller's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An object became due at `now` (a trigger).
    pub fn enqueue_at(&self, key: String, now: Instant) {
        let mut q = self.lock();
        q.request(&key, now, false);
        if q.add(&key) {
            self.s.adds.inc();
        }
        self.set_depth(&q);
    }

    /// A reconcile is requested for `at` (a requeue); merged with a pending request, as
    /// kube-runtime's scheduler keeps the earliest. `owned`: this queue holds it.
    fn schedule_at(&self, key: &str, at: Instant, now: Instant, owned: bool) {
        let mut q = self.lock();
        q.request(key, at, owned);
        self.promote(&mut q, now);
        if owned {
            self.wake.notify_one();
        }
    }

    /// Counts the requests whose time has come.
    fn promote(&self, q: &mut Queue, now: Instant) {
        let ready = q.ready.len();
        let added = q.add_due(now);
        self.s.adds.inc_by(added as u64);
        self.set_depth(q);
        if q.ready.len() > ready {
            self.wake.notify_one();
        }
    }

    fn owns_requeues(&self) -> bool {
        self.owns_requeues.load(Ordering::Relaxed)
    }

    /// Makes this queue, not kube-runtime's scheduler, hold the controller's requeues, and
    /// returns the stream that hands each object over when its time comes (give it to the
    /// controller with `watches_stream` and [`requeued`]). A reconcile that asks for a requeue
    /// then returns `Action::await_change()` to kube-runtime.
    ///
    /// kube-runtime's scheduler keeps two copies of an `ObjectRef` (name, namespace,
    /// resourceVersion and uid strings) per requeued object; with 10,000 ExternalSecrets each
    /// waiting for its refresh, that is most of the controller's memory besides its caches. This
    /// queue already keeps every pending request for the workqueue metrics, in one shared key.
    pub fn requeues<K>(
        &self,
    ) -> impl Stream<Item = Result<PartialObjectMeta<K>, kube::runtime::watcher::Error>> + Send + use<K>
    where
        K: Resource + Send + 'static,
    {
        self.owns_requeues.store(true, Ordering::Relaxed);
        futures::stream::unfold(self.clone(), |m| async move {
            loop {
                let notify = m.wake.clone();
                let wake = notify.notified();
                let (ready, next) = {
                    let mut q = m.lock();
                    m.promote(&mut q, Instant::now());
                    (q.pop_ready(), q.next_due())
                };
                if let Some(key) = ready {
                    return Some((Ok(requeued_meta(&key)), m));
                }
                match next {
                    Some(t) => {
                        let sleep = tokio::time::sleep_until(tokio::time::Instant::from_std(t));
                        tokio::select! {
                            () = sleep => {}
                            () = wake => {}
                        }
                    }
                    None => wake.await,
                }
            }
        })
    }

    fn set_depth(&self, q: &Queue) {
        self.s.depth.set(i64::try_from(q.due).unwrap_or(i64::MAX));
    }

    /// A reconcile of `key` starts at `now`; returns its token for [`Self::finish_at`].
    pub fn start_at(&self, key: &str, now: Instant) -> u64 {
        let mut q = self.lock();
        self.promote(&mut q, now);
        match q.remove(key) {
            Some(p) if p.added => self
                .s
                .queue_duration
                .observe(now.saturating_duration_since(p.due).as_secs_f64()),
            // Started before the time this model has for it (after a trigger it did not see):
            // counted as added, without a queue time.
            Some(_) => {
                self.s.adds.inc();
            }
            // A trigger this model does not see: counted as added, without a queue time.
            None => {
                self.s.adds.inc();
            }
        }
        self.set_depth(&q);
        let token = q.next_token;
        q.next_token += 1;
        q.running.insert(token, now);
        self.s.active.inc();
        token
    }

    /// The reconcile `token` of `key` ended at `now`.
    pub fn finish_at(&self, token: u64, key: &str, outcome: Outcome, now: Instant) {
        let started = {
            let mut q = self.lock();
            q.running.remove(&token)
        };
        let Some(started) = started else {
            return;
        };
        self.s.active.dec();
        let took = now.saturating_duration_since(started).as_secs_f64();
        self.s.time.observe(took);
        self.s.work_duration.observe(took);
        let result = match outcome {
            Outcome::Done(None) => 0,
            Outcome::Failed => {
                self.s.errors.inc();
                1
            }
            Outcome::Done(Some(after)) => {
                self.schedule_at(key, now + after, now, self.owns_requeues());
                3
            }
        };
        self.s.results[result].inc();
        self.refresh_at(now);
    }

    /// The error policy asked for a retry after `after` (`None`: none).
    pub fn retry_at(&self, key: &str, after: Option<Duration>, now: Instant) {
        if let Some(after) = after {
            self.s.retries.inc();
            self.schedule_at(key, now + after, now, false);
        }
    }

    /// The object is gone from the cache: kube-runtime drops its request without a reconcile.
    pub fn forget(&self, key: &str) {
        let mut q = self.lock();
        q.remove(key);
        self.set_depth(&q);
    }

    /// Brings depth, unfinished work and the longest running reconcile up to `now`.
    pub fn refresh_at(&self, now: Instant) {
        let mut q = self.lock();
        self.promote(&mut q, now);
        let ages = q
            .running
            .values()
            .map(|s| now.saturating_duration_since(*s).as_secs_f64());
        let (sum, max) = ages.fold((0.0, 0.0), |(s, m), a: f64| (s + a, a.max(m)));
        self.s.unfinished.set(sum);
        self.s.longest.set(max);
    }

    /// Passes a controller's main trigger stream through, seeing each object it triggers.
    pub fn triggers<K, E, S>(
        &self,
        stream: S,
    ) -> impl Stream<Item = Result<K, E>> + Send + use<K, E, S>
    where
        K: Resource + Send + 'static,
        E: Send + 'static,
        S: Stream<Item = Result<K, E>> + Send,
    {
        let m = self.clone();
        stream.inspect(move |r| {
            if let Ok(o) = r {
                m.enqueue_at(obj_key(o), Instant::now());
            }
        })
    }

    /// Wraps a `watches_stream` mapper, seeing each object it triggers.
    pub fn mapper<T, K, I>(
        &self,
        f: impl Fn(T) -> I + Send + Sync + 'static,
    ) -> impl Fn(T) -> Vec<ObjectRef<K>> + Send + Sync + 'static
    where
        K: Resource,
        I: IntoIterator<Item = ObjectRef<K>>,
    {
        let m = self.clone();
        move |t| {
            let refs: Vec<ObjectRef<K>> = f(t).into_iter().collect();
            let now = Instant::now();
            for r in &refs {
                m.enqueue_at(ref_key(r), now);
            }
            refs
        }
    }

    /// Wraps a reconcile function: counts and times it, keeps the queue model, and runs it in a
    /// `reconcile` span carrying `controller`, `namespace`, `name` and a fresh `reconcileID` (as
    /// controller-runtime's log lines do).
    pub fn reconciler<K, C, E, F, Fut>(
        &self,
        f: F,
    ) -> impl FnMut(Arc<K>, Arc<C>) -> BoxFuture<'static, Result<Action, E>> + use<K, C, E, F, Fut>
    where
        K: Resource + Send + Sync + 'static,
        C: Send + Sync + 'static,
        E: Send + 'static,
        F: Fn(Arc<K>, Arc<C>) -> Fut,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
    {
        let m = self.clone();
        move |obj, ctx| {
            let key = obj_key(&*obj);
            let meta = obj.meta();
            let span = tracing::info_span!(
                "reconcile",
                controller = &*m.name,
                namespace = meta.namespace.as_deref().unwrap_or_default(),
                name = meta.name.as_deref().unwrap_or_default(),
                reconcileID = %uuid::Uuid::new_v4(),
            );
            let token = m.start_at(&key, Instant::now());
            let fut = f(obj, ctx);
            let m = m.clone();
            async move {
                let res = fut.await;
                let outcome = match &res {
                    Ok(a) => Outcome::Done(requeue_after(a)),
                    Err(_) => {
                        m.failed
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .insert(key.clone(), tracing::Span::current());
                        Outcome::Failed
                    }
                };
                m.finish_at(token, &key, outcome, Instant::now());
                match res {
                    // The queue holds the requeue (see `requeues`).
                    Ok(a) if m.owns_requeues() && requeue_after(&a).is_some() => {
                        Ok(Action::await_change())
                    }
                    res => res,
                }
            }
            .instrument(span)
            .boxed()
        }
    }

    /// Wraps an error policy: it runs in the failed reconcile's span (its log lines carry the same
    /// `reconcileID`), and a requested retry is counted in `workqueue_retries_total` and scheduled
    /// in the model.
    pub fn error_policy<K, C, E>(
        &self,
        f: impl Fn(Arc<K>, &E, Arc<C>) -> Action,
    ) -> impl Fn(Arc<K>, &E, Arc<C>) -> Action
    where
        K: Resource,
    {
        let m = self.clone();
        move |obj, err, ctx| {
            let key = obj_key(&*obj);
            let span = m
                .failed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&key)
                .unwrap_or_else(tracing::Span::none);
            let action = span.in_scope(|| f(obj, err, ctx));
            m.retry_at(&key, requeue_after(&action), Instant::now());
            action
        }
    }

    /// Passes a controller's result stream through: a request for an object no longer in the
    /// cache ends there (kube-runtime reports `ObjectNotFound`), so it leaves the queue.
    pub fn results<T, E1, E2, S>(
        &self,
        stream: S,
    ) -> impl Stream<Item = Result<T, kube::runtime::controller::Error<E1, E2>>> + use<T, E1, E2, S>
    where
        E1: std::error::Error + 'static,
        E2: std::error::Error + 'static,
        S: Stream<Item = Result<T, kube::runtime::controller::Error<E1, E2>>>,
    {
        let m = self.clone();
        stream.inspect(move |r| {
            if let Err(kube::runtime::controller::Error::ObjectNotFound(o)) = r {
                m.forget(&key_of(o.namespace.as_deref(), &o.name));
            }
        })
    }
}

/// `Controller::new(api, config)` (the same watch, cache and triggers), with the triggers seen by
/// `metrics`.
pub fn watched<K>(
    api: kube::Api<K>,
    config: kube::runtime::watcher::Config,
    metrics: &ControllerMetrics,
) -> kube::runtime::Controller<K>
where
    K: Clone + Resource + serde::de::DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + std::fmt::Debug + Unpin,
{
    use kube::runtime::WatchStreamExt;
    let (reader, writer) = kube::runtime::reflector::store();
    let stream =
        kube::runtime::reflector(writer, kube::runtime::watcher(api, config)).applied_objects();
    kube::runtime::Controller::for_stream(metrics.triggers(stream), reader)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scrape(reg: &Registry) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, reg).unwrap();
        out
    }

    fn has(text: &str, line: &str) {
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in\n{text}"
        );
    }

    fn config_map(ns: &str, name: &str) -> Arc<k8s_openapi::api::core::v1::ConfigMap> {
        let mut cm = k8s_openapi::api::core::v1::ConfigMap::default();
        cm.metadata.name = Some(name.into());
        cm.metadata.namespace = Some(ns.into());
        Arc::new(cm)
    }

    #[tokio::test]
    async fn an_owned_requeue_is_handed_to_the_controller_when_due() {
        use k8s_openapi::api::core::v1::ConfigMap;
        let mut reg = Registry::default();
        let m = RuntimeMetrics::register(&mut reg);
        let c = m.controller("externalsecret", 1);
        let mut requeues = Box::pin(c.requeues::<ConfigMap>());
        let mut reconcile = c.reconciler(|_: Arc<ConfigMap>, _: Arc<()>| async {
            Ok::<_, std::convert::Infallible>(Action::requeue(Duration::from_millis(50)))
        });
        // kube-runtime is told to wait for a change: the queue holds the requeue.
        let action = reconcile(config_map("ns", "a"), Arc::new(())).await;
        assert_eq!(action, Ok(Action::await_change()));
        assert_eq!(c.s.results[3].get(), 1, "still counted as requeue_after");
        let handed = tokio::time::timeout(Duration::from_secs(30), requeues.next())
            .await
            .expect("the requeue is handed over")
            .expect("the stream does not end")
            .expect("no error");
        assert_eq!(requeued(handed), Some(ObjectRef::new("a").within("ns")));
        // It became due: counted as added (the first add is the first reconcile's, whose
        // trigger the test did not show the model), waiting for its reconcile.
        assert_eq!((c.s.adds.get(), c.s.depth.get()), (2, 1));
        let t = c.start_at("ns/a", Instant::now());
        assert_eq!(c.s.depth.get(), 0);
        c.finish_at(t, "ns/a", Outcome::Done(None), Instant::now());
    }

    #[tokio::test]
    async fn a_controller_that_does_not_own_its_requeues_leaves_them_to_kube_runtime() {
        use k8s_openapi::api::core::v1::ConfigMap;
        let mut reg = Registry::default();
        let m = RuntimeMetrics::register(&mut reg);
        let c = m.controller("secretstore", 1);
        let mut reconcile = c.reconciler(|_: Arc<ConfigMap>, _: Arc<()>| async {
            Ok::<_, std::convert::Infallible>(Action::requeue(Duration::from_secs(60)))
        });
        let action = reconcile(config_map("ns", "a"), Arc::new(())).await;
        assert_eq!(action, Ok(Action::requeue(Duration::from_secs(60))));
        let mut q = c.lock();
        assert!(q.pending.get("ns/a").is_some_and(|p| !p.owned));
        q.add_due(Instant::now() + Duration::from_secs(61));
        assert_eq!(q.pop_ready(), None);
    }

    #[test]
    fn owned_requests_are_ready_in_due_order_unless_started_first() {
        let mut q = Queue::default();
        let t0 = Instant::now();
        let s = Duration::from_secs;
        q.request("ns/c", t0 + s(30), true);
        q.request("ns/a", t0 + s(10), true);
        q.request("ns/b", t0 + s(20), true);
        // A watch event makes b due now (a trigger kube-runtime sees itself).
        q.request("ns/b", t0 + s(1), false);
        assert!(q.add("ns/b"));
        // A later owned request merges into the earlier one.
        q.request("ns/a", t0 + s(40), true);
        assert_eq!(q.add_due(t0 + s(5)), 0);
        assert_eq!(q.pop_ready(), None);
        assert_eq!(q.add_due(t0 + s(30)), 2);
        assert_eq!(q.pop_ready().as_deref(), Some("ns/a"));
        // c's reconcile started (another trigger) before the stream handed it over.
        q.remove("ns/c");
        assert_eq!(q.pop_ready(), None);
        assert_eq!(q.next_due(), None);
        // One key per object, shared by its entries.
        assert_eq!(q.pending.len(), 2);
        assert_eq!(q.scheduled.len(), 0);
    }

    #[test]
    fn requeue_after_reads_the_action() {
        assert_eq!(requeue_after(&Action::await_change()), None);
        for d in [
            Duration::from_secs(300),
            Duration::from_millis(1500),
            Duration::from_millis(10),
            Duration::from_micros(7),
            Duration::from_nanos(3),
            Duration::from_secs(3600 * 24 * 365),
        ] {
            assert_eq!(requeue_after(&Action::requeue(d)), Some(d), "{d:?}");
        }
    }

    #[test]
    fn series_exist_from_the_start_with_controller_runtime_names() {
        let mut reg = Registry::default();
        let m = RuntimeMetrics::register(&mut reg);
        m.controller("externalsecret", 3);
        let text = scrape(&reg);
        for r in RESULTS {
            has(
                &text,
                &format!(
                    "controller_runtime_reconcile_total{{controller=\"externalsecret\",result=\"{r}\"}} 0"
                ),
            );
        }
        has(
            &text,
            "controller_runtime_max_concurrent_reconciles{controller=\"externalsecret\"} 3",
        );
        has(
            &text,
            "# TYPE controller_runtime_reconcile_time_seconds histogram",
        );
        has(
            &text,
            "controller_runtime_reconcile_time_seconds_bucket{le=\"60.0\",controller=\"externalsecret\"} 0",
        );
        has(
            &text,
            "workqueue_depth{name=\"externalsecret\",controller=\"externalsecret\"} 0",
        );
    }

    #[test]
    fn requeues_become_due_in_time_order_and_leave_the_queue_once() {
        let mut reg = Registry::default();
        let m = RuntimeMetrics::register(&mut reg);
        let c = m.controller("externalsecret", 1);
        let t0 = Instant::now();
        let s = Duration::from_secs;
        for (key, after) in [("ns/c", 30), ("ns/a", 10), ("ns/b", 20)] {
            c.retry_at(key, Some(s(after)), t0);
        }
        assert_eq!((c.s.adds.get(), c.s.depth.get()), (0, 0));
        // An earlier requeue of c moves it ahead of b; a later one changes nothing.
        c.retry_at("ns/c", Some(s(15)), t0);
        c.retry_at("ns/a", Some(s(40)), t0);
        c.refresh_at(t0 + s(16));
        assert_eq!((c.s.adds.get(), c.s.depth.get()), (2, 2));
        // b is forgotten before it is due; c starts (it was due); nothing is counted twice.
        c.forget("ns/b");
        let tc = c.start_at("ns/c", t0 + s(17));
        c.finish_at(tc, "ns/c", Outcome::Done(None), t0 + s(18));
        c.refresh_at(t0 + s(100));
        assert_eq!((c.s.adds.get(), c.s.depth.get()), (2, 1));
        let ta = c.start_at("ns/a", t0 + s(101));
        c.finish_at(ta, "ns/a", Outcome::Done(None), t0 + s(102));
        assert_eq!((c.s.adds.get(), c.s.depth.get()), (2, 0));
    }

    #[test]
    fn the_queue_model_follows_kube_runtime_scheduling() {
        let mut reg = Registry::default();
        let m = RuntimeMetrics::register(&mut reg);
        let c = m.controller("secretstore", 1);
        let t0 = Instant::now();
        let s = Duration::from_secs;
        // Two triggers of one object before it runs: one add, depth 1.
        c.enqueue_at("ns/a".into(), t0);
        c.enqueue_at("ns/a".into(), t0 + s(1));
        c.enqueue_at("ns/b".into(), t0 + s(1));
        assert_eq!(c.s.adds.get(), 2);
        assert_eq!(c.s.depth.get(), 2);
        // a starts 2 s after it became due.
        let ta = c.start_at("ns/a", t0 + s(2));
        assert_eq!(c.s.depth.get(), 1);
        assert_eq!(c.s.active.get(), 1);
        c.refresh_at(t0 + s(5));
        assert_eq!(c.s.unfinished.get(), 3.0);
        assert_eq!(c.s.longest.get(), 3.0);
        // a asks to be requeued in 60 s: not due yet, not counted.
        c.finish_at(ta, "ns/a", Outcome::Done(Some(s(60))), t0 + s(5));
        assert_eq!(c.s.active.get(), 0);
        assert_eq!(c.s.results[3].get(), 1);
        assert_eq!((c.s.adds.get(), c.s.depth.get()), (2, 1));
        // b fails; the error policy retries in 5 s.
        let tb = c.start_at("ns/b", t0 + s(6));
        c.finish_at(tb, "ns/b", Outcome::Failed, t0 + s(7));
        c.retry_at("ns/b", Some(s(5)), t0 + s(7));
        assert_eq!((c.s.errors.get(), c.s.retries.get()), (1, 1));
        assert_eq!(c.s.depth.get(), 0);
        // At t0+12 b's retry is due; a's requeue (t0+65) is not.
        c.refresh_at(t0 + s(12));
        assert_eq!((c.s.adds.get(), c.s.depth.get()), (3, 1));
        // A watch event for a moves its pending requeue forward: one entry, one more add.
        c.enqueue_at("ns/a".into(), t0 + s(13));
        assert_eq!((c.s.adds.get(), c.s.depth.get()), (4, 2));
        // a is deleted before it runs: it leaves the queue.
        c.forget("ns/a");
        assert_eq!(c.s.depth.get(), 1);
        let text = scrape(&reg);
        has(
            &text,
            "workqueue_adds_total{name=\"secretstore\",controller=\"secretstore\"} 4",
        );
        has(
            &text,
            "controller_runtime_reconcile_errors_total{controller=\"secretstore\"} 1",
        );
        has(
            &text,
            "controller_runtime_reconcile_total{controller=\"secretstore\",result=\"error\"} 1",
        );
        has(
            &text,
            "workqueue_queue_duration_seconds_count{name=\"secretstore\",controller=\"secretstore\"} 2",
        );
        has(
            &text,
            "workqueue_queue_duration_seconds_sum{name=\"secretstore\",controller=\"secretstore\"} 7.0",
        );
        has(
            &text,
            "controller_runtime_reconcile_time_seconds_sum{controller=\"secretstore\"} 4.0",
        );
    }
}
