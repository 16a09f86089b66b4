//! ClusterPushSecret scenarios against esr-testkit (or ESR_E2E_KUBECONFIG) with the real `esr`
//! binary: the created PushSecrets push with the kubernetes provider (each namespace into itself).
//! Also the `clusterexternalsecret_*` metrics.
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

const CPS: &str = "push-all";

fn cps_api(env: &Env) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("external-secrets.io", "v1alpha1", "ClusterPushSecret");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "clusterpushsecrets");
    Api::all_with(env.client(), &ar)
}

fn ps_api(env: &Env, ns: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("external-secrets.io", "v1alpha1", "PushSecret");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "pushsecrets");
    Api::namespaced_with(env.client(), ns, &ar)
}

fn ces_api(env: &Env) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("external-secrets.io", "v1", "ClusterExternalSecret");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "clusterexternalsecrets");
    Api::all_with(env.client(), &ar)
}

async fn apply_cps(env: &Env, spec: Value) {
    let mut obj = json!({"apiVersion": "external-secrets.io/v1alpha1", "kind": "ClusterPushSecret",
        "metadata": {"name": CPS}, "spec": spec});
    env.scope_object(&mut obj);
    cps_api(env)
        .patch(CPS, &PatchParams::apply("e2e").force(), &Patch::Apply(&obj))
        .await
        .unwrap();
}

async fn cps_status(env: &Env) -> Value {
    let o = cps_api(env).get(CPS).await.unwrap();
    serde_json::to_value(o).unwrap()["status"].clone()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// Waits until the status has exactly these provisioned namespaces and these failed ones.
async fn wait_status(env: &Env, provisioned: &[&str], failed: &[&str]) -> Value {
    let mut want_p: Vec<String> = provisioned.iter().map(|s| s.to_string()).collect();
    want_p.sort();
    let mut want_f: Vec<String> = failed.iter().map(|s| s.to_string()).collect();
    want_f.sort();
    wait_for(
        &format!("provisionedNamespaces = {want_p:?}, failedNamespaces = {want_f:?}"),
        TIMEOUT,
        || async {
            let st = cps_status(env).await;
            let got_p = strings(&st["provisionedNamespaces"]);
            let got_f: Vec<String> = st["failedNamespaces"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|f| f["namespace"].as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default();
            (got_p == want_p && got_f == want_f).then_some(st)
        },
    )
    .await
    .unwrap()
}

async fn get_ps(env: &Env, ns: &str, name: &str) -> Option<Value> {
    ps_api(env, ns)
        .get_opt(name)
        .await
        .unwrap()
        .map(|o| serde_json::to_value(o).unwrap())
}

async fn wait_ps_gone(env: &Env, ns: &str, name: &str) {
    wait_for(&format!("PushSecret {ns}/{name} gone"), TIMEOUT, || async {
        get_ps(env, ns, name).await.is_none().then_some(())
    })
    .await
    .unwrap();
}

async fn wait_secret_gone(env: &Env, ns: &str, name: &str) {
    wait_for(&format!("Secret {ns}/{name} gone"), TIMEOUT, || async {
        secret(env, ns, name).await.is_none().then_some(())
    })
    .await
    .unwrap();
}

async fn create_ns(env: &Env, name: &str, labels: Value) {
    let ns: Namespace =
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap();
    Api::<Namespace>::all(env.client())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    env.track_namespace(name);
}

async fn label_ns(env: &Env, name: &str, labels: Value) {
    Api::<Namespace>::all(env.client())
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"labels": labels}})),
        )
        .await
        .unwrap();
}

