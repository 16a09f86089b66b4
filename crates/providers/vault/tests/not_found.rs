//! Not-found means not found: only a well-formed "not found" answer makes a read NotFound (which
//! lets the controller delete or empty the target Secret). A 200 with an empty body, JSON without
//! `data` or a null `data` is an error that keeps the Secret. Runs against a local HTTP stub.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use esr_provider::{ErrorKind, SecretRef};
use serde_json::json;

/// A Vault stand-in answering every read with `status` and `body` (raw bytes).
async fn stub(status: u16, body: &'static str) -> String {
    use axum::response::IntoResponse;
    let app = axum::Router::new().fallback(move || async move {
        (
            axum::http::StatusCode::from_u16(status).unwrap(),
            [("content-type", "application/json")],
            body,
        )
            .into_response()
    });
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(l, app).await;
    });
    format!("http://{addr}")
}

async fn read(status: u16, body: &'static str, version: &str) -> esr_provider::Result<Vec<u8>> {
    let url = stub(status, body).await;
    let h = Harness::new();
    h.kube.add_secret(secret("ns", "tok", &[("token", "t")]));
    let st = store(json!({
        "server": url, "path": "secret", "version": version,
        "auth": {"tokenSecretRef": {"name": "tok", "key": "token"}}
    }));
    let c = h.client(&st).await.unwrap();
    c.get_secret(&SecretRef::new("app")).await
}

#[tokio::test]
async fn garbage_200_answers_are_errors_not_not_found() {
    for version in ["v1", "v2"] {
        for body in ["", "{}", r#"{"data": null}"#, r#"{"warnings": ["x"]}"#] {
            let e = read(200, body, version).await.unwrap_err();
            assert!(
                !e.is_not_found(),
                "{version} 200 {body:?} must not be NotFound: {e}"
            );
            assert!(
                matches!(e.kind(), ErrorKind::Transient | ErrorKind::Invalid),
                "{version} {body:?}: {e}"
            );
        }
    }
    // KV v2: a null inner data on a 200 without deletion metadata
    let e = read(200, r#"{"data": {"data": null}}"#, "v2")
        .await
        .unwrap_err();
    assert!(!e.is_not_found(), "{e}");
    // not JSON at all
    let e = read(200, "<html>proxy</html>", "v2").await.unwrap_err();
    assert!(!e.is_not_found(), "{e}");
}

#[tokio::test]
async fn well_formed_not_found_answers_are_not_found() {
    for version in ["v1", "v2"] {
        let e = read(404, r#"{"errors": []}"#, version).await.unwrap_err();
        assert!(e.is_not_found(), "{version}: {e}");
    }
    // KV v2: the latest version was deleted (Vault answers 404 with its metadata)
    let deleted = r#"{"data": {"data": null, "metadata": {"deletion_time": "2024-01-01T00:00:00Z", "destroyed": false, "version": 2}}}"#;
    assert!(read(404, deleted, "v2").await.unwrap_err().is_not_found());
    assert!(read(200, deleted, "v2").await.unwrap_err().is_not_found());
    let destroyed =
        r#"{"data": {"data": null, "metadata": {"deletion_time": "", "destroyed": true}}}"#;
    assert!(read(200, destroyed, "v2").await.unwrap_err().is_not_found());
    // and a well-formed answer with data is read
    let v = read(200, r#"{"data": {"data": {"k": "v"}}}"#, "v2")
        .await
        .unwrap();
    assert_eq!(s(&v), r#"{"k":"v"}"#);
}
