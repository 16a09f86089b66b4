//! A thin Vault HTTP API transport over reqwest: namespace and custom headers, the request index
//! (`readYourWrites`), `X-Vault-Inconsistent: forward-active-node`, CA bundles and client
//! certificates, retries ([`RetryPolicy`], the store's `retrySettings`), and Vault's error
//! envelope mapped to [`ProviderError`] kinds.
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
    /// Retries of failed requests (connection errors and 5xx).
    pub retry: RetryPolicy,
}

/// How a request that failed with a connection error or an HTTP 5xx (other than 501) is retried.
/// 4xx answers are never retried.
///
/// ESO builds its Vault client from the Vault API's defaults (2 retries, waiting 1–1.5 s, then
/// 2–3 s) and, when the store has `retrySettings`, sets `maxRetries` (0 when unset) and a fixed
/// `retryInterval`. esr waits `min_wait × n` before the n-th retry (the lower bound of the Vault
/// client's linear backoff, without jitter).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// Wait before the first retry; the n-th retry waits `n` times this.
    pub min_wait: Duration,
}

impl RetryPolicy {
    /// The Vault API client's default that ESO uses without `retrySettings`: 2 retries, 1 s apart
    /// (then 2 s).
    pub const VAULT_DEFAULT: RetryPolicy = RetryPolicy {
        max_retries: 2,
        min_wait: Duration::from_secs(1),
    };

    /// The policy of a store's (or generator's) `retrySettings`: `None` → [`Self::VAULT_DEFAULT`];
    /// otherwise `maxRetries` (0 when unset or negative) and `retryInterval` (a Go duration; the
    /// default wait when unset).
    pub fn from_settings(settings: Option<(Option<i32>, Option<&str>)>) -> Result<Self> {
        let Some((max, interval)) = settings else {
            return Ok(Self::VAULT_DEFAULT);
        };
        let min_wait = match interval.filter(|i| !i.is_empty()) {
            Some(i) => esr_api::duration::parse(i)
                .ok()
                .and_then(|d| d.to_std())
                .ok_or_else(|| {
                    ProviderError::invalid(format!("invalid retrySettings.retryInterval {i:?}"))
                })?,
            None => Self::VAULT_DEFAULT.min_wait,
        };
        Ok(RetryPolicy {
            max_retries: max.and_then(|m| u32::try_from(m).ok()).unwrap_or(0),
            min_wait,
        })
    }

    /// The wait before retry number `n` (1-based).
    pub fn wait(&self, n: u32) -> Duration {
        self.min_wait.saturating_mul(n)
    }
}

