//! Auth methods against a real OpenBao dev server: AppRole (with token caching and re-login on
//! 403), userpass, JWT (own key pair), kubernetes (OpenBao calling esr-testkit's TokenReview),
//! namespaces; and the headers esr sends, checked with a local recording server.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::{Arc, Mutex};

use common::*;
use esr_provider::{KubeAccess, KubeClientAccess, SecretRef, ValidationResult};
use serde_json::{Value, json};

/// A KV v2 mount with `app` = {"pw": "s3cret"} and a policy `<mount>-read` allowing reads.
async fn seeded(bao: &Bao) -> (String, String) {
    let mount = unique("kv");
    bao.mount_kv(&mount, 2).await;
    vaultrs::kv2::set(&bao.admin, &mount, "app", &json!({"pw": "s3cret"}))
        .await
        .unwrap();
    let policy = format!("{mount}-read");
    bao.policy(
        &policy,
        &format!("path \"{mount}/data/*\" {{ capabilities = [\"read\"] }}\npath \"{mount}/metadata/*\" {{ capabilities = [\"read\", \"list\"] }}"),
    )
    .await;
    (mount, policy)
}

async fn read_pw(h: &Harness, st: &esr_provider::StoreInfo) -> String {
    let c = h.client(st).await.unwrap();
    s(&c.get_secret(&SecretRef::new("app").with_property("pw"))
        .await
        .unwrap())
}

#[tokio::test]
async fn approle_login_is_cached_and_renewed_after_403() {
    let Some(bao) = bao() else { return };
    let (mount, policy) = seeded(&bao).await;
    let ar = unique("approle");
    bao.enable_auth(&ar, "approle").await;
    bao.api(
        "POST",
        &format!("auth/{ar}/role/esr"),
        Some(json!({"token_policies": [policy], "token_ttl": "1h"})),
    )
    .await;
    let role_id = bao
        .api("GET", &format!("auth/{ar}/role/esr/role-id"), None)
        .await["data"]["role_id"]
        .as_str()
        .unwrap()
        .to_string();
    let secret_id = bao
        .api(
            "POST",
            &format!("auth/{ar}/role/esr/secret-id"),
            Some(json!({})),
        )
        .await["data"]["secret_id"]
        .as_str()
        .unwrap()
        .to_string();
    let h = Harness::new();
    h.kube.add_secret(secret(
        "ns",
        "approle",
        &[("secret-id", &secret_id), ("role-id", &role_id)],
    ));
    let st = store(json!({
        "server": bao.addr, "path": mount,
        "auth": {"appRole": {"path": ar, "roleRef": {"name": "approle", "key": "role-id"},
                             "secretRef": {"name": "approle", "key": "secret-id"}}}
    }));
    assert_eq!(read_pw(&h, &st).await, "s3cret");
    assert_eq!(read_pw(&h, &st).await, "s3cret");
    let c = h.client(&st).await.unwrap();
    assert_eq!(c.validate().await, ValidationResult::Ready);
    assert_eq!(h.recorder.count("Login"), 1, "one login for three clients");

    // Revoke every token issued by this AppRole mount: the next read gets 403, logs in again.
    let accessors = bao.api("LIST", "auth/token/accessors", None).await;
    for a in accessors["data"]["keys"].as_array().unwrap() {
        let info = bao
            .api(
                "POST",
                "auth/token/lookup-accessor",
                Some(json!({"accessor": a})),
            )
            .await;
        if info["data"]["path"]
            .as_str()
            .unwrap_or("")
            .starts_with(&format!("auth/{ar}/"))
        {
            bao.api(
                "POST",
                "auth/token/revoke-accessor",
                Some(json!({"accessor": a})),
            )
            .await;
        }
    }
    assert_eq!(
        s(&c.get_secret(&SecretRef::new("app").with_property("pw"))
            .await
            .unwrap()),
        "s3cret"
    );
    assert_eq!(h.recorder.count("Login"), 2);

    // roleId inline works too; a wrong secret id is an auth error at client build.
    let h2 = Harness::new();
    h2.kube
        .add_secret(secret("ns", "approle", &[("secret-id", "wrong")]));
    let bad = store(json!({
        "server": bao.addr, "path": mount,
        "auth": {"appRole": {"path": ar, "roleId": role_id, "secretRef": {"name": "approle", "key": "secret-id"}}}
    }));
    let e = h2.client(&bad).await.err().unwrap();
    assert_eq!(e.kind(), esr_provider::ErrorKind::Auth);
    assert!(e.message().starts_with("vault login failed"), "{e}");
    assert!(!e.message().contains("wrong"), "credential leaked: {e}");
}

