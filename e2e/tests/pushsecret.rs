//! PushSecret scenarios against esr-testkit (or ESR_E2E_KUBECONFIG) with the real `esr` binary and
//! the kubernetes provider pushing into another namespace.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod es_support;

use std::time::Duration;

use es_support::*;
use esr_e2e::{Env, wait_for};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams,
};
use serde_json::{Value, json};

fn ps_api(env: &Env, ns: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("external-secrets.io", "v1alpha1", "PushSecret");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "pushsecrets");
    Api::namespaced_with(env.client(), ns, &ar)
}

async fn apply_ps(env: &Env, ns: &str, name: &str, spec: Value) {
    let obj = json!({"apiVersion": "external-secrets.io/v1alpha1", "kind": "PushSecret",
        "metadata": {"name": name}, "spec": spec});
    ps_api(env, ns)
        .patch(
            name,
            &PatchParams::apply("e2e").force(),
            &Patch::Apply(&obj),
        )
        .await
        .unwrap();
}

async fn get_ps(env: &Env, ns: &str, name: &str) -> Option<Value> {
    ps_api(env, ns)
        .get_opt(name)
        .await
        .unwrap()
        .map(|o| serde_json::to_value(o).unwrap())
}

/// Waits for Ready=status/reason with a message and a generation-matching syncedResourceVersion
/// prefix (so a stale condition from the previous spec does not count).
async fn wait_ps(env: &Env, ns: &str, name: &str, status: &str, reason: &str) -> Value {
    wait_for(
        &format!("PushSecret {ns}/{name} {status} {reason}"),
        TIMEOUT,
        || async {
            let o = get_ps(env, ns, name).await?;
            let (s, r, _) = ready(&o);
            let generation = o["metadata"]["generation"].as_i64().unwrap_or(0);
            let rv_ok = status != "True"
                || o["status"]["syncedResourceVersion"]
                    .as_str()
                    .is_some_and(|v| v.starts_with(&format!("{generation}-")));
            (s == status && r == reason && rv_ok).then_some(o)
        },
    )
    .await
    .unwrap()
}

async fn wait_remote(env: &Env, ns: &str, name: &str, want: &[(&str, &str)]) {
    wait_secret_data(env, ns, name, want).await;
}

async fn wait_remote_gone(env: &Env, ns: &str, name: &str) {
    wait_for(&format!("secret {ns}/{name} gone"), TIMEOUT, || async {
        secret(env, ns, name).await.is_none().then_some(())
    })
    .await
    .unwrap();
}

