//! The `azurekv` [`Provider`].

use std::sync::Arc;

use azure_security_keyvault_certificates::{CertificateClient, CertificateClientOptions};
use azure_security_keyvault_keys::{KeyClient, KeyClientOptions};
use azure_security_keyvault_secrets::{SecretClient, SecretClientOptions};
use esr_api::providers::azurekv::{AzureEnvironmentType, AzureKvProvider};
use esr_provider::refs::{
    validate_referent_secret_selector, validate_referent_service_account_selector,
};
use esr_provider::{
    Capabilities, ClientContext, Provider, ProviderError, Result, SecretsClient, StoreInfo,
};

use crate::auth::{build_credential, credential_fingerprint, is_referent};
use crate::cache::{self, ClientCache};
use crate::client::{AzureKvClient, VaultClients};
use crate::config::AzureOptions;
use crate::{METRIC_PROVIDER, PROVIDER_KEY};

/// The `azurekv` provider.
#[derive(Debug, Clone)]
pub struct AzureKeyVaultProvider {
    opts: std::result::Result<AzureOptions, ProviderError>,
    cache: ClientCache<VaultClients>,
}

impl Default for AzureKeyVaultProvider {
    fn default() -> Self {
        Self::new(AzureOptions::default())
    }
}

impl AzureKeyVaultProvider {
    /// A provider with explicit options.
    pub fn new(opts: AzureOptions) -> Self {
        AzureKeyVaultProvider {
            opts: Ok(opts),
            cache: ClientCache::default(),
        }
    }

    /// A provider configured by the test-only env vars of [`crate::config`]. A bad value is
    /// reported when a client is built.
    pub fn from_env() -> Self {
        AzureKeyVaultProvider {
            opts: AzureOptions::from_env(),
            cache: ClientCache::default(),
        }
    }

    /// The client cache (shared by clones of this provider).
    pub fn client_cache(&self) -> &ClientCache<VaultClients> {
        &self.cache
    }

    /// The clients for a store: reused from the cache when the store, its spec and the credential
    /// material are unchanged, else built (and cached).
    async fn vault_clients(
        &self,
        ctx: &ClientContext<'_>,
        p: &AzureKvProvider,
        opts: &AzureOptions,
    ) -> Result<Arc<VaultClients>> {
        let key = match credential_fingerprint(ctx, p).await {
            Some(fp) => {
                let spec = serde_json::to_string(p).unwrap_or_default();
                let store_ns = ctx.store.namespace.clone().unwrap_or_default();
                Some(cache::key(&[
                    ctx.store.kind.as_str(),
                    &ctx.store.name,
                    ctx.store.uid.as_deref().unwrap_or_default(),
                    &store_ns,
                    ctx.namespace.unwrap_or_default(),
                    &spec,
                    &fp,
                ]))
            }
            None => None,
        };
        if let Some(k) = &key
            && let Some(c) = self.cache.get(k)
        {
            return Ok(c);
        }
        let built = Arc::new(build_vault_clients(ctx, p, opts).await?);
        if let Some(k) = key {
            self.cache.insert(k, built.clone());
        }
        Ok(built)
    }

    fn spec(store: &StoreInfo) -> Result<AzureKvProvider> {
        store.provider_spec::<AzureKvProvider>(PROVIDER_KEY)
    }
}

