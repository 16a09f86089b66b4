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
use esr_api::consts::FINALIZER_PUSHSECRET;
use esr_api::v1::SecretStoreKind;
use esr_api::v1alpha1::{
    PushSecret, PushSecretConversionStrategy, PushSecretData, PushSecretDeletionPolicy,
    PushSecretMatch, PushSecretRemoteRef, PushSecretRewrite, PushSecretSpec,
    PushSecretUpdatePolicy,
};
use esr_provider::store::StoreRef;
use esr_provider::{ProviderError, PushRemoteRef, PushRequest, StoreKind};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::{Resource, ResourceExt};
use regex::Regex;

use crate::pushsecret::error::{
    ClientError, DataToError, Failures, KeyCollision, PushError, RewriteError,
};
use crate::pushsecret::source::{
    SelectedStore, StoreCandidate, check_data_to_selectors, data_to_targets,
};

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
pub fn store_refs(spec: &PushSecretSpec) -> Result<Vec<StoreRef>, PushError> {
    let mut out = Vec::new();
    for r in &spec.secret_store_refs {
        match r.name.as_deref().filter(|n| !n.is_empty()) {
            Some(n) => out.push(StoreRef {
                kind: kind_of(r.kind),
                name: n.to_string(),
            }),
            None if r.label_selector.is_some() => {}
            None => return Err(PushError::NoStoreName),
        }
    }
    Ok(out)
}

