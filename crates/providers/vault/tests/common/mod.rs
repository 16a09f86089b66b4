//! Helpers for tests against a real OpenBao dev server (scripts/test-servers.sh).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;

use esr_provider::{
    ClientContext, KubeAccess, MemoryRecorder, Provider, SecretsClient, StaticKubeAccess,
    StoreInfo, StoreKind,
};
use esr_provider_vault::VaultProvider;
use k8s_openapi::api::core::v1::Secret;
use serde_json::{Value, json};
use vaultrs::client::{VaultClient as Admin, VaultClientSettingsBuilder};

pub struct Bao {
    pub addr: String,
    pub token: String,
    pub admin: Admin,
    http: reqwest::Client,
}

/// The server, or `None` after printing `skipped: ...` (fails under ESR_REQUIRE_SERVERS=1).
pub fn bao() -> Option<Bao> {
    let addr = std::env::var("ESR_TEST_VAULT_ADDR").ok();
    let token = std::env::var("ESR_TEST_VAULT_TOKEN").unwrap_or_else(|_| "root".into());
    let Some(addr) = addr else {
        if std::env::var("ESR_REQUIRE_SERVERS").as_deref() == Ok("1") {
            panic!("ESR_TEST_VAULT_ADDR is not set but ESR_REQUIRE_SERVERS=1");
        }
        println!("skipped: ESR_TEST_VAULT_ADDR not set (run via scripts/test-servers.sh)");
        return None;
    };
    let admin = Admin::new(
        VaultClientSettingsBuilder::default()
            .address(&addr)
            .token(&token)
            .build()
            .unwrap(),
    )
    .unwrap();
    Some(Bao {
        addr,
        token,
        admin,
        http: reqwest::Client::new(),
    })
}

pub fn unique(prefix: &str) -> String {
    format!("{prefix}{:08x}", rand::random::<u32>())
}

impl Bao {
    /// Raw admin call with the root token; panics on non-2xx.
    pub async fn api(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        self.api_ns(method, path, body, None).await
    }

    pub async fn api_ns(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
        ns: Option<&str>,
    ) -> Value {
        let m = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut r = self
            .http
            .request(m, format!("{}/v1/{}", self.addr, path))
            .header("x-vault-token", &self.token);
        if let Some(ns) = ns {
            r = r.header("x-vault-namespace", ns);
        }
        if let Some(b) = body {
            r = r.json(&b);
        }
        let resp = r.send().await.unwrap();
        let status = resp.status();
        let text = resp.text().await.unwrap();
        assert!(status.is_success(), "{method} {path}: {status}: {text}");
        if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap()
        }
    }

    pub async fn mount_kv(&self, path: &str, version: u8) {
        self.api(
            "POST",
            &format!("sys/mounts/{path}"),
            Some(json!({"type": "kv", "options": {"version": version.to_string()}})),
        )
        .await;
    }

    pub async fn enable_auth(&self, path: &str, kind: &str) {
        self.api(
            "POST",
            &format!("sys/auth/{path}"),
            Some(json!({"type": kind})),
        )
        .await;
    }

    pub async fn policy(&self, name: &str, hcl: &str) {
        self.api(
            "PUT",
            &format!("sys/policies/acl/{name}"),
            Some(json!({"policy": hcl})),
        )
        .await;
    }
}

pub fn secret(ns: &str, name: &str, pairs: &[(&str, &str)]) -> Secret {
    let mut s = Secret::default();
    s.metadata.name = Some(name.into());
    s.metadata.namespace = Some(ns.into());
    s.string_data = Some(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
    );
    s
}

pub fn store(spec: Value) -> StoreInfo {
    let mut s = StoreInfo::new(
        StoreKind::SecretStore,
        unique("store"),
        Some("ns".into()),
        json!({"provider": {"vault": spec}}),
    );
    s.uid = Some(unique("uid"));
    s
}

#[derive(Default)]
pub struct Harness {
    pub provider: VaultProvider,
    pub kube: Arc<StaticKubeAccess>,
    pub recorder: Arc<MemoryRecorder>,
}

impl Harness {
    pub fn new() -> Self {
        Self::default()
    }

    pub async fn client(&self, store: &StoreInfo) -> esr_provider::Result<Arc<dyn SecretsClient>> {
        self.client_with(store, self.kube.clone()).await
    }

    pub async fn client_with(
        &self,
        store: &StoreInfo,
        kube: Arc<dyn KubeAccess>,
    ) -> esr_provider::Result<Arc<dyn SecretsClient>> {
        let ctx = ClientContext::new(store, Some("ns"), kube).with_recorder(self.recorder.clone());
        self.provider.new_client(&ctx).await
    }
}

/// A store spec authenticating with a root token Secret `ns/root-token`.
pub fn token_spec(h: &Harness, bao: &Bao, extra: Value) -> Value {
    h.kube
        .add_secret(secret("ns", "root-token", &[("token", &bao.token)]));
    let mut spec = json!({
        "server": bao.addr,
        "auth": {"tokenSecretRef": {"name": "root-token", "key": "token"}}
    });
    if let (Some(o), Value::Object(e)) = (spec.as_object_mut(), extra) {
        o.extend(e);
    }
    spec
}

pub fn s(v: &[u8]) -> String {
    String::from_utf8_lossy(v).into_owned()
}
