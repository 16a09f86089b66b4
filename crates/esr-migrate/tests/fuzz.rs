//! Fuzzing the KES converter (proptest, bounded): KES ExternalSecrets with arbitrary fields, and
//! arbitrary YAML text, go through parse → convert → YAML output. The converter must never panic;
//! whatever it cannot convert it reports.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use esr_migrate::{Document, Options, convert, parse_yaml_stream, to_yaml_stream};
use proptest::prelude::*;
use serde_json::{Value, json};

fn run(values: Vec<Value>) {
    let docs: Vec<Document> = values
        .into_iter()
        .enumerate()
        .map(|(index, value)| Document {
            source: "fuzz.yaml".to_string(),
            index,
            value,
        })
        .collect();
    let opts = Options {
        vault_addr: Some("https://vault.example:8200".into()),
        aws_region: Some("eu-west-1".into()),
        ..Options::default()
    };
    let conv = convert(&docs, &opts);
    let text = to_yaml_stream(conv.all_manifests()).unwrap();
    // the output parses back
    parse_yaml_stream(&text).unwrap();
}

const KEYS: &[&str] = &[
    "backendType",
    "vaultMountPoint",
    "vaultRole",
    "kvVersion",
    "region",
    "roleArn",
    "keyVaultName",
    "projectId",
    "data",
    "dataFrom",
    "key",
    "name",
    "property",
    "version",
    "isBinary",
    "path",
    "recursive",
    "template",
    "metadata",
    "labels",
    "type",
    "x",
];

const STRINGS: &[&str] = &[
    "vault",
    "secretsManager",
    "systemManager",
    "azureKeyVault",
    "gcpSecretsManager",
    "ibmcloudSecretsManager",
    "akeyless",
    "alicloud",
    "v1",
    "v2",
    "<%= yaml %>",
    "{{ .x }}",
    "",
];

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "\\PC{0,12}".prop_map(Value::from),
        proptest::sample::select(STRINGS).prop_map(Value::from),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(5, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            proptest::collection::vec((proptest::sample::select(KEYS), inner), 0..6).prop_map(
                |kv| Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
            ),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 600, ..ProptestConfig::default() })]

    #[test]
    fn kes_objects_with_arbitrary_specs(
        spec in json_value(),
        api in proptest::sample::select(&["kubernetes-client.io/v1", "kubernetes-client.io/v2", "v1"][..]),
    ) {
        run(vec![json!({
            "apiVersion": api,
            "kind": "ExternalSecret",
            "metadata": {"name": "x", "namespace": "ns"},
            "spec": spec,
        })]);
    }

    #[test]
    fn arbitrary_yaml_text(text in "\\PC{0,200}") {
        if let Ok(values) = parse_yaml_stream(&text) {
            run(values);
        }
    }
}
