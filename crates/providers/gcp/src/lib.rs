//! esr-provider-gcp: the `gcpsm` provider (Google Cloud Secret Manager), compatible with ESO
//! v2.9, on the official Google Cloud Rust client (`google-cloud-secretmanager-v1`, REST/JSON
//! transport) and its auth crate (`google-cloud-auth`). See docs/providers/gcp.md.
//!
//! * [`names`]: resource names (`projects/P[/locations/L]/secrets/S[/versions/V]`) (pure);
//! * [`config`]: endpoints and the (test-only) endpoint overrides;
//! * [`auth`]: service-account key, GKE workload identity, workload identity federation and the
//!   default credentials;
//! * [`client`]: the `SecretsClient` of one store; [`provider`]: the `Provider`;
//! * [`error`]: client errors → `ProviderError` (only a well-formed `NOT_FOUND` is not found).

pub mod auth;
pub mod client;
pub mod config;
pub mod error;
pub mod names;
pub mod provider;

/// The `spec.provider` key.
pub const PROVIDER_KEY: &str = "gcpsm";
/// The provider label of `externalsecret_provider_api_calls_count`.
pub const METRIC_PROVIDER: &str = "GCP/SecretManager";

/// ESO's call labels.
pub mod calls {
    /// `GetSecret` (secret metadata: labels, annotations).
    pub const GET_SECRET: &str = "GetSecret";
    /// `DeleteSecret`.
    pub const DELETE_SECRET: &str = "DeleteSecret";
    /// `CreateSecret`.
    pub const CREATE_SECRET: &str = "CreateSecret";
    /// `UpdateSecret`.
    pub const UPDATE_SECRET: &str = "UpdateSecret";
    /// `AccessSecretVersion` (a value).
    pub const ACCESS_SECRET_VERSION: &str = "AccessSecretVersion";
    /// `AddSecretVersion`.
    pub const ADD_SECRET_VERSION: &str = "AddSecretVersion";
    /// `ListSecrets`.
    pub const LIST_SECRETS: &str = "ListSecrets";
    /// `ListSecretVersions` (the `LatestOrFetch` fallback).
    pub const LIST_SECRET_VERSIONS: &str = "ListSecretVersions";
    /// `GenerateServiceAccountToken` (Kubernetes TokenRequest for workload identity).
    pub const GENERATE_SA_TOKEN: &str = "GenerateServiceAccountToken";
}

/// The label a pushed secret carries; PushSecret only overwrites or deletes secrets that have it.
pub const MANAGED_BY_KEY: &str = "managed-by";
/// The value of [`MANAGED_BY_KEY`].
pub const MANAGED_BY_VALUE: &str = "external-secrets";

pub use client::GcpSmClient;
pub use config::GcpOptions;
pub use provider::{GcpSecretManagerProvider, validate_spec};
