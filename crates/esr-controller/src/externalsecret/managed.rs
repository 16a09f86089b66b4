//! The managed-Secret cache: what the ExternalSecret controller keeps of each Secret labelled
//! `reconcile.external-secrets.io/managed=true`, fed from the metadata watch it runs anyway (the
//! watch that requeues an ExternalSecret when its Secret changes).
//!
//! A reconcile looks a target up here to settle, without a GET, that the Secret is still the one
//! it wrote ([`unchanged_target`](crate::externalsecret::target::unchanged_target)), and an
//! ExternalSecret's orphaned Secrets are found here by their created-by label. Both need a few
//! fields, so each Secret is kept as a [`CachedSecret`] (its resourceVersion, uid, two labels and
//! one fingerprint of the rest of its metadata) under one `namespace/name` string: about 300
//! bytes, where kube's reflector store kept a typed `PartialObjectMeta` (the label map alone a
//! B-tree node of ~540 bytes), its `ObjectRef` key with four strings and an `Arc`, ~1.7 KB.
//!
//! Like kube's reflector, a relist (the watch's `Init` … `InitDone`) is collected apart and
//! replaces the cache when complete, so Secrets deleted while the watch was away leave it; until
//! the first list is complete the cache is not ready and the reconcile reads instead.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::core::PartialObjectMeta;
use kube::runtime::watcher;
use tokio::sync::watch;

use crate::externalsecret::plan::{LABEL_MANAGED, LABEL_MANAGED_VALUE, LABEL_OWNER};
use crate::runtime::{NameIndex, slot};

/// A digest of a Secret's labels, annotations, owner references and finalizers (see
/// [`fingerprint`]).
pub type Fingerprint = [u8; 16];

/// What the cache keeps of one managed Secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedSecret {
    /// `metadata.uid`.
    pub uid: Option<Box<str>>,
    /// `metadata.resourceVersion`.
    pub resource_version: Box<str>,
    /// `metadata.creationTimestamp`.
    pub creation_timestamp: Option<Time>,
    /// `metadata.deletionTimestamp`.
    pub deletion_timestamp: Option<Time>,
    /// Whether the managed label is `true`.
    pub managed: bool,
    /// The created-by label.
    pub owner: Option<Box<str>>,
    /// [`fingerprint`] of its metadata.
    pub fingerprint: Fingerprint,
}

impl CachedSecret {
    /// What the cache keeps of `m`.
    pub fn of(m: &ObjectMeta) -> Self {
        let label = |k: &str| m.labels.as_ref().and_then(|l| l.get(k));
        CachedSecret {
            uid: m.uid.as_deref().map(Box::from),
            resource_version: m.resource_version.as_deref().unwrap_or_default().into(),
            creation_timestamp: m.creation_timestamp.clone(),
            deletion_timestamp: m.deletion_timestamp.clone(),
            managed: label(LABEL_MANAGED).is_some_and(|v| v == LABEL_MANAGED_VALUE),
            owner: label(LABEL_OWNER).map(|o| o.as_str().into()),
            fingerprint: fingerprint(m),
        }
    }

    /// The metadata of Secret `namespace/name` as far as it is kept: no labels, annotations,
    /// owner references or finalizers (only their fingerprint is).
    pub fn meta(&self, namespace: &str, name: &str) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(namespace.to_string()),
            uid: self.uid.as_deref().map(str::to_string),
            resource_version: Some(self.resource_version.to_string()),
            creation_timestamp: self.creation_timestamp.clone(),
            deletion_timestamp: self.deletion_timestamp.clone(),
            ..ObjectMeta::default()
        }
    }
}

/// A digest of the labels, annotations, owner references and finalizers of `m` (an absent and an
/// empty list or map are the same): two Secrets with the same fingerprint have the same four.
pub fn fingerprint(m: &ObjectMeta) -> Fingerprint {
    use sha3::{Digest, Sha3_256};
    let empty = std::collections::BTreeMap::new();
    let parts = (
        m.labels.as_ref().unwrap_or(&empty),
        m.annotations.as_ref().unwrap_or(&empty),
        m.owner_references.as_deref().unwrap_or_default(),
        m.finalizers.as_deref().unwrap_or_default(),
    );
    let bytes = serde_json::to_vec(&parts).unwrap_or_default();
    let mut out = Fingerprint::default();
    out.copy_from_slice(&Sha3_256::digest(&bytes)[..16]);
    out
}

