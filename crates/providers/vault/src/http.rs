//! A thin Vault HTTP API transport over reqwest: namespace and custom headers, the request index
//! (`readYourWrites`), `X-Vault-Inconsistent: forward-active-node`, CA bundles and client
//! certificates, and Vault's error envelope mapped to [`ProviderError`] kinds.
//!
//! vaultrs builds a reqwest client of its own and does not expose response headers, so it cannot
//! carry `X-Vault-Index` between requests or send per-request namespaces; the provider therefore
//! talks to the HTTP API here (the tests use vaultrs to administer the server).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use esr_provider::metrics::CallRecorder;
use esr_provider::{CallStatus, ErrorKind, ProviderError, Result};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

/// The metric provider label.
pub const METRIC_PROVIDER: &str = "HashiCorp/Vault";

const INDEX_HEADER: &str = "x-vault-index";

/// TLS and header settings of a transport.
#[derive(Clone, Default)]
pub struct TransportConfig {
    /// Server address, e.g. `http://127.0.0.1:8200`.
    pub server: String,
    /// `X-Vault-Namespace` for every request (unless overridden per request).
    pub namespace: Option<String>,
    /// Extra headers.
    pub headers: BTreeMap<String, String>,
    /// PEM CA bundle to trust (in addition to nothing else: only these roots).
    pub ca_pem: Option<Vec<u8>>,
    /// PEM client certificate + key.
    pub identity_pem: Option<Vec<u8>>,
    /// Keep and send `X-Vault-Index`.
    pub read_your_writes: bool,
    /// Send `X-Vault-Inconsistent: forward-active-node`.
    pub forward_inconsistent: bool,
}

impl std::fmt::Debug for TransportConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransportConfig")
            .field("server", &self.server)
            .field("namespace", &self.namespace)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("ca", &self.ca_pem.is_some())
            .field("identity", &self.identity_pem.is_some())
            .finish_non_exhaustive()
    }
}

/// One Vault server connection.
pub struct Transport {
    http: reqwest::Client,
    base: String,
    namespace: Option<String>,
    read_your_writes: bool,
    index: Mutex<Option<HeaderValue>>,
    recorder: Arc<dyn CallRecorder>,
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transport")
            .field("base", &self.base)
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

/// The parsed body of a successful (or 404-with-data) response.
#[derive(Debug, Clone, Default)]
pub struct Response {
    /// HTTP status.
    pub status: u16,
    /// The JSON body (`None` for 204 or an empty body).
    pub body: Option<Value>,
}

impl Response {
    /// `body.data`, when it is an object.
    pub fn data(&self) -> Option<&serde_json::Map<String, Value>> {
        self.body
            .as_ref()
            .and_then(|b| b.get("data"))
            .and_then(Value::as_object)
    }
}

fn invalid_cfg(what: &str, e: impl std::fmt::Display) -> ProviderError {
    ProviderError::invalid(format!("{what}: {e}")).with_provider(METRIC_PROVIDER)
}

impl Transport {
    /// Builds the transport.
    pub fn new(cfg: &TransportConfig, recorder: Arc<dyn CallRecorder>) -> Result<Self> {
        let base = cfg.server.trim_end_matches('/').to_string();
        let parsed = reqwest::Url::parse(&base).map_err(|e| invalid_cfg("invalid server", e))?;
        if parsed.scheme() != "http" && parsed.scheme() != "https" {
            return Err(invalid_cfg(
                "invalid server",
                format_args!("unsupported scheme {:?}", parsed.scheme()),
            ));
        }
        let mut headers = HeaderMap::new();
        for (k, v) in &cfg.headers {
            let name = HeaderName::from_bytes(k.as_bytes())
                .map_err(|e| invalid_cfg("invalid header name", e))?;
            let value =
                HeaderValue::from_str(v).map_err(|e| invalid_cfg("invalid header value", e))?;
            headers.insert(name, value);
        }
        if cfg.forward_inconsistent {
            headers.insert(
                HeaderName::from_static("x-vault-inconsistent"),
                HeaderValue::from_static("forward-active-node"),
            );
        }
        let mut b = reqwest::Client::builder()
            .default_headers(headers)
            .timeout(Duration::from_secs(60))
            .connect_timeout(Duration::from_secs(10));
        if parsed.scheme() == "http" {
            // No TLS: do not load the platform verifier at all.
            b = b.tls_certs_only(Vec::new());
        } else if let Some(ca) = &cfg.ca_pem {
            let certs = reqwest::Certificate::from_pem_bundle(ca)
                .map_err(|e| invalid_cfg("failed to parse caBundle/caProvider", e))?;
            b = b.tls_certs_only(certs);
        }
        if let Some(id) = &cfg.identity_pem {
            let identity = reqwest::Identity::from_pem(id)
                .map_err(|e| invalid_cfg("failed to parse the TLS client certificate", e))?;
            b = b.identity(identity);
        }
        let http = b
            .build()
            .map_err(|e| invalid_cfg("failed to build the HTTP client", e))?;
        Ok(Transport {
            http,
            base,
            namespace: cfg.namespace.clone().filter(|n| !n.is_empty()),
            read_your_writes: cfg.read_your_writes,
            index: Mutex::new(None),
            recorder,
        })
    }

