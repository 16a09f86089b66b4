//! `plan()`: the pure heart of the ExternalSecret reconciler. It performs no IO.
//!
//! Given the ExternalSecret (as an [`EsView`]), the assembled provider data, the existing target
//! Secret and the clock, it computes the desired Secret, the write to perform, the new status,
//! the events and the requeue, and [`Plan::steps`] orders them for the IO shell. ESO's algorithm,
//! which this follows:
//!
//! - **Deletion** ([`deletion`]): with `deletionPolicy=Delete` and a target controlled by this
//!   ExternalSecret, delete the target; then remove the finalizer (merge patch). Otherwise the
//!   finalizer is added (merge patch), see [`admit`].
//! - **Skip** without status write or requeue when the ExternalSecret uses a ClusterSecretStore
//!   and that reconciler is disabled, or a referenced store belongs to another controller class.
//! - **Refresh decision** ([`decide`]): skip (requeue after the remaining interval) when the
//!   ExternalSecret needs no refresh and the target is valid. Valid means: always for
//!   `creationPolicy=Orphan`; otherwise the Secret exists, carries `managed=true` and its
//!   `data-hash` annotation equals the hash of its data. So drift (a deleted Secret, a removed
//!   label, edited data) forces a resync under every policy but Orphan. `CreatedOnce` refreshes
//!   only before the first sync; `OnChange` also when the metadata/generation hash changed;
//!   `Periodic` with `refreshInterval <= 0` never again after the first sync (not even on spec
//!   changes; only drift), otherwise when that hash changed or the interval elapsed inside the
//!   sync windows.
//! - **Fetch failure**: Ready=False `could not get secret data from provider`, a Warning
//!   `UpdateFailed` with the error, retry with exponential backoff.
//! - **Empty data** applies the deletionPolicy: `Delete` deletes the target (creationPolicy
//!   must be Owner), `Retain` keeps it, `Merge` goes on with the empty map.
//! - **Mutation**: set `immutable`; for a new or mutable Secret drop the data keys, labels and
//!   annotations this field manager owned (from `managedFields`), copy the ExternalSecret's (or the
//!   template's) labels and annotations, add template finalizers, clear the data unless
//!   creationPolicy is Merge or CreateOrMerge, then copy the provider data and/or render the
//!   template; then ownership, `managed=true` and the `data-hash` annotation.
//! - **creationPolicy**: `None` writes nothing; `Merge` only updates an existing Secret;
//!   `Orphan` and `CreateOrMerge` create or update; `Owner` first deletes the Secrets carrying this
//!   ExternalSecret's created-by label under another name ("orphans"), then creates or updates.
//!   Writes use `fieldManager=<fqdn>` and a plain create/update; an update that changes nothing is
//!   skipped. An immutable target only gets its metadata updated; a data change is
//!   `SecretImmutable`.
//! - **Success**: Ready=True, `refreshTime` = reconcile start, `syncedResourceVersion` = the
//!   metadata hash, requeue after the interval (none for `refreshInterval <= 0`). A write conflict
//!   requeues at once. An owner conflict or an immutable target is terminal: Ready=False, no
//!   requeue until the next change.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::common::refresh::{self, RefreshState, Requeue, SecretValidity};
use crate::externalsecret::error::{MutateError, SyncError};
use crate::externalsecret::hash;
use crate::externalsecret::pipeline::{Assembled, DataMap};

/// `reconcile.external-secrets.io/managed`.
pub const LABEL_MANAGED: &str = "reconcile.external-secrets.io/managed";
/// `true`.
pub const LABEL_MANAGED_VALUE: &str = "true";
/// `reconcile.external-secrets.io/created-by`.
pub const LABEL_OWNER: &str = "reconcile.external-secrets.io/created-by";
/// `reconcile.external-secrets.io/data-hash`.
pub const ANNOTATION_DATA_HASH: &str = "reconcile.external-secrets.io/data-hash";
/// The ES finalizer.
pub const FINALIZER: &str = "externalsecrets.external-secrets.io/externalsecret-cleanup";
/// apiVersion of the owner reference.
pub const ES_API_VERSION: &str = "external-secrets.io/v1";
/// Kind of the owner reference.
pub const ES_KIND: &str = "ExternalSecret";
/// Condition type.
pub const CONDITION_READY: &str = "Ready";

/// Ready reasons.
pub mod reason {
    /// Synced.
    pub const SECRET_SYNCED: &str = "SecretSynced";
    /// Deleted by deletionPolicy.
    pub const SECRET_DELETED: &str = "SecretDeleted";
    /// Merge without target.
    pub const SECRET_MISSING: &str = "SecretMissing";
    /// Error.
    pub const SECRET_SYNCED_ERROR: &str = "SecretSyncedError";
    /// The target is immutable and its data would change (ESO v2.10+; `SecretSyncedError` before).
    pub const SECRET_IMMUTABLE: &str = "SecretImmutable";
    /// The target is owned by another ExternalSecret or controller (ESO v2.10+;
    /// `SecretSyncedError` before).
    pub const SECRET_OWNED_BY_OTHER: &str = "SecretOwnedByOther";
}

/// Longest detail appended to a condition message; longer details are cut and end in `...`.
pub const MAX_DETAIL: usize = 256;

/// ESO v2.10+ condition message for Kubernetes API, ownership, immutable-target and
/// generic-target errors: `<base>: <detail>`, the detail cut at [`MAX_DETAIL`] characters followed
/// by `...`. Provider and template errors keep the bare base message (their details can quote
/// provider data); events carry the full error either way.
pub fn detailed(base: &str, detail: &str) -> String {
    let detail = detail.trim();
    if detail.is_empty() {
        return base.to_string();
    }
    match detail.char_indices().nth(MAX_DETAIL) {
        Some((cut, _)) => format!("{base}: {}...", &detail[..cut]),
        None => format!("{base}: {detail}"),
    }
}

