//! The PushSecret reconcile against an in-process API server with the provider double of
//! `support`: the exact requests it makes, in order, and the value pushed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use esr_api::v1::SecretStore;
use esr_api::v1alpha1::PushSecret;
use esr_controller::pushsecret::reconcile::{PsContext, reconcile};
use esr_controller::runtime::Config;
use kube::runtime::controller::Action;
use serde_json::json;

#[tokio::test]
async fn pushes_the_source_key_and_writes_status_and_event() {
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
               "spec": {"provider": {"fake": {"data": []}}}}),
    );
    // The store controller's verdict (the status subresource is not written on create).
    kube::Api::<SecretStore>::namespaced(client.clone(), "app")
        .patch_status(
            "fake-store",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"status": {"conditions": [
                {"type": "Ready", "status": "True", "reason": "Valid", "message": "store validated"}]}})),
        )
        .await
        .expect("store status");
    support::apply(
        &server,
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "src", "namespace": "app"},
               "data": {"crt": "Q0VSVA=="}}),
    );
    support::apply(
        &server,
        json!({"apiVersion": "external-secrets.io/v1alpha1", "kind": "PushSecret",
               "metadata": {"name": "ps", "namespace": "app"},
               "spec": {"refreshInterval": "1h",
                        "secretStoreRefs": [{"name": "fake-store", "kind": "SecretStore"}],
                        "selector": {"secret": {"name": "src"}},
                        "data": [{"match": {"secretKey": "crt",
                                            "remoteRef": {"remoteKey": "pushed"}}}]}}),
    );
    let ps: Arc<PushSecret> = support::get(&client, Some("app"), "ps").await;
    let provider = Arc::new(support::StaticProvider::default());
    let pctx = Arc::new(PsContext::new(support::context_with(
        &client,
        Config::default(),
        provider.clone(),
    )));
    support::clear(&server);

    let action = reconcile(ps, pctx.clone()).await.expect("reconciles");
    pctx.flush_events().await;

    assert_eq!(action, Action::requeue(Duration::from_secs(3600)));
    // The store (controller class check), the source Secret, the store again (the stores to push
    // to) and once more for its client; then the status and the event. No finalizer
    // (deletionPolicy None).
    assert_eq!(
        support::requests(&server),
        vec![
            "get secretstores app/fake-store",
            "get secrets app/src",
            "get secretstores app/fake-store",
            "get secretstores app/fake-store",
            "patch pushsecrets/status app/ps",
            "create events app/",
        ]
    );
    assert_eq!(
        support::events(&client, "app").await,
        vec!["Normal Synced: PushSecret synced successfully"]
    );
    let ps: Arc<PushSecret> = support::get(&client, Some("app"), "ps").await;
    let st = ps.status.clone().expect("status written");
    let ready = st
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Ready")
        .expect("Ready condition");
    assert_eq!(
        (
            ready.status.as_str(),
            ready.reason.as_deref(),
            ready.message.as_deref()
        ),
        (
            "True",
            Some("Synced"),
            Some("PushSecret synced successfully")
        )
    );
    let synced = st.synced_push_secrets.expect("syncedPushSecrets");
    assert!(synced["SecretStore/fake-store"].contains_key("pushed"));
    assert_eq!(
        provider.pushed(),
        [("pushed".to_string(), b"CERT".to_vec())].into()
    );
}
