//! Events, recorded off the reconcile path.
//!
//! Every controller publishes its Events through an [`EventSink`]: a reconcile hands the event
//! over and goes on; a background task writes it to the `events.k8s.io/v1` API. This is what
//! client-go's event broadcaster does for ESO, and it keeps an Event's round trip out of the
//! sync's latency and its failure out of the sync's result.
//!
//! - **Series.** A repeat of an event (same object, type, reason and note, from the same
//!   reporter) within [`SERIES_TTL`] of the last one updates the first Event's `series`
//!   (count, last observed time) instead of creating another, as kube's and client-go's
//!   recorders do. The object's resourceVersion is not part of the key, so the events of one
//!   object across syncs form one series per distinct note: a new error text is never hidden
//!   behind an older one.
//! - **Bounded memory.** The series cache keeps a few small fields per key (the Event's name,
//!   its eventTime and the count), at most [`SERIES_CACHE_LIMIT`] keys, oldest evicted first
//!   (client-go's correlator keeps an LRU of 4,096), and forgets keys after [`SERIES_TTL`].
//!   kube's `Recorder` caches a whole Event per key forever until its TTL, keyed by the
//!   object's resourceVersion (a new key per sync), and scans its whole cache under a global
//!   write lock on every publish.
//! - **Bounded queue.** At most [`QUEUE_LIMIT`] events wait; beyond that an event is dropped
//!   with a debug log, as client-go drops events when its broadcaster queue is full.
//! - **Notes** are capped at 1,024 bytes: the API server refuses an Event whose `note` is longer
//!   ([`capped_note`]); the event is recorded with the start of the text instead of being lost.
//!
//! Kubernetes API errors in user text: [`kube_error_text`] gives the API server's message, as
//! client-go (and so ESO) prints an error (`secrets "x" is forbidden: ...`). kube's own `Display`
//! of an API error appends the `Debug` rendering of the whole response, which is not for users;
//! every kind uses this function wherever a Kubernetes error reaches a status, an event or a
//! condition message.

use std::collections::{BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Client;
use kube::api::{Patch, PostParams};
use tokio::sync::{Notify, mpsc};
use tracing::debug;

use crate::common::writes;

/// How long after its last occurrence an event can still be counted in its series.
pub const SERIES_TTL: Duration = Duration::from_secs(6 * 60);

/// The most keys the series cache holds.
pub const SERIES_CACHE_LIMIT: usize = 4096;

/// The most events waiting to be written.
pub const QUEUE_LIMIT: usize = 4096;

/// Writers of one sink. An object's events always go to the same writer, one after another, so
/// they are created in the order they were published.
const LANES: usize = 8;

/// The reporter of a sink's events (`reportingController`, `reportingInstance`).
#[derive(Debug, Clone)]
pub struct Reporter {
    /// The component name (ESO's event source, e.g. `external-secrets`).
    pub controller: String,
    /// This instance (defaults to the controller name).
    pub instance: Option<String>,
}

/// An event's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// `Normal`.
    Normal,
    /// `Warning`.
    Warning,
}

impl EventType {
    /// The API spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

struct Queued {
    regarding: ObjectReference,
    type_: EventType,
    reason: String,
    note: String,
}

/// What is kept of a published event to continue its series.
struct Series {
    name: String,
    count: i32,
    last: Timestamp,
}

/// The series of recent events by key, with an index by last occurrence: expiring and
/// evicting the oldest are O(log n) per event (a scan of the whole cache per event cost 4% of a
/// 10,000-ExternalSecret cold sync's CPU once the cache was full).
#[derive(Default)]
struct SeriesCache {
    entries: HashMap<u64, Series>,
    by_last: BTreeSet<(Timestamp, u64)>,
}

impl SeriesCache {
    /// Counts one more occurrence of the series `key`, when cached: its Event's name and count.
    fn repeat(&mut self, key: u64, now: Timestamp) -> Option<(String, i32)> {
        self.prune(now);
        let s = self.entries.get_mut(&key)?;
        self.by_last.remove(&(s.last, key));
        s.count += 1;
        s.last = now;
        self.by_last.insert((now, key));
        Some((s.name.clone(), s.count))
    }

    /// Starts the series `key` with the Event `name`.
    fn start(&mut self, key: u64, name: String, now: Timestamp) {
        self.prune(now);
        let first = Series {
            name,
            count: 1,
            last: now,
        };
        if let Some(old) = self.entries.insert(key, first) {
            self.by_last.remove(&(old.last, key));
        }
        self.by_last.insert((now, key));
    }

