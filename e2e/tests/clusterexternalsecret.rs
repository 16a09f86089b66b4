//! ClusterExternalSecret scenarios against esr-testkit (or ESR_E2E_KUBECONFIG) with the real
//! `esr` binary and the fake provider.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod es_support;

use std::time::Duration;

use es_support::*;
use esr_e2e::{CLUSTER_WIDE, Env, wait_for};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use serde_json::{Value, json};

const NS_FINALIZER: &str = "externalsecrets.external-secrets.io/ces-wild";

fn ces_api(env: &Env) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("external-secrets.io", "v1", "ClusterExternalSecret");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "clusterexternalsecrets");
    Api::all_with(env.client(), &ar)
}

async fn apply_ces(env: &Env, spec: Value) {
    let mut obj = json!({"apiVersion": "external-secrets.io/v1", "kind": "ClusterExternalSecret",
        "metadata": {"name": "wild"}, "spec": spec});
    env.scope_object(&mut obj);
    ces_api(env)
        .patch(
            "wild",
            &PatchParams::apply("e2e").force(),
            &Patch::Apply(&obj),
        )
        .await
        .unwrap();
}

async fn ces_status(env: &Env) -> Value {
    let o = ces_api(env).get("wild").await.unwrap();
    serde_json::to_value(o).unwrap()["status"].clone()
}

