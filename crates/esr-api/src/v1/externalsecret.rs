//! `ExternalSecret` (external-secrets.io/v1): reads data from a store or generator and writes it into a
//! Kubernetes Secret (or another object).

// kube-derive takes one `printcolumn(...)`/`category = ...` attribute per entry, which clippy
// mistakes for duplicates.
#![allow(clippy::duplicated_attributes)]

use crate::opaque::patterns::{DNS_SUBDOMAIN, SCHEDULE, SECRET_KEY};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Desired state of an ExternalSecret.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "external-secrets.io",
    version = "v1",
    kind = "ExternalSecret",
    plural = "externalsecrets",
    singular = "externalsecret",
    namespaced,
    status = "ExternalSecretStatus",
    shortname = "es",
    category = "external-secrets",
    label("external-secrets.io/component", "controller"),
    derive = "PartialEq",
    derive = "Default",
    doc = "ExternalSecret fetches values from a SecretStore, ClusterSecretStore or generator and keeps a Kubernetes Secret (the target) in sync with them.",
    printcolumn(
        name = "StoreType",
        type_ = "string",
        json_path = ".spec.secretStoreRef.kind"
    ),
    printcolumn(
        name = "Store",
        type_ = "string",
        json_path = ".spec.secretStoreRef.name"
    ),
    printcolumn(
        name = "Refresh Interval",
        type_ = "string",
        json_path = ".spec.refreshInterval"
    ),
    printcolumn(
        name = "Status",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].reason"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(name = "Last Sync", type_ = "date", json_path = ".status.refreshTime"),
    selectable = ".spec.secretStoreRef.name",
    selectable = ".spec.secretStoreRef.kind",
    selectable = ".spec.target.name",
    selectable = ".spec.refreshInterval"
)]
#[serde(rename_all = "camelCase")]
pub struct ExternalSecretSpec {
    /// Default store used by `data` and `dataFrom` entries that do not name their own `sourceRef`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_store_ref: Option<SecretStoreRef>,
    /// The object esr writes. Defaults to a Secret named like the ExternalSecret, created and owned
    /// by it, and kept when the provider returns no data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = {"creationPolicy": "Owner", "deletionPolicy": "Retain"}))]
    pub target: Option<ExternalSecretTarget>,
    /// When the data is fetched again: `Periodic` (every `refreshInterval`, the default when empty),
    /// `OnChange` (only when the ExternalSecret's spec or metadata changes) or `CreatedOnce`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_policy: Option<RefreshPolicy>,
    /// Time between refreshes as a Go duration string (for example `1h0m0s`, `15m`). `0s` syncs
    /// only once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "1h0m0s"))]
    pub refresh_interval: Option<String>,
    /// Time windows during which periodic refreshes are allowed (or denied).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_windows: Option<SyncWindows>,
    /// Individual keys: each entry fetches one remote value into one key of the target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Vec<ExternalSecretData>>,
    /// Bulk sources: each entry yields a map of keys (a whole remote secret, a search result, or a
    /// generator's output). Entries are merged in order; `data` keys win over them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_from: Option<Vec<ExternalSecretDataFromRemoteRef>>,
}

/// Kind of store an ExternalSecret refers to.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[schemars(transform = crate::opaque::drop_description)]
pub enum SecretStoreKind {
    /// A namespaced SecretStore in the ExternalSecret's namespace (the default).
    #[default]
    SecretStore,
    /// A cluster-scoped ClusterSecretStore.
    ClusterSecretStore,
}

/// Reference to a SecretStore or ClusterSecretStore.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretStoreRef {
    /// Name of the store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), pattern(DNS_SUBDOMAIN))]
    pub name: Option<String>,
    /// Kind of the store; empty means SecretStore.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<SecretStoreKind>,
}

/// How the data is refreshed.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[schemars(transform = crate::opaque::drop_description)]
pub enum RefreshPolicy {
    /// Sync once when the ExternalSecret is created, never again.
    CreatedOnce,
    /// Sync every `refreshInterval`.
    Periodic,
    /// Sync only when the ExternalSecret's generation, labels or annotations change.
    OnChange,
}

