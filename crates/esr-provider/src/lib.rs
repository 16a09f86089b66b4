//! esr-provider: the contract between the controller and the secret backends.
//!
//! - [`SecretsClient`] / [`Provider`]: what every backend implements; [`ProviderRegistry`] maps
//!   `spec.provider` keys to providers (built by the binary).
//! - [`ProviderError`]: typed errors; [`ErrorKind::NotFound`] is ESO's `NoSecretErr`.
//! - [`request`]: request types (`SecretRef`, `FindRequest`, `PushRequest`, ...).
//! - [`store`]: store resolution (class, ClusterSecretStore conditions, flood gate).
//! - [`refs`]: credential reference resolution with ESO's namespace rules.
//! - [`kube_access`]: the Kubernetes IO providers need ([`KubeAccess`]), over a `kube::Client`
//!   or in memory.
//! - [`gjson`]: ESO's `property` paths. [`keys`]: key conversion and Go-compatible JSON.
//! - [`metrics`]: API-call accounting ([`CallRecorder`]).
//! - [`identity`]: when a store may use the controller's own identity (never a SecretStore,
//!   unless the controller allows it).

pub mod api;
pub mod error;
pub mod find;
pub mod gjson;
pub mod identity;
pub mod keys;
pub mod kube_access;
pub mod metadata;
pub mod metrics;
pub mod provider;
pub mod refs;
pub mod request;
pub mod store;

pub use error::{ErrorKind, NO_SECRET_MESSAGE, ProviderError, Result};
pub use kube_access::{KubeAccess, KubeClientAccess, KubeCredentials, StaticKubeAccess};
pub use metrics::{CallRecorder, CallStatus, MemoryRecorder, NoopRecorder};
pub use provider::{
    ClientContext, Provider, ProviderRegistry, SecretsClient, StoreInfo, StoreKind,
    unsupported_provider,
};
pub use request::{
    Capabilities, ConversionStrategy, DeleteRequest, FindName, FindRequest, Maintenance,
    MetadataPolicy, PushRemoteRef, PushRequest, SecretRef, ValidationResult,
};
pub use store::{
    ResolveOptions, StaticStoreLookup, StoreError, StoreLookup, StoreRef, StoreResolution,
    resolve_store,
};
