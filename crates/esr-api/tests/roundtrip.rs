//! Acceptance: every external-secrets.io / generators.external-secrets.io document in
//! `../shared/compat/eso-snippets/` deserialises into the typed structs and serialises back with no
//! field lost (compared as JSON values; `null`s are ignored, and a field may only be added when it
//! carries the CRD default at that place). Documents esr does not type are listed explicitly with
//! the reason.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::collections::BTreeSet;

/// Every external-secrets document the test does not round-trip, as `file:doc-index kind reason`.
const EXPECTED_SKIPS: &[&str] = &[
    "beyondtrustworkloadcredentials-dynamic-secret.yaml:0 BeyondtrustWorkloadCredentialsDynamicSecret generator kind not implemented by esr",
    "generator-acr-argocd-helm-repo.yaml:0 ACRAccessToken generator kind not implemented by esr",
    "generator-acr.yaml:0 ACRAccessToken generator kind not implemented by esr",
    "generator-cloudsmith.yaml:0 CloudsmithAccessToken generator kind not implemented by esr",
    "generator-ecr.yaml:0 ECRAuthorizationToken generator kind not implemented by esr",
    "generator-gcr.yaml:0 GCRAccessToken generator kind not implemented by esr",
    "generator-github.yaml:0 GithubAccessToken generator kind not implemented by esr",
    "generator-gitlab.yaml:0 GitlabDeployToken generator kind not implemented by esr",
    "generator-grafana-basicauth.yaml:0 Grafana generator kind not implemented by esr",
    "generator-grafana.yaml:0 Grafana generator kind not implemented by esr",
    "generator-mfa.yaml:0 MFA generator kind not implemented by esr",
    "generator-quay.yaml:0 QuayAccessToken generator kind not implemented by esr",
    "generator-sshkey-ecdsa.yaml:0 SSHKey generator kind not implemented by esr",
    "generator-sshkey-rsa.yaml:0 SSHKey generator kind not implemented by esr",
    "generator-sshkey.yaml:0 SSHKey generator kind not implemented by esr",
    "generator-sts.yaml:0 STSSessionToken generator kind not implemented by esr",
    "generator-uuid.yaml:0 UUID generator kind not implemented by esr",
    "getallsecrets-find-by-tags.yaml:0 ExternalSecret external-secrets.io/v1beta1 is not served",
    "passworddepot-external-secret-json.yaml:0 ExternalSecret external-secrets.io/v1alpha1 is not served",
    "passworddepot-external-secret.yaml:0 ExternalSecret external-secrets.io/v1alpha1 is not served",
    "passworddepot-secret-store.yaml:0 ClusterSecretStore external-secrets.io/v1alpha1 is not served",
    "template-v2-push-secret.yaml:0 PushSecret external-secrets.io/v1beta1 is not served",
];

