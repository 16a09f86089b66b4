//! The webhook provider and generator against a local HTTP(S) secret service
//! (`esr_test_http_server::SecretService`), with Kubernetes objects in memory.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::sync::Arc;

use esr_provider::{
    ClientContext, ErrorKind, KubeAccess, MemoryRecorder, Provider, PushRemoteRef, PushRequest,
    SecretRef, SecretsClient, StaticKubeAccess, StoreInfo, StoreKind, ValidationResult,
};
use esr_provider_webhook::{CALL_HTTP_REQUEST, METRIC_PROVIDER, WebhookStoreProvider};
use esr_test_http_server::SecretService;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};

const TOKEN: &str = "tok-0f9d2c";
const PASSWORD: &str = "p@ss word&1";

fn secret(ns: &str, name: &str, labelled: bool, data: &[(&str, &str)]) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(ns.into()),
            labels: labelled.then(|| {
                [(
                    "external-secrets.io/type".to_string(),
                    "webhook".to_string(),
                )]
                .into()
            }),
            ..Default::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                .collect(),
        ),
        ..Default::default()
    }
}

fn kube() -> Arc<StaticKubeAccess> {
    let k = StaticKubeAccess::new();
    k.add_secret(secret("team", "creds", true, &[("token", TOKEN)]));
    k.add_secret(secret("shared", "creds", true, &[("token", TOKEN)]));
    k.add_secret(secret("team", "unlabelled", false, &[("token", TOKEN)]));
    Arc::new(k)
}

fn service() -> SecretService {
    let s = SecretService::new(Some(TOKEN));
    s.put(
        "db",
        json!({"user": "alice", "pass": PASSWORD, "port": 5432}),
    );
    s.put(
        "item",
        json!({"fields": [{"name": "user", "value": "bob"}, {"name": "otp", "value": "123456"}]}),
    );
    s
}

/// A store whose requests carry `Authorization: Bearer <token from the creds Secret>`.
fn spec(base: &str, path: &str, json_path: Option<&str>) -> Value {
    let mut w = json!({
        "url": format!("{base}{path}"),
        "headers": {"Authorization": "Bearer {{ .auth.token }}", "X-Namespace": "{{ .remoteRef.namespace }}"},
        "secrets": [{"name": "auth", "secretRef": {"name": "creds"}}]
    });
    if let Some(p) = json_path {
        w["result"] = json!({"jsonPath": p});
    }
    w
}

fn store(kind: StoreKind, webhook: Value) -> StoreInfo {
    let ns = (kind == StoreKind::SecretStore).then(|| "team".to_string());
    StoreInfo::new(kind, "wh", ns, json!({"provider": {"webhook": webhook}}))
}

struct Fixture {
    rec: Arc<MemoryRecorder>,
    kube: Arc<StaticKubeAccess>,
}

impl Fixture {
    fn new() -> Self {
        Fixture {
            rec: Arc::new(MemoryRecorder::default()),
            kube: kube(),
        }
    }

    async fn client(&self, s: &StoreInfo) -> esr_provider::Result<Arc<dyn SecretsClient>> {
        let kube: Arc<dyn KubeAccess> = self.kube.clone();
        let ctx = ClientContext::new(s, Some("team"), kube).with_recorder(self.rec.clone());
        WebhookStoreProvider.new_client(&ctx).await
    }
}

fn text(r: esr_provider::Result<Vec<u8>>) -> String {
    String::from_utf8(r.unwrap()).unwrap()
}

/// Every error text must be free of the token, the values and the URL's query.
fn assert_clean(errors: &[String]) {
    for e in errors {
        for needle in [
            TOKEN,
            PASSWORD,
            "alice",
            "bob",
            "123456",
            "this is not JSON",
        ] {
            assert!(!e.contains(needle), "{needle} leaked in: {e}");
        }
    }
}

