//! The `webhook` [`Provider`], and the client setup shared with the generator ([`build_client`]).

use std::sync::Arc;
use std::time::Duration;

use esr_api::providers::webhook::WebhookProvider as Spec;
use esr_api::v1::CaProviderType;
use esr_provider::refs::{CaProviderKind, CaProviderRef, fetch_ca_cert};
use esr_provider::{
    Capabilities, ClientContext, Provider, ProviderError, Result, SecretsClient, StoreInfo,
    StoreKind,
};

use crate::client::{SecretScope, WebhookClient};
use crate::http::Http;
use crate::{METRIC_PROVIDER, PROVIDER_KEY};

/// The `webhook` provider.
#[derive(Debug, Clone, Copy, Default)]
pub struct WebhookStoreProvider;

/// `timeout` as a duration (`None` when unset or empty).
pub fn timeout(spec: &Spec) -> Result<Option<Duration>> {
    match spec.request.timeout.as_deref().filter(|t| !t.is_empty()) {
        None => Ok(None),
        Some(t) => esr_api::duration::parse_std(t)
            .map(Some)
            .map_err(|e| ProviderError::invalid(format!("invalid timeout: {e}"))),
    }
}

/// Builds the client of `spec` in `ctx`: refuses `auth.ntlm`, parses `timeout`, reads the CA
/// (`caBundle` or `caProvider`, with the store's namespace rules).
pub async fn build_client(
    ctx: &ClientContext<'_>,
    spec: Spec,
    scope: SecretScope,
) -> Result<WebhookClient> {
    if spec.request.auth.as_ref().is_some_and(|a| a.ntlm.is_some()) {
        return Err(ProviderError::unsupported(
            "webhook auth.ntlm is not supported by esr",
        ));
    }
    let timeout = timeout(&spec)?;
    let ca_provider = spec.request.ca_provider.as_ref().map(|p| CaProviderRef {
        kind: match p.type_ {
            CaProviderType::Secret => CaProviderKind::Secret,
            CaProviderType::ConfigMap => CaProviderKind::ConfigMap,
        },
        name: &p.name,
        key: p.key.as_deref().unwrap_or(""),
        namespace: p.namespace.as_deref(),
    });
    let ca = fetch_ca_cert(
        ctx,
        spec.request.ca_bundle.as_deref().map(str::as_bytes),
        ca_provider.as_ref(),
    )
    .await?;
    let http = Http::new(timeout, ca.as_deref(), ctx.recorder.clone())?;
    let namespace = ctx.default_namespace().unwrap_or("").to_string();
    Ok(WebhookClient::new(
        spec,
        http,
        ctx.kube.clone(),
        scope,
        namespace,
    ))
}

#[async_trait::async_trait]
impl Provider for WebhookStoreProvider {
    fn name(&self) -> &'static str {
        PROVIDER_KEY
    }

    fn metric_provider(&self) -> &'static str {
        METRIC_PROVIDER
    }

    fn capabilities(&self, _store: &StoreInfo) -> Capabilities {
        Capabilities::ReadWrite
    }

    /// ESO's `ValidateStore` of the webhook provider checks nothing; neither does esr (the spec
    /// must still deserialize).
    fn validate_store(&self, store: &StoreInfo) -> Result<Vec<String>> {
        store.provider_spec::<Spec>(PROVIDER_KEY)?;
        Ok(vec![])
    }

    async fn new_client(&self, ctx: &ClientContext<'_>) -> Result<Arc<dyn SecretsClient>> {
        let spec = ctx.store.provider_spec::<Spec>(PROVIDER_KEY)?;
        let scope = match ctx.store.kind {
            StoreKind::ClusterSecretStore => SecretScope::Cluster,
            StoreKind::SecretStore => SecretScope::Namespace(
                ctx.store
                    .namespace
                    .clone()
                    .or_else(|| ctx.default_namespace().map(str::to_string))
                    .unwrap_or_default(),
            ),
        };
        Ok(Arc::new(build_client(ctx, spec, scope).await?))
    }
}
