//! Helpers shared by the ExternalSecret scenarios (externalsecret.rs and leak_scan.rs).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code)]

use std::collections::BTreeMap;
use std::time::Duration;

use esr_e2e::{Env, str_at, wait_for};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};
use serde_json::{Value, json};

pub const TIMEOUT: Duration = Duration::from_secs(30);

pub fn resource(kind: &str) -> (ApiResource, bool) {
    let (group, version, plural, namespaced) = match kind {
        "ExternalSecret" => ("external-secrets.io", "v1", "externalsecrets", true),
        "SecretStore" => ("external-secrets.io", "v1", "secretstores", true),
        "ClusterSecretStore" => ("external-secrets.io", "v1", "clustersecretstores", false),
        "Secret" => ("", "v1", "secrets", true),
        "ServiceAccount" => ("", "v1", "serviceaccounts", true),
        "ConfigMap" => ("", "v1", "configmaps", true),
        "PushSecret" => ("external-secrets.io", "v1alpha1", "pushsecrets", true),
        "ECRAuthorizationToken" => (
            "generators.external-secrets.io",
            "v1alpha1",
            "ecrauthorizationtokens",
            true,
        ),
        "STSSessionToken" => (
            "generators.external-secrets.io",
            "v1alpha1",
            "stssessiontokens",
            true,
        ),
        "Webhook" => (
            "generators.external-secrets.io",
            "v1alpha1",
            "webhooks",
            true,
        ),
        "ClusterGenerator" => (
            "generators.external-secrets.io",
            "v1alpha1",
            "clustergenerators",
            false,
        ),
        other => panic!("unsupported kind {other}"),
    };
    let gvk = GroupVersionKind::gvk(group, version, kind);
    (ApiResource::from_gvk_with_plural(&gvk, plural), namespaced)
}

pub fn api(env: &Env, kind: &str, ns: &str) -> Api<DynamicObject> {
    let (ar, namespaced) = resource(kind);
    if namespaced && !ns.is_empty() {
        Api::namespaced_with(env.client(), ns, &ar)
    } else {
        Api::all_with(env.client(), &ar)
    }
}

/// Server-side apply one object (kind from the object; namespace `ns` for namespaced kinds).
/// Stores get the Env's controller class and cluster-scoped objects are deleted with the Env
/// ([`Env::scope_object`]).
pub async fn apply(env: &Env, ns: &str, mut obj: Value) {
    env.scope_object(&mut obj);
    let kind = obj["kind"].as_str().unwrap().to_string();
    let name = obj["metadata"]["name"].as_str().unwrap().to_string();
    api(env, &kind, ns)
        .patch(
            &name,
            &PatchParams::apply("e2e").force(),
            &Patch::Apply(&obj),
        )
        .await
        .unwrap_or_else(|e| panic!("applying {kind}/{name}: {e}"));
    if kind == "SecretStore" || kind == "ClusterSecretStore" {
        grant_kubernetes_store(env, ns, &obj).await;
    }
}

/// A kubernetes-provider store authenticating as a ServiceAccount needs RBAC on its remote
/// namespace on a real cluster (and on esr-testkit with RBAC on): a Role on Secrets there,
/// bound to the ServiceAccount, as a user would grant it.
async fn grant_kubernetes_store(env: &Env, ns: &str, store: &Value) {
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    let k = &store["spec"]["provider"]["kubernetes"];
    let Some(sa) = k["auth"]["serviceAccount"]["name"].as_str() else {
        return;
    };
    let sa_ns = k["auth"]["serviceAccount"]["namespace"]
        .as_str()
        .unwrap_or(ns)
        .to_string();
    let remote = k["remoteNamespace"]
        .as_str()
        .unwrap_or("default")
        .to_string();
    let name = format!("esr-e2e-{sa}-{sa_ns}");
    let pp = PatchParams::apply("e2e").force();
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": name},
        "rules": [{"apiGroups": [""], "resources": ["secrets"],
                   "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
                  {"apiGroups": ["authorization.k8s.io"],
                   "resources": ["selfsubjectrulesreviews", "selfsubjectaccessreviews"],
                   "verbs": ["create"]}]});
    Api::<Role>::namespaced(env.client(), &remote)
        .patch(&name, &pp, &Patch::Apply(&role))
        .await
        .unwrap_or_else(|e| panic!("Role {remote}/{name}: {e}"));
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": sa_ns}]});
    Api::<RoleBinding>::namespaced(env.client(), &remote)
        .patch(&name, &pp, &Patch::Apply(&binding))
        .await
        .unwrap_or_else(|e| panic!("RoleBinding {remote}/{name}: {e}"));
}

