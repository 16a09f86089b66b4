//! `esr template` renders an ExternalSecret's template from files, like `esoctl template`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;

fn write(dir: &std::path::Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

const ES: &str = r#"apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata:
  name: app
  namespace: prod
spec:
  secretStoreRef: {name: store, kind: SecretStore}
  target:
    name: app-secret
    template:
      type: kubernetes.io/dockerconfigjson
      metadata:
        labels:
          registry: '{{ .registry }}'
      data:
        .dockerconfigjson: '{"auths":{"{{ .registry }}":{"auth":"{{ printf "%s:%s" .user .pass | b64enc }}"}}}'
      templateFrom:
      - configMap:
          name: tpl
          items:
          - key: extra
"#;

#[test]
fn renders_secret_yaml() {
    let dir = tempfile::tempdir().unwrap();
    // the ExternalSecret may follow other documents in the file
    let es = write(
        dir.path(),
        "es.yaml",
        &format!(
            "apiVersion: external-secrets.io/v1\nkind: SecretStore\nmetadata:\n  name: store\n---\n{ES}"
        ),
    );
    let data = write(
        dir.path(),
        "data.yaml",
        "registry: quay.io\nuser: bot\npass: abc123\n",
    );
    let cm = write(
        dir.path(),
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: tpl\ndata:\n  extra: 'user={{ .user }}'\n",
    );
    let out = Command::new(env!("CARGO_BIN_EXE_esr"))
        .args(["template", "-f"])
        .arg(&es)
        .arg("--data")
        .arg(&data)
        .arg("--template-from")
        .arg(&cm)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: yaml_serde::Value = yaml_serde::from_str(&stdout).unwrap();
    assert_eq!(doc["kind"].as_str(), Some("Secret"));
    assert_eq!(doc["metadata"]["name"].as_str(), Some("app-secret"));
    assert_eq!(doc["metadata"]["namespace"].as_str(), Some("prod"));
    assert_eq!(
        doc["metadata"]["labels"]["registry"].as_str(),
        Some("quay.io")
    );
    assert_eq!(doc["type"].as_str(), Some("kubernetes.io/dockerconfigjson"));
    use base64::Engine as _;
    let dec = |k: &str| {
        let v = doc["data"][k]
            .as_str()
            .unwrap_or_else(|| panic!("missing data.{k} in {stdout}"));
        String::from_utf8(base64::engine::general_purpose::STANDARD.decode(v).unwrap()).unwrap()
    };
    assert_eq!(
        dec(".dockerconfigjson"),
        r#"{"auths":{"quay.io":{"auth":"Ym90OmFiYzEyMw=="}}}"#
    );
    assert_eq!(dec("extra"), "user=bot");
}

#[test]
fn base64_data_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let es = write(
        dir.path(),
        "es.yaml",
        "apiVersion: external-secrets.io/v1\nkind: ExternalSecret\nmetadata: {name: x}\nspec:\n  target:\n    template:\n      data:\n        k: '{{ .v | upper }}'\n",
    );
    let data = write(dir.path(), "data.json", r#"{"v": "aGVsbG8="}"#);
    let out = Command::new(env!("CARGO_BIN_EXE_esr"))
        .args(["template", "--base64", "-f"])
        .arg(&es)
        .arg("--data")
        .arg(&data)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: yaml_serde::Value = yaml_serde::from_slice(&out.stdout).unwrap();
    assert_eq!(
        doc["data"]["k"].as_str(),
        Some("SEVMTE8="),
        "HELLO in base64"
    );
    assert_eq!(doc["type"].as_str(), Some("Opaque"));

    // a template error is reported on stderr with a non-zero exit
    let bad = write(
        dir.path(),
        "bad.yaml",
        "apiVersion: external-secrets.io/v1\nkind: ExternalSecret\nmetadata: {name: x}\nspec:\n  target:\n    template:\n      data:\n        k: '{{ .missing }}'\n",
    );
    let out = Command::new(env!("CARGO_BIN_EXE_esr"))
        .args(["template", "-f"])
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("map has no entry for key \\\"missing\\\"")
            || stderr.contains("map has no entry for key \"missing\""),
        "{stderr}"
    );
}
