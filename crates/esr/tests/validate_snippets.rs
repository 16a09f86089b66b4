//! Acceptance tests for `esr validate`: the real binary over ESO's documentation snippets, and
//! one small manifest per error class.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn shared(sub: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/compat")
        .join(sub)
}

/// Runs `esr validate <args> --output json`, returning the results and the exit code.
fn run_json(args: &[&str]) -> (Vec<Value>, i32) {
    let out = Command::new(env!("CARGO_BIN_EXE_esr"))
        .arg("validate")
        .args(args)
        .args(["--output", "json"])
        .output()
        .expect("run esr");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let results: Vec<Value> = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "bad JSON ({e}): {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (results, out.status.code().unwrap_or(-1))
}

/// Runs `esr validate <args>` (text output).
fn run_text(args: &[&str]) -> (String, i32) {
    let out = Command::new(env!("CARGO_BIN_EXE_esr"))
        .arg("validate")
        .args(args)
        .output()
        .expect("run esr");
    (
        String::from_utf8(out.stdout).unwrap(),
        out.status.code().unwrap_or(-1),
    )
}

fn is_eso_group(api_version: &str) -> bool {
    matches!(
        api_version.split_once('/'),
        Some(("external-secrets.io" | "generators.external-secrets.io", _))
    )
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Why {
    /// The version is not served by ESO v2.9.0 (nor by esr).
    Unserved,
    /// A generator kind esr does not implement.
    GeneratorNotImplemented,
    /// The snippet is a documentation fragment that ESO v2.9.0 itself rejects (its CRD schema or
    /// its admission webhook); checked below by validating it against ESO's own CRDs too.
    InvalidForEso,
    /// A generic target (`target.manifest`): ESO's controller fails it without
    /// `--unsafe-allow-generic-targets`, and esr writes no generic targets.
    GenericTarget,
}

/// (file, index, kind/name, result, reason that must appear, why).
const EXCEPTIONS: &[(&str, usize, &str, &str, &str, Why)] = &[
    (
        "getallsecrets-find-by-tags.yaml",
        0,
        "ExternalSecret/find-by-tags",
        "ERROR",
        "version \"v1beta1\" of external-secrets.io ExternalSecret is not served; use v1",
        Why::Unserved,
    ),
    (
        "passworddepot-external-secret-json.yaml",
        0,
        "ExternalSecret/passworddepot-external-secret-example",
        "ERROR",
        "version \"v1alpha1\" of external-secrets.io ExternalSecret is not served; use v1",
        Why::Unserved,
    ),
    (
        "passworddepot-external-secret.yaml",
        0,
        "ExternalSecret/passworddepot-external-secret-example",
        "ERROR",
        "version \"v1alpha1\" of external-secrets.io ExternalSecret is not served; use v1",
        Why::Unserved,
    ),
    (
        "passworddepot-secret-store.yaml",
        0,
        "ClusterSecretStore/external-secrets-store",
        "ERROR",
        "version \"v1alpha1\" of external-secrets.io ClusterSecretStore is not served; use v1",
        Why::Unserved,
    ),
    (
        "template-v2-push-secret.yaml",
        0,
        "PushSecret/template",
        "ERROR",
        "version \"v1beta1\" of external-secrets.io PushSecret is not served; use v1alpha1",
        Why::Unserved,
    ),
    (
        "beyondtrustworkloadcredentials-dynamic-secret.yaml",
        0,
        "BeyondtrustWorkloadCredentialsDynamicSecret/aws-dynamic-generator",
        "SKIPPED",
        "generator kind BeyondtrustWorkloadCredentialsDynamicSecret is not implemented by esr",
        Why::GeneratorNotImplemented,
    ),
    (
        "generator-acr-argocd-helm-repo.yaml",
        0,
        "ACRAccessToken/azurecr",
        "SKIPPED",
        "generator kind ACRAccessToken is not implemented by esr",
        Why::GeneratorNotImplemented,
    ),
    (
        "generator-acr.yaml",
        0,
        "ACRAccessToken/my-azurecr",
        "SKIPPED",
        "generator kind ACRAccessToken is not implemented by esr",
        Why::GeneratorNotImplemented,
    ),
    (
        "generator-cloudsmith.yaml",
        0,
        "CloudsmithAccessToken/my-cloudsmith-token",
        "SKIPPED",
        "generator kind CloudsmithAccessToken is not implemented by esr",
        Why::GeneratorNotImplemented,
    ),
    (
        "generator-gcr.yaml",
        0,
        "GCRAccessToken/gcr-gen",
        "SKIPPED",
        "generator kind GCRAccessToken is not implemented by esr",
        Why::GeneratorNotImplemented,
    ),
    (
        "generator-github.yaml",
        0,
        "GithubAccessToken/github-auth-token",
        "SKIPPED",
        "generator kind GithubAccessToken is not implemented by esr",
        Why::GeneratorNotImplemented,
    ),
    (
        "generator-gitlab.yaml",
        0,
        "GitlabDeployToken/gitlab-deploy-token",
        "SKIPPED",
        "generator kind GitlabDeployToken is not implemented by esr",
        Why::GeneratorNotImplemented,
    ),
    (
        "generator-grafana-basicauth.yaml",
        0,
        "Grafana/grafana-token",
        "SKIPPED",
        "generator kind Grafana is not implemented by esr",
        Why::GeneratorNotImplemented,
    ),
    (
        "generator-grafana.yaml",
        0,
        "Grafana/grafana-token",
        "SKIPPED",
        "generator kind Grafana is not implemented by esr",
        Why::GeneratorNotImplemented,
    ),
    (
        "generator-mfa.yaml",
        0,
        "MFA/my-mfa-generator",
        "SKIPPED",
        "generator kind MFA is not implemented by esr",
        Why::GeneratorNotImplemented,
    ),
    (
        "generator-quay.yaml",
        0,
        "QuayAccessToken/my-quay-token",
        "SKIPPED",
        "generator kind QuayAccessToken is not implemented by esr",
        Why::GeneratorNotImplemented,
    ),
    (
        "generator-sshkey-ecdsa.yaml",
        0,
        "SSHKey/example-ecdsa-key",
        "SKIPPED",
        "generator kind SSHKey is not implemented by esr",
        Why::GeneratorNotImplemented,
    ),
    (
        "generator-sshkey-rsa.yaml",
        0,
        "SSHKey/example-rsa-key",
        "SKIPPED",
        "generator kind SSHKey is not implemented by esr",
        Why::GeneratorNotImplemented,
    ),
    (
        "generator-sshkey.yaml",
        0,
        "SSHKey/example-ssh-key",
        "SKIPPED",
        "generator kind SSHKey is not implemented by esr",
        Why::GeneratorNotImplemented,
    ),
    (
        "generator-uuid.yaml",
        0,
        "UUID/my-uuid",
        "SKIPPED",
        "generator kind UUID is not implemented by esr",
        Why::GeneratorNotImplemented,
    ),
    (
        "manifest-advanced-path.yaml",
        0,
        "ExternalSecret/custom-resource-config",
        "ERROR",
        "spec.target.manifest: invalid generic target: generic targets are disabled. Enable with --unsafe-allow-generic-targets flag",
        Why::GenericTarget,
    ),
    (
        "manifest-argocd-app.yaml",
        0,
        "ExternalSecret/argocd-app",
        "ERROR",
        "spec.target.manifest: invalid generic target: generic targets are disabled. Enable with --unsafe-allow-generic-targets flag",
        Why::GenericTarget,
    ),
    (
        "manifest-basic-configmap.yaml",
        0,
        "ExternalSecret/application-config",
        "ERROR",
        "spec.target.manifest: invalid generic target: generic targets are disabled. Enable with --unsafe-allow-generic-targets flag",
        Why::GenericTarget,
    ),
    (
        "manifest-labeled-configmap.yaml",
        0,
        "ExternalSecret/labeled-config",
        "ERROR",
        "spec.target.manifest: invalid generic target: generic targets are disabled. Enable with --unsafe-allow-generic-targets flag",
        Why::GenericTarget,
    ),
    (
        "manifest-templated-configmap.yaml",
        0,
        "ExternalSecret/templated-config",
        "ERROR",
        "spec.target.manifest: invalid generic target: generic targets are disabled. Enable with --unsafe-allow-generic-targets flag",
        Why::GenericTarget,
    ),
    // Documentation fragments that ESO v2.9.0 rejects as well:
    (
        "certsans-template-v2-external-secret.yaml",
        0,
        "ExternalSecret/cert-sans-example",
        "ERROR",
        "either data or dataFrom should be specified",
        Why::InvalidForEso,
    ),
    (
        "jwk-template-v2-external-secret.yaml",
        0,
        "ExternalSecret/template",
        "ERROR",
        "either data or dataFrom should be specified",
        Why::InvalidForEso,
    ),
    (
        "volcengine-external-secrets.yaml",
        0,
        "ExternalSecret/my-app-secret",
        "ERROR",
        "duplicate secretKey found: password",
        Why::InvalidForEso,
    ),
    (
        "full-external-secret.yaml",
        0,
        "ExternalSecret/hello-world",
        "ERROR",
        "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.annotations of type string",
        Why::InvalidForEso,
    ),
    (
        "full-cluster-external-secret.yaml",
        0,
        "ClusterExternalSecret/hello-world",
        "ERROR",
        "strict decoding error: unknown field \"spec.externalSecretSpec.dataFrom[0].key\"",
        Why::InvalidForEso,
    ),
    (
        "full-cluster-push-secret.yaml",
        1,
        "ClusterPushSecret/hello-world",
        "ERROR",
        "spec.pushSecretSpec.selector: Too many: 2: must have at most 1 item",
        Why::InvalidForEso,
    ),
    (
        "full-cluster-secret-store.yaml",
        0,
        "ClusterSecretStore/example",
        "ERROR",
        "spec.provider: Too many: 5: must have at most 1 item",
        Why::InvalidForEso,
    ),
    (
        "full-secret-store.yaml",
        0,
        "SecretStore/example",
        "ERROR",
        "spec.provider: Too many: 3: must have at most 1 item",
        Why::InvalidForEso,
    ),
    (
        "github-push-secret.yaml",
        0,
        "PushSecret/github-push-secret-example",
        "ERROR",
        "spec.selector.secret.name: Invalid value: \"EXTSERCRET\": spec.selector.secret.name in body should match",
        Why::InvalidForEso,
    ),
    (
        "ngrok-push-secret-with-metadata.yaml",
        0,
        "PushSecret/ngrok-push-secret-example",
        "ERROR",
        "spec.selector.secret.name: Invalid value: \"SECRET_NAME\"",
        Why::InvalidForEso,
    ),
    (
        "ngrok-push-secret.yaml",
        0,
        "PushSecret/ngrok-push-secret-example",
        "ERROR",
        "spec.selector.secret.name: Invalid value: \"SECRET_NAME\"",
        Why::InvalidForEso,
    ),
    (
        "ibm-external-secret-with-metadata.yaml",
        0,
        "ExternalSecret/database-credentials",
        "ERROR",
        "strict decoding error: unknown field \"spec.dataFrom[0].secretKey\"",
        Why::InvalidForEso,
    ),
    (
        "multiline-template-v1-external-secret.yaml",
        0,
        "ExternalSecret/template",
        "ERROR",
        "strict decoding error: unknown field \"spec.target.engineVersion\"",
        Why::InvalidForEso,
    ),
    (
        "gcpsm-sa-secret-store.yaml",
        0,
        "SecretStore/demo-store",
        "ERROR",
        "spec.provider.gcpsm.projectID in body must be of type string: \"array\"",
        Why::InvalidForEso,
    ),
    (
        "gcpsm-wif-core-controller-secret-store.yaml",
        0,
        "SecretStore/demo-store",
        "ERROR",
        "spec.provider.gcpsm.projectID in body must be of type string: \"array\"",
        Why::InvalidForEso,
    ),
    (
        "gcpsm-wif-iam-secret-store.yaml",
        0,
        "SecretStore/demo-store",
        "ERROR",
        "spec.provider.gcpsm.projectID in body must be of type string: \"array\"",
        Why::InvalidForEso,
    ),
    (
        "gcpsm-wif-non-native-iam-secret-store.yaml",
        0,
        "SecretStore/demo-store",
        "ERROR",
        "spec.provider.gcpsm.projectID in body must be of type string: \"array\"",
        Why::InvalidForEso,
    ),
    (
        "gcpsm-wif-sa-secret-store-with-explicit-name-and-location.yaml",
        0,
        "SecretStore/demo-store",
        "ERROR",
        "spec.provider.gcpsm.projectID in body must be of type string: \"array\"",
        Why::InvalidForEso,
    ),
    (
        "gcpsm-wif-sa-secret-store.yaml",
        0,
        "SecretStore/demo-store",
        "ERROR",
        "spec.provider.gcpsm.projectID in body must be of type string: \"array\"",
        Why::InvalidForEso,
    ),
    (
        "pkcs12-template-v1-external-secret.yaml",
        0,
        "ExternalSecret/template",
        "ERROR",
        "spec.target.template.engineVersion: Unsupported value: \"v1\": supported values: \"v2\"",
        Why::InvalidForEso,
    ),
    (
        "vault-mtls-store.yaml",
        0,
        "SecretStore/vault-backend",
        "ERROR",
        "strict decoding error: unknown field \"spec.provider.vault.tls.clientCert\"",
        Why::InvalidForEso,
    ),
];

fn file_name(r: &Value) -> String {
    Path::new(r["file"].as_str().unwrap())
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

fn key(r: &Value) -> (String, usize) {
    (file_name(r), r["index"].as_u64().unwrap() as usize)
}

#[test]
fn eso_snippets_are_ok_except_the_listed_exceptions() {
    let dir = shared("eso-snippets");
    assert!(dir.is_dir(), "{} missing", dir.display());
    let (results, code) = run_json(&["-f", dir.to_str().unwrap()]);
    assert_eq!(code, 1, "some listed exceptions are errors");

    // Every document of every file is reported once, with the API version read from the file.
    let mut api_versions: BTreeMap<(String, usize), String> = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        for (i, doc) in yaml_serde::Deserializer::from_str(&text).enumerate() {
            let v: Value = serde::Deserialize::deserialize(doc).unwrap();
            if !v.is_null() {
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                api_versions.insert(
                    (name, i),
                    v["apiVersion"].as_str().unwrap_or("").to_string(),
                );
            }
        }
    }
    let by_key: BTreeMap<(String, usize), &Value> = results.iter().map(|r| (key(r), r)).collect();
    assert_eq!(by_key.len(), results.len(), "duplicate result keys");
    assert_eq!(
        by_key.keys().collect::<Vec<_>>(),
        api_versions.keys().collect::<Vec<_>>()
    );

    let exceptions: BTreeMap<(String, usize), _> = EXCEPTIONS
        .iter()
        .map(|e| ((e.0.to_string(), e.1), e))
        .collect();
    assert_eq!(
        exceptions.len(),
        EXCEPTIONS.len(),
        "duplicate exception entries"
    );

    let mut ok = 0;
    let mut skipped_other = 0;
    for (k, r) in &by_key {
        let object = format!(
            "{}/{}",
            r["kind"].as_str().unwrap(),
            r["name"].as_str().unwrap()
        );
        let reasons: Vec<&str> = r["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_str().unwrap())
            .collect();
        if let Some((_, _, expected_object, result, reason, _)) = exceptions.get(k) {
            assert_eq!(&object, expected_object, "{k:?}");
            assert_eq!(r["result"], *result, "{k:?}: {reasons:?}");
            assert!(
                reasons.iter().any(|x| x.contains(reason)),
                "{k:?}: expected a reason containing {reason:?}, got {reasons:?}"
            );
        } else if is_eso_group(&api_versions[k]) {
            assert_eq!(r["result"], "OK", "{k:?} {object}: {reasons:?}");
            assert!(reasons.is_empty());
            ok += 1;
        } else {
            assert_eq!(r["result"], "SKIPPED", "{k:?}");
            assert_eq!(reasons, vec!["not an external-secrets.io object"], "{k:?}");
            skipped_other += 1;
        }
    }
    for k in exceptions.keys() {
        assert!(by_key.contains_key(k), "exception {k:?} names no document");
    }
    println!(
        "OK: {ok}, exceptions: {}, other kinds skipped: {skipped_other}",
        EXCEPTIONS.len()
    );
    assert!(ok >= 200, "only {ok} documents were OK");
}

#[test]
fn exceptions_invalid_for_eso_are_rejected_by_esos_own_crds_too() {
    let (results, _) = run_json(&[
        "--crds",
        shared("eso-crds").to_str().unwrap(),
        shared("eso-snippets").to_str().unwrap(),
    ]);
    let by_key: BTreeMap<(String, usize), &Value> = results.iter().map(|r| (key(r), r)).collect();
    for (file, index, object, _, _, why) in EXCEPTIONS {
        let r = by_key[&(file.to_string(), *index)];
        match why {
            Why::InvalidForEso | Why::Unserved | Why::GenericTarget => {
                assert_eq!(
                    r["result"], "ERROR",
                    "{file}:{index} {object} is valid for ESO's CRDs: {r}"
                )
            }
            Why::GeneratorNotImplemented => assert_eq!(r["result"], "SKIPPED", "{file}:{index}"),
        }
    }
}

// ------------------------------------------------------------------ error classes

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> PathBuf {
    let p = dir.path().join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// Validates one manifest and returns (result, reasons).
fn check(manifest: &str) -> (String, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let p = write(&dir, "m.yaml", manifest);
    let (results, code) = run_json(&["-f", p.to_str().unwrap()]);
    assert_eq!(results.len(), 1, "{results:?}");
    let r = &results[0];
    let result = r["result"].as_str().unwrap().to_string();
    assert_eq!(code, if result == "ERROR" { 1 } else { 0 });
    let reasons = r["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap().to_string())
        .collect();
    (result, reasons)
}

fn es(spec: &str) -> String {
    format!(
        "apiVersion: external-secrets.io/v1\nkind: ExternalSecret\nmetadata:\n  name: e1\nspec:\n{spec}"
    )
}

const DATA: &str = "  data:\n  - secretKey: k\n    remoteRef:\n      key: r\n";

fn assert_error(manifest: &str, expected: &[&str]) {
    let (result, reasons) = check(manifest);
    assert_eq!(result, "ERROR", "{manifest}");
    assert_eq!(reasons, expected, "{manifest}");
}

fn aws_store(kind: &str, service: &str, sm: &str) -> String {
    format!(
        "apiVersion: external-secrets.io/v1\nkind: {kind}\nmetadata:\n  name: aws\nspec:\n  provider:\n    aws:\n      service: {service}\n      region: eu-central-1\n{sm}"
    )
}

/// ESO's GCP store snippets write placeholders as `[PROJECT_ID]`, a YAML list, which ESO's CRD
/// rejects (see EXCEPTIONS). With the placeholders filled in, every one of them is valid.
#[test]
fn gcp_store_snippets_are_ok_with_their_placeholders_filled_in() {
    let dir = tempfile::tempdir().unwrap();
    let mut n = 0;
    let placeholder = regex::Regex::new(r"\[([A-Z_]+)\]").unwrap();
    for entry in std::fs::read_dir(shared("eso-snippets")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.starts_with("gcpsm-") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let filled = placeholder.replace_all(&text, |c: &regex::Captures<'_>| {
            c[1].to_lowercase().replace('_', "-")
        });
        write(&dir, &name, &filled);
        n += 1;
    }
    assert!(n >= 13, "only {n} gcpsm snippets");
    let (results, code) = run_json(&["-f", dir.path().to_str().unwrap()]);
    assert_eq!(results.len(), n, "{results:?}");
    for r in &results {
        assert_eq!(r["result"], "OK", "{r}");
    }
    assert_eq!(code, 0);
    let stores = results
        .iter()
        .filter(|r| r["kind"] == "SecretStore")
        .count();
    assert_eq!(stores, 6);
    // ESO's webhook rule: a namespaced store names only its own namespace.
    assert_error(
        "apiVersion: external-secrets.io/v1\nkind: SecretStore\nmetadata: {name: g, namespace: app}\nspec:\n  provider:\n    gcpsm:\n      projectID: p\n      auth:\n        secretRef:\n          secretAccessKeySecretRef: {name: k, key: sa.json, namespace: other}\n",
        &[
            "invalid auth secret data: namespace should either be empty or match the namespace of the SecretStore for a namespaced SecretStore",
        ],
    );
}

#[test]
fn provider_specific_store_checks_run_like_esos_webhook() {
    // ESO's aws ValidateStore: delete settings.
    assert_error(
        &aws_store(
            "SecretStore",
            "SecretsManager",
            "      secretsManager:\n        forceDeleteWithoutRecovery: true\n        recoveryWindowInDays: 7\n",
        ),
        &[
            "invalid SecretsManager settings: ForceDeleteWithoutRecovery conflicts with RecoveryWindowInDays",
        ],
    );
    // A namespaced store must not reference Secrets in other namespaces...
    let auth = "      auth:\n        secretRef:\n          accessKeyIDSecretRef: {name: aws, key: id, namespace: other}\n          secretAccessKeySecretRef: {name: aws, key: secret}\n";
    let store = aws_store("SecretStore", "SecretsManager", auth);
    let (result, reasons) =
        check(&store.replace("  name: aws\n", "  name: aws\n  namespace: app\n"));
    assert_eq!(result, "ERROR", "{reasons:?}");
    assert_eq!(
        reasons,
        vec![
            "invalid Auth.SecretRef.AccessKeyID: namespace should either be empty or match the namespace of the SecretStore for a namespaced SecretStore"
        ]
    );
    // ...which cannot be judged when the namespace comes from `kubectl -n`.
    assert_eq!(check(&store).0, "OK");
    // ParameterStore is served; CertificateManager is valid for ESO, only not implemented by
    // esr: both OK.
    for service in ["ParameterStore", "CertificateManager"] {
        let (result, reasons) = check(&aws_store("SecretStore", service, ""));
        assert_eq!(
            (result.as_str(), reasons),
            ("OK", Vec::<String>::new()),
            "{service}"
        );
    }
    let (result, reasons) = check(&aws_store("SecretStore", "SecretsManager", ""));
    assert_eq!((result.as_str(), reasons), ("OK", Vec::<String>::new()));
}

#[test]
fn valid_external_secret_is_ok_with_defaults_applied() {
    let (result, reasons) = check(&es(&format!("  secretStoreRef:\n    name: s\n{DATA}")));
    assert_eq!((result.as_str(), reasons), ("OK", Vec::<String>::new()));
}

#[test]
fn bad_enum() {
    assert_error(
        &es(&format!("  target:\n    creationPolicy: Foo\n{DATA}")),
        &[
            "spec.target.creationPolicy: Unsupported value: \"Foo\": supported values: \"Owner\", \"Orphan\", \"Merge\", \"None\", \"CreateOrMerge\"",
        ],
    );
}

#[test]
fn missing_required() {
    assert_error(
        &es("  data:\n  - remoteRef:\n      key: r\n"),
        &["spec.data[0].secretKey: Required value"],
    );
}

#[test]
fn unknown_field() {
    assert_error(
        &es(&format!("  bogus: 1\n{DATA}")),
        &["strict decoding error: unknown field \"spec.bogus\""],
    );
}

#[test]
fn wrong_type_and_pattern() {
    assert_error(
        &es(&format!("  refreshInterval: 5\n{DATA}")),
        &[
            "spec.refreshInterval: Invalid value: \"integer\": spec.refreshInterval in body must be of type string: \"integer\"",
        ],
    );
    assert_error(
        &es("  data:\n  - secretKey: a b\n    remoteRef:\n      key: r\n"),
        &[
            "spec.data[0].secretKey: Invalid value: \"a b\": spec.data[0].secretKey in body should match '^[-._a-zA-Z0-9]+$'",
        ],
    );
}

#[test]
fn invalid_name() {
    let (result, reasons) = check(&format!(
        "apiVersion: external-secrets.io/v1\nkind: ExternalSecret\nmetadata:\n  name: Bad_Name\nspec:\n{DATA}"
    ));
    assert_eq!(result, "ERROR");
    assert_eq!(reasons.len(), 1);
    assert!(
        reasons[0].starts_with(
            "metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain"
        ),
        "{reasons:?}"
    );
}

#[test]
fn semantic_rules() {
    let cases: &[(&str, &str)] = &[
        (
            "  target:\n    creationPolicy: Merge\n    deletionPolicy: Delete\n",
            "deletionPolicy=Delete must not be used when the controller doesn't own the secret. Please set creationPolicy=Owner",
        ),
        (
            "  target:\n    creationPolicy: None\n    deletionPolicy: Merge\n",
            "deletionPolicy=Merge must not be used with creationPolicy=None. There is no Secret to merge with",
        ),
        (
            "  target:\n    template:\n      type: bootstrap.kubernetes.io/token\n",
            "template type bootstrap.kubernetes.io/token is not supported",
        ),
        (
            "  target:\n    template:\n      type: kubernetes.io/service-account-token\n      metadata:\n        annotations:\n          kubernetes.io/service-account.name: sa\n",
            "template type kubernetes.io/service-account-token must not be used with the kubernetes.io/service-account.name annotation",
        ),
        (
            "  target:\n    template:\n      templateFrom:\n      - target: Spec\n        literal: x\n",
            "templateFrom[0].target \"Spec\" is not supported for a Secret target: must be one of Data, Annotations, Labels",
        ),
    ];
    for (target, expected) in cases {
        assert_error(&es(&format!("{target}{DATA}")), &[expected]);
    }
    assert_error(
        &es("  refreshInterval: 1h\n"),
        &["either data or dataFrom should be specified"],
    );
    assert_error(
        &es("  dataFrom:\n  - extract:\n      key: a\n    find:\n      name:\n        regexp: x\n"),
        &["extract, find, or generatorRef cannot be set at the same time"],
    );
    assert_error(
        &es("  dataFrom:\n  - rewrite: []\n"),
        &["either extract, find, or sourceRef must be set to dataFrom"],
    );
    // An empty sourceRef is already rejected by the schema (minProperties: 1), before the webhook
    // rule "generatorRef or storeRef must be set" (covered by esr-api's unit tests) is reached.
    assert_error(
        &es("  dataFrom:\n  - sourceRef: {}\n"),
        &[
            "spec.dataFrom[0].sourceRef: Invalid value: 0: spec.dataFrom[0].sourceRef in body should have at least 1 properties",
        ],
    );
    assert_error(
        &es(
            "  data:\n  - secretKey: k\n    remoteRef:\n      key: r\n  - secretKey: k\n    remoteRef:\n      key: s\n",
        ),
        &["duplicate secretKey found: k"],
    );
}

#[test]
fn store_rules() {
    let store = |kind: &str, extra: &str| {
        format!(
            "apiVersion: external-secrets.io/v1\nkind: {kind}\nmetadata:\n  name: s\nspec:\n  provider:\n    fake:\n      data: []\n{extra}"
        )
    };
    assert_eq!(
        check(&store("SecretStore", "  refreshInterval: 30\n")).0,
        "OK"
    );
    assert_error(
        &store("SecretStore", "  refreshInterval: -5\n"),
        &["refreshInterval must not be negative: -5"],
    );
    let (result, reasons) = check(&store("SecretStore", "  refreshInterval: soon\n"));
    assert_eq!(result, "ERROR");
    assert!(
        reasons[0].starts_with("refreshInterval is not a valid duration: "),
        "{reasons:?}"
    );
    let (result, reasons) = check(&store(
        "ClusterSecretStore",
        "  conditions:\n  - namespaceRegexes: [\"ok-.*\", \"(\"]\n",
    ));
    assert_eq!(result, "ERROR");
    assert_eq!(reasons.len(), 1);
    assert!(
        reasons[0].starts_with("failed to compile 1th namespace regex in 0th condition: "),
        "{reasons:?}"
    );
}

#[test]
fn versions_kinds_and_skips() {
    assert_error(
        "apiVersion: external-secrets.io/v1beta1\nkind: ExternalSecret\nmetadata:\n  name: e\nspec: {}\n",
        &["version \"v1beta1\" of external-secrets.io ExternalSecret is not served; use v1"],
    );
    assert_error(
        "apiVersion: external-secrets.io/v1\nkind: Bogus\nmetadata:\n  name: e\n",
        &["no matches for kind \"Bogus\" in version \"external-secrets.io/v1\""],
    );
    assert_eq!(
        check(
            "apiVersion: generators.external-secrets.io/v1alpha1\nkind: UUID\nmetadata:\n  name: u\nspec: {}\n"
        ),
        (
            "SKIPPED".to_string(),
            vec!["generator kind UUID is not implemented by esr".to_string()]
        )
    );
    assert_eq!(
        check("apiVersion: generators.external-secrets.io/v1alpha1\nkind: Password\nmetadata:\n  name: p\nspec:\n  length: 12\n").0,
        "OK"
    );
    assert_eq!(
        check("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n"),
        (
            "SKIPPED".to_string(),
            vec!["not an external-secrets.io object".to_string()]
        )
    );
}

#[test]
fn multi_document_files_directories_and_text_output() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let valid = es(&format!("  secretStoreRef:\n    name: s\n{DATA}"));
    write(
        &dir,
        "a.yaml",
        &format!(
            "---\n# only a comment\n---\n{valid}---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: x\n"
        ),
    );
    write(
        &dir,
        "sub/b.yml",
        &es(&format!("  target:\n    creationPolicy: Foo\n{DATA}")),
    );
    write(
        &dir,
        "sub/c.json",
        r#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}"#,
    );
    write(&dir, "notes.txt", "not yaml: [");
    let (text, code) = run_text(&["-f", dir.path().to_str().unwrap()]);
    assert_eq!(code, 1);
    let d = dir.path().display();
    let expected = [
        format!("OK {d}/a.yaml:1 ExternalSecret/e1"),
        format!("SKIPPED {d}/a.yaml:2 Secret/x: not an external-secrets.io object"),
        format!(
            "ERROR {d}/sub/b.yml:0 ExternalSecret/e1: spec.target.creationPolicy: Unsupported value: \"Foo\": supported values: \"Owner\", \"Orphan\", \"Merge\", \"None\", \"CreateOrMerge\""
        ),
        format!("SKIPPED {d}/sub/c.json:0 ConfigMap/c: not an external-secrets.io object"),
    ];
    assert_eq!(text.lines().collect::<Vec<_>>(), expected);

    // only the valid file: exit 0
    let (text, code) = run_text(&[dir.path().join("a.yaml").to_str().unwrap()]);
    assert_eq!(code, 0, "{text}");
}

#[test]
fn json_output_shape() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(&dir, "x.yaml", &es(&format!("  bogus: true\n{DATA}")));
    let (results, code) = run_json(&["-f", p.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert_eq!(
        results,
        vec![serde_json::json!({
            "file": p.display().to_string(),
            "index": 0,
            "kind": "ExternalSecret",
            "name": "e1",
            "result": "ERROR",
            "reasons": ["strict decoding error: unknown field \"spec.bogus\""]
        })]
    );
}

#[test]
fn status_is_ignored_like_on_create() {
    // The ExternalSecret CRD has the status subresource: the apiserver drops status on create.
    let (result, reasons) = check(&format!(
        "{}status:\n  bogus: true\n  refreshTime: 5\n",
        es(&format!("  secretStoreRef:\n    name: s\n{DATA}"))
    ));
    assert_eq!((result.as_str(), reasons), ("OK", Vec::<String>::new()));
}

#[test]
fn crd_cel_rules_are_enforced() {
    let ps = "apiVersion: external-secrets.io/v1alpha1\nkind: PushSecret\nmetadata:\n  name: p\nspec:\n  secretStoreRefs:\n  - name: s\n  selector:\n    secret:\n      name: src\n  dataTo:\n  - storeRef:\n      kind: SecretStore\n";
    assert_error(
        ps,
        &["spec.dataTo[0]: Invalid value: storeRef must specify either name or labelSelector"],
    );
}

#[test]
fn unreadable_file_is_an_error_for_that_file_only() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.yaml"), [0xff_u8, 0xfe]).unwrap();
    write(
        &dir,
        "b.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n",
    );
    let (text, code) = run_text(&["-f", dir.path().to_str().unwrap()]);
    assert_eq!(code, 1);
    let d = dir.path().display();
    assert_eq!(
        text.lines().collect::<Vec<_>>(),
        [
            format!("ERROR {d}/a.yaml:0 /: cannot read file: stream did not contain valid UTF-8"),
            format!("SKIPPED {d}/b.yaml:0 ConfigMap/c: not an external-secrets.io object"),
        ]
    );
}
