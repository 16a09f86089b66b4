//! `esr migrate kes` end to end:
//! - `esr validate` (the binary) accepts every golden output of crates/esr-migrate;
//! - KES manifests are converted by the binary, the generated stores are replaced by fake-backed
//!   stores of the same name and kind (holding the values the KES backends would), the converted
//!   ExternalSecrets are applied to esr-testkit with `esr controller` running, and the Secrets
//!   come out with the names and keys the KES objects described (and the values KES would have
//!   written), including templates, several Vault mounts and a `--takeover merge` adoption.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use esr_e2e::{Env, esr_binary, repo_root, wait_for};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(45);

#[test]
fn golden_outputs_pass_esr_validate() {
    let golden = repo_root().join("crates/esr-migrate/tests/golden");
    let out = Command::new(esr_binary().unwrap())
        .args(["validate", "-f"])
        .arg(&golden)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "esr validate failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ok = stdout.lines().filter(|l| l.starts_with("OK ")).count();
    let skipped: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("SKIPPED "))
        .collect();
    assert!(
        stdout
            .lines()
            .all(|l| l.starts_with("OK ") || l.starts_with("SKIPPED ")),
        "{stdout}"
    );
    // Only the pass-through ConfigMap is skipped; every ExternalSecret and store is checked.
    assert!(
        skipped.iter().all(|l| l.contains("ConfigMap/unrelated")),
        "{skipped:?}"
    );
    let es_and_stores: usize = std::fs::read_dir(&golden)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .map(|p| {
            let text = std::fs::read_to_string(p).unwrap();
            text.matches("\napiVersion: external-secrets.io/v1\n")
                .count()
        })
        .sum();
    assert!(es_and_stores > 30, "{es_and_stores}");
    assert_eq!(ok, es_and_stores, "{stdout}");
}

fn resource(kind: &str) -> (ApiResource, bool) {
    let (group, version, plural, namespaced) = match kind {
        "ExternalSecret" => ("external-secrets.io", "v1", "externalsecrets", true),
        "SecretStore" => ("external-secrets.io", "v1", "secretstores", true),
        "ClusterSecretStore" => ("external-secrets.io", "v1", "clustersecretstores", false),
        other => panic!("unsupported kind {other}"),
    };
    let gvk = GroupVersionKind::gvk(group, version, kind);
    (ApiResource::from_gvk_with_plural(&gvk, plural), namespaced)
}

async fn apply(env: &Env, obj: &Value) {
    let mut obj = obj.clone();
    env.scope_object(&mut obj);
    let obj = &obj;
    let kind = obj["kind"].as_str().unwrap();
    let name = obj["metadata"]["name"].as_str().unwrap();
    let (ar, namespaced) = resource(kind);
    let api: Api<DynamicObject> = match obj["metadata"]["namespace"].as_str() {
        Some(ns) if namespaced => Api::namespaced_with(env.client(), ns, &ar),
        _ => Api::all_with(env.client(), &ar),
    };
    api.patch(name, &PatchParams::apply("e2e").force(), &Patch::Apply(obj))
        .await
        .unwrap_or_else(|e| panic!("applying {kind}/{name}: {e}"));
}

fn decoded(s: &Secret) -> BTreeMap<String, String> {
    s.data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), String::from_utf8_lossy(&v.0).into_owned()))
        .collect()
}

async fn wait_secret(env: &Env, ns: &str, name: &str, want: &[(&str, &str)]) -> Secret {
    let want: BTreeMap<String, String> = want
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let api = Api::<Secret>::namespaced(env.client(), ns);
    let got = wait_for(
        &format!("secret {ns}/{name} = {want:?}"),
        TIMEOUT,
        || async {
            let s = api.get_opt(name).await.ok()??;
            (decoded(&s) == want).then_some(s)
        },
    )
    .await;
    match got {
        Ok(s) => s,
        Err(e) => {
            let now = api.get_opt(name).await.unwrap().map(|s| decoded(&s));
            panic!("{e}: secret is now {now:?}")
        }
    }
}

/// Runs `esr migrate kes` on `kes_yaml` and returns (stores, external secrets, report).
fn migrate(dir: &Path, kes_yaml: &str, extra: &[&str]) -> (Vec<Value>, Vec<Value>, String) {
    let input = dir.join("kes.yaml");
    std::fs::write(&input, kes_yaml).unwrap();
    let out_dir = dir.join("out");
    let out = Command::new(esr_binary().unwrap())
        .args(["migrate", "kes", "-f"])
        .arg(&input)
        .arg("--out")
        .arg(&out_dir)
        .args([
            "--aws-region",
            "us-east-1",
            "--vault-addr",
            "https://vault.invalid:8200",
        ])
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "esr migrate kes: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let read = |f: &str| -> Vec<Value> {
        let text = std::fs::read_to_string(out_dir.join(f)).unwrap();
        esr_migrate_docs(&text)
    };
    let report = std::fs::read_to_string(out_dir.join("report.txt")).unwrap();
    (read("stores.yaml"), read("kes.yaml"), report)
}

