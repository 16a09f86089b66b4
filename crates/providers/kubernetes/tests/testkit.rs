//! The kubernetes provider against esr-testkit (a real HTTP API server): same-cluster access with
//! the store's identity (TokenRequest), a "remote" cluster by URL with a bearer token, a kubeconfig
//! in `authRef`, server-side label selectors, and writes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::sync::Arc;

use esr_provider::{
    ClientContext, ErrorKind, FindName, FindRequest, KubeAccess, KubeClientAccess, MemoryRecorder,
    Provider, PushRemoteRef, PushRequest, SecretRef, SecretsClient, StoreInfo, StoreKind,
    ValidationResult,
};
use esr_provider_kubernetes::KubernetesProvider;
use esr_testkit::TestServer;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use serde_json::json;

async fn server() -> (TestServer, Arc<dyn KubeAccess>) {
    let server = TestServer::start().await.expect("testkit");
    for ns in ["remote", "store-ns"] {
        server
            .apply_object(
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
            )
            .expect("namespace");
    }
    server
        .apply_object(json!({"apiVersion": "v1", "kind": "ServiceAccount",
                             "metadata": {"name": "reader", "namespace": "store-ns"}}))
        .expect("sa");
    let b64 = |s: &str| {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(s)
    };
    server
        .apply_object(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "app", "namespace": "remote", "labels": {"team": "a"}},
            "data": {"user": b64("admin"), "cfg": b64(r#"{"db":{"host":"h"}}"#)}}))
        .expect("secret");
    server
        .apply_object(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "other", "namespace": "remote", "labels": {"team": "b"}},
            "data": {"x": b64("1")}}))
        .expect("secret");
    server
        .apply_object(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "token", "namespace": "store-ns"},
            "data": {"token": b64("static-bearer"),
                     "kubeconfig": b64(&esr_testkit::kubeconfig_yaml(&server.url(), "default"))}}))
        .expect("secret");
    let cfg = kube::Config::new(server.url().parse().expect("url"));
    let access: Arc<dyn KubeAccess> = Arc::new(KubeClientAccess::from_config(cfg).expect("client"));
    (server, access)
}

fn store(provider: serde_json::Value) -> StoreInfo {
    StoreInfo::new(
        StoreKind::SecretStore,
        "k8s",
        Some("store-ns".into()),
        json!({"provider": {"kubernetes": provider}}),
    )
}

async fn client(
    s: &StoreInfo,
    kube: Arc<dyn KubeAccess>,
    rec: Arc<MemoryRecorder>,
) -> Arc<dyn SecretsClient> {
    let ctx = ClientContext::new(s, Some("store-ns"), kube).with_recorder(rec);
    KubernetesProvider::new()
        .new_client(&ctx)
        .await
        .unwrap_or_else(|e| panic!("{}", e.detailed()))
}

async fn reads(c: &Arc<dyn SecretsClient>) {
    let v = c
        .get_secret(&SecretRef::new("app").with_property("user"))
        .await
        .unwrap();
    assert_eq!(v, b"admin");
    let v = c
        .get_secret(&SecretRef::new("app").with_property("cfg.db.host"))
        .await
        .unwrap();
    assert_eq!(v, b"h");
    let v = c.get_secret(&SecretRef::new("app")).await.unwrap();
    assert_eq!(
        String::from_utf8(v).unwrap(),
        r#"{"cfg":"{\"db\":{\"host\":\"h\"}}","user":"admin"}"#
    );
    let e = c.get_secret(&SecretRef::new("ghost")).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid);
    assert!(e.to_string().contains("not found"), "{e}");
    let e = c
        .get_secret_map(&SecretRef::new("ghost"))
        .await
        .unwrap_err();
    assert!(e.is_not_found());
    let by_tags = FindRequest {
        tags: Some(BTreeMap::from([("team".to_string(), "b".to_string())])),
        ..Default::default()
    };
    let found = c.get_all_secrets(&by_tags).await.unwrap();
    assert_eq!(
        found.keys().cloned().collect::<Vec<_>>(),
        vec!["other".to_string()]
    );
    let by_name = FindRequest {
        name: Some(FindName {
            regexp: "^a".into(),
        }),
        ..Default::default()
    };
    let found = c.get_all_secrets(&by_name).await.unwrap();
    assert_eq!(
        found.keys().cloned().collect::<Vec<_>>(),
        vec!["app".to_string()]
    );
}

