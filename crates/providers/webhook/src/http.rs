//! The HTTP side: a reqwest client per store (timeout, CA roots), one request → one answer, and
//! ESO's mapping of the answer's status.
//!
//! Every request is recorded as `Webhook`/`HTTPRequest`, with status `error` only when no answer
//! came back (ESO observes the error of the transport alone). Error texts never contain the
//! rendered URL, headers or body, nor the answer: reqwest's URL is removed, and whatever a lower
//! layer might still print of the URL is cut out.

use std::sync::Arc;
use std::time::Duration;

use esr_provider::metrics::CallRecorder;
use esr_provider::{CallStatus, ErrorKind, ProviderError, Result};
use reqwest::StatusCode;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};

use crate::{CALL_HTTP_REQUEST, METRIC_PROVIDER};

/// The largest answer body read (16 MiB); a longer one is an error.
pub const MAX_BODY_BYTES: usize = 16 << 20;

/// One rendered request. `Debug` prints the method only.
#[derive(Clone, PartialEq, Eq)]
pub struct Request {
    /// HTTP method.
    pub method: String,
    /// The rendered URL.
    pub url: String,
    /// The rendered headers, in order (a repeated name adds a value).
    pub headers: Vec<(String, String)>,
    /// The rendered body.
    pub body: Vec<u8>,
}

impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Request")
            .field("method", &self.method)
            .finish_non_exhaustive()
    }
}

/// An answer: its status and, for a 2xx, its body.
#[derive(Clone, PartialEq, Eq)]
pub struct Answer {
    /// The status.
    pub status: StatusCode,
    /// The body of a 2xx answer (empty otherwise).
    pub body: Vec<u8>,
    /// `Retry-After` in seconds, if the server sent one.
    pub retry_after: Option<Duration>,
}

impl std::fmt::Debug for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Answer")
            .field("status", &self.status)
            .field("body", &format_args!("<{} bytes>", self.body.len()))
            .finish()
    }
}

/// Go's `resp.Status`, e.g. `500 Internal Server Error`.
pub fn status_text(status: StatusCode) -> String {
    match status.canonical_reason() {
        Some(r) => format!("{} {r}", status.as_u16()),
        None => status.as_u16().to_string(),
    }
}

/// The kind of a non-2xx answer.
fn status_kind(status: StatusCode) -> ErrorKind {
    match status.as_u16() {
        401 | 403 => ErrorKind::Auth,
        429 => ErrorKind::Throttled,
        s if s >= 500 => ErrorKind::Transient,
        _ => ErrorKind::Invalid,
    }
}

impl Answer {
    /// ESO's reading of an answer: 404 is "Secret does not exist", 304 `not modified`, another
    /// non-2xx `endpoint gave error <status>`; a 2xx gives its body.
    pub fn into_body(self) -> Result<Vec<u8>> {
        if self.status == StatusCode::NOT_FOUND {
            return Err(ProviderError::not_found());
        }
        if self.status == StatusCode::NOT_MODIFIED {
            return Err(ProviderError::transient("not modified"));
        }
        self.into_body_with("endpoint gave error")
    }

    /// A 2xx gives its body; otherwise `<prefix> <status>`.
    pub fn into_body_with(self, prefix: &str) -> Result<Vec<u8>> {
        if self.status.is_success() {
            return Ok(self.body);
        }
        let mut e = ProviderError::new(
            status_kind(self.status),
            format!("{prefix} {}", status_text(self.status)),
        );
        if let Some(r) = self.retry_after {
            e = e.with_retry_after(r);
        }
        Err(e)
    }
}

/// The HTTP client of one store or generator run.
pub struct Http {
    client: reqwest::Client,
    timeout: Option<Duration>,
    recorder: Arc<dyn CallRecorder>,
}

impl std::fmt::Debug for Http {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Http")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Http {
    /// A client with an optional whole-request `timeout` and, when `ca_pem` is set, only those
    /// CA certificates as TLS roots (otherwise the system's).
    pub fn new(
        timeout: Option<Duration>,
        ca_pem: Option<&[u8]>,
        recorder: Arc<dyn CallRecorder>,
    ) -> Result<Self> {
        let mut b = reqwest::Client::builder();
        if let Some(t) = timeout {
            b = b.timeout(t);
        }
        if let Some(pem) = ca_pem {
            let certs = reqwest::Certificate::from_pem_bundle(pem).map_err(|_| {
                ProviderError::invalid("failed to append cabundle: no valid PEM certificate")
            })?;
            if certs.is_empty() {
                return Err(ProviderError::invalid("failed to append cabundle"));
            }
            b = b.tls_certs_only(certs);
        }
        let client = b.build().map_err(|e| {
            ProviderError::invalid(format!(
                "failed to build the HTTP client: {}",
                chain(&e.without_url())
            ))
        })?;
        Ok(Http {
            client,
            timeout,
            recorder,
        })
    }

