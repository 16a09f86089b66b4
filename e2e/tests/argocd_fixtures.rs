//! Produces the ExternalSecret objects that deploy/argocd/externalsecret-health.lua is tested on
//! (crates/esr-deploytool/tests/argocd_health.rs), in each state, with the real `esr` binary:
//! Healthy, Degraded, no status yet (controller not running) and controller down after a spec
//! change (an old Ready=True for an older generation); and PushSecret objects (Healthy, controller
//! down after a spec change) in deploy/argocd/testdata/pushsecret/; and ClusterExternalSecret
//! objects (Healthy, Degraded: a namespace failed, Progressing: created while the controller is
//! down) in deploy/argocd/testdata/clusterexternalsecret/.
//!
//! With `ESR_WRITE_ARGOCD_FIXTURES=1` the objects are written to
//! deploy/argocd/testdata/externalsecret/e2e-<state>.json. Without it the test checks that the
//! committed fixtures still agree with what esr produces in the fields the health check reads.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod es_support;

use es_support::*;
use esr_e2e::{CLUSTER_WIDE, Env, repo_root, str_at, wait_for};
use serde_json::{Value, json};

fn store() -> Value {
    fake_css(
        "argocd-fake",
        json!([{"key": "/app/foo", "value": "value1"}, {"key": "/app/bar", "value": "value2"}]),
    )
}

fn es_for(name: &str, key: &str) -> Value {
    es(
        name,
        json!({
            "refreshInterval": "1h",
            "secretStoreRef": {"kind": "ClusterSecretStore", "name": "argocd-fake"},
            "target": {"name": name},
            "data": [{"secretKey": "foo", "remoteRef": {"key": key}}]
        }),
    )
}

/// Drops server-assigned noise so that fixtures are stable and small.
fn sanitize(mut obj: Value) -> Value {
    if let Some(meta) = obj["metadata"].as_object_mut() {
        for k in [
            "managedFields",
            "uid",
            "resourceVersion",
            "creationTimestamp",
        ] {
            meta.remove(k);
        }
        meta.insert("namespace".into(), json!("default"));
    }
    obj
}

/// What the health check reads.
fn projection(obj: &Value) -> Value {
    let (status, reason, message) = ready(obj);
    json!({
        "generation": obj.pointer("/metadata/generation"),
        "observedGeneration": obj.pointer("/status/observedGeneration"),
        "synced": str_at(obj, "/status/syncedResourceVersion"),
        "ready": [status, reason, message],
        "deleting": obj.pointer("/metadata/deletionTimestamp").is_some(),
    })
}

fn record(state: &str, obj: Value) {
    record_kind("externalsecret", state, obj)
}