    /// Drops the expired keys, then the oldest keys over the limit.
    fn prune(&mut self, now: Timestamp) {
        let ttl = SignedDuration::try_from(SERIES_TTL).unwrap_or(SignedDuration::ZERO);
        while let Some(&(last, key)) = self.by_last.first() {
            let expired = now.duration_since(last) >= ttl;
            if !expired && self.entries.len() < SERIES_CACHE_LIMIT {
                break;
            }
            self.by_last.pop_first();
            self.entries.remove(&key);
        }
    }
}

struct Inner {
    lanes: Vec<mpsc::Sender<Queued>>,
    /// Events handed over and not yet written (or dropped).
    outstanding: AtomicUsize,
    idle: Notify,
}

/// Publishes events in the background (see the module doc). Cheap to clone.
#[derive(Clone)]
pub struct EventSink {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for EventSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventSink")
            .field(
                "outstanding",
                &self.inner.outstanding.load(Ordering::Relaxed),
            )
            .finish()
    }
}

impl EventSink {
    /// A sink writing with `client` as `reporter`; its writer task runs on the current tokio
    /// runtime until every clone of the sink is dropped.
    pub fn new(client: Client, reporter: Reporter) -> Self {
        let writer = Arc::new(Writer {
            client,
            reporter,
            cache: Mutex::default(),
        });
        let (lanes, receivers): (Vec<_>, Vec<_>) = (0..LANES)
            .map(|_| mpsc::channel(QUEUE_LIMIT / LANES))
            .unzip();
        let inner = Arc::new(Inner {
            lanes,
            outstanding: AtomicUsize::new(0),
            idle: Notify::new(),
        });
        for mut rx in receivers {
            let writer = writer.clone();
            let weak = Arc::downgrade(&inner);
            // Ends when the sink (every sender) is dropped.
            tokio::spawn(async move {
                while let Some(q) = rx.recv().await {
                    writer.write(q).await;
                    if let Some(inner) = weak.upgrade() {
                        inner.done();
                    }
                }
            });
        }
        EventSink { inner }
    }

    /// Hands an event over; never waits. The note is capped to what the API server accepts.
    pub fn publish(&self, regarding: ObjectReference, type_: EventType, reason: &str, note: &str) {
        self.inner.outstanding.fetch_add(1, Ordering::SeqCst);
        let q = Queued {
            regarding,
            type_,
            reason: reason.to_string(),
            note: capped_note(note),
        };
        let lane = &self.inner.lanes[lane_of(&q.regarding)];
        if let Err(e) = lane.try_send(q) {
            let q = match e {
                mpsc::error::TrySendError::Full(q) | mpsc::error::TrySendError::Closed(q) => q,
            };
            debug!(reason = %q.reason, object = ?q.regarding.name, "event queue full: event dropped");
            self.inner.done();
        }
    }

    /// Waits until every event handed over so far was written (or dropped).
    pub async fn flush(&self) {
        loop {
            let idle = self.inner.idle.notified();
            if self.inner.outstanding.load(Ordering::SeqCst) == 0 {
                return;
            }
            idle.await;
        }
    }
}

impl Inner {
    fn done(&self) {
        if self.outstanding.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.idle.notify_waiters();
        }
    }
}

/// The writer of an object's events.
fn lane_of(regarding: &ObjectReference) -> usize {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (&regarding.namespace, &regarding.name, &regarding.uid).hash(&mut h);
    (h.finish() % LANES as u64) as usize
}

/// The background half of an [`EventSink`].
struct Writer {
    client: Client,
    reporter: Reporter,
    cache: Mutex<SeriesCache>,
}

impl Writer {
    fn key(&self, q: &Queued) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        let r = &q.regarding;
        (&r.api_version, &r.kind, &r.namespace, &r.name, &r.uid).hash(&mut h);
        (q.type_, &q.reason, &q.note, &self.reporter.controller).hash(&mut h);
        self.reporter.instance.hash(&mut h);
        h.finish()
    }

    async fn write(&self, q: Queued) {
        let now = Timestamp::now();
        let key = self.key(&q);
        let series = {
            let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            cache.repeat(key, now)
        };
        let ns = q
            .regarding
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_string());
        let (client, namespace) = (&self.client, Some(ns.as_str()));
        if let Some((name, count)) = series {
            let patch = serde_json::json!({
                "series": EventSeries { count, last_observed_time: MicroTime(now) }
            });
            match writes::patch::<Event, _>(client, namespace, &name, None, &Patch::Merge(&patch))
                .await
            {
                Ok(_) => return,
                // The Event is gone (expired or deleted): start a new one.
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(err) => {
                    debug!(error = %err, reason = %q.reason, "failed to update event series");
                    return;
                }
            }
        }
        let event = self.event(&q, now);
        let name = event.metadata.name.clone().unwrap_or_default();
        match writes::put(client, namespace, None, &PostParams::default(), &event).await {
            Ok(_) => {
                let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
                cache.start(key, name, now);
            }
            Err(err) => debug!(error = %err, reason = %q.reason, "failed to publish event"),
        }
    }

    fn event(&self, q: &Queued, now: Timestamp) -> Event {
        let base = q
            .regarding
            .name
            .as_deref()
            .unwrap_or(&self.reporter.controller);
        Event {
            metadata: ObjectMeta {
                namespace: q.regarding.namespace.clone(),
                name: Some(format!("{base}.{:x}", now.as_nanosecond())),
                ..Default::default()
            },
            event_time: Some(MicroTime(now)),
            type_: Some(q.type_.as_str().to_string()),
            reason: Some(q.reason.clone()),
            action: Some(q.reason.clone()),
            note: Some(q.note.clone()),
            regarding: Some(q.regarding.clone()),
            reporting_controller: Some(self.reporter.controller.clone()),
            reporting_instance: Some(
                self.reporter
                    .instance
                    .clone()
                    .unwrap_or_else(|| self.reporter.controller.clone()),
            ),
            ..Default::default()
        }
    }
}

