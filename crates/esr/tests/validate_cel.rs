//! `esr validate` evaluates the CRDs' own `x-kubernetes-validations` (CEL) rules: a rule added to
//! a CRD is enforced with no other code change, with the API server's message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

fn project(sub: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(sub)
}

fn run(args: &[&std::ffi::OsStr]) -> (Vec<Value>, i32) {
    let out = Command::new(env!("CARGO_BIN_EXE_esr"))
        .arg("validate")
        .args(args)
        .args(["--output", "json"])
        .output()
        .expect("run esr");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let v: Vec<Value> = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "bad JSON ({e}): {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (v, out.status.code().unwrap_or(-1))
}

const PUSH_SECRET: &str = r#"
apiVersion: external-secrets.io/v1alpha1
kind: PushSecret
metadata:
  name: p
  namespace: default
spec:
  secretStoreRefs:
    - name: store
  selector:
    secret:
      name: source
  data:
    - match:
        secretKey: a
        remoteRef:
          remoteKey: a
    - match:
        secretKey: b
        remoteRef:
          remoteKey: b
"#;

#[test]
fn a_rule_added_to_the_crd_is_enforced_with_the_api_server_message() {
    let dir = tempfile::tempdir().unwrap();
    let crds = dir.path().join("crds");
    std::fs::create_dir(&crds).unwrap();
    let mut crd: Value = yaml_serde::from_str(
        &std::fs::read_to_string(project("crds/external-secrets.io_pushsecrets.yaml")).unwrap(),
    )
    .unwrap();
    for v in crd["spec"]["versions"].as_array_mut().unwrap() {
        v["schema"]["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-validations"] = json!([
            {"rule": "!has(self.data) || size(self.data) <= 1", "message": "at most one data entry"}
        ]);
    }
    std::fs::write(
        crds.join("pushsecrets.yaml"),
        yaml_serde::to_string(&crd).unwrap(),
    )
    .unwrap();
    let manifest = dir.path().join("ps.yaml");
    std::fs::write(&manifest, PUSH_SECRET).unwrap();

    let (r, code) = run(&["--crds".as_ref(), crds.as_os_str(), manifest.as_os_str()]);
    assert_eq!(code, 1, "{r:?}");
    assert_eq!(r[0]["result"], "ERROR");
    assert_eq!(
        r[0]["reasons"],
        json!(["spec: Invalid value: at most one data entry"])
    );

    // the same manifest against the unchanged CRDs
    let (r, code) = run(&[manifest.as_os_str()]);
    assert_eq!(code, 0, "{r:?}");
    assert_eq!(r[0]["result"], "OK");
}

#[test]
fn eso_cel_rule_violation_is_an_error_with_the_api_server_message() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("ps.yaml");
    std::fs::write(
        &manifest,
        r#"
apiVersion: external-secrets.io/v1alpha1
kind: PushSecret
metadata:
  name: no-store-name
  namespace: default
spec:
  secretStoreRefs:
    - name: store
  selector:
    secret:
      name: source
  dataTo:
    - storeRef:
        kind: SecretStore
    - storeRef:
        name: s
      remoteKey: bundle
      rewrite:
        - transform:
            template: "x-{{ .value }}"
"#,
    )
    .unwrap();
    let eso_crds = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/compat/eso-crds");
    for crds in [project("crds"), eso_crds] {
        let (r, code) = run(&["--crds".as_ref(), crds.as_os_str(), manifest.as_os_str()]);
        assert_eq!(code, 1, "{r:?}");
        assert_eq!(
            r[0]["reasons"],
            json!([
                "spec.dataTo[0]: Invalid value: storeRef must specify either name or labelSelector",
                "spec.dataTo[1]: Invalid value: remoteKey and rewrite are mutually exclusive: rewrite is only supported in per-key mode (without remoteKey)"
            ]),
            "{}",
            crds.display()
        );
    }
}