fn record_kind(kind: &str, state: &str, obj: Value) {
    let obj = sanitize(obj);
    let path = repo_root()
        .join("deploy/argocd/testdata")
        .join(kind)
        .join(format!("e2e-{state}.json"));
    if std::env::var("ESR_WRITE_ARGOCD_FIXTURES").is_ok_and(|v| v == "1") {
        std::fs::write(&path, serde_json::to_string_pretty(&obj).unwrap() + "\n").unwrap();
        println!("wrote {}", path.display());
        return;
    }
    let committed: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e}; run with ESR_WRITE_ARGOCD_FIXTURES=1",
                path.display()
            )
        }))
        .unwrap();
    assert_eq!(
        projection(&committed),
        projection(&obj),
        "{} is stale; regenerate with ESR_WRITE_ARGOCD_FIXTURES=1",
        path.display()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn externalsecret_states_for_argocd_health() {
    let env = Env::start().await.unwrap();
    let ns = env.namespace("argocd").await.unwrap();
    apply(&env, &ns, store()).await;

    // No status yet: created while no controller runs.
    apply(&env, &ns, es_for("app", "/app/foo")).await;
    let fresh = get(&env, "ExternalSecret", &ns, "app").await.unwrap();
    assert!(
        fresh
            .get("status")
            .is_none_or(|s| ready(&json!({"status": s})).0.is_empty())
    );
    record("progressing-no-status", fresh);

    let mut esr = env.start_esr(CLUSTER_WIDE).unwrap();
    wait_condition(
        &env,
        "ClusterSecretStore",
        "",
        "argocd-fake",
        "True",
        "Valid",
    )
    .await;
    let healthy = wait_condition(&env, "ExternalSecret", &ns, "app", "True", "SecretSynced").await;
    assert!(str_at(&healthy, "/status/syncedResourceVersion").is_some_and(|v| v.starts_with("1-")));
    record("healthy", healthy);

    apply(&env, &ns, es_for("broken", "/app/missing")).await;
    let degraded = wait_condition(
        &env,
        "ExternalSecret",
        &ns,
        "broken",
        "False",
        "SecretSyncedError",
    )
    .await;
    record("degraded", degraded);

    // Controller down, then a spec change: generation 2, the old Ready=True for generation 1.
    esr.stop();
    merge_patch(
        &env,
        "ExternalSecret",
        &ns,
        "app",
        json!({"spec": {"data": [{"secretKey": "bar", "remoteRef": {"key": "/app/bar"}}]}}),
    )
    .await;
    let down = wait_for("generation 2", TIMEOUT, || async {
        let o = get(&env, "ExternalSecret", &ns, "app").await?;
        (o.pointer("/metadata/generation") == Some(&json!(2))).then_some(o)
    })
    .await
    .unwrap();
    assert_eq!(ready(&down).0, "True");
    assert!(str_at(&down, "/status/syncedResourceVersion").is_some_and(|v| v.starts_with("1-")));
    record("progressing-controller-down", down);

    // The controller comes back and syncs generation 2: healthy again.
    let _esr = env.start_esr(CLUSTER_WIDE).unwrap();
    let resynced = wait_for("generation 2 synced", TIMEOUT, || async {
        let o = get(&env, "ExternalSecret", &ns, "app").await?;
        str_at(&o, "/status/syncedResourceVersion")
            .is_some_and(|v| v.starts_with("2-"))
            .then_some(o)
    })
    .await
    .unwrap();
    assert_eq!(ready(&resynced).0, "True");
    record("healthy-after-resync", resynced);
}

fn ps_api(env: &Env, ns: &str) -> kube::Api<kube::api::DynamicObject> {
    let gvk = kube::api::GroupVersionKind::gvk("external-secrets.io", "v1alpha1", "PushSecret");
    let ar = kube::api::ApiResource::from_gvk_with_plural(&gvk, "pushsecrets");
    kube::Api::namespaced_with(env.client(), ns, &ar)
}

async fn get_ps(env: &Env, ns: &str) -> Option<Value> {
    let o = ps_api(env, ns).get_opt("push").await.ok()??;
    serde_json::to_value(o).ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pushsecret_states_for_argocd_health() {
    let env = Env::start().await.unwrap();
    let ns = env.namespace("argocdps").await.unwrap();
    apply(&env, &ns, fake_ss("fake", json!([]))).await;
    apply(&env, &ns, json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "src"}, "stringData": {"k": "v"}})).await;
    let mut esr = env.start_esr(CLUSTER_WIDE).unwrap();
    let ps = json!({"apiVersion": "external-secrets.io/v1alpha1", "kind": "PushSecret", "metadata": {"name": "push"},
        "spec": {"refreshInterval": "1h", "secretStoreRefs": [{"name": "fake", "kind": "SecretStore"}],
            "selector": {"secret": {"name": "src"}},
            "data": [{"match": {"secretKey": "k", "remoteRef": {"remoteKey": "pushed"}}}]}});
    ps_api(&env, &ns)
        .patch(
            "push",
            &kube::api::PatchParams::apply("e2e").force(),
            &kube::api::Patch::Apply(&ps),
        )
        .await
        .unwrap();
    let healthy = wait_for("PushSecret synced", TIMEOUT, || async {
        let o = get_ps(&env, &ns).await?;
        (ready(&o).0 == "True"
            && str_at(&o, "/status/syncedResourceVersion").is_some_and(|v| v.starts_with("1-")))
        .then_some(o)
    })
    .await;
    let Ok(healthy) = healthy else {
        panic!(
            "PushSecret not synced: {:?}\n{}",
            get_ps(&env, &ns).await,
            esr.logs()
        );
    };
    record_kind("pushsecret", "healthy", healthy);

    esr.stop();
    ps_api(&env, &ns)
        .patch("push", &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"spec": {"data": [{"match": {"secretKey": "k", "remoteRef": {"remoteKey": "pushed2"}}}]}})))
        .await
        .unwrap();
    let down = get_ps(&env, &ns).await.unwrap();
    assert_eq!(down.pointer("/metadata/generation"), Some(&json!(2)));
    assert_eq!(ready(&down).0, "True");
    record_kind("pushsecret", "progressing-controller-down", down);
}

fn ces_api(env: &Env) -> kube::Api<kube::api::DynamicObject> {
    let gvk =
        kube::api::GroupVersionKind::gvk("external-secrets.io", "v1", "ClusterExternalSecret");
    let ar = kube::api::ApiResource::from_gvk_with_plural(&gvk, "clusterexternalsecrets");
    kube::Api::all_with(env.client(), &ar)
}

async fn get_ces(env: &Env, name: &str) -> Option<Value> {
    let o = ces_api(env).get_opt(name).await.ok()??;
    serde_json::to_value(o).ok()
}

async fn apply_ces(env: &Env, name: &str, es_name: &str, namespaces: &[&str]) {
    let mut obj = json!({"apiVersion": "external-secrets.io/v1", "kind": "ClusterExternalSecret",
        "metadata": {"name": name},
        "spec": {"namespaces": namespaces, "refreshTime": "1m", "externalSecretName": es_name,
            "externalSecretSpec": {"refreshInterval": "1h",
                "secretStoreRef": {"kind": "ClusterSecretStore", "name": "argocd-fake"},
                "target": {"name": es_name},
                "data": [{"secretKey": "foo", "remoteRef": {"key": "/app/foo"}}]}}});
    env.scope_object(&mut obj);
    ces_api(env)
        .patch(
            name,
            &kube::api::PatchParams::apply("e2e").force(),
            &kube::api::Patch::Apply(&obj),
        )
        .await
        .unwrap();
}