fn strip_nulls(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.retain(|_, x| !x.is_null());
            for x in map.values_mut() {
                strip_nulls(x);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

/// Documents ESO's own CRDs reject (the apiserver would refuse them), so they cannot be typed.
const EXPECTED_INVALID: &[&str] = &[
    "full-external-secret.yaml:0 metadata.annotations value 1234 is an integer; Kubernetes annotations are strings",
    "gcpsm-sa-secret-store.yaml:0 spec.provider.gcpsm.projectID is the YAML flow sequence [PROJECT_ID]; ESO's schema requires a string",
    "gcpsm-wif-core-controller-secret-store.yaml:0 spec.provider.gcpsm.projectID is the YAML flow sequence [PROJECT_ID]; ESO's schema requires a string",
    "gcpsm-wif-iam-secret-store.yaml:0 spec.provider.gcpsm.projectID is the YAML flow sequence [PROJECT_ID]; ESO's schema requires a string",
    "gcpsm-wif-non-native-iam-secret-store.yaml:0 spec.provider.gcpsm.projectID is the YAML flow sequence [PROJECT_ID]; ESO's schema requires a string",
    "gcpsm-wif-sa-secret-store-with-explicit-name-and-location.yaml:0 spec.provider.gcpsm.projectID is the YAML flow sequence [PROJECT_ID]; ESO's schema requires a string",
    "gcpsm-wif-sa-secret-store.yaml:0 spec.provider.gcpsm.projectID is the YAML flow sequence [PROJECT_ID]; ESO's schema requires a string",
    "pkcs12-template-v1-external-secret.yaml:0 spec.target.template.engineVersion v1 is not in ESO's enum [v2]",
    "vault-mtls-store.yaml:0 spec.provider.vault.auth is the placeholder string \"...\"; ESO's schema requires an object",
];

/// Fields ESO's CRD schema does not define: the apiserver prunes them, so losing them in the
/// round trip is ESO-identical behaviour.
const EXPECTED_PRUNED: &[&str] = &[
    "full-cluster-external-secret.yaml:0 .spec.externalSecretSpec.dataFrom[0].key",
    "full-cluster-external-secret.yaml:0 .spec.externalSecretSpec.dataFrom[0].property",
    "full-cluster-external-secret.yaml:0 .spec.externalSecretSpec.dataFrom[0].version",
    "full-cluster-external-secret.yaml:0 .status.conditions[0].lastTransitionTime",
    "ibm-external-secret-with-metadata.yaml:0 .spec.dataFrom[0].secretKey",
    "multiline-template-v1-external-secret.yaml:0 .spec.target.engineVersion",
];

fn child_schema<'a>(schema: Option<&'a Value>, key: &str) -> Option<&'a Value> {
    let s = schema?;
    s.get("properties")
        .and_then(|p| p.get(key))
        .or_else(|| s.get("additionalProperties").filter(|a| a.is_object()))
}

fn same_scalar(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

/// Does ESO's schema node define its properties, without `key` among them (so `key` is pruned)?
fn eso_prunes(eso: Option<&Value>, key: &str) -> bool {
    let Some(node) = eso else { return false };
    node.get("x-kubernetes-preserve-unknown-fields") != Some(&Value::Bool(true))
        && node
            .get("properties")
            .and_then(Value::as_object)
            .is_some_and(|p| !p.contains_key(key))
}

/// Differences found by [`diff_eso`].
#[derive(Default)]
struct Diff {
    /// Fields lost, changed, or added without being the CRD default.
    problems: Vec<String>,
    /// Fields lost that ESO's schema does not define (the apiserver prunes them too).
    pruned: Vec<String>,
}

/// Compares without an ESO schema (every loss is a problem).
fn diff(path: &str, orig: &Value, out: &Value, schema: Option<&Value>, problems: &mut Vec<String>) {
    let mut d = Diff::default();
    diff_eso(path, orig, out, schema, None, &mut d);
    problems.extend(d.problems);
}

/// Reports fields of `orig` missing or changed in `out`, and fields added in `out` that are not
/// the default of esr's schema (`schema`) at that place.
fn diff_eso(
    path: &str,
    orig: &Value,
    out: &Value,
    schema: Option<&Value>,
    eso: Option<&Value>,
    d: &mut Diff,
) {
    match (orig, out) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, va) in a {
                let p = format!("{path}.{k}");
                match b.get(k) {
                    Some(vb) => {
                        diff_eso(&p, va, vb, child_schema(schema, k), child_schema(eso, k), d)
                    }
                    None if eso_prunes(eso, k) => d.pruned.push(p),
                    None => d.problems.push(format!("{p}: lost")),
                }
            }
            for (k, vb) in b {
                if !a.contains_key(k) {
                    let default = child_schema(schema, k).and_then(|s| s.get("default"));
                    if default != Some(vb) {
                        d.problems
                            .push(format!("{path}.{k}: added {vb} (not the CRD default)"));
                    }
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            if a.len() != b.len() {
                d.problems
                    .push(format!("{path}: {} items became {}", a.len(), b.len()));
                return;
            }
            let items = schema.and_then(|s| s.get("items"));
            let eso_items = eso.and_then(|s| s.get("items"));
            for (i, (va, vb)) in a.iter().zip(b).enumerate() {
                diff_eso(&format!("{path}[{i}]"), va, vb, items, eso_items, d);
            }
        }
        _ => {
            if !same_scalar(orig, out) {
                d.problems.push(format!("{path}: {orig} became {out}"));
            }
        }
    }
}

