//! The ExternalSecret controller.
pub mod convert;
pub mod error;
pub mod fairness;
pub mod fetch;
pub mod managed;
pub mod offload;
pub mod pipeline;
pub mod plan;
pub mod reconcile;
pub mod target;
pub mod template;

/// The ESO hashes (data hash, created-by label, synced resourceVersion, field manager).
pub use esr_api::hash;