/// A namespace ready to push: ServiceAccount, a kubernetes SecretStore `k8s` writing into the
/// namespace itself, and the source Secret `src` whose `crt` is `CERT-<ns>`.
async fn pushable_ns(env: &Env, name: &str, labels: Value) {
    create_ns(env, name, labels).await;
    apply(
        env,
        name,
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "pusher"}}),
    )
    .await;
    apply(
        env,
        name,
        json!({"apiVersion": "external-secrets.io/v1", "kind": "SecretStore", "metadata": {"name": "k8s"},
               "spec": {"provider": {"kubernetes": {"remoteNamespace": name,
                        "auth": {"serviceAccount": {"name": "pusher"}}}}}}),
    )
    .await;
    apply(
        env,
        name,
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "src"},
               "stringData": {"crt": format!("CERT-{name}")}}),
    )
    .await;
}

fn push_spec() -> Value {
    json!({"refreshInterval": "5s", "deletionPolicy": "Delete",
           "secretStoreRefs": [{"name": "k8s", "kind": "SecretStore"}],
           "selector": {"secret": {"name": "src"}},
           "data": [{"match": {"secretKey": "crt", "remoteRef": {"remoteKey": "pushed", "property": "crt"}}}]})
}

async fn wait_pushed(env: &Env, ns: &str) {
    wait_secret_data(env, ns, "pushed", &[("crt", &format!("CERT-{ns}"))]).await;
}

async fn http_get(addr: &str, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = addr.to_string();
    let path = path.to_string();
    wait_for(&format!("GET {addr}{path}"), TIMEOUT, || {
        let addr = addr.clone();
        let path = path.clone();
        async move {
            let mut s = tokio::net::TcpStream::connect(&addr).await.ok()?;
            s.write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes())
                .await
                .ok()?;
            let mut buf = String::new();
            s.read_to_string(&mut buf).await.ok()?;
            let (head, body) = buf.split_once("\r\n\r\n")?;
            (head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"))
                .then(|| body.to_string())
        }
    })
    .await
    .unwrap()
}

