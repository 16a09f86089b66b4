//! The SecretStore and ClusterSecretStore controllers.
pub mod reconcile;
