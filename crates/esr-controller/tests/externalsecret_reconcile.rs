//! The ExternalSecret reconciler, in process: esr-testkit serves the Kubernetes API, the provider
//! double of `support` serves the data, and `reconcile_es` is called directly. The tests pin the
//! exact requests one reconcile makes (verb and resource, in order).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use esr_api::v1::ExternalSecret;
use esr_controller::externalsecret::reconcile::reconcile_es;
use esr_controller::runtime::Config;
use esr_testkit::TestServer;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use serde_json::json;

/// The resources the reconcile itself reads and writes (the rollout's workload watches run in
/// the background and are left out).
const RESOURCES: &[&str] = &["secretstores", "externalsecrets", "secrets", "events"];

fn requests(server: &TestServer) -> Vec<String> {
    let all = server
        .audit()
        .entries()
        .into_iter()
        .filter(|e| RESOURCES.contains(&e.resource.as_str()))
        .map(|e| {
            let resource = if e.subresource.is_empty() {
                e.resource
            } else {
                format!("{}/{}", e.resource, e.subresource)
            };
            format!("{} {resource}", e.verb)
        })
        .collect();
    support::events_last(all)
}

async fn setup() -> (TestServer, Arc<esr_controller::runtime::Context>) {
    let server = TestServer::start().await.unwrap();
    let crds = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../crds");
    server.apply_crds_from_dir(&crds).unwrap();
    server
        .apply_object(json!({
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "app"}
        }))
        .unwrap();
    server
        .apply_object(json!({
            "apiVersion": "external-secrets.io/v1", "kind": "SecretStore",
            "metadata": {"name": "fake", "namespace": "app"},
            "spec": {"provider": {"fake": {"data": [{"key": "db", "value": "s3cr3t"}]}}}
        }))
        .unwrap();
    let config = Config {
        // No store controller runs here to mark the SecretStore Ready.
        flood_gate: false,
        ..Config::default()
    };
    // The runtime's caches are not started: store lookups fall back to GETs, and the
    // orphan lookup to a label-selected LIST.
    let ctx = support::context_with(&server.client(), config, Arc::default());
    (server, ctx)
}

async fn external_secret(server: &TestServer, refresh: &str) -> Arc<ExternalSecret> {
    let api: Api<ExternalSecret> = Api::namespaced(server.client(), "app");
    let obj = server
        .apply_object(json!({
            "apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
            "metadata": {"name": "db", "namespace": "app"},
            "spec": {
                "refreshInterval": refresh,
                "secretStoreRef": {"name": "fake", "kind": "SecretStore"},
                "data": [{"secretKey": "password", "remoteRef": {"key": "db"}}]
            }
        }))
        .unwrap();
    assert_eq!(obj["metadata"]["name"], "db");
    Arc::new(api.get("db").await.unwrap())
}

async fn fresh(server: &TestServer) -> Arc<ExternalSecret> {
    let api: Api<ExternalSecret> = Api::namespaced(server.client(), "app");
    Arc::new(api.get("db").await.unwrap())
}

#[tokio::test]
async fn a_first_sync_makes_exactly_these_requests() {
    let (server, ctx) = setup().await;
    let es = external_secret(&server, "1h").await;
    server.audit().clear();

    reconcile_es(es, ctx.clone()).await.unwrap();
    ctx.flush_events().await;

    assert_eq!(
        requests(&server),
        [
            // the controller-class check
            "get secretstores",
            // the finalizer
            "patch externalsecrets",
            // the target
            "get secrets",
            // fetch: the class check and the store resolution
            "get secretstores",
            "get secretstores",
            // Secrets this ExternalSecret created under another name
            "list secrets",
            "create secrets",
            "patch externalsecrets/status",
            // Normal Created, written in the background
            "create events",
        ]
    );
    let secret = Api::<Secret>::namespaced(server.client(), "app")
        .get("db")
        .await
        .unwrap();
    assert_eq!(secret.data.unwrap()["password"].0, b"s3cr3t");
}

#[tokio::test]
async fn an_unchanged_refresh_writes_only_the_status() {
    let (server, ctx) = setup().await;
    let es = external_secret(&server, "1s").await;
    reconcile_es(es, ctx.clone()).await.unwrap();
    // refreshTime has second precision: two seconds later the 1s interval has elapsed.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let es = fresh(&server).await;
    server.audit().clear();

    reconcile_es(es, ctx.clone()).await.unwrap();
    ctx.flush_events().await;

    assert_eq!(
        requests(&server),
        [
            "get secretstores",
            "get secrets",
            "get secretstores",
            "get secretstores",
            "list secrets",
            // the data did not change: no Secret write, no event; refreshTime moves on
            "patch externalsecrets/status",
        ]
    );
}