#[tokio::test]
async fn same_cluster_with_service_account_token() {
    let (server, access) = server().await;
    let rec = Arc::new(MemoryRecorder::new());
    let s =
        store(json!({"remoteNamespace": "remote", "auth": {"serviceAccount": {"name": "reader"}}}));
    let c = client(&s, access, rec.clone()).await;
    reads(&c).await;
    let token_requests = server
        .audit()
        .entries()
        .into_iter()
        .filter(|e| e.resource == "serviceaccounts" && e.subresource == "token" && e.code == 201)
        .count();
    assert_eq!(token_requests, 1);
    assert!(rec.count("GetSecret") >= 4);
    assert_eq!(rec.count("ListSecrets"), 2);
}

#[tokio::test]
async fn remote_cluster_by_url_with_bearer_token() {
    let (server, access) = server().await;
    let s = store(
        json!({"remoteNamespace": "remote", "server": {"url": server.url()},
                         "auth": {"token": {"bearerToken": {"name": "token", "key": "token"}}}}),
    );
    let c = client(&s, access, Arc::new(MemoryRecorder::new())).await;
    reads(&c).await;
}

#[tokio::test]
async fn kubeconfig_in_auth_ref() {
    let (_server, access) = server().await;
    let s = store(
        json!({"remoteNamespace": "remote", "authRef": {"name": "token", "key": "kubeconfig"}}),
    );
    let c = client(&s, access, Arc::new(MemoryRecorder::new())).await;
    reads(&c).await;
}

#[tokio::test]
async fn push_update_delete_against_the_api() {
    let (_server, access) = server().await;
    let s =
        store(json!({"remoteNamespace": "remote", "auth": {"serviceAccount": {"name": "reader"}}}));
    let rec = Arc::new(MemoryRecorder::new());
    let c = client(&s, access.clone(), rec.clone()).await;
    let source = Secret {
        data: Some(BTreeMap::from([
            ("a".to_string(), ByteString(b"1".to_vec())),
            ("b".to_string(), ByteString(b"2".to_vec())),
        ])),
        ..Default::default()
    };
    let push = |property: &str, key: Option<&str>| {
        PushRequest::from_secret(
            source.clone(),
            PushRemoteRef::new("pushed").with_property(property),
            key.map(str::to_string),
            None,
        )
        .unwrap()
    };
    c.push_secret(&push("", None)).await.unwrap();
    c.push_secret(&push("only-a", Some("a"))).await.unwrap();
    c.push_secret(&push("only-a", Some("a"))).await.unwrap();
    assert_eq!(rec.count("CreateSecret"), 1);
    assert_eq!(rec.count("UpdateSecret"), 1);
    let got = access
        .get_secret("remote", "pushed")
        .await
        .unwrap()
        .unwrap();
    let keys: Vec<_> = got.data.unwrap().keys().cloned().collect();
    assert_eq!(keys, vec!["a", "b", "only-a"]);
    assert!(
        c.secret_exists(&PushRemoteRef::new("pushed").with_property("only-a"))
            .await
            .unwrap()
    );
    c.delete_secret(&PushRemoteRef::new("pushed").with_property("only-a"))
        .await
        .unwrap();
    let got = access
        .get_secret("remote", "pushed")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.data.unwrap().len(), 2);
    c.delete_secret(&PushRemoteRef::new("pushed"))
        .await
        .unwrap();
    assert!(
        access
            .get_secret("remote", "pushed")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        !c.secret_exists(&PushRemoteRef::new("pushed"))
            .await
            .unwrap()
    );
}