pub async fn merge_patch(env: &Env, kind: &str, ns: &str, name: &str, patch: Value) {
    api(env, kind, ns)
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

pub async fn get(env: &Env, kind: &str, ns: &str, name: &str) -> Option<Value> {
    api(env, kind, ns)
        .get_opt(name)
        .await
        .unwrap()
        .map(|o| serde_json::to_value(o).unwrap())
}

pub async fn delete(env: &Env, kind: &str, ns: &str, name: &str) {
    let _ = api(env, kind, ns)
        .delete(name, &DeleteParams::default())
        .await;
}

pub fn ready(obj: &Value) -> (String, String, String) {
    let conds = obj
        .pointer("/status/conditions")
        .and_then(|c| c.as_array())
        .cloned()
        .unwrap_or_default();
    let r = conds.iter().find(|c| c["type"] == "Ready");
    let s = |k: &str| r.and_then(|r| r[k].as_str()).unwrap_or("").to_string();
    (s("status"), s("reason"), s("message"))
}

/// Wait until the object's Ready condition has this status and reason.
pub async fn wait_condition(
    env: &Env,
    kind: &str,
    ns: &str,
    name: &str,
    status: &str,
    reason: &str,
) -> Value {
    wait_for(
        &format!("{kind} {ns}/{name} Ready={status} {reason}"),
        TIMEOUT,
        || async {
            let o = get(env, kind, ns, name).await?;
            let (s, r, _) = ready(&o);
            (s == status && r == reason).then_some(o)
        },
    )
    .await
    .unwrap()
}

pub async fn secret(env: &Env, ns: &str, name: &str) -> Option<Secret> {
    Api::<Secret>::namespaced(env.client(), ns)
        .get_opt(name)
        .await
        .unwrap()
}

pub fn decoded(s: &Secret) -> BTreeMap<String, String> {
    s.data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), String::from_utf8_lossy(&v.0).into_owned()))
        .collect()
}

pub async fn wait_secret_data(env: &Env, ns: &str, name: &str, want: &[(&str, &str)]) -> Secret {
    let want: BTreeMap<String, String> = want
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let last = std::sync::Mutex::new(None::<BTreeMap<String, String>>);
    let res = wait_for(
        &format!("secret {ns}/{name} = {want:?}"),
        TIMEOUT,
        || async {
            let s = secret(env, ns, name).await?;
            let got = decoded(&s);
            let ok = got == want;
            *last.lock().unwrap() = Some(got);
            ok.then_some(s)
        },
    )
    .await;
    match res {
        Ok(s) => s,
        Err(e) => panic!("{e}; last seen: {:?}", last.lock().unwrap()),
    }
}

/// A fake ClusterSecretStore.
pub fn fake_css(name: &str, data: Value) -> Value {
    json!({
        "apiVersion": "external-secrets.io/v1", "kind": "ClusterSecretStore",
        "metadata": {"name": name, "annotations": {"external-secrets.io/ignore-maintenance-checks": "true"}},
        "spec": {"provider": {"fake": {"data": data}}}
    })
}