/// Condition messages (ESO `msg*`).
pub mod msg {
    /// Success.
    pub const SYNCED: &str = "secret synced";
    /// Retain with empty data.
    pub const SYNCED_RETAIN: &str = "secret retained due to DeletionPolicy=Retain";
    /// Delete with empty data.
    pub const DELETED: &str = "secret deleted due to DeletionPolicy=Delete";
    /// Merge without target.
    pub const MISSING: &str = "secret will not be created due to CreationPolicy=Merge";
    /// Provider failure.
    pub const ERR_GET_DATA: &str = "could not get secret data from provider";
    /// Delete failure.
    pub const ERR_DELETE: &str = "could not delete secret";
    /// Orphan cleanup failure.
    pub const ERR_DELETE_ORPHANED: &str = "could not delete orphaned secrets";
    /// Write failure.
    pub const ERR_UPDATE: &str = "could not update secret";
    /// Immutable change.
    pub const ERR_IMMUTABLE: &str = "could not update secret, target is immutable";
    /// Ownership failure.
    pub const ERR_BECOME_OWNER: &str = "failed to take ownership of target secret";
    /// Owned by another ES.
    pub const ERR_IS_OWNED: &str = "target is owned by another ExternalSecret";
    /// `target.manifest` that cannot be written.
    pub const ERR_GENERIC_TARGET: &str = "invalid generic target";
}

/// Why a generic target (`target.manifest`) is not written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GenericTargetError {
    /// Without `--unsafe-allow-generic-targets` (ESO's text).
    #[error("generic targets are disabled. Enable with --unsafe-allow-generic-targets flag")]
    Disabled,
    /// `target.manifest.apiVersion` is empty (ESO's text).
    #[error("target.manifest.apiVersion is required")]
    NoApiVersion,
    /// `target.manifest.kind` is empty (ESO's text).
    #[error("target.manifest.kind is required")]
    NoKind,
    /// Allowed, but esr does not write objects other than Secrets.
    #[error(
        "esr does not write generic targets ({api_version} {kind}); only Secret targets are supported"
    )]
    Unsupported {
        /// `target.manifest.apiVersion`.
        api_version: String,
        /// `target.manifest.kind`.
        kind: String,
    },
}

/// `target.manifest` of an ExternalSecret.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ManifestView {
    /// apiVersion.
    pub api_version: String,
    /// kind.
    pub kind: String,
}

/// ESO's generic-target check: none for a Secret target; refused without
/// `--unsafe-allow-generic-targets`, then apiVersion and kind are required; esr then refuses the
/// kind it cannot write.
pub fn generic_target_error(
    manifest: Option<&ManifestView>,
    allow: bool,
) -> Option<GenericTargetError> {
    let m = manifest?;
    Some(if !allow {
        GenericTargetError::Disabled
    } else if m.api_version.is_empty() {
        GenericTargetError::NoApiVersion
    } else if m.kind.is_empty() {
        GenericTargetError::NoKind
    } else {
        GenericTargetError::Unsupported {
            api_version: m.api_version.clone(),
            kind: m.kind.clone(),
        }
    })
}

/// The plan of an ExternalSecret whose generic target is refused: Ready=False
/// `SecretSyncedError` `invalid generic target: <error>`, a Warning `UpdateFailed`, no requeue
/// (ESO).
pub fn generic_target_failed(es: &EsView, err: &GenericTargetError, now: DateTime<Utc>) -> Plan {
    failed_plan(
        es,
        reason::SECRET_SYNCED_ERROR,
        &detailed(msg::ERR_GENERIC_TARGET, &err.to_string()),
        SyncError::GenericTarget(err.clone()),
        now,
        true,
        Vec::new(),
    )
}

/// Event reasons and messages (ESO's; source `external-secrets`): Normal `Created`, `Updated`,
/// `Deleted` (deletionPolicy or an orphan), `MissingProviderSecret` (a missing remote secret that
/// is skipped; for `data[]` entries ESO's text still says `spec.dataFrom[i] (key=…)`, with the
/// `data` index), and Warning `UpdateFailed` with the error text on every failure.
pub mod event {
    /// Created.
    pub const CREATED: &str = "Created";
    /// Updated.
    pub const UPDATED: &str = "Updated";
    /// Deleted.
    pub const DELETED: &str = "Deleted";
    /// MissingProviderSecret.
    pub const MISSING_PROVIDER_SECRET: &str = "MissingProviderSecret";
    /// UpdateFailed.
    pub const UPDATE_FAILED: &str = "UpdateFailed";
    /// `secret created`.
    pub const MSG_CREATED: &str = "secret created";
    /// `secret updated`.
    pub const MSG_UPDATED: &str = "secret updated";
    /// `secret deleted due to DeletionPolicy=Delete`.
    pub const MSG_DELETED: &str = "secret deleted due to DeletionPolicy=Delete";
    /// `secret deleted because it was orphaned`.
    pub const MSG_DELETED_ORPHANED: &str = "secret deleted because it was orphaned";
}

pub use esr_api::v1::{CreationPolicy, DeletionPolicy};

/// The spec spelling of a creationPolicy (for ESO's messages).
pub fn creation_policy_name(p: CreationPolicy) -> &'static str {
    match p {
        CreationPolicy::Owner => "Owner",
        CreationPolicy::Orphan => "Orphan",
        CreationPolicy::Merge => "Merge",
        CreationPolicy::None => "None",
        CreationPolicy::CreateOrMerge => "CreateOrMerge",
    }
}

/// A condition (ESO `ExternalSecretStatusCondition`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    /// `Ready`.
    pub type_: String,
    /// `True`/`False`.
    pub status: String,
    /// Reason.
    pub reason: String,
    /// Message.
    pub message: String,
    /// lastTransitionTime.
    pub last_transition_time: Option<DateTime<Utc>>,
}

/// The ExternalSecret status as the plan sees it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EsStatus {
    /// `status.refreshTime`.
    pub refresh_time: Option<DateTime<Utc>>,
    /// `status.syncedResourceVersion`.
    pub synced_resource_version: String,
    /// `status.conditions`.
    pub conditions: Vec<Condition>,
    /// `status.binding.name`.
    pub binding_name: String,
    /// `status.observedGeneration`.
    pub observed_generation: Option<i64>,
}

impl EsStatus {
    /// The Ready condition.
    pub fn ready(&self) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == CONDITION_READY)
    }
}

/// ESO `SetExternalSecretCondition`: identical status/reason/message → no change; same status →
/// keep lastTransitionTime; otherwise replace and re-append.
pub fn set_condition(status: &mut EsStatus, mut cond: Condition, now: DateTime<Utc>) {
    if let Some(cur) = status.conditions.iter().find(|c| c.type_ == cond.type_) {
        if cur.status == cond.status && cur.reason == cond.reason && cur.message == cond.message {
            return;
        }
        if cur.status == cond.status {
            cond.last_transition_time = cur.last_transition_time;
        } else {
            cond.last_transition_time = Some(now);
        }
    } else {
        cond.last_transition_time = Some(now);
    }
    status.conditions.retain(|c| c.type_ != cond.type_);
    status.conditions.push(cond);
}

