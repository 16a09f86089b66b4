//! esr's reconcilers: one folder per kind, each a pure planning core and a thin IO shell.
pub mod clusterexternalsecret;
pub mod clusterpushsecret;
pub mod common;
pub mod externalsecret;
pub mod leader;
pub mod metrics;
pub mod pushsecret;
pub mod runtime;
pub mod secretstore;
pub mod server;
