//! Test support: serve an axum router on 127.0.0.1 over plain HTTP or over HTTPS with a test CA
//! ([`Served`], [`TestCa`]; the Azure and GCP test servers serve through it too), and
//! [`SecretService`], a fake in-house secret service for the webhook provider's tests and the
//! e2e suite.
//!
//! `SecretService` answers:
//! * `GET /secrets/{key}[?version=V]`: `{"key": K, "version": V, "data": <document>}`, 404 when
//!   the key is unknown, 401 without `Authorization: Bearer <token>` when a token is set;
//! * `PUT` / `POST /secrets/{key}`: stores the request body (as JSON when it parses, else as a
//!   string), 204; `DELETE /secrets/{key}`: 204, or 404 when unknown;
//! * `GET /garbage`: a 200 whose body is not JSON;
//! * `GET /hang`: never answers (until the server is dropped);
//! * `GET /status/{code}`: an empty answer with that status;
//! * `POST /generate`: `{"credentials": {"username": "gen-user", "password": "gen-N"}}` with N
//!   counting the calls.
//!
//! Every request is recorded ([`SecretService::requests`]) with its method, path and query,
//! headers and body.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// A running server; stopped on drop.
pub struct Served {
    addr: SocketAddr,
    ca_pem: Option<String>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Served {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Served {
    /// Serves `router` over plain HTTP.
    pub async fn http(router: axum::Router) -> Served {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Served {
            addr,
            ca_pem: None,
            task,
        }
    }

    /// Serves `router` over HTTPS with a leaf certificate for `localhost` and `127.0.0.1`
    /// signed by a fresh CA ([`Served::ca_pem`]).
    pub async fn https(router: axum::Router) -> Served {
        Served::https_with(&TestCa::generate(), |_| router).await
    }

    /// Serves over HTTPS with a leaf certificate signed by `ca` ([`TestCa::acceptor`]); `router`
    /// is made once the port is bound, for services whose answers name their own address.
    pub async fn https_with(
        ca: &TestCa,
        router: impl FnOnce(SocketAddr) -> axum::Router,
    ) -> Served {
        let acceptor = ca.acceptor();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let router = router(addr);
        let task = tokio::spawn(async move {
            let _ = axum::serve(TlsListener { listener, acceptor }, router).await;
        });
        Served {
            addr,
            ca_pem: Some(ca.cert_pem.clone()),
            task,
        }
    }

    /// The address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:<port>` or `https://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        let scheme = if self.ca_pem.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://127.0.0.1:{}", self.addr.port())
    }

    /// The PEM of the CA that signed the HTTPS certificate (`None` for plain HTTP).
    pub fn ca_pem(&self) -> Option<&str> {
        self.ca_pem.as_deref()
    }
}

/// A certificate authority for test servers, made with rcgen: its certificate is what clients
/// must trust, its key signs the servers' leaf certificates.
#[derive(Clone, Debug)]
pub struct TestCa {
    /// CA certificate (PEM).
    pub cert_pem: String,
    /// CA key (PEM).
    pub key_pem: String,
}

impl TestCa {
    /// A new CA.
    pub fn generate() -> TestCa {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "esr test CA");
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::CrlSign,
        ];
        let cert = params.self_signed(&key).unwrap();
        TestCa {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }

    /// Writes `ca.pem` and `ca.key` into `dir`.
    pub fn write(&self, dir: &Path) {
        std::fs::write(dir.join("ca.pem"), &self.cert_pem).unwrap();
        std::fs::write(dir.join("ca.key"), &self.key_pem).unwrap();
    }

    /// Reads what [`TestCa::write`] wrote.
    pub fn read(dir: &Path) -> TestCa {
        TestCa {
            cert_pem: std::fs::read_to_string(dir.join("ca.pem")).unwrap(),
            key_pem: std::fs::read_to_string(dir.join("ca.key")).unwrap(),
        }
    }

    /// A TLS acceptor (HTTP/1.1 by ALPN) with a fresh leaf certificate for `localhost` and
    /// `127.0.0.1`, signed by this CA.
    pub fn acceptor(&self) -> TlsAcceptor {
        let ca_key = rcgen::KeyPair::from_pem(&self.key_pem).unwrap();
        let issuer = rcgen::Issuer::from_ca_cert_pem(&self.cert_pem, ca_key).unwrap();
        let leaf_key = rcgen::KeyPair::generate().unwrap();
        let leaf =
            rcgen::CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
                .unwrap()
                .signed_by(&leaf_key, &issuer)
                .unwrap();
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![leaf.der().clone()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(
                    rustls::pki_types::PrivatePkcs8KeyDer::from(leaf_key.serialize_der()),
                ),
            )
            .unwrap();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        TlsAcceptor::from(Arc::new(config))
    }
}