/// The template part of the target, with what the plan needs to know.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TemplateView {
    /// `template.type` (empty keeps the existing type).
    pub type_: String,
    /// `template.engineVersion` ("" or "v2" are fine; CRD default is v2).
    pub engine_version: String,
    /// `mergePolicy: Merge`.
    pub merge_policy_merge: bool,
    /// `template.data` or `templateFrom` is non-empty.
    pub has_data_templates: bool,
    /// `template.metadata.labels` (raw).
    pub labels: BTreeMap<String, String>,
    /// `template.metadata.annotations` (raw).
    pub annotations: BTreeMap<String, String>,
    /// `template.metadata.finalizers`.
    pub finalizers: Vec<String>,
}

/// What a template renders to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rendered {
    /// Data keys rendered by templateFrom and template.data (in ESO's order).
    pub data: DataMap,
    /// Rendered labels (template.metadata.labels and templateFrom target Labels).
    pub labels: BTreeMap<String, String>,
    /// Rendered annotations.
    pub annotations: BTreeMap<String, String>,
}

/// Template rendering failure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// templateFrom sources could not be read (`error fetching templateFrom data: …`).
    #[error("error fetching templateFrom data: {0}")]
    Fetch(String),
    /// Execution failed (`could not execute template: …`).
    #[error("could not execute template: {0}")]
    Exec(String),
}

/// Renders the ExternalSecret's template against provider data (implemented over esr-template
/// in the IO layer; closures in tests).
pub trait Renderer: Send + Sync {
    /// Renders templateFrom (in order), template.data and the metadata templates.
    fn render(&self, data: &DataMap) -> Result<Rendered, RenderError>;
}

/// A renderer for ExternalSecrets without a template (never called).
pub struct NoTemplate;

impl Renderer for NoTemplate {
    fn render(&self, _data: &DataMap) -> Result<Rendered, RenderError> {
        Ok(Rendered::default())
    }
}

/// The ExternalSecret, reduced to what the reconciler needs.
#[derive(Debug, Clone, Default)]
pub struct EsView {
    /// metadata.name.
    pub name: String,
    /// metadata.namespace.
    pub namespace: String,
    /// metadata.uid.
    pub uid: String,
    /// metadata.generation.
    pub generation: i64,
    /// metadata.labels.
    pub labels: BTreeMap<String, String>,
    /// metadata.annotations.
    pub annotations: BTreeMap<String, String>,
    /// Resolved target name (`target.name` or the ES name).
    pub target_name: String,
    /// creationPolicy.
    pub creation: CreationPolicy,
    /// deletionPolicy.
    pub deletion: DeletionPolicy,
    /// target.immutable.
    pub immutable: bool,
    /// target.manifest (a generic target).
    pub manifest: Option<ManifestView>,
    /// target.template.
    pub template: Option<TemplateView>,
    /// Refresh settings (refreshPolicy, interval, windows); the status fields are filled from `status`.
    pub refresh_policy: refresh::RefreshPolicy,
    /// refreshInterval (zero for `<= 0`).
    pub refresh_interval: Duration,
    /// syncWindows.
    pub sync_windows: Option<refresh::SyncWindows>,
    /// Current status.
    pub status: EsStatus,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// `metadata.finalizers` holds [`FINALIZER`].
    pub has_finalizer: bool,
    /// `spec.secretStoreRef.kind` is `ClusterSecretStore`.
    pub uses_cluster_store: bool,
}

impl EsView {
    /// `GetResourceVersion(meta)`.
    pub fn resource_version(&self) -> String {
        hash::synced_resource_version(self.generation, &self.labels, &self.annotations)
    }

    /// The field manager of this ExternalSecret.
    pub fn field_manager(&self) -> String {
        hash::field_manager(&self.name)
    }

    fn refresh_state(&self) -> RefreshState {
        RefreshState {
            policy: self.refresh_policy,
            interval: self.refresh_interval,
            windows: self.sync_windows.clone(),
            synced_resource_version: self.status.synced_resource_version.clone(),
            current_resource_version: self.resource_version(),
            refresh_time: self.status.refresh_time,
        }
    }
}

/// Whether a Secret passes ESO's `isSecretValid`.
pub fn secret_validity(existing: Option<&Secret>) -> SecretValidity {
    let Some(s) = existing else {
        return SecretValidity::default();
    };
    let labels = s.metadata.labels.as_ref();
    let managed = labels
        .and_then(|l| l.get(LABEL_MANAGED))
        .map(String::as_str)
        == Some(LABEL_MANAGED_VALUE);
    let data = secret_data(s);
    let hash_matches = s
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_DATA_HASH))
        .map(String::as_str)
        == Some(hash::data_hash(&data).as_str());
    SecretValidity {
        exists: true,
        managed,
        hash_matches,
    }
}

/// The data of a Secret as a [`DataMap`].
pub fn secret_data(s: &Secret) -> DataMap {
    s.data
        .as_ref()
        .map(|d| d.iter().map(|(k, v)| (k.clone(), v.0.clone())).collect())
        .unwrap_or_default()
}

/// The first decision of a reconcile: skip (and when to come back), or sync.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Nothing to do. `status` is `Some` only when observedGeneration must be brought up to date.
    Skip {
        /// When to look again.
        requeue: Requeue,
        /// Status to write, if any.
        status: Option<EsStatus>,
    },
    /// Fetch provider data and call [`plan`].
    Sync,
}

/// ESO step 6: skip when `!shouldRefresh(es) && isSecretValid(secret)`.
pub fn decide(
    es: &EsView,
    existing: Option<&Secret>,
    now: DateTime<Utc>,
    jitter: Duration,
) -> Decision {
    decide_on(es, &secret_validity(existing), now, jitter)
}