#[tokio::test]
async fn get_with_a_json_path_and_a_templated_credential_header() {
    let svc = service();
    let srv = svc.start_http().await;
    let f = Fixture::new();
    let s = store(
        StoreKind::SecretStore,
        spec(
            &srv.url(),
            "/secrets/{{ .remoteRef.key }}?version={{ .remoteRef.version }}",
            Some("$.data.{{ .remoteRef.property }}"),
        ),
    );
    let c = f.client(&s).await.unwrap();
    let r = SecretRef::new("db")
        .with_property("pass")
        .with_version("v 1&x");
    assert_eq!(text(c.get_secret(&r).await), PASSWORD);
    // Numbers are rounded to an integer, as ESO prints them.
    assert_eq!(
        text(
            c.get_secret(&SecretRef::new("db").with_property("port"))
                .await
        ),
        "5432"
    );
    let reqs = svc.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].method, "GET");
    // remoteRef values are query-escaped in the URL.
    assert_eq!(reqs[0].path_and_query, "/secrets/db?version=v+1%26x");
    assert_eq!(reqs[0].headers["authorization"], format!("Bearer {TOKEN}"));
    assert_eq!(reqs[0].headers["x-namespace"], "team");
    assert_eq!(f.rec.count(CALL_HTTP_REQUEST), 2);
    assert!(
        f.rec
            .calls()
            .iter()
            .all(|c| c.provider == METRIC_PROVIDER && c.call == CALL_HTTP_REQUEST)
    );

    // A filter path (ESO's Bitwarden example): the first match.
    let s = store(
        StoreKind::SecretStore,
        spec(
            &srv.url(),
            "/secrets/{{ .remoteRef.key }}",
            Some(r#"$.data.fields[?@.name=="{{ .remoteRef.property }}"].value"#),
        ),
    );
    let c = f.client(&s).await.unwrap();
    assert_eq!(
        text(
            c.get_secret(&SecretRef::new("item").with_property("otp"))
                .await
        ),
        "123456"
    );
    let e = c
        .get_secret(&SecretRef::new("item").with_property("nope"))
        .await
        .unwrap_err();
    assert_eq!(e.to_string(), "filter worked but didn't get any result");

    // Without a path, the body is the value.
    let s = store(
        StoreKind::SecretStore,
        spec(&srv.url(), "/secrets/{{ .remoteRef.key }}", None),
    );
    let c = f.client(&s).await.unwrap();
    let body: Value =
        serde_json::from_slice(&c.get_secret(&SecretRef::new("db")).await.unwrap()).unwrap();
    assert_eq!(body["data"]["user"], "alice");
}

#[tokio::test]
async fn get_secret_map_reads_the_object_at_the_path() {
    let svc = service();
    let srv = svc.start_http().await;
    let f = Fixture::new();
    let s = store(
        StoreKind::SecretStore,
        spec(&srv.url(), "/secrets/{{ .remoteRef.key }}", Some("$.data")),
    );
    let c = f.client(&s).await.unwrap();
    let m = c.get_secret_map(&SecretRef::new("db")).await.unwrap();
    let want: BTreeMap<String, Vec<u8>> = [
        ("pass".to_string(), PASSWORD.as_bytes().to_vec()),
        ("port".to_string(), b"5432".to_vec()),
        ("user".to_string(), b"alice".to_vec()),
    ]
    .into();
    assert_eq!(m, want);
    // A list is not a map.
    let s = store(
        StoreKind::SecretStore,
        spec(
            &srv.url(),
            "/secrets/{{ .remoteRef.key }}",
            Some("$.data.fields"),
        ),
    );
    let c = f.client(&s).await.unwrap();
    let e = c.get_secret_map(&SecretRef::new("item")).await.unwrap_err();
    assert_eq!(
        e.to_string(),
        "failed to get response (wrong type: []interface {})"
    );
    // find is not implemented by ESO's webhook provider.
    let e = c
        .get_all_secrets(&esr_provider::FindRequest::default())
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported);
}

