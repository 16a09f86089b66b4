//! The ClusterPushSecret reconcile against an in-process API server: the exact requests it makes,
//! in order.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::sync::Arc;

use esr_api::v1alpha1::{ClusterPushSecret, PushSecret};
use esr_controller::clusterpushsecret::plan::ERR_ALREADY_EXISTS;
use esr_controller::clusterpushsecret::reconcile::{Cps, CpsContext, reconcile};
use k8s_openapi::api::core::v1::Namespace;
use kube::runtime::controller::Action;
use serde_json::json;

fn namespace(name: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Namespace",
           "metadata": {"name": name, "labels": {"push": "yes"}}})
}

#[tokio::test]
async fn creates_push_secrets_skips_a_foreign_one_and_writes_status() {
    let server = support::server().await;
    let client = server.client();
    support::apply(&server, namespace("a"));
    support::apply(&server, namespace("b"));
    let spec = json!({"secretStoreRefs": [{"name": "k8s", "kind": "SecretStore"}],
                      "selector": {"secret": {"name": "src"}},
                      "data": [{"match": {"secretKey": "crt", "remoteRef": {"remoteKey": "pushed"}}}]});
    // A PushSecret of the same name that the ClusterPushSecret does not own.
    support::apply(
        &server,
        json!({"apiVersion": "external-secrets.io/v1alpha1", "kind": "PushSecret",
               "metadata": {"name": "push-all", "namespace": "b"}, "spec": spec}),
    );
    support::apply(
        &server,
        json!({"apiVersion": "external-secrets.io/v1alpha1", "kind": "ClusterPushSecret",
               "metadata": {"name": "push-all"},
               "spec": {"pushSecretSpec": spec, "refreshTime": "0s",
                        "namespaceSelectors": [{"matchLabels": {"push": "yes"}}]}}),
    );
    let cps: Arc<ClusterPushSecret> = support::get(&client, None, "push-all").await;
    let ctx = CpsContext::new(
        client.clone(),
        support::cache::<ClusterPushSecret>(&client).await,
        support::cache::<Namespace>(&client).await,
        support::cache::<PushSecret>(&client).await,
        Cps::new(client.clone(), None),
        None,
    );
    support::clear(&server);

    let action = reconcile(cps, Arc::new(ctx)).await.expect("reconciles");

    // The foreign PushSecret is a lasting failure: no retry, no requeue (`refreshTime: 0s`).
    assert_eq!(action, Action::await_change());
    assert_eq!(
        support::requests(&server),
        vec![
            "create pushsecrets a/",
            "patch clusterpushsecrets/status push-all",
        ]
    );
    let cps: Arc<ClusterPushSecret> = support::get(&client, None, "push-all").await;
    let st = cps.status.clone().expect("status written");
    assert_eq!(st.provisioned_namespaces, Some(vec!["a".to_string()]));
    let failed = st.failed_namespaces.expect("failed namespaces");
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].namespace, "b");
    assert_eq!(failed[0].reason.as_deref(), Some(ERR_ALREADY_EXISTS));
}
