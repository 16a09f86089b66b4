#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use http_body_util::BodyExt;
use serde_json::{Value, json};

pub use esr_testkit::TestServer;

/// A raw response.
pub struct Raw {
    pub code: u16,
    pub headers: http::HeaderMap,
    pub body: Value,
    pub text: String,
}

/// Send a raw request through the kube client.
pub async fn raw(
    s: &TestServer,
    method: &str,
    path: &str,
    content_type: &str,
    body: Option<Value>,
) -> Raw {
    let bytes = body
        .map(|b| serde_json::to_vec(&b).unwrap())
        .unwrap_or_default();
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .body(kube::client::Body::from(bytes))
        .unwrap();
    let resp = s.client().send(req).await.unwrap();
    let code = resp.status().as_u16();
    let headers = resp.headers().clone();
    let b = resp.into_body().collect().await.unwrap().to_bytes();
    let text = String::from_utf8_lossy(&b).to_string();
    let body = serde_json::from_slice(&b).unwrap_or(Value::Null);
    Raw {
        code,
        headers,
        body,
        text,
    }
}

/// GET with an Accept header.
pub async fn get_accept(s: &TestServer, path: &str, accept: &str) -> Raw {
    let req = http::Request::builder()
        .method("GET")
        .uri(path)
        .header("accept", accept)
        .body(kube::client::Body::empty())
        .unwrap();
    let resp = s.client().send(req).await.unwrap();
    let code = resp.status().as_u16();
    let headers = resp.headers().clone();
    let b = resp.into_body().collect().await.unwrap().to_bytes();
    let text = String::from_utf8_lossy(&b).to_string();
    let body = serde_json::from_slice(&b).unwrap_or(Value::Null);
    Raw {
        code,
        headers,
        body,
        text,
    }
}

pub async fn get(s: &TestServer, path: &str) -> Raw {
    raw(s, "GET", path, "application/json", None).await
}

pub async fn post(s: &TestServer, path: &str, body: Value) -> Raw {
    raw(s, "POST", path, "application/json", Some(body)).await
}

pub async fn patch(s: &TestServer, path: &str, ct: &str, body: Value) -> Raw {
    raw(s, "PATCH", path, ct, Some(body)).await
}

pub async fn start() -> TestServer {
    TestServer::start().await.expect("server starts")
}

/// Create a namespace and return its name.
pub async fn ns(s: &TestServer, name: &str) -> String {
    let r = post(
        s,
        "/api/v1/namespaces",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.text);
    name.to_string()
}

/// Poll until `f` returns Some or the timeout passes.
pub async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    for _ in 0..200 {
        if let Some(v) = f().await {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}

/// A test CRD: widgets.test.esr.dev, namespaced, status subresource, two served versions.
pub fn widget_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.test.esr.dev"},
        "spec": {
            "group": "test.esr.dev",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList",
                      "shortNames": ["wd"], "categories": ["esr-test"]},
            "versions": [
                {"name": "v1", "served": true, "storage": true,
                 "subresources": {"status": {}},
                 "selectableFields": [{"jsonPath": ".spec.color"}],
                 "additionalPrinterColumns": [{"name": "Color", "type": "string", "jsonPath": ".spec.color"}],
                 "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {"type": "object", "required": ["color"], "properties": {
                            "color": {"type": "string", "enum": ["red", "green", "blue"]},
                            "size": {"type": "integer", "default": 3, "minimum": 1},
                            "name": {"type": "string", "pattern": "^[a-z]+$"},
                            "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                            "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                            "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                                "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}}}
                        }},
                        "status": {"type": "object", "properties": {
                            "phase": {"type": "string"},
                            "observedGeneration": {"type": "integer"},
                            "conditions": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
                        }}
                    }
                 }}},
                {"name": "v1beta1", "served": true, "storage": false,
                 "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
                {"name": "v1alpha1", "served": false, "storage": false,
                 "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}
            ]
        }
    })
}

/// Start a server with the widget CRD applied.
pub async fn start_with_widgets() -> TestServer {
    let s = start().await;
    let r = post(
        &s,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        widget_crd(),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.text);
    s
}

pub fn widget(name: &str, color: &str) -> Value {
    json!({"apiVersion": "test.esr.dev/v1", "kind": "Widget", "metadata": {"name": name}, "spec": {"color": color}})
}
