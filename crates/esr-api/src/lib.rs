//! Rust types for the `external-secrets.io` API (ESO v2.9.0 compatible), CRD generation and ESO-identical hashes.

pub mod validation;
