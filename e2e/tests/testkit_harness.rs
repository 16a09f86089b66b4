//! Smoke tests of the e2e harness itself (no controller logic needed): CRDs from crds/ are
//! applied, a namespace per scenario, an ExternalSecret can be created with its schema defaults,
//! faults are available on testkit only, and the real esr binary starts with its log captured.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use esr_e2e::{Env, skip_without_faults, str_at, wait_for};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn harness_applies_crds_and_creates_an_external_secret() {
    let env = Env::start()
        .await
        .expect("environment starts and crds/ apply");
    let ns = env.namespace("harness").await.unwrap();
    assert!(ns.starts_with("harness-"));
    let gvk = GroupVersionKind::gvk("external-secrets.io", "v1", "ExternalSecret");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "externalsecrets");
    let api: Api<DynamicObject> = Api::namespaced_with(env.client(), &ns, &ar);
    let es: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
        "metadata": {"name": "smoke"},
        "spec": {"secretStoreRef": {"name": "store", "kind": "SecretStore"}, "target": {"name": "out"},
                 "data": [{"secretKey": "k", "remoteRef": {"key": "remote"}}]}
    }))
    .unwrap();
    let created = api.create(&PostParams::default(), &es).await.unwrap();
    let v = serde_json::to_value(&created).unwrap();
    assert_eq!(v["metadata"]["generation"], 1);
    // schema defaults from the generated CRD are applied by the server
    assert_eq!(
        str_at(&v, "/spec/target/creationPolicy"),
        Some("Owner"),
        "{v}"
    );
    let got = wait_for(
        "externalsecret visible",
        Duration::from_secs(10),
        || async { api.get_opt("smoke").await.ok().flatten() },
    )
    .await
    .unwrap();
    assert_eq!(got.metadata.name.as_deref(), Some("smoke"));
    // cleanup deletes the scenario namespace
    env.cleanup().await.unwrap();
    let nss: Api<Namespace> = Api::all(env.client());
    wait_for("namespace gone", Duration::from_secs(60), || async {
        matches!(nss.get_opt(&ns).await, Ok(None)).then_some(())
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn harness_exposes_faults_only_on_testkit() {
    let env = Env::start().await.unwrap();
    if skip_without_faults(&env, "harness_exposes_faults_only_on_testkit") {
        assert!(env.is_real_cluster());
        return;
    }
    let faults = env.faults().unwrap();
    faults.fail_next(Some("list"), Some("namespaces"), 1, 500);
    let nss: Api<Namespace> = Api::all(env.client());
    assert!(nss.list(&Default::default()).await.is_err());
    assert!(nss.list(&Default::default()).await.is_ok());
    let audit = env.audit().unwrap().entries();
    assert!(
        audit
            .iter()
            .any(|e| e.verb == "list" && e.resource == "namespaces" && e.code == 500)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn harness_runs_the_real_esr_binary_with_captured_logs() {
    let env = Env::start().await.unwrap();
    let mut p = env.start_esr_raw(&["--help"]).unwrap();
    let code = p.wait_exit(Duration::from_secs(60)).await.unwrap();
    assert_eq!(code, Some(0), "{}", p.logs());
    assert!(p.logs().contains("controller"), "{}", p.logs());
    // the controller subcommand gets the kubeconfig and free probe/metrics ports
    let mut c = env.start_esr(&["--loglevel", "info"]).unwrap();
    assert!(c.metrics_addr.is_some() && c.probes_addr.is_some());
    let log_path = c.log_path().to_path_buf();
    wait_for(
        "esr controller logs something",
        Duration::from_secs(60),
        || {
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            async move { (!log.is_empty()).then_some(()) }
        },
    )
    .await
    .unwrap();
    c.stop();
    assert!(!c.is_running());
}
