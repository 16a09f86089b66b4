//! Golden tests: every file in tests/input/ is converted and compared with tests/golden/.
//! Regenerate with `ESR_MIGRATE_BLESS=1 cargo nextest run -p esr-migrate --test golden`, then
//! review the diff line by line.
//!
//! Every output manifest is also checked the way `esr validate` does (prune unknown fields,
//! defaults, schema, then ESO's admission rules) with esr's CRDs; the binary itself is run over
//! the golden files by e2e/tests/migrate_kes.rs.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use esr_api::v1::{ClusterSecretStore, ExternalSecret, SecretStore};
use esr_migrate::{Document, Options, Status, StoreKind, Takeover};
use serde_json::Value;

fn dir(sub: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(sub)
}

fn golden_options() -> Options {
    Options {
        vault_addr: Some("https://vault.example.com:8200".into()),
        aws_region: Some("us-west-2".into()),
        ..Options::default()
    }
}

fn load(name: &str) -> Vec<Document> {
    let text = std::fs::read_to_string(dir("input").join(name)).unwrap();
    esr_migrate::parse_yaml_stream(&text)
        .unwrap()
        .into_iter()
        .enumerate()
        .map(|(index, value)| Document {
            source: format!("input/{name}"),
            index,
            value,
        })
        .collect()
}

/// `esr validate`'s checks for one manifest, returning the problems.
fn validate(v: &Value) -> Vec<String> {
    static SCHEMAS: OnceLock<Vec<(String, esr_schema::Schema)>> = OnceLock::new();
    let schemas = SCHEMAS.get_or_init(|| {
        esr_api::crds()
            .unwrap()
            .iter()
            .filter(|c| c.spec.group == "external-secrets.io")
            .filter_map(|c| {
                let v = serde_json::to_value(c).unwrap();
                esr_schema::Schema::from_crd(&v, "v1")
                    .unwrap()
                    .map(|s| (c.spec.names.kind.clone(), s))
            })
            .collect()
    });
    let kind = v["kind"].as_str().unwrap_or("");
    let Some((_, schema)) = schemas.iter().find(|(k, _)| k == kind) else {
        return vec![];
    };
    let mut obj = v.clone();
    let (unknown, errors) = schema.admit(&mut obj);
    let mut out: Vec<String> = unknown
        .iter()
        .map(|u| format!("unknown field {u}"))
        .collect();
    out.extend(errors.iter().map(|e| e.to_string()));
    let compile = |r: &str| esr_schema::compile_go_regex(r).map(|_| ());
    match kind {
        "ExternalSecret" => {
            let es: ExternalSecret = serde_json::from_value(obj).unwrap();
            out.extend(esr_api::validation::validate_external_secret(&es));
        }
        "SecretStore" => {
            let s: SecretStore = serde_json::from_value(obj).unwrap();
            out.extend(esr_api::validation::validate_secret_store(&s, &compile));
        }
        "ClusterSecretStore" => {
            let s: ClusterSecretStore = serde_json::from_value(obj).unwrap();
            out.extend(esr_api::validation::validate_cluster_secret_store(
                &s, &compile,
            ));
        }
        _ => {}
    }
    out
}

fn check_golden(case: &str, input: &str, opts: &Options) {
    let conv = esr_migrate::convert(&load(input), opts);
    for m in conv.all_manifests() {
        let problems = validate(m);
        assert!(
            problems.is_empty(),
            "{case}: {} fails validation: {problems:?}",
            m["metadata"]["name"]
        );
    }
    let yaml = esr_migrate::to_yaml_stream(conv.all_manifests()).unwrap();
    let report = conv.report_text();
    let gy = dir("golden").join(format!("{case}.yaml"));
    let gr = dir("golden").join(format!("{case}.report.txt"));
    if std::env::var("ESR_MIGRATE_BLESS").as_deref() == Ok("1") {
        std::fs::create_dir_all(dir("golden")).unwrap();
        std::fs::write(&gy, &yaml).unwrap();
        std::fs::write(&gr, &report).unwrap();
        return;
    }
    let want_yaml = std::fs::read_to_string(&gy).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (regenerate with ESR_MIGRATE_BLESS=1)",
            gy.display()
        )
    });
    let want_report = std::fs::read_to_string(&gr).unwrap();
    assert_eq!(
        yaml,
        want_yaml,
        "{case}: manifests differ from {}",
        gy.display()
    );
    assert_eq!(
        report,
        want_report,
        "{case}: report differs from {}",
        gr.display()
    );
}

#[test]
fn golden_secretsmanager() {
    check_golden("secretsmanager", "secretsmanager.yaml", &golden_options());
}

#[test]
fn golden_secretsmanager_secretstore_merge() {
    let opts = Options {
        store_kind: StoreKind::SecretStore,
        takeover: Takeover::Merge,
        service_account: "kes-migrated".into(),
        refresh_interval: Some("10s".into()),
        ..golden_options()
    };
    check_golden(
        "secretsmanager-secretstore-merge",
        "secretsmanager.yaml",
        &opts,
    );
}

