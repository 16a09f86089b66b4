//! Typed provider errors.
//!
//! Every backend maps its failures onto a small set of [`ErrorKind`]s. The controller only looks at the
//! kind: [`ErrorKind::NotFound`] is ESO's `NoSecretErr` (text `Secret does not exist`) and drives the
//! `deletionPolicy` logic; [`ErrorKind::Throttled`] carries an optional retry-after hint. The message is
//! what ESO would print (it ends up in events and conditions), so it never contains a secret value.
//! The context (provider, call, key) is kept apart from the message and shown only by
//! [`ProviderError::detailed`].

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// The text of ESO's `NoSecretErr`.
pub const NO_SECRET_MESSAGE: &str = "Secret does not exist";

/// Result type used by providers.
pub type Result<T, E = ProviderError> = std::result::Result<T, E>;

/// What went wrong, as far as the controller needs to know.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorKind {
    /// The remote secret (or the selected version / property) does not exist: ESO's `NoSecretErr`.
    NotFound,
    /// Authentication or authorisation failed (bad or missing credentials, access denied).
    Auth,
    /// The backend is rate-limiting us.
    Throttled,
    /// The request or the store configuration is invalid (bad JSON, missing property, bad regexp, a
    /// credential reference that points nowhere, ...).
    Invalid,
    /// A temporary failure (network, 5xx, timeouts). Retrying later may succeed.
    Transient,
    /// The operation is not supported by this provider or in this mode.
    Unsupported,
}

impl ErrorKind {
    /// A stable snake_case label, usable as a metric label value.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "not_found",
            ErrorKind::Auth => "auth",
            ErrorKind::Throttled => "throttled",
            ErrorKind::Invalid => "invalid",
            ErrorKind::Transient => "transient",
            ErrorKind::Unsupported => "unsupported",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A provider error: a kind, an ESO-compatible message, optional context and an optional source.
///
/// `Display` prints only the message (exactly what ESO would print), so wrapping it in
/// `error processing spec.data[0] (key: k), err: {e}` gives ESO's text. The error is one pointer wide.
#[derive(Clone, Debug, thiserror::Error)]
#[error(transparent)]
pub struct ProviderError(Box<Inner>);

#[derive(Clone, Debug, thiserror::Error)]
#[error("{message}")]
struct Inner {
    kind: ErrorKind,
    message: String,
    retry_after: Option<Duration>,
    provider: Option<Cow<'static, str>>,
    call: Option<Cow<'static, str>>,
    key: Option<String>,
    #[source]
    source: Option<Arc<dyn std::error::Error + Send + Sync + 'static>>,
}

impl ProviderError {
    /// A new error of the given kind. The message must not contain secret values.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        ProviderError(Box::new(Inner {
            kind,
            message: message.into(),
            retry_after: None,
            provider: None,
            call: None,
            key: None,
            source: None,
        }))
    }

    /// ESO's `NoSecretErr`: `Secret does not exist`.
    pub fn not_found() -> Self {
        Self::new(ErrorKind::NotFound, NO_SECRET_MESSAGE)
    }

    /// A not-found error with a custom message (still treated as `NoSecretErr` by the controller).
    pub fn not_found_msg(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, message)
    }

    /// An authentication / authorisation error.
    pub fn auth(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Auth, message)
    }

    /// A throttling error, with the backend's retry-after hint if it gave one.
    pub fn throttled(message: impl Into<String>, retry_after: Option<Duration>) -> Self {
        let mut e = Self::new(ErrorKind::Throttled, message);
        e.0.retry_after = retry_after;
        e
    }

    /// A bad request or bad configuration.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Invalid, message)
    }

    /// A temporary failure.
    pub fn transient(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Transient, message)
    }

    /// An unsupported operation.
    pub fn unsupported(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unsupported, message)
    }

    /// Sets the provider (metric provider label, e.g. `AWS/SecretsManager`).
    #[must_use]
    pub fn with_provider(mut self, provider: impl Into<Cow<'static, str>>) -> Self {
        self.0.provider = Some(provider.into());
        self
    }

    /// Sets the API call (e.g. `GetSecretValue`).
    #[must_use]
    pub fn with_call(mut self, call: impl Into<Cow<'static, str>>) -> Self {
        self.0.call = Some(call.into());
        self
    }

    /// Sets the remote key the error is about (a name, never a value).
    #[must_use]
    pub fn with_key(mut self, key: impl Into<String>) -> Self {
        self.0.key = Some(key.into());
        self
    }

    /// Sets the underlying error. It must not carry secret values in its `Display`.
    #[must_use]
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.0.source = Some(Arc::new(source));
        self
    }

    /// Sets a retry-after hint.
    #[must_use]
    pub fn with_retry_after(mut self, retry_after: Duration) -> Self {
        self.0.retry_after = Some(retry_after);
        self
    }

    /// Replaces the message, keeping kind and context (used to wrap with ESO's prefixes).
    #[must_use]
    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.0.message = message.into();
        self
    }

    /// Prefixes the message: `"{prefix}: {message}"`, like Go's `fmt.Errorf("prefix: %w", err)`.
    #[must_use]
    pub fn wrap(mut self, prefix: impl fmt::Display) -> Self {
        self.0.message = format!("{prefix}: {}", self.0.message);
        self
    }

    /// The error kind.
    pub fn kind(&self) -> ErrorKind {
        self.0.kind
    }

    /// True for ESO's `NoSecretErr`.
    pub fn is_not_found(&self) -> bool {
        self.0.kind == ErrorKind::NotFound
    }

    /// True when the backend throttled us.
    pub fn is_throttled(&self) -> bool {
        self.0.kind == ErrorKind::Throttled
    }

    /// The label for this error's kind in metrics (`not_found`, `auth`, ...).
    pub fn metric_label(&self) -> &'static str {
        self.0.kind.as_str()
    }

    /// The message alone (what `Display` prints).
    pub fn message(&self) -> &str {
        &self.0.message
    }

    /// Retry-after hint for throttling errors.
    pub fn retry_after(&self) -> Option<Duration> {
        self.0.retry_after
    }

    /// Provider context, if set.
    pub fn provider(&self) -> Option<&str> {
        self.0.provider.as_deref()
    }

    /// Call context, if set.
    pub fn call(&self) -> Option<&str> {
        self.0.call.as_deref()
    }

    /// Key context, if set.
    pub fn key(&self) -> Option<&str> {
        self.0.key.as_deref()
    }

    /// The message with its context, for logs: `[aws GetSecretValue key=db] <message>`.
    pub fn detailed(&self) -> String {
        let mut ctx = Vec::new();
        if let Some(p) = &self.0.provider {
            ctx.push(p.to_string());
        }
        if let Some(c) = &self.0.call {
            ctx.push(c.to_string());
        }
        if let Some(k) = &self.0.key {
            ctx.push(format!("key={k}"));
        }
        ctx.push(format!("kind={}", self.0.kind));
        if let Some(r) = self.0.retry_after {
            ctx.push(format!("retry_after={}s", r.as_secs()));
        }
        format!("[{}] {}", ctx.join(" "), self.0.message)
    }
}

