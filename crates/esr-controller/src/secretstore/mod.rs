//! The SecretStore and ClusterSecretStore controllers: the pure plan ([`plan`]) and one runner
//! generic over the store kind ([`reconcile`]).
pub mod plan;
pub mod reconcile;
