//! What the ExternalSecret controller knows of a target Secret without reading it (pure).
//!
//! A reconcile of an unchanged ExternalSecret must not GET its Secret: the managed-Secret
//! metadata cache, plus what the controller remembers of each Secret it wrote or read with its
//! data matching the data-hash annotation ([`VerifiedTarget`]: resourceVersion, type,
//! immutability), settle that the Secret is still the desired one ([`unchanged_target`]). The
//! cache keeps each Secret compact ([`compact_cached_meta`]).

use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::PartialObjectMeta;

use crate::common::refresh::SecretValidity;
use crate::externalsecret::plan::{self, LABEL_MANAGED, LABEL_MANAGED_VALUE, LABEL_OWNER};

/// What a reconcile knows of its target Secret before fetching provider data.
pub(crate) enum Target {
    /// Read from the API server, or known absent (not in the synced managed-Secret cache and
    /// never seen by this controller).
    Read(Option<Box<Secret>>),
    /// Unchanged since this controller wrote it or read it with its data matching the data-hash
    /// annotation: the cached metadata has the resourceVersion recorded then.
    Verified(Arc<PartialObjectMeta<Secret>>, VerifiedTarget),
}

impl Target {
    /// What the plan's refresh decision needs to know of the target.
    pub(crate) fn validity(&self) -> SecretValidity {
        match self {
            Target::Read(s) => plan::secret_validity(s.as_deref()),
            Target::Verified(meta, _) => SecretValidity {
                exists: true,
                managed: meta
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(LABEL_MANAGED))
                    .is_some_and(|v| v == LABEL_MANAGED_VALUE),
                hash_matches: true,
            },
        }
    }
}

/// How long a reconcile that waits for the watch to deliver its target ([`Source::Lagging`])
/// waits at most before it runs again (the Secret's watch event normally comes first).
pub(crate) const LAG_RECHECK: std::time::Duration = std::time::Duration::from_secs(1);

/// Where a reconcile of an Owner/Orphan ExternalSecret takes its target from, once the
/// managed-Secret cache has synced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// Absent: not in the cache and never seen by this controller.
    Absent,
    /// Unchanged since this controller wrote or read it: the cache shows the resourceVersion
    /// remembered then.
    Verified,
    /// This controller wrote (or read) it, but the watch has not delivered it yet: a reconcile
    /// queued while the write ran (by the finalizer patch, say) starts before the Secret's watch
    /// event, and the event will queue another. Wait for it once instead of reading the Secret;
    /// its deletion, or a relist of the watch, makes the controller forget it instead.
    Lagging,
    /// Anything else: read it.
    Read,
}

/// [`Source`] from the cache's resourceVersion of the target (`None`: not cached) and what is
/// remembered of it.
pub(crate) fn source(cached: Option<Option<&str>>, known: Option<&VerifiedTarget>) -> Source {
    match (cached, known) {
        (None, None) => Source::Absent,
        (Some(rv), Some(k)) if rv == Some(k.resource_version.as_str()) => Source::Verified,
        (None, Some(k)) if !k.resource_version.is_empty() && !k.waited => Source::Lagging,
        _ => Source::Read,
    }
}

/// What the reconcile remembers of a target Secret it wrote, or read with its data matching the
/// data-hash annotation: the parts of the Secret a metadata watch does not show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedTarget {
    /// Its resourceVersion then.
    pub resource_version: String,
    /// Its type (`Opaque` when unset).
    pub type_: String,
    /// Whether it is immutable.
    pub immutable: bool,
    /// Whether a reconcile already waited once for the managed-Secret watch to deliver it (see
    /// [`source`]).
    pub waited: bool,
}

impl VerifiedTarget {
    /// Of a Secret read or written, when its data matches its data-hash annotation.
    pub fn of(s: &Secret) -> Option<Self> {
        let v = plan::secret_validity(Some(s));
        (v.managed && v.hash_matches).then(|| VerifiedTarget {
            resource_version: s.metadata.resource_version.clone().unwrap_or_default(),
            type_: secret_type(s),
            immutable: s.immutable == Some(true),
            waited: false,
        })
    }
}

fn secret_type(s: &Secret) -> String {
    s.type_
        .clone()
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| "Opaque".to_string())
}