/// The managed-Secret cache (cheap to clone: one shared cache).
#[derive(Clone)]
pub struct ManagedSecrets(Arc<Shared>);

struct Shared {
    state: RwLock<State>,
    /// Secret names by (namespace, created-by label).
    owners: NameIndex,
    /// Whether a first list completed.
    ready: watch::Sender<bool>,
}

#[derive(Default)]
struct State {
    /// `namespace/name` → what is kept of it.
    secrets: HashMap<Box<str>, CachedSecret>,
    /// A relist in progress.
    relist: Option<HashMap<Box<str>, CachedSecret>>,
}

fn key(namespace: &str, name: &str) -> Box<str> {
    format!("{namespace}/{name}").into_boxed_str()
}

impl Default for ManagedSecrets {
    fn default() -> Self {
        ManagedSecrets(Arc::new(Shared {
            state: RwLock::default(),
            owners: NameIndex::default(),
            ready: watch::Sender::new(false),
        }))
    }
}

impl ManagedSecrets {
    /// Applies one event of the managed-Secret watch. Whether it tells of a change: a deletion,
    /// or a Secret new to the cache or with another resourceVersion or uid than cached (a
    /// relist's unchanged copies are not).
    pub fn apply(&self, event: &watcher::Event<PartialObjectMeta<Secret>>) -> bool {
        let named = |s: &PartialObjectMeta<Secret>| {
            let m = &s.metadata;
            Some((m.namespace.clone().unwrap_or_default(), m.name.clone()?))
        };
        let mut recorded = None;
        let mut changed = false;
        {
            let mut st = self.0.state.write().unwrap_or_else(|p| p.into_inner());
            match event {
                watcher::Event::Init => st.relist = Some(HashMap::new()),
                watcher::Event::InitApply(s) | watcher::Event::Apply(s) => {
                    if let Some((ns, name)) = named(s) {
                        let cached = CachedSecret::of(&s.metadata);
                        let k = key(&ns, &name);
                        changed = st.secrets.get(&k).is_none_or(|old| {
                            old.resource_version != cached.resource_version || old.uid != cached.uid
                        });
                        let owner = cached.owner.clone();
                        let into = match (event, st.relist.as_mut()) {
                            (watcher::Event::InitApply(_), Some(relist)) => relist,
                            _ => &mut st.secrets,
                        };
                        into.insert(k, cached);
                        recorded = owner.map(|o| (ns, name, o));
                    }
                }
                watcher::Event::Delete(s) => {
                    if let Some((ns, name)) = named(s) {
                        st.secrets.remove(&key(&ns, &name));
                    }
                    changed = true;
                }
                watcher::Event::InitDone => {
                    if let Some(relist) = st.relist.take() {
                        st.secrets = relist;
                        st.secrets.shrink_to_fit();
                    }
                }
            }
        }
        if let Some((ns, name, owner)) = recorded {
            // The sweep keeps what is cached, or listed by a relist in progress.
            let st = self.0.state.read().unwrap_or_else(|p| p.into_inner());
            self.0.owners.insert(&ns, &owner, &name, |ns, n| {
                let k = key(ns, n);
                let found = st.relist.as_ref().and_then(|r| r.get(&k));
                let s = found.or_else(|| st.secrets.get(&k))?;
                s.owner.as_deref().map(|o| slot(ns, o))
            });
        }
        if matches!(event, watcher::Event::InitDone) {
            self.0.ready.send_replace(true);
        }
        changed
    }

    /// What is kept of Secret `namespace/name`, when cached.
    pub fn get(&self, namespace: &str, name: &str) -> Option<CachedSecret> {
        let st = self.0.state.read().unwrap_or_else(|p| p.into_inner());
        st.secrets.get(&key(namespace, name)).cloned()
    }

    /// Whether a first list completed.
    pub fn is_ready(&self) -> bool {
        *self.0.ready.borrow()
    }

    /// Waits until a first list completed.
    pub async fn wait_until_ready(&self) {
        let mut rx = self.0.ready.subscribe();
        // The sender lives as long as `self`, so this cannot fail.
        let _ = rx.wait_for(|ready| *ready).await;
    }