#[tokio::test]
async fn userpass_login() {
    let Some(bao) = bao() else { return };
    let (mount, policy) = seeded(&bao).await;
    let up = unique("userpass");
    bao.enable_auth(&up, "userpass").await;
    bao.api(
        "POST",
        &format!("auth/{up}/users/alice"),
        Some(json!({"password": "pa55", "token_policies": [policy]})),
    )
    .await;
    let h = Harness::new();
    h.kube
        .add_secret(secret("ns", "up", &[("password", "pa55")]));
    let st = store(json!({
        "server": bao.addr, "path": mount,
        "auth": {"userPass": {"path": up, "username": "alice", "secretRef": {"name": "up", "key": "password"}}}
    }));
    assert_eq!(read_pw(&h, &st).await, "s3cret");
    assert_eq!(h.recorder.count("Login"), 1);
}

#[tokio::test]
async fn jwt_login_with_own_key() {
    let Some(bao) = bao() else { return };
    let (mount, policy) = seeded(&bao).await;
    let kp = rcgen::KeyPair::generate().unwrap();
    let jwt_mount = unique("jwt");
    bao.enable_auth(&jwt_mount, "jwt").await;
    bao.api(
        "POST",
        &format!("auth/{jwt_mount}/config"),
        Some(json!({"jwt_validation_pubkeys": [kp.public_key_pem()], "bound_issuer": "esr-test"})),
    )
    .await;
    bao.api(
        "POST",
        &format!("auth/{jwt_mount}/role/esr"),
        Some(
            json!({"role_type": "jwt", "user_claim": "sub", "bound_audiences": ["vault"],
                    "token_policies": [policy], "token_ttl": "1h"}),
        ),
    )
    .await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let claims = json!({"iss": "esr-test", "sub": "esr", "aud": "vault", "iat": now, "nbf": now, "exp": now + 600});
    let token = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256),
        &claims,
        &jsonwebtoken::EncodingKey::from_ec_pem(kp.serialize_pem().as_bytes()).unwrap(),
    )
    .unwrap();
    let h = Harness::new();
    h.kube.add_secret(secret("ns", "jwt", &[("jwt", &token)]));
    let st = store(json!({
        "server": bao.addr, "path": mount,
        "auth": {"jwt": {"path": jwt_mount, "role": "esr", "secretRef": {"name": "jwt", "key": "jwt"}}}
    }));
    assert_eq!(read_pw(&h, &st).await, "s3cret");

    // kubernetesServiceAccountToken: the TokenRequest result is used as the JWT.
    let h2 = Harness::new();
    h2.kube.add_token("ns", "app-sa", &token);
    let st2 = store(json!({
        "server": bao.addr, "path": mount,
        "auth": {"jwt": {"path": jwt_mount, "role": "esr",
                         "kubernetesServiceAccountToken": {"serviceAccountRef": {"name": "app-sa"}}}}
    }));
    assert_eq!(read_pw(&h2, &st2).await, "s3cret");
}

#[tokio::test]
async fn kubernetes_login_via_testkit_token_review() {
    let Some(bao) = bao() else { return };
    let (mount, policy) = seeded(&bao).await;
    let ts = esr_testkit::TestServer::start().await.unwrap();
    ts.apply_object(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}}))
        .unwrap();
    ts.apply_object(json!({"apiVersion": "v1", "kind": "ServiceAccount",
                           "metadata": {"name": "vault-reader", "namespace": "ns"}}))
        .unwrap();
    let ca = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let km = unique("k8s");
    bao.enable_auth(&km, "kubernetes").await;
    bao.api(
        "POST",
        &format!("auth/{km}/config"),
        Some(
            json!({"kubernetes_host": ts.url(), "disable_local_ca_jwt": true,
                    // required by OpenBao with disable_local_ca_jwt; unused for an http host
                    "kubernetes_ca_cert": ca.cert.pem()}),
        ),
    )
    .await;
    bao.api(
        "POST",
        &format!("auth/{km}/role/esr"),
        Some(json!({"bound_service_account_names": ["vault-reader"],
                    "bound_service_account_namespaces": ["ns"],
                    "token_policies": [policy], "token_ttl": "1h"})),
    )
    .await;
    let h = Harness::new();
    let kube: Arc<dyn KubeAccess> = Arc::new(KubeClientAccess::new(ts.client()));
    let st = store(json!({
        "server": bao.addr, "path": mount,
        "auth": {"kubernetes": {"mountPath": km, "role": "esr",
                                "serviceAccountRef": {"name": "vault-reader"}}}
    }));
    let c = h.client_with(&st, kube.clone()).await.unwrap();
    assert_eq!(
        s(&c.get_secret(&SecretRef::new("app").with_property("pw"))
            .await
            .unwrap()),
        "s3cret"
    );
    // A ServiceAccount the role is not bound to is refused.
    ts.apply_object(json!({"apiVersion": "v1", "kind": "ServiceAccount",
                           "metadata": {"name": "intruder", "namespace": "ns"}}))
        .unwrap();
    let st2 = store(json!({
        "server": bao.addr, "path": mount,
        "auth": {"kubernetes": {"mountPath": km, "role": "esr",
                                "serviceAccountRef": {"name": "intruder"}}}
    }));
    let e = h.client_with(&st2, kube).await.err().unwrap();
    assert_eq!(e.kind(), esr_provider::ErrorKind::Auth, "{e}");
}

