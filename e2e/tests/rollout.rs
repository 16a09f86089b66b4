//! Rollout on rotation: rotating a provider value changes the pod template of a Deployment,
//! StatefulSet and DaemonSet annotated `esr.external-secrets.io/reload` exactly once (per new
//! data hash); unannotated workloads of each kind that use the same Secret are never touched.
//! esr finds the workloads in its metadata-only watch caches: the audit log (esr-testkit) shows
//! no LIST of workloads per Secret write, only the initial list of each watch.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod es_support;

use std::time::Duration;

use es_support::*;
use esr_e2e::{Env, wait_for};
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::{Value, json};

const KEY: &str = "esr.external-secrets.io/secret-hash-db";

/// (kind, plural)
const KINDS: [(&str, &str); 3] = [
    ("Deployment", "deployments"),
    ("StatefulSet", "statefulsets"),
    ("DaemonSet", "daemonsets"),
];

fn api(env: &Env, ns: &str, kind: &str, plural: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("apps", "v1", kind), plural);
    Api::namespaced_with(env.client(), ns, &ar)
}

fn workload(kind: &str, name: &str, reload: Option<&str>) -> DynamicObject {
    let mut d = json!({
        "apiVersion": "apps/v1", "kind": kind,
        "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{
                "name": "app", "image": "busybox",
                "envFrom": [{"secretRef": {"name": "db"}}]}]}}}
    });
    if kind == "StatefulSet" {
        d["spec"]["serviceName"] = json!(name);
    }
    if let Some(r) = reload {
        d["metadata"]["annotations"] = json!({"esr.external-secrets.io/reload": r});
    }
    serde_json::from_value(d).unwrap()
}

fn template_annotation(d: &DynamicObject) -> Option<String> {
    d.data
        .pointer("/spec/template/metadata/annotations")?
        .get(KEY)?
        .as_str()
        .map(str::to_string)
}

fn generation(d: &DynamicObject) -> i64 {
    d.metadata.generation.unwrap()
}

