//! A fair queue under overload: a refresh or a retry never starves a first sync.
//!
//! kube-runtime's queue does not serve ready objects in order: under load, an object requeued by
//! its own reconcile (a refresh, the retry of a failure) can run again and again ahead of objects
//! that have been waiting longer. When the controller cannot keep up (a saturated
//! `--client-qps`, many ExternalSecrets with a short `refreshInterval`, slow stores), new
//! ExternalSecrets could then wait for minutes without any status. So while an ExternalSecret of
//! the watch cache waits for its first sync (it has no status for its generation, and this
//! controller has not started reconciling it), every reconcile of an ExternalSecret that already
//! has a status for its current generation (a refresh, a retry, a drift check) is put back by a
//! random 1–5 s before it makes any API call, for at most 30 s in all: after that it runs even
//! while first syncs wait, so a steady stream of new ExternalSecrets cannot starve the refreshes
//! either. Spec changes, deletions and first syncs run at once. The backlog then drains at the
//! full client rate, and the others resume.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use esr_api::v1::ExternalSecret;
use kube::runtime::reflector::Store;

/// How often the backlog of never-reconciled ExternalSecrets is counted.
const RECOUNT: Duration = Duration::from_secs(1);

/// The shortest and longest wait of a deferred refresh.
const DEFER_MIN_MS: u64 = 1_000;
const DEFER_MAX_MS: u64 = 5_000;

/// The longest a served ExternalSecret is put back in all, however many first syncs wait.
pub const DEFER_LIMIT: Duration = Duration::from_secs(30);

/// Which ExternalSecrets this controller has reconciled, and how many it has not yet.
#[derive(Debug, Default)]
pub struct FirstSyncs {
    cache: OnceLock<Store<ExternalSecret>>,
    /// Hashes of the uids reconciled (a collision at worst leaves one ExternalSecret out of the
    /// backlog count, a heuristic).
    attempted: Mutex<HashSet<u64>>,
    /// When each ExternalSecret put back now was first put back (removed when it runs), by the
    /// hash of its uid (two that collide share a time: one is put back less long, a heuristic).
    deferred: Mutex<HashMap<u64, Instant>>,
    backlog: Mutex<Option<(Instant, usize)>>,
}

/// Whether `es` has already been served: it has a status for its current generation and is not
/// being deleted (its reconcile is a refresh, a retry or a drift check).
pub fn is_served(es: &ExternalSecret) -> bool {
    let Some(st) = es.status.as_ref() else {
        return false;
    };
    es.metadata.deletion_timestamp.is_none()
        && st.observed_generation.is_some()
        && st.observed_generation == es.metadata.generation
}

/// ExternalSecrets waiting for their first sync: the cached ones (`(uid, is_served)`) not served
/// yet and that this controller has not reconciled (uid not in `attempted`); drops from
/// `attempted` the uids no longer cached.
pub fn count_backlog<'a>(
    cached: impl Iterator<Item = (&'a str, bool)>,
    attempted: &mut HashSet<u64>,
) -> usize {
    let mut present = HashSet::new();
    let mut waiting = 0;
    for (uid, served) in cached {
        let uid = uid_key(uid);
        if !served && !attempted.contains(&uid) {
            waiting += 1;
        }
        present.insert(uid);
    }
    attempted.retain(|u| present.contains(u));
    waiting
}

/// What `attempted` keeps of a uid.
fn uid_key(uid: &str) -> u64 {
    crate::common::observe::digest(uid)
}

impl FirstSyncs {
    /// Counts the backlog over the ExternalSecret watch cache (without it, nothing is deferred).
    pub fn attach(&self, cache: Store<ExternalSecret>) {
        let _ = self.cache.set(cache);
    }

    /// Called at the start of every reconcile of `es`: `Some(wait)` when it was served already
    /// and must make way for ExternalSecrets waiting for their first sync; otherwise records `es`
    /// as reconciled.
    pub fn defer(&self, es: &ExternalSecret) -> Option<Duration> {
        self.defer_at(es, Instant::now())
    }

    /// [`FirstSyncs::defer`] at `now`.
    fn defer_at(&self, es: &ExternalSecret, now: Instant) -> Option<Duration> {
        let uid = uid_key(es.metadata.uid.as_deref()?);
        let make_way = is_served(es) && self.waiting() > 0;
        {
            let mut deferred = self.deferred.lock().unwrap_or_else(|p| p.into_inner());
            if make_way {
                let since = *deferred.entry(uid).or_insert(now);
                if now.saturating_duration_since(since) < DEFER_LIMIT {
                    return Some(Duration::from_millis(rand::random_range(
                        DEFER_MIN_MS..=DEFER_MAX_MS,
                    )));
                }
            }
            deferred.remove(&uid);
        }
        let new = self
            .attempted
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(uid);
        if new && !is_served(es) {
            // One fewer waiting (until the next count; served ones were not counted).
            let mut b = self.backlog.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((_, n)) = b.as_mut() {
                *n = n.saturating_sub(1);
            }
        }
        None
    }

