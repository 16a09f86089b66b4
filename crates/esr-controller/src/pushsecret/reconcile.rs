//! PushSecret (eso-inventory §4): a pure planning core ([`entries_for_selected`],
//! [`stale_entries`], [`refresh_due`], [`ready_condition`], plus the source/store/template helpers
//! in [`crate::pushsecret::source`]) and the reconciler ([`run`]) that pushes through the provider
//! trait (`push_secret` / `delete_secret` / `secret_exists`), so every provider that implements
//! push works without provider-specific code.
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

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use esr_api::consts::FINALIZER_PUSHSECRET;
use esr_api::v1::SecretStoreKind;
use esr_api::v1alpha1::{
    PushSecret, PushSecretConversionStrategy, PushSecretData, PushSecretDeletionPolicy,
    PushSecretMatch, PushSecretRemoteRef, PushSecretRewrite, PushSecretSpec,
    PushSecretUpdatePolicy,
};
use esr_provider::store::{StoreRef, StoreResolution, resolve_store};
use esr_provider::{ClientContext, PushRemoteRef, PushRequest, SecretsClient, StoreKind};
use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event as KubeEvent, EventType, Recorder, Reporter};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{Controller, watcher};
use kube::{Api, Resource, ResourceExt};
use regex::Regex;
use tracing::{debug, info, warn};