    /// The server address.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// Sends one request to `/v1/<path>`.
    ///
    /// - 2xx → `Ok(Some(response))`;
    /// - 404 → `Ok(Some(response))` when the body carries `data` (KV v2 deleted versions), else
    ///   `Ok(None)`;
    /// - otherwise a [`ProviderError`] with Vault's `errors` text.
    #[allow(clippy::too_many_arguments)]
    pub async fn request(
        &self,
        call: &'static str,
        method: &str,
        path: &str,
        query: &[(String, String)],
        body: Option<&Value>,
        token: Option<&str>,
        namespace: Option<&str>,
    ) -> Result<Option<Response>> {
        let result = self
            .request_inner(method, path, query, body, token, namespace)
            .await
            .map_err(|e| e.with_provider(METRIC_PROVIDER).with_call(call));
        let status = match &result {
            Ok(_) => CallStatus::Success,
            Err(e) => CallStatus::Error(e.kind()),
        };
        self.recorder.record(METRIC_PROVIDER, call, status);
        result
    }

    async fn request_inner(
        &self,
        method: &str,
        path: &str,
        query: &[(String, String)],
        body: Option<&Value>,
        token: Option<&str>,
        namespace: Option<&str>,
    ) -> Result<Option<Response>> {
        let url = format!("{}/v1/{}", self.base, path.trim_start_matches('/'));
        let m = reqwest::Method::from_bytes(method.to_ascii_uppercase().as_bytes())
            .map_err(|_| ProviderError::invalid(format!("invalid HTTP method {method:?}")))?;
        let mut req = self.http.request(m, &url);
        if !query.is_empty() {
            req = req.query(query);
        }
        if let Some(t) = token.filter(|t| !t.is_empty()) {
            let mut v = HeaderValue::from_str(t).map_err(|_| {
                ProviderError::invalid("the Vault token is not a valid header value")
            })?;
            v.set_sensitive(true);
            req = req.header("x-vault-token", v);
        }
        let ns = namespace
            .filter(|n| !n.is_empty())
            .or(self.namespace.as_deref());
        if let Some(ns) = ns {
            req = req.header("x-vault-namespace", ns);
        }
        req = req.header("x-vault-request", "true");
        if self.read_your_writes {
            let idx = self.index.lock().ok().and_then(|g| g.clone());
            if let Some(idx) = idx {
                req = req.header(INDEX_HEADER, idx);
            }
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req.send().await.map_err(|e| {
            ProviderError::transient(format!(
                "cannot reach Vault at {}: {}",
                self.base,
                error_chain(&e)
            ))
        })?;
        if self.read_your_writes
            && let Some(v) = resp.headers().get(INDEX_HEADER)
            && let Ok(mut g) = self.index.lock()
        {
            *g = Some(v.clone());
        }
        let status = resp.status().as_u16();
        let retry_after = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
            .map(Duration::from_secs);
        let bytes = resp.bytes().await.map_err(|e| {
            ProviderError::transient(format!("failed to read the Vault response: {e}"))
        })?;
        let body: Option<Value> = if bytes.is_empty() {
            None
        } else {
            serde_json::from_slice(&bytes).ok()
        };
        if (200..300).contains(&status) {
            if body.is_none() && !bytes.is_empty() {
                return Err(ProviderError::invalid(
                    "the Vault response is not JSON (is the path a JSON API endpoint?)",
                ));
            }
            return Ok(Some(Response { status, body }));
        }
        let errors = body
            .as_ref()
            .and_then(|b| b.get("errors"))
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join("; ")
            })
            .unwrap_or_default();
        if status == 404 {
            let has_data = body
                .as_ref()
                .and_then(|b| b.get("data"))
                .is_some_and(|d| !d.is_null());
            if has_data {
                return Ok(Some(Response { status, body }));
            }
            if errors.is_empty() {
                return Ok(None);
            }
        }
        let text = if errors.is_empty() {
            format!("{method} {path}: Vault returned HTTP {status}")
        } else {
            format!("{method} {path}: Vault returned HTTP {status}: {errors}")
        };
        Err(match status {
            400 => ProviderError::invalid(text),
            401 | 403 => ProviderError::auth(text),
            404 => ProviderError::not_found_msg(text),
            412 => ProviderError::transient(text),
            429 => ProviderError::throttled(text, retry_after),
            503 if errors.contains("sealed") => {
                ProviderError::transient(format!("{text} (the Vault server is sealed)"))
            }
            _ => ProviderError::new(
                if status >= 500 {
                    ErrorKind::Transient
                } else {
                    ErrorKind::Invalid
                },
                text,
            ),
        })
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        out.push_str(": ");
        out.push_str(&s.to_string());
        cur = s.source();
    }
    out
}
