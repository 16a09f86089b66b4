//! Error classification for AWS calls.
//!
//! Every AWS failure is reduced to an [`AwsError`] whose [`AwsErrorKind`] drives the controller's
//! behaviour (not-found semantics, auth failures, throttling back-off). Messages carry the
//! operation, the AWS error code and AWS's message, never a secret value and never a request id
//! (request ids change on every call and would make status conditions churn).

use std::error::Error as StdError;
use std::fmt;
use std::time::Duration;

use aws_credential_types::provider::error::CredentialsError;
use aws_sdk_secretsmanager::error::{ProvideErrorMetadata, SdkError};

/// What kind of failure an AWS call produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AwsErrorKind {
    /// The secret or parameter (or version) does not exist, or the secret is scheduled for
    /// deletion.
    NotFound,
    /// Credentials are missing, invalid, expired, or the principal is not allowed.
    Auth,
    /// AWS is throttling this client.
    Throttled,
    /// The request or the store configuration is invalid.
    Invalid,
    /// Network problems and 5xx responses: retrying later may help.
    Transient,
}

/// A classified AWS provider error.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct AwsError {
    pub kind: AwsErrorKind,
    pub message: String,
    /// For throttling: how long esr will refrain from calling AWS again.
    pub retry_after: Option<Duration>,
}

impl AwsError {
    pub fn new(kind: AwsErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            retry_after: None,
        }
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(AwsErrorKind::NotFound, message)
    }
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(AwsErrorKind::Invalid, message)
    }
    pub fn auth(message: impl Into<String>) -> Self {
        Self::new(AwsErrorKind::Auth, message)
    }
    pub fn transient(message: impl Into<String>) -> Self {
        Self::new(AwsErrorKind::Transient, message)
    }
    pub fn throttled(message: impl Into<String>, retry_after: Duration) -> Self {
        Self {
            kind: AwsErrorKind::Throttled,
            message: message.into(),
            retry_after: Some(retry_after),
        }
    }
    pub fn is_not_found(&self) -> bool {
        self.kind == AwsErrorKind::NotFound
    }
}

/// AWS error codes meaning "credentials are bad" (as opposed to "not allowed").
const AUTH_CODES: &[&str] = &[
    "UnrecognizedClientException",
    "InvalidSignatureException",
    "SignatureDoesNotMatch",
    "IncompleteSignature",
    "InvalidClientTokenId",
    "ExpiredToken",
    "ExpiredTokenException",
    "MissingAuthenticationToken",
    "MissingAuthenticationTokenException",
    "AccessDeniedException",
    "AccessDenied",
    "NotAuthorized",
    "InvalidIdentityToken",
    "IDPRejectedClaim",
    "IDPCommunicationError",
    "RegionDisabledException",
    "DecryptionFailure",
];

const THROTTLE_CODES: &[&str] = &[
    "ThrottlingException",
    "Throttling",
    "TooManyRequestsException",
    "RequestLimitExceeded",
    "RequestThrottled",
    "RequestThrottledException",
    "SlowDown",
    "LimitExceededException",
];

/// Classify an AWS error code + message + HTTP status.
pub(crate) fn classify_code(code: &str, message: &str, status: Option<u16>) -> AwsErrorKind {
    // AWS says "marked for deletion"; moto says "marked deleted".
    // Parameter Store: ParameterNotFound / ParameterVersionNotFound.
    if matches!(
        code,
        "ResourceNotFoundException" | "ParameterNotFound" | "ParameterVersionNotFound"
    ) {
        return AwsErrorKind::NotFound;
    }
    if (code == "InvalidRequestException" || code == "InvalidParameterException")
        && (message.contains("marked for deletion") || message.contains("marked deleted"))
    {
        return AwsErrorKind::NotFound;
    }
    if THROTTLE_CODES.contains(&code) || status == Some(429) {
        return AwsErrorKind::Throttled;
    }
    if AUTH_CODES.contains(&code) || status == Some(401) || status == Some(403) {
        return AwsErrorKind::Auth;
    }
    if code == "InternalServiceError"
        || code == "InternalFailure"
        || code == "ServiceUnavailable"
        || status.is_some_and(|s| s >= 500)
    {
        return AwsErrorKind::Transient;
    }
    AwsErrorKind::Invalid
}

