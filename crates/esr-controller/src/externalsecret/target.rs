//! What the ExternalSecret controller knows of a target Secret without reading it (pure).
//!
//! A reconcile of an unchanged ExternalSecret must not GET its Secret: the managed-Secret
//! metadata cache, plus what the controller remembers of each Secret it wrote or read with its
//! data matching the data-hash annotation ([`VerifiedTarget`]: resourceVersion, type,
//! immutability), settle that the Secret is still the desired one ([`unchanged_target`]). The
//! cache keeps each Secret compact ([`CachedSecret`]).

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::common::refresh::SecretValidity;
use crate::externalsecret::managed::{CachedSecret, fingerprint};
use crate::externalsecret::plan;

/// What a reconcile knows of its target Secret before fetching provider data.
pub(crate) enum Target {
    /// Read from the API server, or known absent (not in the synced managed-Secret cache and
    /// never seen by this controller).
    Read(Option<Box<Secret>>),
    /// Unchanged since this controller wrote it or read it with its data matching the data-hash
    /// annotation: the cached metadata has the resourceVersion recorded then.
    Verified(CachedSecret, VerifiedTarget),
}

impl Target {
    /// What the plan's refresh decision needs to know of the target.
    pub(crate) fn validity(&self) -> SecretValidity {
        match self {
            Target::Read(s) => plan::secret_validity(s.as_deref()),
            Target::Verified(cached, _) => SecretValidity {
                exists: true,
                managed: cached.managed,
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
pub(crate) fn source(cached: Option<&str>, known: Option<&VerifiedTarget>) -> Source {
    match (cached, known) {
        (None, None) => Source::Absent,
        (Some(rv), Some(k)) if rv == k.resource_version => Source::Verified,
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

/// The target Secret as it is, when the `desired` Secret (planned as if the target were absent)
/// matches what the managed-Secret cache keeps ([`CachedSecret`]) of a target verified unchanged
/// (`known`): the same labels, annotations (the data-hash among them, so the same data), owner
/// references and finalizers (one fingerprint), type and immutability. `None`: it may differ,
/// read it.
pub fn unchanged_target(
    desired: Secret,
    cached: &CachedSecret,
    known: &VerifiedTarget,
) -> Option<Secret> {
    let same = *cached.resource_version == *known.resource_version
        && cached.fingerprint == fingerprint(&desired.metadata)
        && secret_type(&desired) == known.type_
        && (desired.immutable == Some(true)) == known.immutable;
    if !same {
        return None;
    }
    let mut s = desired;
    // Labels, annotations, owner references and finalizers are the desired ones (the same
    // fingerprint); the rest of the metadata is the cache's.
    let d = std::mem::take(&mut s.metadata);
    let cached_meta = cached.meta(
        d.namespace.as_deref().unwrap_or_default(),
        d.name.as_deref().unwrap_or_default(),
    );
    s.metadata = ObjectMeta {
        labels: d.labels,
        annotations: d.annotations,
        owner_references: d.owner_references,
        finalizers: d.finalizers,
        ..cached_meta
    };
    s.type_ = Some(known.type_.clone());
    s.immutable = known.immutable.then_some(true);
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::externalsecret::plan::LABEL_MANAGED;
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
        let full = ObjectMeta {
            name: Some("db".into()),
            resource_version: Some("5".into()),
            labels: Some(labels),
            annotations: Some(annotations("h1")),
            ..ObjectMeta::default()
        };
        let compact = CachedSecret::of;
        let cached = compact(&full);
        let known = VerifiedTarget {
            resource_version: "5".into(),
            type_: "Opaque".into(),
            immutable: false,
            waited: false,
        };
        let same = unchanged_target(desired.clone(), &cached, &known).unwrap();
        assert_eq!(same.metadata.resource_version.as_deref(), Some("5"));
        assert_eq!(same.metadata.name.as_deref(), Some("db"));
        assert_eq!(same.metadata.labels, full.labels);
        assert_eq!(same.metadata.annotations, full.annotations);
        assert_eq!(same.data, desired.data);
        assert_eq!(same.type_.as_deref(), Some("Opaque"));
        // Another data hash, an extra label, an owner reference, a finalizer, a resourceVersion
        // not verified, another type: read it.
        let mut other = full.clone();
        other.annotations = Some(annotations("h2"));
        assert!(unchanged_target(desired.clone(), &compact(&other), &known).is_none());
        let mut other = full.clone();
        other.labels = Some(BTreeMap::from([
            (LABEL_MANAGED.to_string(), "true".to_string()),
            ("team".to_string(), "a".to_string()),
        ]));
        assert!(unchanged_target(desired.clone(), &compact(&other), &known).is_none());
        let mut other = full.clone();
        other.owner_references = Some(vec![Default::default()]);
        assert!(unchanged_target(desired.clone(), &compact(&other), &known).is_none());
        let mut other = full.clone();
        other.finalizers = Some(vec!["x".into()]);
        assert!(unchanged_target(desired.clone(), &compact(&other), &known).is_none());
        // Absent and empty are the same.
        let mut other = full.clone();
        other.finalizers = Some(vec![]);
        assert!(unchanged_target(desired.clone(), &compact(&other), &known).is_some());
        let mut newer = cached.clone();
        newer.resource_version = "6".into();
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
            source(Some("5"), Some(&known("5", false))),
            Source::Verified
        );
        assert_eq!(source(Some("5"), Some(&known("5", true))), Source::Verified);
        // Written at 5, the cache does not show it yet: wait, once.
        assert_eq!(source(None, Some(&known("5", false))), Source::Lagging);
        assert_eq!(source(None, Some(&known("5", true))), Source::Read);
        // A failed write (no resourceVersion), another version, or a Secret never seen: read.
        assert_eq!(source(None, Some(&known("", false))), Source::Read);
        assert_eq!(source(Some("6"), Some(&known("5", false))), Source::Read);
        assert_eq!(source(Some("6"), None), Source::Read);
    }
}
