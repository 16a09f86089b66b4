//! A test-only HTTPS fake of Google Cloud Secret Manager and of Google's token flows, for the
//! `gcpsm` provider's tests and e2e (never compiled into esr).
//!
//! It follows Google's published REST API (v1), which is the transport the official Rust client
//! uses (HTTP/1.1 + JSON, `$alt=json;enum-encoding=int`):
//! * `GET {parent}/secrets` (`filter` with `labels.K=V` and `name:S` terms, `pageSize`,
//!   `pageToken`/`nextPageToken`), `POST {parent}/secrets?secretId=`, `GET|PATCH|DELETE
//!   {secret}` (`updateMask`, `etag`), `POST {secret}:addVersion`, `GET {secret}/versions`
//!   (`filter=state:ENABLED`), `GET {version}`, `GET {version}:access` (with `latest`), where
//!   `{parent}` is `/v1/projects/P` or `/v1/projects/P/locations/L`; names in answers carry the
//!   project number; payloads are base64 with `dataCrc32c`; version states are ints
//!   (1 ENABLED, 2 DISABLED, 3 DESTROYED);
//! * errors as `{"error":{"code":..,"message":..,"status":"NOT_FOUND"}}` (`NOT_FOUND`,
//!   `ALREADY_EXISTS`, `FAILED_PRECONDITION` for a disabled/destroyed version, `UNAUTHENTICATED`,
//!   `PERMISSION_DENIED`, `ABORTED` for a stale etag);
//! * bearer tokens: a service account's self-signed JWT (RS256 with its key, `iss` = `sub` = the
//!   client email, the `cloud-platform` scope) or a token this server issued;
//! * `POST /v1/token`: STS token exchange (RFC 8693, form-encoded): the subject token must be a
//!   JWT whose `sub` is an accepted Kubernetes ServiceAccount and whose `aud` contains the
//!   accepted audience; the STS `audience` must be the accepted one.
//!
//! It serves through `esr_test_http_server` (`Served::https_with`): a [`TestCa`] signs a
//! `localhost`/`127.0.0.1` leaf (ALPN `http/1.1`). The official client trusts
//! the system roots only, which `SSL_CERT_FILE` replaces: [`trusting_process`] runs a test in a
//! child process whose `SSL_CERT_FILE` is the test CA.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use esr_test_http_server::Served;
use serde_json::{Value, json};

/// The test CA (shared with the other test servers).
pub use esr_test_http_server::TestCa;

/// The project number names in answers carry.
pub const PROJECT_NUMBER: &str = "123456789012";
/// The scope every token must carry.
pub const CLOUD_PLATFORM_SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";
/// Env var of the child process: the directory holding the test CA (`ca.pem`, `ca.key`).
pub const ENV_CA_DIR: &str = "ESR_TEST_GCP_CA_DIR";

/// Version states (the API's enum values).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VersionState {
    /// 1.
    Enabled = 1,
    /// 2.
    Disabled = 2,
    /// 3.
    Destroyed = 3,
}

impl VersionState {
    fn name(self) -> &'static str {
        match self {
            VersionState::Enabled => "ENABLED",
            VersionState::Disabled => "DISABLED",
            VersionState::Destroyed => "DESTROYED",
        }
    }
}

/// One version.
#[derive(Clone, Debug)]
pub struct Version {
    /// Version number (1, 2, ...).
    pub id: u64,
    /// Payload.
    pub data: Vec<u8>,
    /// State.
    pub state: VersionState,
    /// Creation time (unix seconds).
    pub created: i64,
}

/// One secret.
#[derive(Clone, Debug, Default)]
pub struct SecretEntry {
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Annotations.
    pub annotations: BTreeMap<String, String>,
    /// Replication as sent at creation.
    pub replication: Value,
    /// Topics as sent at creation.
    pub topics: Value,
    /// Versions, oldest first.
    pub versions: Vec<Version>,
    /// Etag generation.
    pub etag: u64,
}

