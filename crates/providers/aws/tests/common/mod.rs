//! Helpers for the moto-backed tests: server discovery, a fake Kubernetes source, a seeding
//! client, and a tiny fake AWS endpoint for behaviours moto cannot produce (bad credentials,
//! throttling, STS parameters).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use aws_sdk_secretsmanager::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_secretsmanager::primitives::Blob;
use esr_provider_aws::{
    AwsError, AwsProvider, AwsProviderOptions, CallLog, CostOptions, Endpoints, KubeSource,
    RetrySettings, SmClient, StoreIdentity, StoreKind,
};

/// The moto endpoint, or None (after printing why) when the test should be skipped.
pub fn moto() -> Option<String> {
    match std::env::var("ESR_TEST_MOTO_ENDPOINT") {
        Ok(v) if !v.is_empty() => Some(v),
        _ => {
            if std::env::var("ESR_REQUIRE_SERVERS").as_deref() == Ok("1") {
                panic!("ESR_TEST_MOTO_ENDPOINT is not set but ESR_REQUIRE_SERVERS=1");
            }
            println!(
                "skipped: ESR_TEST_MOTO_ENDPOINT is not set (run under scripts/test-servers.sh)"
            );
            None
        }
    }
}

/// A unique name prefix so tests can share one moto server.
pub fn unique(test: &str) -> String {
    format!(
        "esr-{test}-{}/",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    )
}

/// In-memory Kubernetes: Secrets, ServiceAccount annotations, issued tokens.
#[derive(Default)]
pub struct FakeKube {
    pub secrets: Mutex<HashMap<(String, String, String), Vec<u8>>>,
    pub annotations: Mutex<HashMap<(String, String), BTreeMap<String, String>>>,
    pub tokens: Mutex<Vec<(String, String, Vec<String>)>>,
    pub reads: Mutex<Vec<(String, String, String)>>,
}

impl FakeKube {
    pub fn with_aws_keys(ns: &str) -> Arc<Self> {
        let k = Self::default();
        k.put(ns, "aws", "id", "testing");
        k.put(ns, "aws", "secret", "testing");
        Arc::new(k)
    }
    pub fn put(&self, ns: &str, name: &str, key: &str, value: &str) {
        self.secrets.lock().unwrap().insert(
            (ns.into(), name.into(), key.into()),
            value.as_bytes().to_vec(),
        );
    }
}

#[async_trait]
impl KubeSource for FakeKube {
    async fn secret_value(&self, ns: &str, name: &str, key: &str) -> Result<Vec<u8>, AwsError> {
        self.reads
            .lock()
            .unwrap()
            .push((ns.into(), name.into(), key.into()));
        self.secrets
            .lock()
            .unwrap()
            .get(&(ns.to_string(), name.to_string(), key.to_string()))
            .cloned()
            .ok_or_else(|| AwsError::not_found(format!("secret {ns}/{name} key {key} not found")))
    }
    async fn service_account_annotations(
        &self,
        ns: &str,
        name: &str,
    ) -> Result<BTreeMap<String, String>, AwsError> {
        self.annotations
            .lock()
            .unwrap()
            .get(&(ns.to_string(), name.to_string()))
            .cloned()
            .ok_or_else(|| AwsError::not_found(format!("serviceaccount {ns}/{name} not found")))
    }
    async fn service_account_token(
        &self,
        ns: &str,
        name: &str,
        audiences: &[String],
    ) -> Result<String, AwsError> {
        self.tokens
            .lock()
            .unwrap()
            .push((ns.into(), name.into(), audiences.to_vec()));
        Ok(format!("token-for-{ns}-{name}"))
    }
}

pub fn store(name: &str, ns: &str) -> StoreIdentity {
    StoreIdentity {
        kind: StoreKind::SecretStore,
        name: name.into(),
        namespace: Some(ns.into()),
        uid: format!("uid-{name}"),
        generation: 1,
    }
}

pub fn cluster_store(name: &str) -> StoreIdentity {
    StoreIdentity {
        kind: StoreKind::ClusterSecretStore,
        name: name.into(),
        namespace: None,
        uid: format!("uid-{name}"),
        generation: 1,
    }
}

/// A store spec with `auth.secretRef` pointing at the `aws` Secret.
pub fn spec_secret_ref(region: &str) -> serde_json::Value {
    serde_json::json!({
        "service": "SecretsManager",
        "region": region,
        "auth": {"secretRef": {
            "accessKeyIDSecretRef": {"name": "aws", "key": "id"},
            "secretAccessKeySecretRef": {"name": "aws", "key": "secret"}
        }}
    })
}

/// A client of the SecretStore `ns/st` whose `auth.secretRef` Secret `ns/aws` exists.
pub async fn ns_client(
    p: &AwsProvider,
    spec: &serde_json::Value,
    retry: Option<&RetrySettings>,
) -> Arc<SmClient> {
    p.client(
        spec,
        retry,
        &store("st", "ns"),
        Some("ns"),
        FakeKube::with_aws_keys("ns"),
    )
    .await
    .unwrap()
}

pub fn provider(endpoints: Endpoints, cost: CostOptions) -> (AwsProvider, CallLog) {
    let calls = CallLog::new();
    let p = AwsProvider::new(AwsProviderOptions {
        endpoints,
        cost,
        calls: calls.clone(),
    });
    (p, calls)
}

