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
