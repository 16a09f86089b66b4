//! The PushSecret plan (pure): the entries to push per store ([`entries_for_selected`]), what is
//! stale ([`stale_entries`]), whether a refresh is due ([`refresh_due`]) and the Ready condition
//! ([`ready_condition`]); the source/store/template helpers are in [`crate::pushsecret::source`] and
//! the executor in [`crate::pushsecret::reconcile`], which pushes through the provider trait
//! (`push_secret` / `delete_secret` / `secret_exists`), so every provider that implements push
//! works without provider-specific code.
//!
//! Supported (ESO v2.9.0): sources `selector.secret.name`, `selector.secret.selector` (every
//! matching Secret of the namespace, pushed in name order with the same entries, status keys
//! merged) and `selector.generatorRef` (the generator's output pushed as a Secret's data, consumer
//! `PushSecret/<ns>/<name>`); `template` (rendered over each source Secret); `secretStoreRefs` by
//! name or `labelSelector` (stores being deleted or of another controller class are skipped);
//! `data[].match`; `dataTo` (storeRef by name or label selector, `match.regexp`, `rewrite[]`
//! regexp/transform, `remoteKey` bundling; explicit `data[]` wins for the same source key);
//! `updatePolicy`; `deletionPolicy` with the PushSecret finalizer; `refreshInterval`; status,
//! events and the `pushsecret_*` metrics. The store finalizer
//! (`secretstore.externalsecrets.io/finalizer`) is managed by the store controllers
//! ([`crate::secretstore::reconcile`]), as in ESO.
//!
//! Order of a reconcile (ESO): finalizers, refresh decision, `dataTo` validation, sources (a
//! missing named source with `deletionPolicy: Delete` deletes what was pushed: `SourceDeleted`),
//! stores, template, push, then deletion of entries no longer pushed (computed once over all
//! sources; ESO compares per source Secret, which with several sources would delete and re-push
//! each other's keys).

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use esr_api::v1::SecretStoreKind;
use esr_api::v1alpha1::{
    PushSecretConversionStrategy, PushSecretData, PushSecretDeletionPolicy, PushSecretMatch,
    PushSecretRemoteRef, PushSecretRewrite, PushSecretSpec, PushSecretUpdatePolicy,
};
use esr_provider::store::StoreRef;
use esr_provider::{PushRemoteRef, PushRequest, StoreKind};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use regex::Regex;

use crate::pushsecret::source::{SelectedStore, data_to_targets};

/// Ready message on success.
pub const MSG_SYNCED: &str = "PushSecret synced successfully";
/// Appended to [`MSG_SYNCED`] with `updatePolicy: IfNotExists`.
pub const MSG_UNCHANGED_SUFFIX: &str = ". Existing secrets in providers unchanged.";
/// Ready reasons.
pub const REASON_SYNCED: &str = "Synced";
/// Ready reason of a failure.
pub const REASON_ERRORED: &str = "Errored";
/// Ready reason when the source Secret is gone.
pub const REASON_SOURCE_DELETED: &str = "SourceDeleted";
/// Ready message when the source Secret cannot be read and nothing is to be cleaned up.
pub const MSG_NO_SOURCE: &str = "could not get source secret";

/// What a missing named source Secret leads to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MissingSource {
    /// `deletionPolicy: Delete` and something was pushed: delete what was pushed, then Ready=False
    /// `SourceDeleted` `source secret <name> does not exist`.
    SourceDeleted(String),
    /// Otherwise (nothing pushed yet, or no Delete policy): Ready=False `Errored`
    /// `could not get source secret`, retried with backoff.
    Errored,
}

/// ESO: `SourceDeleted` only when the source is `selector.secret.name`, `deletionPolicy` is
/// Delete and something was synced; any other missing source is an error.
pub fn missing_source(spec: &PushSecretSpec, name: &str, synced: &Synced) -> MissingSource {
    let named = spec
        .selector
        .secret
        .as_ref()
        .and_then(|s| s.name.as_deref())
        .is_some_and(|n| !n.is_empty());
    let delete = spec.deletion_policy == Some(PushSecretDeletionPolicy::Delete);
    let pushed = synced.values().any(|m| !m.is_empty());
    if named && delete && pushed {
        MissingSource::SourceDeleted(format!("source secret {name} does not exist"))
    } else {
        MissingSource::Errored
    }
}
/// Default `refreshInterval`.
pub const DEFAULT_REFRESH: Duration = Duration::from_secs(3600);
/// Extra delay ESO adds when requeueing a skipped PushSecret.
pub const SKIP_REQUEUE_SLACK: Duration = Duration::from_secs(5);