/// Whether sync windows allow or deny refreshes.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(transform = crate::opaque::drop_description)]
pub enum SyncWindowKind {
    /// Periodic refreshes only happen inside a window.
    #[serde(rename = "allow")]
    Allow,
    /// Periodic refreshes never happen inside a window.
    #[serde(rename = "deny")]
    Deny,
}

/// Time windows that gate periodic refreshes.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SyncWindows {
    /// `allow` or `deny`.
    pub kind: SyncWindowKind,
    /// The windows; a window is open from each firing of its schedule for its duration.
    #[schemars(length(min = 1))]
    pub windows: Vec<SyncWindow>,
}

/// One recurring time window.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SyncWindow {
    /// Start of each occurrence: a 5-field cron expression in UTC, a descriptor such as `@daily`, or
    /// `@every <duration>`.
    #[schemars(length(min = 1), pattern(SCHEDULE))]
    pub schedule: String,
    /// How long each occurrence stays open, as a Go duration string (for example `2h`).
    pub duration: String,
}

/// The object an ExternalSecret writes and how it is owned.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExternalSecretTarget {
    /// Name of the target object; defaults to the ExternalSecret's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), pattern(DNS_SUBDOMAIN))]
    pub name: Option<String>,
    /// Whether the target is created and who owns it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Owner"))]
    pub creation_policy: Option<CreationPolicy>,
    /// What happens to the target when the provider returns no data at all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Retain"))]
    pub deletion_policy: Option<DeletionPolicy>,
    /// Template used to build the target from the fetched data.
    // Boxed, as `manifest` below: most ExternalSecrets have neither, and every cached
    // ExternalSecret would otherwise carry their room inline (about 210 bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<Box<ExternalSecretTemplate>>,
    /// Write a non-Secret object (for example a ConfigMap) instead of a Secret. Needs the controller
    /// flag that allows generic targets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<Box<ManifestReference>>,
    /// Mark the Secret immutable; its data is then never changed after creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub immutable: Option<bool>,
}

/// Kind of a generic (non-Secret) target object.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManifestReference {
    /// API version of the target, for example `v1`.
    #[schemars(length(min = 1))]
    pub api_version: String,
    /// Kind of the target, for example `ConfigMap`.
    #[schemars(length(min = 1))]
    pub kind: String,
}

/// Whether and how the target is created.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[schemars(transform = crate::opaque::drop_description)]
pub enum CreationPolicy {
    /// Create or update the target and make this ExternalSecret its controller owner.
    #[default]
    Owner,
    /// Create or update the target without an owner reference.
    Orphan,
    /// Never create the target; merge the keys into an existing one.
    Merge,
    /// Never write the target.
    None,
    /// Create the target if missing (no owner), otherwise merge into it keeping other keys.
    CreateOrMerge,
}

/// What happens when the provider returns no data.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[schemars(transform = crate::opaque::drop_description)]
pub enum DeletionPolicy {
    /// Delete the target (only with creationPolicy Owner); missing remote keys are skipped.
    Delete,
    /// Remove the missing keys from the target but keep it.
    Merge,
    /// Keep the target as it is; a missing remote key is an error.
    #[default]
    Retain,
}

/// Template used to render the target's data, type and metadata.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExternalSecretTemplate {
    /// Secret type (for example `kubernetes.io/tls`); the existing type is kept when empty.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    /// Template engine version; only `v2` exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "v2"))]
    pub engine_version: Option<TemplateEngineVersion>,
    /// Labels, annotations and finalizers for the target; label and annotation values are templates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ExternalSecretTemplateMetadata>,
    /// `Replace` renders only the templated keys; `Merge` also keeps the raw fetched keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Replace"))]
    pub merge_policy: Option<TemplateMergePolicy>,
    /// Go templates, one per target key, rendered with the fetched data as values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<BTreeMap<String, String>>,
    /// Templates read from ConfigMaps, Secrets or given literally.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_from: Option<Vec<TemplateFrom>>,
}

/// Template engine version.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[schemars(transform = crate::opaque::drop_description)]
pub enum TemplateEngineVersion {
    /// Go text/template with the sprig function library.
    #[default]
    #[serde(rename = "v2")]
    V2,
}

