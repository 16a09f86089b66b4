//! The `aws` provider: AWS Secrets Manager, SSM Parameter Store and Certificate Manager.

use crate::v1::{SecretKeySelector, ServiceAccountSelector};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Spec of the `aws` provider.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AwsProvider {
    /// The AWS service that holds the secrets.
    pub service: AwsServiceType,
    /// How to get credentials. Without it, the SDK's default credential chain is used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<AwsAuth>,
    /// ARN of an IAM role to assume after authenticating.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// IAM role ARNs assumed in order (role chaining) before `role`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_roles: Option<Vec<String>>,
    /// AWS region, for example `eu-west-1`.
    pub region: String,
    /// External ID passed when assuming `role`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "externalID")]
    pub external_id: Option<String>,
    /// Session tags passed when assuming `role`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_tags: Option<Vec<AwsTag>>,
    /// Secrets Manager options used when pushing and deleting secrets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secrets_manager: Option<AwsSecretsManagerOptions>,
    /// Session tag keys that stay set through role chaining.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transitive_tag_keys: Option<Vec<String>>,
    /// Prefix prepended to every remote key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// Which session tags esr adds when assuming a role: `None`, `Simple` (namespace, store name
    /// and kind) or `Custom` (those plus `customSessionTags`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "None"))]
    pub session_tags_policy: Option<AwsSessionTagsPolicy>,
    /// Extra session tags for the `Custom` policy; the reserved `eso*` keys are not allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{
        "message": "customSessionTags cannot contain automatically injected reserved keys: esoNamespace, esoStoreName, esoStoreKind",
        "rule": "!('esoNamespace' in self) && !('esoStoreName' in self) && !('esoStoreKind' in self)"
    }]))]
    pub custom_session_tags: Option<BTreeMap<String, String>>,
}

/// The AWS service used by a store.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[schemars(transform = crate::opaque::drop_description)]
pub enum AwsServiceType {
    /// AWS Secrets Manager.
    SecretsManager,
    /// AWS Systems Manager Parameter Store.
    ParameterStore,
    /// AWS Certificate Manager.
    CertificateManager,
}

/// Session-tag policy.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[schemars(transform = crate::opaque::drop_description)]
pub enum AwsSessionTagsPolicy {
    /// Only `sessionTags`.
    #[default]
    None,
    /// Add tags naming the store and namespace.
    Simple,
    /// Like `Simple`, plus `customSessionTags`.
    Custom,
}

/// AWS credentials. With neither field set, the default credential chain is used.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AwsAuth {
    /// Static access keys read from Secrets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<AwsAuthSecretRef>,
    /// Web identity (IRSA): a ServiceAccount token exchanged for role credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwt: Option<AwsJwtAuth>,
}

/// Static AWS access keys.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AwsAuthSecretRef {
    /// The access key ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "accessKeyIDSecretRef")]
    pub access_key_id_secret_ref: Option<SecretKeySelector>,
    /// The secret access key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_access_key_secret_ref: Option<SecretKeySelector>,
    /// An optional session token for temporary credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_token_secret_ref: Option<SecretKeySelector>,
}

/// Web-identity authentication with a ServiceAccount token.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AwsJwtAuth {
    /// ServiceAccount whose token is used; it must carry the role annotation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_ref: Option<ServiceAccountSelector>,
}

/// A session tag.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AwsTag {
    /// Tag key.
    pub key: String,
    /// Tag value.
    pub value: String,
}

/// Secrets Manager options for push and delete.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AwsSecretsManagerOptions {
    /// Delete secrets immediately, without a recovery window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force_delete_without_recovery: Option<bool>,
    /// Days a deleted secret can still be restored (7 to 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery_window_in_days: Option<i64>,
}