/// [`decide`] with the target's validity already known (the reconcile knows it from the
/// managed-Secret cache when the Secret is unchanged since it was written or read).
pub fn decide_on(
    es: &EsView,
    validity: &SecretValidity,
    now: DateTime<Utc>,
    jitter: Duration,
) -> Decision {
    let valid = refresh::is_secret_valid(es.creation == CreationPolicy::Orphan, validity);
    if !refresh::should_refresh(&es.refresh_state(), now) && valid {
        let status = if es.status.observed_generation != Some(es.generation)
            && !es.status.conditions.is_empty()
        {
            let mut s = es.status.clone();
            s.observed_generation = Some(es.generation);
            Some(s)
        } else {
            None
        };
        return Decision::Skip {
            requeue: requeue_for(es, es.status.refresh_time, now, jitter),
            status,
        };
    }
    Decision::Sync
}

fn requeue_for(
    es: &EsView,
    refresh_time: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
    jitter: Duration,
) -> Requeue {
    let jitter = if es.refresh_policy == refresh::RefreshPolicy::Periodic {
        jitter
    } else {
        Duration::ZERO
    };
    refresh::requeue_after(es.refresh_interval, refresh_time, now, jitter)
}

/// An event to record on the ExternalSecret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRec {
    /// `Normal` or `Warning`.
    pub type_: EventType,
    /// Reason.
    pub reason: String,
    /// Message (never contains values).
    pub message: String,
}

pub use crate::common::events::EventType;

impl EventRec {
    fn normal(reason: &str, message: impl Into<String>) -> Self {
        EventRec {
            type_: EventType::Normal,
            reason: reason.to_string(),
            message: message.into(),
        }
    }
    fn warning(reason: &str, message: impl Into<String>) -> Self {
        EventRec {
            type_: EventType::Warning,
            reason: reason.to_string(),
            message: message.into(),
        }
    }
}

/// The write to perform on the target Secret.
#[derive(Debug, Clone, PartialEq)]
pub enum SecretWrite {
    /// Nothing to write.
    None,
    /// Create this Secret (with `fieldManager`).
    Create(Box<Secret>),
    /// Update (replace) with this Secret, carrying the existing resourceVersion.
    Update(Box<Secret>),
    /// Delete the target Secret.
    Delete(String),
}

/// How the reconcile ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Success (after the writes succeed).
    Done,
    /// Failure that retries with backoff (the error text is in the Warning event).
    Retry(SyncError),
    /// Failure that must not requeue (terminal until the next watch event).
    Terminal(SyncError),
}

impl Outcome {
    /// The failure, if any.
    pub fn error(&self) -> Option<&SyncError> {
        match self {
            Outcome::Done => None,
            Outcome::Retry(e) | Outcome::Terminal(e) => Some(e),
        }
    }

    /// The failure's text (ESO's), if any.
    pub fn text(&self) -> Option<String> {
        self.error().map(ToString::to_string)
    }
}

/// The result of [`plan`].
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Outcome.
    pub outcome: Outcome,
    /// Names of Secrets carrying our created-by label to delete first (Owner only).
    pub delete_orphans: Vec<String>,
    /// The target write.
    pub write: SecretWrite,
    /// Events to record now.
    pub events: Vec<EventRec>,
    /// Event to record after `write` succeeded.
    pub write_event: Option<EventRec>,
    /// The new status (valid when the writes succeed).
    pub status: EsStatus,
    /// When to requeue on success.
    pub requeue: Requeue,
}

impl Plan {
    /// Whether `status` differs from the status the plan started from.
    pub fn status_changed(&self, before: &EsStatus) -> bool {
        &self.status != before
    }
}

/// Marks the ExternalSecret failed (ESO `markAsFailed`): Ready=False SecretSyncedError with the
/// fixed `msg`, a Warning `UpdateFailed` event with the error text.
pub fn mark_failed(
    es: &EsView,
    status: &EsStatus,
    message: &str,
    error: &str,
    now: DateTime<Utc>,
) -> (EsStatus, EventRec) {
    mark_failed_as(es, status, reason::SECRET_SYNCED_ERROR, message, error, now)
}

/// [`mark_failed`] with another Ready reason (`SecretImmutable`, `SecretOwnedByOther`).
pub fn mark_failed_as(
    es: &EsView,
    status: &EsStatus,
    reason_: &str,
    message: &str,
    error: &str,
    now: DateTime<Utc>,
) -> (EsStatus, EventRec) {
    let mut st = status.clone();
    set_condition(
        &mut st,
        Condition {
            type_: CONDITION_READY.to_string(),
            status: "False".to_string(),
            reason: reason_.to_string(),
            message: message.to_string(),
            last_transition_time: None,
        },
        now,
    );
    st.observed_generation = Some(es.generation);
    (st, EventRec::warning(event::UPDATE_FAILED, error))
}

fn mark_done(
    es: &EsView,
    status: &mut EsStatus,
    start: DateTime<Utc>,
    reason_: &str,
    message: &str,
) {
    set_condition(
        status,
        Condition {
            type_: CONDITION_READY.to_string(),
            status: "True".to_string(),
            reason: reason_.to_string(),
            message: message.to_string(),
            last_transition_time: None,
        },
        start,
    );
    status.refresh_time = Some(start);
    status.synced_resource_version = es.resource_version();
    status.observed_generation = Some(es.generation);
}

fn failed_plan(
    es: &EsView,
    reason_: &str,
    message: &str,
    error: SyncError,
    now: DateTime<Utc>,
    terminal: bool,
    mut events: Vec<EventRec>,
) -> Plan {
    let (status, ev) = mark_failed_as(es, &es.status, reason_, message, &error.to_string(), now);
    events.push(ev);
    Plan {
        outcome: if terminal {
            Outcome::Terminal(error)
        } else {
            Outcome::Retry(error)
        },
        delete_orphans: Vec::new(),
        write: SecretWrite::None,
        events,
        write_event: None,
        status,
        requeue: Requeue::Never,
    }
}

/// Keys of a `managedFields` entry for our field manager under `f:<section>` (ESO
/// `getManagedFieldKeys`).
pub fn managed_keys(secret: &Secret, field_manager: &str, path: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for mf in secret.metadata.managed_fields.iter().flatten() {
        if mf.manager.as_deref() != Some(field_manager) {
            continue;
        }
        let Some(fields) = &mf.fields_v1 else {
            continue;
        };
        let mut node = &fields.0;
        let mut ok = true;
        for p in path {
            match node.get(format!("f:{p}")) {
                Some(n) => node = n,
                None => {
                    ok = false;
                    break;
                }
            }
        }
        if !ok {
            continue;
        }
        if let Some(obj) = node.as_object() {
            for k in obj.keys() {
                if k == "." {
                    continue;
                }
                out.push(k.strip_prefix("f:").unwrap_or(k).to_string());
            }
        }
    }
    out
}

