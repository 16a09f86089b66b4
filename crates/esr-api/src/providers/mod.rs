//! Typed specs of the providers esr implements: `aws`, `azurekv`, `gcpsm`, `vault`, `kubernetes`, `webhook` and `fake`.
//! The other ESO provider keys are kept as opaque objects in [`crate::v1::SecretStoreProvider`].

pub mod aws;
pub mod azurekv;
pub mod fake;
pub mod gcpsm;
pub mod kubernetes;
pub mod vault;
pub mod webhook;
