//! The ClusterExternalSecret reconcile against an in-process API server: the exact requests it
//! makes, in order.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use esr_api::v1::{ClusterExternalSecret, ExternalSecret};
use esr_controller::clusterexternalsecret::reconcile::{Ces, CesContext, reconcile};
use k8s_openapi::api::core::v1::Namespace;
use kube::runtime::controller::Action;
use serde_json::json;

fn namespace(name: &str, env: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Namespace",
           "metadata": {"name": name, "labels": {"env": env}}})
}

#[tokio::test]
async fn first_reconcile_adds_finalizers_creates_the_external_secret_and_writes_status() {
    let server = support::server().await;
    let client = server.client();
    support::apply(&server, namespace("team-a", "prod"));
    support::apply(&server, namespace("team-b", "dev"));
    support::apply(
        &server,
        json!({"apiVersion": "external-secrets.io/v1", "kind": "ClusterExternalSecret",
               "metadata": {"name": "wild"},
               "spec": {"namespaceSelectors": [{"matchLabels": {"env": "prod"}}],
                        "refreshTime": "1m",
                        "externalSecretSpec": {
                            "secretStoreRef": {"name": "s", "kind": "SecretStore"},
                            "target": {"name": "t"},
                            "data": [{"secretKey": "k", "remoteRef": {"key": "r"}}]}}}),
    );
    let ces: Arc<ClusterExternalSecret> = support::get(&client, None, "wild").await;
    let ctx = CesContext::new(
        client.clone(),
        support::cache::<ClusterExternalSecret>(&client).await,
        support::cache::<Namespace>(&client).await,
        support::cache::<ExternalSecret>(&client).await,
        Ces,
        None,
    );
    support::clear(&server);

    let action = reconcile(ces, Arc::new(ctx)).await.expect("reconciles");

    assert_eq!(action, Action::requeue(Duration::from_secs(60)));
    assert_eq!(
        support::requests(&server),
        vec![
            "patch clusterexternalsecrets wild",
            "patch namespaces team-a",
            "create externalsecrets team-a/",
            "patch clusterexternalsecrets/status wild",
        ]
    );
    let es: Arc<ExternalSecret> = support::get(&client, Some("team-a"), "wild").await;
    assert_eq!(
        es.spec.target.as_ref().and_then(|t| t.name.as_deref()),
        Some("t")
    );
    let ces: Arc<ClusterExternalSecret> = support::get(&client, None, "wild").await;
    let st = ces.status.clone().expect("status written");
    assert_eq!(st.provisioned_namespaces, Some(vec!["team-a".to_string()]));
    assert_eq!(st.failed_namespaces, None);
}