fn owner_ref(es: &EsView) -> OwnerReference {
    OwnerReference {
        api_version: ES_API_VERSION.to_string(),
        kind: ES_KIND.to_string(),
        name: es.name.clone(),
        uid: es.uid.clone(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("")
}

fn is_es_ref(r: &OwnerReference) -> bool {
    group_of(&r.api_version) == "external-secrets.io" && r.kind == ES_KIND
}

/// ESO `mutationFunc` over `secret` (a fresh Secret or a copy of the existing one).
fn mutate(
    es: &EsView,
    secret: &mut Secret,
    is_new: bool,
    data: &DataMap,
    renderer: &dyn Renderer,
) -> Result<(), MutateError> {
    // ownership checks
    let refs = secret
        .metadata
        .owner_references
        .get_or_insert_with(Vec::new);
    let controller = refs.iter().find(|r| r.controller == Some(true)).cloned();
    let owner_is_es = controller.as_ref().is_some_and(is_es_ref);
    let owner_is_current = owner_is_es && controller.as_ref().is_some_and(|c| c.name == es.name);
    if owner_is_es && !owner_is_current {
        let owner = controller.map(|c| c.name).unwrap_or_default();
        return Err(MutateError::IsOwned { owner });
    }
    if es.creation == CreationPolicy::Owner {
        if let Some(c) = controller.as_ref().filter(|_| !owner_is_current) {
            return Err(MutateError::SetControllerRef {
                namespace: es.namespace.clone(),
                target: es.target_name.clone(),
                kind: c.kind.clone(),
                owner: c.name.clone(),
            });
        }
        let ours = owner_ref(es);
        if let Some(existing) = refs.iter_mut().find(|r| is_es_ref(r) && r.name == es.name) {
            *existing = ours;
        } else {
            refs.push(ours);
        }
    } else if owner_is_current {
        refs.retain(|r| !(is_es_ref(r) && r.name == es.name));
    }
    if refs.is_empty() {
        secret.metadata.owner_references = None;
    }

    let fm = es.field_manager();
    let managed_data = managed_keys(secret, &fm, &["data"]);
    let managed_labels = managed_keys(secret, &fm, &["metadata", "labels"]);
    let managed_annotations = managed_keys(secret, &fm, &["metadata", "annotations"]);
    let mut labels = secret.metadata.labels.take().unwrap_or_default();
    let mut annotations = secret.metadata.annotations.take().unwrap_or_default();
    let mut sdata: DataMap = secret_data(secret);
    let existing_immutable = !is_new && secret.immutable == Some(true);

    if is_new || !existing_immutable {
        for k in managed_data {
            sdata.remove(&k);
        }
        // applyTemplate
        for k in managed_labels {
            labels.remove(&k);
        }
        for k in managed_annotations {
            annotations.remove(&k);
        }
        match &es.template {
            None => {
                labels.extend(es.labels.clone());
                annotations.extend(es.annotations.clone());
            }
            Some(t) => {
                labels.extend(t.labels.clone());
                annotations.extend(t.annotations.clone());
                if !t.finalizers.is_empty() {
                    let f = secret.metadata.finalizers.get_or_insert_with(Vec::new);
                    for fin in &t.finalizers {
                        if !f.contains(fin) {
                            f.push(fin.clone());
                        }
                    }
                }
            }
        }
        if !matches!(
            es.creation,
            CreationPolicy::Merge | CreationPolicy::CreateOrMerge
        ) {
            sdata.clear();
        }
        match &es.template {
            None => sdata.extend(data.clone()),
            Some(t) => {
                if !t.engine_version.is_empty() && t.engine_version != "v2" {
                    return Err(MutateError::Template(
                        "unsupported template engine version".to_string(),
                    ));
                }
                if !t.type_.is_empty() {
                    secret.type_ = Some(t.type_.clone());
                }
                if t.merge_policy_merge || !t.has_data_templates {
                    sdata.extend(data.clone());
                }
                let rendered = renderer
                    .render(data)
                    .map_err(|e| MutateError::Template(e.to_string()))?;
                sdata.extend(rendered.data);
                labels.extend(rendered.labels);
                annotations.extend(rendered.annotations);
            }
        }
    }

    if es.immutable {
        secret.immutable = Some(true);
    }
    if es.creation == CreationPolicy::Owner {
        labels.insert(
            LABEL_OWNER.to_string(),
            hash::created_by_label(&es.namespace, &es.name),
        );
    } else {
        labels.remove(LABEL_OWNER);
    }
    labels.insert(LABEL_MANAGED.to_string(), LABEL_MANAGED_VALUE.to_string());
    annotations.insert(ANNOTATION_DATA_HASH.to_string(), hash::data_hash(&sdata));
    secret.metadata.labels = Some(labels);
    secret.metadata.annotations = Some(annotations);
    secret.data = Some(sdata.into_iter().map(|(k, v)| (k, ByteString(v))).collect());
    Ok(())
}

/// Normalised comparison (apimachinery `Semantic.DeepEqual` treats nil and empty maps alike).
fn normalized(s: &Secret) -> Secret {
    let mut s = s.clone();
    fn none_if_empty<T: Default + PartialEq>(o: &mut Option<T>) {
        if o.as_ref().is_some_and(|v| *v == T::default()) {
            *o = None;
        }
    }
    none_if_empty(&mut s.data);
    none_if_empty(&mut s.string_data);
    none_if_empty(&mut s.metadata.labels);
    none_if_empty(&mut s.metadata.annotations);
    none_if_empty(&mut s.metadata.owner_references);
    none_if_empty(&mut s.metadata.finalizers);
    s
}

fn secrets_equal(a: &Secret, b: &Secret) -> bool {
    normalized(a) == normalized(b)
}

/// Inputs of [`plan`].
pub struct PlanInput<'a> {
    /// The ExternalSecret.
    pub es: &'a EsView,
    /// Provider data, or why fetching it failed.
    pub provider: Result<Assembled, SyncError>,
    /// The existing target Secret (full object from a direct GET).
    pub existing: Option<&'a Secret>,
    /// Names of Secrets in the namespace carrying our created-by label.
    pub owned_secret_names: &'a [String],
    /// The template renderer.
    pub renderer: &'a dyn Renderer,
    /// Reconcile start (becomes refreshTime).
    pub start: DateTime<Utc>,
    /// Jitter added to the periodic requeue.
    pub jitter: Duration,
}

/// Computes the reconcile plan (ESO §5.1 steps 7–12).
pub fn plan(input: PlanInput<'_>) -> Plan {
    let es = input.es;
    let now = input.start;
    let assembled = match input.provider {
        Ok(a) => a,
        Err(e) => {
            return failed_plan(
                es,
                reason::SECRET_SYNCED_ERROR,
                msg::ERR_GET_DATA,
                e,
                now,
                false,
                Vec::new(),
            );
        }
    };
    let events: Vec<EventRec> = assembled
        .missing
        .iter()
        .map(|m| EventRec::normal(event::MISSING_PROVIDER_SECRET, m.message.clone()))
        .collect();
    let data = assembled.data;
    let mut status = es.status.clone();
    let requeue = requeue_for(es, Some(now), now, input.jitter);

    if data.is_empty() {
        match es.deletion {
            DeletionPolicy::Delete => {
                if es.creation != CreationPolicy::Owner {
                    let err = SyncError::DeleteNotOwner {
                        target: es.target_name.clone(),
                        policy: creation_policy_name(es.creation),
                    };
                    return failed_plan(
                        es,
                        reason::SECRET_SYNCED_ERROR,
                        msg::ERR_DELETE,
                        err,
                        now,
                        true,
                        events,
                    );
                }
                mark_done(es, &mut status, now, reason::SECRET_DELETED, msg::DELETED);
                let (write, write_event) = match input.existing {
                    Some(_) => (
                        SecretWrite::Delete(es.target_name.clone()),
                        Some(EventRec::normal(event::DELETED, event::MSG_DELETED)),
                    ),
                    None => (SecretWrite::None, None),
                };
                return Plan {
                    outcome: Outcome::Done,
                    delete_orphans: Vec::new(),
                    write,
                    events,
                    write_event,
                    status,
                    requeue,
                };
            }
            DeletionPolicy::Retain => {
                mark_done(
                    es,
                    &mut status,
                    now,
                    reason::SECRET_SYNCED,
                    msg::SYNCED_RETAIN,
                );
                return Plan {
                    outcome: Outcome::Done,
                    delete_orphans: Vec::new(),
                    write: SecretWrite::None,
                    events,
                    write_event: None,
                    status,
                    requeue,
                };
            }
            DeletionPolicy::Merge => {}
        }
    }

    let mut delete_orphans = Vec::new();
    let (write, write_event) = match (es.creation, input.existing) {
        (CreationPolicy::None, _) => (SecretWrite::None, None),
        (CreationPolicy::Merge, None) => {
            mark_done(es, &mut status, now, reason::SECRET_MISSING, msg::MISSING);
            return Plan {
                outcome: Outcome::Done,
                delete_orphans,
                write: SecretWrite::None,
                events,
                write_event: None,
                status,
                requeue,
            };
        }
        (_, None) => {
            if es.creation == CreationPolicy::Owner {
                delete_orphans = orphans(es, input.owned_secret_names);
            }
            let mut secret = Secret {
                metadata: ObjectMeta {
                    name: Some(es.target_name.clone()),
                    namespace: Some(es.namespace.clone()),
                    ..Default::default()
                },
                ..Default::default()
            };
            match mutate(es, &mut secret, true, &data, input.renderer) {
                Ok(()) => {}
                Err(e) => return mutate_failure(es, e, None, now, events),
            }
            status.binding_name = es.target_name.clone();
            (
                SecretWrite::Create(Box::new(secret)),
                Some(EventRec::normal(event::CREATED, event::MSG_CREATED)),
            )
        }
        (_, Some(existing)) => {
            if es.creation == CreationPolicy::Owner {
                delete_orphans = orphans(es, input.owned_secret_names);
            }
            status.binding_name = es.target_name.clone();
            let mut updated = existing.clone();
            if let Err(e) = mutate(es, &mut updated, false, &data, input.renderer) {
                return mutate_failure(es, e, Some(&es.target_name), now, events);
            }
            if secrets_equal(existing, &updated) {
                (SecretWrite::None, None)
            } else if existing.immutable == Some(true) {
                let mut meta_only = existing.clone();
                meta_only.metadata = updated.metadata.clone();
                let data_changed = !secrets_equal(&meta_only, &updated);
                if data_changed {
                    let err = SyncError::Immutable {
                        target: es.target_name.clone(),
                    };
                    let mut p = failed_plan(
                        es,
                        reason::SECRET_IMMUTABLE,
                        &detailed(msg::ERR_IMMUTABLE, &err.to_string()),
                        err,
                        now,
                        true,
                        events,
                    );
                    // ESO still writes the metadata before failing.
                    if !secrets_equal(&meta_only, existing) {
                        p.write = SecretWrite::Update(Box::new(meta_only));
                    }
                    p.delete_orphans = delete_orphans;
                    return p;
                }
                (
                    SecretWrite::Update(Box::new(meta_only)),
                    Some(EventRec::normal(event::UPDATED, event::MSG_UPDATED)),
                )
            } else {
                (
                    SecretWrite::Update(Box::new(updated)),
                    Some(EventRec::normal(event::UPDATED, event::MSG_UPDATED)),
                )
            }
        }
    };

    mark_done(es, &mut status, now, reason::SECRET_SYNCED, msg::SYNCED);
    Plan {
        outcome: Outcome::Done,
        delete_orphans,
        write,
        events,
        write_event,
        status,
        requeue,
    }
}

fn orphans(es: &EsView, owned: &[String]) -> Vec<String> {
    owned
        .iter()
        .filter(|n| **n != es.target_name)
        .cloned()
        .collect()
}

fn mutate_failure(
    es: &EsView,
    e: MutateError,
    update_of: Option<&str>,
    now: DateTime<Utc>,
    events: Vec<EventRec>,
) -> Plan {
    let (reason_, base, terminal) = match &e {
        MutateError::IsOwned { .. } => {
            (reason::SECRET_OWNED_BY_OTHER, Some(msg::ERR_IS_OWNED), true)
        }
        MutateError::SetControllerRef { .. } => (
            reason::SECRET_OWNED_BY_OTHER,
            Some(msg::ERR_BECOME_OWNER),
            true,
        ),
        MutateError::Template(_) => (reason::SECRET_SYNCED_ERROR, None, false),
    };
    let err = match update_of {
        Some(target) => SyncError::MutateExisting {
            target: target.to_string(),
            source: e,
        },
        None => SyncError::Mutate(e),
    };
    let message = match base {
        Some(b) => detailed(b, &err.to_string()),
        None => msg::ERR_UPDATE.to_string(),
    };
    failed_plan(es, reason_, &message, err, now, terminal, events)
}

/// What failed when writing the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteKind {
    /// Create.
    Create,
    /// Update (replace).
    Update,
    /// Delete (deletionPolicy Delete).
    Delete,
    /// Deleting orphaned Secrets.
    DeleteOrphans,
    /// The metadata-only write of an immutable target whose data would change.
    Immutable,
}