/// Where the managed-Secret cache keeps [`meta_fingerprint`] (in the cached labels; the key is
/// not a valid label key, so no real label can collide with it, and it never leaves the process).
const FINGERPRINT: &str = "esr fingerprint";

/// What the managed-Secret cache keeps of a Secret's metadata: everything but managedFields,
/// and of its labels, annotations, owner references and finalizers only the two labels the
/// controller looks up (managed, created-by) plus a fingerprint of all four. Annotations are
/// copied from the ExternalSecret (kubectl's last-applied-configuration among them), so whole
/// entries could be as large as the ExternalSecrets themselves; [`unchanged_target`] needs no
/// more than the fingerprint to tell that a Secret's metadata is the desired one.
pub fn compact_cached_meta(m: &mut ObjectMeta) {
    let fingerprint = meta_fingerprint(m);
    m.managed_fields = None;
    m.annotations = None;
    m.owner_references = None;
    m.finalizers = None;
    let mut labels = m.labels.take().unwrap_or_default();
    labels.retain(|k, _| k == LABEL_MANAGED || k == LABEL_OWNER);
    labels.insert(FINGERPRINT.to_string(), fingerprint);
    m.labels = Some(labels);
}

/// A digest of the labels, annotations, owner references and finalizers of `m` (an absent and an
/// empty list or map are the same).
pub fn meta_fingerprint(m: &ObjectMeta) -> String {
    use sha3::{Digest, Sha3_256};
    let empty = std::collections::BTreeMap::new();
    let parts = (
        m.labels.as_ref().unwrap_or(&empty),
        m.annotations.as_ref().unwrap_or(&empty),
        m.owner_references.as_deref().unwrap_or_default(),
        m.finalizers.as_deref().unwrap_or_default(),
    );
    let bytes = serde_json::to_vec(&parts).unwrap_or_default();
    hex::encode(&Sha3_256::digest(&bytes)[..16])
}