fn roundtrip<T: DeserializeOwned + Serialize>(doc: &Value) -> Result<Value, String> {
    let typed: T = serde_json::from_value(doc.clone()).map_err(|e| format!("deserialise: {e}"))?;
    serde_json::to_value(&typed).map_err(|e| format!("serialise: {e}"))
}

/// Round-trips a document through its typed struct; `Err` holds the skip reason.
fn typed_roundtrip(
    api_version: &str,
    kind: &str,
    doc: &Value,
) -> Result<Result<Value, String>, String> {
    use esr_api::{generators as g, v1, v1alpha1};
    Ok(match (api_version, kind) {
        ("external-secrets.io/v1", "ExternalSecret") => roundtrip::<v1::ExternalSecret>(doc),
        ("external-secrets.io/v1", "SecretStore") => roundtrip::<v1::SecretStore>(doc),
        ("external-secrets.io/v1", "ClusterSecretStore") => {
            roundtrip::<v1::ClusterSecretStore>(doc)
        }
        ("external-secrets.io/v1", "ClusterExternalSecret") => {
            roundtrip::<v1::ClusterExternalSecret>(doc)
        }
        ("external-secrets.io/v1alpha1", "PushSecret") => roundtrip::<v1alpha1::PushSecret>(doc),
        ("external-secrets.io/v1alpha1", "ClusterPushSecret") => {
            roundtrip::<v1alpha1::ClusterPushSecret>(doc)
        }
        ("generators.external-secrets.io/v1alpha1", "Password") => roundtrip::<g::Password>(doc),
        ("generators.external-secrets.io/v1alpha1", "Fake") => roundtrip::<g::Fake>(doc),
        ("generators.external-secrets.io/v1alpha1", "VaultDynamicSecret") => {
            roundtrip::<g::VaultDynamicSecret>(doc)
        }
        ("generators.external-secrets.io/v1alpha1", "Webhook") => roundtrip::<g::Webhook>(doc),
        ("generators.external-secrets.io/v1alpha1", "ClusterGenerator") => {
            roundtrip::<g::ClusterGenerator>(doc)
        }
        ("generators.external-secrets.io/v1alpha1", other) => {
            return Err(format!("{other} generator kind not implemented by esr"));
        }
        (v, k) => return Err(format!("{k} {v} is not served")),
    })
}

/// The schema of `kind` at `version` in esr's CRDs.
fn schema_for<'a>(crds: &'a [Value], api_version: &str, kind: &str) -> Option<&'a Value> {
    let (group, version) = api_version.split_once('/')?;
    let crd = crds
        .iter()
        .find(|c| c["spec"]["group"] == group && c["spec"]["names"]["kind"] == kind)?;
    crd["spec"]["versions"]
        .as_array()?
        .iter()
        .find(|v| v["name"] == version)
        .map(|v| &v["schema"]["openAPIV3Schema"])
}

/// ESO's CRDs from `../shared/compat/eso-crds/`.
fn eso_crds() -> Vec<Value> {
    let dir = common::shared_dir().join("compat/eso-crds");
    common::sorted_files(&dir)
        .iter()
        .flat_map(|f| common::yaml_docs(f))
        .map(|(_, v)| v)
        .collect()
}