/// How templated keys combine with the fetched keys.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[schemars(transform = crate::opaque::drop_description)]
pub enum TemplateMergePolicy {
    /// Only templated keys end up in the target (fetched keys too if no data template exists).
    #[default]
    Replace,
    /// Fetched keys are copied first, then templates are applied on top.
    Merge,
}

/// Metadata applied to the target.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExternalSecretTemplateMetadata {
    /// Annotations (values are templates).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
    /// Labels (values are templates).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    /// Finalizers added to the target (never removed by the controller).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finalizers: Option<Vec<String>>,
}

/// One source of templates.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateFrom {
    /// Templates stored in a ConfigMap in the ExternalSecret's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<TemplateRef>,
    /// Templates stored in a Secret in the ExternalSecret's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<TemplateRef>,
    /// Part of the target the rendered output goes to: `Data`, `Annotations` or `Labels`
    /// (case-insensitive) for Secret targets, or a field path for generic targets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Data"))]
    pub target: Option<String>,
    /// An inline template whose output is a YAML map merged into the target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub literal: Option<String>,
    /// How values of the referenced Secret are decoded before templating.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values_decoding_strategy: Option<DecodingStrategy>,
}

/// A ConfigMap or Secret holding templates.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateRef {
    /// Name of the ConfigMap or Secret.
    #[schemars(length(min = 1, max = 253), pattern(DNS_SUBDOMAIN))]
    pub name: String,
    /// Keys to use as templates.
    pub items: Vec<TemplateRefItem>,
}

/// One key of a template source.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateRefItem {
    /// Key of the ConfigMap or Secret.
    #[schemars(length(min = 1, max = 253), pattern(SECRET_KEY))]
    pub key: String,
    /// `Values`: the value is a template for the key of the same name. `KeysAndValues`: the whole
    /// value is a template producing a YAML map of keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Values"))]
    pub template_as: Option<TemplateScope>,
}

/// Scope of a template item.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[schemars(transform = crate::opaque::drop_description)]
pub enum TemplateScope {
    /// Render the value as the template of one key.
    #[default]
    Values,
    /// Render the value into a YAML map of keys and values.
    KeysAndValues,
}

/// Well-known values of `templateFrom[].target` for Secret targets.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[schemars(transform = crate::opaque::drop_description)]
pub enum TemplateTarget {
    /// The Secret's data.
    #[default]
    Data,
    /// The Secret's annotations.
    Annotations,
    /// The Secret's labels.
    Labels,
}

impl TemplateTarget {
    /// Parses a `templateFrom[].target` value the way ESO does for Secret targets: empty means
    /// `Data`, and the comparison ignores ASCII case. Returns `None` for any other value.
    pub fn parse(value: &str) -> Option<Self> {
        if value.is_empty() || value.eq_ignore_ascii_case("Data") {
            Some(Self::Data)
        } else if value.eq_ignore_ascii_case("Annotations") {
            Some(Self::Annotations)
        } else if value.eq_ignore_ascii_case("Labels") {
            Some(Self::Labels)
        } else {
            None
        }
    }
}

/// One key of the target, read from one remote value.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExternalSecretData {
    /// Key in the target Secret.
    #[schemars(length(min = 1, max = 253), pattern(SECRET_KEY))]
    pub secret_key: String,
    /// The remote value to read.
    pub remote_ref: ExternalSecretDataRemoteRef,
    /// Store to read from instead of `spec.secretStoreRef`.
    // Boxed: rarely set, and its room would otherwise be in every cached entry of `spec.data`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_ref: Option<Box<SourceRef>>,
}

/// A remote value: a key, optionally a version and a property inside it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExternalSecretDataRemoteRef {
    /// Provider-specific key (name or path) of the remote secret.
    pub key: String,
    /// `Fetch` reads the secret's metadata (for example tags) instead of its value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata_policy: Option<MetadataPolicy>,
    /// A field inside a structured (JSON) value; provider-specific, usually a gjson path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub property: Option<String>,
    /// Provider-specific version of the remote secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// How keys are converted (only used by `dataFrom`); empty means `Default`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversion_strategy: Option<ConversionStrategy>,
    /// How the fetched value is decoded; empty means `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decoding_strategy: Option<DecodingStrategy>,
    /// Whether a value containing a NUL byte is an error; empty means `Ignore`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub null_byte_policy: Option<NullBytePolicy>,
}

