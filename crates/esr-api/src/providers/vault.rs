//! The `vault` provider: HashiCorp Vault / OpenBao KV secrets engines (v1 and v2).

use crate::v1::{CaProvider, SecretKeySelector, ServiceAccountSelector};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Spec of the `vault` provider (also the connection part of a VaultDynamicSecret generator).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VaultProvider {
    /// How esr logs in to Vault.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<VaultAuth>,
    /// Address of the Vault server, for example `https://vault.example.com:8200`.
    pub server: String,
    /// Mount path of the KV secrets engine, for example `secret`. For KV v2, `/data` is added when
    /// missing. When empty, the path must be part of each remote key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Version of the KV secrets engine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "v2"))]
    pub version: Option<VaultKvVersion>,
    /// Vault Enterprise / OpenBao namespace for all requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Base64-encoded PEM CA bundle used to verify the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "byte"))]
    pub ca_bundle: Option<String>,
    /// TLS client certificate presented to the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<VaultClientTls>,
    /// CA bundle read from a Secret or ConfigMap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_provider: Option<CaProvider>,
    /// Send the last seen index state with each request so reads follow writes on performance
    /// standbys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_your_writes: Option<bool>,
    /// Ask standbys to forward requests they cannot serve consistently to the active node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forward_inconsistent: Option<bool>,
    /// Extra HTTP headers sent with every request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
    /// Check-and-set settings for writes (PushSecret).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_and_set: Option<VaultCheckAndSet>,
}

/// KV secrets engine version.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[schemars(transform = crate::opaque::drop_description)]
pub enum VaultKvVersion {
    /// KV version 1 (unversioned).
    #[serde(rename = "v1")]
    V1,
    /// KV version 2 (versioned).
    #[default]
    #[serde(rename = "v2")]
    V2,
}

/// Check-and-set settings.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VaultCheckAndSet {
    /// Send the expected current version with every write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<bool>,
}

/// TLS client certificate for Vault.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VaultClientTls {
    /// PEM client certificate; the key defaults to `tls.crt`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_secret_ref: Option<SecretKeySelector>,
    /// PEM private key; the key defaults to `tls.key`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_secret_ref: Option<SecretKeySelector>,
}

/// Vault login methods; set one of them.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VaultAuth {
    /// Namespace used for the login request only (overrides the provider's namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// A static Vault token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_secret_ref: Option<SecretKeySelector>,
    /// AppRole login.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_role: Option<VaultAppRole>,
    /// Kubernetes login with a ServiceAccount token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<VaultKubernetesAuth>,
    /// LDAP login.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ldap: Option<VaultLdapAuth>,
    /// JWT/OIDC login.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwt: Option<VaultJwtAuth>,
    /// TLS certificate login.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert: Option<VaultCertAuth>,
    /// AWS IAM login.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iam: Option<VaultIamAuth>,
    /// Username and password login.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_pass: Option<VaultUserPassAuth>,
    /// Google Cloud login.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gcp: Option<VaultGcpAuth>,
}

fn default_approle_path() -> String {
    "approle".to_owned()
}
fn default_kubernetes_path() -> String {
    "kubernetes".to_owned()
}
fn default_ldap_path() -> String {
    "ldap".to_owned()
}
fn default_userpass_path() -> String {
    "userpass".to_owned()
}
fn default_jwt_path() -> String {
    "jwt".to_owned()
}

/// AppRole login.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["path", "secretRef"]))]
pub struct VaultAppRole {
    /// Mount path of the AppRole auth method.
    #[serde(default = "default_approle_path")]
    pub path: String,
    /// The role ID, given inline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role_id: Option<String>,
    /// The role ID, read from a Secret (instead of `roleId`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role_ref: Option<SecretKeySelector>,
    /// The secret ID.
    pub secret_ref: SecretKeySelector,
}

/// Kubernetes login.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["mountPath", "role"]))]
pub struct VaultKubernetesAuth {
    /// Mount path of the Kubernetes auth method.
    #[serde(default = "default_kubernetes_path")]
    pub mount_path: String,
    /// ServiceAccount whose requested token is used. Without it and `secretRef`, the controller's
    /// own ServiceAccount token is used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_ref: Option<ServiceAccountSelector>,
    /// A Secret holding a ServiceAccount token; the key defaults to `token`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretKeySelector>,
    /// Vault role to log in as.
    pub role: String,
}