#[tokio::test]
async fn status_codes_garbage_and_missing_paths() {
    let svc = service();
    let srv = svc.start_http().await;
    let f = Fixture::new();
    let mut errors = Vec::new();
    let client = |path: &str, json_path: Option<&str>| {
        store(StoreKind::SecretStore, spec(&srv.url(), path, json_path))
    };

    // 404: ESO's "Secret does not exist".
    let c = f
        .client(&client("/secrets/{{ .remoteRef.key }}", Some("$.data")))
        .await
        .unwrap();
    let e = c.get_secret(&SecretRef::new("missing")).await.unwrap_err();
    assert!(e.is_not_found(), "{e}");
    assert_eq!(e.to_string(), "Secret does not exist");
    assert!(
        c.get_secret_map(&SecretRef::new("missing"))
            .await
            .unwrap_err()
            .is_not_found()
    );

    // A 200 whose body is not JSON is an error, not "not found".
    let c = f.client(&client("/garbage", Some("$.data"))).await.unwrap();
    let e = c.get_secret(&SecretRef::new("db")).await.unwrap_err();
    assert!(!e.is_not_found());
    assert!(
        e.to_string().starts_with("failed to parse response json: "),
        "{e}"
    );
    errors.push(e.to_string());
    let e = c.get_secret_map(&SecretRef::new("db")).await.unwrap_err();
    assert!(!e.is_not_found());
    errors.push(e.to_string());

    // A path that names nothing is an error too.
    let c = f
        .client(&client(
            "/secrets/{{ .remoteRef.key }}",
            Some("$.data.nope"),
        ))
        .await
        .unwrap();
    let e = c.get_secret(&SecretRef::new("db")).await.unwrap_err();
    assert!(!e.is_not_found());
    assert_eq!(
        e.to_string(),
        "failed to get response path $.data.nope: unknown key nope"
    );
    errors.push(e.to_string());

    // Other statuses.
    for (code, kind, text) in [
        (
            500,
            ErrorKind::Transient,
            "endpoint gave error 500 Internal Server Error",
        ),
        (
            503,
            ErrorKind::Transient,
            "endpoint gave error 503 Service Unavailable",
        ),
        (403, ErrorKind::Auth, "endpoint gave error 403 Forbidden"),
        (
            429,
            ErrorKind::Throttled,
            "endpoint gave error 429 Too Many Requests",
        ),
        (
            400,
            ErrorKind::Invalid,
            "endpoint gave error 400 Bad Request",
        ),
    ] {
        let c = f
            .client(&client(&format!("/status/{code}"), None))
            .await
            .unwrap();
        let e = c.get_secret(&SecretRef::new("db")).await.unwrap_err();
        assert_eq!((e.kind(), e.to_string().as_str()), (kind, text), "{code}");
    }

    // A wrong credential: the service answers 401.
    f.kube
        .add_secret(secret("team", "creds", true, &[("token", "wrong")]));
    let c = f
        .client(&client("/secrets/{{ .remoteRef.key }}", None))
        .await
        .unwrap();
    let e = c.get_secret(&SecretRef::new("db")).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Auth);
    assert_eq!(e.to_string(), "endpoint gave error 401 Unauthorized");
    errors.push(e.to_string());
    assert_clean(&errors);
}