#[tokio::test]
async fn openbao_namespaces() {
    let Some(bao) = bao() else { return };
    let ns = unique("team");
    bao.api("POST", &format!("sys/namespaces/{ns}"), Some(json!({})))
        .await;
    bao.api_ns(
        "POST",
        "sys/mounts/kv",
        Some(json!({"type": "kv", "options": {"version": "2"}})),
        Some(&ns),
    )
    .await;
    bao.api_ns(
        "POST",
        "kv/data/app",
        Some(json!({"data": {"pw": "in-ns"}})),
        Some(&ns),
    )
    .await;
    let h = Harness::new();
    let st = store(token_spec(&h, &bao, json!({"path": "kv", "namespace": ns})));
    assert_eq!(read_pw(&h, &st).await, "in-ns");
    // without the namespace the same path does not exist
    let st = store(token_spec(&h, &bao, json!({"path": "kv"})));
    let c = h.client(&st).await.unwrap();
    assert!(c.get_secret(&SecretRef::new("app")).await.is_err());
}

#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<(String, axum::http::HeaderMap)>>>);

async fn recorder() -> (String, Seen) {
    use axum::response::IntoResponse;
    let seen = Seen::default();
    let s2 = seen.clone();
    let app = axum::Router::new().fallback(move |req: axum::extract::Request| {
        let seen = s2.clone();
        async move {
            let path = req.uri().path().to_string();
            seen.0
                .lock()
                .unwrap()
                .push((path.clone(), req.headers().clone()));
            let n = seen.0.lock().unwrap().len();
            let body: Value = if path.contains("/login/") {
                json!({"auth": {"client_token": "tok", "lease_duration": 3600, "renewable": true}})
            } else {
                json!({"data": {"data": {"k": "v"}}})
            };
            ([("x-vault-index", format!("idx-{n}"))], axum::Json(body)).into_response()
        }
    });
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(l, app).await;
    });
    (format!("http://{addr}"), seen)
}

#[tokio::test]
async fn headers_namespace_index_and_forwarding_are_sent() {
    let (url, seen) = recorder().await;
    let h = Harness::new();
    h.kube.add_secret(secret("ns", "up", &[("password", "pw")]));
    let st = store(json!({
        "server": url, "path": "secret", "namespace": "team-a",
        "headers": {"X-Custom": "yes"}, "readYourWrites": true, "forwardInconsistent": true,
        "auth": {"namespace": "admin",
                 "userPass": {"path": "userpass", "username": "u", "secretRef": {"name": "up", "key": "password"}}}
    }));
    let c = h.client(&st).await.unwrap();
    c.get_secret(&SecretRef::new("a")).await.unwrap();
    c.get_secret(&SecretRef::new("b")).await.unwrap();
    let seen = seen.0.lock().unwrap().clone();
    assert_eq!(seen.len(), 3);
    let (p0, h0) = &seen[0];
    assert_eq!(p0, "/v1/auth/userpass/login/u");
    assert_eq!(h0["x-vault-namespace"], "admin");
    assert!(h0.get("x-vault-token").is_none());
    let (p1, h1) = &seen[1];
    assert_eq!(p1, "/v1/secret/data/a");
    assert_eq!(h1["x-vault-namespace"], "team-a");
    assert_eq!(h1["x-vault-token"], "tok");
    assert_eq!(h1["x-custom"], "yes");
    assert_eq!(h1["x-vault-inconsistent"], "forward-active-node");
    assert_eq!(h1["x-vault-index"], "idx-1");
    assert_eq!(seen[2].1["x-vault-index"], "idx-2");
}