#[tokio::test]
async fn validation_reports_ready_for_an_allowed_identity() {
    let (server, access) = server().await;
    let s =
        store(json!({"remoteNamespace": "remote", "auth": {"serviceAccount": {"name": "reader"}}}));
    let rec = Arc::new(MemoryRecorder::new());
    let c = client(&s, access, rec.clone()).await;
    assert_eq!(c.validate().await, ValidationResult::Ready);
    assert_eq!(rec.count("CreateSelfSubjectRulesReview"), 1);
    let reviews = server
        .audit()
        .entries()
        .into_iter()
        .filter(|e| e.resource == "selfsubjectrulesreviews")
        .count();
    assert_eq!(reviews, 1, "the rules review is tried first");
    // a server error during validation is "unknown", not "invalid" (as ESO)
    server
        .faults()
        .fail_next(None, Some("selfsubjectrulesreviews"), 1, 500);
    assert_eq!(c.validate().await, ValidationResult::Unknown);
}

#[tokio::test]
async fn repeated_clients_reuse_the_token_and_connection() {
    let (server, access) = server().await;
    let s =
        store(json!({"remoteNamespace": "remote", "auth": {"serviceAccount": {"name": "reader"}}}));
    for _ in 0..5 {
        let c = client(&s, access.clone(), Arc::new(MemoryRecorder::new())).await;
        let v = c
            .get_secret(&SecretRef::new("app").with_property("user"))
            .await
            .unwrap();
        assert_eq!(v, b"admin");
    }
    let token_requests = server
        .audit()
        .entries()
        .into_iter()
        .filter(|e| e.resource == "serviceaccounts" && e.subresource == "token")
        .count();
    assert_eq!(
        token_requests, 1,
        "the ServiceAccount token is requested once and reused"
    );
    // another ServiceAccount is another identity
    server
        .apply_object(json!({"apiVersion": "v1", "kind": "ServiceAccount",
                             "metadata": {"name": "writer", "namespace": "store-ns"}}))
        .unwrap();
    let s2 =
        store(json!({"remoteNamespace": "remote", "auth": {"serviceAccount": {"name": "writer"}}}));
    let c = client(&s2, access.clone(), Arc::new(MemoryRecorder::new())).await;
    assert!(c.get_secret(&SecretRef::new("app")).await.is_ok());
    let token_requests = server
        .audit()
        .entries()
        .into_iter()
        .filter(|e| e.resource == "serviceaccounts" && e.subresource == "token")
        .count();
    assert_eq!(token_requests, 2);
}

/// A cluster stand-in answering every request with HTTP 200 and `body`.
async fn garbage_server(body: &'static str) -> String {
    use axum::response::IntoResponse;
    let app = axum::Router::new().fallback(move || async move {
        (
            axum::http::StatusCode::OK,
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

/// Not-found means not found: only the API server's 404 is "not found". A 200 with an empty
/// body, `{}` or another object is an error (reading it as an empty Secret would empty the target
/// Secret).
#[tokio::test]
async fn garbage_200_answers_are_errors_not_not_found() {
    let (_server, access) = server().await;
    for body in [
        "",
        "{}",
        r#"{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "someone-else"}}"#,
        "<html>proxy</html>",
    ] {
        let url = garbage_server(body).await;
        let s = store(json!({"remoteNamespace": "remote", "server": {"url": url},
                             "auth": {"token": {"bearerToken": {"name": "token", "key": "token"}}}}));
        let c = client(&s, access.clone(), Arc::new(MemoryRecorder::new())).await;
        let e = c.get_secret_map(&SecretRef::new("app")).await.unwrap_err();
        assert!(!e.is_not_found(), "200 {body:?} must not be NotFound: {e}");
        let e = c.get_secret(&SecretRef::new("app")).await.unwrap_err();
        assert!(!e.is_not_found(), "200 {body:?}: {e}");
    }
}
