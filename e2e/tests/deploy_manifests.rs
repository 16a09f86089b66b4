//! deploy/kustomize and deploy/manifests apply to the API server (esr-testkit by default) with
//! the real kubectl (`kubectl apply -k deploy/kustomize`, `kubectl apply -f deploy/manifests/`,
//! strict server-side validation, no `--validate=false`): every object, including the RBAC
//! objects and the Service. esr then runs with the Deployment's arguments from those manifests:
//! it takes the leader election Lease in esr-system and syncs an ExternalSecret. Skipped (with a
//! printed reason) when /usr/bin/kubectl is missing.
//!
//! The default render has no ServiceMonitor (`serviceMonitor.enabled: false`) and no
//! PodDisruptionBudget (`podDisruptionBudget.enabled: false`), so no monitoring.coreos.com CRD is
//! needed here; esr-testkit serves policy/v1 PodDisruptionBudget for overlays that add one.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod es_support;

use std::path::Path;
use std::process::Command;

use es_support::*;
use esr_e2e::{CLUSTER_WIDE, Env, repo_root, wait_for};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
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

/// `kind/name` of every document of a multi-document YAML text.
fn objects(yaml: &str) -> Vec<(String, String, String)> {
    let mut out = vec![];
    for doc in yaml_serde::Deserializer::from_str(yaml) {
        let v: serde_json::Value = serde::Deserialize::deserialize(doc).unwrap();
        if v.is_null() {
            continue;
        }
        out.push((
            v["apiVersion"].as_str().unwrap().to_string(),
            v["kind"].as_str().unwrap().to_string(),
            v["metadata"]["name"].as_str().unwrap().to_string(),
        ));
    }
    out
}

