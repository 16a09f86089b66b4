//! The `azurekv` provider: Azure Key Vault secrets, keys and certificates.

use crate::v1::{SecretKeySelector, ServiceAccountSelector};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Spec of the `azurekv` provider.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AzureKvProvider {
    /// How esr authenticates to Azure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "ServicePrincipal"))]
    pub auth_type: Option<AzureAuthType>,
    /// URL of the vault, for example `https://my-vault.vault.azure.net`.
    pub vault_url: String,
    /// Microsoft Entra tenant ID (service principal and workload identity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<String>,
    /// The Azure cloud the vault lives in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "PublicCloud"))]
    pub environment_type: Option<AzureEnvironmentType>,
    /// Service principal credentials read from Secrets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_secret_ref: Option<AzureKvAuth>,
    /// ServiceAccount used for workload identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_ref: Option<ServiceAccountSelector>,
    /// Client ID of the managed identity to use (when several are assigned).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity_id: Option<String>,
    /// Use the newer Azure SDK code path (required for `customCloudConfig`).
    #[serde(
        default,
        rename = "useAzureSDK",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(extend("default" = false))]
    pub use_azure_sdk: Option<bool>,
    /// Endpoints of a custom (for example Azure Stack) cloud.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_cloud_config: Option<AzureCustomCloudConfig>,
}

/// Authentication methods for Azure.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[schemars(transform = crate::opaque::drop_description)]
pub enum AzureAuthType {
    /// Client ID plus client secret or certificate.
    #[default]
    ServicePrincipal,
    /// The managed identity of the node or pod.
    ManagedIdentity,
    /// Federated ServiceAccount token.
    WorkloadIdentity,
}

/// Azure clouds.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[schemars(transform = crate::opaque::drop_description)]
pub enum AzureEnvironmentType {
    /// Azure public cloud.
    #[default]
    PublicCloud,
    /// Azure US Government.
    #[serde(rename = "USGovernmentCloud")]
    UsGovernmentCloud,
    /// Azure China.
    ChinaCloud,
    /// Azure Germany.
    GermanCloud,
    /// Azure Stack Hub (needs `customCloudConfig`).
    AzureStackCloud,
}

/// Service principal credentials.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AzureKvAuth {
    /// Client (application) ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<SecretKeySelector>,
    /// Tenant ID (alternative to `spec.provider.azurekv.tenantId`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<SecretKeySelector>,
    /// Client secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<SecretKeySelector>,
    /// Client certificate with its private key (PEM), instead of a client secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_certificate: Option<SecretKeySelector>,
}

/// Endpoints of a custom Azure cloud.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AzureCustomCloudConfig {
    /// Microsoft Entra (login) endpoint.
    pub active_directory_endpoint: String,
    /// Key Vault endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_vault_endpoint: Option<String>,
    /// DNS suffix of vault URLs, for example `.vault.azure.net`.
    #[serde(
        default,
        rename = "keyVaultDNSSuffix",
        skip_serializing_if = "Option::is_none"
    )]
    pub key_vault_dns_suffix: Option<String>,
    /// Resource Manager endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_manager_endpoint: Option<String>,
}
