//! Google Cloud client errors → [`ProviderError`].
//!
//! Only a well-formed Google error with status `NOT_FOUND` is ESO's `NoSecretErr`: a bare 404
//! without a Google error body (a proxy, a wrong endpoint) and an answer that cannot be decoded
//! (a 200 with garbage) are errors, never an empty or missing secret. Messages carry the call,
//! the resource name and Google's status and message, which never contain secret values.

use esr_provider::ProviderError;
use google_cloud_gax::error::Error as GaxError;
use google_cloud_gax::error::rpc::Code;

use crate::METRIC_PROVIDER;

/// True for a well-formed `NOT_FOUND` answer.
pub fn is_not_found(e: &GaxError) -> bool {
    e.status().is_some_and(|s| s.code == Code::NotFound)
}

/// True for a `FAILED_PRECONDITION` saying that the version is disabled or destroyed.
pub fn is_destroyed_or_disabled(e: &GaxError) -> bool {
    e.status().is_some_and(|s| {
        s.code == Code::FailedPrecondition
            && (s.message.contains("DESTROYED state") || s.message.contains("DISABLED state"))
    })
}

/// The first line of every error in the chain, deduplicated.
fn chain_text(e: &(dyn std::error::Error + 'static)) -> String {
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

/// Converts a client error. `call` is ESO's call label, `name` the resource name.
pub fn map_error(e: GaxError, call: &'static str, name: &str) -> ProviderError {
    let err = if let Some(st) = e.status() {
        let text = format!("{call} {name}: {:?}: {}", st.code, st.message);
        match st.code {
            Code::NotFound => ProviderError::not_found(),
            Code::PermissionDenied => ProviderError::auth(format!(
                "{text} (the identity needs a Secret Manager role such as \
                 roles/secretmanager.secretAccessor on the secret or the project)"
            )),
            Code::Unauthenticated => ProviderError::auth(text),
            Code::ResourceExhausted => ProviderError::throttled(text, None),
            Code::Unavailable | Code::Internal | Code::DeadlineExceeded | Code::Aborted => {
                ProviderError::transient(text)
            }
            _ => ProviderError::invalid(text),
        }
    } else if e.is_authentication() {
        ProviderError::auth(format!(
            "{call} {name}: cannot get a Google access token: {}",
            chain_text(&e)
        ))
    } else if let Some(code) = e.http_status_code() {
        // An HTTP error without a Google error body.
        let text = format!("{call} {name}: HTTP {code} without a Google API error body");
        match code {
            401 | 403 => ProviderError::auth(text),
            429 => ProviderError::throttled(text, None),
            _ => ProviderError::transient(text),
        }
    } else if e.is_deserialization() {
        ProviderError::transient(format!(
            "{call} {name}: the Secret Manager answer cannot be decoded: {}",
            chain_text(&e)
        ))
    } else {
        ProviderError::transient(format!("{call} {name}: {}", chain_text(&e)))
    };
    err.with_provider(METRIC_PROVIDER)
        .with_call(call)
        .with_key(name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use google_cloud_gax::error::rpc::Status;

    #[test]
    fn only_a_google_not_found_is_not_found() {
        let nf = GaxError::service(
            Status::default()
                .set_code(Code::NotFound)
                .set_message("gone"),
        );
        assert!(is_not_found(&nf));
        assert!(map_error(nf, "AccessSecretVersion", "projects/p/secrets/x").is_not_found());

        let bare = GaxError::http(404, Default::default(), bytes_of("<html>nope</html>"));
        assert!(!is_not_found(&bare));
        let e = map_error(bare, "AccessSecretVersion", "projects/p/secrets/x");
        assert!(!e.is_not_found());
        assert_eq!(e.kind(), esr_provider::ErrorKind::Transient);

        let denied = GaxError::service(
            Status::default()
                .set_code(Code::PermissionDenied)
                .set_message("Permission 'secretmanager.versions.access' denied"),
        );
        let e = map_error(denied, "AccessSecretVersion", "projects/p/secrets/x");
        assert_eq!(e.kind(), esr_provider::ErrorKind::Auth);
        assert!(e.to_string().contains("secretAccessor"), "{e}");

        let disabled = GaxError::service(
            Status::default()
                .set_code(Code::FailedPrecondition)
                .set_message(
                    "Secret Version [projects/1/secrets/x/versions/2] is in DISABLED state.",
                ),
        );
        assert!(is_destroyed_or_disabled(&disabled));
    }

    fn bytes_of(s: &str) -> ::bytes::Bytes {
        ::bytes::Bytes::from(s.to_string())
    }
}