#[tokio::test]
async fn tokens_are_renewed_when_due_or_replaced_when_not_renewable() {
    let Some(bao) = bao() else { return };
    let (mount, policy) = seeded(&bao).await;
    let ar = unique("approle");
    bao.enable_auth(&ar, "approle").await;
    // service tokens are renewable; batch tokens are not
    for (role, extra) in [
        ("svc", json!({"token_type": "service"})),
        ("batch", json!({"token_type": "batch"})),
    ] {
        let mut body =
            json!({"token_policies": [policy], "token_ttl": "1h", "token_max_ttl": "2h"});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        bao.api("POST", &format!("auth/{ar}/role/{role}"), Some(body))
            .await;
    }
    let ids = |role: &'static str| {
        let bao = &bao;
        let ar = ar.clone();
        async move {
            let r = bao
                .api("GET", &format!("auth/{ar}/role/{role}/role-id"), None)
                .await["data"]["role_id"]
                .as_str()
                .unwrap()
                .to_string();
            let sid = bao
                .api(
                    "POST",
                    &format!("auth/{ar}/role/{role}/secret-id"),
                    Some(json!({})),
                )
                .await["data"]["secret_id"]
                .as_str()
                .unwrap()
                .to_string();
            (r, sid)
        }
    };
    // Refresh on every use (fraction 0), so the policy is visible without waiting.
    let opts = esr_provider_vault::VaultOptions {
        token_refresh_fraction: 0.0,
    };
    for (role, renewable) in [("svc", true), ("batch", false)] {
        let (role_id, secret_id) = ids(role).await;
        let h = Harness {
            provider: esr_provider_vault::VaultProvider::with_options(opts),
            ..Default::default()
        };
        h.kube
            .add_secret(secret("ns", "ar", &[("sid", &secret_id)]));
        let st = store(json!({
            "server": bao.addr, "path": mount,
            "auth": {"appRole": {"path": ar, "roleId": role_id, "secretRef": {"name": "ar", "key": "sid"}}}
        }));
        assert_eq!(read_pw(&h, &st).await, "s3cret");
        assert_eq!(read_pw(&h, &st).await, "s3cret");
        if renewable {
            assert_eq!(
                h.recorder.count("Login"),
                1,
                "{role}: renewed, not re-logged"
            );
            assert!(h.recorder.count("RenewSelf") >= 2, "{role}");
        } else {
            assert!(h.recorder.count("Login") >= 2, "{role}: logged in again");
            assert_eq!(h.recorder.count("RenewSelf"), 0, "{role}");
        }
    }
}

#[tokio::test]
async fn iam_is_unsupported_and_no_auth_sends_no_token() {
    let (url, seen) = recorder().await;
    let h = Harness::new();
    let st = store(json!({"server": url, "path": "secret", "auth": {"iam": {"vaultRole": "r"}}}));
    let e = h.client(&st).await.err().unwrap();
    assert_eq!(e.kind(), esr_provider::ErrorKind::Unsupported);
    assert!(e.message().contains("iam is not supported"), "{e}");
    let st = store(json!({"server": url, "path": "secret"}));
    let c = h.client(&st).await.unwrap();
    c.get_secret(&SecretRef::new("a")).await.unwrap();
    let seen = seen.0.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert!(seen[0].1.get("x-vault-token").is_none());
}

/// A namespaced SecretStore with kubernetes auth and neither `serviceAccountRef` nor `secretRef`
/// would POST the controller's own ServiceAccount token to the tenant's Vault: it is refused
/// before any request leaves. A ClusterSecretStore keeps the fallback (here it then fails on the
/// missing in-cluster token file, which shows it was allowed to try).
#[tokio::test]
async fn namespaced_store_never_authenticates_as_the_controller() {
    let (url, seen) = recorder().await;
    let h = Harness::new();
    let spec = json!({"server": url, "path": "secret",
                      "auth": {"kubernetes": {"mountPath": "kubernetes", "role": "r"}}});
    let st = store(spec.clone());
    let e = match h.client(&st).await {
        Ok(c) => c.get_secret(&SecretRef::new("a")).await.unwrap_err(),
        Err(e) => e,
    };
    assert_eq!(e.kind(), esr_provider::ErrorKind::Auth, "{e}");
    assert!(e.to_string().contains("a SecretStore may not do"), "{e}");
    assert!(
        seen.0.lock().unwrap().is_empty(),
        "no request may reach the tenant's Vault"
    );

    let mut cluster = store(spec);
    cluster.kind = esr_provider::StoreKind::ClusterSecretStore;
    cluster.namespace = None;
    let e = match h.client(&cluster).await {
        Ok(c) => c.get_secret(&SecretRef::new("a")).await.unwrap_err(),
        Err(e) => e,
    };
    if std::path::Path::new(esr_provider_vault::auth::IN_CLUSTER_TOKEN).exists() {
        return;
    }
    assert!(
        e.to_string().contains("needs the controller's token"),
        "a ClusterSecretStore may use the in-cluster token: {e}"
    );
}