/// A fake SecretStore.
pub fn fake_ss(name: &str, data: Value) -> Value {
    json!({
        "apiVersion": "external-secrets.io/v1", "kind": "SecretStore",
        "metadata": {"name": name, "annotations": {"external-secrets.io/ignore-maintenance-checks": "true"}},
        "spec": {"provider": {"fake": {"data": data}}}
    })
}

pub fn es(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret", "metadata": {"name": name}, "spec": spec})
}

/// Waits until the store is Ready (`Valid`) and reports the `ReadWrite` capabilities.
pub async fn wait_read_write_store(env: &Env, kind: &str, ns: &str, name: &str) -> Value {
    let store = wait_condition(env, kind, ns, name, "True", "Valid").await;
    assert_eq!(str_at(&store, "/status/capabilities"), Some("ReadWrite"));
    store
}

/// The ExternalSecret `app` over the secrets the Azure and GCP test servers are seeded with
/// (`db`, whose latest version is `{"user":"alice","pass":"v2"}`, and `app-token` = `tok-123`):
/// one property, the extracted `db` and a find by name. Waits until its Secret holds exactly
/// those values and it is `SecretSynced`.
pub async fn sync_seeded_app(env: &Env, ns: &str, store_kind: &str, store: &str) {
    apply(
        env,
        ns,
        es(
            "app",
            json!({
                "refreshInterval": "1h",
                "secretStoreRef": {"kind": store_kind, "name": store},
                "target": {"name": "app"},
                "data": [{"secretKey": "username", "remoteRef": {"key": "db", "property": "user"}}],
                "dataFrom": [
                    {"extract": {"key": "db"}},
                    {"find": {"name": {"regexp": "^app-"}}}
                ]
            }),
        ),
    )
    .await;
    wait_secret_data(
        env,
        ns,
        "app",
        &[
            ("username", "alice"),
            ("user", "alice"),
            ("pass", "v2"),
            ("app-token", "tok-123"),
        ],
    )
    .await;
    wait_condition(env, "ExternalSecret", ns, "app", "True", "SecretSynced").await;
}

/// The ExternalSecret `missing` reads a key the store does not have; waits until it reports
/// `SecretSyncedError`.
pub async fn wait_missing_key_fails(env: &Env, ns: &str, store_kind: &str, store: &str) {
    apply(
        env,
        ns,
        es(
            "missing",
            json!({
                "secretStoreRef": {"kind": store_kind, "name": store},
                "target": {"name": "missing"},
                "data": [{"secretKey": "x", "remoteRef": {"key": "does-not-exist"}}]
            }),
        ),
    )
    .await;
    wait_condition(
        env,
        "ExternalSecret",
        ns,
        "missing",
        "False",
        "SecretSyncedError",
    )
    .await;
}

/// Every events.k8s.io/v1 Event as (reportingController, type, reason, note, regarding name).
pub async fn events(env: &Env) -> Vec<(String, String, String, String, String)> {
    let gvk = GroupVersionKind::gvk("events.k8s.io", "v1", "Event");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "events");
    let api: Api<DynamicObject> = Api::all_with(env.client(), &ar);
    let list = api.list(&ListParams::default()).await.unwrap();
    list.items
        .into_iter()
        .map(|e| {
            let v = serde_json::to_value(e).unwrap();
            let s = |p: &str| str_at(&v, p).unwrap_or("").to_string();
            (
                s("/reportingController"),
                s("/type"),
                s("/reason"),
                s("/note"),
                s("/regarding/name"),
            )
        })
        .collect()
}

/// Waits until an event for `regarding` with `reason` whose note contains `needle` exists.
pub async fn wait_event(env: &Env, regarding: &str, reason: &str, needle: &str) -> String {
    wait_for(
        &format!("event {reason} on {regarding} containing {needle:?}"),
        TIMEOUT,
        || async {
            events(env)
                .await
                .into_iter()
                .find(|e| e.4 == regarding && e.2 == reason && e.3.contains(needle))
                .map(|e| e.3)
        },
    )
    .await
    .unwrap()
}