/// ESO's `ValidateStore` for `azurekv`.
pub fn validate_spec(store: &StoreInfo, p: &AzureKvProvider) -> Result<Vec<String>> {
    if let Some(a) = &p.auth_secret_ref {
        if let Some(s) = &a.client_id {
            validate_referent_secret_selector(store, s.namespace.as_deref())
                .map_err(|e| e.wrap("invalid AuthSecretRef.ClientID"))?;
        }
        if let Some(s) = &a.client_secret {
            validate_referent_secret_selector(store, s.namespace.as_deref())
                .map_err(|e| e.wrap("invalid AuthSecretRef.ClientSecret"))?;
        }
    }
    if let Some(sa) = &p.service_account_ref {
        validate_referent_service_account_selector(store, sa.namespace.as_deref())
            .map_err(|e| e.wrap("invalid ServiceAccountRef"))?;
    }
    if let Some(c) = &p.custom_cloud_config {
        if !p.use_azure_sdk.unwrap_or(false) {
            return Err(ProviderError::invalid(
                "CustomCloudConfig requires UseAzureSDK to be set to true - the legacy SDK does not support custom clouds",
            ));
        }
        if c.active_directory_endpoint.is_empty() {
            return Err(ProviderError::invalid(
                "activeDirectoryEndpoint is required in CustomCloudConfig",
            ));
        }
    }
    if p.environment_type == Some(AzureEnvironmentType::AzureStackCloud)
        && p.custom_cloud_config.is_none()
    {
        return Err(ProviderError::invalid(
            "CustomCloudConfig is required when EnvironmentType is AzureStackCloud",
        ));
    }
    if p.vault_url.is_empty() {
        return Err(ProviderError::invalid("vaultUrl is required"));
    }
    crate::auth::check_controller_identity(store, p)?;
    Ok(vec![])
}

/// Builds the three Key Vault clients for a store.
pub async fn build_vault_clients(
    ctx: &ClientContext<'_>,
    p: &AzureKvProvider,
    opts: &AzureOptions,
) -> Result<VaultClients> {
    let transport = opts.transport()?;
    let credential = build_credential(ctx, p, opts, transport.clone()).await?;
    let verify = Some(!opts.skip_challenge_resource_check);
    let client_options = opts.client_options(transport, "https://login.microsoftonline.com");
    let bad_url = |e: azure_core::Error| {
        ProviderError::invalid(format!("invalid vaultUrl {:?}: {e}", p.vault_url))
    };
    let secrets = SecretClient::new(
        &p.vault_url,
        credential.clone(),
        Some(SecretClientOptions {
            client_options: client_options.clone(),
            verify_challenge_resource: verify,
            ..Default::default()
        }),
    )
    .map_err(bad_url)?;
    let keys = KeyClient::new(
        &p.vault_url,
        credential.clone(),
        Some(KeyClientOptions {
            client_options: client_options.clone(),
            verify_challenge_resource: verify,
            ..Default::default()
        }),
    )
    .map_err(bad_url)?;
    let certs = CertificateClient::new(
        &p.vault_url,
        credential,
        Some(CertificateClientOptions {
            client_options,
            verify_challenge_resource: verify,
            ..Default::default()
        }),
    )
    .map_err(bad_url)?;
    Ok(VaultClients {
        secrets,
        keys,
        certs,
    })
}

#[async_trait::async_trait]
impl Provider for AzureKeyVaultProvider {
    fn name(&self) -> &'static str {
        PROVIDER_KEY
    }

    fn metric_provider(&self) -> &'static str {
        METRIC_PROVIDER
    }

    fn capabilities(&self, _store: &StoreInfo) -> Capabilities {
        Capabilities::ReadWrite
    }

    fn validate_store(&self, store: &StoreInfo) -> Result<Vec<String>> {
        validate_spec(store, &Self::spec(store)?)
    }

    async fn new_client(&self, ctx: &ClientContext<'_>) -> Result<Arc<dyn SecretsClient>> {
        let opts = self.opts.clone()?;
        let p = Self::spec(ctx.store)?;
        if ctx.is_store_validation() && is_referent(&p) {
            return Ok(Arc::new(AzureKvClient::new(
                p.vault_url.clone(),
                None,
                ctx.recorder.clone(),
            )));
        }
        let vault = self.vault_clients(ctx, &p, &opts).await?;
        Ok(Arc::new(AzureKvClient::new(
            p.vault_url.clone(),
            Some(vault),
            ctx.recorder.clone(),
        )))
    }
}