/// Whether remote metadata is read instead of the value.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[schemars(transform = crate::opaque::drop_description)]
pub enum MetadataPolicy {
    /// Read the value.
    #[default]
    None,
    /// Read the metadata.
    Fetch,
}

/// Conversion of fetched keys into valid Secret keys.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[schemars(transform = crate::opaque::drop_description)]
pub enum ConversionStrategy {
    /// Replace invalid characters with `_`.
    #[default]
    Default,
    /// Replace invalid characters with `_U<codepoint>_`.
    Unicode,
}

/// Decoding applied to fetched values.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[schemars(transform = crate::opaque::drop_description)]
pub enum DecodingStrategy {
    /// Decode base64 or base64url if the value is valid, else keep it.
    Auto,
    /// Decode standard base64.
    Base64,
    /// Decode URL-safe base64.
    #[serde(rename = "Base64URL")]
    Base64Url,
    /// Keep the value as is.
    #[default]
    None,
}

/// Handling of values containing NUL bytes.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[schemars(transform = crate::opaque::drop_description)]
pub enum NullBytePolicy {
    /// Accept such values.
    #[default]
    Ignore,
    /// Fail the sync.
    Fail,
}

/// A bulk data source. Exactly one of `extract`, `find` or `sourceRef.generatorRef` is set.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExternalSecretDataFromRemoteRef {
    /// Read one remote secret and use all of its (JSON) keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extract: Option<ExternalSecretDataRemoteRef>,
    /// Search remote secrets by name or tags and use each match as one key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub find: Option<ExternalSecretFind>,
    /// Rewrites applied to the resulting keys, in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewrite: Option<Vec<ExternalSecretRewrite>>,
    /// A store or generator to use instead of `spec.secretStoreRef`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_ref: Option<SourceRef>,
}

/// A search over remote secrets.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExternalSecretFind {
    /// Path prefix to search under (provider-specific).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Match remote secret names against a regular expression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<FindName>,
    /// Match remote secrets carrying all of these tags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<BTreeMap<String, String>>,
    /// How found names are converted into Secret keys; empty means `Default`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversion_strategy: Option<ConversionStrategy>,
    /// How found values are decoded; empty means `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decoding_strategy: Option<DecodingStrategy>,
    /// Whether values containing NUL bytes are an error; empty means `Ignore`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub null_byte_policy: Option<NullBytePolicy>,
}

/// Name filter of a find.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FindName {
    /// Regular expression the remote secret name must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regexp: Option<String>,
}

/// One key rewrite. Exactly one of `merge`, `regexp` or `transform` is set.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("maxProperties" = 1, "minProperties" = 1))]
pub struct ExternalSecretRewrite {
    /// Merge JSON values of several keys into one map.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge: Option<ExternalSecretRewriteMerge>,
    /// Replace regular-expression matches in each key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regexp: Option<ExternalSecretRewriteRegexp>,
    /// Compute each key with a template (the key is available as `.value`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transform: Option<ExternalSecretRewriteTransform>,
}

/// Merges the JSON objects found under several keys into one.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExternalSecretRewriteMerge {
    /// Key that receives the merged result; empty merges into the top level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = ""))]
    pub into: Option<String>,
    /// Keys merged last (they win), in increasing priority.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<Vec<String>>,
    /// Whether a key listed in `priority` but missing is an error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Strict"))]
    pub priority_policy: Option<MergePriorityPolicy>,
    /// Whether two sources setting the same key is an error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Error"))]
    pub conflict_policy: Option<MergeConflictPolicy>,
    /// `Extract` merges the JSON objects' keys; `JSON` merges into one JSON document.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Extract"))]
    pub strategy: Option<MergeStrategy>,
}

/// Handling of missing priority keys.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[schemars(transform = crate::opaque::drop_description)]
pub enum MergePriorityPolicy {
    /// Ignore keys that do not exist.
    IgnoreNotFound,
    /// Fail on keys that do not exist.
    #[default]
    Strict,
}

