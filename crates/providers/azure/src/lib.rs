//! esr-provider-azure: the `azurekv` provider (Azure Key Vault secrets, keys and certificates),
//! compatible with ESO v2.9, on the official Azure SDK for Rust (`azure_security_keyvault_*`,
//! `azure_identity`, `azure_core`). See docs/providers/azure-key-vault.md.
//!
//! * [`object`]: ESO's key syntax (`secret/`, `cert/`, `key/`), property and tag semantics (pure);
//! * [`keys`]: PEM keys → JWK and certificate values → DER for PushSecret (pure);
//! * [`config`]: clouds, endpoints and the (test-only) transport/authority overrides;
//! * [`auth`]: ServicePrincipal, ManagedIdentity and WorkloadIdentity credentials;
//! * [`client`]: the `SecretsClient` of one vault; [`provider`]: the `Provider`;
//! * [`cache`]: clients reused across reconciles (no challenge/token round-trip per reconcile);
//! * [`error`]: SDK errors → `ProviderError` (404 → not found, 403 → a clear auth error).

pub mod auth;
pub mod cache;
pub mod client;
pub mod config;
pub mod error;
pub mod keys;
pub mod object;
pub mod provider;

/// The `spec.provider` key.
pub const PROVIDER_KEY: &str = "azurekv";
/// The provider label of `externalsecret_provider_api_calls_count`.
pub const METRIC_PROVIDER: &str = "Azure/KeyVault";

pub use client::{AzureKvClient, PushSecretMetadataSpec, VaultClients};
pub use config::{AzureOptions, CloudEndpoints, cloud_endpoints};
pub use provider::{AzureKeyVaultProvider, build_vault_clients, validate_spec};
