//! The ClusterPushSecret controller.
pub mod reconcile;