/// The target Secret as it is, when the `desired` Secret (planned as if the target were absent)
/// matches the cached metadata (see [`compact_cached_meta`]) of a target verified unchanged
/// (`known`): the same labels, annotations (the data-hash among them, so the same data), owner
/// references and finalizers (one fingerprint), type and immutability. `None`: it may differ,
/// read it.
pub fn unchanged_target(
    desired: Secret,
    cached: &PartialObjectMeta<Secret>,
    known: &VerifiedTarget,
) -> Option<Secret> {
    let m = &cached.metadata;
    let cached_fingerprint = m.labels.as_ref().and_then(|l| l.get(FINGERPRINT));
    let same = m.resource_version.as_deref() == Some(known.resource_version.as_str())
        && cached_fingerprint == Some(&meta_fingerprint(&desired.metadata))
        && secret_type(&desired) == known.type_
        && (desired.immutable == Some(true)) == known.immutable;
    if !same {
        return None;
    }
    let mut s = desired;
    // Labels, annotations, owner references and finalizers are the desired ones (the same
    // fingerprint); the rest of the metadata is the cache's.
    let d = std::mem::take(&mut s.metadata);
    s.metadata = ObjectMeta {
        labels: d.labels,
        annotations: d.annotations,
        owner_references: d.owner_references,
        finalizers: d.finalizers,
        ..m.clone()
    };
    s.type_ = Some(known.type_.clone());
    s.immutable = known.immutable.then_some(true);
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn an_unchanged_target_is_known_from_its_cached_metadata() {
        use k8s_openapi::ByteString;
        let labels = BTreeMap::from([(LABEL_MANAGED.to_string(), "true".to_string())]);
        let annotations = |h: &str| BTreeMap::from([("hash".to_string(), h.to_string())]);
        let mut desired = Secret::default();
        desired.metadata.name = Some("db".into());
        desired.metadata.labels = Some(labels.clone());
        desired.metadata.annotations = Some(annotations("h1"));
        desired.data = Some(BTreeMap::from([(
            "k".to_string(),
            ByteString(b"v".to_vec()),
        )]));
        let mut cached: PartialObjectMeta<Secret> = PartialObjectMeta::default();
        cached.metadata.name = Some("db".into());
        cached.metadata.resource_version = Some("5".into());
        cached.metadata.labels = Some(labels);
        cached.metadata.annotations = Some(annotations("h1"));
        let compact = |mut m: PartialObjectMeta<Secret>| {
            compact_cached_meta(&mut m.metadata);
            m
        };
        let full = cached.clone();
        let cached = compact(cached);
        // The cache keeps the looked-up label and the fingerprint, no annotations.
        assert_eq!(cached.metadata.annotations, None);
        assert_eq!(
            cached.metadata.labels.as_ref().map(|l| l.len()),
            Some(2),
            "{:?}",
            cached.metadata.labels
        );
        let known = VerifiedTarget {
            resource_version: "5".into(),
            type_: "Opaque".into(),
            immutable: false,
            waited: false,
        };
        let same = unchanged_target(desired.clone(), &cached, &known).unwrap();
        assert_eq!(same.metadata.resource_version.as_deref(), Some("5"));
        assert_eq!(same.metadata.labels, full.metadata.labels);
        assert_eq!(same.metadata.annotations, full.metadata.annotations);
        assert_eq!(same.data, desired.data);
        assert_eq!(same.type_.as_deref(), Some("Opaque"));
        // Another data hash, an extra label, an owner reference, a finalizer, a resourceVersion
        // not verified, another type: read it.
        let mut other = full.clone();
        other.metadata.annotations = Some(annotations("h2"));
        assert!(unchanged_target(desired.clone(), &compact(other), &known).is_none());
        let mut other = full.clone();
        other.metadata.labels = Some(BTreeMap::from([
            (LABEL_MANAGED.to_string(), "true".to_string()),
            ("team".to_string(), "a".to_string()),
        ]));
        assert!(unchanged_target(desired.clone(), &compact(other), &known).is_none());
        let mut other = full.clone();
        other.metadata.owner_references = Some(vec![Default::default()]);
        assert!(unchanged_target(desired.clone(), &compact(other), &known).is_none());
        let mut other = full.clone();
        other.metadata.finalizers = Some(vec!["x".into()]);
        assert!(unchanged_target(desired.clone(), &compact(other), &known).is_none());
        // Absent and empty are the same.
        let mut other = full.clone();
        other.metadata.finalizers = Some(vec![]);
        assert!(unchanged_target(desired.clone(), &compact(other), &known).is_some());
        let mut newer = cached.clone();
        newer.metadata.resource_version = Some("6".into());
        assert!(unchanged_target(desired.clone(), &newer, &known).is_none());
        let tls = VerifiedTarget {
            type_: "kubernetes.io/tls".into(),
            ..known.clone()
        };
        assert!(unchanged_target(desired.clone(), &cached, &tls).is_none());
        // A Secret is verified only when its data matches its data-hash annotation.
        let mut written = desired.clone();
        written.metadata.resource_version = Some("7".into());
        assert!(VerifiedTarget::of(&written).is_none());
        let hash = esr_api::hash::data_hash(&plan::secret_data(&written));
        written.metadata.annotations = Some(BTreeMap::from([(
            plan::ANNOTATION_DATA_HASH.to_string(),
            hash,
        )]));
        assert_eq!(
            VerifiedTarget::of(&written).map(|k| k.resource_version),
            Some("7".to_string())
        );
    }

    #[test]
    fn a_target_written_but_not_yet_watched_is_waited_for_once() {
        let known = |rv: &str, waited| VerifiedTarget {
            resource_version: rv.into(),
            type_: "Opaque".into(),
            immutable: false,
            waited,
        };
        assert_eq!(source(None, None), Source::Absent);
        assert_eq!(
            source(Some(Some("5")), Some(&known("5", false))),
            Source::Verified
        );
        assert_eq!(
            source(Some(Some("5")), Some(&known("5", true))),
            Source::Verified
        );
        // Written at 5, the cache does not show it yet: wait, once.
        assert_eq!(source(None, Some(&known("5", false))), Source::Lagging);
        assert_eq!(source(None, Some(&known("5", true))), Source::Read);
        // A failed write (no resourceVersion), another version, or a Secret never seen: read.
        assert_eq!(source(None, Some(&known("", false))), Source::Read);
        assert_eq!(
            source(Some(Some("6")), Some(&known("5", false))),
            Source::Read
        );
        assert_eq!(source(Some(Some("6")), None), Source::Read);
    }
}