async fn setup(env: &Env) -> (String, String) {
    let ns = env.namespace("push").await.unwrap();
    let dst = env.namespace("push-dst").await.unwrap();
    apply(
        env,
        &ns,
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "pusher"}}),
    )
    .await;
    apply(
        env,
        &ns,
        json!({"apiVersion": "external-secrets.io/v1", "kind": "SecretStore", "metadata": {"name": "k8s"},
               "spec": {"provider": {"kubernetes": {"remoteNamespace": dst,
                        "auth": {"serviceAccount": {"name": "pusher"}}}}}}),
    )
    .await;
    apply(
        env,
        &ns,
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "src"},
               "stringData": {"crt": "CERT1", "key": "KEY1"}}),
    )
    .await;
    (ns, dst)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_update_and_delete_with_deletion_policy_delete() {
    let env = Env::start().await.unwrap();
    let _esr = env.start_esr(&[]).unwrap();
    let (ns, dst) = setup(&env).await;
    apply_ps(
        &env,
        &ns,
        "push",
        json!({"refreshInterval": "1s", "deletionPolicy": "Delete",
               "secretStoreRefs": [{"name": "k8s", "kind": "SecretStore"}],
               "selector": {"secret": {"name": "src"}},
               "data": [{"match": {"secretKey": "crt", "remoteRef": {"remoteKey": "pushed", "property": "crt"}}}]}),
    )
    .await;
    let ps = wait_ps(&env, &ns, "push", "True", "Synced").await;
    assert_eq!(ready(&ps).2, "PushSecret synced successfully");
    assert_eq!(
        ps["status"]["syncedPushSecrets"]["SecretStore/k8s"]["pushed/crt"]["match"],
        json!({"secretKey": "crt", "remoteRef": {"remoteKey": "pushed", "property": "crt"}})
    );
    assert!(
        ps["metadata"]["finalizers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f == "pushsecret.externalsecrets.io/finalizer"),
        "{ps}"
    );
    wait_remote(&env, &dst, "pushed", &[("crt", "CERT1")]).await;

    // Source update is pushed on the next refresh.
    apply(
        &env,
        &ns,
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "src"},
               "stringData": {"crt": "CERT2", "key": "KEY1"}}),
    )
    .await;
    wait_remote(&env, &dst, "pushed", &[("crt", "CERT2")]).await;

    // Spec update: crt moves to another remote secret (the old entry is deleted), key is added.
    apply_ps(
        &env,
        &ns,
        "push",
        json!({"refreshInterval": "1s", "deletionPolicy": "Delete",
        "secretStoreRefs": [{"name": "k8s", "kind": "SecretStore"}],
        "selector": {"secret": {"name": "src"}},
        "data": [
          {"match": {"secretKey": "crt", "remoteRef": {"remoteKey": "pushed2", "property": "crt"}}},
          {"match": {"secretKey": "key", "remoteRef": {"remoteKey": "pushed", "property": "key"}}}
        ]}),
    )
    .await;
    wait_remote(&env, &dst, "pushed", &[("key", "KEY1")]).await;
    wait_remote(&env, &dst, "pushed2", &[("crt", "CERT2")]).await;
    let ps = wait_ps(&env, &ns, "push", "True", "Synced").await;
    let synced = ps["status"]["syncedPushSecrets"]["SecretStore/k8s"]
        .as_object()
        .unwrap();
    let mut keys: Vec<&String> = synced.keys().collect();
    keys.sort();
    assert_eq!(keys, vec!["pushed/key", "pushed2/crt"]);

    // Deleting the PushSecret deletes the remote secrets (deletionPolicy: Delete).
    ps_api(&env, &ns)
        .delete("push", &DeleteParams::default())
        .await
        .unwrap();
    wait_remote_gone(&env, &dst, "pushed").await;
    wait_remote_gone(&env, &dst, "pushed2").await;
    wait_for("PushSecret gone", TIMEOUT, || async {
        get_ps(&env, &ns, "push").await.is_none().then_some(())
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn if_not_exists_never_overwrites_or_deletes_foreign_secrets() {
    let env = Env::start().await.unwrap();
    let _esr = env.start_esr(&[]).unwrap();
    let (ns, dst) = setup(&env).await;
    // A remote secret that esr did not create.
    apply(
        &env,
        &dst,
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "foreign"},
               "stringData": {"crt": "THEIRS"}}),
    )
    .await;
    apply_ps(
        &env,
        &ns,
        "ine",
        json!({"refreshInterval": "1s", "updatePolicy": "IfNotExists", "deletionPolicy": "Delete",
        "secretStoreRefs": [{"name": "k8s"}],
        "selector": {"secret": {"name": "src"}},
        "data": [
          {"match": {"secretKey": "crt", "remoteRef": {"remoteKey": "foreign", "property": "crt"}}},
          {"match": {"secretKey": "crt", "remoteRef": {"remoteKey": "fresh", "property": "crt"}}}
        ]}),
    )
    .await;
    let ps = wait_ps(&env, &ns, "ine", "True", "Synced").await;
    assert_eq!(
        ready(&ps).2,
        "PushSecret synced successfully. Existing secrets in providers unchanged."
    );
    wait_remote(&env, &dst, "fresh", &[("crt", "CERT1")]).await;
    // Several refreshes later the foreign value is still untouched, even after the source changed.
    apply(
        &env,
        &ns,
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "src"},
               "stringData": {"crt": "CERT9", "key": "KEY1"}}),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    wait_remote(&env, &dst, "foreign", &[("crt", "THEIRS")]).await;
    // `fresh` exists now, so IfNotExists leaves it too.
    wait_remote(&env, &dst, "fresh", &[("crt", "CERT1")]).await;
    let ps = get_ps(&env, &ns, "ine").await.unwrap();
    assert!(
        ps["status"]["syncedPushSecrets"]["SecretStore/k8s"]
            .get("foreign/crt")
            .is_none(),
        "{ps}"
    );

    // Deleting the PushSecret deletes only what esr pushed.
    ps_api(&env, &ns)
        .delete("ine", &DeleteParams::default())
        .await
        .unwrap();
    wait_remote_gone(&env, &dst, "fresh").await;
    wait_remote(&env, &dst, "foreign", &[("crt", "THEIRS")]).await;
}