/// Server state, shared with the test.
#[derive(Debug, Default)]
pub struct State {
    /// The project (ID) the store names; requests may also use [`PROJECT_NUMBER`].
    pub project: String,
    /// Secrets by `(location or "", short name)`.
    pub secrets: BTreeMap<(String, String), SecretEntry>,
    /// Service accounts allowed to sign their own tokens: email → public key (PEM).
    pub service_accounts: BTreeMap<String, String>,
    /// STS: the accepted audience.
    pub sts_audience: Option<String>,
    /// STS: accepted Kubernetes subjects (`system:serviceaccount:<ns>:<name>`; one `*` matches
    /// any run of characters, e.g. a generated namespace).
    pub sts_subjects: BTreeSet<String>,
    /// STS: an audience the subject token's `aud` must contain.
    pub sts_subject_audience: Option<String>,
    /// Tokens issued by STS, with their subject.
    pub issued: BTreeMap<String, String>,
    /// Principals (client email or ServiceAccount subject) answered with PERMISSION_DENIED.
    pub denied: BTreeSet<String>,
    /// Page size of list calls (default 2, to exercise paging).
    pub page_size: usize,
    /// Fault mode: every Secret Manager call answers HTTP 200 with this raw body.
    pub garbage_200: Option<String>,
    /// Fault mode: every Secret Manager call answers a bare 404 (no Google error body).
    pub bare_404: bool,
    /// Request log: `METHOD path` (no query) of every call, and `STS <subject>`.
    pub log: Vec<String>,
    /// Principals seen on Secret Manager calls, in order.
    pub principals: Vec<String>,
    /// STS requests (form fields, subject token removed).
    pub sts_requests: Vec<BTreeMap<String, String>>,
    clock: i64,
    counter: u64,
}

impl State {
    fn tick(&mut self) -> i64 {
        self.clock += 1;
        1_700_000_000 + self.clock
    }

    /// Adds a version to a global secret, creating the secret (with `labels`) if needed; returns
    /// the version number.
    pub fn put(&mut self, name: &str, data: &[u8], labels: &[(&str, &str)]) -> u64 {
        self.put_in("", name, data, labels)
    }

    /// [`State::put`] for a regional secret in `location`.
    pub fn put_in(
        &mut self,
        location: &str,
        name: &str,
        data: &[u8],
        labels: &[(&str, &str)],
    ) -> u64 {
        let created = self.tick();
        let e = self
            .secrets
            .entry((location.to_string(), name.to_string()))
            .or_insert_with(|| SecretEntry {
                replication: json!({"automatic": {}}),
                etag: 1,
                ..Default::default()
            });
        for (k, v) in labels {
            e.labels.insert(k.to_string(), v.to_string());
        }
        let id = e.versions.len() as u64 + 1;
        e.versions.push(Version {
            id,
            data: data.to_vec(),
            state: VersionState::Enabled,
            created,
        });
        id
    }

    /// Sets the state of a version of a global secret.
    pub fn set_state(&mut self, name: &str, id: u64, state: VersionState) {
        let e = self
            .secrets
            .get_mut(&(String::new(), name.to_string()))
            .unwrap();
        e.versions.iter_mut().find(|v| v.id == id).unwrap().state = state;
    }

    /// A global secret.
    pub fn secret(&self, name: &str) -> Option<&SecretEntry> {
        self.secrets.get(&(String::new(), name.to_string()))
    }

    /// The newest payload of a global secret.
    pub fn latest(&self, name: &str) -> Option<Vec<u8>> {
        self.secret(name)?.versions.last().map(|v| v.data.clone())
    }

    /// How many log lines start with `prefix` (e.g. `GET /v1/projects/p/secrets`).
    pub fn count(&self, prefix: &str) -> usize {
        self.log.iter().filter(|l| l.starts_with(prefix)).count()
    }

