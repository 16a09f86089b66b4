//! esr-provider-aws: the `aws` provider with `service: SecretsManager` and
//! `service: ParameterStore`, compatible with ESO v2.9, plus cost control (coalescing, short-lived
//! caching, BatchGetSecretValue / GetParameters batching, throttling back-off), and the
//! `ECRAuthorizationToken` and `STSSessionToken` generators. See
//! docs/providers/aws-secrets-manager.md, docs/providers/aws-parameter-store.md and
//! docs/generators.md.
//!
//! Layers, bottom up:
//! * [`api`] (Secrets Manager), [`ssm`] (Parameter Store): the SDK calls, each counted
//!   ([`calls`]) and classified ([`error`]);
//! * [`fetcher`]: single-flight, TTL cache and micro-batching of reads;
//! * [`client`], [`parameterstore`]: ESO's `SecretsClient` operations for one store;
//! * [`provider`]: builds and keeps clients per store and credentials ([`auth`]);
//! * [`esr`]: the `esr_provider::Provider` / `SecretsClient` implementation.

pub mod api;
pub mod auth;
pub mod calls;
pub mod client;
pub mod error;
pub mod esr;
pub mod fetcher;
pub mod generators;
pub mod parameterstore;
pub mod property;
pub mod provider;
pub mod spec;
pub mod ssm;

pub use auth::{Endpoints, KubeSource, StoreIdentity, StoreKind};
pub use calls::{CallLog, CallObserver, PROVIDER_PS, PROVIDER_SM, PROVIDER_STS};
pub use client::{SmClient, Validation};
pub use error::{AwsError, AwsErrorKind};
pub use esr::{
    AwsSecretsManagerProvider, ECR_AUTHORIZATION_TOKEN, EsrClient, EsrPsClient, PROVIDER_KEY,
    STS_SESSION_TOKEN, generate,
};
pub use fetcher::CostOptions;
pub use generators::{AwsGenerators, GenerateInput, PROVIDER_ECR};
pub use parameterstore::{PsClient, PushValue};
pub use provider::{AwsProvider, AwsProviderOptions, StoreClient};
pub use spec::{AwsProviderSpec, FindRef, RemoteRef, RetrySettings};
