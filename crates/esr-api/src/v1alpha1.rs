//! external-secrets.io/v1alpha1: `PushSecret` and `ClusterPushSecret`, which push Kubernetes Secret
//! data (or generator output) to providers.

// kube-derive takes one `printcolumn(...)`/`category = ...` attribute per entry, which clippy
// mistakes for duplicates.
#![allow(clippy::duplicated_attributes)]

use crate::opaque::AnyJson;
use crate::opaque::patterns::DNS_SUBDOMAIN;
use crate::v1::{
    ExternalSecretRewriteRegexp, ExternalSecretRewriteTransform, ExternalSecretTemplate,
    GeneratorRef, SecretStoreKind,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Desired state of a PushSecret.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "external-secrets.io",
    version = "v1alpha1",
    kind = "PushSecret",
    plural = "pushsecrets",
    singular = "pushsecret",
    namespaced,
    status = "PushSecretStatus",
    shortname = "ps",
    category = "external-secrets",
    label("external-secrets.io/component", "controller"),
    derive = "PartialEq",
    derive = "Default",
    doc = "PushSecret copies data from Kubernetes Secrets (or a generator) to one or more secret stores.",
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "Status",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].reason"
    ),
    printcolumn(name = "Last Sync", type_ = "date", json_path = ".status.refreshTime")
)]
#[serde(rename_all = "camelCase")]
pub struct PushSecretSpec {
    /// Time between pushes as a Go duration string; `0s` pushes only on changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "1h0m0s"))]
    pub refresh_interval: Option<String>,
    /// Stores to push to.
    pub secret_store_refs: Vec<PushSecretStoreRef>,
    /// `Replace` overwrites remote values; `IfNotExists` leaves existing remote secrets alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Replace"))]
    pub update_policy: Option<PushSecretUpdatePolicy>,
    /// `Delete` removes remote secrets that are no longer pushed; `None` leaves them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "None"))]
    pub deletion_policy: Option<PushSecretDeletionPolicy>,
    /// The source: a Secret (by name or label selector) or a generator.
    pub selector: PushSecretSelector,
    /// Which keys are pushed where.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Vec<PushSecretData>>,
    /// Bulk pushes: many keys to one store, optionally bundled into one remote secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_to: Option<Vec<PushSecretDataTo>>,
    /// Template applied to the source Secret before pushing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<ExternalSecretTemplate>,
}

/// A store to push to, by name or label selector.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PushSecretStoreRef {
    /// Name of the store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), pattern(DNS_SUBDOMAIN))]
    pub name: Option<String>,
    /// Selects every store with matching labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
    /// Kind of the store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "SecretStore"))]
    pub kind: Option<SecretStoreKind>,
}

/// Update policy of a PushSecret.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[schemars(transform = crate::opaque::drop_description)]
pub enum PushSecretUpdatePolicy {
    /// Always write the value.
    #[default]
    Replace,
    /// Write only if the remote secret does not exist yet.
    IfNotExists,
}

/// Deletion policy of a PushSecret.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[schemars(transform = crate::opaque::drop_description)]
pub enum PushSecretDeletionPolicy {
    /// Delete remote secrets that are no longer pushed (and on PushSecret deletion).
    Delete,
    /// Never delete remote secrets.
    #[default]
    None,
}

/// Key conversion when pushing.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[schemars(transform = crate::opaque::drop_description)]
pub enum PushSecretConversionStrategy {
    /// Keep keys as they are.
    #[default]
    None,
    /// Undo the `Unicode` conversion (`_U<codepoint>_` back to the character).
    ReverseUnicode,
}

/// The source of a PushSecret; exactly one field is set.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("maxProperties" = 1, "minProperties" = 1))]
pub struct PushSecretSelector {
    /// Source Secret(s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<PushSecretSecret>,
    /// Source generator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generator_ref: Option<GeneratorRef>,
}

/// Source Secret(s) of a PushSecret.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PushSecretSecret {
    /// Name of one Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), pattern(DNS_SUBDOMAIN))]
    pub name: Option<String>,
    /// Selects several Secrets by label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
}

/// One push: a source key (or the whole Secret) to a remote key.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PushSecretData {
    /// Source key and remote destination.
    #[serde(rename = "match")]
    pub match_: PushSecretMatch,
    /// Provider-specific options (for example tags or content type).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<AnyJson>,
    /// Key conversion applied before pushing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "None"))]
    pub conversion_strategy: Option<PushSecretConversionStrategy>,
}

/// Source key and remote destination of a push.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PushSecretMatch {
    /// Key of the source Secret; empty pushes the whole Secret as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_key: Option<String>,
    /// Remote destination.
    pub remote_ref: PushSecretRemoteRef,
}