    /// Sends `req` and reads the answer (the body of a 2xx only).
    pub async fn send(&self, req: Request) -> Result<Answer> {
        let built = self.build(&req)?;
        let result = self.exchange(built).await;
        let status = match &result {
            Ok(_) => CallStatus::Success,
            Err(e) => CallStatus::Error(e.kind()),
        };
        self.recorder
            .record(METRIC_PROVIDER, CALL_HTTP_REQUEST, status);
        result.map_err(|e| {
            let text = redact(e.message(), &req.url);
            e.with_message(text)
                .with_provider(METRIC_PROVIDER)
                .with_call(CALL_HTTP_REQUEST)
        })
    }

    fn build(&self, req: &Request) -> Result<reqwest::Request> {
        let create = |why: &str| ProviderError::invalid(format!("failed to create request: {why}"));
        let method = reqwest::Method::from_bytes(req.method.as_bytes())
            .map_err(|_| create("invalid method"))?;
        let url =
            reqwest::Url::parse(&req.url).map_err(|e| create(&format!("invalid URL ({e})")))?;
        if url.scheme() != "http" && url.scheme() != "https" {
            return Err(create("unsupported URL scheme (http or https only)"));
        }
        let mut headers = HeaderMap::new();
        for (k, v) in &req.headers {
            let name = HeaderName::from_bytes(k.as_bytes())
                .map_err(|_| create(&format!("invalid header name {k:?}")))?;
            let value = HeaderValue::from_str(v)
                .map_err(|_| create(&format!("invalid value of header {k}")))?;
            headers.append(name, value);
        }
        let mut r = reqwest::Request::new(method, url);
        *r.headers_mut() = headers;
        if !req.body.is_empty() {
            *r.body_mut() = Some(req.body.clone().into());
        }
        Ok(r)
    }

    async fn exchange(&self, req: reqwest::Request) -> Result<Answer> {
        let mut resp = self
            .client
            .execute(req)
            .await
            .map_err(|e| self.transport_error(e))?;
        let status = resp.status();
        let retry_after = resp
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let mut body = Vec::new();
        if status.is_success() {
            while let Some(chunk) = resp.chunk().await.map_err(|e| self.transport_error(e))? {
                if body.len() + chunk.len() > MAX_BODY_BYTES {
                    return Err(ProviderError::invalid(format!(
                        "the endpoint's answer is larger than {MAX_BODY_BYTES} bytes"
                    )));
                }
                body.extend_from_slice(&chunk);
            }
        }
        Ok(Answer {
            status,
            body,
            retry_after,
        })
    }

    fn transport_error(&self, e: reqwest::Error) -> ProviderError {
        let e = e.without_url();
        if e.is_timeout() {
            let limit = self
                .timeout
                .map(|t| {
                    format!(
                        " (timeout {})",
                        esr_api::duration::format(esr_api::duration::GoDuration::from_std(t))
                    )
                })
                .unwrap_or_default();
            return ProviderError::transient(format!(
                "failed to call endpoint: the request timed out{limit}"
            ));
        }
        ProviderError::transient(format!("failed to call endpoint: {}", chain(&e)))
    }
}

/// The first line of every error in the chain, without repeats.
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        let line = err.to_string();
        let line = line.lines().next().unwrap_or("").trim().to_string();
        if !line.is_empty() && !parts.iter().any(|p| p.contains(&line)) {
            parts.push(line);
        }
        cur = err.source();
    }
    parts.join(": ")
}

/// Cuts the rendered URL (and its path and query) out of a message.
fn redact(message: &str, url: &str) -> String {
    let mut out = message.to_string();
    let mut cut = |needle: &str| {
        if needle.len() > 1 && out.contains(needle) {
            out = out.replace(needle, "<redacted>");
        }
    };
    cut(url);
    if let Ok(u) = reqwest::Url::parse(url) {
        cut(u.as_str());
        if let Some(q) = u.query() {
            cut(q);
        }
        cut(u.path());
    }
    out
}