/// The error of a failed Kubernetes API write: `api_message` is the API server's message;
/// `previous` is the plan's own failure when there is one (the metadata-only write of an
/// immutable target), which the text keeps in front (`<previous>; <API error>`).
pub fn write_error(
    es: &EsView,
    kind: WriteKind,
    api_message: &str,
    previous: Option<&SyncError>,
) -> SyncError {
    match (kind, previous) {
        (WriteKind::Update, _) => SyncError::Update {
            target: es.target_name.clone(),
            message: api_message.to_string(),
        },
        (WriteKind::Immutable, Some(p)) => SyncError::ImmutableWrite {
            previous: Box::new(p.clone()),
            message: api_message.to_string(),
        },
        _ => SyncError::Write {
            message: api_message.to_string(),
        },
    }
}

/// Status after a failed Kubernetes API write (ESO handles write errors after the plan):
/// Ready=False with `<base>: <error>` (ESO v2.10+), the Warning event carrying the error
/// text. The caller requeues with backoff (conflicts are requeued at once, without a status).
pub fn write_failed(
    es: &EsView,
    status_before: &EsStatus,
    kind: WriteKind,
    error: &SyncError,
    now: DateTime<Utc>,
) -> (EsStatus, EventRec) {
    let (reason_, base) = match kind {
        WriteKind::Create | WriteKind::Update => (reason::SECRET_SYNCED_ERROR, msg::ERR_UPDATE),
        WriteKind::Delete => (reason::SECRET_SYNCED_ERROR, msg::ERR_DELETE),
        WriteKind::DeleteOrphans => (reason::SECRET_SYNCED_ERROR, msg::ERR_DELETE_ORPHANED),
        WriteKind::Immutable => (reason::SECRET_IMMUTABLE, msg::ERR_IMMUTABLE),
    };
    let text = error.to_string();
    mark_failed_as(
        es,
        status_before,
        reason_,
        &detailed(base, &text),
        &text,
        now,
    )
}

