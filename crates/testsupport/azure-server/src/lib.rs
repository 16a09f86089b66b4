//! esr-test-azure-server: an HTTPS fake of Azure Key Vault's data plane and of the Entra v2 token
//! endpoint, for esr-provider-azure's tests and the e2e suite (test support, `publish = false`;
//! never a dependency of esr). The binary `esr-azure-kv-test-server` runs it as a process.
//!
//! It follows Microsoft's published REST API (api-version 2025-07-01): the bearer challenge
//! (401 + `WWW-Authenticate: Bearer authorization=".../<tenant>", resource="https://vault.azure.net"`),
//! `GET /secrets/{name}/{version?}`, `GET /secrets` and `/secrets/{name}/versions` with `nextLink`
//! paging, `PUT`/`DELETE /secrets/{name}`, `GET`/`PUT`/`DELETE /keys/{name}`,
//! `GET /certificates/{name}/{version?}`, `POST /certificates/{name}/import`,
//! `DELETE /certificates/{name}`, errors as `{"error":{"code":..,"message":..}}`; and
//! `POST /{tenant}/oauth2/v2.0/token` checking the client-credentials grant with a client secret
//! or a client assertion (workload identity).
//!
//! It serves through `esr_test_http_server` (`Served::https_with`): a fresh test CA signs a
//! `localhost`/`127.0.0.1` leaf; [`KvServer::ca_pem`] is what the client must trust.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use esr_test_http_server::{Served, TestCa};
use serde_json::{Value, json};

/// The Key Vault resource the challenge names.
pub const RESOURCE: &str = "https://vault.azure.net";

/// One version of a secret.
#[derive(Clone, Debug)]
pub struct SecretVersion {
    /// Version id.
    pub version: String,
    /// Value.
    pub value: String,
    /// Tags.
    pub tags: BTreeMap<String, String>,
    /// Enabled attribute.
    pub enabled: bool,
    /// Expiry (unix seconds).
    pub exp: Option<i64>,
}

/// One version of a key (public JWK only, as Key Vault returns it).
#[derive(Clone, Debug)]
pub struct KeyVersion {
    /// Version id.
    pub version: String,
    /// JWK without private parts.
    pub jwk: Value,
    /// Tags.
    pub tags: BTreeMap<String, String>,
}

/// One version of a certificate.
#[derive(Clone, Debug)]
pub struct CertVersion {
    /// Version id.
    pub version: String,
    /// DER bytes.
    pub cer: Vec<u8>,
    /// Tags.
    pub tags: BTreeMap<String, String>,
}

/// Server state, shared with the test.
#[derive(Debug, Default)]
pub struct State {
    /// Accepted tenant.
    pub tenant: String,
    /// Accepted client id.
    pub client_id: String,
    /// Accepted client secret (client-credentials grant).
    pub client_secret: Option<String>,
    /// Accepted client assertion (workload identity: the ServiceAccount token).
    pub client_assertion: Option<String>,
    /// Accepted ServiceAccount for JWT assertions (`system:serviceaccount:<ns>:<name>`): the
    /// assertion must be a JWT with this `sub` and `aud` containing `api://AzureADTokenExchange`.
    pub assertion_subject: Option<String>,
    /// Accepted certificate credential: PEM public key; the assertion must be an RS256 JWT signed
    /// with its private key, with `x5t`, `iss` = `sub` = client id and `aud` = this token endpoint.
    pub cert_public_pem: Option<String>,
    /// Tokens issued by the token endpoint.
    pub issued: BTreeSet<String>,
    /// Secrets by name, versions oldest first.
    pub secrets: BTreeMap<String, Vec<SecretVersion>>,
    /// Keys by name.
    pub keys: BTreeMap<String, Vec<KeyVersion>>,
    /// Certificates by name.
    pub certs: BTreeMap<String, Vec<CertVersion>>,
    /// Page size of list calls.
    pub page_size: usize,
    /// When true, every vault call answers 403 (the identity has no data-plane role).
    pub forbid_all: bool,
    /// Fault mode: every vault call answers HTTP 200 with this raw body (a proxy or a
    /// misrouted request answering garbage).
    pub garbage_200: Option<String>,
    /// Request log: `METHOD path` (no query), vault and token calls.
    pub log: Vec<String>,
    /// Scopes requested at the token endpoint.
    pub scopes: Vec<String>,
    /// Grant flavours seen at the token endpoint: `secret` or `assertion`.
    pub grants: Vec<String>,
    counter: u64,
}

