//! Watch plumbing shared by the fan-out controllers: the [`Observe`] hook that feeds the
//! `clusterexternalsecret_*` / `clusterpushsecret_*` metrics, and the stream filters that turn a
//! reflector's events into "changed or deleted" objects (status-only and no-op updates dropped).

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use kube::Resource;
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

/// Turns a reflector stream into "changed or deleted" objects: status-only and no-op updates are
/// dropped, deletions always pass.
pub(crate) fn changes<K, S>(
    stream: S,
    hash: fn(&K) -> u64,
) -> impl futures::Stream<Item = Result<K, watcher::Error>> + Send
where
    K: Resource + Clone + Send + 'static,
    S: futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send,
{
    let seen: Arc<Mutex<HashMap<String, u64>>> = Arc::default();
    stream
        .map(move |ev| {
            let seen = seen.clone();
            let out: Vec<Result<K, watcher::Error>> = match ev {
                Err(e) => vec![Err(e)],
                Ok(watcher::Event::Apply(o)) | Ok(watcher::Event::InitApply(o)) => {
                    let key = format!(
                        "{}/{}",
                        o.meta().namespace.clone().unwrap_or_default(),
                        o.meta().name.clone().unwrap_or_default()
                    );
                    let h = hash(&o);
                    let mut s = seen.lock().unwrap_or_else(|p| p.into_inner());
                    if s.insert(key, h) == Some(h) {
                        vec![]
                    } else {
                        vec![Ok(o)]
                    }
                }
                Ok(watcher::Event::Delete(o)) => {
                    let key = format!(
                        "{}/{}",
                        o.meta().namespace.clone().unwrap_or_default(),
                        o.meta().name.clone().unwrap_or_default()
                    );
                    seen.lock().unwrap_or_else(|p| p.into_inner()).remove(&key);
                    vec![Ok(o)]
                }
                Ok(_) => vec![],
            };
            futures::stream::iter(out)
        })
        .flatten()
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