impl std::fmt::Debug for TransportConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransportConfig")
            .field("server", &self.server)
            .field("namespace", &self.namespace)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("ca", &self.ca_pem.is_some())
            .field("identity", &self.identity_pem.is_some())
            .field("retry", &self.retry)
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
    retry: RetryPolicy,
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
            retry: cfg.retry,
        })
    }

    /// The server address.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The retry policy.
    pub fn retry_policy(&self) -> RetryPolicy {
        self.retry
    }

    /// Sends one request to `/v1/<path>`, retrying connection errors and 5xx answers as the
    /// [`RetryPolicy`] says (one metric sample per call, whatever the number of attempts).
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
        let mut retries = 0;
        loop {
            match self
                .attempt(method, path, query, body, token, namespace)
                .await
            {
                Ok(r) => return Ok(r),
                Err(Attempt::Retryable(e)) if retries < self.retry.max_retries => {
                    retries += 1;
                    tracing::debug!(
                        server = %self.base,
                        path,
                        retry = retries,
                        error = %e,
                        "retrying the Vault request"
                    );
                    tokio::time::sleep(self.retry.wait(retries)).await;
                }
                Err(Attempt::Retryable(e)) | Err(Attempt::Final(e)) => return Err(e),
            }
        }
    }

    /// One attempt; connection errors and 5xx (other than 501) are [`Attempt::Retryable`].
    async fn attempt(
        &self,
        method: &str,
        path: &str,
        query: &[(String, String)],
        body: Option<&Value>,
        token: Option<&str>,
        namespace: Option<&str>,
    ) -> std::result::Result<Option<Response>, Attempt> {
        let url = format!("{}/v1/{}", self.base, path.trim_start_matches('/'));
        let m =
            reqwest::Method::from_bytes(method.to_ascii_uppercase().as_bytes()).map_err(|_| {
                Attempt::Final(ProviderError::invalid(format!(
                    "invalid HTTP method {method:?}"
                )))
            })?;
        let mut req = self.http.request(m, &url);
        if !query.is_empty() {
            req = req.query(query);
        }
        if let Some(t) = token.filter(|t| !t.is_empty()) {
            let mut v = HeaderValue::from_str(t).map_err(|_| {
                Attempt::Final(ProviderError::invalid(
                    "the Vault token is not a valid header value",
                ))
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
            Attempt::Retryable(ProviderError::transient(format!(
                "cannot reach Vault at {}: {}",
                self.base,
                error_chain(&e)
            )))
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
            Attempt::Retryable(ProviderError::transient(format!(
                "failed to read the Vault response: {e}"
            )))
        })?;
        let body: Option<Value> = if bytes.is_empty() {
            None
        } else {
            serde_json::from_slice(&bytes).ok()
        };
        if (200..300).contains(&status) {
            if body.is_none() && !bytes.is_empty() {
                return Err(Attempt::Final(ProviderError::invalid(
                    "the Vault response is not JSON (is the path a JSON API endpoint?)",
                )));
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
        let err = match status {
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
        };
        Err(if status >= 500 && status != 501 {
            Attempt::Retryable(err)
        } else {
            Attempt::Final(err)
        })
    }
}

/// The failure of one attempt.
enum Attempt {
    /// A connection error or 5xx: may be retried.
    Retryable(ProviderError),
    /// Anything else (4xx, bad input): returned as is.
    Final(ProviderError),
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

#[cfg(test)]
mod tests {
    use super::*;
    use esr_provider::MemoryRecorder;
    use std::sync::atomic::{AtomicU32, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// How the first `n` connections fail.
    #[derive(Clone, Copy)]
    enum Failure {
        /// Answer with this HTTP status.
        Status(u16),
        /// Close the connection without answering.
        Drop,
    }

    /// A one-connection-per-request HTTP server: the first `fail` requests fail as `how`, the
    /// rest get `{"data": {"ok": "yes"}}`. Returns the address and the request counter.
    async fn flaky_server(fail: u32, how: Failure) -> (String, Arc<AtomicU32>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(AtomicU32::new(0));
        let counter = seen.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut sock, _)) = listener.accept().await else {
                    return;
                };
                let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
                tokio::spawn(async move {
                    // Read the request head (the test requests have no body).
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 1024];
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        match sock.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(k) => buf.extend_from_slice(&chunk[..k]),
                        }
                    }
                    let (status, body) = match (n <= fail, how) {
                        (true, Failure::Drop) => return,
                        (true, Failure::Status(s)) => (s, r#"{"errors":["try later"]}"#),
                        (false, _) => (200, r#"{"data":{"ok":"yes"}}"#),
                    };
                    let resp = format!(
                        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = sock.write_all(resp.as_bytes()).await;
                    let _ = sock.shutdown().await;
                });
            }
        });
        (addr, seen)
    }

    fn transport(addr: &str, max_retries: u32) -> (Transport, Arc<MemoryRecorder>) {
        let rec = Arc::new(MemoryRecorder::default());
        let t = Transport::new(
            &TransportConfig {
                server: addr.to_string(),
                retry: RetryPolicy {
                    max_retries,
                    min_wait: Duration::from_millis(1),
                },
                ..Default::default()
            },
            rec.clone(),
        )
        .unwrap();
        (t, rec)
    }

    async fn get(t: &Transport) -> Result<Option<Response>> {
        t.request(
            "ReadSecretData",
            "GET",
            "secret/x",
            &[],
            None,
            Some("t"),
            None,
        )
        .await
    }

    #[tokio::test]
    async fn retries_5xx_until_success_within_max_retries() {
        let (addr, seen) = flaky_server(2, Failure::Status(503)).await;
        let (t, rec) = transport(&addr, 2);
        let r = get(&t).await.unwrap().unwrap();
        assert_eq!(r.data().unwrap()["ok"], "yes");
        assert_eq!(seen.load(Ordering::SeqCst), 3, "1 attempt + 2 retries");
        assert_eq!(rec.count("ReadSecretData"), 1, "one metric sample per call");
    }

    #[tokio::test]
    async fn gives_up_after_max_retries() {
        let (addr, seen) = flaky_server(3, Failure::Status(500)).await;
        let (t, _) = transport(&addr, 2);
        let e = get(&t).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Transient);
        assert!(e.message().contains("HTTP 500"), "{e}");
        assert_eq!(seen.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn retries_connection_errors() {
        let (addr, seen) = flaky_server(2, Failure::Drop).await;
        let (t, _) = transport(&addr, 3);
        let r = get(&t).await.unwrap().unwrap();
        assert_eq!(r.data().unwrap()["ok"], "yes");
        assert_eq!(seen.load(Ordering::SeqCst), 3);
        // Without retries the dropped connection is the error.
        let (addr, seen) = flaky_server(1, Failure::Drop).await;
        let (t, _) = transport(&addr, 0);
        let e = get(&t).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Transient);
        assert_eq!(seen.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn does_not_retry_4xx_or_501() {
        for (status, kind) in [
            (400, ErrorKind::Invalid),
            (403, ErrorKind::Auth),
            (429, ErrorKind::Throttled),
            (501, ErrorKind::Transient),
        ] {
            let (addr, seen) = flaky_server(1, Failure::Status(status)).await;
            let (t, _) = transport(&addr, 5);
            let e = get(&t).await.unwrap_err();
            assert_eq!(e.kind(), kind, "{status}: {e}");
            assert_eq!(seen.load(Ordering::SeqCst), 1, "{status} was retried");
        }
    }

    #[test]
    fn policy_from_retry_settings() {
        assert_eq!(
            RetryPolicy::from_settings(None).unwrap(),
            RetryPolicy::VAULT_DEFAULT
        );
        assert_eq!(
            RetryPolicy::from_settings(Some((Some(5), Some("250ms")))).unwrap(),
            RetryPolicy {
                max_retries: 5,
                min_wait: Duration::from_millis(250)
            }
        );
        // retrySettings without maxRetries: no retries (ESO relies on the reconcile loop).
        assert_eq!(
            RetryPolicy::from_settings(Some((None, None)))
                .unwrap()
                .max_retries,
            0
        );
        assert!(RetryPolicy::from_settings(Some((Some(1), Some("soon")))).is_err());
        let p = RetryPolicy {
            max_retries: 3,
            min_wait: Duration::from_secs(2),
        };
        assert_eq!(p.wait(1), Duration::from_secs(2));
        assert_eq!(p.wait(3), Duration::from_secs(6));
    }
}