impl State {
    fn next_version(&mut self) -> String {
        self.counter += 1;
        format!("{:032x}", self.counter)
    }

    /// Adds a secret version (returns its version id).
    pub fn put_secret(&mut self, name: &str, value: &str, tags: &[(&str, &str)]) -> String {
        let version = self.next_version();
        self.secrets
            .entry(name.to_string())
            .or_default()
            .push(SecretVersion {
                version: version.clone(),
                value: value.to_string(),
                tags: tags
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                enabled: true,
                exp: None,
            });
        version
    }

    /// Adds a key version.
    pub fn put_key(&mut self, name: &str, jwk: Value, tags: &[(&str, &str)]) -> String {
        let version = self.next_version();
        self.keys
            .entry(name.to_string())
            .or_default()
            .push(KeyVersion {
                version: version.clone(),
                jwk: public_jwk(jwk),
                tags: tags
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            });
        version
    }

    /// Adds a certificate version.
    pub fn put_cert(&mut self, name: &str, der: Vec<u8>, tags: &[(&str, &str)]) -> String {
        let version = self.next_version();
        self.certs
            .entry(name.to_string())
            .or_default()
            .push(CertVersion {
                version: version.clone(),
                cer: der,
                tags: tags
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            });
        version
    }

    /// How many requests matched `prefix` (e.g. `GET /secrets`).
    pub fn count(&self, prefix: &str) -> usize {
        self.log.iter().filter(|l| l.starts_with(prefix)).count()
    }
}

fn public_jwk(mut jwk: Value) -> Value {
    if let Some(o) = jwk.as_object_mut() {
        for f in ["d", "p", "q", "dp", "dq", "qi", "k"] {
            o.remove(f);
        }
    }
    jwk
}

/// The running server.
pub struct KvServer {
    /// Bound address.
    pub addr: SocketAddr,
    /// PEM of the CA that signed the server certificate.
    pub ca_pem: String,
    /// Shared state.
    pub state: Arc<Mutex<State>>,
    /// The HTTPS server; stopped on drop.
    _served: Served,
}

impl KvServer {
    /// Starts a server on 127.0.0.1 with the given tenant and client id.
    pub async fn start(tenant: &str, client_id: &str) -> KvServer {
        let ca = TestCa::generate();
        let state = Arc::new(Mutex::new(State {
            tenant: tenant.to_string(),
            client_id: client_id.to_string(),
            page_size: 25,
            ..Default::default()
        }));
        let app_state = state.clone();
        let served = Served::https_with(&ca, |addr| {
            axum::Router::new().fallback(move |req: Request<Body>| {
                let st = app_state.clone();
                async move { handle(st, addr, req).await }
            })
        })
        .await;
        KvServer {
            addr: served.addr(),
            ca_pem: ca.cert_pem,
            state,
            _served: served,
        }
    }

    /// `https://127.0.0.1:<port>`: both the vault URL and the authority host.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.addr.port())
    }

    /// Locks the state.
    pub fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap()
    }
}

fn kv_error(status: StatusCode, code: &str, message: &str) -> Response {
    (
        status,
        [("content-type", "application/json")],
        json!({"error": {"code": code, "message": message}}).to_string(),
    )
        .into_response()
}

fn ok_json(v: Value) -> Response {
    (
        StatusCode::OK,
        [("content-type", "application/json")],
        v.to_string(),
    )
        .into_response()
}

fn query_param(uri: &Uri, name: &str) -> Option<String> {
    uri.query()?.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (decode(k) == name).then(|| decode(v))
    })
}

fn form(body: &[u8]) -> BTreeMap<String, String> {
    let text = String::from_utf8_lossy(body);
    text.split('&')
        .filter_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            Some((decode(k), decode(v)))
        })
        .collect()
}

