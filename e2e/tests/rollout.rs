//! Rollout on rotation: rotating a provider value changes the pod template of a Deployment
//! annotated `esr.external-secrets.io/reload: "true"` exactly once (per new data hash); an
//! unannotated Deployment that uses the same Secret is never touched.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod es_support;

use std::time::Duration;

use es_support::*;
use esr_e2e::{Env, wait_for};
use k8s_openapi::api::apps::v1::Deployment;
use kube::Api;
use serde_json::json;

const KEY: &str = "esr.external-secrets.io/secret-hash-db";

fn deployment(name: &str, reload: Option<&str>) -> Deployment {
    let mut d = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{
                "name": "app", "image": "busybox",
                "envFrom": [{"secretRef": {"name": "db"}}]}]}}}
    });
    if let Some(r) = reload {
        d["metadata"]["annotations"] = json!({"esr.external-secrets.io/reload": r});
    }
    serde_json::from_value(d).unwrap()
}

fn template_annotation(d: &Deployment) -> Option<String> {
    d.spec
        .as_ref()?
        .template
        .metadata
        .as_ref()?
        .annotations
        .as_ref()?
        .get(KEY)
        .cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_rolls_annotated_deployment_once_and_leaves_others() {
    let env = Env::start().await.unwrap();
    let ns = env.namespace("rollout").await.unwrap();
    let deps: Api<Deployment> = Api::namespaced(env.client(), &ns);
    deps.create(&Default::default(), &deployment("annotated", Some("true")))
        .await
        .unwrap();
    deps.create(&Default::default(), &deployment("named", Some("other, db")))
        .await
        .unwrap();
    deps.create(&Default::default(), &deployment("plain", None))
        .await
        .unwrap();
    let plain_before = deps.get("plain").await.unwrap();

    let _esr = env.start_esr(&[]).unwrap();
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
    let d1 = wait_for("annotated hash v1", TIMEOUT, || async {
        let d = deps.get("annotated").await.ok()?;
        (template_annotation(&d).as_deref() == Some(h1.as_str())).then_some(d)
    })
    .await
    .unwrap();
    let gen1 = d1.metadata.generation.unwrap();

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
    let d2 = wait_for("annotated hash v2", TIMEOUT, || async {
        let d = deps.get("annotated").await.ok()?;
        (template_annotation(&d).as_deref() == Some(h2.as_str())).then_some(d)
    })
    .await
    .unwrap();
    // Exactly one pod template change for the rotation: one generation bump.
    assert_eq!(d2.metadata.generation.unwrap(), gen1 + 1);
    let named = deps.get("named").await.unwrap();
    assert_eq!(template_annotation(&named).as_deref(), Some(h2.as_str()));

    // Several more refreshes (1s) with the same value change nothing.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let d3 = deps.get("annotated").await.unwrap();
    assert_eq!(d3.metadata.generation, d2.metadata.generation);
    assert_eq!(d3.metadata.resource_version, d2.metadata.resource_version);

    let plain_after = deps.get("plain").await.unwrap();
    assert_eq!(
        plain_after.metadata.resource_version,
        plain_before.metadata.resource_version
    );
    assert_eq!(template_annotation(&plain_after), None);
}
