//! The ExternalSecret controller.
pub mod convert;
pub mod error;
pub mod fairness;
pub mod fetch;
pub mod hash;
pub mod offload;
pub mod pipeline;
pub mod plan;
pub mod reconcile;
pub mod template;