pub fn moto_endpoints(moto: &str) -> Endpoints {
    Endpoints {
        all: Some(moto.to_string()),
        ..Default::default()
    }
}

/// A direct SDK client for seeding moto (its calls are not counted).
pub fn seeder(moto: &str) -> aws_sdk_secretsmanager::Client {
    let conf = aws_sdk_secretsmanager::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("testing", "testing", None, None, "static"))
        .endpoint_url(moto)
        .build();
    aws_sdk_secretsmanager::Client::from_conf(conf)
}

pub async fn create(sm: &aws_sdk_secretsmanager::Client, name: &str, value: &str) -> String {
    sm.create_secret()
        .name(name)
        .secret_string(value)
        .send()
        .await
        .unwrap()
        .arn()
        .unwrap()
        .to_string()
}

pub async fn create_tagged(
    sm: &aws_sdk_secretsmanager::Client,
    name: &str,
    value: &str,
    tags: &[(&str, &str)],
) {
    let mut req = sm.create_secret().name(name).secret_string(value);
    for (k, v) in tags {
        req = req.tags(
            aws_sdk_secretsmanager::types::Tag::builder()
                .key(*k)
                .value(*v)
                .build(),
        );
    }
    req.send().await.unwrap();
}

pub async fn create_binary(sm: &aws_sdk_secretsmanager::Client, name: &str, value: &[u8]) {
    sm.create_secret()
        .name(name)
        .secret_binary(Blob::new(value.to_vec()))
        .send()
        .await
        .unwrap();
}

/// One request seen by the fake AWS endpoint.
#[derive(Debug, Clone)]
pub struct SeenRequest {
    /// `X-Amz-Target` for JSON services, `Action` for query services (STS).
    pub action: String,
    pub params: BTreeMap<String, String>,
    pub body: String,
    /// The `Authorization` header (SigV4: names the access key id used).
    pub authorization: String,
}

pub type Responder = dyn Fn(&SeenRequest) -> (u16, String, &'static str) + Send + Sync;

/// A fake AWS endpoint on 127.0.0.1 answering with `responder`.
pub struct FakeAws {
    pub url: String,
    pub seen: Arc<Mutex<Vec<SeenRequest>>>,
}

impl FakeAws {
    pub async fn start(responder: Arc<Responder>) -> Self {
        use axum::body::Bytes;
        use axum::http::{HeaderMap, StatusCode};
        let seen: Arc<Mutex<Vec<SeenRequest>>> = Arc::default();
        let seen2 = seen.clone();
        let app = axum::Router::new().fallback(move |headers: HeaderMap, body: Bytes| {
            let seen = seen2.clone();
            let responder = responder.clone();
            async move {
                let body = String::from_utf8_lossy(&body).into_owned();
                let params: BTreeMap<String, String> = if headers.contains_key("x-amz-target") {
                    BTreeMap::new()
                } else {
                    form_decode(&body)
                };
                let action = headers
                    .get("x-amz-target")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string)
                    .or_else(|| params.get("Action").cloned())
                    .unwrap_or_default();
                let authorization = headers
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_string();
                let req = SeenRequest {
                    action,
                    params,
                    body,
                    authorization,
                };
                seen.lock().unwrap().push(req.clone());
                let (status, body, ctype) = responder(&req);
                (
                    StatusCode::from_u16(status).unwrap(),
                    [("content-type", ctype)],
                    body,
                )
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Self { url, seen }
    }

    pub fn actions(&self) -> Vec<String> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .map(|r| r.action.clone())
            .collect()
    }
}

fn form_decode(body: &str) -> BTreeMap<String, String> {
    fn dec(s: &str) -> String {
        let bytes = s.replace('+', " ").into_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'%'
                && i + 2 < bytes.len()
                && let Ok(b) =
                    u8::from_str_radix(&String::from_utf8_lossy(&bytes[i + 1..i + 3]), 16)
            {
                out.push(b);
                i += 3;
                continue;
            }
            out.push(bytes[i]);
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    }
    body.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (dec(k), dec(v))
        })
        .collect()
}

/// STS XML answer carrying fresh credentials.
pub fn sts_credentials_xml(action: &str, key_id: &str) -> String {
    format!(
        r#"<{action}Response xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <{action}Result>
    <Credentials>
      <AccessKeyId>{key_id}</AccessKeyId>
      <SecretAccessKey>secret-{key_id}</SecretAccessKey>
      <SessionToken>token-{key_id}</SessionToken>
      <Expiration>2099-01-01T00:00:00Z</Expiration>
    </Credentials>
    <AssumedRoleUser>
      <AssumedRoleId>AROA:{key_id}</AssumedRoleId>
      <Arn>arn:aws:sts::123456789012:assumed-role/r/{key_id}</Arn>
    </AssumedRoleUser>
  </{action}Result>
  <ResponseMetadata><RequestId>req-1</RequestId></ResponseMetadata>
</{action}Response>"#
    )
}

pub fn sts_error_xml(code: &str, message: &str) -> String {
    format!(
        r#"<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type><Code>{code}</Code><Message>{message}</Message></Error><RequestId>req-2</RequestId></ErrorResponse>"#
    )
}