use crate::externalsecret::reconcile::Context;
use crate::metrics::Observed;
use crate::pushsecret::source::{
    SelectedStore, SourceError, check_data_to_selectors, data_to_targets, load_template_sources,
    render_template, resolve_sources, resolve_stores, select_stores, validate_data_to,
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

// ------------------------------------------------------------------------------------------------
// IO
// ------------------------------------------------------------------------------------------------

/// Errors of a PushSecret reconcile (retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Kubernetes API error.
    #[error("kubernetes API error: {0}")]
    Kube(#[from] kube::Error),
    /// A push failure (recorded in status and events).
    #[error("{0}")]
    Push(String),
}

/// Reconciler state.
pub struct PsContext {
    ctx: Arc<Context>,
    recorder: Recorder,
    failures: crate::common::refresh::Backoffs<(String, String)>,
}

fn time_string(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn refresh_time_of(ps: &PushSecret) -> Option<DateTime<Utc>> {
    let t = ps.status.as_ref()?.refresh_time.as_ref()?;
    let s = serde_json::to_value(t).ok()?;
    DateTime::parse_from_rfc3339(s.as_str()?)
        .ok()
        .map(|d| d.with_timezone(&Utc))
}

fn current_rv(ps: &PushSecret) -> String {
    crate::externalsecret::hash::synced_resource_version(
        ps.meta().generation.unwrap_or_default(),
        ps.labels(),
        ps.annotations(),
    )
}

async fn client_for(
    pctx: &PsContext,
    ns: &str,
    r: &StoreRef,
) -> Result<Option<Arc<dyn SecretsClient>>, String> {
    let ctx = &pctx.ctx;
    let opts = esr_provider::ResolveOptions {
        controller_class: ctx.config.controller_class.clone(),
        flood_gate: ctx.config.flood_gate,
    };
    let store = match resolve_store(&ctx.stores, ns, r, &opts).await {
        Ok(StoreResolution::Use(s)) => s,
        Ok(StoreResolution::Skip) => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let provider = ctx.registry.for_store(&store).map_err(|e| e.to_string())?;
    let cctx = ClientContext::new(&store, Some(ns), ctx.kube.clone())
        .with_recorder(Arc::new(ctx.metrics.clone()));
    provider
        .new_client(&cctx)
        .await
        .map(Some)
        .map_err(|e| e.to_string())
}

async fn publish(pctx: &PsContext, ps: &PushSecret, warning: bool, reason: &str, note: &str) {
    let e = KubeEvent {
        type_: if warning {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: reason.to_string(),
        note: Some(note.to_string()),
        action: reason.to_string(),
        secondary: None,
    };
    if let Err(err) = pctx.recorder.publish(&e, &ps.object_ref(&())).await {
        warn!(error = %err, "failed to publish event");
    }
}

async fn set_finalizers(
    api: &Api<PushSecret>,
    ps: &PushSecret,
    f: Vec<String>,
) -> Result<(), kube::Error> {
    let patch = serde_json::json!({"metadata": {"finalizers": f, "resourceVersion": ps.resource_version()}});
    api.patch(
        &ps.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .map(|_| ())
}

/// Deletes synced entries; returns what could not be deleted.
async fn delete_entries(
    pctx: &PsContext,
    ns: &str,
    entries: &[(String, PushRemoteRef)],
) -> Vec<String> {
    let mut errors = Vec::new();
    let mut clients: HashMap<String, Option<Arc<dyn SecretsClient>>> = HashMap::new();
    for (store, remote) in entries {
        let Some(sr) = parse_store_key(store) else {
            continue;
        };
        if !clients.contains_key(store) {
            let c = match client_for(pctx, ns, &sr).await {
                Ok(c) => c,
                Err(e) => {
                    errors.push(format!("{store}: {e}"));
                    None
                }
            };
            clients.insert(store.clone(), c);
        }
        if let Some(Some(c)) = clients.get(store)
            && let Err(e) = c.delete_secret(remote).await
            && !e.is_not_found()
        {
            errors.push(format!("{store} {}: {e}", status_key(remote)));
        }
    }
    errors
}

fn synced_of(ps: &PushSecret) -> Synced {
    ps.status
        .as_ref()
        .and_then(|s| s.synced_push_secrets.clone())
        .unwrap_or_default()
}

fn flat(s: &Synced) -> Vec<(String, PushRemoteRef)> {
    stale_entries(s, &Synced::new())
}

async fn write_status(
    api: &Api<PushSecret>,
    ps: &PushSecret,
    cond: (&str, &str, String),
    synced: Option<(&Synced, &Synced)>,
    refreshed: Option<(DateTime<Utc>, String)>,
) -> Result<(), kube::Error> {
    let old_cond = ps
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"));
    let ltt = match old_cond {
        Some(c) if c.status == cond.0 => c
            .last_transition_time
            .as_ref()
            .and_then(|t| serde_json::to_value(t).ok()),
        _ => None,
    }
    .unwrap_or_else(|| serde_json::Value::String(time_string(Utc::now())));
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
    api.patch_status(
        &ps.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&serde_json::json!({ "status": st })),
    )
    .await
    .map(|_| ())
}

/// The PushSecret reconciler. Records `pushsecret_reconcile_duration` and, when the reconcile
/// wrote a Ready condition, `pushsecret_status_condition`.
pub async fn reconcile(ps: Arc<PushSecret>, pctx: Arc<PsContext>) -> Result<Action, Error> {
    let started = Instant::now();
    let name = ps.name_any();
    let ns = ps.namespace().unwrap_or_default();
    let mut ready = None;
    let res = reconcile_inner(&ps, &pctx, &mut ready).await;
    debug!(ps = %name, elapsed = ?started.elapsed(), "reconciled PushSecret");
    if ps.meta().deletion_timestamp.is_some() && res.is_ok() {
        pctx.ctx
            .metrics
            .forget_observed(Observed::PushSecret, &name, &ns);
    } else {
        pctx.ctx
            .metrics
            .observe(Observed::PushSecret, &name, &ns, started.elapsed(), ready);
    }
    if res.is_ok() {
        pctx.failures.reset(&(ns, name));
    }
    res
}

/// One push pass over all sources and stores.
struct Pushed {
    synced: Synced,
    errors: Vec<String>,
}

async fn push_all(
    pctx: &PsContext,
    ps: &PushSecret,
    ns: &str,
    stores: &[SelectedStore],
    sources: &[Secret],
    old: &Synced,
) -> Pushed {
    let if_not_exists = ps.spec.update_policy == Some(PushSecretUpdatePolicy::IfNotExists);
    let mut new = Synced::new();
    let mut errors = Vec::new();
    for sel in stores {
        let sr = &sel.store;
        let skey = store_key(sr);
        let client = match client_for(pctx, ns, sr).await {
            Ok(Some(c)) => c,
            Ok(None) => continue,
            Err(e) => {
                errors.push(format!(
                    "could not get secrets client for store {}: {e}",
                    sr.name
                ));
                // Keep what was synced so it is not considered stale.
                if let Some(o) = old.get(&skey) {
                    new.insert(skey.clone(), o.clone());
                }
                continue;
            }
        };
        let slot = new.entry(skey.clone()).or_default();
        // Several sources (label selector): each is pushed with the same entries, in name order,
        // and the status keys are merged (ESO).
        for source in sources {
            let entries = match entries_for_selected(&ps.spec, sel, source) {
                Ok(e) => e,
                Err(e) => {
                    errors.push(e);
                    continue;
                }
            };
            for e in entries {
                let key = status_key(&e.remote);
                // The source key is checked before the provider is called (ESO).
                let req = match request(&e, source) {
                    Ok(r) => r,
                    Err(err) => {
                        errors.push(format!("set secret failed: {err}"));
                        continue;
                    }
                };
                if if_not_exists {
                    match client.secret_exists(&e.remote).await {
                        Ok(true) => {
                            // Existing remote secret: left unchanged (and only tracked if esr
                            // pushed it before).
                            if let Some(d) = old.get(&skey).and_then(|m| m.get(&key)) {
                                slot.insert(key, d.clone());
                            }
                            continue;
                        }
                        Ok(false) => {}
                        Err(err) => {
                            errors
                                .push(format!("could not verify if secret exists in store: {err}"));
                            continue;
                        }
                    }
                }
                match client.push_secret(&req).await {
                    Ok(()) => {
                        slot.insert(key, e.data.clone());
                    }
                    Err(err) => {
                        if let Some(d) = old.get(&skey).and_then(|m| m.get(&key)) {
                            slot.insert(key, d.clone());
                        }
                        errors.push(format!("set secret failed: could not write remote ref {} to target secretstore {}: {err}", status_key(&e.remote), sr.name));
                    }
                }
            }
        }
        if slot.is_empty() {
            new.remove(&skey);
        }
    }
    Pushed {
        synced: new,
        errors,
    }
}

async fn reconcile_inner(
    ps: &PushSecret,
    pctx: &PsContext,
    ready_out: &mut Option<bool>,
) -> Result<Action, Error> {
    let name = ps.name_any();
    let ns = ps.namespace().unwrap_or_default();
    let api: Api<PushSecret> = Api::namespaced(pctx.ctx.client.clone(), &ns);
    // Every store this PushSecret names belongs to another controller class: it is that
    // controller's PushSecret, so touch nothing (no finalizer, no remote deletion, no status).
    if let Ok(candidates) = resolve_stores(&pctx.ctx.client, &ps.spec, &ns).await
        && !candidates.is_empty()
        && candidates.iter().all(|c| {
            c.controller
                .as_deref()
                .is_some_and(|k| !k.is_empty() && k != pctx.ctx.config.controller_class)
        })
    {
        debug!(ps = %name, namespace = %ns, "skipping: stores of another controller class");
        return Ok(Action::await_change());
    }
    let delete_policy = ps.spec.deletion_policy == Some(PushSecretDeletionPolicy::Delete);
    let has_fin = ps.finalizers().iter().any(|f| f == FINALIZER_PUSHSECRET);
    let old = synced_of(ps);

    if ps.meta().deletion_timestamp.is_some() {
        if has_fin {
            if delete_policy {
                let errors = delete_entries(pctx, &ns, &flat(&old)).await;
                if !errors.is_empty() {
                    let msg = format!("error deleting secrets: {}", errors.join("; "));
                    publish(pctx, ps, true, REASON_ERRORED, &msg).await;
                    return Err(Error::Push(msg));
                }
            }
            let rest = ps
                .finalizers()
                .iter()
                .filter(|f| *f != FINALIZER_PUSHSECRET)
                .cloned()
                .collect();
            set_finalizers(&api, ps, rest).await?;
        }
        return Ok(Action::await_change());
    }
    if delete_policy && !has_fin {
        let mut f = ps.finalizers().to_vec();
        f.push(FINALIZER_PUSHSECRET.to_string());
        set_finalizers(&api, ps, f).await?;
    } else if !delete_policy && has_fin {
        let rest = ps
            .finalizers()
            .iter()
            .filter(|f| *f != FINALIZER_PUSHSECRET)
            .cloned()
            .collect();
        set_finalizers(&api, ps, rest).await?;
    }

    let rv = current_rv(ps);
    let interval = refresh_interval(&ps.spec);
    let now = Utc::now();
    let synced_rv = ps
        .status
        .as_ref()
        .and_then(|s| s.synced_resource_version.as_deref());

    // Skip unless a refresh is due (or the last attempt did not succeed). As in ESO this comes
    // before the sources are read, so a generator runs only when a push is due.
    let ready = ps
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True");
    if ready && let Err(wait) = refresh_due(synced_rv, &rv, refresh_time_of(ps), interval, now) {
        *ready_out = Some(true);
        return Ok(wait
            .map(Action::requeue)
            .unwrap_or_else(Action::await_change));
    }

    let fail_api = api.clone();
    let fail = |msg: String, ready_out: &mut Option<bool>| {
        *ready_out = Some(false);
        async move {
            publish(pctx, ps, true, REASON_ERRORED, &msg).await;
            write_status(
                &fail_api,
                ps,
                ("False", REASON_ERRORED, msg.clone()),
                None,
                None,
            )
            .await?;
            Err::<Action, Error>(Error::Push(msg))
        }
    };

    if let Err(e) = validate_data_to(&ps.spec) {
        return fail(e, ready_out).await;
    }
    let sources =
        match resolve_sources(&pctx.ctx.client, &*pctx.ctx.kube, &ps.spec, &ns, &name).await {
            Ok(s) => s,
            Err(SourceError::NotFound(src_name)) => {
                let msg = match missing_source(&ps.spec, &src_name, &old) {
                    MissingSource::Errored => {
                        return fail(MSG_NO_SOURCE.to_string(), ready_out).await;
                    }
                    MissingSource::SourceDeleted(msg) => msg,
                };
                let mut remaining = old.clone();
                let errors = delete_entries(pctx, &ns, &flat(&old)).await;
                if errors.is_empty() {
                    remaining = Synced::new();
                }
                publish(pctx, ps, true, REASON_SOURCE_DELETED, &msg).await;
                write_status(
                    &api,
                    ps,
                    ("False", REASON_SOURCE_DELETED, msg),
                    Some((&old, &remaining)),
                    None,
                )
                .await?;
                *ready_out = Some(false);
                return Ok(Action::requeue(interval.max(Duration::from_secs(1))));
            }
            Err(SourceError::Other(e)) => return fail(e, ready_out).await,
        };
    let candidates = match resolve_stores(&pctx.ctx.client, &ps.spec, &ns).await {
        Ok(c) => c,
        Err(e) => return fail(e, ready_out).await,
    };
    let stores = select_stores(candidates, &pctx.ctx.config.controller_class);
    if stores.is_empty() {
        // ESO: no store is managed by this controller (or all are being deleted): nothing to do.
        debug!(ps = %name, namespace = %ns, "no managed store to push to");
        return Ok(Action::requeue(interval.max(Duration::from_secs(1))));
    }
    if let Err(e) = check_data_to_selectors(&ps.spec, &stores) {
        return fail(e, ready_out).await;
    }
    let mut rendered = Vec::with_capacity(sources.len());
    if let Some(t) = &ps.spec.template {
        let tsources = match load_template_sources(&*pctx.ctx.kube, &ns, t).await {
            Ok(s) => s,
            Err(e) => {
                return fail(format!("error fetching templateFrom data: {e}"), ready_out).await;
            }
        };
        for s in &sources {
            match render_template(t, s, &tsources) {
                Ok(r) => rendered.push(r),
                Err(e) => return fail(e, ready_out).await,
            }
        }
    } else {
        rendered = sources;
    }

    let Pushed {
        synced: mut new,
        mut errors,
    } = push_all(pctx, ps, &ns, &stores, &rendered, &old).await;

    if delete_policy && errors.is_empty() {
        let stale = stale_entries(&old, &new);
        let del_errors = delete_entries(pctx, &ns, &stale).await;
        if !del_errors.is_empty() {
            // Keep the entries that could not be deleted.
            for (store, r) in &stale {
                if let Some(d) = old.get(store).and_then(|m| m.get(&status_key(r))) {
                    new.entry(store.clone())
                        .or_default()
                        .insert(status_key(r), d.clone());
                }
            }
            errors.extend(del_errors);
        }
    }
    // deletionPolicy None: entries removed from the spec are forgotten, never deleted.

    if !errors.is_empty() {
        let msg = errors.join("; ");
        *ready_out = Some(false);
        publish(pctx, ps, true, REASON_ERRORED, &msg).await;
        write_status(
            &api,
            ps,
            ("False", REASON_ERRORED, msg.clone()),
            Some((&old, &new)),
            None,
        )
        .await?;
        return Err(Error::Push(msg));
    }
    let policy = ps.spec.update_policy.unwrap_or_default();
    let cond = ready_condition(policy);
    let was_ready = ps
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True" && c.message.as_deref() == Some(cond.2.as_str()));
    write_status(&api, ps, cond.clone(), Some((&old, &new)), Some((now, rv))).await?;
    *ready_out = Some(true);
    if !was_ready || old != new {
        publish(pctx, ps, false, REASON_SYNCED, &cond.2).await;
        info!(ps = %name, namespace = %ns, "pushed secret");
    }
    Ok(if interval.is_zero() {
        Action::await_change()
    } else {
        Action::requeue(interval)
    })
}

fn error_policy(ps: Arc<PushSecret>, err: &Error, pctx: Arc<PsContext>) -> Action {
    let delay = pctx
        .failures
        .failed((ps.namespace().unwrap_or_default(), ps.name_any()));
    warn!(ps = %ps.name_any(), error = %err, retry_in = ?delay, "PushSecret reconcile failed");
    Action::requeue(delay)
}

/// PushSecrets (from the cache) whose source is the Secret `namespace/name`.
pub fn ps_for_secret(
    store: &Store<PushSecret>,
    namespace: &str,
    name: &str,
) -> Vec<ObjectRef<PushSecret>> {
    store
        .state()
        .iter()
        .filter(|p| p.namespace().as_deref() == Some(namespace))
        .filter(|p| {
            p.spec
                .selector
                .secret
                .as_ref()
                .and_then(|s| s.name.as_deref())
                == Some(name)
        })
        .map(|p| ObjectRef::from_obj(&**p))
        .collect()
}

/// Runs the PushSecret controller until `shutdown` resolves.
///
/// Like ESO, a change of the source Secret is pushed on the next refresh (`refreshInterval`);
/// Secrets are deliberately not watched, so memory does not grow with the Secrets in the cluster.
pub async fn run(
    ctx: Arc<Context>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let client = ctx.client.clone();
    let ns = ctx.config.namespace.clone();
    let ps_api: Api<PushSecret> = match &ns {
        Some(n) => Api::namespaced(client.clone(), n),
        None => Api::all(client.clone()),
    };
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: esr_api::consts::EVENT_SOURCE_PUSHSECRET.to_string(),
            instance: ctx.config.instance.clone(),
        },
    );
    let concurrency = ctx.config.concurrency;
    let metrics = ctx.metrics.clone();
    let pctx = Arc::new(PsContext {
        ctx,
        recorder,
        failures: Default::default(),
    });
    let controller = Controller::new(ps_api, watcher::Config::default());
    controller
        .with_config(kube::runtime::controller::Config::default().concurrency(concurrency))
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, pctx)
        .for_each(|res| {
            let metrics = metrics.clone();
            async move {
                match res {
                    // A deleted PushSecret (without finalizer) is never reconciled again: drop
                    // its metric series.
                    Err(kube::runtime::controller::Error::ObjectNotFound(r)) => {
                        metrics.forget_observed(
                            Observed::PushSecret,
                            &r.name,
                            r.namespace.as_deref().unwrap_or_default(),
                        );
                    }
                    Err(e) => debug!(error = %e, "PushSecret controller event"),
                    Ok(_) => {}
                }
            }
        })
        .await;
}

#[cfg(test)]
#[path = "reconcile_tests.rs"]
mod tests;