    /// Registers a service account and returns its key file (JSON), as Google issues them.
    pub fn add_service_account(&mut self, email: &str) -> String {
        let key =
            rcgen::KeyPair::generate_rsa_for(&rcgen::PKCS_RSA_SHA256, rcgen::RsaKeySize::_2048)
                .unwrap();
        self.counter += 1;
        let key_id = format!("{:040x}", self.counter);
        self.service_accounts
            .insert(email.to_string(), key.public_key_pem());
        json!({
            "type": "service_account",
            "project_id": self.project,
            "private_key_id": key_id,
            "private_key": key.serialize_pem(),
            "client_email": email,
            "client_id": "100000000000000000001",
            "auth_uri": "https://accounts.google.com/o/oauth2/auth",
            "token_uri": "https://oauth2.googleapis.com/token",
            "universe_domain": "googleapis.com",
        })
        .to_string()
    }
}

/// Runs the test `test_name` (its path in the test binary) in a child process that trusts a
/// fresh test CA (`SSL_CERT_FILE`), and returns `None` in the parent once the child passed. In
/// the child it returns the CA, with which [`GcpServer::start`] signs its certificate.
pub fn trusting_process(test_name: &str) -> Option<TestCa> {
    if let Ok(dir) = std::env::var(ENV_CA_DIR) {
        return Some(TestCa::read(Path::new(&dir)));
    }
    let dir = std::env::temp_dir().join(format!(
        "esr-gcp-ca-{}-{}",
        std::process::id(),
        test_name.replace("::", "-")
    ));
    std::fs::create_dir_all(&dir).unwrap();
    TestCa::generate().write(&dir);
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([test_name, "--exact", "--nocapture", "--test-threads", "1"])
        .env("SSL_CERT_FILE", dir.join("ca.pem"))
        .env(ENV_CA_DIR, &dir)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "test {test_name} failed in its child process:\n{stdout}\n{stderr}"
    );
    None
}

/// The running server.
pub struct GcpServer {
    /// Bound address.
    pub addr: SocketAddr,
    /// The CA that signed the server certificate.
    pub ca: TestCa,
    /// Shared state.
    pub state: Arc<Mutex<State>>,
    /// The HTTPS server; stopped on drop.
    _served: Served,
}

impl GcpServer {
    /// Starts a server on 127.0.0.1 for `project`, its certificate signed by `ca`.
    pub async fn start(project: &str, ca: &TestCa) -> GcpServer {
        let state = Arc::new(Mutex::new(State {
            project: project.to_string(),
            page_size: 2,
            ..Default::default()
        }));
        let app_state = state.clone();
        let served = Served::https_with(ca, |_| {
            axum::Router::new().fallback(move |req: Request<Body>| {
                let st = app_state.clone();
                async move { handle(st, req).await }
            })
        })
        .await;
        GcpServer {
            addr: served.addr(),
            ca: ca.clone(),
            state,
            _served: served,
        }
    }

    /// `https://127.0.0.1:<port>`: the Secret Manager endpoint.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.addr.port())
    }

    /// The STS token URL.
    pub fn sts_url(&self) -> String {
        format!("{}/v1/token", self.url())
    }

    /// Locks the state.
    pub fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap()
    }
}

// ------------------------------------------------------------------ helpers

fn google_error(status: StatusCode, code: &str, message: &str) -> Response {
    (
        status,
        [("content-type", "application/json; charset=UTF-8")],
        json!({"error": {"code": status.as_u16(), "message": message, "status": code}}).to_string(),
    )
        .into_response()
}

fn ok_json(v: Value) -> Response {
    (
        StatusCode::OK,
        [("content-type", "application/json; charset=UTF-8")],
        v.to_string(),
    )
        .into_response()
}

fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn query(uri: &Uri) -> BTreeMap<String, String> {
    form(uri.query().unwrap_or("").as_bytes())
}

fn form(body: &[u8]) -> BTreeMap<String, String> {
    String::from_utf8_lossy(body)
        .split('&')
        .filter_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            Some((decode(k), decode(v)))
        })
        .collect()
}

fn b64url_json(part: &str) -> Option<Value> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(part.trim_end_matches('='))
        .ok()?;
    serde_json::from_slice(&bytes).ok()
}