struct TlsListener {
    listener: TcpListener,
    acceptor: TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((tcp, addr)) = self.listener.accept().await else {
                continue;
            };
            if let Ok(tls) = self.acceptor.accept(tcp).await {
                return (tls, addr);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.listener.local_addr()
    }
}

/// One request the [`SecretService`] received.
#[derive(Clone, Debug)]
pub struct Recorded {
    /// `GET`, `POST`, ...
    pub method: String,
    /// Path and query, as sent.
    pub path_and_query: String,
    /// Headers (lower-case names; the last value of repeated headers).
    pub headers: BTreeMap<String, String>,
    /// The body, lossily decoded.
    pub body: String,
}

#[derive(Default)]
struct State {
    token: Option<String>,
    docs: BTreeMap<String, Value>,
    requests: Vec<Recorded>,
    generated: u64,
}

/// A fake secret service (see the crate docs), served by [`SecretService::start_http`] or
/// [`SecretService::start_https`].
#[derive(Clone, Default)]
pub struct SecretService {
    state: Arc<Mutex<State>>,
}

impl SecretService {
    /// A service that requires `Authorization: Bearer <token>` when `token` is set.
    pub fn new(token: Option<&str>) -> SecretService {
        let s = SecretService::default();
        s.state.lock().unwrap().token = token.map(str::to_string);
        s
    }

    /// Stores a document under `key`.
    pub fn put(&self, key: &str, doc: Value) {
        self.state.lock().unwrap().docs.insert(key.to_string(), doc);
    }

    /// The document under `key`.
    pub fn get(&self, key: &str) -> Option<Value> {
        self.state.lock().unwrap().docs.get(key).cloned()
    }

    /// The requests received so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.state.lock().unwrap().requests.clone()
    }

    /// The router.
    pub fn router(&self) -> axum::Router {
        let state = self.state.clone();
        axum::Router::new().fallback(
            move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
                let state = state.clone();
                async move { handle(&state, method, uri, headers, body).await }
            },
        )
    }

    /// Serves the service over HTTP.
    pub async fn start_http(&self) -> Served {
        Served::http(self.router()).await
    }

    /// Serves the service over HTTPS.
    pub async fn start_https(&self) -> Served {
        Served::https(self.router()).await
    }
}

fn json_response(status: StatusCode, v: &Value) -> Response {
    (
        status,
        [("content-type", "application/json")],
        Body::from(v.to_string()),
    )
        .into_response()
}

async fn handle(
    state: &Mutex<State>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let rec = Recorded {
        method: method.to_string(),
        path_and_query: uri
            .path_and_query()
            .map(|p| p.as_str().to_string())
            .unwrap_or_default(),
        headers: headers
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_string(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body: String::from_utf8_lossy(&body).into_owned(),
    };
    let path = uri.path().to_string();
    state.lock().unwrap().requests.push(rec);
    if path == "/hang" {
        std::future::pending::<()>().await;
    }
    let mut st = state.lock().unwrap();
    if let Some(token) = &st.token {
        let want = format!("Bearer {token}");
        if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(want.as_str()) {
            return json_response(StatusCode::UNAUTHORIZED, &json!({"error": "unauthorized"}));
        }
    }
    if path == "/garbage" {
        return (StatusCode::OK, "<html>this is not JSON</html>").into_response();
    }
    if let Some(code) = path.strip_prefix("/status/") {
        let code = code.parse().unwrap_or(500);
        return StatusCode::from_u16(code)
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
            .into_response();
    }
    if path == "/generate" {
        st.generated += 1;
        let n = st.generated;
        return json_response(
            StatusCode::OK,
            &json!({"credentials": {"username": "gen-user", "password": format!("gen-{n}")}}),
        );
    }
    let Some(key) = path.strip_prefix("/secrets/") else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let key = key.to_string();
    match method {
        Method::GET => {
            let version = uri
                .query()
                .and_then(|q| {
                    q.split('&')
                        .find_map(|kv| kv.strip_prefix("version=").map(str::to_string))
                })
                .unwrap_or_default();
            match st.docs.get(&key) {
                Some(doc) => json_response(
                    StatusCode::OK,
                    &json!({"key": key, "version": version, "data": doc}),
                ),
                None => json_response(StatusCode::NOT_FOUND, &json!({"error": "not found"})),
            }
        }
        Method::PUT | Method::POST => {
            let doc = serde_json::from_slice(&body)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()));
            st.docs.insert(key, doc);
            StatusCode::NO_CONTENT.into_response()
        }
        Method::DELETE => match st.docs.remove(&key) {
            Some(_) => StatusCode::NO_CONTENT.into_response(),
            None => StatusCode::NOT_FOUND.into_response(),
        },
        _ => StatusCode::METHOD_NOT_ALLOWED.into_response(),
    }
}