    /// ExternalSecrets of the cache not reconciled yet (counted at most once a second).
    fn waiting(&self) -> usize {
        let Some(cache) = self.cache.get() else {
            return 0;
        };
        let mut b = self.backlog.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((at, n)) = *b
            && at.elapsed() < RECOUNT
        {
            return n;
        }
        let state = cache.state();
        let n = {
            let mut attempted = self.attempted.lock().unwrap_or_else(|p| p.into_inner());
            let n = count_backlog(
                state
                    .iter()
                    .filter_map(|e| Some((e.metadata.uid.as_deref()?, is_served(e)))),
                &mut attempted,
            );
            // Forget the put-back times of ExternalSecrets no longer cached.
            let mut deferred = self.deferred.lock().unwrap_or_else(|p| p.into_inner());
            if !deferred.is_empty() {
                let cached: HashSet<u64> = state
                    .iter()
                    .filter_map(|e| e.metadata.uid.as_deref().map(uid_key))
                    .collect();
                deferred.retain(|u, _| cached.contains(u));
            }
            n
        };
        *b = Some((Instant::now(), n));
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::watcher::Event;

    fn es(uid: &str, status: serde_json::Value) -> ExternalSecret {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
            "metadata": {"name": uid, "namespace": "app", "uid": uid, "generation": 2},
            "spec": {}, "status": status
        }))
        .unwrap()
    }

    fn synced(uid: &str) -> ExternalSecret {
        es(
            uid,
            serde_json::json!({"refreshTime": "2026-01-01T00:00:00Z", "observedGeneration": 2}),
        )
    }

    #[test]
    fn served_objects_have_a_status_for_their_generation() {
        assert!(is_served(&synced("a")));
        assert!(!is_served(&es("a", serde_json::json!({}))));
        // A failure's status counts: its retries make way too.
        assert!(is_served(&es(
            "a",
            serde_json::json!({"observedGeneration": 2, "conditions": [{"type": "Ready", "status": "False"}]})
        )));
        // A spec change (generation 2, status of generation 1) was not served.
        assert!(!is_served(&es(
            "a",
            serde_json::json!({"refreshTime": "2026-01-01T00:00:00Z", "observedGeneration": 1})
        )));
        let mut deleting = synced("a");
        deleting.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                "2026-01-01T00:00:00Z".parse().unwrap(),
            ));
        assert!(!is_served(&deleting));
    }

    #[test]
    fn backlog_counts_never_attempted_and_forgets_deleted() {
        let mut attempted: HashSet<u64> = ["a", "gone"].map(uid_key).into();
        let cached = [("a", false), ("b", false), ("c", false), ("synced", true)];
        assert_eq!(count_backlog(cached.into_iter(), &mut attempted), 2);
        assert_eq!(attempted, [uid_key("a")].into());
    }

    /// While an ExternalSecret waits for its first reconcile, served ones make way; first syncs
    /// never wait; once every object was reconciled, the served ones run.
    #[test]
    fn refreshes_wait_while_first_syncs_are_pending() {
        let (reader, mut writer) = kube::runtime::reflector::store();
        writer.apply_watcher_event(&Event::Init);
        for e in [synced("old"), es("new", serde_json::json!({}))] {
            writer.apply_watcher_event(&Event::InitApply(e));
        }
        writer.apply_watcher_event(&Event::InitDone);
        let f = FirstSyncs::default();
        // Without a cache nothing is deferred.
        assert_eq!(FirstSyncs::default().defer(&synced("old")), None);
        f.attach(reader);
        let wait = f.defer(&synced("old")).expect("the refresh makes way");
        assert!((Duration::from_secs(1)..=Duration::from_secs(5)).contains(&wait));
        assert_eq!(f.defer(&es("new", serde_json::json!({}))), None);
        // "new" was reconciled: the refresh runs.
        assert_eq!(f.defer(&synced("old")), None);
        assert_eq!(f.defer(&synced("old")), None);
        // Put back for at most DEFER_LIMIT in all, even while first syncs wait.
        let f = FirstSyncs::default();
        let (reader, mut writer) = kube::runtime::reflector::store();
        writer.apply_watcher_event(&Event::Init);
        for e in [synced("old"), es("new", serde_json::json!({}))] {
            writer.apply_watcher_event(&Event::InitApply(e));
        }
        writer.apply_watcher_event(&Event::InitDone);
        f.attach(reader);
        let t0 = Instant::now();
        assert!(f.defer_at(&synced("old"), t0).is_some());
        assert!(
            f.defer_at(&synced("old"), t0 + DEFER_LIMIT - Duration::from_secs(1))
                .is_some()
        );
        assert_eq!(f.defer_at(&synced("old"), t0 + DEFER_LIMIT), None);
        // It ran: a later reconcile starts a new put-back period.
        assert!(
            f.defer_at(&synced("old"), t0 + DEFER_LIMIT + Duration::from_secs(1))
                .is_some()
        );
        // After a restart every object with a status was served: none waits.
        let (reader, mut writer) = kube::runtime::reflector::store();
        writer.apply_watcher_event(&Event::Init);
        writer.apply_watcher_event(&Event::InitApply(synced("old")));
        writer.apply_watcher_event(&Event::InitDone);
        let restarted = FirstSyncs::default();
        restarted.attach(reader);
        assert_eq!(restarted.defer(&synced("old")), None);
    }
}
