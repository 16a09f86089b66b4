//! The `gcpsm` provider: Google Cloud Secret Manager.

use crate::opaque::patterns::{DNS_LABEL, DNS_SUBDOMAIN, SECRET_KEY};
use crate::v1::{SecretKeySelector, ServiceAccountSelector};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Pattern of a Google Cloud service account email.
pub const GCP_SERVICE_ACCOUNT_EMAIL: &str = r"^.*@.*\.iam\.gserviceaccount\.com$";
/// Pattern of an AWS region name.
pub const AWS_REGION: &str = r"^[a-z0-9-]+$";

/// Spec of the `gcpsm` provider.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GcpSmProvider {
    /// Project that holds the secrets.
    #[serde(default, rename = "projectID", skip_serializing_if = "Option::is_none")]
    pub project_id: Option<String>,
    /// How esr authenticates to Google Cloud: a service-account key, GKE workload identity,
    /// workload identity federation, or (none set) the default credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<GcpSmAuth>,
    /// Location of regional secrets (served by `secretmanager.<location>.rep.googleapis.com`);
    /// empty for global secrets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// What to read when `latest` is disabled or destroyed: `LatestOrFail` (an error) or
    /// `LatestOrFetch` (the newest enabled version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "LatestOrFail"))]
    pub secret_version_selection_policy: Option<String>,
}

/// `secretVersionSelectionPolicy: LatestOrFetch`.
pub const LATEST_OR_FETCH: &str = "LatestOrFetch";

/// Authentication methods for Google Cloud.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GcpSmAuth {
    /// A service-account key (JSON) read from a Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<GcpSmAuthSecretRef>,
    /// GKE workload identity: a ServiceAccount token exchanged for a Google access token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_identity: Option<GcpWorkloadIdentity>,
    /// Workload identity federation with an external identity provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_identity_federation: Option<GcpWorkloadIdentityFederation>,
}

/// The Secret holding a service-account key.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GcpSmAuthSecretRef {
    /// The service-account key file (JSON).
    #[serde(
        default,
        rename = "secretAccessKeySecretRef",
        skip_serializing_if = "Option::is_none"
    )]
    pub secret_access_key: Option<SecretKeySelector>,
}

/// GKE workload identity.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GcpWorkloadIdentity {
    /// The ServiceAccount whose token is exchanged.
    pub service_account_ref: ServiceAccountSelector,
    /// Location of the cluster (e.g. `europe-west1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_location: Option<String>,
    /// Name of the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_name: Option<String>,
    /// Project of the cluster (defaults to `projectID`).
    #[serde(
        default,
        rename = "clusterProjectID",
        skip_serializing_if = "Option::is_none"
    )]
    pub cluster_project_id: Option<String>,
}

/// Workload identity federation.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GcpWorkloadIdentityFederation {
    /// A ConfigMap key holding an external-account credential configuration (JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cred_config: Option<ConfigMapReference>,
    /// The ServiceAccount whose token is exchanged (Kubernetes as the identity provider).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_ref: Option<ServiceAccountSelector>,
    /// AWS credentials used as the identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aws_security_credentials: Option<AwsCredentialsConfig>,
    /// STS audience: the workload identity pool provider's resource name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<String>,
    /// The expected `credential_source.url` of `credConfig`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_token_endpoint: Option<String>,
    /// Google service account impersonated after the exchange.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1),
        pattern(GCP_SERVICE_ACCOUNT_EMAIL),
        extend("example" = "my-gsa@my-project.iam.gserviceaccount.com")
    )]
    pub gcp_service_account_email: Option<String>,
}

/// A key of a ConfigMap.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapReference {
    /// Name of the ConfigMap.
    #[schemars(length(min = 1, max = 253), pattern(DNS_SUBDOMAIN))]
    pub name: String,
    /// Namespace of the ConfigMap (default: the referent's namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63), pattern(DNS_LABEL))]
    pub namespace: Option<String>,
    /// Key holding the configuration.
    #[schemars(length(min = 1, max = 253), pattern(SECRET_KEY))]
    pub key: String,
}

/// AWS credentials for workload identity federation.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AwsCredentialsConfig {
    /// AWS region.
    #[schemars(
        length(min = 1, max = 50),
        pattern(AWS_REGION),
        extend("example" = "ap-south-1")
    )]
    pub region: String,
    /// Secret with `aws_access_key_id`, `aws_secret_access_key` and `aws_session_token`.
    pub aws_credentials_secret_ref: SecretReference,
}

/// A Secret by name.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretReference {
    /// Name of the Secret.
    #[schemars(length(min = 1, max = 253), pattern(DNS_SUBDOMAIN))]
    pub name: String,
    /// Namespace of the Secret (default: the referent's namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63), pattern(DNS_LABEL))]
    pub namespace: Option<String>,
}
