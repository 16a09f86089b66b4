//! Rust types for the `external-secrets.io` API (ESO v2.9.0 compatible), CRD generation and
//! ESO-identical hashes.
//!
//! Public paths:
//! - [`v1`]: `ExternalSecret` / `ExternalSecretSpec` / `ExternalSecretStatus`, `SecretStore`,
//!   `ClusterSecretStore` (both with `SecretStoreSpec` / `SecretStoreStatus`), `SecretStoreProvider`
//!   (typed `aws`, `azurekv`, `gcpsm`, `vault`, `kubernetes`, `webhook`, `fake`; every other ESO
//!   provider key kept as an [`opaque::OpaqueObject`]), `ClusterExternalSecret`, and the shared
//!   types (`SecretStoreRef`,
//!   `SourceRef`, `GeneratorRef`, `ExternalSecretData`, `ExternalSecretDataRemoteRef`,
//!   `ExternalSecretDataFromRemoteRef`, `ExternalSecretFind`, `ExternalSecretRewrite`,
//!   `ExternalSecretTarget`, `ExternalSecretTemplate`, `TemplateFrom`, `SyncWindows`,
//!   `SecretKeySelector`, `ServiceAccountSelector`, `CaProvider`, `ClusterSecretStoreCondition`, the
//!   policy enums, ...).
//! - [`providers`]: `aws::AwsProvider`, `azurekv::AzureKvProvider`, `gcpsm::GcpSmProvider`,
//!   `vault::VaultProvider`, `kubernetes::KubernetesProvider`, `webhook::WebhookProvider`,
//!   `fake::FakeProvider`.
//! - [`v1alpha1`]: `PushSecret`, `ClusterPushSecret` and their sub-types.
//! - [`generators`]: `Password`, `Fake`, `VaultDynamicSecret`, `ECRAuthorizationToken`,
//!   `STSSessionToken`, `Webhook`, `ClusterGenerator` (+ `GeneratorSpec`).
//! - [`consts`]: every label, annotation, finalizer, field-manager prefix, condition reason and
//!   message ESO uses.
//! - [`duration`]: Go `time.Duration` parsing and formatting.
//! - [`hash`]: `object_hash`, `synced_resource_version`, `data_hash`, `created_by_label`,
//!   `field_manager`, `generator_state_owner_key`.
//! - [`crds()`]: the CustomResourceDefinitions generated from these types; [`crd_file_name`] and
//!   [`crd_file_content`] give what `esr crdgen` writes for each.
//!
//! Optional fields are `Option`s, so deserialising and serialising an object loses and adds nothing.
//! Defaults ESO's CRDs declare appear in the generated schemas (the apiserver applies them); code
//! reading an `Option` must apply the same default when it is `None` (accessors such as
//! `ExternalSecretSpec::creation_policy()`, `deletion_policy()`, `refresh_policy()`,
//! `refresh_interval()`, `ExternalSecret::target_name()`, `SecretStoreRef::kind_or_default()` and
//! `SecretStoreSpec::refresh_interval_duration()` do). The only fields that are plain values with a
//! serde default are those ESO marks both required and defaulted (the Vault auth mount paths and
//! Password's `length`, `noUpper`, `allowRepeat`): an object lacking them gains the default when
//! serialised again, as it would in the apiserver.
//!
//! Use [`crds()`] rather than the kube-derived `X::crd()`: only `crds()` applies the structural
//! fix-ups, adds `listKind`, the generator status subresources, the unserved `v1beta1` versions and
//! the ClusterSecretStore CRD (`ClusterSecretStore` shares `SecretStoreSpec`, so it implements
//! `kube::Resource` by hand instead of deriving `CustomResource`).

pub mod consts;
mod crd;
pub use esr_duration as duration;
pub mod generators;
pub mod hash;
pub mod opaque;
pub mod providers;
pub mod v1;
pub mod v1alpha1;
pub mod validation;

pub use crd::{CRD_FILE_HEADER, CrdError, crd_file_content, crd_file_name, crds};