fn decode(s: &str) -> String {
    let s = s.replace('+', " ");
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Ok(b) = u8::from_str_radix(&s[i + 1..i + 3], 16)
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

fn now() -> i64 {
    1_700_000_000
}

async fn handle(st: Arc<Mutex<State>>, addr: SocketAddr, req: Request<Body>) -> Response {
    let (parts, body) = req.into_parts();
    let body = axum::body::to_bytes(body, 1 << 20)
        .await
        .unwrap_or_default();
    let path = parts.uri.path().to_string();
    let method = parts.method.clone();
    st.lock().unwrap().log.push(format!("{method} {path}"));
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let base = format!("https://127.0.0.1:{}", addr.port());

    if segs.len() == 4 && segs[1] == "oauth2" && segs[2] == "v2.0" && segs[3] == "token" {
        return token(&st, segs[0], &form(&body));
    }
    if let Some(resp) = check_auth(&st, &parts.headers) {
        return resp;
    }
    if st.lock().unwrap().forbid_all {
        return kv_error(
            StatusCode::FORBIDDEN,
            "Forbidden",
            "Caller is not authorized to perform action on resource. Action: 'Microsoft.KeyVault/vaults/secrets/getSecret/action'",
        );
    }
    if let Some(body) = st.lock().unwrap().garbage_200.clone() {
        return (StatusCode::OK, [("content-type", "application/json")], body).into_response();
    }
    let mut s = st.lock().unwrap();
    match (&method, segs.as_slice()) {
        (&Method::GET, ["secrets"]) => {
            let items: Vec<Value> = s
                .secrets
                .iter()
                .filter_map(|(name, versions)| {
                    let v = versions.last()?;
                    Some(json!({
                        "id": format!("{base}/secrets/{name}"),
                        "attributes": attrs(v.enabled, v.exp),
                        "tags": v.tags,
                    }))
                })
                .collect();
            page(&s, &parts.uri, &base, "/secrets", items)
        }
        (&Method::GET, ["secrets", name, "versions"]) => {
            let Some(versions) = s.secrets.get(*name) else {
                return secret_not_found(name);
            };
            let items: Vec<Value> = versions
                .iter()
                .map(|v| {
                    json!({
                        "id": format!("{base}/secrets/{name}/{}", v.version),
                        "attributes": attrs(v.enabled, v.exp),
                        "tags": v.tags,
                    })
                })
                .collect();
            page(
                &s,
                &parts.uri,
                &base,
                &format!("/secrets/{name}/versions"),
                items,
            )
        }
        (&Method::GET, ["secrets", name] | ["secrets", name, ""]) => {
            get_secret(&s, &base, name, None)
        }
        (&Method::GET, ["secrets", name, version]) => get_secret(&s, &base, name, Some(version)),
        (&Method::PUT, ["secrets", name]) => {
            let Ok(req) = serde_json::from_slice::<Value>(&body) else {
                return kv_error(StatusCode::BAD_REQUEST, "BadParameter", "invalid JSON body");
            };
            let Some(value) = req.get("value").and_then(|v| v.as_str()) else {
                return kv_error(StatusCode::BAD_REQUEST, "BadParameter", "value is required");
            };
            let tags: BTreeMap<String, String> = req
                .get("tags")
                .and_then(|t| serde_json::from_value(t.clone()).ok())
                .unwrap_or_default();
            let attributes = req.get("attributes");
            let enabled = attributes
                .and_then(|a| a.get("enabled"))
                .and_then(|e| e.as_bool())
                .unwrap_or(true);
            let exp = attributes
                .and_then(|a| a.get("exp"))
                .and_then(|e| e.as_i64());
            let version = s.next_version();
            s.secrets
                .entry(name.to_string())
                .or_default()
                .push(SecretVersion {
                    version,
                    value: value.to_string(),
                    tags,
                    enabled,
                    exp,
                });
            get_secret(&s, &base, name, None)
        }
        (&Method::DELETE, ["secrets", name]) => match s.secrets.remove(*name) {
            Some(v) => {
                let last = v.last().cloned();
                ok_json(json!({
                    "id": format!("{base}/secrets/{name}"),
                    "recoveryId": format!("{base}/deletedsecrets/{name}"),
                    "tags": last.map(|l| l.tags).unwrap_or_default(),
                }))
            }
            None => secret_not_found(name),
        },
        (&Method::GET, ["keys", name] | ["keys", name, ""]) => get_key(&s, &base, name, None),
        (&Method::GET, ["keys", name, version]) => get_key(&s, &base, name, Some(version)),
        (&Method::PUT, ["keys", name]) => {
            let Ok(req) = serde_json::from_slice::<Value>(&body) else {
                return kv_error(StatusCode::BAD_REQUEST, "BadParameter", "invalid JSON body");
            };
            let Some(jwk) = req.get("key").cloned() else {
                return kv_error(StatusCode::BAD_REQUEST, "BadParameter", "key is required");
            };
            let tags: BTreeMap<String, String> = req
                .get("tags")
                .and_then(|t| serde_json::from_value(t.clone()).ok())
                .unwrap_or_default();
            let version = s.next_version();
            s.keys
                .entry(name.to_string())
                .or_default()
                .push(KeyVersion {
                    version,
                    jwk: public_jwk(jwk),
                    tags,
                });
            get_key(&s, &base, name, None)
        }
        (&Method::DELETE, ["keys", name]) => match s.keys.remove(*name) {
            Some(_) => ok_json(json!({"recoveryId": format!("{base}/deletedkeys/{name}")})),
            None => kv_error(
                StatusCode::NOT_FOUND,
                "KeyNotFound",
                &format!("A key with (name/id) {name} was not found in this key vault."),
            ),
        },
        (&Method::GET, ["certificates", name] | ["certificates", name, ""]) => {
            get_cert(&s, &base, name, None)
        }
        (&Method::POST, ["certificates", name, "import"]) => {
            let Ok(req) = serde_json::from_slice::<Value>(&body) else {
                return kv_error(StatusCode::BAD_REQUEST, "BadParameter", "invalid JSON body");
            };
            let raw = req
                .get("value")
                .and_then(|v| v.as_str())
                .and_then(|v| base64::engine::general_purpose::STANDARD.decode(v).ok());
            let Some(raw) = raw else {
                return kv_error(
                    StatusCode::BAD_REQUEST,
                    "BadParameter",
                    "The specified certificate is not valid base64",
                );
            };
            // PEM → DER of the first CERTIFICATE block; otherwise the bytes as given.
            let der = pem::parse_many(&raw)
                .ok()
                .and_then(|b| b.into_iter().find(|b| b.tag() == "CERTIFICATE"))
                .map(|b| b.contents().to_vec())
                .unwrap_or(raw);
            let tags: BTreeMap<String, String> = req
                .get("tags")
                .and_then(|t| serde_json::from_value(t.clone()).ok())
                .unwrap_or_default();
            let version = s.next_version();
            s.certs
                .entry(name.to_string())
                .or_default()
                .push(CertVersion {
                    version,
                    cer: der,
                    tags,
                });
            get_cert(&s, &base, name, None)
        }
        (&Method::GET, ["certificates", name, version]) => get_cert(&s, &base, name, Some(version)),
        (&Method::DELETE, ["certificates", name]) => match s.certs.remove(*name) {
            Some(_) => ok_json(json!({"recoveryId": format!("{base}/deletedcertificates/{name}")})),
            None => kv_error(
                StatusCode::NOT_FOUND,
                "CertificateNotFound",
                &format!("A certificate with (name/id) {name} was not found in this key vault."),
            ),
        },
        _ => kv_error(
            StatusCode::BAD_REQUEST,
            "BadParameter",
            &format!("unsupported request {method} {path}"),
        ),
    }
}

fn attrs(enabled: bool, exp: Option<i64>) -> Value {
    let mut a = json!({"enabled": enabled, "created": now(), "updated": now(),
                       "recoveryLevel": "Recoverable+Purgeable", "recoverableDays": 90});
    if let (Some(exp), Some(o)) = (exp, a.as_object_mut()) {
        o.insert("exp".into(), exp.into());
    }
    a
}

fn page(s: &State, uri: &Uri, base: &str, path: &str, items: Vec<Value>) -> Response {
    let skip: usize = query_param(uri, "$skiptoken")
        .and_then(|t| t.parse().ok())
        .unwrap_or(0);
    let size = s.page_size.max(1);
    let chunk: Vec<Value> = items.iter().skip(skip).take(size).cloned().collect();
    let next = if skip + size < items.len() {
        Value::String(format!(
            "{base}{path}?api-version=2025-07-01&$skiptoken={}&maxresults={size}",
            skip + size
        ))
    } else {
        Value::Null
    };
    ok_json(json!({"value": chunk, "nextLink": next}))
}

fn secret_not_found(name: &str) -> Response {
    kv_error(
        StatusCode::NOT_FOUND,
        "SecretNotFound",
        &format!(
            "A secret with (name/id) {name} was not found in this key vault. If you recently deleted this secret you may be able to recover it using the correct recovery command. For help resolving this issue, please see https://go.microsoft.com/fwlink/?linkid=2125182"
        ),
    )
}

fn get_secret(s: &State, base: &str, name: &str, version: Option<&str>) -> Response {
    let Some(versions) = s.secrets.get(name) else {
        return secret_not_found(name);
    };
    let v = match version {
        None => versions.last(),
        Some(ver) => versions.iter().find(|v| v.version == ver),
    };
    let Some(v) = v else {
        return kv_error(
            StatusCode::NOT_FOUND,
            "SecretNotFound",
            &format!(
                "A secret with (name/id) {name}/{} was not found in this key vault.",
                version.unwrap_or("")
            ),
        );
    };
    if !v.enabled {
        return kv_error(
            StatusCode::FORBIDDEN,
            "Forbidden",
            "Operation get is not allowed on a disabled secret.",
        );
    }
    ok_json(json!({
        "value": v.value,
        "id": format!("{base}/secrets/{name}/{}", v.version),
        "attributes": attrs(v.enabled, v.exp),
        "tags": v.tags,
    }))
}

fn get_key(s: &State, base: &str, name: &str, version: Option<&str>) -> Response {
    let v = s.keys.get(name).and_then(|vs| match version {
        None => vs.last(),
        Some(ver) => vs.iter().find(|v| v.version == ver),
    });
    let Some(v) = v else {
        return kv_error(
            StatusCode::NOT_FOUND,
            "KeyNotFound",
            &format!("A key with (name/id) {name} was not found in this key vault."),
        );
    };
    let mut jwk = v.jwk.clone();
    if let Some(o) = jwk.as_object_mut() {
        o.insert(
            "kid".into(),
            format!("{base}/keys/{name}/{}", v.version).into(),
        );
    }
    ok_json(json!({"key": jwk, "attributes": attrs(true, None), "tags": v.tags}))
}

fn get_cert(s: &State, base: &str, name: &str, version: Option<&str>) -> Response {
    let v = s.certs.get(name).and_then(|vs| match version {
        None => vs.last(),
        Some(ver) => vs.iter().find(|v| v.version == ver),
    });
    let Some(v) = v else {
        return kv_error(
            StatusCode::NOT_FOUND,
            "CertificateNotFound",
            &format!("A certificate with (name/id) {name} was not found in this key vault."),
        );
    };
    ok_json(json!({
        "id": format!("{base}/certificates/{name}/{}", v.version),
        "cer": base64::engine::general_purpose::STANDARD.encode(&v.cer),
        "attributes": attrs(true, None),
        "tags": v.tags,
    }))
}

fn check_auth(st: &Arc<Mutex<State>>, headers: &HeaderMap) -> Option<Response> {
    let s = st.lock().unwrap();
    let token = headers
        .get("authorization")
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.strip_prefix("Bearer "));
    match token {
        Some(t) if s.issued.contains(t) => None,
        _ => {
            let challenge = format!(
                "Bearer authorization=\"https://login.microsoftonline.com/{}\", resource=\"{RESOURCE}\"",
                s.tenant
            );
            let mut r = kv_error(
                StatusCode::UNAUTHORIZED,
                "Unauthorized",
                "AKV10000: Request is missing a Bearer or PoP token.",
            );
            r.headers_mut()
                .insert("www-authenticate", challenge.parse().unwrap());
            Some(r)
        }
    }
}