/// The entries to push to `store` (a store without labels; see [`entries_for_selected`]).
pub fn entries_for_store(
    spec: &PushSecretSpec,
    store: &StoreRef,
    source: &Secret,
) -> Result<Vec<PushEntry>, PushError> {
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
) -> Result<String, PushError> {
    let mut out = key.to_string();
    let failed = |rewrite, cause| PushError::Rewrite {
        index,
        rewrite,
        cause,
    };
    for (j, rw) in rewrites.iter().enumerate() {
        if let Some(rx) = &rw.regexp {
            let r = Regex::new(&rx.source).map_err(|e| failed(j, RewriteError::Regexp(e)))?;
            out = r.replace_all(&out, rx.target.as_str()).into_owned();
        } else if let Some(t) = &rw.transform {
            out = esr_template::eso::rewrite_transform(&t.template, &out)
                .map_err(|e| failed(j, RewriteError::Transform(e)))?;
        }
    }
    if out.is_empty() {
        return Err(PushError::data_to(
            index,
            DataToError::EmptyRemoteKey(key.to_string()),
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
) -> Result<Vec<PushEntry>, PushError> {
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
        if !data_to_targets(sr, store).map_err(|e| PushError::data_to(i, e))? {
            continue;
        }
        // Keys are converted (conversionStrategy) before they are matched and rewritten (ESO).
        let keys: Vec<String> = reverse_keys(dt.conversion_strategy, source)
            .map_err(|e| PushError::data_to(i, DataToError::Conversion(e)))?
            .into_keys()
            .collect();
        let re = match dt
            .match_
            .as_ref()
            .and_then(|m| m.regexp.as_deref())
            .filter(|r| !r.is_empty())
        {
            Some(r) => Some(
                Regex::new(r).map_err(|e| PushError::data_to(i, DataToError::MatchRegexp(e)))?,
            ),
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
            return Err(PushError::DuplicateRemote {
                remote: status_key(&e.remote),
                store: store_key(&store.store),
            });
        }
    }
    Ok(out)
}

/// Builds the provider request of an entry. A `match.secretKey` missing from the (converted)
/// source is `secret key <key> does not exist`, before any provider call (ESO).
pub fn request(entry: &PushEntry, source: &Secret) -> Result<PushRequest, PushError> {
    let mut src = source.clone();
    let converted =
        reverse_keys(entry.data.conversion_strategy, source).map_err(PushError::Conversion)?;
    if let Some(k) = entry.secret_key.as_deref().filter(|k| !k.is_empty())
        && !converted.contains_key(k)
    {
        return Err(PushError::MissingKey(k.to_string()));
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
    .map_err(PushError::Request)
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
) -> Result<BTreeMap<String, ByteString>, KeyCollision> {
    let mut out = BTreeMap::new();
    for (k, v) in source.data.iter().flatten() {
        let key = match strategy {
            Some(PushSecretConversionStrategy::ReverseUnicode) => reverse_unicode(k),
            _ => k.clone(),
        };
        if out.insert(key.clone(), v.clone()).is_some() {
            return Err(KeyCollision(key));
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

// ------------------------------------------------------------------------------------------------
// The reconcile as steps
// ------------------------------------------------------------------------------------------------

/// One thing the executor does, in the order the plan lists them.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Replace `metadata.finalizers` (a merge patch guarded by the resourceVersion).
    SetFinalizers(Vec<String>),
    /// Record an event on the PushSecret.
    Event {
        /// Warning (`true`) or Normal.
        warning: bool,
        /// The reason.
        reason: &'static str,
        /// The note (capped when published).
        note: String,
    },
    /// Merge-patch the status subresource with this body ([`status_patch`]).
    Status(serde_json::Value),
    /// The Ready condition this reconcile reports to the `pushsecret_status_condition` metric.
    Ready(bool),
}

/// How a reconcile ends once its steps ran.
#[derive(Debug)]
pub enum End {
    /// Wait for the next change; the text says why (logged at debug level, may be empty).
    Await(&'static str),
    /// Run again after this delay.
    Requeue(Duration),
    /// The reconcile failed (already recorded in status and events where the plan says so):
    /// retried with backoff.
    Fail(Failure),
}

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// Pushed entries could not be deleted while the PushSecret is being deleted.
    #[error("error deleting secrets: {0}")]
    Deleting(Failures),
    /// The push failed.
    #[error("{0}")]
    Push(Failures),
}

/// The steps of one reconcile phase and how it ends.
#[derive(Debug)]
pub struct Steps {
    /// In order.
    pub steps: Vec<Step>,
    /// After the steps.
    pub end: End,
}

/// What the first phase of a reconcile decided.
#[derive(Debug)]
pub enum Admission {
    /// Run these steps and end.
    Stop(Steps),
    /// The PushSecret is being deleted with `deletionPolicy: Delete`: delete these entries from
    /// their stores, then run [`deleted`].
    DeleteAll(Vec<(String, PushRemoteRef)>),
    /// Run these steps (finalizer maintenance) and go on.
    Proceed(Vec<Step>),
}

/// The Ready condition's `(status, reason, message)`.
pub type Condition = (&'static str, &'static str, String);

fn has_finalizer(ps: &PushSecret) -> bool {
    ps.finalizers().iter().any(|f| f == FINALIZER_PUSHSECRET)
}

fn deletes_remote(ps: &PushSecret) -> bool {
    ps.spec.deletion_policy == Some(PushSecretDeletionPolicy::Delete)
}

fn finalizers_without_ours(ps: &PushSecret) -> Vec<String> {
    ps.finalizers()
        .iter()
        .filter(|f| *f != FINALIZER_PUSHSECRET)
        .cloned()
        .collect()
}

/// `status.syncedPushSecrets`.
pub fn synced_of(ps: &PushSecret) -> Synced {
    ps.status
        .as_ref()
        .and_then(|s| s.synced_push_secrets.clone())
        .unwrap_or_default()
}

/// Every entry of `synced`, as (store key, remote).
pub fn flat(s: &Synced) -> Vec<(String, PushRemoteRef)> {
    stale_entries(s, &Synced::new())
}

fn ready_of(ps: &PushSecret) -> Option<&esr_api::v1alpha1::PushSecretStatusCondition> {
    ps.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
}

fn refresh_time_of(ps: &PushSecret) -> Option<DateTime<Utc>> {
    let t = ps.status.as_ref()?.refresh_time.as_ref()?;
    let s = serde_json::to_value(t).ok()?;
    DateTime::parse_from_rfc3339(s.as_str()?)
        .ok()
        .map(|d| d.with_timezone(&Utc))
}

/// The resource version a push is recorded against (generation, labels and annotations).
pub fn current_rv(ps: &PushSecret) -> String {
    crate::externalsecret::hash::synced_resource_version(
        ps.meta().generation.unwrap_or_default(),
        ps.labels(),
        ps.annotations(),
    )
}

/// The first phase. Every store this PushSecret names belongs to another controller class
/// (`candidates`, `None` when they could not be read): it is that controller's PushSecret, so
/// nothing is touched (no finalizer, no remote deletion, no status). Otherwise a PushSecret being
/// deleted removes what it pushed (`deletionPolicy: Delete`) and its finalizer; a live one gets
/// the finalizer exactly when its policy is Delete.
pub fn admit(
    ps: &PushSecret,
    candidates: Option<&[StoreCandidate]>,
    controller_class: &str,
) -> Admission {
    let foreign = candidates.is_some_and(|c| {
        !c.is_empty()
            && c.iter().all(|c| {
                c.controller
                    .as_deref()
                    .is_some_and(|k| !k.is_empty() && k != controller_class)
            })
    });
    let stop = |steps, why| {
        Admission::Stop(Steps {
            steps,
            end: End::Await(why),
        })
    };
    if foreign {
        return stop(vec![], "skipping: stores of another controller class");
    }
    let (delete, has_fin) = (deletes_remote(ps), has_finalizer(ps));
    if ps.meta().deletion_timestamp.is_some() {
        return match (has_fin, delete) {
            (false, _) => stop(vec![], ""),
            (true, true) => Admission::DeleteAll(flat(&synced_of(ps))),
            (true, false) => stop(vec![Step::SetFinalizers(finalizers_without_ours(ps))], ""),
        };
    }
    Admission::Proceed(match (delete, has_fin) {
        (true, false) => {
            let mut f = ps.finalizers().to_vec();
            f.push(FINALIZER_PUSHSECRET.to_string());
            vec![Step::SetFinalizers(f)]
        }
        (false, true) => vec![Step::SetFinalizers(finalizers_without_ours(ps))],
        _ => vec![],
    })
}

/// After [`Admission::DeleteAll`]: the finalizer goes once everything was deleted; otherwise a
/// Warning event and a retry.
pub fn deleted(ps: &PushSecret, errors: Failures) -> Steps {
    if errors.is_empty() {
        return Steps {
            steps: vec![Step::SetFinalizers(finalizers_without_ours(ps))],
            end: End::Await(""),
        };
    }
    let failure = Failure::Deleting(errors);
    Steps {
        steps: vec![Step::Event {
            warning: true,
            reason: REASON_ERRORED,
            note: failure.to_string(),
        }],
        end: End::Fail(failure),
    }
}

/// `Some` when no push is due (the PushSecret is Ready and [`refresh_due`] says wait). As in ESO
/// this comes before the sources are read, so a generator runs only when a push is due.
pub fn refresh_skipped(ps: &PushSecret, now: DateTime<Utc>) -> Option<Steps> {
    if ready_of(ps).is_none_or(|c| c.status != "True") {
        return None;
    }
    let synced_rv = ps
        .status
        .as_ref()
        .and_then(|s| s.synced_resource_version.as_deref());
    let wait = refresh_due(
        synced_rv,
        &current_rv(ps),
        refresh_time_of(ps),
        refresh_interval(&ps.spec),
        now,
    )
    .err()?;
    Some(Steps {
        steps: vec![Step::Ready(true)],
        end: wait.map(End::Requeue).unwrap_or(End::Await("")),
    })
}

fn time_string(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The status merge patch: the Ready condition (its `lastTransitionTime` kept while the status
/// does not change), and when given the `syncedPushSecrets` change and the refresh.
pub fn status_patch(
    ps: &PushSecret,
    cond: &Condition,
    synced: Option<(&Synced, &Synced)>,
    refreshed: Option<(DateTime<Utc>, String)>,
    now: DateTime<Utc>,
) -> serde_json::Value {
    let ltt = match ready_of(ps) {
        Some(c) if c.status == cond.0 => c
            .last_transition_time
            .as_ref()
            .and_then(|t| serde_json::to_value(t).ok()),
        _ => None,
    }
    .unwrap_or_else(|| serde_json::Value::String(time_string(now)));
    let mut st = serde_json::json!({
        "conditions": [{"type": "Ready", "status": cond.0, "reason": cond.1, "message": cond.2,
                        "lastTransitionTime": ltt}]
    });
    if let Some((old, new)) = synced {
        st["syncedPushSecrets"] = synced_patch(old, new);
    }
    if let Some((t, rv)) = refreshed {
        st["refreshTime"] = serde_json::Value::String(time_string(t));
        st["syncedResourceVersion"] = serde_json::Value::String(rv);
    }
    serde_json::json!({ "status": st })
}

/// A failure before anything was pushed: Ready=False `Errored` with the error's text, a Warning
/// event, and a retry with backoff.
pub fn failed(ps: &PushSecret, errors: impl Into<Failures>, now: DateTime<Utc>) -> Steps {
    let failure = Failure::Push(errors.into());
    let msg = failure.to_string();
    let cond = ("False", REASON_ERRORED, msg.clone());
    Steps {
        steps: vec![
            Step::Ready(false),
            Step::Event {
                warning: true,
                reason: REASON_ERRORED,
                note: msg,
            },
            Step::Status(status_patch(ps, &cond, None, None, now)),
        ],
        end: End::Fail(failure),
    }
}

/// What a missing named source Secret leads to (see [`missing_source`]).
#[derive(Debug)]
pub enum Missing {
    /// Run these steps and end.
    Stop(Steps),
    /// Delete these entries from their stores, then run [`source_deleted`] with `message`.
    DeleteAll {
        /// What was pushed.
        entries: Vec<(String, PushRemoteRef)>,
        /// The Ready message.
        message: String,
    },
}

/// The source Secret `name` does not exist.
pub fn source_missing(ps: &PushSecret, name: &str, now: DateTime<Utc>) -> Missing {
    let old = synced_of(ps);
    match missing_source(&ps.spec, name, &old) {
        MissingSource::Errored => Missing::Stop(failed(ps, PushError::NoSource, now)),
        MissingSource::SourceDeleted(message) => Missing::DeleteAll {
            entries: flat(&old),
            message,
        },
    }
}

/// After [`Missing::DeleteAll`]: Ready=False `SourceDeleted`; `syncedPushSecrets` is emptied
/// when every entry was deleted (`deleted_all`), kept otherwise; requeued after the interval.
pub fn source_deleted(
    ps: &PushSecret,
    message: String,
    deleted_all: bool,
    now: DateTime<Utc>,
) -> Steps {
    let old = synced_of(ps);
    let remaining = if deleted_all {
        Synced::new()
    } else {
        old.clone()
    };
    let cond = ("False", REASON_SOURCE_DELETED, message.clone());
    Steps {
        steps: vec![
            Step::Event {
                warning: true,
                reason: REASON_SOURCE_DELETED,
                note: message,
            },
            Step::Status(status_patch(ps, &cond, Some((&old, &remaining)), None, now)),
            Step::Ready(false),
        ],
        end: End::Requeue(refresh_interval(&ps.spec).max(Duration::from_secs(1))),
    }
}

/// After the stores are selected: `Some` when the reconcile stops. ESO: no store is managed by
/// this controller (or all are being deleted) means nothing to do until the next refresh; a
/// `dataTo[]` label selector matching none of the stores is an error.
pub fn stores_selected(
    ps: &PushSecret,
    stores: &[SelectedStore],
    now: DateTime<Utc>,
) -> Option<Steps> {
    if stores.is_empty() {
        return Some(Steps {
            steps: vec![],
            end: End::Requeue(refresh_interval(&ps.spec).max(Duration::from_secs(1))),
        });
    }
    check_data_to_selectors(&ps.spec, stores)
        .err()
        .map(|e| failed(ps, e, now))
}

/// The pushes to one store, in order.
pub struct StorePush {
    /// The store.
    pub store: StoreRef,
    /// One per entry and source.
    pub ops: Vec<PushOp>,
}

/// One push of [`StorePush`].
pub enum PushOp {
    /// Push `request`; with `updatePolicy: IfNotExists` (`only_if_absent`) only when the remote
    /// secret does not exist.
    Push {
        /// The status key (`<remoteKey>[/<property>]`).
        key: String,
        /// What to push.
        request: Box<PushRequest>,
        /// The entry recorded in `syncedPushSecrets`.
        data: PushSecretData,
        /// `updatePolicy: IfNotExists`.
        only_if_absent: bool,
    },
    /// The entries or the request could not be built (reported without a provider call).
    Invalid(PushError),
}

/// What the executor saw for one [`StorePush`].
#[derive(Debug)]
pub enum StoreOutcome {
    /// The store is not used (another controller class): nothing was pushed.
    Skipped,
    /// No client could be built: nothing was pushed.
    NoClient(ClientError),
    /// The client ran the ops: one outcome per op, in order.
    Ran(Vec<OpOutcome>),
}

/// What happened to one [`PushOp`].
#[derive(Debug)]
pub enum OpOutcome {
    /// Pushed.
    Pushed,
    /// `IfNotExists` and the remote secret exists: left unchanged.
    Existing,
    /// `IfNotExists` and the existence check failed.
    ExistsFailed(ProviderError),
    /// The provider refused the push.
    Failed(ProviderError),
    /// An [`PushOp::Invalid`] (nothing to run).
    Invalid,
}

/// The pushes: for every store, every source (in name order) with the same entries. The source
/// key is checked before the provider is called (ESO).
pub fn push_plan(
    spec: &PushSecretSpec,
    stores: &[SelectedStore],
    sources: &[Secret],
) -> Vec<StorePush> {
    let only_if_absent = spec.update_policy == Some(PushSecretUpdatePolicy::IfNotExists);
    stores
        .iter()
        .map(|sel| {
            let mut ops = Vec::new();
            for source in sources {
                let entries = match entries_for_selected(spec, sel, source) {
                    Ok(e) => e,
                    Err(e) => {
                        ops.push(PushOp::Invalid(e));
                        continue;
                    }
                };
                for e in entries {
                    ops.push(match request(&e, source) {
                        Ok(request) => PushOp::Push {
                            key: status_key(&e.remote),
                            request: Box::new(request),
                            data: e.data,
                            only_if_absent,
                        },
                        Err(err) => PushOp::Invalid(PushError::Prepare(Box::new(err))),
                    });
                }
            }
            StorePush {
                store: sel.store.clone(),
                ops,
            }
        })
        .collect()
}

/// The result of a push pass: the new `syncedPushSecrets` and the failures, in order.
#[derive(Debug)]
pub struct Pushed {
    /// What is pushed now.
    pub synced: Synced,
    /// What failed.
    pub errors: Vec<PushError>,
}

/// Folds the outcomes of [`push_plan`] into the new `syncedPushSecrets`. An entry that failed,
/// or exists remotely under `IfNotExists`, keeps what was synced before (if anything), so it is
/// not considered stale; a store without a client keeps all its entries.
pub fn pushed(old: &Synced, plan: Vec<StorePush>, outcomes: Vec<StoreOutcome>) -> Pushed {
    let mut new = Synced::new();
    let mut errors = Vec::new();
    for (sp, outcome) in plan.into_iter().zip(outcomes) {
        let skey = store_key(&sp.store);
        let previous = old.get(&skey);
        let results = match outcome {
            StoreOutcome::Skipped => continue,
            StoreOutcome::NoClient(cause) => {
                errors.push(PushError::PushClient {
                    store: sp.store.name.clone(),
                    cause,
                });
                if let Some(o) = previous {
                    new.insert(skey, o.clone());
                }
                continue;
            }
            StoreOutcome::Ran(r) => r,
        };
        let mut slot = BTreeMap::new();
        for (op, result) in sp.ops.into_iter().zip(results) {
            let (key, data) = match op {
                PushOp::Invalid(e) => {
                    errors.push(e);
                    continue;
                }
                PushOp::Push { key, data, .. } => (key, data),
            };
            let keep_old = |slot: &mut BTreeMap<String, PushSecretData>, key: String| {
                if let Some(d) = previous.and_then(|m| m.get(&key)) {
                    slot.insert(key, d.clone());
                }
            };
            match result {
                OpOutcome::Pushed => {
                    slot.insert(key, data);
                }
                OpOutcome::Existing => keep_old(&mut slot, key),
                OpOutcome::ExistsFailed(e) => errors.push(PushError::Exists(e)),
                OpOutcome::Failed(cause) => {
                    errors.push(PushError::Push {
                        remote: key.clone(),
                        store: sp.store.name.clone(),
                        cause,
                    });
                    keep_old(&mut slot, key);
                }
                OpOutcome::Invalid => {}
            }
        }
        if !slot.is_empty() {
            new.insert(skey, slot);
        }
    }
    Pushed {
        synced: new,
        errors,
    }
}

/// With `deletionPolicy: Delete` and a clean push, the entries pushed before and not now, to
/// delete from their stores. With `deletionPolicy: None` entries removed from the spec are
/// forgotten, never deleted.
pub fn stale_after(ps: &PushSecret, old: &Synced, pushed: &Pushed) -> Vec<(String, PushRemoteRef)> {
    if deletes_remote(ps) && pushed.errors.is_empty() {
        stale_entries(old, &pushed.synced)
    } else {
        Vec::new()
    }
}

/// After deleting `stale`: when some deletes failed, every stale entry stays in
/// `syncedPushSecrets` (to be deleted again) and the failures are added.
pub fn stale_deleted(
    old: &Synced,
    pushed: &mut Pushed,
    stale: &[(String, PushRemoteRef)],
    errors: Vec<PushError>,
) {
    if errors.is_empty() {
        return;
    }
    for (store, r) in stale {
        if let Some(d) = old.get(store).and_then(|m| m.get(&status_key(r))) {
            pushed
                .synced
                .entry(store.clone())
                .or_default()
                .insert(status_key(r), d.clone());
        }
    }
    pushed.errors.extend(errors);
}

/// The end of a push: Ready=False `Errored` with every failure and a retry, or Ready=True with
/// the refresh recorded, a `Synced` event when the PushSecret becomes Ready or what is pushed
/// changed, and the next refresh.
pub fn finish(ps: &PushSecret, old: &Synced, pushed: Pushed, now: DateTime<Utc>) -> Steps {
    let Pushed {
        synced: new,
        errors,
    } = pushed;
    if !errors.is_empty() {
        let failure = Failure::Push(Failures(errors));
        let msg = failure.to_string();
        let cond = ("False", REASON_ERRORED, msg.clone());
        return Steps {
            steps: vec![
                Step::Ready(false),
                Step::Event {
                    warning: true,
                    reason: REASON_ERRORED,
                    note: msg,
                },
                Step::Status(status_patch(ps, &cond, Some((old, &new)), None, now)),
            ],
            end: End::Fail(failure),
        };
    }
    let cond = ready_condition(ps.spec.update_policy.unwrap_or_default());
    let was_ready = ready_of(ps)
        .is_some_and(|c| c.status == "True" && c.message.as_deref() == Some(cond.2.as_str()));
    let refreshed = Some((now, current_rv(ps)));
    let mut steps = vec![
        Step::Status(status_patch(ps, &cond, Some((old, &new)), refreshed, now)),
        Step::Ready(true),
    ];
    if !was_ready || *old != new {
        steps.push(Step::Event {
            warning: false,
            reason: REASON_SYNCED,
            note: cond.2,
        });
    }
    let interval = refresh_interval(&ps.spec);
    Steps {
        steps,
        end: if interval.is_zero() {
            End::Await("")
        } else {
            End::Requeue(interval)
        },
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