/// `syncedPushSecrets`: `<Kind>/<storeName>` → `<remoteKey>[/<property>]` → entry.
pub type Synced = BTreeMap<String, BTreeMap<String, PushSecretData>>;

/// One value to push to one store.
#[derive(Debug, Clone, PartialEq)]
pub struct PushEntry {
    /// Source key (`None`: the whole Secret as a JSON object).
    pub secret_key: Option<String>,
    /// Destination.
    pub remote: PushRemoteRef,
    /// The spec entry recorded in `syncedPushSecrets`.
    pub data: PushSecretData,
    /// For dataTo bundles: only these source keys go into the JSON object.
    pub only_keys: Option<Vec<String>>,
}

/// `"<Kind>/<name>"`.
pub fn store_key(r: &StoreRef) -> String {
    let kind = match r.kind {
        StoreKind::SecretStore => "SecretStore",
        StoreKind::ClusterSecretStore => "ClusterSecretStore",
    };
    format!("{kind}/{}", r.name)
}

/// `"<remoteKey>[/<property>]"`.
pub fn status_key(r: &PushRemoteRef) -> String {
    match r.property.as_deref().filter(|p| !p.is_empty()) {
        Some(p) => format!("{}/{p}", r.remote_key),
        None => r.remote_key.clone(),
    }
}

fn remote_of(m: &PushSecretMatch) -> PushRemoteRef {
    PushRemoteRef::new(m.remote_ref.remote_key.clone())
        .with_property(m.remote_ref.property.clone().unwrap_or_default())
}

fn kind_of(k: Option<SecretStoreKind>) -> StoreKind {
    match k {
        Some(SecretStoreKind::ClusterSecretStore) => StoreKind::ClusterSecretStore,
        _ => StoreKind::SecretStore,
    }
}

/// The stores named in `secretStoreRefs`. Label-selector entries are skipped here (they are
/// resolved by listing stores, see [`crate::pushsecret::source::resolve_stores`]); an entry with
/// neither a name nor a label selector is an error.
pub fn store_refs(spec: &PushSecretSpec) -> Result<Vec<StoreRef>, String> {
    let mut out = Vec::new();
    for r in &spec.secret_store_refs {
        match r.name.as_deref().filter(|n| !n.is_empty()) {
            Some(n) => out.push(StoreRef {
                kind: kind_of(r.kind),
                name: n.to_string(),
            }),
            None if r.label_selector.is_some() => {}
            None => return Err("refStore Name must be provided".to_string()),
        }
    }
    Ok(out)
}

/// The entries to push to `store` (a store without labels; see [`entries_for_selected`]).
pub fn entries_for_store(
    spec: &PushSecretSpec,
    store: &StoreRef,
    source: &Secret,
) -> Result<Vec<PushEntry>, String> {
    entries_for_selected(
        spec,
        &SelectedStore {
            store: store.clone(),
            labels: BTreeMap::new(),
        },
        source,
    )
}

/// Applies `rewrite[]` (regexp or transform, in order) to one key.
pub fn rewrite_key(
    rewrites: &[PushSecretRewrite],
    key: &str,
    index: usize,
) -> Result<String, String> {
    let mut out = key.to_string();
    for (j, rw) in rewrites.iter().enumerate() {
        if let Some(rx) = &rw.regexp {
            let r = Regex::new(&rx.source)
                .map_err(|e| format!("dataTo[{index}].rewrite[{j}]: invalid regexp: {e}"))?;
            out = r.replace_all(&out, rx.target.as_str()).into_owned();
        } else if let Some(t) = &rw.transform {
            out = esr_template::eso::rewrite_transform(&t.template, &out)
                .map_err(|e| format!("dataTo[{index}].rewrite[{j}]: {e}"))?;
        }
    }
    if out.is_empty() {
        return Err(format!(
            "dataTo[{index}]: empty remote key produced for source key {key:?}"
        ));
    }
    Ok(out)
}

