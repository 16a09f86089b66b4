//! deploy/kustomize and deploy/manifests apply to the API server (esr-testkit by default) with
//! kubectl, and esr runs with the Deployment's arguments from those manifests: it takes the
//! leader election Lease and syncs an ExternalSecret. Skipped (with a printed reason) when
//! /usr/bin/kubectl is missing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod es_support;

use std::path::Path;
use std::process::Command;

use es_support::*;
use esr_e2e::{Env, repo_root, wait_for};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::rbac::v1::{ClusterRole, Role};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use serde_json::json;

const KUBECTL: &str = "/usr/bin/kubectl";

fn kubectl(env: &Env, args: &[&str]) -> String {
    let out = Command::new(KUBECTL)
        .arg("--kubeconfig")
        .arg(env.kubeconfig_path())
        .args(args)
        .current_dir(repo_root())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "kubectl {args:?} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// A schemaless CRD standing in for a built-in RBAC kind that esr-testkit does not serve.
fn stand_in_crd(kind: &str, plural: &str, scope: &str) -> serde_json::Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": format!("{plural}.rbac.authorization.k8s.io"),
            "annotations": {"api-approved.kubernetes.io": "unapproved, test stand-in"}
        },
        "spec": {
            "group": "rbac.authorization.k8s.io",
            "scope": scope,
            "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase(), "listKind": format!("{kind}List")},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    })
}