/// Waits until the metrics text satisfies `ok`.
async fn wait_metrics(addr: &str, what: &str, ok: impl Fn(&str) -> bool) -> String {
    wait_for(what, TIMEOUT, || async {
        let text = http_get(addr, "/metrics").await;
        ok(&text).then_some(text)
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fan_out_push_new_namespace_stop_matching_foreign_rename_and_deletion() {
    let env = Env::start().await.unwrap();
    let esr = env.start_esr(CLUSTER_WIDE).unwrap();
    let maddr = esr.metrics_addr.clone().unwrap();
    let sfx = env.namespace("sfx").await.unwrap();
    let sfx = sfx.trim_start_matches("sfx-").to_string();
    let a = format!("cps-a-{sfx}");
    let b = format!("cps-b-{sfx}");
    let other = format!("cps-other-{sfx}");
    pushable_ns(&env, &a, json!({"push": env.id()})).await;
    pushable_ns(&env, &b, json!({"push": env.id()})).await;
    pushable_ns(&env, &other, json!({"push": "no"})).await;

    apply_cps(
        &env,
        json!({"pushSecretSpec": push_spec(),
               "pushSecretMetadata": {"labels": {"team": "platform"}, "annotations": {"note": "cps"}},
               "namespaceSelectors": [{"matchLabels": {"push": env.id()}}],
               "refreshTime": "1h"}),
    )
    .await;
    let st = wait_status(&env, &[&a, &b], &[]).await;
    assert_eq!(st["pushSecretName"], CPS);
    assert_eq!(
        st["conditions"],
        json!([{"type": "Ready", "status": "True"}])
    );
    for ns in [&a, &b] {
        let ps = get_ps(&env, ns, CPS).await.unwrap();
        assert_eq!(ps["metadata"]["labels"], json!({"team": "platform"}));
        assert_eq!(ps["metadata"]["annotations"]["note"], "cps");
        let owner = &ps["metadata"]["ownerReferences"][0];
        assert_eq!(owner["kind"], "ClusterPushSecret");
        assert_eq!(owner["apiVersion"], "external-secrets.io/v1alpha1");
        assert_eq!(owner["name"], CPS);
        assert_eq!(owner["controller"], true);
        assert_eq!(ps["spec"]["selector"], json!({"secret": {"name": "src"}}));
        // The PushSecret pushes (kubernetes provider, into the namespace itself).
        wait_pushed(&env, ns).await;
        wait_condition_ps(&env, ns, CPS).await;
    }
    assert!(get_ps(&env, &other, CPS).await.is_none());
    assert!(secret(&env, &other, "pushed").await.is_none());
    wait_metrics(&maddr, "clusterpushsecret metrics", |t| {
        t.contains(&format!(
            "clusterpushsecret_status_condition{{name=\"{CPS}\",namespace=\"\",condition=\"Ready\",status=\"True\"}} 1"
        )) && t.contains(&format!(
            "clusterpushsecret_reconcile_duration{{name=\"{CPS}\",namespace=\"\"}}"
        ))
    })
    .await;

    // A new matching namespace gets its PushSecret (and its push) without waiting for refreshTime.
    let late = format!("cps-late-{sfx}");
    pushable_ns(&env, &late, json!({"push": env.id()})).await;
    wait_pushed(&env, &late).await;
    wait_status(&env, &[&a, &b, &late], &[]).await;

    // A namespace that stops matching is cleaned up: its PushSecret is deleted, and with
    // deletionPolicy Delete the PushSecret removes what it pushed.
    label_ns(&env, &a, json!({"push": "no"})).await;
    wait_ps_gone(&env, &a, CPS).await;
    wait_secret_gone(&env, &a, "pushed").await;
    wait_status(&env, &[&b, &late], &[]).await;

    // A foreign PushSecret with the same name is reported and never touched.
    let foreign_ns = format!("cps-foreign-{sfx}");
    create_ns(&env, &foreign_ns, json!({})).await;
    let foreign = json!({"apiVersion": "external-secrets.io/v1alpha1", "kind": "PushSecret",
        "metadata": {"name": CPS, "labels": {"owner": "someone-else"}},
        "spec": {"refreshInterval": "1h", "secretStoreRefs": [{"name": "theirs"}],
                 "selector": {"secret": {"name": "theirs"}}, "data": []}});
    ps_api(&env, &foreign_ns)
        .patch(
            CPS,
            &PatchParams::apply("e2e").force(),
            &Patch::Apply(&foreign),
        )
        .await
        .unwrap();
    label_ns(&env, &foreign_ns, json!({"push": env.id()})).await;
    let st = wait_status(&env, &[&b, &late], &[&foreign_ns]).await;
    assert_eq!(
        st["failedNamespaces"],
        json!([{"namespace": foreign_ns, "reason": "push secret already exists in namespace"}])
    );
    assert_eq!(
        st["conditions"],
        json!([{"type": "Ready", "status": "False", "message": "one or more namespaces failed"}])
    );
    let ps = get_ps(&env, &foreign_ns, CPS).await.unwrap();
    assert_eq!(ps["metadata"]["labels"], json!({"owner": "someone-else"}));
    assert!(
        ps["metadata"]
            .get("ownerReferences")
            .is_none_or(Value::is_null),
        "{ps}"
    );
    assert_eq!(
        ps["spec"]["selector"],
        json!({"secret": {"name": "theirs"}})
    );
    wait_metrics(&maddr, "clusterpushsecret Ready=False", |t| {
        t.contains(&format!(
            "clusterpushsecret_status_condition{{name=\"{CPS}\",namespace=\"\",condition=\"Ready\",status=\"False\"}} 1"
        ))
    })
    .await;
    // Once the foreign PushSecret is gone, the namespace is provisioned.
    ps_api(&env, &foreign_ns)
        .delete(CPS, &DeleteParams::default())
        .await
        .unwrap();
    wait_status(&env, &[&b, &late, &foreign_ns], &[]).await;
    label_ns(&env, &foreign_ns, json!({"push": "no"})).await;
    wait_status(&env, &[&b, &late], &[]).await;

    // Renaming the PushSecrets removes the old-name ones.
    apply_cps(
        &env,
        json!({"pushSecretSpec": push_spec(), "pushSecretName": "renamed",
               "namespaceSelectors": [{"matchLabels": {"push": env.id()}}]}),
    )
    .await;
    let st = wait_status(&env, &[&b, &late], &[]).await;
    let st = if st["pushSecretName"] == "renamed" {
        st
    } else {
        wait_for("pushSecretName renamed", TIMEOUT, || async {
            let st = cps_status(&env).await;
            (st["pushSecretName"] == "renamed").then_some(st)
        })
        .await
        .unwrap()
    };
    assert_eq!(strings(&st["provisionedNamespaces"]).len(), 2);
    for ns in [&b, &late] {
        wait_ps_gone(&env, ns, CPS).await;
        let ps = wait_for("renamed PushSecret", TIMEOUT, || async {
            get_ps(&env, ns, "renamed").await
        })
        .await
        .unwrap();
        // Metadata no longer in the spec: labels and annotations replaced (emptied).
        assert!(
            ps["metadata"].get("labels").is_none_or(|l| l == &json!({})),
            "{ps}"
        );
        wait_pushed(&env, ns).await;
    }

    // Deleting the ClusterPushSecret removes its PushSecrets (owner references) and its series.
    cps_api(&env)
        .delete(CPS, &DeleteParams::default())
        .await
        .unwrap();
    for ns in [&b, &late] {
        wait_ps_gone(&env, ns, "renamed").await;
        wait_secret_gone(&env, ns, "pushed").await;
    }
    wait_metrics(&maddr, "clusterpushsecret series removed", |t| {
        !t.contains(&format!(
            "clusterpushsecret_status_condition{{name=\"{CPS}\""
        )) && !t.contains(&format!(
            "clusterpushsecret_reconcile_duration{{name=\"{CPS}\""
        ))
    })
    .await;
}

/// Waits for a PushSecret's Ready=True Synced.
async fn wait_condition_ps(env: &Env, ns: &str, name: &str) -> Value {
    wait_for(
        &format!("PushSecret {ns}/{name} Ready=True Synced"),
        TIMEOUT,
        || async {
            let o = get_ps(env, ns, name).await?;
            let (s, r, _) = ready(&o);
            (s == "True" && r == "Synced").then_some(o)
        },
    )
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_selector_is_errored_with_a_warning_event() {
    let env = Env::start().await.unwrap();
    let _esr = env.start_esr(CLUSTER_WIDE).unwrap();
    apply_cps(
        &env,
        json!({"pushSecretSpec": push_spec(),
               "namespaceSelectors": [{"matchExpressions": [{"key": "push", "operator": "In", "values": []}]}]}),
    )
    .await;
    let st = wait_for("ClusterPushSecret Errored", TIMEOUT, || async {
        let st = cps_status(&env).await;
        let c = st["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == "Ready")?
            .clone();
        (c["reason"] == "Errored").then_some(st)
    })
    .await
    .unwrap();
    let c = &st["conditions"][0];
    assert_eq!(c["status"], "False");
    assert_eq!(c["message"], "failed to get target Namespaces");
    assert!(c["lastTransitionTime"].is_string(), "{st}");
    assert_eq!(st["pushSecretName"], CPS);
    let note = wait_event(&env, CPS, "Errored", "failed to get target Namespaces").await;
    assert_eq!(note, "failed to get target Namespaces");
    let ev = events(&env)
        .await
        .into_iter()
        .find(|e| e.4 == CPS && e.2 == "Errored")
        .unwrap();
    assert_eq!(
        (ev.0.as_str(), ev.1.as_str()),
        ("external-secrets-controller", "Warning")
    );

    // Fixing the selector makes it Ready (no matching namespace: nothing provisioned).
    apply_cps(
        &env,
        json!({"pushSecretSpec": push_spec(),
               "namespaceSelectors": [{"matchLabels": {"push": "nowhere"}}]}),
    )
    .await;
    wait_for("ClusterPushSecret Ready", TIMEOUT, || async {
        let st = cps_status(&env).await;
        (st["conditions"] == json!([{"type": "Ready", "status": "True"}])).then_some(())
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconciler_flag_false_disables_cluster_push_secrets() {
    let env = Env::start().await.unwrap();
    let _esr = env
        .start_esr(&["--enable-cluster-push-secret-reconciler=false"])
        .unwrap();
    let sfx = env.namespace("sfx").await.unwrap();
    let sfx = sfx.trim_start_matches("sfx-").to_string();
    let a = format!("cps-off-{sfx}");
    pushable_ns(&env, &a, json!({"push": env.id()})).await;
    apply_cps(
        &env,
        json!({"pushSecretSpec": push_spec(),
               "namespaceSelectors": [{"matchLabels": {"push": env.id()}}]}),
    )
    .await;
    // The controller is up: an ExternalSecret applied after the ClusterPushSecret syncs.
    apply(
        &env,
        &a,
        fake_ss("fake", json!([{"key": "k", "value": "v"}])),
    )
    .await;
    apply(
        &env,
        &a,
        es(
            "probe",
            json!({"refreshInterval": "1h", "secretStoreRef": {"kind": "SecretStore", "name": "fake"},
                   "target": {"name": "probe"}, "data": [{"secretKey": "k", "remoteRef": {"key": "k"}}]}),
        ),
    )
    .await;
    wait_secret_data(&env, &a, "probe", &[("k", "v")]).await;
    // A namespace event after startup would also have triggered the ClusterPushSecret.
    label_ns(&env, &a, json!({"push": env.id(), "touched": "1"})).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(get_ps(&env, &a, CPS).await.is_none());
    assert!(cps_status(&env).await.is_null());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_external_secret_metrics_are_served_and_removed() {
    let env = Env::start().await.unwrap();
    let esr = env.start_esr(CLUSTER_WIDE).unwrap();
    let maddr = esr.metrics_addr.clone().unwrap();
    apply(
        &env,
        "",
        fake_css("fake", json!([{"key": "/tls/cert", "value": "CERT"}])),
    )
    .await;
    let ns = env.namespace("cesm").await.unwrap();
    let ces = json!({"apiVersion": "external-secrets.io/v1", "kind": "ClusterExternalSecret",
        "metadata": {"name": "wild"},
        "spec": {"namespaces": [ns], "externalSecretSpec": {
            "refreshInterval": "1h",
            "secretStoreRef": {"kind": "ClusterSecretStore", "name": "fake"},
            "target": {"name": "wild-secret"},
            "data": [{"secretKey": "cert", "remoteRef": {"key": "/tls/cert"}}]}}});
    ces_api(&env)
        .patch(
            "wild",
            &PatchParams::apply("e2e").force(),
            &Patch::Apply(&ces),
        )
        .await
        .unwrap();
    wait_secret_data(&env, &ns, "wild-secret", &[("cert", "CERT")]).await;
    let text = wait_metrics(&maddr, "clusterexternalsecret Ready=True", |t| {
        t.contains(
            "clusterexternalsecret_status_condition{name=\"wild\",namespace=\"\",condition=\"Ready\",status=\"True\"} 1",
        )
    })
    .await;
    for line in text
        .lines()
        .filter(|l| l.starts_with("clusterexternalsecret_"))
    {
        println!("metrics: {line}");
    }
    assert!(
        text.contains(
            "clusterexternalsecret_status_condition{name=\"wild\",namespace=\"\",condition=\"Ready\",status=\"False\"} 0"
        ),
        "{text}"
    );
    assert!(
        text.contains("clusterexternalsecret_reconcile_duration{name=\"wild\",namespace=\"\"}"),
        "{text}"
    );
    ces_api(&env)
        .delete("wild", &DeleteParams::default())
        .await
        .unwrap();
    wait_metrics(&maddr, "clusterexternalsecret series removed", |t| {
        !t.contains("clusterexternalsecret_status_condition{name=\"wild\"")
            && !t.contains("clusterexternalsecret_reconcile_duration{name=\"wild\"")
    })
    .await;
}
