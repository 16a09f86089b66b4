//! One tenant must not hurt the others: a namespaced SecretStore never uses the controller's
//! identity (the SDK default chain), and only AWS's well-formed "not found" answer counts as not
//! found (a 200 with an empty or foreign body is an error that keeps the target Secret).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;

use common::*;
use esr_provider_aws::{AwsErrorKind, CostOptions, Endpoints, RemoteRef};

const JSON: &str = "application/x-amz-json-1.1";

fn endpoints(url: &str) -> Endpoints {
    Endpoints {
        all: Some(url.to_string()),
        ..Default::default()
    }
}

fn no_batching() -> CostOptions {
    CostOptions {
        batch_window: std::time::Duration::ZERO,
        ..CostOptions::default()
    }
}

#[tokio::test]
async fn namespaced_store_without_auth_is_refused_before_any_call() {
    use esr_provider::Provider;
    let fake = FakeAws::start(Arc::new(|_r| (200, "{}".to_string(), JSON))).await;
    let no_auth = serde_json::json!({"service": "SecretsManager", "region": "us-east-1"});
    let (p, _) = provider(endpoints(&fake.url), no_batching());
    let e = p
        .client(
            &no_auth,
            None,
            &store("st", "ns"),
            Some("ns"),
            FakeKube::with_aws_keys("ns"),
        )
        .await
        .err()
        .unwrap();
    assert_eq!(e.kind, AwsErrorKind::Auth, "{}", e.message);
    assert!(
        e.message.contains("a SecretStore may not do"),
        "{}",
        e.message
    );
    assert!(e.message.contains("auth.secretRef"), "{}", e.message);
    assert!(fake.actions().is_empty(), "no call may be made");

    // the store controller reports it on the SecretStore
    let esr = esr_provider_aws::AwsSecretsManagerProvider::new(Default::default());
    let ss = esr_provider::StoreInfo::new(
        esr_provider::StoreKind::SecretStore,
        "st",
        Some("ns".into()),
        serde_json::json!({"provider": {"aws": no_auth.clone()}}),
    );
    let e = esr.validate_store(&ss).unwrap_err();
    assert_eq!(e.kind(), esr_provider::ErrorKind::Auth, "{e}");
    // a ClusterSecretStore keeps the default chain
    let css = esr_provider::StoreInfo::new(
        esr_provider::StoreKind::ClusterSecretStore,
        "st",
        None,
        serde_json::json!({"provider": {"aws": no_auth}}),
    );
    assert!(esr.validate_store(&css).is_ok());
}

#[tokio::test]
async fn garbage_200_answers_are_errors_not_not_found() {
    for (body, ctype) in [
        ("{}", JSON),
        ("", JSON),
        ("<html>proxy</html>", "text/html"),
        (r#"{"SecretList": []}"#, JSON),
    ] {
        let fake = FakeAws::start(Arc::new(move |_r| (200, body.to_string(), ctype))).await;
        for cost in [no_batching(), CostOptions::default()] {
            let (p, _) = provider(endpoints(&fake.url), cost);
            let c = ns_client(&p, &spec_secret_ref("us-east-1"), None).await;
            let e = c.get_secret(&RemoteRef::key("app")).await.unwrap_err();
            assert!(
                !e.is_not_found(),
                "200 {body:?} must not be NotFound: {}",
                e.message
            );
        }
    }
    // the well-formed answer is NotFound
    let fake = FakeAws::start(Arc::new(|_r| {
        (
            400,
            serde_json::json!({"__type": "ResourceNotFoundException",
                               "message": "Secrets Manager can't find the specified secret."})
            .to_string(),
            JSON,
        )
    }))
    .await;
    let (p, _) = provider(endpoints(&fake.url), no_batching());
    let c = ns_client(&p, &spec_secret_ref("us-east-1"), None).await;
    let e = c.get_secret(&RemoteRef::key("app")).await.unwrap_err();
    assert!(e.is_not_found(), "{}", e.message);
}