/// LDAP login.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["path", "username"]))]
pub struct VaultLdapAuth {
    /// Mount path of the LDAP auth method.
    #[serde(default = "default_ldap_path")]
    pub path: String,
    /// LDAP username.
    pub username: String,
    /// The password.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretKeySelector>,
}

/// Username and password login.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["path", "username"]))]
pub struct VaultUserPassAuth {
    /// Mount path of the userpass auth method.
    #[serde(default = "default_userpass_path")]
    pub path: String,
    /// The username.
    pub username: String,
    /// The password.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretKeySelector>,
}

/// JWT/OIDC login.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["path"]))]
pub struct VaultJwtAuth {
    /// Mount path of the JWT auth method.
    #[serde(default = "default_jwt_path")]
    pub path: String,
    /// Vault role to log in as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// A Secret holding the JWT.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretKeySelector>,
    /// A token requested for a ServiceAccount, used as the JWT.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes_service_account_token: Option<VaultKubernetesServiceAccountTokenAuth>,
}

/// A ServiceAccount token used as a JWT.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VaultKubernetesServiceAccountTokenAuth {
    /// The ServiceAccount (its `audiences` are requested for the token).
    pub service_account_ref: ServiceAccountSelector,
    /// Deprecated: use `serviceAccountRef.audiences`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audiences: Option<Vec<String>>,
    /// Deprecated: lifetime of the requested token in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiration_seconds: Option<i64>,
}

/// TLS certificate login.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VaultCertAuth {
    /// Mount path of the cert auth method.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "cert"))]
    pub path: Option<String>,
    /// Vault role to log in as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vault_role: Option<String>,
    /// PEM client certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_cert: Option<SecretKeySelector>,
    /// PEM private key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretKeySelector>,
}

/// AWS IAM login.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VaultIamAuth {
    /// Mount path of the AWS auth method (Vault's default is `aws`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// AWS region used for the STS request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// AWS IAM role to assume before signing the login request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// Vault role to log in as.
    pub vault_role: String,
    /// External ID for assuming `role`.
    #[serde(
        default,
        rename = "externalID",
        skip_serializing_if = "Option::is_none"
    )]
    pub external_id: Option<String>,
    /// Value of the `X-Vault-AWS-IAM-Server-ID` header.
    #[serde(
        default,
        rename = "vaultAwsIamServerID",
        skip_serializing_if = "Option::is_none"
    )]
    pub vault_aws_iam_server_id: Option<String>,
    /// Static AWS credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<VaultAwsAuthSecretRef>,
    /// Web identity with a ServiceAccount token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwt: Option<VaultAwsJwtAuth>,
}

/// Static AWS credentials for Vault IAM login.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VaultAwsAuthSecretRef {
    /// The access key ID.
    #[serde(
        default,
        rename = "accessKeyIDSecretRef",
        skip_serializing_if = "Option::is_none"
    )]
    pub access_key_id_secret_ref: Option<SecretKeySelector>,
    /// The secret access key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_access_key_secret_ref: Option<SecretKeySelector>,
    /// An optional session token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_token_secret_ref: Option<SecretKeySelector>,
}

/// Web identity for Vault IAM login.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VaultAwsJwtAuth {
    /// ServiceAccount whose token is exchanged for AWS credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_ref: Option<ServiceAccountSelector>,
}

/// Google Cloud login.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VaultGcpAuth {
    /// Mount path of the GCP auth method.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "gcp"))]
    pub path: Option<String>,
    /// Vault role to log in as.
    pub role: String,
    /// Google Cloud project ID.
    #[serde(default, rename = "projectID", skip_serializing_if = "Option::is_none")]
    pub project_id: Option<String>,
    /// Google Cloud location.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// A service-account key read from a Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<VaultGcpSecretRef>,
    /// GKE workload identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_identity: Option<VaultGcpWorkloadIdentity>,
    /// ServiceAccount used for the login.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_ref: Option<ServiceAccountSelector>,
}

/// A Google service-account key.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VaultGcpSecretRef {
    /// The JSON key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_access_key_secret_ref: Option<SecretKeySelector>,
}

/// GKE workload identity settings.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VaultGcpWorkloadIdentity {
    /// Kubernetes ServiceAccount bound to a Google service account.
    pub service_account_ref: ServiceAccountSelector,
    /// Location of the GKE cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_location: Option<String>,
    /// Name of the GKE cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_name: Option<String>,
    /// Project of the GKE cluster.
    #[serde(
        default,
        rename = "clusterProjectID",
        skip_serializing_if = "Option::is_none"
    )]
    pub cluster_project_id: Option<String>,
}