/// Maps a Kubernetes API error onto a provider error. The message is the API server's message (for a
/// 404 on a Secret that is `secrets "x" not found`), as client-go would print it.
///
/// Note that a Kubernetes 404 maps to [`ErrorKind::Invalid`] by default, NOT to `NotFound`: a missing
/// credential Secret must never look like a missing remote secret (which would trigger deletionPolicy).
/// Callers for which a 404 really means "remote secret missing" check [`kube_status_code`] themselves.
pub fn from_kube_error(err: kube::Error) -> ProviderError {
    match &err {
        kube::Error::Api(status) => {
            let code = status.code;
            let message = if status.message.is_empty() {
                format!("kubernetes API error (HTTP {code})")
            } else {
                status.message.clone()
            };
            let kind = match code {
                401 | 403 => ErrorKind::Auth,
                429 => ErrorKind::Throttled,
                400 | 404 | 422 => ErrorKind::Invalid,
                _ => ErrorKind::Transient,
            };
            ProviderError::new(kind, message)
        }
        kube::Error::Auth(e) => ProviderError::auth(e.to_string()),
        _ => ProviderError::transient(err.to_string()),
    }
}

/// The HTTP status code of a Kubernetes API error, if it is one.
pub fn kube_status_code(err: &kube::Error) -> Option<u16> {
    match err {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_is_eso_no_secret_err() {
        let e = ProviderError::not_found();
        assert!(e.is_not_found());
        assert_eq!(e.to_string(), "Secret does not exist");
        assert_eq!(e.kind(), ErrorKind::NotFound);
        assert_eq!(e.metric_label(), "not_found");
    }

    #[test]
    fn display_is_message_only_and_context_is_separate() {
        let e = ProviderError::auth("access denied")
            .with_provider("AWS/SecretsManager")
            .with_call("GetSecretValue")
            .with_key("db-creds");
        assert_eq!(e.to_string(), "access denied");
        assert_eq!(e.provider(), Some("AWS/SecretsManager"));
        assert_eq!(e.call(), Some("GetSecretValue"));
        assert_eq!(e.key(), Some("db-creds"));
        assert_eq!(
            e.detailed(),
            "[AWS/SecretsManager GetSecretValue key=db-creds kind=auth] access denied"
        );
        assert!(!e.is_not_found());
    }

    #[test]
    fn throttled_keeps_retry_after() {
        let e = ProviderError::throttled("slow down", Some(Duration::from_secs(3)));
        assert!(e.is_throttled());
        assert_eq!(e.retry_after(), Some(Duration::from_secs(3)));
        assert_eq!(e.metric_label(), "throttled");
    }

    #[test]
    fn wrap_prefixes_like_go() {
        let e = ProviderError::invalid("bad").wrap("unable to unmarshal secret");
        assert_eq!(e.to_string(), "unable to unmarshal secret: bad");
        assert_eq!(e.kind(), ErrorKind::Invalid);
    }

    #[test]
    fn source_is_exposed() {
        let io = std::io::Error::other("boom");
        let e = ProviderError::transient("network").with_source(io);
        let src = std::error::Error::source(&e).map(|s| s.to_string());
        assert_eq!(src.as_deref(), Some("boom"));
    }

    fn api_err(code: u16, msg: &str) -> kube::Error {
        let status = kube::core::Status {
            code,
            message: msg.to_string(),
            ..Default::default()
        };
        kube::Error::Api(Box::new(status))
    }

    #[test]
    fn kube_errors_map_to_kinds() {
        assert_eq!(
            from_kube_error(api_err(403, "forbidden")).kind(),
            ErrorKind::Auth
        );
        assert_eq!(
            from_kube_error(api_err(401, "nope")).kind(),
            ErrorKind::Auth
        );
        assert_eq!(
            from_kube_error(api_err(429, "slow")).kind(),
            ErrorKind::Throttled
        );
        assert_eq!(
            from_kube_error(api_err(500, "x")).kind(),
            ErrorKind::Transient
        );
        let nf = from_kube_error(api_err(404, "secrets \"x\" not found"));
        assert_eq!(nf.kind(), ErrorKind::Invalid);
        assert_eq!(nf.to_string(), "secrets \"x\" not found");
        assert_eq!(kube_status_code(&api_err(404, "")), Some(404));
    }
}