fn esr_migrate_docs(text: &str) -> Vec<Value> {
    use serde::Deserialize as _;
    yaml_serde::Deserializer::from_str(text)
        .map(|d| Value::deserialize(d).unwrap())
        .filter(|v| !v.is_null())
        .collect()
}

/// The fake-backed replacement of a generated store: same kind and name, the provider swapped
/// for `fake` with `data`.
fn fake_replacement(store: &Value, data: Value) -> Value {
    let mut s = store.clone();
    s["spec"] = json!({"provider": {"fake": {"data": data}}});
    s["metadata"]["annotations"] = json!({"external-secrets.io/ignore-maintenance-checks": "true"});
    s
}

fn kes_objects(ns: &str) -> String {
    format!(
        r#"
apiVersion: kubernetes-client.io/v1
kind: ExternalSecret
metadata:
  name: sm-app
  namespace: {ns}
spec:
  backendType: secretsManager
  roleArn: arn:aws:iam::123456789012:role/app
  dataFrom:
    - app/extra
  data:
    - key: app/db
      name: password
      property: password
    - key: app/db
      name: username
      property: username
    - key: app/db
      name: previous
      property: password
      versionStage: AWSPREVIOUS
    - key: app/cert
      name: cert.bin
      isBinary: true
  template:
    metadata:
      labels:
        team: "<%= JSON.parse(data.meta).team %>"
    stringData:
      url: "postgres://<%= data.username %>:<%= data['password'] %>@db"
      upper: "<%= data.username.toUpperCase() %>"
    data:
      token: "<%= Buffer.from(data.password).toString('base64') %>"
      static: aGVsbG8=
      raw: "<%= data.b64 %>"
---
apiVersion: kubernetes-client.io/v1
kind: ExternalSecret
metadata:
  name: vault-app
  namespace: {ns}
spec:
  backendType: vault
  vaultRole: app
  vaultMountPoint: kubernetes
  dataFrom:
    - team/kv/data/shared
  data:
    - name: password
      key: secret/data/app/db
      property: password
    - name: token
      key: team/kv/data/app/token
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: untouched
  namespace: {ns}
data:
  a: b
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn converted_manifests_produce_the_kes_secrets() {
    let env = Env::start().await.unwrap();
    let ns = env.namespace("kes").await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let (stores, docs, report) = migrate(tmp.path(), &kes_objects(&ns), &[]);
    assert!(
        report.contains(&format!("converted: ExternalSecret {ns}/sm-app")),
        "{report}"
    );
    assert!(
        report.contains(&format!("converted: ExternalSecret {ns}/vault-app")),
        "{report}"
    );
    assert!(
        report.contains("summary: 2 KES objects: 2 converted"),
        "{report}"
    );
    // The ConfigMap passes through unchanged, after the ExternalSecrets in input order.
    assert_eq!(docs.len(), 3);
    assert_eq!(docs[2]["kind"], "ConfigMap");
    assert_eq!(docs[2]["data"]["a"], "b");
    // One AWS store, two Vault stores (one per mount), all ClusterSecretStores.
    assert_eq!(stores.len(), 3, "{stores:?}");
    let _esr = env.start_esr(&[]).unwrap();
    for s in &stores {
        assert_eq!(s["kind"], "ClusterSecretStore");
        let p = &s["spec"]["provider"];
        let data = if p.get("aws").is_some() {
            assert_eq!(
                p["aws"]["auth"]["jwt"]["serviceAccountRef"]["name"],
                "esr-kes"
            );
            json!([
                {"key": "app/db", "value": "{\"username\":\"admin\",\"password\":\"s3cr3t\"}"},
                {"key": "app/db", "version": "AWSPREVIOUS", "value": "{\"username\":\"admin\",\"password\":\"old\"}"},
                {"key": "app/extra", "value": "{\"meta\":\"{\\\"team\\\":\\\"blue\\\"}\",\"extra\":\"x1\",\"b64\":\"aGVsbG8=\"}"},
                {"key": "app/cert", "value": "aGk="}
            ])
        } else if p["vault"]["path"] == "secret" {
            json!([{"key": "app/db", "value": "{\"password\":\"vault-pw\"}"}])
        } else {
            assert_eq!(p["vault"]["path"], "team/kv");
            json!([
                {"key": "app/token", "value": "{\"token\":\"tok\"}"},
                {"key": "shared", "value": "{\"s1\":\"v1\",\"s2\":\"v2\"}"}
            ])
        };
        apply(&env, &fake_replacement(s, data)).await;
    }
    for d in docs.iter().filter(|d| d["kind"] == "ExternalSecret") {
        apply(&env, d).await;
    }
    let sm = wait_secret(
        &env,
        &ns,
        "sm-app",
        &[
            ("password", "s3cr3t"),
            ("username", "admin"),
            ("previous", "old"),
            ("cert.bin", "hi"),
            ("meta", "{\"team\":\"blue\"}"),
            ("extra", "x1"),
            ("url", "postgres://admin:s3cr3t@db"),
            ("token", "s3cr3t"),
            ("static", "hello"),
            ("upper", "ADMIN"),
            ("b64", "aGVsbG8="),
            ("raw", "hello"),
        ],
    )
    .await;
    assert_eq!(sm.metadata.labels.unwrap()["team"], "blue");
    wait_secret(
        &env,
        &ns,
        "vault-app",
        &[
            ("password", "vault-pw"),
            ("token", "tok"),
            ("s1", "v1"),
            ("s2", "v2"),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn takeover_merge_keeps_the_existing_secret() {
    let env = Env::start().await.unwrap();
    let ns = env.namespace("kesmerge").await.unwrap();
    // The Secret KES wrote, with KES's ownerReference already stripped (runbook step).
    let existing: Secret = serde_json::from_value(json!({
        "metadata": {"name": "legacy", "namespace": ns},
        "data": {"kept": "a2VwdA==", "password": "b2xk"}
    }))
    .unwrap();
    Api::<Secret>::namespaced(env.client(), &ns)
        .create(&PostParams::default(), &existing)
        .await
        .unwrap();
    let kes = format!(
        "apiVersion: kubernetes-client.io/v1\nkind: ExternalSecret\nmetadata:\n  name: legacy\n  namespace: {ns}\nspec:\n  backendType: secretsManager\n  data:\n    - key: legacy/pw\n      name: password\n"
    );
    let tmp = tempfile::tempdir().unwrap();
    let (stores, docs, _) = migrate(
        tmp.path(),
        &kes,
        &["--takeover", "merge", "--store-kind", "SecretStore"],
    );
    assert_eq!(docs[0]["spec"]["target"]["creationPolicy"], "Merge");
    assert_eq!(stores[0]["kind"], "SecretStore");
    assert_eq!(stores[0]["metadata"]["namespace"], ns.as_str());
    let _esr = env.start_esr(&[]).unwrap();
    apply(
        &env,
        &fake_replacement(&stores[0], json!([{"key": "legacy/pw", "value": "new"}])),
    )
    .await;
    apply(&env, &docs[0]).await;
    let s = wait_secret(
        &env,
        &ns,
        "legacy",
        &[("kept", "kept"), ("password", "new")],
    )
    .await;
    // Merge never takes ownership.
    assert!(s.metadata.owner_references.unwrap_or_default().is_empty());
}

#[test]
fn exit_codes_and_stdout_mode() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = esr_binary().unwrap();
    // A KES object that cannot be converted is reported, not an input error.
    let ali = tmp.path().join("ali.yaml");
    std::fs::write(
        &ali,
        "apiVersion: kubernetes-client.io/v1\nkind: ExternalSecret\nmetadata:\n  name: a\nspec:\n  backendType: alicloudSecretsManager\n  data:\n    - key: k\n      name: k\n---\napiVersion: kubernetes-client.io/v1\nkind: ExternalSecret\nmetadata:\n  name: b\n  namespace: n\nspec:\n  backendType: secretsManager\n  region: eu-west-1\n  data:\n    - key: k\n      name: k\n",
    )
    .unwrap();
    let out = Command::new(&bin)
        .args(["migrate", "kes", "-f"])
        .arg(&ali)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("not converted: ExternalSecret a ("),
        "{stderr}"
    );
    assert!(
        stderr.contains("converted: ExternalSecret n/b ("),
        "{stderr}"
    );
    // stdout: the store first, then the ExternalSecret; no output for the rejected object.
    let docs = esr_migrate_docs(&stdout);
    let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["ClusterSecretStore", "ExternalSecret"], "{stdout}");
    assert_eq!(docs[1]["metadata"]["name"], "b");

    // Invalid YAML and a missing file are input errors: exit 1, the valid file still converted.
    let bad = tmp.path().join("bad.yaml");
    std::fs::write(&bad, "kind: [unclosed\n").unwrap();
    let out = Command::new(&bin)
        .args(["migrate", "kes", "-f"])
        .arg(&bad)
        .arg(&ali)
        .arg(tmp.path().join("missing.yaml"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("error: ") && stderr.contains("bad.yaml"),
        "{stderr}"
    );
    assert!(stderr.contains("missing.yaml"), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("kind: ExternalSecret"));

    // An invalid option is an input error too.
    let out = Command::new(&bin)
        .args(["migrate", "kes", "--refresh-interval", "soon", "-f"])
        .arg(&ali)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--refresh-interval"));
}
