//! Azure SDK errors → [`ProviderError`].
//!
//! Messages name the call, the object and Azure's error code/message (which never contain secret
//! values). 404 is ESO's `NoSecretErr`; 401/403 are auth errors with a hint about RBAC roles.

use azure_core::error::ErrorKind as AzKind;
use azure_core::http::StatusCode;
use esr_provider::{ErrorKind, ProviderError};

use crate::METRIC_PROVIDER;

/// Azure's error body: `{"error":{"code":"...","message":"..."}}`.
#[derive(serde::Deserialize, Default)]
struct ErrorBody {
    #[serde(default)]
    error: ErrorDetail,
}

#[derive(serde::Deserialize, Default)]
struct ErrorDetail {
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

/// The HTTP status of an SDK error, if it came from a response.
pub fn status(e: &azure_core::Error) -> Option<StatusCode> {
    e.http_status()
}

/// True for a 404.
pub fn is_not_found(e: &azure_core::Error) -> bool {
    status(e) == Some(StatusCode::NotFound)
}

/// Converts an SDK error. `call` is the API call (e.g. `GetSecret`), `object` the object name.
pub fn map_error(e: azure_core::Error, call: &'static str, object: &str) -> ProviderError {
    let (status, code, message, retry_after) = match e.kind() {
        AzKind::HttpResponse {
            status,
            error_code,
            raw_response,
        } => {
            let body: ErrorBody = raw_response
                .as_ref()
                .and_then(|r| serde_json::from_slice(r.body().as_ref()).ok())
                .unwrap_or_default();
            let retry_after = raw_response.as_ref().and_then(|r| {
                r.headers()
                    .get_optional_str(&azure_core::http::headers::RETRY_AFTER)
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .map(std::time::Duration::from_secs)
            });
            (
                Some(*status),
                body.error.code.or_else(|| error_code.clone()),
                body.error.message,
                retry_after,
            )
        }
        _ => (None, None, None, None),
    };
    let detail = match (&code, &message) {
        (Some(c), Some(m)) => format!("{c}: {m}"),
        (None, Some(m)) => m.clone(),
        (_, None) => {
            let first = chain_text(&e);
            match &code {
                Some(c) if !first.contains(c.as_str()) => format!("{c}: {first}"),
                _ => first,
            }
        }
    };
    let base = match status {
        Some(s) => format!("{call} {object:?}: {} {detail}", u16::from(s)),
        None => format!("{call} {object:?}: {detail}"),
    };
    let err = match (status, e.kind()) {
        (Some(StatusCode::NotFound), _) => ProviderError::not_found(),
        (Some(StatusCode::Forbidden), _) => ProviderError::auth(format!(
            "{base} (access denied: the identity needs a Key Vault data-plane role such as \
             \"Key Vault Secrets User\" on the vault, or an access policy allowing this operation)"
        )),
        (Some(StatusCode::Unauthorized), _) => {
            ProviderError::auth(format!("{base} (authentication failed)"))
        }
        (Some(StatusCode::TooManyRequests), _) => ProviderError::throttled(base, retry_after),
        (Some(s), _) if s.is_server_error() => ProviderError::transient(base),
        (Some(_), _) => ProviderError::invalid(base),
        (None, AzKind::Credential) => ProviderError::auth(format!(
            "{call} {object:?}: cannot get an Azure access token: {}",
            chain_text(&e)
        )),
        (None, AzKind::Io | AzKind::Connection) => ProviderError::transient(base),
        (None, _) => ProviderError::new(ErrorKind::Transient, base),
    };
    err.with_provider(METRIC_PROVIDER)
        .with_call(call)
        .with_key(object.to_string())
}

fn chain_text(e: &azure_core::Error) -> String {
    // The identity crate wraps Entra's answer (AADSTS code and description); neither that nor the
    // wrappers contain the client secret or the assertion. Walk the chain and keep every distinct
    // first line.
    let mut parts: Vec<String> = Vec::new();
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        let line = err
            .to_string()
            .lines()
            .next()
            .unwrap_or("")
            .trim()
            .to_string();
        if !line.is_empty() && !parts.iter().any(|p| p.contains(&line)) {
            parts.push(line);
        }
        cur = err.source();
    }
    parts.join(": ")
}
