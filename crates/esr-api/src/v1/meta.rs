//! Reference types shared by the store providers and generators.

use crate::opaque::patterns::{DNS_LABEL, DNS_SUBDOMAIN, SECRET_KEY};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Points at one key of a Kubernetes Secret holding a credential.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeySelector {
    /// Name of the Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), pattern(DNS_SUBDOMAIN))]
    pub name: Option<String>,
    /// Namespace of the Secret. Only honoured for cluster-scoped stores; a namespaced store may only
    /// name its own namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63), pattern(DNS_LABEL))]
    pub namespace: Option<String>,
    /// Key inside the Secret's data. Some providers pick a default key when this is empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), pattern(SECRET_KEY))]
    pub key: Option<String>,
}

/// Points at a Kubernetes ServiceAccount whose token is requested (TokenRequest API) to authenticate.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceAccountSelector {
    /// Name of the ServiceAccount.
    #[schemars(length(min = 1, max = 253), pattern(DNS_SUBDOMAIN))]
    pub name: String,
    /// Namespace of the ServiceAccount. Only honoured for cluster-scoped stores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63), pattern(DNS_LABEL))]
    pub namespace: Option<String>,
    /// Audiences requested for the token, in addition to the provider's default audience.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audiences: Option<Vec<String>>,
}

/// Where a CA certificate bundle is read from.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[schemars(transform = crate::opaque::drop_description)]
pub enum CaProviderType {
    /// A key of a Secret.
    Secret,
    /// A key of a ConfigMap.
    ConfigMap,
}

/// A CA certificate bundle kept in a Secret or ConfigMap, used to verify a provider's TLS certificate.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CaProvider {
    /// Kind of object holding the bundle.
    #[serde(rename = "type")]
    pub type_: CaProviderType,
    /// Name of the Secret or ConfigMap.
    #[schemars(length(min = 1, max = 253), pattern(DNS_SUBDOMAIN))]
    pub name: String,
    /// Key holding the PEM bundle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), pattern(SECRET_KEY))]
    pub key: Option<String>,
    /// Namespace of the object. Required for cluster-scoped stores, forbidden for namespaced ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63), pattern(DNS_LABEL))]
    pub namespace: Option<String>,
}
