//! Clouds, endpoints and provider-wide options (test overrides).

use std::sync::Arc;

use azure_core::cloud::{CloudConfiguration, CustomConfiguration};
use azure_core::http::{ClientOptions, ExponentialRetryOptions, RetryOptions, Transport};
use esr_api::providers::azurekv::AzureEnvironmentType;
use esr_provider::{ProviderError, Result};

/// Env var: a PEM file with extra CA certificates the provider trusts (test-only; e2e uses it
/// to make the esr binary trust the test server's self-signed CA).
pub const ENV_EXTRA_CA_FILE: &str = "ESR_AZURE_EXTRA_CA_FILE";
/// Env var: overrides the Microsoft Entra authority host of every cloud (test-only).
pub const ENV_AUTHORITY_HOST: &str = "ESR_AZURE_AUTHORITY_HOST";
/// Env var: `1`/`true` disables the check that the challenge's resource matches the vault's
/// domain (test-only: a vault on `127.0.0.1` cannot match `vault.azure.net`).
pub const ENV_SKIP_CHALLENGE_RESOURCE_CHECK: &str = "ESR_AZURE_SKIP_CHALLENGE_RESOURCE_CHECK";

/// The Entra authority host and the Key Vault resource of a cloud (ESO's
/// `AadEndpointForType` / `kvResourceForProviderConfig`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CloudEndpoints {
    /// Entra (login) endpoint, e.g. `https://login.microsoftonline.com`.
    pub authority_host: &'static str,
    /// Key Vault resource, e.g. `https://vault.azure.net`; the token scope is `<resource>/.default`.
    pub key_vault_resource: &'static str,
}

impl CloudEndpoints {
    /// The OAuth scope for Key Vault in this cloud.
    pub fn scope(&self) -> String {
        format!("{}/.default", self.key_vault_resource)
    }
}

/// Endpoints of a cloud. `AzureStackCloud` has none (it needs `customCloudConfig`).
pub fn cloud_endpoints(env: AzureEnvironmentType) -> Option<CloudEndpoints> {
    let (authority_host, key_vault_resource) = match env {
        AzureEnvironmentType::PublicCloud => (
            "https://login.microsoftonline.com",
            "https://vault.azure.net",
        ),
        AzureEnvironmentType::UsGovernmentCloud => (
            "https://login.microsoftonline.us",
            "https://vault.usgovcloudapi.net",
        ),
        AzureEnvironmentType::ChinaCloud => {
            ("https://login.chinacloudapi.cn", "https://vault.azure.cn")
        }
        AzureEnvironmentType::GermanCloud => (
            "https://login.microsoftonline.de",
            "https://vault.microsoftazure.de",
        ),
        AzureEnvironmentType::AzureStackCloud => return None,
    };
    Some(CloudEndpoints {
        authority_host,
        key_vault_resource,
    })
}

/// Provider-wide options. The defaults are right for production; the fields exist for tests.
#[derive(Clone, Default)]
pub struct AzureOptions {
    /// Extra trusted CA certificates (PEM).
    pub extra_ca_pem: Option<Vec<u8>>,
    /// Overrides the authority host of every cloud (must be https).
    pub authority_host: Option<String>,
    /// Disables the challenge-resource check of the Key Vault clients.
    pub skip_challenge_resource_check: bool,
}

impl std::fmt::Debug for AzureOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AzureOptions")
            .field("extra_ca", &self.extra_ca_pem.is_some())
            .field("authority_host", &self.authority_host)
            .field(
                "skip_challenge_resource_check",
                &self.skip_challenge_resource_check,
            )
            .finish()
    }
}