/// Remote destination of a push.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PushSecretRemoteRef {
    /// Remote key (name or path).
    pub remote_key: String,
    /// Field inside the remote secret to write (provider-specific).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub property: Option<String>,
}

/// A bulk push to one store.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"message": "storeRef must specify either name or labelSelector", "rule": "has(self.storeRef) && (has(self.storeRef.name) || has(self.storeRef.labelSelector))"},
    {"message": "remoteKey and rewrite are mutually exclusive: rewrite is only supported in per-key mode (without remoteKey)", "rule": "!has(self.remoteKey) || !has(self.rewrite) || size(self.rewrite) == 0"}
]))]
pub struct PushSecretDataTo {
    /// The store to push to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_ref: Option<PushSecretStoreRef>,
    /// When set, all matched keys are pushed together as one JSON object under this remote key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_key: Option<String>,
    /// Which source keys are pushed; empty means all.
    #[serde(default, rename = "match", skip_serializing_if = "Option::is_none")]
    pub match_: Option<PushSecretDataToMatch>,
    /// Rewrites applied to the keys before pushing (per-key mode only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewrite: Option<Vec<PushSecretRewrite>>,
    /// Provider-specific options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<AnyJson>,
    /// Key conversion applied before pushing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "None"))]
    pub conversion_strategy: Option<PushSecretConversionStrategy>,
}

/// Key filter of a bulk push.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PushSecretDataToMatch {
    /// Regular expression the source key must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regexp: Option<String>,
}

/// A key rewrite of a bulk push; exactly one field is set.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"message": "exactly one of regexp or transform must be set", "rule": "(has(self.regexp) && !has(self.transform)) || (!has(self.regexp) && has(self.transform))"}
]))]
pub struct PushSecretRewrite {
    /// Replace regular-expression matches in each key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regexp: Option<ExternalSecretRewriteRegexp>,
    /// Compute each key with a template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transform: Option<ExternalSecretRewriteTransform>,
}

/// Observed state of a PushSecret.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PushSecretStatus {
    /// Time of the last successful push; `null` when it never pushed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_time: Option<Time>,
    /// `<generation>-<hash of labels and annotations>` at the last successful push.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synced_resource_version: Option<String>,
    /// What was pushed: `<Kind>/<store name>` to `<remote key>[/<property>]` to the push entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synced_push_secrets: Option<BTreeMap<String, BTreeMap<String, PushSecretData>>>,
    /// Conditions (`Ready`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<PushSecretStatusCondition>>,
}

/// One condition of a PushSecret or ClusterPushSecret.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PushSecretStatusCondition {
    /// Condition type (`Ready`).
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// Machine-readable reason (`Synced`, `Errored`, `SourceDeleted`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Human-readable message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When `status` last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

/// Desired state of a ClusterPushSecret.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "external-secrets.io",
    version = "v1alpha1",
    kind = "ClusterPushSecret",
    plural = "clusterpushsecrets",
    singular = "clusterpushsecret",
    status = "ClusterPushSecretStatus",
    category = "external-secrets",
    label("external-secrets.io/component", "controller"),
    derive = "PartialEq",
    derive = "Default",
    doc = "ClusterPushSecret creates the same PushSecret in every namespace its selectors match.",
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "Status",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].reason"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterPushSecretSpec {
    /// Spec of the PushSecrets to create.
    pub push_secret_spec: PushSecretSpec,
    /// How often namespaces are re-evaluated, as a Go duration string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_time: Option<String>,
    /// Name of the created PushSecrets; defaults to the ClusterPushSecret's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), pattern(DNS_SUBDOMAIN))]
    pub push_secret_name: Option<String>,
    /// Labels and annotations of the created PushSecrets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push_secret_metadata: Option<PushSecretMetadata>,
    /// Namespace selectors; a namespace matching any of them gets a PushSecret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selectors: Option<Vec<LabelSelector>>,
}

/// Labels and annotations of generated PushSecrets.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PushSecretMetadata {
    /// Annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
    /// Labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
}

/// Observed state of a ClusterPushSecret.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterPushSecretStatus {
    /// Namespaces where creating the PushSecret failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_namespaces: Option<Vec<ClusterPushSecretNamespaceFailure>>,
    /// Namespaces where the PushSecret exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioned_namespaces: Option<Vec<String>>,
    /// Name of the created PushSecrets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push_secret_name: Option<String>,
    /// Conditions (`Ready`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<PushSecretStatusCondition>>,
}

/// A namespace where provisioning a PushSecret failed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterPushSecretNamespaceFailure {
    /// The namespace.
    pub namespace: String,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}