async fn http_get(addr: &str, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).await.unwrap();
    resp
}

fn password_api(env: &Env, ns: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("generators.external-secrets.io", "v1alpha1", "Password");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "passwords");
    Api::namespaced_with(env.client(), ns, &ar)
}

fn synced_keys(ps: &Value, store: &str) -> Vec<String> {
    let mut k: Vec<String> = ps["status"]["syncedPushSecrets"][store]
        .as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default();
    k.sort();
    k
}

fn finalizers(obj: &Value) -> Vec<String> {
    obj["metadata"]["finalizers"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

const STORE_FINALIZER: &str = "secretstore.externalsecrets.io/finalizer";

/// Whether the store `kind` `ns/name` carries the store finalizer (`None`: no such store).
async fn store_held(env: &Env, kind: &str, ns: &str, name: &str) -> Option<bool> {
    get(env, kind, ns, name)
        .await
        .map(|s| finalizers(&s).iter().any(|f| f == STORE_FINALIZER))
}

/// Waits until the store's finalizer is present (`held`) or absent.
async fn wait_store_held(env: &Env, kind: &str, ns: &str, name: &str, held: bool) {
    wait_for(
        &format!("{kind} {name}: store finalizer present = {held}"),
        TIMEOUT,
        || async { (store_held(env, kind, ns, name).await? == held).then_some(()) },
    )
    .await
    .unwrap();
}

/// A fake SecretStore with labels (its pushed values can be read back with an ExternalSecret).
fn labeled_fake_ss(name: &str, labels: Value) -> Value {
    let mut s = fake_ss(name, json!([]));
    s["metadata"]["labels"] = labels;
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn label_selected_sources_transform_and_generator_with_fake_provider() {
    let env = Env::start().await.unwrap();
    let _esr = env.start_esr(&[]).unwrap();
    let ns = env.namespace("push-fake").await.unwrap();
    apply(
        &env,
        &ns,
        labeled_fake_ss("fake-a", json!({"tier": "push"})),
    )
    .await;
    apply(
        &env,
        &ns,
        labeled_fake_ss("fake-b", json!({"tier": "other"})),
    )
    .await;
    for (name, labels, data) in [
        ("a", json!({"push": "yes"}), json!({"db.user": "alice"})),
        ("b", json!({"push": "yes"}), json!({"db.pass": "s3cret"})),
        ("c", json!({"unrelated": "label"}), json!({"other": "x"})),
    ] {
        apply(
            &env,
            &ns,
            json!({"apiVersion": "v1", "kind": "Secret",
                   "metadata": {"name": name, "labels": labels}, "stringData": data}),
        )
        .await;
    }
    // Every Secret labelled push=yes, to every SecretStore labelled tier=push, one remote key per
    // source key, renamed by a transform template.
    apply_ps(
        &env,
        &ns,
        "sel",
        json!({"refreshInterval": "1s", "deletionPolicy": "Delete",
               "secretStoreRefs": [{"labelSelector": {"matchLabels": {"tier": "push"}}}],
               "selector": {"secret": {"selector": {"matchLabels": {"push": "yes"}}}},
               "dataTo": [{"storeRef": {"labelSelector": {"matchLabels": {"tier": "push"}}},
                           "rewrite": [{"transform": {"template": "pushed-{{ .value | replace \".\" \"-\" }}"}}]}]}),
    )
    .await;
    let ps = wait_ps(&env, &ns, "sel", "True", "Synced").await;
    assert_eq!(
        synced_keys(&ps, "SecretStore/fake-a"),
        vec!["pushed-db-pass", "pushed-db-user"]
    );
    assert!(
        ps["status"]["syncedPushSecrets"]
            .get("SecretStore/fake-b")
            .is_none(),
        "{ps}"
    );
    assert_eq!(
        ps["status"]["syncedPushSecrets"]["SecretStore/fake-a"]["pushed-db-user"]["match"],
        json!({"secretKey": "db.user", "remoteRef": {"remoteKey": "pushed-db-user"}})
    );
    // Read the pushed values back through the same fake store.
    apply(
        &env,
        &ns,
        es(
            "readback",
            json!({"refreshInterval": "1s",
                   "secretStoreRef": {"name": "fake-a", "kind": "SecretStore"},
                   "target": {"name": "readback"},
                   "dataFrom": [{"find": {"name": {"regexp": "^pushed-"}}}]}),
        ),
    )
    .await;
    wait_secret_data(
        &env,
        &ns,
        "readback",
        &[("pushed-db-user", "alice"), ("pushed-db-pass", "s3cret")],
    )
    .await;

    // A Secret that starts matching the selector is pushed on the next refresh.
    merge_patch(
        &env,
        "Secret",
        &ns,
        "c",
        json!({"metadata": {"labels": {"push": "yes"}}}),
    )
    .await;
    wait_secret_data(
        &env,
        &ns,
        "readback",
        &[
            ("pushed-db-user", "alice"),
            ("pushed-db-pass", "s3cret"),
            ("pushed-other", "x"),
        ],
    )
    .await;
    // One that stops matching is deleted from the store (deletionPolicy: Delete).
    merge_patch(
        &env,
        "Secret",
        &ns,
        "a",
        json!({"metadata": {"labels": {"push": "no"}}}),
    )
    .await;
    wait_secret_data(
        &env,
        &ns,
        "readback",
        &[("pushed-db-pass", "s3cret"), ("pushed-other", "x")],
    )
    .await;

    // generatorRef: a Password generator's output is pushed as if it were a Secret's data.
    password_api(&env, &ns)
        .patch(
            "pw",
            &PatchParams::apply("e2e").force(),
            &Patch::Apply(&json!({
                "apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "Password",
                "metadata": {"name": "pw"},
                "spec": {"length": 20, "digits": 5, "symbols": 0, "noUpper": true}})),
        )
        .await
        .unwrap();
    apply_ps(
        &env,
        &ns,
        "gen",
        json!({"refreshInterval": "1h",
               "secretStoreRefs": [{"name": "fake-b"}],
               "selector": {"generatorRef": {"apiVersion": "generators.external-secrets.io/v1alpha1",
                                             "kind": "Password", "name": "pw"}},
               "data": [{"match": {"secretKey": "password", "remoteRef": {"remoteKey": "generated"}}}]}),
    )
    .await;
    let ps = wait_ps(&env, &ns, "gen", "True", "Synced").await;
    assert_eq!(synced_keys(&ps, "SecretStore/fake-b"), vec!["generated"]);
    apply(
        &env,
        &ns,
        es(
            "genread",
            json!({"refreshInterval": "1s",
                   "secretStoreRef": {"name": "fake-b", "kind": "SecretStore"},
                   "target": {"name": "genread"},
                   "data": [{"secretKey": "pw", "remoteRef": {"key": "generated"}}]}),
        ),
    )
    .await;
    let s = wait_for("generated password read back", TIMEOUT, || async {
        secret(&env, &ns, "genread").await
    })
    .await
    .unwrap();
    let pw = decoded(&s)["pw"].clone();
    assert_eq!(pw.chars().count(), 20, "length");
    assert_eq!(pw.chars().filter(char::is_ascii_digit).count(), 5, "digits");
    assert!(
        pw.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()),
        "noUpper and no symbols"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn template_store_label_selector_and_metrics_with_kubernetes_provider() {
    let env = Env::start().await.unwrap();
    let esr = env.start_esr(&[]).unwrap();
    let (ns, dst) = setup(&env).await;
    apply(
        &env,
        &ns,
        json!({"apiVersion": "external-secrets.io/v1", "kind": "SecretStore",
               "metadata": {"name": "k8s-labeled", "labels": {"push": "yes"}},
               "spec": {"provider": {"kubernetes": {"remoteNamespace": dst,
                        "auth": {"serviceAccount": {"name": "pusher"}}}}}}),
    )
    .await;
    apply(
        &env,
        &ns,
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "tpl"},
               "data": {"info": "subject={{ .crt | lower }}"}}),
    )
    .await;
    apply_ps(
        &env,
        &ns,
        "tpl",
        json!({"refreshInterval": "1s",
               "secretStoreRefs": [{"labelSelector": {"matchLabels": {"push": "yes"}}, "kind": "SecretStore"}],
               "selector": {"secret": {"name": "src"}},
               "template": {"data": {"pem": "{{ .crt }}\n{{ .key }}"},
                            "templateFrom": [{"configMap": {"name": "tpl", "items": [{"key": "info"}]}}]},
               "data": [
                 {"match": {"secretKey": "pem", "remoteRef": {"remoteKey": "templated", "property": "pem"}}},
                 {"match": {"secretKey": "info", "remoteRef": {"remoteKey": "templated", "property": "info"}}},
                 {"match": {"secretKey": "crt", "remoteRef": {"remoteKey": "templated", "property": "crt"}}}
               ]}),
    )
    .await;
    let ps = wait_ps(&env, &ns, "tpl", "True", "Synced").await;
    wait_remote(
        &env,
        &dst,
        "templated",
        &[
            ("pem", "CERT1\nKEY1"),
            ("info", "subject=cert1"),
            ("crt", "CERT1"),
        ],
    )
    .await;
    // Only the label-selected store was used.
    assert_eq!(
        synced_keys(&ps, "SecretStore/k8s-labeled"),
        vec!["templated/crt", "templated/info", "templated/pem"]
    );
    assert!(
        ps["status"]["syncedPushSecrets"]
            .get("SecretStore/k8s")
            .is_none(),
        "{ps}"
    );

    // pushsecret_* metrics (recorded when the reconcile that wrote the status returns).
    let m = esr.metrics_addr.clone().unwrap();
    let text = wait_for("pushsecret Ready=True metric", TIMEOUT, || async {
        let text = http_get(&m, "/metrics").await;
        text.contains(&format!(
            "pushsecret_status_condition{{name=\"tpl\",namespace=\"{ns}\",condition=\"Ready\",status=\"True\"}} 1"
        ))
        .then_some(text)
    })
    .await
    .unwrap();
    assert!(
        text.contains(&format!(
            "pushsecret_status_condition{{name=\"tpl\",namespace=\"{ns}\",condition=\"Ready\",status=\"False\"}} 0"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "pushsecret_reconcile_duration{{name=\"tpl\",namespace=\"{ns}\"}}"
        )),
        "{text}"
    );
    // A template error: Ready=False Errored, and the metric follows.
    apply_ps(
        &env,
        &ns,
        "tpl",
        json!({"refreshInterval": "1s",
               "secretStoreRefs": [{"labelSelector": {"matchLabels": {"push": "yes"}}, "kind": "SecretStore"}],
               "selector": {"secret": {"name": "src"}},
               "template": {"data": {"pem": "{{ .nokey }}"}},
               "data": [{"match": {"secretKey": "pem", "remoteRef": {"remoteKey": "templated", "property": "pem"}}}]}),
    )
    .await;
    let ps = wait_ps(&env, &ns, "tpl", "False", "Errored").await;
    let msg = ready(&ps).2;
    assert!(msg.starts_with("could not execute template"), "{msg}");
    assert!(!msg.contains("CERT1") && !msg.contains("KEY1"), "{msg}");
    wait_for("pushsecret Ready=False metric", TIMEOUT, || async {
        let text = http_get(&m, "/metrics").await;
        text.contains(&format!(
            "pushsecret_status_condition{{name=\"tpl\",namespace=\"{ns}\",condition=\"Ready\",status=\"False\"}} 1"
        ))
        .then_some(())
    })
    .await
    .unwrap();
    // Deleting the PushSecret removes its series.
    ps_api(&env, &ns)
        .delete("tpl", &DeleteParams::default())
        .await
        .unwrap();
    wait_for("pushsecret series removed", TIMEOUT, || async {
        let text = http_get(&m, "/metrics").await;
        (!text.contains(&format!(
            "pushsecret_reconcile_duration{{name=\"tpl\",namespace=\"{ns}\"}}"
        )) && !text.contains(&format!(
            "pushsecret_status_condition{{name=\"tpl\",namespace=\"{ns}\""
        )))
        .then_some(())
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_finalizer_blocks_store_deletion_while_referenced() {
    let env = Env::start().await.unwrap();
    let _esr = env.start_esr(&[]).unwrap();
    let (ns, dst) = setup(&env).await;
    apply(
        &env,
        &ns,
        json!({"apiVersion": "external-secrets.io/v1", "kind": "SecretStore", "metadata": {"name": "spare"},
               "spec": {"provider": {"kubernetes": {"remoteNamespace": dst,
                        "auth": {"serviceAccount": {"name": "pusher"}}}}}}),
    )
    .await;
    let spec = |policy: &str| {
        json!({"refreshInterval": "1s", "deletionPolicy": policy,
               "secretStoreRefs": [{"name": "k8s", "kind": "SecretStore"}],
               "selector": {"secret": {"name": "src"}},
               "data": [{"match": {"secretKey": "crt", "remoteRef": {"remoteKey": "held", "property": "crt"}}}]})
    };
    apply_ps(&env, &ns, "hold", spec("Delete")).await;
    wait_ps(&env, &ns, "hold", "True", "Synced").await;
    wait_remote(&env, &dst, "held", &[("crt", "CERT1")]).await;
    wait_store_held(&env, "SecretStore", &ns, "k8s", true).await;
    // The unreferenced store never gets it.
    assert_eq!(
        store_held(&env, "SecretStore", &ns, "spare").await,
        Some(false)
    );

    // deletionPolicy None: the store is no longer held.
    apply_ps(&env, &ns, "hold", spec("None")).await;
    wait_store_held(&env, "SecretStore", &ns, "k8s", false).await;
    apply_ps(&env, &ns, "hold", spec("Delete")).await;
    wait_store_held(&env, "SecretStore", &ns, "k8s", true).await;

    // Deleting the store waits while the PushSecret references it...
    delete(&env, "SecretStore", &ns, "k8s").await;
    let store = wait_for("store marked for deletion", TIMEOUT, || async {
        get(&env, "SecretStore", &ns, "k8s")
            .await
            .filter(|s| s["metadata"]["deletionTimestamp"].is_string())
    })
    .await
    .unwrap();
    assert!(finalizers(&store).iter().any(|f| f == STORE_FINALIZER));
    // ...across several PushSecret refreshes (refreshInterval 1s).
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(get(&env, "SecretStore", &ns, "k8s").await.is_some());
    wait_remote(&env, &dst, "held", &[("crt", "CERT1")]).await;

    // Deleting the PushSecret cleans up through the store being deleted, then the store goes.
    ps_api(&env, &ns)
        .delete("hold", &DeleteParams::default())
        .await
        .unwrap();
    wait_remote_gone(&env, &dst, "held").await;
    wait_for("PushSecret gone", TIMEOUT, || async {
        get_ps(&env, &ns, "hold").await.is_none().then_some(())
    })
    .await
    .unwrap();
    wait_for("store gone", TIMEOUT, || async {
        get(&env, "SecretStore", &ns, "k8s")
            .await
            .is_none()
            .then_some(())
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_store_selected_by_label_gets_the_finalizer_while_referenced() {
    let env = Env::start().await.unwrap();
    let _esr = env.start_esr(&[]).unwrap();
    let ns = env.namespace("push-css").await.unwrap();
    let mut css = fake_css("push-css", json!([]));
    css["metadata"]["labels"] = json!({"push-target": "yes"});
    apply(&env, "", css).await;
    apply(&env, "", fake_css("other-css", json!([]))).await;
    apply(
        &env,
        &ns,
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "src"},
               "stringData": {"user": "u1", "pass": "p1"}}),
    )
    .await;
    let spec = |policy: &str| {
        json!({"refreshInterval": "1s", "deletionPolicy": policy,
               "secretStoreRefs": [{"labelSelector": {"matchLabels": {"push-target": "yes"}},
                                    "kind": "ClusterSecretStore"}],
               "selector": {"secret": {"name": "src"}},
               "dataTo": [{"storeRef": {"labelSelector": {"matchLabels": {"push-target": "yes"}},
                                        "kind": "ClusterSecretStore"},
                           "remoteKey": "bundle"}]})
    };
    apply_ps(&env, &ns, "bulk", spec("Delete")).await;
    let ps = wait_ps(&env, &ns, "bulk", "True", "Synced").await;
    assert_eq!(
        synced_keys(&ps, "ClusterSecretStore/push-css"),
        vec!["bundle"]
    );
    // The bundle reads back as one JSON object.
    apply(
        &env,
        &ns,
        es(
            "bundle",
            json!({"refreshInterval": "1s",
                   "secretStoreRef": {"name": "push-css", "kind": "ClusterSecretStore"},
                   "target": {"name": "bundle"},
                   "dataFrom": [{"extract": {"key": "bundle"}}]}),
        ),
    )
    .await;
    wait_secret_data(&env, &ns, "bundle", &[("user", "u1"), ("pass", "p1")]).await;
    wait_store_held(&env, "ClusterSecretStore", "", "push-css", true).await;
    assert_eq!(
        store_held(&env, "ClusterSecretStore", "", "other-css").await,
        Some(false)
    );
    // Deleting the PushSecret deletes the bundle through the store and releases it.
    ps_api(&env, &ns)
        .delete("bulk", &DeleteParams::default())
        .await
        .unwrap();
    wait_for("PushSecret gone", TIMEOUT, || async {
        get_ps(&env, &ns, "bulk").await.is_none().then_some(())
    })
    .await
    .unwrap();
    wait_store_held(&env, "ClusterSecretStore", "", "push-css", false).await;
    // The pushed bundle is gone from the fake store: the ExternalSecret can no longer read it.
    wait_condition(
        &env,
        "ExternalSecret",
        &ns,
        "bundle",
        "False",
        "SecretSyncedError",
    )
    .await;
}

/// The Ready condition of a PushSecret once it reads `Errored` with a message containing `needle`.
async fn wait_errored(env: &Env, ns: &str, name: &str, needle: &str) -> (String, String, String) {
    wait_for(
        &format!("PushSecret {ns}/{name} Errored with {needle:?}"),
        TIMEOUT,
        || async {
            let o = get_ps(env, ns, name).await?;
            let r = ready(&o);
            (r.0 == "False" && r.1 == "Errored" && r.2.contains(needle)).then_some(r)
        },
    )
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eso_controller_test_cases_missing_source_key_and_store() {
    let env = Env::start().await.unwrap();
    let _esr = env.start_esr(&[]).unwrap();
    let (ns, dst) = setup(&env).await;

    // A missing source Secret with nothing synced yet: Errored, even with deletionPolicy Delete.
    apply_ps(
        &env,
        &ns,
        "nosrc",
        json!({"refreshInterval": "1s", "deletionPolicy": "Delete",
               "secretStoreRefs": [{"name": "k8s", "kind": "SecretStore"}],
               "selector": {"secret": {"name": "absent"}},
               "data": [{"match": {"secretKey": "crt", "remoteRef": {"remoteKey": "never"}}}]}),
    )
    .await;
    let r = wait_errored(&env, &ns, "nosrc", "source secret").await;
    assert_eq!(r.2, "could not get source secret");

    // A missing source key: checked before the provider is called.
    apply_ps(
        &env,
        &ns,
        "nokey",
        json!({"refreshInterval": "1s",
               "secretStoreRefs": [{"name": "k8s", "kind": "SecretStore"}],
               "selector": {"secret": {"name": "src"}},
               "data": [{"match": {"secretKey": "nope", "remoteRef": {"remoteKey": "nokey"}}}]}),
    )
    .await;
    let r = wait_errored(&env, &ns, "nokey", "secret key").await;
    assert_eq!(r.2, "set secret failed: secret key nope does not exist");
    assert!(secret(&env, &dst, "nokey").await.is_none());

    // A missing store: ESO's text, not kube's Debug rendering.
    apply_ps(
        &env,
        &ns,
        "nostore",
        json!({"refreshInterval": "1s",
               "secretStoreRefs": [{"name": "gone", "kind": "SecretStore"}],
               "selector": {"secret": {"name": "src"}},
               "data": [{"match": {"secretKey": "crt", "remoteRef": {"remoteKey": "x"}}}]}),
    )
    .await;
    let r = wait_errored(&env, &ns, "nostore", "could not get").await;
    assert_eq!(
        r.2,
        "could not get SecretStore \"gone\", secretstores.external-secrets.io \"gone\" not found"
    );
    apply_ps(
        &env,
        &ns,
        "nocss",
        json!({"refreshInterval": "1s",
               "secretStoreRefs": [{"name": "gone-css", "kind": "ClusterSecretStore"}],
               "selector": {"secret": {"name": "src"}},
               "data": [{"match": {"secretKey": "crt", "remoteRef": {"remoteKey": "x"}}}]}),
    )
    .await;
    let r = wait_errored(&env, &ns, "nocss", "could not get").await;
    assert_eq!(
        r.2,
        "could not get ClusterSecretStore \"gone-css\", clustersecretstores.external-secrets.io \"gone-css\" not found"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eso_controller_test_cases_data_to_validation_is_written_to_status() {
    let env = Env::start().await.unwrap();
    let _esr = env.start_esr(&[]).unwrap();
    let (ns, dst) = setup(&env).await;
    apply(
        &env,
        &ns,
        json!({"apiVersion": "external-secrets.io/v1", "kind": "SecretStore",
               "metadata": {"name": "k8s-labelled", "labels": {"tier": "push"}},
               "spec": {"provider": {"kubernetes": {"remoteNamespace": dst,
                        "auth": {"serviceAccount": {"name": "pusher"}}}}}}),
    )
    .await;

    // A named dataTo storeRef missing from secretStoreRefs is an error, even though a
    // label-selector ref is listed too.
    apply_ps(
        &env,
        &ns,
        "named",
        json!({"refreshInterval": "1s",
               "secretStoreRefs": [{"labelSelector": {"matchLabels": {"tier": "push"}}}],
               "selector": {"secret": {"name": "src"}},
               "dataTo": [{"storeRef": {"name": "k8s"}}]}),
    )
    .await;
    let r = wait_errored(&env, &ns, "named", "dataTo").await;
    assert_eq!(
        r.2,
        "dataTo[0]: storeRef \"k8s\" not found in secretStoreRefs"
    );

    // A dataTo label selector that matches none of the resolved stores.
    apply_ps(
        &env,
        &ns,
        "unmatched",
        json!({"refreshInterval": "1s",
               "secretStoreRefs": [{"labelSelector": {"matchLabels": {"tier": "push"}}}],
               "selector": {"secret": {"name": "src"}},
               "dataTo": [{"storeRef": {"labelSelector": {"matchLabels": {"tier": "other"}}}}]}),
    )
    .await;
    let r = wait_errored(&env, &ns, "unmatched", "dataTo").await;
    assert_eq!(
        r.2,
        "dataTo[0]: storeRef labelSelector does not match any store in secretStoreRefs"
    );
    assert!(secret(&env, &dst, "crt").await.is_none());
}