#[tokio::test]
async fn secrets_follow_esos_rules() {
    let svc = service();
    let srv = svc.start_http().await;
    let f = Fixture::new();
    let with_secret = |kind: StoreKind, secret_ref: Value| {
        let mut w = spec(
            &srv.url(),
            "/secrets/{{ .remoteRef.key }}",
            Some("$.data.user"),
        );
        w["secrets"] = json!([{"name": "auth", "secretRef": secret_ref}]);
        store(kind, w)
    };
    let get = |s: StoreInfo| {
        let f = &f;
        async move {
            let c = f.client(&s).await?;
            c.get_secret(&SecretRef::new("db")).await
        }
    };
    // The label is required.
    let e = get(with_secret(
        StoreKind::SecretStore,
        json!({"name": "unlabelled"}),
    ))
    .await
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "secret does not contain needed label 'external-secrets.io/type: webhook'. Update secret label to use it with webhook"
    );
    // A SecretStore reads its own namespace only.
    let e = get(with_secret(
        StoreKind::SecretStore,
        json!({"name": "creds", "namespace": "shared"}),
    ))
    .await
    .unwrap_err();
    assert_eq!(e.to_string(), esr_provider::refs::ERR_NAMESPACE_NOT_ALLOWED);
    // A ClusterSecretStore names the namespace of every Secret.
    let e = get(with_secret(
        StoreKind::ClusterSecretStore,
        json!({"name": "creds"}),
    ))
    .await
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "no namespace on ClusterScoped webhook secret creds"
    );
    assert_eq!(
        get(with_secret(
            StoreKind::ClusterSecretStore,
            json!({"name": "creds", "namespace": "shared"}),
        ))
        .await
        .unwrap(),
        b"alice"
    );
    let e = get(with_secret(
        StoreKind::ClusterSecretStore,
        json!({"name": "gone", "namespace": "shared"}),
    ))
    .await
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "failed to get clustersecretstore webhook secret gone: secrets \"gone\" not found"
    );
    assert!(!e.is_not_found());
    // No request was sent for the refused stores.
    assert_eq!(svc.requests().len(), 1);
    // auth.ntlm is refused.
    let mut w = spec(&srv.url(), "/x", None);
    w["auth"] = json!({"ntlm": {"usernameSecret": {"name": "creds", "key": "u"}, "passwordSecret": {"name": "creds", "key": "p"}}});
    let e = f
        .client(&store(StoreKind::SecretStore, w))
        .await
        .err()
        .unwrap();
    assert_eq!(e.kind(), ErrorKind::Unsupported);
}

#[tokio::test]
async fn https_with_a_ca_bundle_or_a_ca_provider() {
    use base64::Engine as _;
    let svc = service();
    let srv = svc.start_https().await;
    let ca = srv.ca_pem().unwrap().to_string();
    let f = Fixture::new();
    let base = spec(
        &srv.url(),
        "/secrets/{{ .remoteRef.key }}",
        Some("$.data.user"),
    );

    // Without the CA, the handshake fails; the error names no value and not the URL's path.
    let c = f
        .client(&store(StoreKind::SecretStore, base.clone()))
        .await
        .unwrap();
    let e = c.get_secret(&SecretRef::new("db")).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Transient);
    assert!(
        e.to_string().starts_with("failed to call endpoint: "),
        "{e}"
    );
    assert!(!e.to_string().contains("/secrets/db"), "{e}");

    // caBundle (base64 of the PEM, as in a manifest).
    let mut w = base.clone();
    w["caBundle"] = json!(base64::engine::general_purpose::STANDARD.encode(&ca));
    let c = f.client(&store(StoreKind::SecretStore, w)).await.unwrap();
    assert_eq!(text(c.get_secret(&SecretRef::new("db")).await), "alice");

    // caProvider: a ConfigMap of the store's namespace.
    f.kube.add_config_map(ConfigMap {
        metadata: ObjectMeta {
            name: Some("ca".into()),
            namespace: Some("team".into()),
            ..Default::default()
        },
        data: Some([("ca.crt".to_string(), ca.clone())].into()),
        ..Default::default()
    });
    let mut w = base.clone();
    w["caProvider"] = json!({"type": "ConfigMap", "name": "ca", "key": "ca.crt"});
    let c = f.client(&store(StoreKind::SecretStore, w)).await.unwrap();
    assert_eq!(text(c.get_secret(&SecretRef::new("db")).await), "alice");

    // A caBundle that is not PEM fails the client.
    let mut w = base;
    w["caBundle"] = json!("bm90IGEgY2VydA==");
    let e = f
        .client(&store(StoreKind::SecretStore, w))
        .await
        .err()
        .unwrap();
    assert_eq!(e.kind(), ErrorKind::Invalid);
}