/// Waits until the CES status has exactly these provisioned namespaces (sorted).
async fn wait_provisioned(env: &Env, want: &[&str]) -> Value {
    let mut want: Vec<String> = want.iter().map(|s| s.to_string()).collect();
    want.sort();
    wait_for(
        &format!("provisionedNamespaces = {want:?}"),
        TIMEOUT,
        || async {
            let st = ces_status(env).await;
            let got: Vec<String> = st["provisionedNamespaces"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default();
            (got == want).then_some(st)
        },
    )
    .await
    .unwrap()
}

/// Creates a namespace with labels (deleted again by the test).
async fn create_ns(env: &Env, name: &str, labels: Value) {
    let ns: Namespace =
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap();
    Api::<Namespace>::all(env.client())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    env.track_namespace(name);
}

async fn ns_finalizers(env: &Env, name: &str) -> Vec<String> {
    Api::<Namespace>::all(env.client())
        .get(name)
        .await
        .unwrap()
        .metadata
        .finalizers
        .unwrap_or_default()
}

async fn wait_gone(env: &Env, kind: &str, ns: &str, name: &str) {
    wait_for(&format!("{kind} {ns}/{name} gone"), TIMEOUT, || async {
        get(env, kind, ns, name).await.is_none().then_some(())
    })
    .await
    .unwrap();
}

fn es_spec() -> Value {
    json!({
        "refreshInterval": "1h",
        "secretStoreRef": {"kind": "ClusterSecretStore", "name": "fake"},
        "target": {"name": "wild-secret"},
        "data": [{"secretKey": "cert", "remoteRef": {"key": "/tls/cert"}}]
    })
}

async fn setup(env: &Env) {
    apply(
        env,
        "",
        fake_css("fake", json!([{"key": "/tls/cert", "value": "CERT"}])),
    )
    .await;
    wait_condition(env, "ClusterSecretStore", "", "fake", "True", "Valid").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selection_new_namespaces_stop_matching_and_deletion() {
    let env = Env::start().await.unwrap();
    let _esr = env.start_esr(CLUSTER_WIDE).unwrap();
    setup(&env).await;
    let sfx = env.namespace("sfx").await.unwrap(); // unique suffix for this run
    let sfx = sfx.trim_start_matches("sfx-").to_string();
    let by_label = format!("lbl-{sfx}");
    let by_name = format!("named-{sfx}");
    let by_regex = format!("feature-{sfx}");
    let other = format!("other-{sfx}");
    create_ns(&env, &by_label, json!({"ces": env.id()})).await;
    create_ns(&env, &by_name, json!({})).await;
    create_ns(&env, &by_regex, json!({})).await;
    create_ns(&env, &other, json!({"ces": "no"})).await;

    apply_ces(
        &env,
        json!({
            "externalSecretSpec": es_spec(),
            "externalSecretMetadata": {"labels": {"team": "platform"}},
            "namespaceSelectors": [{"matchLabels": {"ces": env.id()}}],
            "namespaces": [by_name],
            "namespaceRegexes": ["^feature-"],
            "refreshTime": "1h"
        }),
    )
    .await;
    let st = wait_provisioned(&env, &[&by_label, &by_name, &by_regex]).await;
    assert_eq!(st["externalSecretName"], "wild");
    assert_eq!(
        st["conditions"],
        json!([{"type": "Ready", "status": "True"}])
    );
    assert!(
        st.get("failedNamespaces").is_none_or(Value::is_null),
        "{st}"
    );
    for ns in [&by_label, &by_name, &by_regex] {
        wait_secret_data(&env, ns, "wild-secret", &[("cert", "CERT")]).await;
        let es = get(&env, "ExternalSecret", ns, "wild").await.unwrap();
        assert_eq!(es["metadata"]["labels"], json!({"team": "platform"}));
        let owner = &es["metadata"]["ownerReferences"][0];
        assert_eq!(owner["kind"], "ClusterExternalSecret");
        assert_eq!(owner["controller"], true);
        assert!(
            ns_finalizers(&env, ns)
                .await
                .contains(&NS_FINALIZER.to_string())
        );
    }
    assert!(get(&env, "ExternalSecret", &other, "wild").await.is_none());
    assert!(
        !ns_finalizers(&env, &other)
            .await
            .contains(&NS_FINALIZER.to_string())
    );

    // A new matching namespace (by label, and by regex) gets its Secret without waiting for refreshTime.
    let late = format!("late-{sfx}");
    create_ns(&env, &late, json!({"ces": env.id()})).await;
    let late_rx = format!("feature-late-{sfx}");
    create_ns(&env, &late_rx, json!({})).await;
    wait_secret_data(&env, &late, "wild-secret", &[("cert", "CERT")]).await;
    wait_secret_data(&env, &late_rx, "wild-secret", &[("cert", "CERT")]).await;

    // A namespace that stops matching is cleaned up: ES (and with it, by ownership, its Secret) and finalizer.
    Api::<Namespace>::all(env.client())
        .patch(
            &by_label,
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"labels": {"ces": "no"}}})),
        )
        .await
        .unwrap();
    wait_gone(&env, "ExternalSecret", &by_label, "wild").await;
    wait_provisioned(&env, &[&by_name, &by_regex, &late, &late_rx]).await;
    assert!(
        !ns_finalizers(&env, &by_label)
            .await
            .contains(&NS_FINALIZER.to_string())
    );

    // force-sync is mirrored onto the ExternalSecrets.
    ces_api(&env)
        .patch(
            "wild",
            &PatchParams::default(),
            &Patch::Merge(
                &json!({"metadata": {"annotations": {"external-secrets.io/force-sync": "now"}}}),
            ),
        )
        .await
        .unwrap();
    wait_for("force-sync mirrored", TIMEOUT, || async {
        let es = get(&env, "ExternalSecret", &by_name, "wild").await?;
        (es["metadata"]["annotations"]["external-secrets.io/force-sync"] == "now").then_some(())
    })
    .await
    .unwrap();

    // A CES deletion cleans up every ExternalSecret and namespace finalizer.
    ces_api(&env)
        .delete("wild", &DeleteParams::default())
        .await
        .unwrap();
    for ns in [&by_name, &by_regex, &late, &late_rx] {
        wait_gone(&env, "ExternalSecret", ns, "wild").await;
        assert!(
            !ns_finalizers(&env, ns)
                .await
                .contains(&NS_FINALIZER.to_string())
        );
    }
    wait_for("CES gone", TIMEOUT, || async {
        ces_api(&env)
            .get_opt("wild")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await
    .unwrap();
    for ns in [&by_label, &by_name, &by_regex, &other, &late, &late_rx] {
        let _ = Api::<Namespace>::all(env.client())
            .delete(ns, &DeleteParams::background())
            .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_external_secret_is_reported_and_kept() {
    let env = Env::start().await.unwrap();
    let _esr = env.start_esr(CLUSTER_WIDE).unwrap();
    setup(&env).await;
    let a = env.namespace("confa").await.unwrap();
    let b = env.namespace("confb").await.unwrap();
    // A foreign ExternalSecret named like the CES's target in namespace a.
    let mut foreign = es("wild", es_spec());
    foreign["metadata"]["labels"] = json!({"owner": "someone-else"});
    apply(&env, &a, foreign).await;
    apply_ces(
        &env,
        json!({"externalSecretSpec": es_spec(), "namespaces": [a, b]}),
    )
    .await;
    let st = wait_provisioned(&env, &[&b]).await;
    assert_eq!(
        st["failedNamespaces"],
        json!([{"namespace": a, "reason": "external secret already exists in namespace"}])
    );
    assert_eq!(
        st["conditions"],
        json!([{"type": "Ready", "status": "False", "message": "one or more namespaces failed"}])
    );
    // The foreign ExternalSecret is untouched.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let f = get(&env, "ExternalSecret", &a, "wild").await.unwrap();
    assert_eq!(f["metadata"]["labels"], json!({"owner": "someone-else"}));
    assert!(f["metadata"]["ownerReferences"].is_null(), "{f}");
    wait_secret_data(&env, &b, "wild-secret", &[("cert", "CERT")]).await;

    // Once the foreign ExternalSecret is gone, the CES takes the namespace.
    delete(&env, "ExternalSecret", &a, "wild").await;
    let st = wait_provisioned(&env, &[&a, &b]).await;
    assert_eq!(
        st["conditions"],
        json!([{"type": "Ready", "status": "True"}])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_generator_password_in_every_namespace() {
    let env = Env::start().await.unwrap();
    let _esr = env.start_esr(CLUSTER_WIDE).unwrap();
    let gvk = GroupVersionKind::gvk(
        "generators.external-secrets.io",
        "v1alpha1",
        "ClusterGenerator",
    );
    let ar = ApiResource::from_gvk_with_plural(&gvk, "clustergenerators");
    let gen_api: Api<DynamicObject> = Api::all_with(env.client(), &ar);
    let g = json!({"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "ClusterGenerator",
        "metadata": {"name": "pw"},
        "spec": {"kind": "Password", "generator": {"passwordSpec": {
            "length": 20, "digits": 5, "symbols": 0, "noUpper": true, "allowRepeat": true}}}});
    gen_api
        .patch("pw", &PatchParams::apply("e2e").force(), &Patch::Apply(&g))
        .await
        .unwrap();
    let a = env.namespace("gena").await.unwrap();
    let b = env.namespace("genb").await.unwrap();
    apply_ces(
        &env,
        json!({"namespaces": [a, b], "externalSecretSpec": {
        "refreshInterval": "1h", "target": {"name": "wild-secret"},
        "dataFrom": [{
            "sourceRef": {"generatorRef": {"apiVersion": "generators.external-secrets.io/v1alpha1",
                                           "kind": "ClusterGenerator", "name": "pw"}},
            "rewrite": [{"regexp": {"source": "password", "target": "db-password"}}]
        }]}}),
    )
    .await;
    let mut values = Vec::new();
    for ns in [&a, &b] {
        let s = wait_for(&format!("generated secret in {ns}"), TIMEOUT, || async {
            let s = secret(&env, ns, "wild-secret").await?;
            decoded(&s).get("db-password").cloned()
        })
        .await
        .unwrap();
        assert_eq!(s.chars().count(), 20, "{s}");
        assert_eq!(s.chars().filter(|c| c.is_ascii_digit()).count(), 5, "{s}");
        assert!(
            s.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()),
            "{s}"
        );
        values.push(s);
    }
    assert_ne!(
        values[0], values[1],
        "each ExternalSecret generates its own password"
    );
    let es = wait_condition(&env, "ExternalSecret", &a, "wild", "True", "SecretSynced").await;
    assert_eq!(ready(&es).2, "secret synced");
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// `make bench-fanout` (scripts/bench-fanout.sh): one CES matching BENCH_NAMESPACES (1,000)
/// namespaces plus BENCH_SECRETS (10,000) unrelated Secrets; prints the time until every Secret
/// exists, esr's RSS, and new-namespace → Secret latency p50/p99 over BENCH_NEW (100) namespaces.
/// A benchmark, not a test: it reports numbers and only fails when Secrets never appear.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "benchmark: run with scripts/bench-fanout.sh"]
async fn bench_fanout() {
    use futures::StreamExt;
    use std::time::Instant;
    let n_ns = env_usize("BENCH_NAMESPACES", 1000);
    let n_secrets = env_usize("BENCH_SECRETS", 10_000);
    let n_new = env_usize("BENCH_NEW", 100);
    let env = Env::start().await.unwrap();
    setup_without_esr_check(&env).await;
    let client = env.client();

    // Unrelated Secrets, spread over 10 namespaces.
    let t = Instant::now();
    for i in 0..10 {
        create_ns(&env, &format!("noise-{i}"), json!({})).await;
    }
    futures::stream::iter(0..n_secrets)
        .map(|i| {
            let api: Api<k8s_openapi::api::core::v1::Secret> =
                Api::namespaced(client.clone(), &format!("noise-{}", i % 10));
            async move {
                let s: k8s_openapi::api::core::v1::Secret = serde_json::from_value(
                    json!({"metadata": {"name": format!("s-{i}")}, "stringData": {"k": "v".repeat(64)}}),
                )
                .unwrap();
                api.create(&PostParams::default(), &s).await.unwrap();
            }
        })
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await;
    futures::stream::iter(0..n_ns)
        .map(|i| {
            let env = &env;
            async move { create_ns(env, &format!("fan-{i}"), json!({"fanout": env.id()})).await }
        })
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await;
    println!(
        "setup: {n_secrets} unrelated Secrets, {n_ns} namespaces in {:?}",
        t.elapsed()
    );

    let extra = std::env::var("BENCH_ESR_ARGS").unwrap_or_default();
    let mut args: Vec<&str> = vec!["--loglevel", "warn"];
    args.extend(CLUSTER_WIDE);
    args.extend(extra.split_whitespace());
    println!("esr controller args: {args:?}");
    let esr = env.start_esr(&args).unwrap();
    wait_condition(&env, "ClusterSecretStore", "", "fake", "True", "Valid").await;
    let rss_idle = rss_kib(esr.pid());
    let t = Instant::now();
    apply_ces(
        &env,
        json!({"externalSecretSpec": es_spec(), "namespaceSelectors": [{"matchLabels": {"fanout": env.id()}}]}),
    )
    .await;
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::all(client.clone());
    let lp = kube::api::ListParams::default().labels("reconcile.external-secrets.io/managed=true");
    wait_for("all fan-out Secrets", Duration::from_secs(1800), || async {
        let n = secrets.list_metadata(&lp).await.ok()?.items.len();
        (n >= n_ns).then_some(())
    })
    .await
    .unwrap();
    let fan = t.elapsed();
    let rss_after = rss_kib(esr.pid());
    // esr's API requests during the fan-out, by verb and resource (what the client-qps budget
    // was spent on).
    if let Some(audit) = env.audit() {
        let mut by: std::collections::BTreeMap<String, usize> = Default::default();
        for e in audit
            .entries()
            .iter()
            .filter(|e| e.user_agent.starts_with("esr/"))
        {
            let res = if e.subresource.is_empty() {
                e.resource.clone()
            } else {
                format!("{}/{}", e.resource, e.subresource)
            };
            *by.entry(format!("{} {res}", e.verb)).or_default() += 1;
        }
        let total: usize = by.values().sum();
        println!("esr API requests until all Secrets existed: {total} ({by:?})");
    }

    let mut lat = Vec::with_capacity(n_new);
    for i in 0..n_new {
        let name = format!("late-{i}");
        let api: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), &name);
        let t = Instant::now();
        create_ns(&env, &name, json!({"fanout": env.id()})).await;
        loop {
            if api.get_opt("wild-secret").await.unwrap().is_some() {
                break;
            }
            assert!(
                t.elapsed() < Duration::from_secs(120),
                "no Secret in {name}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        lat.push(t.elapsed());
    }
    lat.sort();
    let pct = |p: f64| lat[((lat.len() as f64 * p).ceil() as usize).clamp(1, lat.len()) - 1];
    println!("fan-out: {n_ns} Secrets exist after {fan:?}");
    println!(
        "rss: {} MiB before the CES, {} MiB after fan-out, {} MiB at the end",
        rss_idle / 1024,
        rss_after / 1024,
        rss_kib(esr.pid()) / 1024
    );
    if !lat.is_empty() {
        println!(
            "new namespace -> Secret over {n_new}: p50 {:?} p99 {:?} max {:?}",
            pct(0.50),
            pct(0.99),
            lat[lat.len() - 1]
        );
    }
}

async fn setup_without_esr_check(env: &Env) {
    apply(
        env,
        "",
        fake_css("fake", json!([{"key": "/tls/cert", "value": "CERT"}])),
    )
    .await;
}

async fn metrics_text(addr: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).await.unwrap();
    resp
}

/// The Ready condition metric of a failing ClusterExternalSecret: esr exposes `status="False"` 1
/// (ESO updates the series only for Ready=True; docs/compatibility.md lists the difference), and
/// the Password generator's `prefix`/`suffix` (ESO v2.12) reach every namespace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_condition_metric_and_password_prefix_suffix() {
    let env = Env::start().await.unwrap();
    let esr = env.start_esr(CLUSTER_WIDE).unwrap();
    let maddr = esr.metrics_addr.clone().unwrap();
    setup(&env).await;
    let a = env.namespace("metra").await.unwrap();
    // A foreign ExternalSecret makes namespace a fail.
    apply(&env, &a, es("wild", es_spec())).await;
    apply_ces(
        &env,
        json!({"externalSecretSpec": es_spec(), "namespaces": [a]}),
    )
    .await;
    wait_for("CES Ready=False", TIMEOUT, || async {
        let st = ces_status(&env).await;
        (st["conditions"][0]["status"] == "False").then_some(())
    })
    .await
    .unwrap();
    let want_false = "clusterexternalsecret_status_condition{name=\"wild\",namespace=\"\",condition=\"Ready\",status=\"False\"} 1";
    let want_true = "clusterexternalsecret_status_condition{name=\"wild\",namespace=\"\",condition=\"Ready\",status=\"True\"} 0";
    let text = wait_for("failing CES metric", TIMEOUT, || async {
        let t = metrics_text(&maddr).await;
        t.contains(want_false).then_some(t)
    })
    .await
    .unwrap();
    assert!(text.contains(want_true), "{text}");

    // Password prefix/suffix through a ClusterGenerator.
    let gvk = GroupVersionKind::gvk(
        "generators.external-secrets.io",
        "v1alpha1",
        "ClusterGenerator",
    );
    let ar = ApiResource::from_gvk_with_plural(&gvk, "clustergenerators");
    let gen_api: Api<DynamicObject> = Api::all_with(env.client(), &ar);
    let g = json!({"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "ClusterGenerator",
        "metadata": {"name": "pw-fixed"},
        "spec": {"kind": "Password", "generator": {"passwordSpec": {
            "length": 10, "digits": 0, "symbols": 0, "noUpper": true,
            "prefix": "app-", "suffix": "-v1"}}}});
    gen_api
        .patch(
            "pw-fixed",
            &PatchParams::apply("e2e").force(),
            &Patch::Apply(&g),
        )
        .await
        .unwrap();
    let b = env.namespace("prefb").await.unwrap();
    apply_ces(
        &env,
        json!({"namespaces": [b], "externalSecretSpec": {
        "refreshInterval": "1h", "target": {"name": "wild-secret"},
        "dataFrom": [{"sourceRef": {"generatorRef": {
            "apiVersion": "generators.external-secrets.io/v1alpha1",
            "kind": "ClusterGenerator", "name": "pw-fixed"}}}]}}),
    )
    .await;
    let p = wait_for("generated secret", TIMEOUT, || async {
        let s = secret(&env, &b, "wild-secret").await?;
        decoded(&s).get("password").cloned()
    })
    .await
    .unwrap();
    let core = p
        .strip_prefix("app-")
        .and_then(|r| r.strip_suffix("-v1"))
        .unwrap_or_else(|| panic!("{p}"));
    assert_eq!(core.chars().count(), 10, "{p}");
    assert!(core.chars().all(|c| c.is_ascii_lowercase()), "{p}");
}