/// A ClusterExternalSecret fixture: cluster-scoped (no namespace), server noise dropped and the
/// random e2e namespace names replaced by stable ones.
fn record_ces(state: &str, obj: Value, names: &[(&str, &str)]) {
    let mut obj = sanitize(obj);
    if let Some(meta) = obj["metadata"].as_object_mut() {
        meta.remove("namespace");
    }
    let mut text = serde_json::to_string(&obj).unwrap();
    for (random, stable) in names {
        text = text.replace(random, stable);
    }
    let obj: Value = serde_json::from_str(&text).unwrap();
    let path = repo_root()
        .join("deploy/argocd/testdata/clusterexternalsecret")
        .join(format!("e2e-{state}.json"));
    if std::env::var("ESR_WRITE_ARGOCD_FIXTURES").is_ok_and(|v| v == "1") {
        std::fs::write(&path, serde_json::to_string_pretty(&obj).unwrap() + "\n").unwrap();
        println!("wrote {}", path.display());
        return;
    }
    let committed: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e}; run with ESR_WRITE_ARGOCD_FIXTURES=1",
                path.display()
            )
        }))
        .unwrap();
    let proj = |o: &Value| {
        json!({
            "generation": o.pointer("/metadata/generation"),
            "observedGeneration": o.pointer("/status/observedGeneration"),
            "ready": ready(o),
            "failed": o.pointer("/status/failedNamespaces"),
            "provisioned": o.pointer("/status/provisionedNamespaces"),
        })
    };
    assert_eq!(
        proj(&committed),
        proj(&obj),
        "{} is stale; regenerate with ESR_WRITE_ARGOCD_FIXTURES=1",
        path.display()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clusterexternalsecret_states_for_argocd_health() {
    let env = Env::start().await.unwrap();
    let a = env.namespace("argoces").await.unwrap();
    let b = env.namespace("argoces").await.unwrap();
    let names = [(a.as_str(), "team-a"), (b.as_str(), "team-b")];
    apply(&env, "", store()).await;
    // Namespace b holds a foreign ExternalSecret named like the CES's: that namespace fails.
    let mut foreign = es_for("shared", "/app/foo");
    foreign["metadata"]["labels"] = json!({"owner": "someone-else"});
    apply(&env, &b, foreign).await;

    // Created while no controller runs: no status (Progressing, controller down).
    let healthy_name = format!("argocd-ok-{a}");
    apply_ces(&env, &healthy_name, "app", &[&a]).await;
    let fresh = get_ces(&env, &healthy_name).await.unwrap();
    assert!(ready(&fresh).0.is_empty(), "{fresh}");
    record_ces("progressing-controller-down", fresh, &names);

    let mut esr = env.start_esr(CLUSTER_WIDE).unwrap();
    let healthy = wait_for("ClusterExternalSecret ready", TIMEOUT, || async {
        let o = get_ces(&env, &healthy_name).await?;
        (ready(&o).0 == "True").then_some(o)
    })
    .await
    .unwrap();
    assert_eq!(
        healthy.pointer("/status/provisionedNamespaces"),
        Some(&json!([a]))
    );
    record_ces("healthy", healthy.clone(), &names);

    let broken_name = format!("argocd-broken-{a}");
    apply_ces(&env, &broken_name, "shared", &[&a, &b]).await;
    let degraded = wait_for("ClusterExternalSecret degraded", TIMEOUT, || async {
        let o = get_ces(&env, &broken_name).await?;
        (ready(&o).0 == "False" && o.pointer("/status/failedNamespaces").is_some()).then_some(o)
    })
    .await
    .unwrap();
    assert_eq!(
        degraded.pointer("/status/failedNamespaces/0/namespace"),
        Some(&json!(b))
    );
    record_ces("degraded", degraded, &names);

    // The controller stops, then the healthy CES's spec changes: the old Ready=True status is
    // for generation 1 (status.observedGeneration), so Argo CD must not report Healthy.
    assert_eq!(
        healthy.pointer("/status/observedGeneration"),
        healthy.pointer("/metadata/generation")
    );
    esr.stop();
    apply_ces(&env, &healthy_name, "app-v2", &[&a]).await;
    let stale = get_ces(&env, &healthy_name).await.unwrap();
    assert_eq!(ready(&stale).0, "True", "{stale}");
    assert_eq!(stale.pointer("/metadata/generation"), Some(&json!(2)));
    assert_eq!(stale.pointer("/status/observedGeneration"), Some(&json!(1)));
    record_ces("progressing-spec-changed-controller-down", stale, &names);
}
