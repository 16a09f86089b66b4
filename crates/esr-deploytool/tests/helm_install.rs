//! The chart installed with real Helm (the Helm v4 library, see esr_deploytool::helm) into
//! esr-testkit: every object of the committed deploy/manifests/ is in the cluster as written, and
//! nothing else; `helm uninstall` then removes esr but leaves the CRDs, the ExternalSecrets and
//! their Secrets in place (the default `crds.annotations` is `helm.sh/resource-policy: keep`).
//! With the annotation removed (`crds.annotations: {"helm.sh/resource-policy": null}`) the same
//! uninstall deletes the CRDs.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::path::PathBuf;

use esr_deploytool::helm::Helm;
use esr_deploytool::{Release, repo_root, split_manifest};
use esr_testkit::TestServer;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::pinned_kind;
use serde_json::{Value, json};

fn chart() -> PathBuf {
    repo_root().join("deploy/charts/esr")
}

/// (apiVersion, kind, namespace, name) of an object.
type Key = (String, String, String, String);

fn key(v: &Value, default_ns: &str) -> Key {
    let namespaced = !matches!(
        v["kind"].as_str().unwrap(),
        "CustomResourceDefinition" | "ClusterRole" | "ClusterRoleBinding" | "Namespace"
    );
    (
        v["apiVersion"].as_str().unwrap().to_string(),
        v["kind"].as_str().unwrap().to_string(),
        if namespaced {
            v["metadata"]["namespace"]
                .as_str()
                .unwrap_or(default_ns)
                .to_string()
        } else {
            String::new()
        },
        v["metadata"]["name"].as_str().unwrap().to_string(),
    )
}

fn committed_manifests() -> Vec<Value> {
    let mut out = vec![];
    for f in ["crds.yaml", "esr.yaml"] {
        out.extend(
            esr_testkit::read_manifests(&repo_root().join("deploy/manifests").join(f)).unwrap(),
        );
    }
    out
}

/// The first path where `want` is not contained in `live` (maps: every key of `want`, recursively;
/// everything else: equal).
fn not_contained(live: &Value, want: &Value, path: &str) -> Option<String> {
    match (live, want) {
        (Value::Object(l), Value::Object(w)) => w.iter().find_map(|(k, wv)| match l.get(k) {
            Some(lv) => not_contained(lv, wv, &format!("{path}.{k}")),
            None => Some(format!("{path}.{k} missing")),
        }),
        (Value::Array(l), Value::Array(w)) if l.len() == w.len() => l
            .iter()
            .zip(w)
            .enumerate()
            .find_map(|(i, (lv, wv))| not_contained(lv, wv, &format!("{path}[{i}]"))),
        _ if live == want => None,
        _ => Some(format!("{path}: {live} != {want}")),
    }
}