#[test]
fn every_snippet_round_trips_without_losing_fields() {
    let dir = common::shared_dir().join("compat/eso-snippets");
    let crds = common::our_crds();
    let eso = eso_crds();
    let mut invalid = BTreeSet::new();
    let mut pruned = BTreeSet::new();
    let mut skipped = BTreeSet::new();
    let mut failures = Vec::new();
    let mut checked = 0usize;
    let mut other_kinds = 0usize;
    for file in common::sorted_files(&dir) {
        let fname = file.file_name().unwrap().to_string_lossy().into_owned();
        for (index, doc) in common::yaml_docs(&file) {
            let api_version = doc["apiVersion"].as_str().unwrap_or_default().to_owned();
            let kind = doc["kind"].as_str().unwrap_or_default().to_owned();
            let group = api_version
                .split_once('/')
                .map(|(g, _)| g)
                .unwrap_or_default();
            if group != "external-secrets.io" && group != "generators.external-secrets.io" {
                other_kinds += 1;
                continue;
            }
            let result = match typed_roundtrip(&api_version, &kind, &doc) {
                Ok(r) => r,
                Err(reason) => {
                    skipped.insert(format!("{fname}:{index} {reason}"));
                    continue;
                }
            };
            checked += 1;
            let mut out = match result {
                Ok(v) => v,
                Err(e) => {
                    println!("invalid: {fname}:{index} {kind}: {e}");
                    invalid.insert(format!("{fname}:{index}"));
                    continue;
                }
            };
            let mut orig = doc.clone();
            strip_nulls(&mut orig);
            strip_nulls(&mut out);
            let mut d = Diff::default();
            diff_eso(
                "",
                &orig,
                &out,
                schema_for(&crds, &api_version, &kind),
                schema_for(&eso, &api_version, &kind),
                &mut d,
            );
            for p in d.problems {
                failures.push(format!("{fname}:{index} {kind}: {p}"));
            }
            for p in d.pruned {
                pruned.insert(format!("{fname}:{index} {p}"));
            }
        }
    }
    println!(
        "round-tripped {} documents ({} invalid per ESO's CRDs, {} fields pruned as ESO's apiserver would); skipped {} external-secrets documents (listed); ignored {other_kinds} documents of other kinds",
        checked - invalid.len(),
        invalid.len(),
        pruned.len(),
        skipped.len()
    );
    for f in &failures {
        println!("FAIL {f}");
    }
    let expected_invalid: BTreeSet<String> = EXPECTED_INVALID
        .iter()
        .map(|s| s.split(' ').next().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        invalid, expected_invalid,
        "documents that fail to deserialise changed; see the `invalid:` lines"
    );
    let expected_pruned: BTreeSet<String> =
        EXPECTED_PRUNED.iter().map(|s| (*s).to_owned()).collect();
    assert_eq!(
        pruned, expected_pruned,
        "fields unknown to ESO's schema (pruned by the apiserver) changed"
    );
    let expected: BTreeSet<String> = EXPECTED_SKIPS.iter().map(|s| (*s).to_owned()).collect();
    assert_eq!(
        skipped, expected,
        "the skipped documents changed; update EXPECTED_SKIPS deliberately"
    );
    assert!(
        checked >= 200,
        "suspiciously few documents checked: {checked}"
    );
    assert!(
        failures.is_empty(),
        "round-trip failures:\n  {}",
        failures.join("\n  ")
    );
}

#[test]
fn diff_reports_lost_and_added_fields() {
    let orig = serde_json::json!({"spec": {"a": 1, "b": [1, 2]}});
    let out = serde_json::json!({"spec": {"b": [1], "c": "x"}});
    let mut problems = Vec::new();
    diff("", &orig, &out, None, &mut problems);
    assert!(
        problems.iter().any(|p| p == ".spec.a: lost"),
        "{problems:?}"
    );
    assert!(
        problems.iter().any(|p| p.starts_with(".spec.b: 2 items")),
        "{problems:?}"
    );
    assert!(
        problems.iter().any(|p| p.starts_with(".spec.c: added")),
        "{problems:?}"
    );
}
