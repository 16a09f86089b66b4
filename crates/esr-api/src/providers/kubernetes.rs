//! The `kubernetes` provider: Secrets of a (possibly remote) Kubernetes cluster.

use crate::opaque::patterns::DNS_LABEL;
use crate::v1::{CaProvider, SecretKeySelector, ServiceAccountSelector};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Spec of the `kubernetes` provider.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubernetesProvider {
    /// The API server to read from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<KubernetesServer>,
    /// How to authenticate to the API server (exactly one method).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<KubernetesAuth>,
    /// A Secret key holding a kubeconfig, as an alternative to `server` and `auth`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_ref: Option<SecretKeySelector>,
    /// Namespace whose Secrets are read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63), pattern(DNS_LABEL), extend("default" = "default"))]
    pub remote_namespace: Option<String>,
}

/// Connection settings of the API server.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubernetesServer {
    /// URL of the API server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "kubernetes.default"))]
    pub url: Option<String>,
    /// Base64-encoded PEM CA bundle used to verify the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "byte"))]
    pub ca_bundle: Option<String>,
    /// CA bundle read from a Secret or ConfigMap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_provider: Option<CaProvider>,
}

/// Authentication to the API server; exactly one field is set.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("maxProperties" = 1, "minProperties" = 1))]
pub struct KubernetesAuth {
    /// TLS client certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert: Option<KubernetesCertAuth>,
    /// A static bearer token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<KubernetesTokenAuth>,
    /// A token requested for a ServiceAccount.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<ServiceAccountSelector>,
}

/// TLS client certificate authentication.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubernetesCertAuth {
    /// PEM client certificate.
    pub client_cert: SecretKeySelector,
    /// PEM private key.
    pub client_key: SecretKeySelector,
}

/// Bearer-token authentication.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubernetesTokenAuth {
    /// The token.
    pub bearer_token: SecretKeySelector,
}