async fn get(client: &kube::Client, k: &Key) -> Option<Value> {
    let (group, version) = k.0.split_once('/').unwrap_or(("", &k.0));
    let gvk = GroupVersionKind::gvk(group, version, &k.1);
    let (ar, caps) = pinned_kind(client, &gvk).await.unwrap();
    let api: Api<DynamicObject> = if caps.scope == kube::discovery::Scope::Namespaced {
        Api::namespaced_with(client.clone(), &k.2, &ar)
    } else {
        Api::all_with(client.clone(), &ar)
    };
    api.get_opt(&k.3)
        .await
        .unwrap()
        .map(|o| serde_json::to_value(o).unwrap())
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_install_matches_manifests_and_uninstall_keeps_data() {
    let helm = blocking(Helm::ensure).await.unwrap();
    let server = TestServer::start().await.unwrap();
    let client = server.client();
    let kubeconfig = server.kubeconfig_path().to_path_buf();
    let release = Release::default();

    let (h, kc, r) = (helm.clone(), kubeconfig.clone(), release.clone());
    let manifest = blocking(move || h.install(&kc, &r, &chart(), &json!({})))
        .await
        .unwrap();

    // What Helm installed is exactly the committed deploy/manifests/ ...
    let installed: BTreeSet<Key> = split_manifest(&manifest)
        .unwrap()
        .into_iter()
        .flat_map(|r| r.documents)
        .map(|d| key(&yaml_serde::from_str(&d).unwrap(), &release.namespace))
        .collect();
    let committed = committed_manifests();
    let want: BTreeSet<Key> = committed
        .iter()
        .map(|v| key(v, &release.namespace))
        .collect();
    assert_eq!(
        installed, want,
        "helm's objects differ from deploy/manifests/"
    );
    // ... and each object is in the API server with every field the manifests give it.
    for doc in &committed {
        let k = key(doc, &release.namespace);
        let live = get(&client, &k)
            .await
            .unwrap_or_else(|| panic!("{k:?} not installed"));
        if let Some(diff) = not_contained(&live, doc, "") {
            panic!("{k:?}: {diff}");
        }
        assert_eq!(
            live["metadata"]["annotations"]["meta.helm.sh/release-name"], "esr",
            "{k:?}"
        );
    }

    // Data of users: an ExternalSecret and the Secret it owns (as esr writes it).
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "app"}})).unwrap(),
        )
        .await
        .unwrap();
    let es_key: Key = (
        "external-secrets.io/v1".into(),
        "ExternalSecret".into(),
        "app".into(),
        "db".into(),
    );
    let (es_ar, _) = pinned_kind(
        &client,
        &GroupVersionKind::gvk("external-secrets.io", "v1", "ExternalSecret"),
    )
    .await
    .unwrap();
    let es: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
        "metadata": {"name": "db", "namespace": "app"},
        "spec": {"secretStoreRef": {"name": "vault", "kind": "SecretStore"},
                 "target": {"name": "db"},
                 "data": [{"secretKey": "password", "remoteRef": {"key": "db/password"}}]}
    }))
    .unwrap();
    let es = Api::<DynamicObject>::namespaced_with(client.clone(), "app", &es_ar)
        .create(&PostParams::default(), &es)
        .await
        .unwrap();
    let secret_key: Key = ("v1".into(), "Secret".into(), "app".into(), "db".into());
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "db", "namespace": "app", "ownerReferences": [{
            "apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret", "name": "db",
            "uid": es.metadata.uid.clone().unwrap(), "controller": true, "blockOwnerDeletion": true}]},
        "data": {"password": "czNjcjN0"}
    }))
    .unwrap();
    Api::<Secret>::namespaced(client.clone(), "app")
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();

    let (h, kc, r) = (helm.clone(), kubeconfig.clone(), release.clone());
    blocking(move || h.uninstall(&kc, &r)).await.unwrap();

    // esr itself is gone ...
    for doc in &committed {
        let k = key(doc, &release.namespace);
        let present = get(&client, &k).await.is_some();
        if k.1 == "CustomResourceDefinition" {
            assert!(present, "{k:?} was deleted by helm uninstall");
        } else {
            assert!(!present, "{k:?} survived helm uninstall");
        }
    }
    // ... the users' data is not.
    assert!(
        get(&client, &es_key).await.is_some(),
        "ExternalSecret deleted"
    );
    assert!(get(&client, &secret_key).await.is_some(), "Secret deleted");
    drop(server);

    // Control: without the keep annotation (null removes a default key in Helm), helm uninstall
    // deletes the CRDs.
    let server = TestServer::start().await.unwrap();
    let client = server.client();
    let kubeconfig = server.kubeconfig_path().to_path_buf();
    let (h, kc, r) = (helm.clone(), kubeconfig.clone(), release.clone());
    blocking(move || {
        h.install(
            &kc,
            &r,
            &chart(),
            &json!({"crds": {"annotations": {"helm.sh/resource-policy": null}}}),
        )
    })
    .await
    .unwrap();
    let crd: Key = (
        "apiextensions.k8s.io/v1".into(),
        "CustomResourceDefinition".into(),
        String::new(),
        "externalsecrets.external-secrets.io".into(),
    );
    let live = get(&client, &crd).await.unwrap();
    assert!(live["metadata"]["annotations"]["helm.sh/resource-policy"].is_null());
    let (h, kc, r) = (helm.clone(), kubeconfig.clone(), release.clone());
    blocking(move || h.uninstall(&kc, &r)).await.unwrap();
    assert!(
        get(&client, &crd).await.is_none(),
        "CRD without keep survived"
    );
}
