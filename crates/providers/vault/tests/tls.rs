//! TLS against a real `bao server -dev -dev-tls`: caBundle, caProvider (ConfigMap), an untrusted
//! server, and the `cert` auth method with a client certificate made in the test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use base64::Engine as _;
use common::*;
use esr_provider::{ErrorKind, SecretRef};
use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::json;

struct TlsBao {
    child: std::process::Child,
    addr: String,
    ca: String,
    http: reqwest::Client,
}

impl Drop for TlsBao {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl TlsBao {
    async fn api(&self, method: &str, path: &str, body: serde_json::Value) -> serde_json::Value {
        let r = self
            .http
            .request(
                reqwest::Method::from_bytes(method.as_bytes()).unwrap(),
                format!("{}/v1/{path}", self.addr),
            )
            .header("x-vault-token", "root")
            .json(&body)
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{path}: {}", r.status());
        r.json().await.unwrap_or(serde_json::Value::Null)
    }
}

async fn tls_bao() -> Option<TlsBao> {
    bao()?;
    let Ok(bin) = std::env::var("ESR_TEST_BAO_BIN") else {
        println!("skipped: ESR_TEST_BAO_BIN not set");
        return None;
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = std::env::temp_dir().join(unique("esr-bao-tls-"));
    std::fs::create_dir_all(&dir).unwrap();
    let child = std::process::Command::new(bin)
        .args(["server", "-dev", "-dev-tls", "-dev-root-token-id=root"])
        .arg(format!("-dev-tls-cert-dir={}", dir.display()))
        .arg(format!("-dev-listen-address=127.0.0.1:{port}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let ca_path = dir.join("vault-ca.pem");
    let addr = format!("https://127.0.0.1:{port}");
    let mut ready = None;
    for _ in 0..300 {
        if let Ok(ca) = std::fs::read_to_string(&ca_path)
            && let Ok(cert) = reqwest::Certificate::from_pem(ca.as_bytes())
        {
            let http = reqwest::Client::builder()
                .tls_certs_only([cert])
                .build()
                .unwrap();
            if http
                .get(format!("{addr}/v1/sys/health"))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success())
            {
                ready = Some((ca, http));
                break;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let (ca, http) = ready.expect("bao -dev-tls did not start");
    Some(TlsBao {
        child,
        addr,
        ca,
        http,
    })
}

#[tokio::test]
async fn ca_bundle_ca_provider_untrusted_and_cert_auth() {
    let Some(tb) = tls_bao().await else { return };
    tb.api(
        "POST",
        "secret/data/app",
        json!({"data": {"pw": "over-tls"}}),
    )
    .await;
    let h = Harness::new();
    h.kube.add_secret(secret("ns", "t", &[("token", "root")]));
    let token_auth = json!({"tokenSecretRef": {"name": "t", "key": "token"}});

    // caBundle (base64 of the PEM, as in the CRD)
    let b64 = base64::engine::general_purpose::STANDARD.encode(&tb.ca);
    let st =
        store(json!({"server": tb.addr, "path": "secret", "caBundle": b64, "auth": token_auth}));
    let c = h.client(&st).await.unwrap();
    let v = c
        .get_secret(&SecretRef::new("app").with_property("pw"))
        .await
        .unwrap();
    assert_eq!(s(&v), "over-tls");

    // caProvider: a ConfigMap key
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("vault-ca".into());
    cm.metadata.namespace = Some("ns".into());
    cm.data = Some([("ca.crt".to_string(), tb.ca.clone())].into());
    h.kube.add_config_map(cm);
    let st = store(json!({"server": tb.addr, "path": "secret",
        "caProvider": {"type": "ConfigMap", "name": "vault-ca", "key": "ca.crt"}, "auth": token_auth}));
    let c = h.client(&st).await.unwrap();
    assert_eq!(
        s(&c.get_secret(&SecretRef::new("app").with_property("pw"))
            .await
            .unwrap()),
        "over-tls"
    );

    // a CA that did not sign the server certificate: the TLS handshake fails
    let other = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let st = store(json!({"server": tb.addr, "path": "secret",
        "caBundle": other.cert.pem(), "auth": token_auth}));
    let c = h.client(&st).await.unwrap();
    let e = c.get_secret(&SecretRef::new("app")).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Transient, "{e}");
    assert!(e.message().contains("cannot reach Vault"), "{e}");

    // cert auth: a self-signed client certificate registered as trusted for role "esr"
    let mut params = rcgen::CertificateParams::new(vec!["esr-client".to_string()]).unwrap();
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let key = rcgen::KeyPair::generate().unwrap();
    let client = params.self_signed(&key).unwrap();
    let mount = unique("cert");
    tb.api(
        "POST",
        &format!("sys/auth/{mount}"),
        json!({"type": "cert"}),
    )
    .await;
    tb.api(
        "PUT",
        "sys/policies/acl/read-app",
        json!({"policy": "path \"secret/data/app\" { capabilities = [\"read\"] }"}),
    )
    .await;
    tb.api(
        "POST",
        &format!("auth/{mount}/certs/esr"),
        json!({"certificate": client.pem(), "token_policies": ["read-app"]}),
    )
    .await;
    h.kube.add_secret(secret(
        "ns",
        "client-tls",
        &[
            ("tls.crt", &client.pem()),
            ("tls.key", &key.serialize_pem()),
        ],
    ));
    let st = store(json!({"server": tb.addr, "path": "secret", "caBundle": b64,
        "auth": {"cert": {"path": mount, "vaultRole": "esr",
                          "clientCert": {"name": "client-tls"}, "secretRef": {"name": "client-tls"}}}}));
    let c = h.client(&st).await.unwrap();
    assert_eq!(
        s(&c.get_secret(&SecretRef::new("app").with_property("pw"))
            .await
            .unwrap()),
        "over-tls"
    );
    assert_eq!(h.recorder.count("Login"), 1);
}
