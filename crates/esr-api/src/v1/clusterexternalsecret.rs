//! `ClusterExternalSecret` (external-secrets.io/v1): stamps an ExternalSecret into every selected namespace.

// kube-derive takes one `printcolumn(...)`/`category = ...` attribute per entry, which clippy
// mistakes for duplicates.
#![allow(clippy::duplicated_attributes)]

use super::externalsecret::ExternalSecretSpec;
use crate::opaque::patterns::{DNS_LABEL, DNS_SUBDOMAIN};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Desired state of a ClusterExternalSecret.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "external-secrets.io",
    version = "v1",
    kind = "ClusterExternalSecret",
    plural = "clusterexternalsecrets",
    singular = "clusterexternalsecret",
    status = "ClusterExternalSecretStatus",
    shortname = "ces",
    category = "external-secrets",
    label("external-secrets.io/component", "controller"),
    derive = "PartialEq",
    derive = "Default",
    doc = "ClusterExternalSecret creates the same ExternalSecret in every namespace its selectors match.",
    printcolumn(
        name = "Store",
        type_ = "string",
        json_path = ".spec.externalSecretSpec.secretStoreRef.name"
    ),
    printcolumn(
        name = "Refresh Interval",
        type_ = "string",
        json_path = ".spec.refreshTime"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterExternalSecretSpec {
    /// Spec of the ExternalSecrets to create.
    pub external_secret_spec: ExternalSecretSpec,
    /// Name of the created ExternalSecrets; defaults to the ClusterExternalSecret's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), pattern(DNS_SUBDOMAIN))]
    pub external_secret_name: Option<String>,
    /// Labels and annotations of the created ExternalSecrets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_secret_metadata: Option<ExternalSecretMetadata>,
    /// Deprecated: a single namespace selector; use `namespaceSelectors`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// Namespace selectors; a namespace matching any of them gets an ExternalSecret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selectors: Option<Vec<LabelSelector>>,
    /// Deprecated: namespace names; use `namespaceSelectors`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(inner(length(min = 1, max = 63), pattern(DNS_LABEL)))]
    pub namespaces: Option<Vec<String>>,
    /// esr-only extension (ignored by ESO): regular expressions (RE2 syntax, unanchored like Go's
    /// `regexp.MatchString`; use `^...$` to match whole names) on namespace names; a namespace
    /// whose name matches any of them gets an ExternalSecret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_regexes: Option<Vec<String>>,
    /// How often namespaces are re-evaluated, as a Go duration string (the controller uses 1h when
    /// empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_time: Option<String>,
}

/// Labels and annotations for generated objects.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExternalSecretMetadata {
    /// Annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
    /// Labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
}

/// Observed state of a ClusterExternalSecret.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterExternalSecretStatus {
    /// Name of the ExternalSecrets that were created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_secret_name: Option<String>,
    /// Namespaces where creating the ExternalSecret failed, sorted by namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_namespaces: Option<Vec<ClusterExternalSecretNamespaceFailure>>,
    /// Namespaces where the ExternalSecret exists, sorted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioned_namespaces: Option<Vec<String>>,
    /// Conditions (`Ready`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<ClusterExternalSecretStatusCondition>>,
    /// `metadata.generation` the controller last reconciled (esr extension, not in ESO's schema),
    /// so that Argo CD health checks and kstatus-based tools (Flux) can tell a status that
    /// predates the current spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// A namespace where provisioning failed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterExternalSecretNamespaceFailure {
    /// The namespace.
    pub namespace: String,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// One condition of a ClusterExternalSecret.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterExternalSecretStatusCondition {
    /// Condition type (`Ready`).
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// Human-readable message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}
