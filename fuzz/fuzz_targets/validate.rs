//! Manifest validation (`esr validate`, the API server's CRD schema checks as esr-schema does
//! them) on arbitrary YAML: every document is admitted against every CRD version esr ships; no
//! panic.
#![no_main]

use std::sync::OnceLock;

use esr_schema::Schema;
use libfuzzer_sys::fuzz_target;
use serde::Deserialize as _;
use serde_json::Value;

const CRDS: &[&str] = &[
    include_str!("../../crds/external-secrets.io_externalsecrets.yaml"),
    include_str!("../../crds/external-secrets.io_secretstores.yaml"),
    include_str!("../../crds/external-secrets.io_clustersecretstores.yaml"),
    include_str!("../../crds/external-secrets.io_pushsecrets.yaml"),
    include_str!("../../crds/external-secrets.io_clusterexternalsecrets.yaml"),
    include_str!("../../crds/generators.external-secrets.io_passwords.yaml"),
];

fn schemas() -> &'static [Schema] {
    static SCHEMAS: OnceLock<Vec<Schema>> = OnceLock::new();
    SCHEMAS.get_or_init(|| {
        let mut out = Vec::new();
        for text in CRDS {
            let Ok(crd) = yaml_serde::from_str::<Value>(text) else {
                continue;
            };
            for v in crd
                .pointer("/spec/versions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let name = v.get("name").and_then(Value::as_str).unwrap_or_default();
                if let Ok(Some(s)) = Schema::from_crd(&crd, name) {
                    out.push(s);
                }
            }
        }
        out
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for doc in yaml_serde::Deserializer::from_str(text).take(8) {
        let Ok(v) = Value::deserialize(doc) else {
            return;
        };
        for s in schemas() {
            let mut obj = v.clone();
            let _ = s.admit(&mut obj);
        }
    }
});
