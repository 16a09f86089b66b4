//! The SecretStore and ClusterSecretStore reconciles (one runner, generic over the store kind)
//! against an in-process API server with the provider double of `support`: the exact requests
//! they make, in order.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use esr_api::v1::{ClusterSecretStore, SecretStore};
use esr_controller::secretstore::reconcile::{StoreContext, reconcile};
use kube::runtime::controller::Action;
use serde_json::json;

fn ready(store: Option<&Vec<esr_api::v1::SecretStoreStatusCondition>>) -> (String, String) {
    let c = store
        .into_iter()
        .flatten()
        .find(|c| c.type_ == "Ready")
        .expect("Ready condition");
    (c.status.clone(), c.reason.clone().unwrap_or_default())
}

#[tokio::test]
async fn secret_store_is_validated_with_events_and_status() {
    let server = support::server().await;
    let client = server.client();
    support::apply(
        &server,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "app"}}),
    );
    support::apply(
        &server,
        json!({"apiVersion": "external-secrets.io/v1", "kind": "SecretStore",
               "metadata": {"name": "fake-store", "namespace": "app"},
               "spec": {"refreshInterval": 30, "provider": {"fake": {"data": []}}}}),
    );
    let store: Arc<SecretStore> = support::get(&client, Some("app"), "fake-store").await;
    let sctx = Arc::new(StoreContext::<SecretStore>::new(
        support::context(&client),
        None,
    ));
    support::clear(&server);

    let action = reconcile(store, sctx.clone()).await.expect("reconciles");
    sctx.flush_events().await;

    assert_eq!(action, Action::requeue(Duration::from_secs(30)));
    // The status; the provider's maintenance warning and the Ready transition's event, in
    // that order.
    assert_eq!(
        support::requests(&server),
        vec![
            "patch secretstores/status app/fake-store",
            "create events app/",
            "create events app/",
        ]
    );
    assert_eq!(
        support::events(&client, "app").await,
        vec![
            "Warning StoreUnmaintained: store isn't currently maintained. Please plan and prepare accordingly.",
            "Normal Valid: store validated",
        ]
    );
    let store: Arc<SecretStore> = support::get(&client, Some("app"), "fake-store").await;
    let st = store.status.clone().expect("status written");
    assert_eq!(
        ready(st.conditions.as_ref()),
        ("True".into(), "Valid".into())
    );
    assert_eq!(st.capabilities.as_deref(), Some("ReadWrite"));
}

#[tokio::test]
async fn cluster_secret_store_is_validated_with_events_and_status() {
    let server = support::server().await;
    let client = server.client();
    support::apply(
        &server,
        json!({"apiVersion": "external-secrets.io/v1", "kind": "ClusterSecretStore",
               "metadata": {"name": "fake-cluster",
                            "annotations": {"external-secrets.io/ignore-maintenance-checks": "true"}},
               "spec": {"provider": {"fake": {"data": []}}}}),
    );
    let store: Arc<ClusterSecretStore> = support::get(&client, None, "fake-cluster").await;
    let sctx = Arc::new(StoreContext::<ClusterSecretStore>::new(
        support::context(&client),
        None,
    ));
    support::clear(&server);

    let action = reconcile(store, sctx.clone()).await.expect("reconciles");
    sctx.flush_events().await;

    // No refreshInterval: the controller's store requeue interval (5m).
    assert_eq!(action, Action::requeue(Duration::from_secs(300)));
    // The maintenance check is ignored (annotation): the status and the Ready transition's
    // event. A cluster-scoped object's events go to the `default` namespace.
    assert_eq!(
        support::requests(&server),
        vec![
            "patch clustersecretstores/status fake-cluster",
            "create events default/",
        ]
    );
    assert_eq!(
        support::events(&client, "default").await,
        vec!["Normal Valid: store validated"]
    );
    let store: Arc<ClusterSecretStore> = support::get(&client, None, "fake-cluster").await;
    let st = store.status.clone().expect("status written");
    assert_eq!(
        ready(st.conditions.as_ref()),
        ("True".into(), "Valid".into())
    );
}