fn entra_error(status: StatusCode, error: &str, code: i64, description: &str) -> Response {
    (
        status,
        [("content-type", "application/json")],
        json!({
            "error": error,
            "error_description": description,
            "error_codes": [code],
            "timestamp": "2026-11-22 00:00:00Z",
            "trace_id": "00000000-0000-0000-0000-000000000000",
            "correlation_id": "00000000-0000-0000-0000-000000000000",
        })
        .to_string(),
    )
        .into_response()
}

fn token(st: &Arc<Mutex<State>>, tenant: &str, f: &BTreeMap<String, String>) -> Response {
    let mut s = st.lock().unwrap();
    if tenant != s.tenant {
        return entra_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            90002,
            &format!("AADSTS90002: Tenant '{tenant}' not found."),
        );
    }
    if f.get("grant_type").map(String::as_str) != Some("client_credentials") {
        return entra_error(
            StatusCode::BAD_REQUEST,
            "unsupported_grant_type",
            70003,
            "AADSTS70003: The app requested an unsupported grant type.",
        );
    }
    if f.get("client_id") != Some(&s.client_id) {
        return entra_error(
            StatusCode::BAD_REQUEST,
            "unauthorized_client",
            700016,
            "AADSTS700016: Application not found in the directory.",
        );
    }
    let scope = f.get("scope").cloned().unwrap_or_default();
    if scope != format!("{RESOURCE}/.default") {
        return entra_error(
            StatusCode::BAD_REQUEST,
            "invalid_scope",
            70011,
            "AADSTS70011: The provided value for the input parameter 'scope' is not valid.",
        );
    }
    let grant = match (f.get("client_secret"), f.get("client_assertion")) {
        (Some(secret), None) if Some(secret) == s.client_secret.as_ref() => "secret",
        (None, Some(assertion))
            if f.get("client_assertion_type").map(String::as_str)
                == Some("urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
                && assertion_ok(&s, assertion) =>
        {
            "assertion"
        }
        (Some(_), None) => {
            return entra_error(
                StatusCode::UNAUTHORIZED,
                "invalid_client",
                7000215,
                "AADSTS7000215: Invalid client secret provided.",
            );
        }
        _ => {
            return entra_error(
                StatusCode::BAD_REQUEST,
                "invalid_client",
                700024,
                "AADSTS700024: Client assertion is not within its valid time range or does not match.",
            );
        }
    };
    s.scopes.push(scope);
    s.grants.push(grant.to_string());
    let tok = format!("tok-{}", s.next_version());
    s.issued.insert(tok.clone());
    ok_json(json!({
        "token_type": "Bearer",
        "expires_in": 3599,
        "ext_expires_in": 3599,
        "access_token": tok,
    }))
}

