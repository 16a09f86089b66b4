//! The ClusterExternalSecret controller.
pub mod reconcile;