    /// The names of the cached Secrets of `namespace` whose created-by label is `owner`, sorted.
    pub fn owned(&self, namespace: &str, owner: &str) -> Vec<String> {
        let mut out = self.0.owners.lookup(namespace, owner, |n| {
            self.get(namespace, n)
                .is_some_and(|s| s.owner.as_deref() == Some(owner))
        });
        out.sort();
        out
    }

    /// How many Secrets are cached.
    pub fn len(&self) -> usize {
        let st = self.0.state.read().unwrap_or_else(|p| p.into_inner());
        st.secrets.len()
    }

    /// Whether no Secret is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn secret(ns: &str, name: &str, rv: &str, owner: Option<&str>) -> PartialObjectMeta<Secret> {
        let mut m: PartialObjectMeta<Secret> = PartialObjectMeta::default();
        m.metadata.namespace = Some(ns.into());
        m.metadata.name = Some(name.into());
        m.metadata.uid = Some(format!("uid-{name}"));
        m.metadata.resource_version = Some(rv.into());
        let mut labels = BTreeMap::from([(LABEL_MANAGED.to_string(), "true".to_string())]);
        if let Some(o) = owner {
            labels.insert(LABEL_OWNER.to_string(), o.to_string());
        }
        m.metadata.labels = Some(labels);
        m
    }

    fn listed(items: &[PartialObjectMeta<Secret>]) -> ManagedSecrets {
        let cache = ManagedSecrets::default();
        cache.apply(&watcher::Event::Init);
        for s in items {
            assert!(cache.apply(&watcher::Event::InitApply(s.clone())));
        }
        cache.apply(&watcher::Event::InitDone);
        cache
    }

    #[test]
    fn a_secret_is_kept_as_its_version_labels_and_fingerprint() {
        let s = secret("app", "db", "5", Some("h1"));
        let cache = listed(std::slice::from_ref(&s));
        let c = cache.get("app", "db").unwrap();
        assert_eq!(&*c.resource_version, "5");
        assert_eq!(c.uid.as_deref(), Some("uid-db"));
        assert!(c.managed);
        assert_eq!(c.owner.as_deref(), Some("h1"));
        assert_eq!(c.fingerprint, fingerprint(&s.metadata));
        let m = c.meta("app", "db");
        assert_eq!(m.name.as_deref(), Some("db"));
        assert_eq!(m.namespace.as_deref(), Some("app"));
        assert_eq!(m.resource_version.as_deref(), Some("5"));
        assert_eq!(m.labels, None);
        assert!(cache.get("app", "other").is_none());
        assert!(cache.get("team", "db").is_none());
        // Not the managed value.
        let mut plain = secret("app", "plain", "1", None);
        plain
            .metadata
            .labels
            .as_mut()
            .unwrap()
            .insert(LABEL_MANAGED.to_string(), "false".to_string());
        assert!(!CachedSecret::of(&plain.metadata).managed);
    }

    #[test]
    fn the_fingerprint_tells_labels_annotations_owners_and_finalizers_apart() {
        let base = secret("app", "db", "5", Some("h1")).metadata;
        let f = fingerprint(&base);
        let mut other = base.clone();
        other.annotations = Some(BTreeMap::from([("a".to_string(), "b".to_string())]));
        assert_ne!(fingerprint(&other), f);
        let mut other = base.clone();
        other.owner_references = Some(vec![Default::default()]);
        assert_ne!(fingerprint(&other), f);
        let mut other = base.clone();
        other.finalizers = Some(vec!["x".into()]);
        assert_ne!(fingerprint(&other), f);
        let mut other = base.clone();
        other
            .labels
            .as_mut()
            .unwrap()
            .insert("team".into(), "a".into());
        assert_ne!(fingerprint(&other), f);
        // Absent and empty are the same; the resourceVersion is not part of it.
        let mut same = base.clone();
        same.finalizers = Some(vec![]);
        same.resource_version = Some("9".into());
        assert_eq!(fingerprint(&same), f);
    }

    #[tokio::test]
    async fn it_is_ready_after_the_first_list_and_follows_the_watch() {
        let cache = ManagedSecrets::default();
        assert!(!cache.is_ready());
        cache.apply(&watcher::Event::Init);
        cache.apply(&watcher::Event::InitApply(secret("app", "a", "1", None)));
        assert!(!cache.is_ready(), "not before the list completes");
        assert!(cache.get("app", "a").is_none(), "a list is applied whole");
        cache.apply(&watcher::Event::InitDone);
        assert!(cache.is_ready());
        tokio::time::timeout(std::time::Duration::from_secs(1), cache.wait_until_ready())
            .await
            .unwrap();
        assert_eq!(&*cache.get("app", "a").unwrap().resource_version, "1");
        cache.apply(&watcher::Event::Apply(secret("app", "a", "2", None)));
        cache.apply(&watcher::Event::Apply(secret("app", "b", "3", None)));
        assert_eq!(&*cache.get("app", "a").unwrap().resource_version, "2");
        assert_eq!(cache.len(), 2);
        cache.apply(&watcher::Event::Delete(secret("app", "a", "2", None)));
        assert!(cache.get("app", "a").is_none());
        // A relist: the old contents answer until it completes, then only what it listed. An
        // unchanged copy is no change.
        cache.apply(&watcher::Event::Init);
        assert!(!cache.apply(&watcher::Event::InitApply(secret("app", "b", "3", None))));
        assert!(cache.apply(&watcher::Event::InitApply(secret("app", "c", "4", None))));
        cache.apply(&watcher::Event::Init);
        assert!(cache.apply(&watcher::Event::InitApply(secret("app", "c", "4", None))));
        assert!(cache.get("app", "b").is_some());
        assert!(cache.get("app", "c").is_none(), "a list is applied whole");
        cache.apply(&watcher::Event::InitDone);
        assert!(cache.get("app", "b").is_none(), "deleted while away");
        assert!(cache.get("app", "c").is_some());
        assert_eq!(cache.len(), 1);
        assert!(cache.is_ready());
        // Another version, or a recreated Secret (another uid), is a change; so is a deletion.
        assert!(!cache.apply(&watcher::Event::Apply(secret("app", "c", "4", None))));
        assert!(cache.apply(&watcher::Event::Apply(secret("app", "c", "5", None))));
        let mut recreated = secret("app", "c", "5", None);
        recreated.metadata.uid = Some("another".into());
        assert!(cache.apply(&watcher::Event::Apply(recreated)));
        assert!(cache.apply(&watcher::Event::Delete(secret("app", "c", "5", None))));
        assert!(cache.is_empty());
    }

    #[test]
    fn owned_secrets_are_found_by_namespace_and_label() {
        let cache = listed(&[
            secret("app", "old", "1", Some("h1")),
            secret("app", "new", "2", Some("h1")),
            secret("app", "other", "3", Some("h2")),
            secret("app", "plain", "4", None),
            secret("team", "same-label", "5", Some("h1")),
        ]);
        assert_eq!(cache.owned("app", "h1"), vec!["new", "old"]);
        assert!(cache.owned("app", "h3").is_empty());
        assert_eq!(cache.owned("team", "h1"), vec!["same-label"]);
        // A deleted Secret, and one whose label changed, are no longer found under the old owner.
        cache.apply(&watcher::Event::Apply(secret(
            "app",
            "new",
            "6",
            Some("h2"),
        )));
        cache.apply(&watcher::Event::Delete(secret(
            "app",
            "old",
            "1",
            Some("h1"),
        )));
        assert!(cache.owned("app", "h1").is_empty());
        assert_eq!(cache.owned("app", "h2"), vec!["new", "other"]);
    }

    /// The owner index is swept as it grows; a sweep during a list keeps what the list has
    /// delivered so far, not yet in the cache.
    #[test]
    fn a_large_list_keeps_every_owner() {
        let items: Vec<_> = (0..3000)
            .map(|i| secret("app", &format!("s{i}"), "1", Some(&format!("h{i}"))))
            .collect();
        let cache = listed(&items);
        assert_eq!(cache.len(), 3000);
        for i in [0, 1023, 1024, 2999] {
            assert_eq!(cache.owned("app", &format!("h{i}")), vec![format!("s{i}")]);
        }
    }
}