fn aud_contains(claims: &Value, want: &str) -> bool {
    match &claims["aud"] {
        Value::String(a) => a == want,
        Value::Array(a) => a.iter().any(|x| x == want),
        _ => false,
    }
}

/// The principal of a bearer token, or `None` when it is not valid.
fn principal(s: &State, headers: &HeaderMap) -> Option<String> {
    let auth = headers.get("authorization")?.to_str().ok()?;
    let token = auth.strip_prefix("Bearer ")?;
    if let Some(subject) = s.issued.get(token) {
        return Some(subject.clone());
    }
    // A self-signed JWT of a registered service account.
    let header = b64url_json(token.split('.').next()?)?;
    let claims = b64url_json(token.split('.').nth(1)?)?;
    let iss = claims["iss"].as_str()?;
    let public = s.service_accounts.get(iss)?;
    let key = jsonwebtoken::DecodingKey::from_rsa_pem(public.as_bytes()).ok()?;
    let mut v = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::RS256);
    v.validate_aud = false;
    v.set_required_spec_claims(&["exp", "iss", "sub"]);
    let data = jsonwebtoken::decode::<Value>(token, &key, &v).ok()?;
    let c = data.claims;
    let scoped = c["scope"]
        .as_str()
        .is_some_and(|sc| sc.split(' ').any(|x| x == CLOUD_PLATFORM_SCOPE));
    let audienced = c["aud"]
        .as_str()
        .is_some_and(|a| a.starts_with("https://secretmanager.googleapis.com"));
    (header["kid"].is_string() && c["sub"] == iss && (scoped || audienced)).then(|| iss.to_string())
}

// ------------------------------------------------------------------ routing

async fn handle(st: Arc<Mutex<State>>, req: Request<Body>) -> Response {
    let (parts, body) = req.into_parts();
    let body = axum::body::to_bytes(body, 8 << 20)
        .await
        .unwrap_or_default();
    let mut s = st.lock().unwrap();
    let path = parts.uri.path().to_string();
    s.log.push(format!("{} {}", parts.method, path));
    if parts.method == Method::POST && path == "/v1/token" {
        return sts(&mut s, &body);
    }
    if let Some(raw) = s.garbage_200.clone() {
        return (StatusCode::OK, [("content-type", "application/json")], raw).into_response();
    }
    if s.bare_404 {
        return (StatusCode::NOT_FOUND, "404 page not found").into_response();
    }
    let Some(who) = principal(&s, &parts.headers) else {
        return google_error(
            StatusCode::UNAUTHORIZED,
            "UNAUTHENTICATED",
            "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.",
        );
    };
    s.principals.push(who.clone());
    if s.denied.contains(&who) {
        return google_error(
            StatusCode::FORBIDDEN,
            "PERMISSION_DENIED",
            &format!(
                "Permission 'secretmanager.versions.access' denied for resource '{path}' (or it may not exist)."
            ),
        );
    }
    let q = query(&parts.uri);
    secret_manager(&mut s, &parts.method, &path, &q, &body)
}

/// `path` split into (project, location, rest segments after `secrets`).
struct Parsed {
    location: String,
    /// Secret short name (None: the collection).
    secret: Option<String>,
    /// `versions` collection or a version id.
    version: Option<Option<String>>,
    /// The `:verb` suffix.
    verb: Option<String>,
}

