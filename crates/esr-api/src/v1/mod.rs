//! external-secrets.io/v1: ExternalSecret, SecretStore, ClusterSecretStore, ClusterExternalSecret and
//! the reference types they share.

mod clusterexternalsecret;
mod externalsecret;
mod meta;
mod secretstore;

pub use clusterexternalsecret::*;
pub use externalsecret::*;
pub use meta::*;
pub use secretstore::*;