/// The documents of a multi-document YAML whose kind the server serves (per `kubectl
/// api-resources -o name`), and `Kind/name` of the others.
fn servable(yaml: &str, served: &str) -> (String, Vec<String>) {
    let served: Vec<&str> = served.lines().collect();
    let mut out = String::new();
    let mut skipped = Vec::new();
    for doc in serde_yaml_ng::Deserializer::from_str(yaml) {
        let v: serde_json::Value = serde::Deserialize::deserialize(doc).unwrap();
        if v.is_null() {
            continue;
        }
        let kind = v["kind"].as_str().unwrap();
        let api = v["apiVersion"].as_str().unwrap();
        let group = api.rsplit_once('/').map(|(g, _)| g).unwrap_or("");
        // Every kind in deploy/ pluralises with a plain "s".
        let want = format!("{}s", kind.to_lowercase());
        let ok = served.iter().any(|r| {
            let (plural, g) = r.split_once('.').unwrap_or((r, ""));
            plural == want && g == group
        });
        if ok {
            out.push_str("---\n");
            out.push_str(&serde_yaml_ng::to_string(&v).unwrap());
        } else {
            skipped.push(format!(
                "{kind}/{}",
                v["metadata"]["name"].as_str().unwrap_or("")
            ));
        }
    }
    (out, skipped)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kustomize_and_manifests_apply_and_esr_runs_with_their_args() {
    if !Path::new(KUBECTL).exists() {
        println!("skipped: {KUBECTL} not found");
        return;
    }
    let env = Env::start().await.unwrap();

    let built = kubectl(&env, &["kustomize", "deploy/kustomize"]);
    assert!(built.contains("kind: Deployment"), "{built}");
    if env.testkit().is_some() {
        // esr-testkit serves no RBAC kinds and no Service: register stand-in CRDs for the RBAC
        // kinds (schemaless) so that kubectl can apply them; Services are left out below.
        for (kind, plural, scope) in [
            ("ClusterRole", "clusterroles", "Cluster"),
            ("ClusterRoleBinding", "clusterrolebindings", "Cluster"),
            ("Role", "roles", "Namespaced"),
            ("RoleBinding", "rolebindings", "Namespaced"),
        ] {
            let crd: CustomResourceDefinition =
                serde_json::from_value(stand_in_crd(kind, plural, scope)).unwrap();
            Api::<CustomResourceDefinition>::all(env.client())
                .create(&Default::default(), &crd)
                .await
                .unwrap();
        }
        wait_for("RBAC stand-ins served", TIMEOUT, || async {
            let out = Command::new(KUBECTL)
                .arg("--kubeconfig")
                .arg(env.kubeconfig_path())
                .args(["api-resources", "-o", "name"])
                .output()
                .ok()?;
            String::from_utf8_lossy(&out.stdout)
                .contains("rolebindings.rbac.authorization.k8s.io")
                .then_some(())
        })
        .await
        .unwrap();
    }
    let served = kubectl(&env, &["api-resources", "-o", "name"]);
    let (docs, skipped) = servable(&built, &served);
    println!("not served by this API server, not applied: {skipped:?}");
    if env.testkit().is_some() {
        assert_eq!(skipped, vec!["Service/esr-metrics".to_string()]);
    }
    let file = env.work_dir().join("kustomize-built.yaml");
    std::fs::write(&file, docs).unwrap();
    let applied = kubectl(&env, &["apply", "-f", file.to_str().unwrap()]);
    assert!(applied.contains("deployment.apps/esr"), "{applied}");
    assert!(applied.contains("namespace/esr-system"), "{applied}");
    // The plain manifests (the same objects) apply too: a second apply updates nothing.
    let plain = env.work_dir().join("manifests.yaml");
    let text = std::fs::read_to_string(repo_root().join("deploy/manifests/crds.yaml")).unwrap()
        + &std::fs::read_to_string(repo_root().join("deploy/manifests/esr.yaml")).unwrap();
    std::fs::write(&plain, servable(&text, &served).0).unwrap();
    let again = kubectl(&env, &["apply", "-f", plain.to_str().unwrap()]);
    assert!(again.contains("deployment.apps/esr"), "{again}");

    let client = env.client();
    let dep = Api::<Deployment>::namespaced(client.clone(), "esr-system")
        .get("esr")
        .await
        .unwrap();
    Api::<ClusterRole>::all(client.clone())
        .get("esr-controller")
        .await
        .unwrap();
    Api::<Role>::namespaced(client.clone(), "esr-system")
        .get("esr-leaderelection")
        .await
        .unwrap();

    // Run esr with the Deployment's arguments (the listen addresses are left to the harness so
    // that parallel tests never clash on ports).
    let container = &dep.spec.unwrap().template.spec.unwrap().containers[0];
    let args: Vec<String> = container.args.clone().unwrap();
    assert_eq!(args[0], "controller");
    let rest: Vec<&str> = args[1..]
        .iter()
        .map(String::as_str)
        .filter(|a| !a.starts_with("--metrics-addr") && !a.starts_with("--live-addr"))
        .collect();
    let esr = env.start_esr(&rest).unwrap();

    let ns = env.namespace("deploy").await.unwrap();
    apply(
        &env,
        &ns,
        fake_ss("fake", json!([{"key": "/db/password", "value": "s3cr3t"}])),
    )
    .await;
    apply(
        &env,
        &ns,
        es(
            "db",
            json!({
                "refreshInterval": "1h",
                "secretStoreRef": {"kind": "SecretStore", "name": "fake"},
                "target": {"name": "db"},
                "data": [{"secretKey": "password", "remoteRef": {"key": "/db/password"}}]
            }),
        ),
    )
    .await;
    let synced = wait_for("ExternalSecret db synced", TIMEOUT, || async {
        let o = get(&env, "ExternalSecret", &ns, "db").await?;
        (ready(&o).1 == "SecretSynced").then_some(o)
    })
    .await;
    assert!(synced.is_ok(), "{synced:?}\nesr log:\n{}", esr.logs());
    wait_secret_data(&env, &ns, "db", &[("password", "s3cr3t")]).await;

    let leases: Api<Lease> = Api::namespaced(client, "esr-system");
    let holder = wait_for("lease esr-controller held", TIMEOUT, || async {
        leases
            .get_opt("esr-controller")
            .await
            .ok()
            .flatten()?
            .spec?
            .holder_identity
    })
    .await
    .unwrap();
    assert!(!holder.is_empty());
    drop(esr);
}