#[allow(clippy::result_large_err)]
fn parse_path(s: &State, path: &str) -> Result<Parsed, Response> {
    let bad = || {
        google_error(
            StatusCode::NOT_FOUND,
            "NOT_FOUND",
            &format!("Requested entity was not found: {path}"),
        )
    };
    let rest = path.strip_prefix("/v1/projects/").ok_or_else(bad)?;
    let (rest, verb) = match rest.rsplit_once(':') {
        Some((r, v)) if !v.contains('/') => (r, Some(v.to_string())),
        _ => (rest, None),
    };
    let segs: Vec<&str> = rest.split('/').collect();
    let project = segs.first().copied().unwrap_or("");
    if project != s.project && project != PROJECT_NUMBER {
        return Err(google_error(
            StatusCode::FORBIDDEN,
            "PERMISSION_DENIED",
            &format!("Permission denied on resource project {project}."),
        ));
    }
    let mut i = 1;
    let mut location = String::new();
    if segs.get(i) == Some(&"locations") {
        location = segs.get(i + 1).ok_or_else(bad)?.to_string();
        i += 2;
    }
    if segs.get(i) != Some(&"secrets") {
        return Err(bad());
    }
    let secret = segs.get(i + 1).map(|x| x.to_string());
    let version = match segs.get(i + 2) {
        Some(&"versions") => Some(segs.get(i + 3).map(|x| x.to_string())),
        Some(_) => return Err(bad()),
        None => None,
    };
    Ok(Parsed {
        location,
        secret,
        version,
        verb,
    })
}

fn parent_name(location: &str) -> String {
    if location.is_empty() {
        format!("projects/{PROJECT_NUMBER}")
    } else {
        format!("projects/{PROJECT_NUMBER}/locations/{location}")
    }
}

fn secret_json(location: &str, name: &str, e: &SecretEntry) -> Value {
    let mut v = json!({
        "name": format!("{}/secrets/{name}", parent_name(location)),
        "createTime": "2024-01-01T00:00:00Z",
        "labels": e.labels,
        "etag": format!("\"{}\"", e.etag),
    });
    if !e.annotations.is_empty() {
        v["annotations"] = json!(e.annotations);
    }
    if location.is_empty() && !e.replication.is_null() {
        v["replication"] = e.replication.clone();
    }
    if e.topics.is_array() {
        v["topics"] = e.topics.clone();
    }
    v
}

fn version_json(location: &str, name: &str, v: &Version) -> Value {
    let created = chrono_like(v.created);
    json!({
        "name": format!("{}/secrets/{name}/versions/{}", parent_name(location), v.id),
        "createTime": created,
        "state": v.state as i32,
        "etag": format!("\"{}\"", v.id),
    })
}

/// RFC 3339 for unix seconds (UTC), without a date library.
fn chrono_like(t: i64) -> String {
    let days = t.div_euclid(86_400);
    let secs = t.rem_euclid(86_400);
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        (secs % 3600) / 60,
        secs % 60
    )
}

