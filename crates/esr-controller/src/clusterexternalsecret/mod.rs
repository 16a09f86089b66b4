//! The ClusterExternalSecret controller: the pure plan ([`plan`]) and its executor
//! ([`reconcile`]).
pub mod plan;
pub mod reconcile;
