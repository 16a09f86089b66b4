//! Controller classes (`--controller-class`, stores' `spec.controller`), which keep parallel
//! scenarios apart on a shared cluster: an esr of another class touches nothing of a store of
//! this Env's class, nor of its ExternalSecrets and PushSecrets (no finalizer, no status, no
//! Secret), while it reconciles the objects of its own class in the same namespace.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod es_support;

use es_support::*;
use esr_e2e::Env;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::{Value, json};

fn ps_api(env: &Env, ns: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("external-secrets.io", "v1alpha1", "PushSecret");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "pushsecrets");
    Api::namespaced_with(env.client(), ns, &ar)
}

async fn apply_ps(env: &Env, ns: &str, name: &str, store: &str) {
    let obj = json!({"apiVersion": "external-secrets.io/v1alpha1", "kind": "PushSecret",
        "metadata": {"name": name},
        "spec": {"refreshInterval": "1h", "deletionPolicy": "Delete",
                 "secretStoreRefs": [{"name": store, "kind": "SecretStore"}],
                 "selector": {"secret": {"name": "src"}},
                 "data": [{"match": {"secretKey": "k", "remoteRef": {"remoteKey": format!("pushed-{name}")}}}]}});
    ps_api(env, ns)
        .patch(
            name,
            &PatchParams::apply("e2e").force(),
            &Patch::Apply(&obj),
        )
        .await
        .unwrap();
}

async fn get_ps(env: &Env, ns: &str, name: &str) -> Value {
    serde_json::to_value(ps_api(env, ns).get(name).await.unwrap()).unwrap()
}

async fn wait_ps_ready(env: &Env, ns: &str, name: &str) {
    esr_e2e::wait_for(
        &format!("PushSecret {ns}/{name} Ready"),
        TIMEOUT,
        || async {
            let o = serde_json::to_value(ps_api(env, ns).get_opt(name).await.ok()??).ok()?;
            (ready(&o).0 == "True").then_some(())
        },
    )
    .await
    .unwrap();
}

fn es_on(name: &str, store: &str) -> Value {
    es(
        name,
        json!({"refreshInterval": "1h",
               "secretStoreRef": {"kind": "SecretStore", "name": store},
               "target": {"name": name, "deletionPolicy": "Delete"},
               "data": [{"secretKey": "k", "remoteRef": {"key": "/k"}}]}),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn esr_of_another_class_touches_nothing_of_foreign_stores() {
    let env = Env::start().await.unwrap();
    let ns = env.namespace("class").await.unwrap();
    // `theirs` gets this Env's class (es_support::apply); `mine` belongs to class `other`.
    apply(
        &env,
        &ns,
        fake_ss("theirs", json!([{"key": "/k", "value": "v"}])),
    )
    .await;
    let mut mine = fake_ss("mine", json!([{"key": "/k", "value": "v"}]));
    mine["spec"]["controller"] = json!("other");
    apply(&env, &ns, mine).await;
    assert_eq!(
        get(&env, "SecretStore", &ns, "theirs").await.unwrap()["spec"]["controller"],
        json!(env.controller_class())
    );
    apply(
        &env,
        &ns,
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "src"},
               "stringData": {"k": "v"}}),
    )
    .await;
    apply(&env, &ns, es_on("foreign", "theirs")).await;
    apply_ps(&env, &ns, "foreign-push", "theirs").await;

    // The esr of class `other` reconciles its own objects, created after the foreign ones.
    let other = env.start_esr(&["--controller-class=other"]).unwrap();
    apply(&env, &ns, es_on("own", "mine")).await;
    apply_ps(&env, &ns, "own-push", "mine").await;
    wait_condition(&env, "ExternalSecret", &ns, "own", "True", "SecretSynced").await;
    wait_ps_ready(&env, &ns, "own-push").await;
    wait_condition(&env, "SecretStore", &ns, "mine", "True", "Valid").await;

    // ...and nothing of the foreign store and its objects.
    let es = get(&env, "ExternalSecret", &ns, "foreign").await.unwrap();
    assert_eq!(
        es["metadata"].get("finalizers"),
        None,
        "{es}\n{}",
        other.logs()
    );
    assert_eq!(es.get("status"), None, "{es}");
    let ps = get_ps(&env, &ns, "foreign-push").await;
    assert_eq!(
        ps["metadata"].get("finalizers"),
        None,
        "{ps}\n{}",
        other.logs()
    );
    assert_eq!(ps.get("status"), None, "{ps}");
    let store = get(&env, "SecretStore", &ns, "theirs").await.unwrap();
    assert_eq!(store.get("status"), None, "{store}");
    assert!(secret(&env, &ns, "foreign").await.is_none());
    drop(other);

    // The esr of this Env's class does reconcile them.
    let _esr = env.start_esr(&[]).unwrap();
    wait_condition(
        &env,
        "ExternalSecret",
        &ns,
        "foreign",
        "True",
        "SecretSynced",
    )
    .await;
    wait_ps_ready(&env, &ns, "foreign-push").await;
    wait_condition(&env, "SecretStore", &ns, "theirs", "True", "Valid").await;
    let ps = get_ps(&env, &ns, "foreign-push").await;
    assert_eq!(
        ps["metadata"]["finalizers"],
        json!(["pushsecret.externalsecrets.io/finalizer"])
    );
}