/// The Normal event recorded for each orphaned Secret deleted.
pub fn orphan_deleted_event() -> EventRec {
    EventRec::normal(event::DELETED, event::MSG_DELETED_ORPHANED)
}

/// Finalizer step: delete the target when the ExternalSecret goes away only if
/// `deletionPolicy=Delete` and the Secret is controlled by this ExternalSecret.
pub fn delete_target_on_es_deletion(es: &EsView, existing: Option<&Secret>) -> bool {
    let Some(s) = existing else { return false };
    es.deletion == DeletionPolicy::Delete
        && s.metadata
            .owner_references
            .iter()
            .flatten()
            .any(|r| r.controller == Some(true) && is_es_ref(r) && r.name == es.name)
}

/// One action of a reconcile. The IO shell executes the [`Steps`] in order and stops at the first
/// failure; what a failed write means for the status is [`write_failure`]'s decision.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Add [`FINALIZER`] to the ExternalSecret (merge patch).
    AddFinalizer,
    /// Remove [`FINALIZER`] (merge patch carrying the resourceVersion).
    RemoveFinalizer,
    /// Delete the target Secret (already gone is fine).
    DeleteTarget,
    /// Forget the deleted ExternalSecret: its metric series and its remembered status.
    Forget,
    /// Record an event on the ExternalSecret.
    Event(EventRec),
    /// Delete a Secret orphaned by a target rename (already gone is fine); a deletion records
    /// [`orphan_deleted_event`].
    DeleteOrphan(String),
    /// Write the target Secret.
    Write(SecretWrite),
    /// Restart the opted-in workloads using the target whose data hash is now this one.
    Rollout(String),
    /// Write the ExternalSecret's status.
    Status(EsStatus),
    /// Set the `externalsecret_status_condition` Ready pair to this status (`True`/`False`).
    ReadyMetric(String),
}

impl Step {
    /// Whether a conflict on this step requeues at once (the next reconcile sees the newer
    /// object) instead of failing with backoff.
    pub fn requeue_on_conflict(&self) -> bool {
        matches!(self, Step::Write(_) | Step::Status(_))
    }
}

/// How a reconcile ends once its steps ran.
#[derive(Debug, Clone, PartialEq)]
pub enum End {
    /// Success: requeue as given; `wrote` is true when the target was written.
    Done {
        /// When to look again.
        requeue: Requeue,
        /// The target was written.
        wrote: bool,
    },
    /// Nothing more to do until the ExternalSecret changes (the text says why, for the log).
    Await(&'static str),
    /// A failure that must not requeue (counted in `externalsecret_sync_calls_error`).
    Terminal(SyncError),
    /// A refused generic target (terminal, not counted as a sync error).
    Refused(SyncError),
    /// A failure retried with backoff.
    Retry(SyncError),
}

/// Ordered actions and the end of a reconcile (or of its first part, see [`Admission`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Steps {
    /// Executed in order.
    pub steps: Vec<Step>,
    /// How the reconcile ends after the steps.
    pub end: End,
}

impl Steps {
    fn end(end: End) -> Self {
        Steps {
            steps: Vec::new(),
            end,
        }
    }
}

/// What the controller settings and the store lookup say about an ExternalSecret.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gates {
    /// A referenced store belongs to another controller class.
    pub foreign_class: bool,
    /// `--enable-cluster-store-reconciler`.
    pub cluster_stores: bool,
    /// `--unsafe-allow-generic-targets`.
    pub allow_generic_targets: bool,
}