/// CRC32C (Castagnoli) of the payload, as `dataCrc32c` carries it.
fn crc32c(data: &[u8]) -> u32 {
    let mut crc: u32 = !0;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn matches_filter(filter: &str, name: &str, e: &SecretEntry) -> bool {
    filter.split_whitespace().all(|term| {
        if let Some(sub) = term.strip_prefix("name:") {
            return name.contains(sub);
        }
        if let Some(kv) = term.strip_prefix("labels.") {
            let (k, v) = kv
                .split_once('=')
                .or_else(|| kv.split_once(':'))
                .unwrap_or((kv, ""));
            return e.labels.get(k).map(String::as_str) == Some(v);
        }
        false
    })
}

fn not_found_secret(location: &str, name: &str) -> Response {
    google_error(
        StatusCode::NOT_FOUND,
        "NOT_FOUND",
        &format!(
            "Secret [{}/secrets/{name}] not found.",
            parent_name(location)
        ),
    )
}

fn secret_manager(
    s: &mut State,
    method: &Method,
    path: &str,
    q: &BTreeMap<String, String>,
    body: &[u8],
) -> Response {
    let p = match parse_path(s, path) {
        Ok(p) => p,
        Err(r) => return r,
    };
    let loc = p.location.clone();
    match (method, &p.secret, &p.version, p.verb.as_deref()) {
        // ListSecrets
        (&Method::GET, None, None, None) => {
            let filter = q.get("filter").cloned().unwrap_or_default();
            let all: Vec<(&String, &SecretEntry)> = s
                .secrets
                .iter()
                .filter(|((l, n), e)| *l == loc && matches_filter(&filter, n, e))
                .map(|((_, n), e)| (n, e))
                .collect();
            let size = q
                .get("pageSize")
                .and_then(|x| x.parse::<usize>().ok())
                .filter(|x| *x > 0)
                .unwrap_or(s.page_size)
                .min(s.page_size.max(1));
            let start = q
                .get("pageToken")
                .and_then(|t| t.parse::<usize>().ok())
                .unwrap_or(0);
            let page: Vec<Value> = all
                .iter()
                .skip(start)
                .take(size)
                .map(|(n, e)| secret_json(&loc, n, e))
                .collect();
            let mut out = json!({"secrets": page, "totalSize": all.len()});
            if start + size < all.len() {
                out["nextPageToken"] = json!((start + size).to_string());
            }
            ok_json(out)
        }
        // CreateSecret
        (&Method::POST, None, None, None) => {
            let Some(id) = q.get("secretId").filter(|x| !x.is_empty()).cloned() else {
                return google_error(
                    StatusCode::BAD_REQUEST,
                    "INVALID_ARGUMENT",
                    "secretId is required",
                );
            };
            let key = (loc.clone(), id.clone());
            if s.secrets.contains_key(&key) {
                return google_error(
                    StatusCode::CONFLICT,
                    "ALREADY_EXISTS",
                    &format!(
                        "Secret [{}/secrets/{id}] already exists.",
                        parent_name(&loc)
                    ),
                );
            }
            let v: Value = serde_json::from_slice(body).unwrap_or(json!({}));
            if loc.is_empty() && v.get("replication").is_none() {
                return google_error(
                    StatusCode::BAD_REQUEST,
                    "INVALID_ARGUMENT",
                    "Secret.replication is required.",
                );
            }
            let labels: BTreeMap<String, String> =
                serde_json::from_value(v["labels"].clone()).unwrap_or_default();
            let annotations: BTreeMap<String, String> =
                serde_json::from_value(v["annotations"].clone()).unwrap_or_default();
            let e = SecretEntry {
                labels,
                annotations,
                replication: v["replication"].clone(),
                topics: v["topics"].clone(),
                versions: vec![],
                etag: 1,
            };
            let out = secret_json(&loc, &id, &e);
            s.secrets.insert(key, e);
            ok_json(out)
        }
        // GetSecret / UpdateSecret / DeleteSecret
        (m, Some(name), None, None) => {
            let key = (loc.clone(), name.clone());
            let Some(e) = s.secrets.get_mut(&key) else {
                return not_found_secret(&loc, name);
            };
            match *m {
                Method::GET => ok_json(secret_json(&loc, name, e)),
                Method::PATCH => {
                    let v: Value = serde_json::from_slice(body).unwrap_or(json!({}));
                    if let Some(etag) = v["etag"].as_str()
                        && !etag.is_empty()
                        && etag != format!("\"{}\"", e.etag)
                    {
                        return google_error(
                            StatusCode::CONFLICT,
                            "ABORTED",
                            "The etag provided in the request does not match the current etag of the secret.",
                        );
                    }
                    let mask = q.get("updateMask").cloned().unwrap_or_default();
                    for field in mask.split(',') {
                        match field.trim() {
                            "labels" => {
                                e.labels =
                                    serde_json::from_value(v["labels"].clone()).unwrap_or_default()
                            }
                            "annotations" => {
                                e.annotations = serde_json::from_value(v["annotations"].clone())
                                    .unwrap_or_default()
                            }
                            "" => {}
                            other => {
                                return google_error(
                                    StatusCode::BAD_REQUEST,
                                    "INVALID_ARGUMENT",
                                    &format!(
                                        "The update_mask contains an unsupported path: {other}"
                                    ),
                                );
                            }
                        }
                    }
                    e.etag += 1;
                    ok_json(secret_json(&loc, name, e))
                }
                Method::DELETE => {
                    if let Some(etag) = q.get("etag").filter(|x| !x.is_empty())
                        && *etag != format!("\"{}\"", e.etag)
                    {
                        return google_error(
                            StatusCode::CONFLICT,
                            "ABORTED",
                            "The etag provided in the request does not match the current etag of the secret.",
                        );
                    }
                    s.secrets.remove(&key);
                    ok_json(json!({}))
                }
                _ => google_error(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "UNIMPLEMENTED",
                    "method not allowed",
                ),
            }
        }
        // AddSecretVersion
        (&Method::POST, Some(name), None, Some("addVersion")) => {
            let v: Value = serde_json::from_slice(body).unwrap_or(json!({}));
            let Some(data) = v["payload"]["data"]
                .as_str()
                .and_then(|d| base64::engine::general_purpose::STANDARD.decode(d).ok())
            else {
                return google_error(
                    StatusCode::BAD_REQUEST,
                    "INVALID_ARGUMENT",
                    "payload.data is required",
                );
            };
            if let Some(crc) = v["payload"]["dataCrc32c"].as_str()
                && crc != crc32c(&data).to_string()
            {
                return google_error(
                    StatusCode::BAD_REQUEST,
                    "INVALID_ARGUMENT",
                    "Checksum mismatch.",
                );
            }
            let created = s.tick();
            let Some(e) = s.secrets.get_mut(&(loc.clone(), name.clone())) else {
                return not_found_secret(&loc, name);
            };
            let id = e.versions.len() as u64 + 1;
            let ver = Version {
                id,
                data,
                state: VersionState::Enabled,
                created,
            };
            let out = version_json(&loc, name, &ver);
            e.versions.push(ver);
            ok_json(out)
        }
        // ListSecretVersions
        (&Method::GET, Some(name), Some(None), None) => {
            let Some(e) = s.secrets.get(&(loc.clone(), name.clone())) else {
                return not_found_secret(&loc, name);
            };
            let filter = q.get("filter").cloned().unwrap_or_default();
            let want = filter.strip_prefix("state:").map(str::to_string);
            let versions: Vec<Value> = e
                .versions
                .iter()
                .rev()
                .filter(|v| want.as_deref().is_none_or(|w| w == v.state.name()))
                .map(|v| version_json(&loc, name, v))
                .collect();
            ok_json(json!({"versions": versions, "totalSize": versions.len()}))
        }
        // GetSecretVersion / AccessSecretVersion
        (&Method::GET, Some(name), Some(Some(vid)), verb) => {
            let Some(e) = s.secrets.get(&(loc.clone(), name.clone())) else {
                return not_found_secret(&loc, name);
            };
            let ver = if vid == "latest" {
                e.versions.last()
            } else {
                vid.parse::<u64>()
                    .ok()
                    .and_then(|n| e.versions.iter().find(|v| v.id == n))
            };
            let full = format!("{}/secrets/{name}/versions/{vid}", parent_name(&loc));
            let Some(ver) = ver else {
                return google_error(
                    StatusCode::NOT_FOUND,
                    "NOT_FOUND",
                    &format!("Secret Version [{full}] not found."),
                );
            };
            match verb {
                None => ok_json(version_json(&loc, name, ver)),
                Some("access") => {
                    if ver.state != VersionState::Enabled {
                        return google_error(
                            StatusCode::BAD_REQUEST,
                            "FAILED_PRECONDITION",
                            &format!(
                                "Secret Version [{}/secrets/{name}/versions/{}] is in {} state.",
                                parent_name(&loc),
                                ver.id,
                                ver.state.name()
                            ),
                        );
                    }
                    ok_json(json!({
                        "name": format!("{}/secrets/{name}/versions/{}", parent_name(&loc), ver.id),
                        "payload": {
                            "data": base64::engine::general_purpose::STANDARD.encode(&ver.data),
                            "dataCrc32c": crc32c(&ver.data).to_string(),
                        }
                    }))
                }
                Some(other) => google_error(
                    StatusCode::NOT_FOUND,
                    "NOT_FOUND",
                    &format!("unknown method {other}"),
                ),
            }
        }
        _ => google_error(
            StatusCode::NOT_FOUND,
            "NOT_FOUND",
            &format!("Requested entity was not found: {path}"),
        ),
    }
}

fn subject_matches(pattern: &str, sub: &str) -> bool {
    match pattern.split_once('*') {
        Some((pre, post)) => {
            sub.len() >= pre.len() + post.len() && sub.starts_with(pre) && sub.ends_with(post)
        }
        None => pattern == sub,
    }
}

/// STS token exchange.
fn sts(s: &mut State, body: &[u8]) -> Response {
    let f = form(body);
    let sts_error = |code: StatusCode, error: &str, desc: &str| {
        (
            code,
            [("content-type", "application/json")],
            json!({"error": error, "error_description": desc}).to_string(),
        )
            .into_response()
    };
    let mut logged = f.clone();
    logged.remove("subject_token");
    s.sts_requests.push(logged);
    if f.get("grant_type").map(String::as_str)
        != Some("urn:ietf:params:oauth:grant-type:token-exchange")
    {
        return sts_error(
            StatusCode::BAD_REQUEST,
            "unsupported_grant_type",
            "grant_type must be token-exchange",
        );
    }
    if f.get("subject_token_type").map(String::as_str)
        != Some("urn:ietf:params:oauth:token-type:jwt")
    {
        return sts_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "subject_token_type must be a JWT",
        );
    }
    if s.sts_audience.is_none() || f.get("audience") != s.sts_audience.as_ref() {
        return sts_error(
            StatusCode::BAD_REQUEST,
            "invalid_target",
            "The target service indicated by the \"audience\" parameters is invalid.",
        );
    }
    let claims = f
        .get("subject_token")
        .and_then(|t| t.split('.').nth(1))
        .and_then(b64url_json);
    let Some(claims) = claims else {
        return sts_error(
            StatusCode::BAD_REQUEST,
            "invalid_grant",
            "The subject token is not a JWT.",
        );
    };
    let sub = claims["sub"].as_str().unwrap_or("").to_string();
    if !s
        .sts_subjects
        .iter()
        .any(|pattern| subject_matches(pattern, &sub))
    {
        return sts_error(
            StatusCode::BAD_REQUEST,
            "invalid_grant",
            "The subject is not allowed.",
        );
    }
    if let Some(want) = &s.sts_subject_audience
        && !aud_contains(&claims, want)
    {
        return sts_error(
            StatusCode::BAD_REQUEST,
            "invalid_grant",
            "The audience in the subject token is not valid.",
        );
    }
    s.log.push(format!("STS {sub}"));
    s.counter += 1;
    let token = format!("ya29.sts-{:08}", s.counter);
    s.issued.insert(token.clone(), sub);
    ok_json(json!({
        "access_token": token,
        "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
        "token_type": "Bearer",
        "expires_in": 3600,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_matches_the_standard_check_value() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn rfc3339_of_unix_seconds() {
        assert_eq!(chrono_like(0), "1970-01-01T00:00:00Z");
        assert_eq!(chrono_like(1_700_000_000), "2023-11-14T22:13:20Z");
    }

    #[test]
    fn subject_patterns() {
        assert!(subject_matches(
            "system:serviceaccount:*:app",
            "system:serviceaccount:ns-1:app"
        ));
        assert!(!subject_matches(
            "system:serviceaccount:*:app",
            "system:serviceaccount:ns-1:other"
        ));
        assert!(subject_matches("a", "a"));
        assert!(!subject_matches("a", "b"));
    }

    #[test]
    fn filters() {
        let mut e = SecretEntry::default();
        e.labels.insert("team".into(), "a".into());
        assert!(matches_filter("labels.team=a", "db", &e));
        assert!(matches_filter("labels.team=a name:d", "db", &e));
        assert!(!matches_filter("labels.team=b", "db", &e));
        assert!(!matches_filter("name:x", "db", &e));
        assert!(matches_filter("", "db", &e));
    }
}