/// The entries to push to `store`: every `data[]` entry, then the `dataTo[]` entries whose storeRef
/// targets this store (by name, or by label selector over the store's labels; keys matched by
/// `match.regexp`, renamed by `rewrite[]` regexp/transform, or bundled into one remote secret with
/// `remoteKey`). As in ESO an explicit `data[]` entry wins over a `dataTo[]` entry for the same
/// source key. Keys are sorted; two entries with the same remote destination are an error.
pub fn entries_for_selected(
    spec: &PushSecretSpec,
    store: &SelectedStore,
    source: &Secret,
) -> Result<Vec<PushEntry>, String> {
    let mut out = Vec::new();
    let mut explicit_keys = std::collections::BTreeSet::new();
    for d in spec.data.iter().flatten() {
        let key = d.match_.secret_key.clone().filter(|k| !k.is_empty());
        explicit_keys.insert(key.clone().unwrap_or_default());
        out.push(PushEntry {
            secret_key: key,
            remote: remote_of(&d.match_),
            data: d.clone(),
            only_keys: None,
        });
    }
    for (i, dt) in spec.data_to.iter().flatten().enumerate() {
        let Some(sr) = &dt.store_ref else { continue };
        if !data_to_targets(sr, store).map_err(|e| format!("dataTo[{i}]: {e}"))? {
            continue;
        }
        // Keys are converted (conversionStrategy) before they are matched and rewritten (ESO).
        let keys: Vec<String> = reverse_keys(dt.conversion_strategy, source)
            .map_err(|e| format!("dataTo[{i}]: conversion failed: {e}"))?
            .into_keys()
            .collect();
        let re = match dt
            .match_
            .as_ref()
            .and_then(|m| m.regexp.as_deref())
            .filter(|r| !r.is_empty())
        {
            Some(r) => {
                Some(Regex::new(r).map_err(|e| format!("dataTo[{i}]: invalid match.regexp: {e}"))?)
            }
            None => None,
        };
        let matched: Vec<String> = keys
            .iter()
            .filter(|k| re.as_ref().is_none_or(|r| r.is_match(k)))
            .cloned()
            .collect();
        let metadata = dt.metadata.clone();
        if let Some(rk) = dt.remote_key.as_deref().filter(|k| !k.is_empty()) {
            let data = PushSecretData {
                match_: PushSecretMatch {
                    secret_key: None,
                    remote_ref: PushSecretRemoteRef {
                        remote_key: rk.to_string(),
                        property: None,
                    },
                },
                metadata,
                conversion_strategy: dt.conversion_strategy,
            };
            out.push(PushEntry {
                secret_key: None,
                remote: PushRemoteRef::new(rk),
                data,
                only_keys: Some(matched),
            });
            continue;
        }
        let rewrites = dt.rewrite.clone().unwrap_or_default();
        for k in matched {
            if explicit_keys.contains(&k) {
                continue;
            }
            let remote = rewrite_key(&rewrites, &k, i)?;
            let data = PushSecretData {
                match_: PushSecretMatch {
                    secret_key: Some(k.clone()),
                    remote_ref: PushSecretRemoteRef {
                        remote_key: remote.clone(),
                        property: None,
                    },
                },
                metadata: metadata.clone(),
                conversion_strategy: dt.conversion_strategy,
            };
            out.push(PushEntry {
                secret_key: Some(k),
                remote: PushRemoteRef::new(remote),
                data,
                only_keys: None,
            });
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    for e in &out {
        if !seen.insert(status_key(&e.remote)) {
            return Err(format!(
                "duplicate remote destination {:?} for store {}",
                status_key(&e.remote),
                store_key(&store.store)
            ));
        }
    }
    Ok(out)
}

/// Builds the provider request of an entry. A `match.secretKey` missing from the (converted)
/// source is `secret key <key> does not exist`, before any provider call (ESO).
pub fn request(entry: &PushEntry, source: &Secret) -> Result<PushRequest, String> {
    let mut src = source.clone();
    let converted = reverse_keys(entry.data.conversion_strategy, source)
        .map_err(|e| format!("could not apply conversion strategy to keys: {e}"))?;
    if let Some(k) = entry.secret_key.as_deref().filter(|k| !k.is_empty())
        && !converted.contains_key(k)
    {
        return Err(format!("secret key {k} does not exist"));
    }
    src.data = Some(match &entry.only_keys {
        Some(only) => converted
            .into_iter()
            .filter(|(k, _)| only.contains(k))
            .collect(),
        None => converted,
    });
    PushRequest::from_secret(
        src,
        entry.remote.clone(),
        entry.secret_key.clone(),
        entry.data.metadata.as_ref().map(|m| m.0.clone()),
    )
    .map_err(|e| e.to_string())
}

/// `conversionStrategy: ReverseUnicode` on one key: every `_U<4 or 5 hex digits>_` sequence (as
/// written by ExternalSecret `conversionStrategy: Unicode`) becomes the character it encodes.
pub fn reverse_unicode(key: &str) -> String {
    static RE: std::sync::OnceLock<Option<Regex>> = std::sync::OnceLock::new();
    let Some(re) = RE
        .get_or_init(|| Regex::new("_U([0-9a-fA-F]{4,5})_").ok())
        .as_ref()
    else {
        return key.to_string();
    };
    re.replace_all(key, |c: &regex::Captures<'_>| {
        let n = u32::from_str_radix(&c[1], 16).unwrap_or(0xFFFD);
        char::from_u32(n).unwrap_or('\u{FFFD}').to_string()
    })
    .into_owned()
}

/// The source Secret's data with its keys converted (ESO `ReverseKeys`); two keys converting to
/// the same name are an error.
pub fn reverse_keys(
    strategy: Option<PushSecretConversionStrategy>,
    source: &Secret,
) -> Result<BTreeMap<String, ByteString>, String> {
    let mut out = BTreeMap::new();
    for (k, v) in source.data.iter().flatten() {
        let key = match strategy {
            Some(PushSecretConversionStrategy::ReverseUnicode) => reverse_unicode(k),
            _ => k.clone(),
        };
        if out.insert(key.clone(), v.clone()).is_some() {
            return Err(format!("secret name collision during conversion: {key}"));
        }
    }
    Ok(out)
}

/// Entries in `old` that are not in `new` (to delete with `deletionPolicy: Delete`).
pub fn stale_entries(old: &Synced, new: &Synced) -> Vec<(String, PushRemoteRef)> {
    let mut out = Vec::new();
    for (store, entries) in old {
        for (key, d) in entries {
            if new.get(store).is_some_and(|m| m.contains_key(key)) {
                continue;
            }
            out.push((store.clone(), remote_of(&d.match_)));
        }
    }
    out
}

/// Parses `"<Kind>/<name>"`.
pub fn parse_store_key(k: &str) -> Option<StoreRef> {
    let (kind, name) = k.split_once('/')?;
    let kind = match kind {
        "SecretStore" => StoreKind::SecretStore,
        "ClusterSecretStore" => StoreKind::ClusterSecretStore,
        _ => return None,
    };
    Some(StoreRef {
        kind,
        name: name.to_string(),
    })
}

/// `refreshInterval` (default 1h).
pub fn refresh_interval(spec: &PushSecretSpec) -> Duration {
    match spec.refresh_interval.as_deref().filter(|s| !s.is_empty()) {
        None => DEFAULT_REFRESH,
        Some(s) => esr_api::duration::parse(s)
            .ok()
            .and_then(|d| d.to_std())
            .unwrap_or(DEFAULT_REFRESH),
    }
}

/// ESO's PushSecret refresh decision: a resource-version mismatch first (so a spec change
/// re-pushes even with `refreshInterval: 0`), then the interval. `Err(wait)` = skip and requeue.
pub fn refresh_due(
    synced_rv: Option<&str>,
    current_rv: &str,
    refresh_time: Option<DateTime<Utc>>,
    interval: Duration,
    now: DateTime<Utc>,
) -> Result<(), Option<Duration>> {
    if synced_rv != Some(current_rv) {
        return Ok(());
    }
    if interval.is_zero() {
        return Err(None);
    }
    let Some(rt) = refresh_time else {
        return Ok(());
    };
    let elapsed = (now - rt).to_std().unwrap_or(Duration::ZERO);
    if elapsed >= interval {
        Ok(())
    } else {
        Err(Some(interval - elapsed + SKIP_REQUEUE_SLACK))
    }
}

/// The Ready condition `(status, reason, message)` of a successful push.
pub fn ready_condition(policy: PushSecretUpdatePolicy) -> (&'static str, &'static str, String) {
    let msg = match policy {
        PushSecretUpdatePolicy::IfNotExists => format!("{MSG_SYNCED}{MSG_UNCHANGED_SUFFIX}"),
        PushSecretUpdatePolicy::Replace => MSG_SYNCED.to_string(),
    };
    ("True", REASON_SYNCED, msg)
}

/// A merge patch turning `old` into `new` (removed keys become null).
pub fn synced_patch(old: &Synced, new: &Synced) -> serde_json::Value {
    let mut out = serde_json::Map::new();
    for (store, entries) in new {
        let mut m = serde_json::Map::new();
        for (k, d) in entries {
            m.insert(k.clone(), serde_json::to_value(d).unwrap_or_default());
        }
        if let Some(o) = old.get(store) {
            for k in o.keys().filter(|k| !entries.contains_key(*k)) {
                m.insert(k.clone(), serde_json::Value::Null);
            }
        }
        out.insert(store.clone(), serde_json::Value::Object(m));
    }
    for store in old.keys().filter(|s| !new.contains_key(*s)) {
        out.insert(store.clone(), serde_json::Value::Null);
    }
    serde_json::Value::Object(out)
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
