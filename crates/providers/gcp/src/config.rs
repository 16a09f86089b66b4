//! Endpoints and provider-wide options (test overrides).
//!
//! In production the client talks to `https://secretmanager.googleapis.com` (global secrets) or
//! `https://secretmanager.<location>.rep.googleapis.com` (regional secrets, `location` set), and
//! workload identity exchanges tokens at `https://sts.googleapis.com/v1/token`. The TLS roots are
//! the system's (`SSL_CERT_FILE` / `SSL_CERT_DIR` replace them, as for any rustls-native-certs
//! client); tests use that to trust their test server's CA.

use std::time::Duration;

use esr_provider::{ProviderError, Result};
use google_cloud_gax::retry_policy::{Aip194Strict, RetryPolicyExt};

/// Env var: replaces the Secret Manager endpoint of every store (test-only).
pub const ENV_SECRETMANAGER_ENDPOINT: &str = "ESR_GCP_SECRETMANAGER_ENDPOINT";
/// Env var: replaces the STS token-exchange URL (test-only).
pub const ENV_STS_URL: &str = "ESR_GCP_STS_URL";

/// The STS token-exchange endpoint.
pub const STS_TOKEN_URL: &str = "https://sts.googleapis.com/v1/token";
/// The OAuth scope of every token.
pub const CLOUD_PLATFORM_SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";

/// The Secret Manager endpoint of a store: regional when `location` is set.
pub fn endpoint(location: Option<&str>) -> String {
    match location.filter(|l| !l.is_empty()) {
        Some(l) => format!("https://secretmanager.{l}.rep.googleapis.com"),
        None => "https://secretmanager.googleapis.com".to_string(),
    }
}

/// Provider-wide options. The defaults are right for production; the fields exist for tests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GcpOptions {
    /// Replaces the Secret Manager endpoint (global and regional).
    pub secretmanager_endpoint: Option<String>,
    /// Replaces the STS token URL.
    pub sts_url: Option<String>,
}

impl GcpOptions {
    /// Options from the (test-only) env vars [`ENV_SECRETMANAGER_ENDPOINT`] and [`ENV_STS_URL`].
    pub fn from_env() -> Result<Self> {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let o = GcpOptions {
            secretmanager_endpoint: var(ENV_SECRETMANAGER_ENDPOINT),
            sts_url: var(ENV_STS_URL),
        };
        for u in [&o.secretmanager_endpoint, &o.sts_url]
            .into_iter()
            .flatten()
        {
            if !u.starts_with("https://") {
                return Err(ProviderError::invalid(format!(
                    "{ENV_SECRETMANAGER_ENDPOINT}/{ENV_STS_URL} must be https URLs, got {u:?}"
                )));
            }
        }
        Ok(o)
    }

    /// The Secret Manager endpoint for a store's `location`.
    pub fn endpoint(&self, location: Option<&str>) -> String {
        self.secretmanager_endpoint
            .clone()
            .unwrap_or_else(|| endpoint(location))
    }

    /// The STS token URL.
    pub fn sts_url(&self) -> String {
        self.sts_url
            .clone()
            .unwrap_or_else(|| STS_TOKEN_URL.to_string())
    }
}

/// Client retries: transient errors (`UNAVAILABLE`, ...) are retried a few times within 10 s,
/// instead of the client default of 10 attempts over up to 60 s, so a broken store fails a
/// reconcile quickly and the controller's own back-off takes over.
pub fn retry_policy() -> impl google_cloud_gax::retry_policy::RetryPolicy {
    Aip194Strict
        .with_attempt_limit(3)
        .with_time_limit(Duration::from_secs(10))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints() {
        assert_eq!(endpoint(None), "https://secretmanager.googleapis.com");
        assert_eq!(endpoint(Some("")), "https://secretmanager.googleapis.com");
        assert_eq!(
            endpoint(Some("europe-west1")),
            "https://secretmanager.europe-west1.rep.googleapis.com"
        );
        let o = GcpOptions {
            secretmanager_endpoint: Some("https://127.0.0.1:1".into()),
            sts_url: None,
        };
        assert_eq!(o.endpoint(Some("x")), "https://127.0.0.1:1");
        assert_eq!(o.sts_url(), STS_TOKEN_URL);
    }
}