/// Wait until `name` of every kind carries `hash`; returns the objects per kind.
async fn wait_hash(env: &Env, ns: &str, name: &str, hash: &str) -> Vec<DynamicObject> {
    let mut out = vec![];
    for (kind, plural) in KINDS {
        let a = api(env, ns, kind, plural);
        let d = wait_for(&format!("{kind} {name} hash {hash}"), TIMEOUT, || async {
            let d = a.get(name).await.ok()?;
            (template_annotation(&d).as_deref() == Some(hash)).then_some(d)
        })
        .await
        .unwrap();
        out.push(d);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_rolls_annotated_workloads_once_and_leaves_others() {
    let env = Env::start().await.unwrap();
    let ns = env.namespace("rollout").await.unwrap();
    let mut plain_before: Vec<Value> = vec![];
    for (kind, plural) in KINDS {
        let a = api(&env, &ns, kind, plural);
        let pp = PostParams::default();
        a.create(&pp, &workload(kind, "annotated", Some("true")))
            .await
            .unwrap();
        a.create(&pp, &workload(kind, "named", Some("other, db")))
            .await
            .unwrap();
        a.create(&pp, &workload(kind, "plain", None)).await.unwrap();
        // Annotated, but names another Secret: not rolled either.
        a.create(&pp, &workload(kind, "elsewhere", Some("other")))
            .await
            .unwrap();
        for n in ["plain", "elsewhere"] {
            plain_before.push(serde_json::to_value(a.get(n).await.unwrap()).unwrap());
        }
    }

    let esr = env.start_esr(&[]).unwrap();
    apply(
        &env,
        &ns,
        fake_ss("fake", json!([{"key": "/db", "value": "v1"}])),
    )
    .await;
    apply(
        &env,
        &ns,
        es(
            "db",
            json!({"refreshInterval": "1s",
        "secretStoreRef": {"kind": "SecretStore", "name": "fake"}, "target": {"name": "db"},
        "data": [{"secretKey": "password", "remoteRef": {"key": "/db"}}]}),
        ),
    )
    .await;
    let s1 = wait_secret_data(&env, &ns, "db", &[("password", "v1")]).await;
    let h1 = s1.metadata.annotations.unwrap()["reconcile.external-secrets.io/data-hash"].clone();
    let first = wait_hash(&env, &ns, "annotated", &h1).await;

    // A workload annotated after esr started is found through the watch.
    let late = api(&env, &ns, "Deployment", "deployments");
    late.create(
        &PostParams::default(),
        &workload("Deployment", "late", Some("true")),
    )
    .await
    .unwrap();
    // Give the watch time to see it (the hash is written on the next data change only).
    tokio::time::sleep(Duration::from_secs(2)).await;

    // Rotate the provider value.
    apply(
        &env,
        &ns,
        fake_ss("fake", json!([{"key": "/db", "value": "v2"}])),
    )
    .await;
    let s2 = wait_secret_data(&env, &ns, "db", &[("password", "v2")]).await;
    let h2 = s2.metadata.annotations.unwrap()["reconcile.external-secrets.io/data-hash"].clone();
    assert_ne!(h1, h2);
    let second = wait_hash(&env, &ns, "annotated", &h2).await;
    // Exactly one pod template change for the rotation: one generation bump per workload.
    for (a, b) in first.iter().zip(&second) {
        assert_eq!(generation(b), generation(a) + 1, "{:?}", b.types);
    }
    wait_hash(&env, &ns, "named", &h2).await;
    let late_d = wait_for("late Deployment rolled", TIMEOUT, || async {
        let d = late.get("late").await.ok()?;
        (template_annotation(&d).as_deref() == Some(h2.as_str())).then_some(d)
    })
    .await;
    assert!(late_d.is_ok(), "{late_d:?}\n{}", esr.logs());

    // Several more refreshes (1s) with the same value change nothing.
    tokio::time::sleep(Duration::from_secs(4)).await;
    for ((kind, plural), before) in KINDS.iter().zip(&second) {
        let now = api(&env, &ns, kind, plural).get("annotated").await.unwrap();
        assert_eq!(now.metadata.generation, before.metadata.generation);
        assert_eq!(
            now.metadata.resource_version,
            before.metadata.resource_version
        );
    }

    // Unannotated workloads (and those naming other Secrets) are untouched.
    let mut i = 0;
    for (kind, plural) in KINDS {
        let a = api(&env, &ns, kind, plural);
        for n in ["plain", "elsewhere"] {
            let after = a.get(n).await.unwrap();
            assert_eq!(
                after.metadata.resource_version.as_deref(),
                plain_before[i]["metadata"]["resourceVersion"].as_str(),
                "{kind}/{n} was modified"
            );
            assert_eq!(template_annotation(&after), None, "{kind}/{n}");
            i += 1;
        }
    }

    // Workloads are looked up in memory: esr listed each kind once (its watch's initial list),
    // not once per Secret write.
    if let Some(audit) = env.audit() {
        let writes = audit
            .entries()
            .into_iter()
            .filter(|e| {
                e.user_agent.starts_with("esr/")
                    && e.resource == "secrets"
                    && matches!(e.verb.as_str(), "create" | "update" | "patch")
            })
            .count();
        assert!(writes >= 2, "esr wrote the Secret {writes} times");
        for (_, plural) in KINDS {
            let lists = audit
                .entries()
                .into_iter()
                .filter(|e| {
                    e.user_agent.starts_with("esr/") && e.resource == plural && e.verb == "list"
                })
                .count();
            let watches = audit
                .entries()
                .into_iter()
                .filter(|e| {
                    e.user_agent.starts_with("esr/") && e.resource == plural && e.verb == "watch"
                })
                .count();
            println!(
                "{plural}: {lists} list, {watches} watch calls by esr for {writes} Secret writes"
            );
            // Before the caches, every Secret write listed every kind (`writes` lists).
            assert_eq!(
                lists, 1,
                "{plural}: {lists} lists for {writes} Secret writes"
            );
            assert!(watches >= 1, "{plural}: no watch");
        }
    }
    drop(esr);
}