/// The longest Event note the API server accepts, in bytes.
pub const NOTE_LIMIT: usize = 1024;

/// What marks a cut note.
const CUT: &str = "...";

/// `text` when it fits in [`NOTE_LIMIT`] bytes; otherwise its longest prefix ending on a
/// character boundary that, followed by `...`, fits.
pub fn capped_note(text: &str) -> String {
    if text.len() <= NOTE_LIMIT {
        return text.to_string();
    }
    let mut end = NOTE_LIMIT - CUT.len();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{CUT}", &text[..end])
}

/// A Kubernetes API error as client-go prints it: the API server's message (`secrets "x" is
/// forbidden: ...`), not kube's `Debug` rendering of the whole response. Other errors (transport,
/// decoding) keep their own text.
pub fn kube_error_text(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) if !s.message.is_empty() => s.message.clone(),
        kube::Error::Api(s) => format!("kubernetes API error (HTTP {})", s.code),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use esr_testkit::TestServer;
    use kube::Api;
    use kube::api::ListParams;

    fn reference(name: &str) -> ObjectReference {
        ObjectReference {
            api_version: Some("external-secrets.io/v1".into()),
            kind: Some("ExternalSecret".into()),
            namespace: Some("app".into()),
            name: Some(name.into()),
            uid: Some(format!("uid-{name}")),
            resource_version: Some("1".into()),
            ..Default::default()
        }
    }

    /// A server with the namespace `app`, and a sink writing to it.
    async fn setup() -> (TestServer, EventSink) {
        let server = TestServer::start().await.unwrap();
        server
            .apply_object(serde_json::json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": "app"}}))
            .unwrap();
        let sink = sink(&server);
        (server, sink)
    }

    fn sink(server: &TestServer) -> EventSink {
        EventSink::new(
            server.client(),
            Reporter {
                controller: "external-secrets".into(),
                instance: None,
            },
        )
    }

    /// (reason, note, series count) of the events in `app`, in creation order.
    async fn events(server: &TestServer) -> Vec<(String, String, i32)> {
        let mut list = Api::<Event>::namespaced(server.client(), "app")
            .list(&ListParams::default())
            .await
            .unwrap()
            .items;
        list.sort_by_key(|e| e.event_time.as_ref().map(|t| t.0));
        list.into_iter()
            .map(|e| {
                (
                    e.reason.unwrap_or_default(),
                    e.note.unwrap_or_default(),
                    e.series.map_or(1, |s| s.count),
                )
            })
            .collect()
    }

    #[tokio::test]
    async fn repeats_form_a_series_and_a_new_note_a_new_event_in_order() {
        let (server, events_sink) = setup().await;
        let mut r = reference("db");
        for note in ["boom", "boom", "other", "boom"] {
            // A new resourceVersion per sync does not break the series.
            r.resource_version = Some(format!("{}", note.len()));
            events_sink.publish(r.clone(), EventType::Warning, "UpdateFailed", note);
        }
        events_sink.publish(
            reference("db"),
            EventType::Normal,
            "Updated",
            "secret updated",
        );
        events_sink.flush().await;
        let audit: Vec<String> = server
            .audit()
            .entries()
            .into_iter()
            .filter(|e| e.resource == "events")
            .map(|e| e.verb)
            .collect();
        assert_eq!(audit, ["create", "patch", "create", "patch", "create"]);
        assert_eq!(
            events(&server).await,
            vec![
                ("UpdateFailed".into(), "boom".into(), 3),
                ("UpdateFailed".into(), "other".into(), 1),
                ("Updated".into(), "secret updated".into(), 1),
            ]
        );
    }

    #[tokio::test]
    async fn a_series_whose_event_is_gone_starts_again() {
        let (server, events_sink) = setup().await;
        events_sink.publish(
            reference("db"),
            EventType::Normal,
            "Created",
            "secret created",
        );
        events_sink.flush().await;
        let api = Api::<Event>::namespaced(server.client(), "app");
        for e in api.list(&ListParams::default()).await.unwrap().items {
            api.delete(&e.metadata.name.unwrap(), &Default::default())
                .await
                .unwrap();
        }
        events_sink.publish(
            reference("db"),
            EventType::Normal,
            "Created",
            "secret created",
        );
        events_sink.flush().await;
        assert_eq!(
            events(&server).await,
            vec![("Created".into(), "secret created".into(), 1)]
        );
    }

    #[tokio::test]
    async fn publishing_never_waits_and_a_full_queue_drops() {
        let (server, events_sink) = setup().await;
        // One object's events share one writer: its queue holds QUEUE_LIMIT / LANES. Nothing is
        // written while this test does not yield, so the rest are dropped, not waited for.
        let n = QUEUE_LIMIT / LANES + 10;
        for i in 0..n {
            events_sink.publish(
                reference("db"),
                EventType::Warning,
                "UpdateFailed",
                &format!("error {i}"),
            );
        }
        events_sink.flush().await;
        let got = events(&server).await;
        assert_eq!(got.len(), QUEUE_LIMIT / LANES);
        assert_eq!(got[0].1, "error 0");
    }

    #[test]
    fn the_series_cache_is_bounded() {
        let mut cache = SeriesCache::default();
        let t0 = Timestamp::from_second(1_000_000).unwrap();
        let at = |ms: u64| t0 + SignedDuration::from_millis(ms as i64);
        for i in 0..(SERIES_CACHE_LIMIT as u64 + 10) {
            cache.start(i, format!("e{i}"), at(i));
            if i == 5 {
                // Key 1 occurs again: it is now younger than 2..=5.
                assert_eq!(cache.repeat(1, at(i)), Some(("e1".to_string(), 2)));
            }
        }
        assert!(cache.entries.len() <= SERIES_CACHE_LIMIT);
        assert_eq!(cache.entries.len(), cache.by_last.len());
        // The oldest went first; the repeated key 1 outlived 2..=5.
        assert!(!cache.entries.contains_key(&0));
        assert!(!cache.entries.contains_key(&2));
        assert!(cache.entries.contains_key(&(SERIES_CACHE_LIMIT as u64 + 9)));
        assert!(
            cache
                .repeat(0, at(SERIES_CACHE_LIMIT as u64 + 10))
                .is_none()
        );
        // After the TTL every key is forgotten.
        cache.prune(t0 + SignedDuration::from_secs(SERIES_TTL.as_secs() as i64 + 60));
        assert!(cache.entries.is_empty() && cache.by_last.is_empty());
    }

    #[test]
    fn a_kube_api_error_reads_as_the_api_servers_message() {
        let status = |code: u16, message: &str| {
            kube::Error::Api(Box::new(kube::core::Status {
                code,
                message: message.to_string(),
                reason: "Forbidden".to_string(),
                ..Default::default()
            }))
        };
        let e = status(403, r#"secrets "db" is forbidden: no"#);
        // kube's own Display carries the Debug dump of the response.
        assert!(e.to_string().contains("Status {"), "{e}");
        assert_eq!(kube_error_text(&e), r#"secrets "db" is forbidden: no"#);
        assert_eq!(
            kube_error_text(&status(500, "")),
            "kubernetes API error (HTTP 500)"
        );
    }

    #[test]
    fn short_notes_are_kept_and_long_ones_cut_on_a_char_boundary() {
        assert_eq!(capped_note("secret synced"), "secret synced");
        let exact = "a".repeat(NOTE_LIMIT);
        assert_eq!(capped_note(&exact), exact);
        let long = "b".repeat(5000);
        let cut = capped_note(&long);
        assert_eq!(cut.len(), NOTE_LIMIT);
        assert!(cut.ends_with("...") && cut.starts_with("bbb"));
        // 'é' is two bytes: the cut never splits it, and the note stays within the limit.
        let wide = "é".repeat(1000);
        let cut = capped_note(&wide);
        assert!(cut.len() <= NOTE_LIMIT, "{}", cut.len());
        assert_eq!(cut.len(), NOTE_LIMIT - 1);
        assert!(
            cut.trim_end_matches("...")
                .chars()
                .skip(1)
                .all(|c| c == 'é')
        );
    }
}
