//! The `gcpsm` [`Provider`].

use std::sync::Arc;

use esr_api::providers::gcpsm::GcpSmProvider;
use esr_provider::refs::{
    validate_referent_secret_selector, validate_referent_service_account_selector,
};
use esr_provider::{
    Capabilities, ClientContext, Provider, ProviderError, Result, SecretsClient, StoreInfo,
};
use google_cloud_secretmanager_v1::client::SecretManagerService;

use crate::auth::{AuthMethod, build_credentials, is_referent, method};
use crate::client::GcpSmClient;
use crate::config::{GcpOptions, retry_policy};
use crate::{METRIC_PROVIDER, PROVIDER_KEY};

/// ESO's error when no project is known.
pub const ERR_NO_PROJECT_ID: &str = "unable to find ProjectID in storeSpec";

/// The `gcpsm` provider.
#[derive(Debug, Clone)]
pub struct GcpSecretManagerProvider {
    opts: std::result::Result<GcpOptions, ProviderError>,
}

impl Default for GcpSecretManagerProvider {
    fn default() -> Self {
        Self::new(GcpOptions::default())
    }
}

impl GcpSecretManagerProvider {
    /// A provider with explicit options.
    pub fn new(opts: GcpOptions) -> Self {
        GcpSecretManagerProvider { opts: Ok(opts) }
    }

    /// A provider configured by the test-only env vars of [`crate::config`]. A bad value is
    /// reported when a client is built.
    pub fn from_env() -> Self {
        GcpSecretManagerProvider {
            opts: GcpOptions::from_env(),
        }
    }

    fn spec(store: &StoreInfo) -> Result<GcpSmProvider> {
        store.provider_spec::<GcpSmProvider>(PROVIDER_KEY)
    }
}

/// ESO's `ValidateStore` for `gcpsm`, plus the controller-identity rule.
pub fn validate_spec(store: &StoreInfo, p: &GcpSmProvider) -> Result<Vec<String>> {
    if let Some(auth) = &p.auth {
        if let Some(sr) = &auth.secret_ref {
            let ns = sr
                .secret_access_key
                .as_ref()
                .and_then(|s| s.namespace.as_deref());
            validate_referent_secret_selector(store, ns)
                .map_err(|e| e.wrap("invalid auth secret data"))?;
        }
        if let Some(wi) = &auth.workload_identity {
            validate_referent_service_account_selector(
                store,
                wi.service_account_ref.namespace.as_deref(),
            )
            .map_err(|e| e.wrap("invalid workload identity service account reference"))?;
        }
    }
    crate::auth::check_controller_identity(store, p)?;
    Ok(vec![])
}

/// The project a store reads from: `projectID`, else (workload identity) `clusterProjectID`.
/// A service-account key store must name it (ESO never falls back for static credentials).
pub fn project_id(p: &GcpSmProvider) -> Result<String> {
    let non_empty = |v: &Option<String>| v.clone().filter(|s| !s.is_empty());
    if let Some(pid) = non_empty(&p.project_id) {
        return Ok(pid);
    }
    let cluster = p
        .auth
        .as_ref()
        .and_then(|a| a.workload_identity.as_ref())
        .and_then(|w| non_empty(&w.cluster_project_id));
    match (cluster, method(p)) {
        (Some(c), _) => Ok(c),
        (None, AuthMethod::ServiceAccountKey) => Err(ProviderError::invalid(ERR_NO_PROJECT_ID)),
        (None, _) => Err(ProviderError::invalid(format!(
            "{ERR_NO_PROJECT_ID} (esr does not read the project from the GCE metadata server: set projectID)"
        ))),
    }
}

#[async_trait::async_trait]
impl Provider for GcpSecretManagerProvider {
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
        let project = project_id(&p)?;
        let policy = p.secret_version_selection_policy.clone();
        if ctx.is_store_validation() && is_referent(&p) {
            return Ok(Arc::new(GcpSmClient::new(
                project,
                p.location.clone(),
                policy.as_deref(),
                None,
                ctx.recorder.clone(),
            )));
        }
        let creds = build_credentials(ctx, &p, &opts)
            .await
            .map_err(|e| e.wrap("failed to create GCP secretmanager client"))?;
        let sm = SecretManagerService::builder()
            .with_endpoint(opts.endpoint(p.location.as_deref()))
            .with_credentials(creds)
            .with_retry_policy(retry_policy())
            .build()
            .await
            .map_err(|e| {
                ProviderError::invalid(format!("failed to create GCP secretmanager client: {e}"))
            })?;
        Ok(Arc::new(GcpSmClient::new(
            project,
            p.location.clone(),
            policy.as_deref(),
            Some(sm),
            ctx.recorder.clone(),
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use esr_provider::StoreKind;
    use serde_json::json;

    fn store(kind: StoreKind, gcpsm: serde_json::Value) -> StoreInfo {
        let ns = (kind == StoreKind::SecretStore).then(|| "team".to_string());
        StoreInfo::new(kind, "s", ns, json!({"provider": {"gcpsm": gcpsm}}))
    }

    #[test]
    fn validate_store_follows_eso() {
        let p = GcpSecretManagerProvider::default();
        let ok = store(
            StoreKind::SecretStore,
            json!({"projectID": "p", "auth": {"secretRef": {"secretAccessKeySecretRef": {"name": "k", "key": "sa.json"}}}}),
        );
        assert_eq!(p.validate_store(&ok).ok(), Some(vec![]));
        let other_ns = store(
            StoreKind::SecretStore,
            json!({"projectID": "p", "auth": {"secretRef": {"secretAccessKeySecretRef": {"name": "k", "key": "sa.json", "namespace": "other"}}}}),
        );
        let e = p
            .validate_store(&other_ns)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.starts_with("invalid auth secret data: "), "{e}");
        let ambient = store(StoreKind::SecretStore, json!({"projectID": "p"}));
        assert!(
            p.validate_store(&ambient).is_err(),
            "default credentials in a SecretStore"
        );
        let ambient_css = store(StoreKind::ClusterSecretStore, json!({"projectID": "p"}));
        assert!(p.validate_store(&ambient_css).is_ok());
    }

    #[test]
    fn project_id_rules() {
        let s = |v: serde_json::Value| -> GcpSmProvider {
            serde_json::from_value(v).unwrap_or_default()
        };
        assert_eq!(
            project_id(&s(json!({"projectID": "p"}))).ok().as_deref(),
            Some("p")
        );
        assert_eq!(
            project_id(&s(json!({"auth": {"workloadIdentity": {"serviceAccountRef": {"name": "x"}, "clusterProjectID": "cp"}}}))).ok().as_deref(),
            Some("cp")
        );
        let e = project_id(&s(
            json!({"auth": {"secretRef": {"secretAccessKeySecretRef": {"name": "k"}}}}),
        ))
        .err()
        .map(|e| e.to_string());
        assert_eq!(e.as_deref(), Some(ERR_NO_PROJECT_ID));
    }
}