/// Handling of merge conflicts.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[schemars(transform = crate::opaque::drop_description)]
pub enum MergeConflictPolicy {
    /// Later values win silently.
    Ignore,
    /// A conflict fails the sync.
    #[default]
    Error,
}

/// Merge output format.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[schemars(transform = crate::opaque::drop_description)]
pub enum MergeStrategy {
    /// Each merged key becomes a key of the result.
    #[default]
    Extract,
    /// The merged object is stored as one JSON document.
    #[serde(rename = "JSON")]
    Json,
}

/// Regular-expression key rewrite.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExternalSecretRewriteRegexp {
    /// Regular expression matched against each key.
    pub source: String,
    /// Replacement; may use `$1`-style group references.
    pub target: String,
}

/// Template key rewrite.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExternalSecretRewriteTransform {
    /// Template producing the new key from `.value` (the old key).
    pub template: String,
}

/// Per-entry source of a `data[]` or `dataFrom[]` entry: a store or a generator (generators
/// are only honoured in `dataFrom[]`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("maxProperties" = 1, "minProperties" = 1))]
pub struct SourceRef {
    /// Store to read from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_ref: Option<SecretStoreRef>,
    /// Generator whose output is used as the data (only in `dataFrom[]`; deprecated and ignored in
    /// `data[]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generator_ref: Option<GeneratorRef>,
}

/// Kinds a `generatorRef` may point at (declared with [`GeneratorKind`](crate::generators::GeneratorKind)
/// from one list).
pub use crate::generators::GeneratorRefKind;

/// Reference to a generator object.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GeneratorRef {
    /// API version of the generator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "generators.external-secrets.io/v1alpha1"))]
    pub api_version: Option<String>,
    /// Kind of the generator.
    pub kind: GeneratorRefKind,
    /// Name of the generator (in the referrer's namespace unless it is a ClusterGenerator).
    #[schemars(length(min = 1, max = 253), pattern(DNS_SUBDOMAIN))]
    pub name: String,
}

/// Observed state of an ExternalSecret.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExternalSecretStatus {
    /// Start time of the last successful sync; `null` when it never synced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_time: Option<Time>,
    /// `<generation>-<hash of labels and annotations>` of the ExternalSecret at the last successful
    /// sync; used to detect changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synced_resource_version: Option<String>,
    /// Conditions; only `Ready` is written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<ExternalSecretStatusCondition>>,
    /// Service-binding reference to the target Secret (servicebinding.io).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-map-type" = "atomic"))]
    pub binding: Option<SecretBinding>,
    /// `metadata.generation` the controller last reconciled (esr extension, not in ESO's schema),
    /// so that kstatus-based tools such as Flux can tell whether the status is current.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// Name of the Secret bound to an ExternalSecret.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretBinding {
    /// Name of the target Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = ""))]
    pub name: Option<String>,
}

/// Condition types of an ExternalSecret.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[schemars(transform = crate::opaque::drop_description)]
pub enum ExternalSecretConditionType {
    /// Whether the target is in sync.
    #[default]
    Ready,
    /// Internal: the ExternalSecret is being deleted.
    Deleted,
}

/// One condition of an ExternalSecret.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExternalSecretStatusCondition {
    /// Condition type.
    #[serde(rename = "type")]
    pub type_: ExternalSecretConditionType,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// Machine-readable reason (for example `SecretSynced`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Human-readable message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When `status` last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

impl ExternalSecretSpec {
    /// `target.creationPolicy` with the CRD default (`Owner`) applied.
    pub fn creation_policy(&self) -> CreationPolicy {
        self.target
            .as_ref()
            .and_then(|t| t.creation_policy)
            .unwrap_or_default()
    }

    /// `target.deletionPolicy` with the CRD default (`Retain`) applied.
    pub fn deletion_policy(&self) -> DeletionPolicy {
        self.target
            .as_ref()
            .and_then(|t| t.deletion_policy)
            .unwrap_or_default()
    }

    /// `refreshPolicy`; empty means `Periodic`.
    pub fn refresh_policy(&self) -> RefreshPolicy {
        self.refresh_policy.unwrap_or(RefreshPolicy::Periodic)
    }

