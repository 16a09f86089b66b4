//! Fuzzing manifest validation (proptest, bounded): arbitrary JSON documents, and documents with
//! the shape of esr's kinds around arbitrary specs, are admitted (prune, default, validate)
//! against every CRD version esr ships. Validation must never panic, whatever the input.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::OnceLock;

use esr_schema::Schema;
use proptest::prelude::*;
use serde_json::{Value, json};

fn schemas() -> &'static [Schema] {
    static SCHEMAS: OnceLock<Vec<Schema>> = OnceLock::new();
    SCHEMAS.get_or_init(|| {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../crds");
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        let mut out = Vec::new();
        for f in files {
            let crd: Value = yaml_serde::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
            for v in crd["spec"]["versions"].as_array().unwrap() {
                let name = v["name"].as_str().unwrap();
                if let Some(s) = Schema::from_crd(&crd, name).unwrap() {
                    out.push(s);
                }
            }
        }
        assert!(out.len() >= 8, "the CRDs were found");
        out
    })
}

fn admit_all(v: &Value) {
    for s in schemas() {
        let mut obj = v.clone();
        let _ = s.admit(&mut obj);
    }
}

const KEYS: &[&str] = &[
    "apiVersion",
    "kind",
    "metadata",
    "name",
    "namespace",
    "spec",
    "data",
    "dataFrom",
    "secretKey",
    "remoteRef",
    "key",
    "property",
    "version",
    "target",
    "template",
    "templateFrom",
    "refreshInterval",
    "secretStoreRef",
    "provider",
    "vault",
    "aws",
    "auth",
    "kubernetes",
    "serviceAccountRef",
    "secretRef",
    "conditions",
    "namespaces",
    "find",
    "tags",
    "rewrite",
    "regexp",
    "source",
    "transform",
    "engineVersion",
    "mergePolicy",
    "type",
    "length",
    "digits",
    "x",
    "",
];

const STRINGS: &[&str] = &[
    "1h",
    "-5s",
    "v1",
    "Delete",
    "Merge",
    "{{ .x }}",
    "ClusterSecretStore",
    "0",
    "",
];

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-1e12f64..1e12).prop_map(Value::from),
        "\\PC{0,12}".prop_map(Value::from),
        proptest::sample::select(STRINGS).prop_map(Value::from),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(6, 64, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::vec((proptest::sample::select(KEYS), inner), 0..6).prop_map(
                |kv| Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
            ),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_documents(v in json_value()) {
        admit_all(&v);
    }

    #[test]
    fn documents_of_esr_kinds(
        spec in json_value(),
        kind in proptest::sample::select(
            &["ExternalSecret", "SecretStore", "ClusterSecretStore", "PushSecret", "Password"][..],
        ),
    ) {
        let doc = json!({
            "apiVersion": "external-secrets.io/v1",
            "kind": kind,
            "metadata": {"name": "x", "namespace": "ns"},
            "spec": spec,
        });
        admit_all(&doc);
    }
}
