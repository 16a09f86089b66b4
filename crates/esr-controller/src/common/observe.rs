//! Watch plumbing shared by the controllers: the [`Observe`] hook that feeds the
//! `clusterexternalsecret_*` / `clusterpushsecret_*` metrics, and the stream filters that turn a
//! reflector's events into "changed" objects (status-only and no-op updates dropped), with one
//! compact entry per watched object ([`Seen`]).

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::Resource;
use kube::core::ObjectMeta;
use kube::runtime::watcher;

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

/// A hash of what a reconcile of a parent or child reads from its metadata (generation, labels,
/// annotations, finalizers, owners, deletion): an update that changes none of it is dropped.
pub(crate) fn meta_hash<K: Resource>(o: &K) -> u64 {
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
    h.finish()
}

/// Which objects of one watch passed a change filter, and with what: one small entry per object
/// (a hash of its namespace and name, a hash of the filtered property and its uid, and the relist
/// it was last seen in). kube's `predicate_filter` keeps the name, namespace and uid strings of
/// every object instead, a few hundred bytes each with tens of thousands of ExternalSecrets and
/// their Secrets.
///
/// Two objects whose names hash alike share an entry; each then overwrites the other's, so the
/// worst a collision does is let an unchanged object through (a spare reconcile), never hide a
/// change: the uid is part of the recorded value.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    entries: HashMap<u64, Entry>,
    relist: u32,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    value: u64,
    relist: u32,
}

/// A 64-bit hash of `parts` (the same in every run of esr), for in-memory keys and change
/// detection only.
pub(crate) fn digest(parts: impl Hash) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    parts.hash(&mut h);
    h.finish()
}

fn key(meta: &ObjectMeta) -> u64 {
    digest((meta.namespace.as_deref(), meta.name.as_deref()))
}

impl Seen {
    /// Whether the object is new, recreated (another uid) or its `property` changed since it last
    /// passed; records what it is now.
    pub(crate) fn changed(&mut self, meta: &ObjectMeta, property: u64) -> bool {
        let value = digest((property, meta.uid.as_deref()));
        let entry = Entry {
            value,
            relist: self.relist,
        };
        self.entries
            .insert(key(meta), entry)
            .is_none_or(|old| old.value != value)
    }

    /// The object was deleted.
    pub(crate) fn forget(&mut self, meta: &ObjectMeta) {
        self.entries.remove(&key(meta));
    }

    /// The watch lists everything again (after it lost its place).
    fn relist_started(&mut self) {
        self.relist = self.relist.wrapping_add(1);
    }

    /// The relist is complete: objects it did not list were deleted while the watch was away.
    fn relist_done(&mut self) {
        let current = self.relist;
        self.entries.retain(|_, e| e.relist == current);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }
}

/// What a change filter does with a deleted object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Deletions {
    /// Passes it on (whoever reconciles it must learn of the deletion).
    Pass,
    /// Drops it.
    Drop,
}

/// Turns a reflector stream into changed objects: an object passes when it is new, recreated or
/// its `property` (a hash) changed; status-only and no-op updates are dropped. Deleted objects
/// pass or not by `deletions`.
pub(crate) fn changed_objects<K, S>(
    stream: S,
    property: impl Fn(&K) -> u64 + Send + 'static,
    deletions: Deletions,
) -> impl futures::Stream<Item = Result<K, watcher::Error>> + Send
where
    K: Resource + Send + 'static,
    S: futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send,
{
    let mut seen = Seen::default();
    stream.filter_map(move |ev| {
        let out = match ev {
            Err(e) => Some(Err(e)),
            Ok(watcher::Event::Init) => {
                seen.relist_started();
                None
            }
            Ok(watcher::Event::InitDone) => {
                seen.relist_done();
                None
            }
            Ok(watcher::Event::Apply(o)) | Ok(watcher::Event::InitApply(o)) => {
                let p = property(&o);
                seen.changed(o.meta(), p).then_some(Ok(o))
            }
            Ok(watcher::Event::Delete(o)) => {
                seen.forget(o.meta());
                (deletions == Deletions::Pass).then_some(Ok(o))
            }
        };
        futures::future::ready(out)
    })
}

/// How often [`cache_ready`] looks again.
const READY_RECHECK: Duration = Duration::from_millis(100);