impl AzureOptions {
    /// Options from the (test-only) env vars [`ENV_EXTRA_CA_FILE`], [`ENV_AUTHORITY_HOST`] and
    /// [`ENV_SKIP_CHALLENGE_RESOURCE_CHECK`].
    pub fn from_env() -> Result<Self> {
        let mut o = AzureOptions::default();
        if let Ok(path) = std::env::var(ENV_EXTRA_CA_FILE)
            && !path.is_empty()
        {
            let pem = std::fs::read(&path).map_err(|e| {
                ProviderError::invalid(format!("{ENV_EXTRA_CA_FILE}: cannot read {path}: {e}"))
            })?;
            o.extra_ca_pem = Some(pem);
        }
        if let Ok(host) = std::env::var(ENV_AUTHORITY_HOST)
            && !host.is_empty()
        {
            o.authority_host = Some(host);
        }
        if let Ok(v) = std::env::var(ENV_SKIP_CHALLENGE_RESOURCE_CHECK) {
            o.skip_challenge_resource_check = matches!(v.as_str(), "1" | "true" | "yes");
        }
        Ok(o)
    }

    /// The HTTP transport: the SDK default, or a reqwest client trusting the extra CAs.
    pub fn transport(&self) -> Result<Option<Transport>> {
        let Some(pem) = &self.extra_ca_pem else {
            return Ok(None);
        };
        let certs = reqwest::Certificate::from_pem_bundle(pem)
            .map_err(|e| ProviderError::invalid(format!("invalid extra CA bundle: {e}")))?;
        let mut b = reqwest::Client::builder();
        for c in certs {
            b = b.add_root_certificate(c);
        }
        let client = b
            .build()
            .map_err(|e| ProviderError::invalid(format!("cannot build HTTP client: {e}")))?;
        Ok(Some(Transport::new(Arc::new(client))))
    }

    /// Client options for a cloud: transport plus the authority host (overridden or the cloud's).
    pub fn client_options(
        &self,
        transport: Option<Transport>,
        authority_host: &str,
    ) -> ClientOptions {
        let host = self.authority_host.as_deref().unwrap_or(authority_host);
        let mut custom = CustomConfiguration::default();
        custom.authority_host = host.trim_end_matches('/').to_string();
        let cloud: CloudConfiguration = custom.into();
        ClientOptions {
            transport,
            cloud: Some(Arc::new(cloud)),
            retry: retry_options(),
            ..Default::default()
        }
    }
}

/// SDK retries: a few quick attempts (200 ms, 400 ms, 800 ms; at most 10 s per call) instead of
/// the SDK default of 8 retries over up to 60 s, so a broken store fails a reconcile quickly and
/// the controller's own back-off takes over.
pub fn retry_options() -> RetryOptions {
    RetryOptions::exponential(ExponentialRetryOptions {
        initial_delay: time::Duration::milliseconds(200),
        max_retries: 3,
        max_total_elapsed: time::Duration::seconds(10),
        max_delay: time::Duration::seconds(2),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clouds() {
        let p = cloud_endpoints(AzureEnvironmentType::PublicCloud);
        assert_eq!(
            p.map(|e| e.scope()),
            Some("https://vault.azure.net/.default".to_string())
        );
        assert_eq!(
            cloud_endpoints(AzureEnvironmentType::UsGovernmentCloud).map(|e| e.authority_host),
            Some("https://login.microsoftonline.us")
        );
        assert_eq!(
            cloud_endpoints(AzureEnvironmentType::ChinaCloud).map(|e| e.key_vault_resource),
            Some("https://vault.azure.cn")
        );
        assert_eq!(
            cloud_endpoints(AzureEnvironmentType::GermanCloud).map(|e| e.authority_host),
            Some("https://login.microsoftonline.de")
        );
        assert_eq!(cloud_endpoints(AzureEnvironmentType::AzureStackCloud), None);
    }

    #[test]
    fn authority_override() {
        let o = AzureOptions {
            authority_host: Some("https://127.0.0.1:1/".into()),
            ..Default::default()
        };
        let co = o.client_options(None, "https://login.microsoftonline.com");
        match co.cloud.as_deref() {
            Some(CloudConfiguration::Custom(c)) => {
                assert_eq!(c.authority_host, "https://127.0.0.1:1")
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(o.transport().ok().flatten().is_none());
    }
}
