//! Helpers shared by the acceptance tests: locating `../shared` and loading YAML documents.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::Value;
use std::path::{Path, PathBuf};

/// The shared reference directory: `<repo>/../shared` (`/work/shared` next to `/work/main`, and the
/// same layout in CI where `shared/` sits beside the fresh clone).
pub fn shared_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared");
    assert!(
        dir.join("compat").is_dir(),
        "shared reference directory not found at {} (expected ../shared beside the repository)",
        dir.display()
    );
    dir.canonicalize().unwrap()
}

/// Files of a directory, sorted by name.
pub fn sorted_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// All YAML documents of a file, as JSON values (empty documents skipped, index kept).
pub fn yaml_docs(path: &Path) -> Vec<(usize, Value)> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let mut out = Vec::new();
    for (i, doc) in yaml_serde::Deserializer::from_str(&text).enumerate() {
        let value: Value = serde::Deserialize::deserialize(doc)
            .unwrap_or_else(|e| panic!("{}: document {i}: {e}", path.display()));
        if !value.is_null() {
            out.push((i, value));
        }
    }
    out
}

/// Our generated CRDs as JSON values.
pub fn our_crds() -> Vec<Value> {
    esr_api::crds()
        .unwrap()
        .iter()
        .map(|c| serde_json::to_value(c).unwrap())
        .collect()
}

/// ESO v2.9.0's generator kinds (`generators.external-secrets.io/v1alpha1`). The compat directory
/// holds ESO's CRDs only for some of them; esr may serve others from this list, and no CRD outside
/// ESO's API.
pub const ESO_GENERATOR_KINDS: &[&str] = &[
    "ACRAccessToken",
    "BeyondtrustWorkloadCredentialsDynamicSecret",
    "CloudsmithAccessToken",
    "ECRAuthorizationToken",
    "Fake",
    "GCRAccessToken",
    "GithubAccessToken",
    "GitlabDeployToken",
    "Grafana",
    "MFA",
    "Password",
    "QuayAccessToken",
    "SSHKey",
    "STSSessionToken",
    "UUID",
    "VaultDynamicSecret",
    "Webhook",
];

/// Whether `crd_name` is the CRD of one of ESO's generator kinds (`<plural>.generators.external-secrets.io`).
pub fn is_eso_generator_crd(crd_name: &str) -> bool {
    ESO_GENERATOR_KINDS
        .iter()
        .any(|k| crd_name == format!("{}s.generators.external-secrets.io", k.to_lowercase()))
}