    /// `refreshInterval` parsed as a Go duration, with the CRD default (`1h0m0s`) applied.
    pub fn refresh_interval(
        &self,
    ) -> Result<crate::duration::GoDuration, crate::duration::DurationError> {
        crate::duration::parse(
            self.refresh_interval
                .as_deref()
                .unwrap_or(crate::consts::DEFAULT_REFRESH_INTERVAL),
        )
    }
}

impl ExternalSecret {
    /// Name of the target object: `spec.target.name`, or the ExternalSecret's own name.
    pub fn target_name(&self) -> String {
        self.spec
            .target
            .as_ref()
            .and_then(|t| t.name.clone())
            .filter(|n| !n.is_empty())
            .or_else(|| self.metadata.name.clone())
            .unwrap_or_default()
    }
}

impl SecretStoreRef {
    /// The store kind; empty means `SecretStore`.
    pub fn kind_or_default(&self) -> SecretStoreKind {
        self.kind.unwrap_or_default()
    }
}

impl SecretStoreKind {
    /// The kind's name as written in manifests.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SecretStore => "SecretStore",
            Self::ClusterSecretStore => "ClusterSecretStore",
        }
    }
}

impl CreationPolicy {
    /// The policy's name as written in manifests.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Owner => "Owner",
            Self::Orphan => "Orphan",
            Self::Merge => "Merge",
            Self::None => "None",
            Self::CreateOrMerge => "CreateOrMerge",
        }
    }
}

impl DeletionPolicy {
    /// The policy's name as written in manifests.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Delete => "Delete",
            Self::Merge => "Merge",
            Self::Retain => "Retain",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_applied_by_accessors() {
        let spec = ExternalSecretSpec::default();
        assert_eq!(spec.creation_policy(), CreationPolicy::Owner);
        assert_eq!(spec.deletion_policy(), DeletionPolicy::Retain);
        assert_eq!(spec.refresh_policy(), RefreshPolicy::Periodic);
        assert_eq!(spec.refresh_interval().unwrap().to_string(), "1h0m0s");
        let spec = ExternalSecretSpec {
            refresh_interval: Some("15s".into()),
            target: Some(ExternalSecretTarget {
                creation_policy: Some(CreationPolicy::Merge),
                deletion_policy: Some(DeletionPolicy::Delete),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(spec.creation_policy(), CreationPolicy::Merge);
        assert_eq!(spec.deletion_policy(), DeletionPolicy::Delete);
        assert_eq!(spec.refresh_interval().unwrap().as_nanos(), 15_000_000_000);
    }

    #[test]
    fn target_name_falls_back_to_es_name() {
        let mut es = ExternalSecret::new("my-es", ExternalSecretSpec::default());
        assert_eq!(es.target_name(), "my-es");
        es.spec.target = Some(ExternalSecretTarget {
            name: Some("other".into()),
            ..Default::default()
        });
        assert_eq!(es.target_name(), "other");
    }

    #[test]
    fn enums_serialise_as_eso_strings() {
        assert_eq!(
            serde_json::to_value(DecodingStrategy::Base64Url).unwrap(),
            "Base64URL"
        );
        assert_eq!(serde_json::to_value(MergeStrategy::Json).unwrap(), "JSON");
        assert_eq!(
            serde_json::to_value(SyncWindowKind::Allow).unwrap(),
            "allow"
        );
        assert_eq!(
            serde_json::to_value(TemplateEngineVersion::V2).unwrap(),
            "v2"
        );
        assert_eq!(
            serde_json::to_value(GeneratorRefKind::EcrAuthorizationToken).unwrap(),
            "ECRAuthorizationToken"
        );
        for kind in [
            GeneratorRefKind::Uuid,
            GeneratorRefKind::SshKey,
            GeneratorRefKind::Mfa,
        ] {
            assert_eq!(serde_json::to_value(kind).unwrap(), kind.as_str());
        }
        assert_eq!(
            TemplateTarget::parse("annotations"),
            Some(TemplateTarget::Annotations)
        );
        assert_eq!(TemplateTarget::parse(""), Some(TemplateTarget::Data));
        assert_eq!(TemplateTarget::parse("spec.foo"), None);
    }
}