/// ESO's store validation: a TCP connection to the URL's host within 15 s. The URL is the
/// store's template; its host part must be literal. The port defaults to the scheme's (ESO
/// always tries 443).
pub async fn network_validate(url_template: &str) -> std::result::Result<(), String> {
    let url = reqwest::Url::parse(url_template).map_err(|e| format!("could not parse url: {e}"))?;
    let host = url
        .host_str()
        .ok_or_else(|| "could not parse url: no host".to_string())?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = url.port_or_known_default().unwrap_or(443);
    match tokio::time::timeout(
        Duration::from_secs(15),
        tokio::net::TcpStream::connect((host.as_str(), port)),
    )
    .await
    {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(format!("error accessing external store: {e}")),
        Err(_) => Err("error accessing external store: i/o timeout".to_string()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    fn answer(code: u16) -> Answer {
        Answer {
            status: StatusCode::from_u16(code).unwrap(),
            body: b"body".to_vec(),
            retry_after: None,
        }
    }

    #[test]
    fn statuses_map_like_eso() {
        assert_eq!(answer(200).into_body().unwrap(), b"body");
        assert_eq!(answer(204).into_body().unwrap(), b"body");
        assert!(answer(404).into_body().unwrap_err().is_not_found());
        let e = answer(500).into_body().unwrap_err();
        assert_eq!(
            e.to_string(),
            "endpoint gave error 500 Internal Server Error"
        );
        assert_eq!(e.kind(), ErrorKind::Transient);
        assert_eq!(answer(403).into_body().unwrap_err().kind(), ErrorKind::Auth);
        assert_eq!(
            answer(400).into_body().unwrap_err().kind(),
            ErrorKind::Invalid
        );
        let mut a = answer(429);
        a.retry_after = Some(Duration::from_secs(7));
        let e = a.into_body().unwrap_err();
        assert!(e.is_throttled());
        assert_eq!(e.retry_after(), Some(Duration::from_secs(7)));
        assert_eq!(
            answer(304).into_body().unwrap_err().to_string(),
            "not modified"
        );
        let e = answer(404)
            .into_body_with("delete endpoint gave error")
            .unwrap_err();
        assert_eq!(e.to_string(), "delete endpoint gave error 404 Not Found");
    }

    #[test]
    fn redact_cuts_the_url_out() {
        let url = "http://h:1/p/s3cret?token=t0k";
        let m = redact("error for http://h:1/p/s3cret?token=t0k and token=t0k", url);
        assert!(!m.contains("t0k") && !m.contains("s3cret"), "{m}");
    }

    #[tokio::test]
    async fn bad_requests_fail_before_sending() {
        let rec = Arc::new(esr_provider::MemoryRecorder::default());
        let http = Http::new(None, None, rec.clone()).unwrap();
        let req = |method: &str, url: &str, headers: Vec<(String, String)>| Request {
            method: method.into(),
            url: url.into(),
            headers,
            body: vec![],
        };
        let e = http
            .send(req("GET", "not a url s3cret", vec![]))
            .await
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("failed to create request: invalid URL"),
            "{e}"
        );
        assert!(!e.contains("s3cret"), "{e}");
        let e = http
            .send(req("GE T", "http://127.0.0.1:1/", vec![]))
            .await
            .unwrap_err()
            .to_string();
        assert_eq!(e, "failed to create request: invalid method");
        let e = http
            .send(req(
                "GET",
                "http://127.0.0.1:1/",
                vec![("X-Token".into(), "s3cret\nx".into())],
            ))
            .await
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "failed to create request: invalid value of header X-Token"
        );
        let e = http
            .send(req("GET", "ftp://127.0.0.1:1/", vec![]))
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("unsupported URL scheme"), "{e}");
        // None of these reached the network, so no call was counted... and a refused connection is.
        let e = http
            .send(req("GET", "http://127.0.0.1:1/s3cret?k=s3cret", vec![]))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Transient);
        assert!(!e.to_string().contains("s3cret"), "{e}");
        assert!(
            e.to_string().starts_with("failed to call endpoint: "),
            "{e}"
        );
        assert_eq!(rec.count(CALL_HTTP_REQUEST), 1);
        assert!(Http::new(None, Some(b"not pem"), rec).is_err());
    }
}