/// If the error chain contains a credentials-provider failure, the error to report for it.
/// The kind is Auth unless the credentials provider (e.g. STS) failed transiently or was throttled.
fn credentials_failure(op: &str, err: &(dyn StdError + 'static)) -> Option<AwsError> {
    let mut cur: Option<&(dyn StdError + 'static)> = Some(err);
    while let Some(e) = cur {
        if let Some(ce) = e.downcast_ref::<CredentialsError>() {
            let mut kind = AwsErrorKind::Auth;
            let mut inner: Option<&(dyn StdError + 'static)> = Some(ce);
            while let Some(i) = inner {
                if let Some(a) = i.downcast_ref::<AwsError>()
                    && matches!(a.kind, AwsErrorKind::Throttled | AwsErrorKind::Transient)
                {
                    kind = a.kind;
                }
                inner = i.source();
            }
            let mut out = AwsError::new(
                kind,
                format!(
                    "{op}: could not obtain AWS credentials: {}",
                    chain_message(ce)
                ),
            );
            if kind == AwsErrorKind::Throttled {
                out.retry_after = Some(Duration::from_secs(1));
            }
            return Some(out);
        }
        cur = e.source();
    }
    None
}

/// The error to report when resolving credentials failed outside an SDK call (store validation).
pub(crate) fn credentials_error(err: &CredentialsError) -> AwsError {
    credentials_failure("resolving credentials", err)
        .unwrap_or_else(|| AwsError::auth(chain_message(err)))
}

/// `a: b: c` for an error and its sources, deduplicating repeated texts.
pub(crate) fn chain_message(err: &(dyn StdError + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cur: Option<&(dyn StdError + 'static)> = Some(err);
    while let Some(e) = cur {
        let text = e.to_string();
        if !text.is_empty() && !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        cur = e.source();
    }
    parts.join(": ")
}

/// Classify the error of one SDK operation (Secrets Manager or STS).
pub(crate) fn from_sdk<E, R>(op: &str, err: &SdkError<E, R>) -> AwsError
where
    E: ProvideErrorMetadata + StdError + Send + Sync + 'static,
    R: fmt::Debug + HasStatus + Send + Sync + 'static,
{
    match err {
        SdkError::ServiceError(ctx) => {
            let e = ctx.err();
            let code = e.code().unwrap_or("UnknownError");
            let msg = e.message().unwrap_or("");
            let status = ctx.raw().status_code();
            let kind = classify_code(code, msg, status);
            let mut text = format!("{op}: {code}");
            if !msg.is_empty() {
                text.push_str(": ");
                text.push_str(msg);
            }
            if kind == AwsErrorKind::Throttled {
                AwsError::throttled(text, Duration::from_secs(1))
            } else {
                AwsError::new(kind, text)
            }
        }
        SdkError::TimeoutError(_) => AwsError::transient(format!("{op}: request timed out")),
        SdkError::DispatchFailure(df) => {
            if let Some(cred) = credentials_failure(op, err) {
                return cred;
            }
            let detail = df
                .as_connector_error()
                .map(|c| chain_message(c))
                .unwrap_or_else(|| chain_message(err));
            AwsError::transient(format!("{op}: cannot reach the AWS endpoint: {detail}"))
        }
        SdkError::ConstructionFailure(_) => {
            if let Some(cred) = credentials_failure(op, err) {
                return cred;
            }
            AwsError::invalid(format!(
                "{op}: could not build the request: {}",
                chain_message(err)
            ))
        }
        SdkError::ResponseError(_) => {
            AwsError::transient(format!("{op}: unreadable response: {}", chain_message(err)))
        }
        _ => {
            if let Some(cred) = credentials_failure(op, err) {
                return cred;
            }
            AwsError::transient(format!("{op}: {}", chain_message(err)))
        }
    }
}

/// Access to the HTTP status of a raw response, whatever its concrete type.
pub(crate) trait HasStatus {
    fn status_code(&self) -> Option<u16>;
}

impl HasStatus for aws_sdk_secretsmanager::config::http::HttpResponse {
    fn status_code(&self) -> Option<u16> {
        Some(self.status().as_u16())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_codes() {
        assert_eq!(
            classify_code("ResourceNotFoundException", "x", Some(400)),
            AwsErrorKind::NotFound
        );
        assert_eq!(
            classify_code(
                "InvalidRequestException",
                "You can't perform this operation on the secret because it was marked for deletion.",
                Some(400)
            ),
            AwsErrorKind::NotFound
        );
        assert_eq!(
            classify_code("InvalidRequestException", "other", Some(400)),
            AwsErrorKind::Invalid
        );
        assert_eq!(
            classify_code("ThrottlingException", "Rate exceeded", Some(400)),
            AwsErrorKind::Throttled
        );
        assert_eq!(
            classify_code("Whatever", "", Some(429)),
            AwsErrorKind::Throttled
        );
        assert_eq!(
            classify_code("UnrecognizedClientException", "bad token", Some(400)),
            AwsErrorKind::Auth
        );
        assert_eq!(
            classify_code("AccessDeniedException", "", Some(400)),
            AwsErrorKind::Auth
        );
        assert_eq!(
            classify_code("InternalServiceError", "", Some(500)),
            AwsErrorKind::Transient
        );
        assert_eq!(classify_code("X", "", Some(503)), AwsErrorKind::Transient);
        for code in ["ParameterNotFound", "ParameterVersionNotFound"] {
            assert_eq!(classify_code(code, "", Some(400)), AwsErrorKind::NotFound);
        }
    }
}
