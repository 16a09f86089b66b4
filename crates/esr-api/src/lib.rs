//! Rust types for the `external-secrets.io` API (ESO v2.9.0 compatible), CRD generation and
//! ESO-identical hashes.
//!
//! Public paths:
//! - [`v1`]: `ExternalSecret` / `ExternalSecretSpec` / `ExternalSecretStatus`, `SecretStore`,
//!   `ClusterSecretStore` (both with `SecretStoreSpec` / `SecretStoreStatus`), `SecretStoreProvider`
//!   (typed `aws`, `azurekv`, `vault`, `kubernetes`, `fake`; every other ESO provider key kept as an
//!   [`opaque::OpaqueObject`]), `ClusterExternalSecret`, and the shared types (`SecretStoreRef`,
//!   `SourceRef`, `GeneratorRef`, `ExternalSecretData`, `ExternalSecretDataRemoteRef`,
//!   `ExternalSecretDataFromRemoteRef`, `ExternalSecretFind`, `ExternalSecretRewrite`,
//!   `ExternalSecretTarget`, `ExternalSecretTemplate`, `TemplateFrom`, `SyncWindows`,
//!   `SecretKeySelector`, `ServiceAccountSelector`, `CaProvider`, `ClusterSecretStoreCondition`, the
//!   policy enums, ...).
//! - [`providers`]: `aws::AwsProvider`, `azurekv::AzureKvProvider`, `vault::VaultProvider`,
//!   `kubernetes::KubernetesProvider`, `fake::FakeProvider`.
//! - [`v1alpha1`]: `PushSecret`, `ClusterPushSecret` and their sub-types.
//! - [`generators`]: `Password`, `Fake`, `VaultDynamicSecret`, `ClusterGenerator` (+ `GeneratorSpec`).
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
//! reading an `Option` must apply the same default when it is `None`.

pub mod consts;
mod crd;
pub mod duration;
pub mod generators;
pub mod hash;
pub mod opaque;
pub mod providers;
pub mod v1;
pub mod v1alpha1;
pub mod validation;

pub use crd::{CRD_FILE_HEADER, CrdError, crd_file_content, crd_file_name, crds};