#[test]
fn golden_systemmanager() {
    check_golden("systemmanager", "systemmanager.yaml", &golden_options());
}

#[test]
fn golden_vault() {
    let opts = Options {
        vault_default_role: Some("kes-default".into()),
        ..golden_options()
    };
    check_golden("vault", "vault.yaml", &opts);
}

#[test]
fn golden_azure() {
    check_golden("azure", "azure.yaml", &golden_options());
}

#[test]
fn golden_gcp() {
    check_golden("gcp", "gcp.yaml", &golden_options());
}

#[test]
fn golden_others() {
    check_golden("others", "others.yaml", &golden_options());
}

#[test]
fn golden_templates() {
    check_golden("templates", "templates.yaml", &golden_options());
}

/// Facts the golden files encode, asserted directly so that a careless re-bless cannot hide them.
#[test]
fn key_facts() {
    let conv = esr_migrate::convert(
        &load("vault.yaml"),
        &Options {
            vault_default_role: Some("kes-default".into()),
            ..golden_options()
        },
    );
    // vault-multi-mount: two mounts → two stores; entries on the second mount carry sourceRef.
    let es = conv
        .documents
        .iter()
        .find(|d| d.manifest["metadata"]["name"] == "vault-multi-mount")
        .unwrap();
    let spec = &es.manifest["spec"];
    let default_store = spec["secretStoreRef"]["name"].as_str().unwrap();
    assert_eq!(spec["secretStoreRef"]["kind"], "ClusterSecretStore");
    assert_eq!(spec["dataFrom"][0]["extract"]["key"], "shared/common");
    let token = spec["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["secretKey"] == "token")
        .unwrap();
    assert_eq!(token["remoteRef"]["key"], "app/token");
    assert_eq!(
        token["remoteRef"]["property"], "token",
        "vault property defaults to the Secret key"
    );
    let pw = spec["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["secretKey"] == "password")
        .unwrap();
    let other_store = pw["sourceRef"]["storeRef"]["name"].as_str().unwrap();
    assert_ne!(other_store, default_store);
    let store_paths: Vec<&str> = conv
        .stores
        .iter()
        .map(|s| {
            s.manifest["spec"]["provider"]["vault"]["path"]
                .as_str()
                .unwrap()
        })
        .collect();
    assert!(
        store_paths.contains(&"secret")
            && store_paths.contains(&"team/kv")
            && store_paths.contains(&"kv1"),
        "{store_paths:?}"
    );
    // Every store authenticates as esr-kes, never external-secrets.
    for s in &conv.stores {
        let sa =
            &s.manifest["spec"]["provider"]["vault"]["auth"]["kubernetes"]["serviceAccountRef"];
        assert_eq!(sa["name"], "esr-kes");
        assert_eq!(sa["namespace"], "esr-system");
    }
    let bad = conv
        .reports
        .iter()
        .find(|r| r.name == "vault-bad-kv")
        .unwrap();
    assert_eq!(bad.status, Status::NotConverted);

    let conv = esr_migrate::convert(&load("secretsmanager.yaml"), &golden_options());
    let es = &conv.documents[1].manifest["spec"];
    assert_eq!(es["target"]["name"], "hello-service-credentials");
    assert_eq!(es["target"]["creationPolicy"], "Owner");
    assert_eq!(es["data"][2]["remoteRef"]["version"], "AWSPREVIOUS");
    assert_eq!(
        es["data"][3]["remoteRef"]["version"],
        "uuid/xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
    );
    assert_eq!(es["data"][4]["remoteRef"]["decodingStrategy"], "Auto");
    // Same backend configuration → same store; different roleArn/region → different store.
    let names: Vec<&str> = conv
        .documents
        .iter()
        .map(|d| {
            d.manifest["spec"]["secretStoreRef"]["name"]
                .as_str()
                .unwrap()
        })
        .collect();
    assert_eq!(names[1], names[2]);
    assert_ne!(names[0], names[1]);
    assert_eq!(conv.stores.len(), 2);
    assert!(names.iter().all(
        |n| n.starts_with("kes-secretsmanager-") && n.len() == "kes-secretsmanager-".len() + 8
    ));

    let conv = esr_migrate::convert(&load("others.yaml"), &golden_options());
    assert_eq!(
        conv.documents[0].manifest["kind"], "ConfigMap",
        "pass-through first, unchanged"
    );
    assert_eq!(conv.documents[0].manifest, load("others.yaml")[0].value);
    let ali = conv
        .reports
        .iter()
        .find(|r| r.name == "alicloud-example")
        .unwrap();
    assert_eq!(ali.status, Status::NotConverted);
    assert!(ali.errors[0].contains("no Alibaba Cloud provider"));
}

#[test]
fn conversion_is_deterministic() {
    let a = esr_migrate::convert(&load("vault.yaml"), &golden_options());
    let b = esr_migrate::convert(&load("vault.yaml"), &golden_options());
    assert_eq!(
        esr_migrate::to_yaml_stream(a.all_manifests()).unwrap(),
        esr_migrate::to_yaml_stream(b.all_manifests()).unwrap()
    );
}