fn assertion_ok(s: &State, assertion: &str) -> bool {
    if let Some(public) = &s.cert_public_pem {
        let Ok(key) = jsonwebtoken::DecodingKey::from_rsa_pem(public.as_bytes()) else {
            return false;
        };
        let mut v = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::RS256);
        v.validate_aud = false;
        let Ok(data) = jsonwebtoken::decode::<Value>(assertion, &key, &v) else {
            return false;
        };
        let c = &data.claims;
        return data.header.x5t.is_some()
            && c["iss"] == s.client_id.as_str()
            && c["sub"] == s.client_id.as_str()
            && c["aud"]
                .as_str()
                .is_some_and(|a| a.ends_with(&format!("/{}/oauth2/v2.0/token", s.tenant)));
    }
    if let Some(exact) = &s.client_assertion {
        return assertion == exact;
    }
    let Some(subject) = &s.assertion_subject else {
        return false;
    };
    let Some(payload) = assertion.split('.').nth(1) else {
        return false;
    };
    let Ok(bytes) =
        base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload.trim_end_matches('='))
    else {
        return false;
    };
    let Ok(claims) = serde_json::from_slice::<Value>(&bytes) else {
        return false;
    };
    let aud_ok = match &claims["aud"] {
        Value::String(a) => a == "api://AzureADTokenExchange",
        Value::Array(a) => a.iter().any(|x| x == "api://AzureADTokenExchange"),
        _ => false,
    };
    aud_ok && claims["sub"].as_str() == Some(subject.as_str())
}