/// Waits until `store` has been listed once, as [`Store::wait_until_ready`], for any number of
/// tasks waiting at once. kube's readiness signal keeps the waker of the last task that polled
/// it only: of two tasks waiting before the list completes (a controller's runner and a reconcile
/// of another controller reading the same cache, say), the other is never woken. Each waiter here
/// looks again every 100 ms until the store is ready.
pub(crate) async fn cache_ready<K>(
    store: &kube::runtime::reflector::Store<K>,
) -> Result<(), kube::runtime::reflector::store::WriterDropped>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    loop {
        if let Ok(ready) = tokio::time::timeout(READY_RECHECK, store.wait_until_ready()).await {
            return ready;
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every task waiting for a store is released when its first list completes, however many
    /// wait at once (kube's own wait wakes only the last to poll).
    #[tokio::test]
    async fn every_waiter_sees_the_store_ready() {
        let (reader, mut writer) = kube::runtime::reflector::store::<ConfigMap>();
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let r = reader.clone();
                tokio::spawn(async move { cache_ready(&r).await })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(50)).await;
        writer.apply_watcher_event(&Event::Init);
        writer.apply_watcher_event(&Event::InitDone);
        for w in waiters {
            tokio::time::timeout(Duration::from_secs(5), w)
                .await
                .expect("released")
                .unwrap()
                .unwrap();
        }
    }
    use futures::StreamExt;
    use k8s_openapi::api::core::v1::ConfigMap;
    use watcher::Event;

    fn cm(name: &str, uid: &str, generation: i64) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                uid: Some(uid.into()),
                generation: Some(generation),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn generation(o: &ConfigMap) -> u64 {
        o.metadata.generation.unwrap_or_default() as u64
    }

    /// Runs the filter over `events` and names what passed (with its generation).
    fn passed(events: Vec<Event<ConfigMap>>, deletions: Deletions) -> Vec<(String, i64)> {
        let stream = futures::stream::iter(events.into_iter().map(Ok));
        let out: Vec<_> =
            futures::executor::block_on(changed_objects(stream, generation, deletions).collect());
        out.into_iter()
            .map(|r| {
                let o = r.expect("no errors in this stream");
                (
                    o.metadata.name.unwrap_or_default(),
                    o.metadata.generation.unwrap_or_default(),
                )
            })
            .collect()
    }

    fn named(v: &[(&str, i64)]) -> Vec<(String, i64)> {
        v.iter().map(|(n, g)| (n.to_string(), *g)).collect()
    }

    #[test]
    fn an_unchanged_property_is_dropped_and_a_change_passes() {
        let out = passed(
            vec![
                Event::Apply(cm("a", "u1", 1)),
                Event::Apply(cm("a", "u1", 1)),
                Event::Apply(cm("b", "u2", 1)),
                Event::Apply(cm("a", "u1", 2)),
                Event::Apply(cm("a", "u1", 2)),
            ],
            Deletions::Drop,
        );
        assert_eq!(out, named(&[("a", 1), ("b", 1), ("a", 2)]));
    }

    #[test]
    fn a_recreated_object_passes_with_the_same_property() {
        let out = passed(
            vec![
                Event::Apply(cm("a", "u1", 1)),
                Event::Delete(cm("a", "u1", 1)),
                Event::Apply(cm("a", "u9", 1)),
                Event::Apply(cm("a", "u7", 1)),
            ],
            Deletions::Drop,
        );
        assert_eq!(out, named(&[("a", 1), ("a", 1), ("a", 1)]));
    }

    #[test]
    fn deletions_pass_or_not_as_asked_and_are_forgotten() {
        let events = || {
            vec![
                Event::Apply(cm("a", "u1", 1)),
                Event::Delete(cm("a", "u1", 1)),
                Event::Apply(cm("a", "u1", 1)),
            ]
        };
        assert_eq!(
            passed(events(), Deletions::Pass),
            named(&[("a", 1), ("a", 1), ("a", 1)])
        );
        // Forgotten on deletion: the same object coming back passes again.
        assert_eq!(
            passed(events(), Deletions::Drop),
            named(&[("a", 1), ("a", 1)])
        );
    }

    #[test]
    fn a_relist_drops_what_it_did_not_list_and_passes_only_changes() {
        let mut seen = Seen::default();
        let a = cm("a", "u1", 1);
        let b = cm("b", "u2", 1);
        assert!(seen.changed(&a.metadata, 1));
        assert!(seen.changed(&b.metadata, 1));
        // The watch comes back: `a` is listed unchanged, `b` was deleted meanwhile.
        seen.relist_started();
        assert!(!seen.changed(&a.metadata, 1));
        seen.relist_done();
        assert_eq!(seen.len(), 1);
        assert!(
            seen.changed(&b.metadata, 1),
            "b's entry went with the relist"
        );
        assert!(!seen.changed(&a.metadata, 1));
    }
}