#[tokio::test]
async fn a_request_past_its_timeout_fails() {
    let svc = service();
    let srv = svc.start_http().await;
    let f = Fixture::new();
    let mut w = spec(&srv.url(), "/hang?k={{ .auth.token }}", None);
    w["timeout"] = json!("300ms");
    let c = f.client(&store(StoreKind::SecretStore, w)).await.unwrap();
    let e = c.get_secret(&SecretRef::new("db")).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Transient);
    assert_eq!(
        e.to_string(),
        "failed to call endpoint: the request timed out (timeout 300ms)"
    );
    assert_clean(&[e.detailed()]);
    assert_eq!(svc.requests().len(), 1);
    assert_eq!(f.rec.count(CALL_HTTP_REQUEST), 1);
    assert_eq!(
        f.rec.calls()[0].status,
        esr_provider::CallStatus::Error(ErrorKind::Transient)
    );
    let mut w = spec(&srv.url(), "/x", None);
    w["timeout"] = json!("soon");
    let e = f
        .client(&store(StoreKind::SecretStore, w))
        .await
        .err()
        .unwrap();
    assert!(e.to_string().starts_with("invalid timeout: "), "{e}");
}

#[tokio::test]
async fn push_exists_and_delete() {
    let svc = service();
    let srv = svc.start_http().await;
    let f = Fixture::new();
    // One URL for reads (`.remoteRef.key`) and writes (`.remoteRef.remoteKey`); the method is
    // left to its defaults (GET to read, POST to push, DELETE to delete).
    let s = store(
        StoreKind::SecretStore,
        spec(
            &srv.url(),
            "/secrets/{{ with .remoteRef.remoteKey }}{{ . }}{{ else }}{{ .remoteRef.key }}{{ end }}",
            None,
        ),
    );
    let c = f.client(&s).await.unwrap();
    let remote = PushRemoteRef::new("pushed");
    assert!(!c.secret_exists(&remote).await.unwrap());
    let source = secret("team", "src", false, &[("token", "pushed-value-7")]);
    let req = PushRequest::from_secret(source, remote.clone(), Some("token".into()), None).unwrap();
    c.push_secret(&req).await.unwrap();
    assert_eq!(svc.get("pushed"), Some(json!("pushed-value-7")));
    assert!(c.secret_exists(&remote).await.unwrap());
    c.delete_secret(&remote).await.unwrap();
    assert_eq!(svc.get("pushed"), None);
    // Deleting what is gone is done.
    c.delete_secret(&remote).await.unwrap();
    let methods: Vec<String> = svc.requests().iter().map(|r| r.method.clone()).collect();
    assert_eq!(methods, ["GET", "POST", "GET", "DELETE", "DELETE"]);
    assert!(
        svc.requests()
            .iter()
            .all(|r| r.path_and_query == "/secrets/pushed")
    );

    // A body template sees the value under .remoteRef.<remoteKey>.
    let mut w = spec(&srv.url(), "/secrets/{{ .remoteRef.remoteKey }}", None);
    w["body"] =
        json!(r#"{"value": "{{ .remoteRef.pushed }}", "key": "{{ .remoteRef.secretKey }}"}"#);
    let c = f.client(&store(StoreKind::SecretStore, w)).await.unwrap();
    c.push_secret(&req).await.unwrap();
    assert_eq!(
        svc.get("pushed"),
        Some(json!({"value": "pushed-value-7", "key": "token"}))
    );
    assert_eq!(svc.requests().last().unwrap().method, "POST");

    // A failed push names no value.
    let c = f
        .client(&store(
            StoreKind::SecretStore,
            spec(&srv.url(), "/status/500", None),
        ))
        .await
        .unwrap();
    let e = c.push_secret(&req).await.unwrap_err().to_string();
    assert_eq!(
        e,
        "failed to push webhook data: endpoint gave error 500 Internal Server Error"
    );
    let e = c.delete_secret(&remote).await.unwrap_err().to_string();
    assert_eq!(e, "delete endpoint gave error 500 Internal Server Error");
}

#[tokio::test]
async fn validate_dials_the_host() {
    let svc = service();
    let srv = svc.start_http().await;
    let f = Fixture::new();
    let c = f
        .client(&store(
            StoreKind::SecretStore,
            spec(&srv.url(), "/secrets/{{ .remoteRef.key }}", None),
        ))
        .await
        .unwrap();
    assert_eq!(c.validate().await, ValidationResult::Ready);
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let c = f
        .client(&store(
            StoreKind::SecretStore,
            spec(&format!("http://127.0.0.1:{port}"), "/x", None),
        ))
        .await
        .unwrap();
    match c.validate().await {
        ValidationResult::Error(e) => {
            assert!(e.starts_with("error accessing external store: "), "{e}")
        }
        other => panic!("{other:?}"),
    }
    // ESO's ValidateStore accepts any webhook spec.
    assert_eq!(
        WebhookStoreProvider
            .validate_store(&store(StoreKind::ClusterSecretStore, json!({"url": "x"})))
            .unwrap(),
        Vec::<String>::new()
    );
}

#[tokio::test]
async fn the_generator_returns_the_object_at_the_path() {
    let svc = service();
    let srv = svc.start_http().await;
    let f = Fixture::new();
    let rec = f.rec.clone();
    let spec = json!({
        "url": format!("{}/generate", srv.url()),
        "method": "POST",
        "headers": {"Authorization": "Bearer {{ .auth.token }}"},
        "body": "{\"for\": \"{{ .auth.token | sha256sum | trunc 8 }}\"}",
        "result": {"jsonPath": "$.credentials"},
        "secrets": [{"name": "auth", "secretRef": {"name": "creds"}}]
    });
    let run = |spec: Value| {
        let kube: Arc<dyn KubeAccess> = f.kube.clone();
        let rec = rec.clone();
        async move { esr_provider_webhook::generate("gen", "team", &spec, kube, rec).await }
    };
    let m = run(spec.clone()).await.unwrap();
    assert_eq!(m["username"], b"gen-user");
    assert_eq!(m["password"], b"gen-1");
    let m = run(spec.clone()).await.unwrap();
    assert_eq!(m["password"], b"gen-2");
    let reqs = svc.requests();
    assert_eq!(reqs[0].method, "POST");
    assert_eq!(reqs[0].headers["authorization"], format!("Bearer {TOKEN}"));
    assert!(reqs[0].body.starts_with("{\"for\": \""), "{}", reqs[0].body);
    assert_eq!(rec.count(CALL_HTTP_REQUEST), 2);

    // The referrer's namespace: the Secret must be there, labelled.
    let kube: Arc<dyn KubeAccess> = f.kube.clone();
    let e = esr_provider_webhook::generate("gen", "elsewhere", &spec, kube, f.rec.clone())
        .await
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "failed to get clustersecretstore webhook secret creds: secrets \"creds\" not found"
    );
    let mut unlabelled = spec.clone();
    unlabelled["secrets"][0]["secretRef"]["name"] = json!("unlabelled");
    assert!(
        run(unlabelled)
            .await
            .unwrap_err()
            .to_string()
            .starts_with("secret does not contain needed label")
    );
    // result is required; a string where an object is expected is refused before any request.
    let n = svc.requests().len();
    let e = run(json!({"url": "http://127.0.0.1:1/"}))
        .await
        .unwrap_err();
    assert!(
        e.to_string().starts_with("failed to parse provider spec: "),
        "{e}"
    );
    assert_eq!(svc.requests().len(), n);
    // The answer must be an object.
    let mut wrong = spec;
    wrong["result"]["jsonPath"] = json!("$.credentials.username");
    let e = run(wrong).await.unwrap_err();
    assert_eq!(
        e.to_string(),
        "failed to parse response json from jsonpath: invalid JSON at line 1 column 1"
    );
}
