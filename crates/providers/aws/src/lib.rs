//! esr-provider-aws: the `aws` provider with `service: SecretsManager`, compatible with ESO v2.9,
//! plus cost control (coalescing, short-lived caching, BatchGetSecretValue batching, throttling
//! back-off). See docs/providers/aws-secrets-manager.md.
//!
//! Layers, bottom up:
//! * [`api`]: the SDK calls, each counted ([`calls`]) and classified ([`error`]);
//! * [`fetcher`]: single-flight, TTL cache and micro-batching of reads;
//! * [`client`]: ESO's `SecretsClient` operations for one store;
//! * [`provider`]: builds and keeps clients per store and credentials ([`auth`]);
//! * [`esr`]: the `esr_provider::Provider` / `SecretsClient` implementation.

pub mod api;
pub mod auth;
pub mod calls;
pub mod client;
pub mod error;
pub mod esr;
pub mod fetcher;
pub mod property;
pub mod provider;
pub mod spec;

pub use auth::{Endpoints, KubeSource, StoreInfo, StoreKind};
pub use calls::{CallLog, CallObserver, PROVIDER_SM, PROVIDER_STS};
pub use client::{SmClient, Validation};
pub use error::{AwsError, ErrorKind};
pub use esr::{AwsSecretsManagerProvider, EsrClient, PROVIDER_KEY};
pub use fetcher::CostOptions;
pub use provider::{AwsProvider, AwsProviderOptions};
pub use spec::{AwsProviderSpec, FindRef, RemoteRef, RetrySettings};