/// kubectl's `<resource>.<group>/<name>` for a kind (every kind in deploy/ pluralises with a
/// plain "s"; kubectl prints the singular lower-case kind).
fn kubectl_name(api_version: &str, kind: &str, name: &str) -> String {
    let group = api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("");
    let k = kind.to_lowercase();
    if group.is_empty() {
        format!("{k}/{name}")
    } else {
        format!("{k}.{group}/{name}")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kustomize_and_manifests_apply_and_esr_runs_with_their_args() {
    if !Path::new(KUBECTL).exists() {
        println!("skipped: {KUBECTL} not found");
        return;
    }
    let env = Env::start().await.unwrap();
    if env.is_real_cluster() {
        // It installs esr cluster-wide (Namespace esr-system, ClusterRoles, the Deployment)
        // and expects every object to be `created`: only a fresh, private API server fits.
        println!(
            "skipped: installs esr cluster-wide and needs a fresh API server, not a shared cluster (ESR_E2E_KUBECONFIG)"
        );
        return;
    }

    let built = kubectl(&env, &["kustomize", "deploy/kustomize"]);
    let wanted = objects(&built);
    for kind in [
        "Namespace",
        "CustomResourceDefinition",
        "Deployment",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Service",
    ] {
        assert!(
            wanted.iter().any(|(_, k, _)| k == kind),
            "no {kind} in the kustomize build"
        );
    }
    // Every object of the base applies, as to a real cluster.
    let applied = kubectl(&env, &["apply", "-k", "deploy/kustomize"]);
    for (api, kind, name) in &wanted {
        let line = format!("{} created", kubectl_name(api, kind, name));
        // CRDs were already applied by the harness (crds/ are the same objects).
        let line2 = format!("{} configured", kubectl_name(api, kind, name));
        let line3 = format!("{} unchanged", kubectl_name(api, kind, name));
        assert!(
            applied.contains(&line) || applied.contains(&line2) || applied.contains(&line3),
            "{line} missing from:\n{applied}"
        );
        if kind != "CustomResourceDefinition" {
            assert!(applied.contains(&line), "{line} missing from:\n{applied}");
        }
    }
    // The plain manifests (the same objects minus the Namespace) apply too: nothing changes.
    let again = kubectl(&env, &["apply", "-f", "deploy/manifests/"]);
    let plain = objects(
        &(std::fs::read_to_string(repo_root().join("deploy/manifests/crds.yaml")).unwrap()
            + "\n---\n"
            + &std::fs::read_to_string(repo_root().join("deploy/manifests/esr.yaml")).unwrap()),
    );
    assert_eq!(
        plain.len() + 1,
        wanted.len(),
        "kustomize adds the Namespace"
    );
    for (api, kind, name) in &plain {
        let line = format!("{} unchanged", kubectl_name(api, kind, name));
        assert!(again.contains(&line), "{line} missing from:\n{again}");
    }

    let client = env.client();
    let dep = Api::<Deployment>::namespaced(client.clone(), "esr-system")
        .get("esr")
        .await
        .unwrap();
    let cr = Api::<ClusterRole>::all(client.clone())
        .get("esr-controller")
        .await
        .unwrap();
    assert!(!cr.rules.unwrap_or_default().is_empty());
    let crb = Api::<ClusterRoleBinding>::all(client.clone())
        .get("esr-controller")
        .await
        .unwrap();
    assert_eq!(crb.role_ref.name, "esr-controller");
    Api::<Role>::namespaced(client.clone(), "esr-system")
        .get("esr-leaderelection")
        .await
        .unwrap();
    Api::<RoleBinding>::namespaced(client.clone(), "esr-system")
        .get("esr-leaderelection")
        .await
        .unwrap();
    Api::<ServiceAccount>::namespaced(client.clone(), "esr-system")
        .get("esr")
        .await
        .unwrap();
    let svc = Api::<Service>::namespaced(client.clone(), "esr-system")
        .get("esr-metrics")
        .await
        .unwrap();
    assert_eq!(svc.spec.unwrap().ports.unwrap()[0].port, 8080);

    // The harness runs esr with exactly these arguments (adapted for a local process).
    let container = &dep.spec.unwrap().template.spec.unwrap().containers[0];
    let args: Vec<String> = container.args.clone().unwrap();
    assert_eq!(args[0], "controller");
    assert_eq!(args[1..].to_vec(), esr_e2e::manifest_args().unwrap());
    // Like in the cluster, the Lease goes to esr-system (the harness would otherwise use a
    // namespace of its own), and every reconciler is on (the harness would otherwise turn off
    // the class-less cluster-wide ones, see esr_e2e::Env::scope_args).
    let mut own = vec!["--leader-election-namespace=esr-system"];
    own.extend(CLUSTER_WIDE);
    let esr = env.start_esr(&own).unwrap();
    for a in &args[1..] {
        if a.starts_with("--metrics-addr")
            || a.starts_with("--live-addr")
            || a.starts_with("--leader-election-namespace")
        {
            continue;
        }
        assert!(esr.args.contains(a), "{a} not in {:?}", esr.args);
    }

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

fn dyn_api(
    env: &Env,
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
    ns: Option<&str>,
) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let ar = ApiResource::from_gvk_with_plural(&gvk, plural);
    match ns {
        Some(ns) => Api::namespaced_with(env.client(), ns, &ar),
        None => Api::all_with(env.client(), &ar),
    }
}

async fn ssa(api: &Api<DynamicObject>, obj: serde_json::Value) {
    let name = obj["metadata"]["name"].as_str().unwrap().to_string();
    api.patch(
        &name,
        &PatchParams::apply("e2e").force(),
        &Patch::Apply(&obj),
    )
    .await
    .unwrap();
}

/// Which calls did esr make? Runs esr with the manifests' arguments through the main features
/// (SecretStore and ClusterSecretStore, a generator, ClusterExternalSecret, PushSecret, provider
/// value change, ExternalSecret deletion, leader election) and records every API call it made,
/// as `<group>|<resource>[/<subresource>]|<verb>` lines (group `core` for ""), in
/// deploy/rbac-observed.txt when `ESR_WRITE_RBAC_OBSERVED=1`; otherwise checks that every call
/// is listed there. crates/esr-deploytool/tests/rbac.rs compares that file with the ClusterRole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_observed_calls() {
    let env = Env::start().await.unwrap();
    let Some(audit) = env.audit().cloned() else {
        println!("skipped: no audit log (not esr-testkit)");
        return;
    };
    // The harness's own user agent, to tell its calls from esr's.
    audit.clear();
    Api::<k8s_openapi::api::core::v1::Namespace>::all(env.client())
        .list(&Default::default())
        .await
        .unwrap();
    let harness_ua: Vec<String> = audit.entries().into_iter().map(|e| e.user_agent).collect();
    let harness_ua = harness_ua.first().cloned().unwrap_or_default();

    // The harness starts esr with the manifests' arguments (Lease in a namespace of its own).
    let esr = env.start_esr(CLUSTER_WIDE).unwrap();

    let ns = env.namespace("rbac").await.unwrap();
    apply(
        &env,
        &ns,
        fake_ss("fake", json!([{"key": "/a", "value": "1"}])),
    )
    .await;
    apply(
        &env,
        &ns,
        fake_css("rbac-fake", json!([{"key": "/b", "value": "2"}])),
    )
    .await;
    let mut a = es(
        "a",
        json!({"refreshInterval": "1s", "secretStoreRef": {"kind": "SecretStore", "name": "fake"},
        "target": {"name": "a", "deletionPolicy": "Delete"}, "data": [{"secretKey": "k", "remoteRef": {"key": "/a"}}]}),
    );
    a["metadata"]["labels"] = json!({"x": "y"});
    apply(&env, &ns, a).await;
    apply(&env, &ns, es("b", json!({"refreshInterval": "1h", "secretStoreRef": {"kind": "ClusterSecretStore", "name": "rbac-fake"},
        "target": {"name": "b"}, "data": [{"secretKey": "k", "remoteRef": {"key": "/b"}}]}))).await;
    ssa(
        &dyn_api(&env, "generators.external-secrets.io", "v1alpha1", "Password", "passwords", Some(&ns)),
        json!({"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "Password",
            "metadata": {"name": "pw"}, "spec": {"length": 12, "digits": 2, "symbols": 0, "allowRepeat": true}}),
    )
    .await;
    apply(&env, &ns, es("gen", json!({"refreshInterval": "1h", "target": {"name": "gen"},
        "dataFrom": [{"sourceRef": {"generatorRef": {"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "Password", "name": "pw"}}}]}))).await;
    for name in ["a", "b", "gen"] {
        wait_condition(&env, "ExternalSecret", &ns, name, "True", "SecretSynced").await;
    }
    let ces_ns = env.namespace("rbacces").await.unwrap();
    ssa(
        &dyn_api(&env, "external-secrets.io", "v1", "ClusterExternalSecret", "clusterexternalsecrets", None),
        json!({"apiVersion": "external-secrets.io/v1", "kind": "ClusterExternalSecret", "metadata": {"name": format!("rbac-{ces_ns}")},
            "spec": {"namespaces": [ces_ns], "refreshTime": "1s", "externalSecretSpec": {"refreshInterval": "1h",
                "secretStoreRef": {"kind": "ClusterSecretStore", "name": "rbac-fake"}, "target": {"name": "c"},
                "data": [{"secretKey": "k", "remoteRef": {"key": "/b"}}]}}}),
    )
    .await;
    apply(&env, &ns, json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "src"}, "stringData": {"k": "v"}})).await;
    ssa(
        &dyn_api(&env, "external-secrets.io", "v1alpha1", "PushSecret", "pushsecrets", Some(&ns)),
        json!({"apiVersion": "external-secrets.io/v1alpha1", "kind": "PushSecret", "metadata": {"name": "push"},
            "spec": {"refreshInterval": "1h", "secretStoreRefs": [{"name": "fake", "kind": "SecretStore"}],
                "selector": {"secret": {"name": "src"}},
                "data": [{"match": {"secretKey": "k", "remoteRef": {"remoteKey": "pushed"}}}]}}),
    )
    .await;
    let ps_api = dyn_api(
        &env,
        "external-secrets.io",
        "v1alpha1",
        "PushSecret",
        "pushsecrets",
        Some(&ns),
    );
    // Ready True or False: either way esr read the source Secret and wrote the status.
    wait_for("PushSecret status", TIMEOUT, || async {
        let ps = serde_json::to_value(ps_api.get("push").await.ok()?).ok()?;
        (!ready(&ps).0.is_empty()).then_some(())
    })
    .await
    .unwrap();
    // A PushSecret with deletionPolicy Delete puts the store finalizer on SecretStore "fake"
    // (patch secretstores); a ClusterPushSecret creates PushSecrets in the namespaces it selects.
    ssa(
        &ps_api,
        json!({"apiVersion": "external-secrets.io/v1alpha1", "kind": "PushSecret", "metadata": {"name": "push-del"},
            "spec": {"refreshInterval": "1h", "deletionPolicy": "Delete",
                "secretStoreRefs": [{"name": "fake", "kind": "SecretStore"}],
                "selector": {"secret": {"name": "src"}},
                "data": [{"match": {"secretKey": "k", "remoteRef": {"remoteKey": "pushed-del"}}}]}}),
    )
    .await;
    let ss_api = dyn_api(
        &env,
        "external-secrets.io",
        "v1",
        "SecretStore",
        "secretstores",
        Some(&ns),
    );
    wait_for("store finalizer on SecretStore fake", TIMEOUT, || async {
        let s = ss_api.get("fake").await.ok()?;
        s.metadata
            .finalizers
            .unwrap_or_default()
            .iter()
            .any(|f| f == "secretstore.externalsecrets.io/finalizer")
            .then_some(())
    })
    .await
    .unwrap();
    let cps_ns = env.namespace("rbaccps").await.unwrap();
    apply(&env, &cps_ns, json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "src"}, "stringData": {"k": "v"}})).await;
    ssa(
        &dyn_api(&env, "external-secrets.io", "v1alpha1", "ClusterPushSecret", "clusterpushsecrets", None),
        json!({"apiVersion": "external-secrets.io/v1alpha1", "kind": "ClusterPushSecret", "metadata": {"name": format!("rbac-{cps_ns}")},
            "spec": {"namespaceSelectors": [{"matchLabels": {"kubernetes.io/metadata.name": cps_ns}}],
                "pushSecretSpec": {"refreshInterval": "1h",
                    "secretStoreRefs": [{"name": "rbac-fake", "kind": "ClusterSecretStore"}],
                    "selector": {"secret": {"name": "src"}},
                    "data": [{"match": {"secretKey": "k", "remoteRef": {"remoteKey": "pushed-cps"}}}]}}}),
    )
    .await;
    let cps_ps = dyn_api(
        &env,
        "external-secrets.io",
        "v1alpha1",
        "PushSecret",
        "pushsecrets",
        Some(&cps_ns),
    );
    wait_for(
        "ClusterPushSecret created its PushSecret",
        TIMEOUT,
        || async {
            let ps =
                serde_json::to_value(cps_ps.get(&format!("rbac-{cps_ns}")).await.ok()?).ok()?;
            (!ready(&ps).0.is_empty()).then_some(())
        },
    )
    .await
    .unwrap();
    // The ClusterExternalSecret reconciler may be switched off or still missing in this build:
    // its calls are recorded when it ran.
    let ces_ran = wait_for("ClusterExternalSecret created c", TIMEOUT, || async {
        get(&env, "ExternalSecret", &ces_ns, "c").await.map(|_| ())
    })
    .await
    .is_ok();
    println!("ClusterExternalSecret reconciled: {ces_ran}");
    // An opted-in Deployment, StatefulSet and DaemonSet using Secret "a" (rollout on rotation).
    for (kind, plural) in [
        ("Deployment", "deployments"),
        ("StatefulSet", "statefulsets"),
        ("DaemonSet", "daemonsets"),
    ] {
        let mut obj = json!({"apiVersion": "apps/v1", "kind": kind,
            "metadata": {"name": "uses-a", "annotations": {"esr.external-secrets.io/reload": "true"}},
            "spec": {"selector": {"matchLabels": {"app": "a"}}, "template": {"metadata": {"labels": {"app": "a"}},
                "spec": {"containers": [{"name": "c", "image": "busybox", "envFrom": [{"secretRef": {"name": "a"}}]}]}}}});
        if kind == "StatefulSet" {
            obj["spec"]["serviceName"] = json!("uses-a");
        }
        ssa(&dyn_api(&env, "apps", "v1", kind, plural, Some(&ns)), obj).await;
    }
    // A provider value change rewrites the Secret; deleting an ExternalSecret removes its finalizer.
    apply(
        &env,
        &ns,
        fake_ss("fake", json!([{"key": "/a", "value": "changed"}])),
    )
    .await;
    wait_secret_data(&env, &ns, "a", &[("k", "changed")]).await;
    // The rotation rolled all three (get + patch of each kind).
    for (kind, plural) in [
        ("Deployment", "deployments"),
        ("StatefulSet", "statefulsets"),
        ("DaemonSet", "daemonsets"),
    ] {
        let api = dyn_api(&env, "apps", "v1", kind, plural, Some(&ns));
        wait_for(&format!("{kind} uses-a rolled"), TIMEOUT, || async {
            let o = api.get("uses-a").await.ok()?;
            o.data
                .pointer(
                    "/spec/template/metadata/annotations/esr.external-secrets.io~1secret-hash-a",
                )
                .map(|_| ())
        })
        .await
        .unwrap();
    }
    // Deleting the PushSecret with deletionPolicy Delete removes the remote entry and its finalizer.
    ps_api
        .delete("push-del", &Default::default())
        .await
        .unwrap();
    wait_for("PushSecret push-del gone", TIMEOUT, || async {
        ps_api.get("push-del").await.is_err().then_some(())
    })
    .await
    .unwrap();
    delete(&env, "ExternalSecret", &ns, "a").await;
    wait_for("ExternalSecret a gone", TIMEOUT, || async {
        get(&env, "ExternalSecret", &ns, "a")
            .await
            .is_none()
            .then_some(())
    })
    .await
    .unwrap();
    drop(esr);

    let mut observed: Vec<String> = audit
        .entries()
        .into_iter()
        .filter(|e| e.user_agent.starts_with("esr/") && !e.resource.is_empty())
        .map(|e| {
            let group = if e.group.is_empty() {
                "core".to_string()
            } else {
                e.group.clone()
            };
            let res = if e.subresource.is_empty() {
                e.resource.clone()
            } else {
                format!("{}/{}", e.resource, e.subresource)
            };
            format!("{group}|{res}|{}", e.verb)
        })
        .collect();
    observed.sort();
    observed.dedup();
    assert!(
        !observed.is_empty(),
        "no calls by esr (user agent {harness_ua:?} shared?)"
    );
    // Calls that depend on timing: kube's event Recorder patches an Event series when the same
    // event repeats within its window. Always recorded, so the check does not flake.
    const SOMETIMES: &[&str] = &["events.k8s.io|events|patch"];
    for s in SOMETIMES {
        if !observed.iter().any(|o| o == s) {
            observed.push(s.to_string());
        }
    }
    observed.sort();
    let path = repo_root().join("deploy/rbac-observed.txt");
    let header = "# API calls esr made in e2e/tests/deploy_manifests.rs rbac_observed_calls (group|resource|verb).\n# Regenerate: ESR_WRITE_RBAC_OBSERVED=1 cargo nextest run -p esr-e2e --test deploy_manifests\n";
    if std::env::var("ESR_WRITE_RBAC_OBSERVED").is_ok_and(|v| v == "1") {
        std::fs::write(&path, format!("{header}{}\n", observed.join("\n"))).unwrap();
        println!("wrote {}", path.display());
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    let listed: Vec<&str> = committed.lines().filter(|l| !l.starts_with('#')).collect();
    let missing: Vec<&String> = observed
        .iter()
        .filter(|o| !listed.contains(&o.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "calls not in {}: {missing:?}; regenerate with ESR_WRITE_RBAC_OBSERVED=1",
        path.display()
    );
}