/// The first decision of a live ExternalSecret's reconcile.
#[derive(Debug, Clone, PartialEq)]
pub enum Admission {
    /// Run these steps, then read the target and [`decide`].
    Proceed(Vec<Step>),
    /// Run these steps and end.
    Stop(Steps),
}

/// Admits a live ExternalSecret: another controller class's ExternalSecret is skipped before the
/// finalizer and any status write; otherwise the finalizer is added; an ExternalSecret on a
/// ClusterSecretStore is then skipped when that reconciler is disabled, and a generic target is
/// refused (Ready=False, see [`generic_target_failed`]).
pub fn admit(es: &EsView, gates: &Gates, now: DateTime<Utc>) -> Admission {
    if gates.foreign_class {
        return Admission::Stop(Steps::end(End::Await(
            "skipping: store of another controller class",
        )));
    }
    let mut steps = Vec::new();
    if !es.has_finalizer {
        steps.push(Step::AddFinalizer);
    }
    if !gates.cluster_stores && es.uses_cluster_store {
        return Admission::Stop(Steps {
            steps,
            end: End::Await("skipping: ClusterSecretStore reconciler disabled"),
        });
    }
    if let Some(err) = generic_target_error(es.manifest.as_ref(), gates.allow_generic_targets) {
        let refused = generic_target_failed(es, &err, now).steps(es);
        steps.extend(refused.steps);
        return Admission::Stop(Steps {
            steps,
            end: End::Refused(SyncError::GenericTarget(err)),
        });
    }
    Admission::Proceed(steps)
}

/// Whether the deletion of `es` needs the target Secret (to apply the deletionPolicy).
pub fn deletion_reads_target(es: &EsView) -> bool {
    es.has_finalizer
}

/// The deletion of an ExternalSecret: honour deletionPolicy (see
/// [`delete_target_on_es_deletion`]), drop the finalizer, forget the object.
pub fn deletion(es: &EsView, existing: Option<&Secret>) -> Steps {
    let mut steps = Vec::new();
    if es.has_finalizer {
        if delete_target_on_es_deletion(es, existing) {
            steps.push(Step::DeleteTarget);
        }
        steps.push(Step::RemoveFinalizer);
    }
    steps.push(Step::Forget);
    Steps {
        steps,
        end: End::Await("deleted"),
    }
}

/// A refresh that is not due ([`Decision::Skip`]): write the status if it must catch up, and
/// requeue.
pub fn refresh_skipped(requeue: Requeue, status: Option<EsStatus>) -> Steps {
    Steps {
        steps: status.into_iter().map(Step::Status).collect(),
        end: End::Done {
            requeue,
            wrote: false,
        },
    }
}

/// A store found foreign while fetching: skip silently.
pub fn foreign_store() -> Steps {
    Steps::end(End::Await("skipping: store of another controller class"))
}

/// The created-by label whose Secrets may be orphans of `es` (creationPolicy Owner only).
pub fn owner_label(es: &EsView) -> Option<String> {
    (es.creation == CreationPolicy::Owner).then(|| hash::created_by_label(&es.namespace, &es.name))
}

impl Plan {
    /// The ordered actions of this plan: its events; unless fetching failed, the orphan deletes,
    /// the target write, the write event and the rollout; the status when it changed and the
    /// Ready metric.
    pub fn steps(&self, es: &EsView) -> Steps {
        let mut steps: Vec<Step> = self.events.iter().cloned().map(Step::Event).collect();
        let fetch_failed =
            matches!(self.outcome, Outcome::Retry(_)) && self.write == SecretWrite::None;
        if !fetch_failed {
            steps.extend(self.delete_orphans.iter().cloned().map(Step::DeleteOrphan));
            if self.write != SecretWrite::None {
                steps.push(Step::Write(self.write.clone()));
            }
            steps.extend(self.write_event.iter().cloned().map(Step::Event));
            if let SecretWrite::Create(s) | SecretWrite::Update(s) = &self.write
                && let Some(h) = s
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(ANNOTATION_DATA_HASH))
            {
                steps.push(Step::Rollout(h.clone()));
            }
        }
        steps.extend(status_steps(es, &self.status));
        let end = match &self.outcome {
            Outcome::Done => End::Done {
                requeue: self.requeue,
                wrote: self.write != SecretWrite::None,
            },
            Outcome::Terminal(e) => End::Terminal(e.clone()),
            Outcome::Retry(e) => End::Retry(e.clone()),
        };
        Steps { steps, end }
    }
}

fn status_steps(es: &EsView, status: &EsStatus) -> Vec<Step> {
    let mut steps = Vec::new();
    if *status != es.status {
        steps.push(Step::Status(status.clone()));
    }
    if let Some(c) = status.ready() {
        steps.push(Step::ReadyMetric(c.status.clone()));
    }
    steps
}

/// What follows when `failed` (a [`Step::DeleteOrphan`] or [`Step::Write`] of a plan ending in
/// `end`) fails at the Kubernetes API with `api_message`: Ready=False with the failure (see
/// [`write_failed`]), a Warning event, and a retry. `None` for other steps: their failure is the
/// reconcile's error.
pub fn write_failure(
    es: &EsView,
    failed: &Step,
    end: &End,
    api_message: &str,
    now: DateTime<Utc>,
) -> Option<Steps> {
    let (kind, previous) = match (failed, end) {
        (Step::DeleteOrphan(_), _) => (WriteKind::DeleteOrphans, None),
        (Step::Write(_), End::Terminal(t)) => (WriteKind::Immutable, Some(t)),
        (Step::Write(SecretWrite::Delete(_)), _) => (WriteKind::Delete, None),
        (Step::Write(SecretWrite::Create(_)), _) => (WriteKind::Create, None),
        (Step::Write(_), _) => (WriteKind::Update, None),
        _ => return None,
    };
    let err = write_error(es, kind, api_message, previous);
    let (status, event) = write_failed(es, &es.status, kind, &err, now);
    let steps = match kind {
        WriteKind::DeleteOrphans => vec![Step::Event(event), Step::Status(status)],
        _ => {
            let mut s = vec![Step::Event(event)];
            s.extend(status_steps(es, &status));
            s
        }
    };
    Some(Steps {
        steps,
        end: End::Retry(err),
    })
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
