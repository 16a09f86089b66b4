//! esr-provider-vault: the `vault` provider (HashiCorp Vault and OpenBao) and the
//! `VaultDynamicSecret` generator.
//!
//! - [`VaultProvider`] implements [`esr_provider::Provider`] for `spec.provider.vault`: KV v1/v2
//!   reads with ESO's path building ([`paths`]), `find` by name and path, PushSecret with
//!   check-and-set and the `managed-by: external-secrets` guard, and Validate (token lookup-self).
//! - Tokens are cached per store identity and auth configuration ([`auth::Session`]) and renewed
//!   rather than logging in on every reconcile; a 403 triggers one re-login.
//! - [`VaultProvider::generate`] runs a `VaultDynamicSecret` and renews its lease on later calls
//!   instead of minting new credentials ([`generator`]).

pub mod auth;
pub mod client;
pub mod generator;
pub mod http;
pub mod paths;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use esr_api::providers::vault::{VaultAuth, VaultProvider as VaultSpec};
use esr_api::v1::{CaProviderType, SecretKeySelector};
use esr_provider::refs::{
    CaProviderKind, CaProviderRef, SecretKeyRef, fetch_ca_cert, resolve_secret_key_ref,
    validate_referent_secret_selector, validate_referent_service_account_selector,
};
use esr_provider::{
    Capabilities, ClientContext, Provider, ProviderError, Result, SecretsClient, StoreInfo,
};
use sha2::{Digest, Sha256};

pub use auth::Session;
pub use client::VaultClient;
pub use generator::{DynamicSecretState, GeneratorRequest};
pub use http::{METRIC_PROVIDER, RetryPolicy, Transport, TransportConfig};

/// Sessions kept before unused ones are dropped.
const MAX_SESSIONS: usize = 4096;

/// The `spec.provider` key.
pub const PROVIDER_KEY: &str = "vault";

/// The `vault` provider. Keeps one login session per store identity + auth configuration (and,
/// for referent ClusterSecretStores, per ExternalSecret namespace), plus generator lease state.
pub struct VaultProvider {
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    leases: generator::LeaseStates,
    options: VaultOptions,
}

/// Provider options.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct VaultOptions {
    /// Fraction of a token's TTL after which it is renewed (or replaced by a new login when not
    /// renewable). Default 2/3; 0 renews on every use (tests).
    pub token_refresh_fraction: f64,
}

impl Default for VaultOptions {
    fn default() -> Self {
        VaultOptions {
            token_refresh_fraction: 2.0 / 3.0,
        }
    }
}

impl Default for VaultProvider {
    fn default() -> Self {
        Self::with_options(VaultOptions::default())
    }
}

impl std::fmt::Debug for VaultProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VaultProvider")
            .field("sessions", &self.session_count())
            .finish_non_exhaustive()
    }
}

fn selectors(auth: &VaultAuth) -> Vec<&SecretKeySelector> {
    let mut out = Vec::new();
    out.extend(auth.token_secret_ref.as_ref());
    if let Some(a) = &auth.app_role {
        out.push(&a.secret_ref);
        out.extend(a.role_ref.as_ref());
    }
    if let Some(k) = &auth.kubernetes {
        out.extend(k.secret_ref.as_ref());
    }
    if let Some(l) = &auth.ldap {
        out.extend(l.secret_ref.as_ref());
    }
    if let Some(u) = &auth.user_pass {
        out.extend(u.secret_ref.as_ref());
    }
    if let Some(j) = &auth.jwt {
        out.extend(j.secret_ref.as_ref());
    }
    if let Some(c) = &auth.cert {
        out.extend(c.client_cert.as_ref());
        out.extend(c.secret_ref.as_ref());
    }
    out
}

fn sa_namespaces(auth: &VaultAuth) -> Vec<Option<&str>> {
    let mut out = Vec::new();
    if let Some(sa) = auth
        .kubernetes
        .as_ref()
        .and_then(|k| k.service_account_ref.as_ref())
    {
        out.push(sa.namespace.as_deref());
    }
    if let Some(k) = auth
        .jwt
        .as_ref()
        .and_then(|j| j.kubernetes_service_account_token.as_ref())
    {
        out.push(k.service_account_ref.namespace.as_deref());
    }
    out
}

/// True when some credential reference has no namespace (resolved in the ExternalSecret's
/// namespace for a ClusterSecretStore: referent authentication).
fn has_referent_refs(spec: &VaultSpec) -> bool {
    let Some(auth) = &spec.auth else {
        return false;
    };
    selectors(auth)
        .iter()
        .any(|s| s.namespace.as_deref().unwrap_or("").is_empty())
        || sa_namespaces(auth)
            .iter()
            .any(|n| n.unwrap_or("").is_empty())
}

fn hash_hex(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0u8]);
    }
    hex::encode(&h.finalize()[..16])
}

/// The retry policy of a store's `spec.retrySettings` (see [`RetryPolicy::from_settings`]).
pub fn retry_policy(store: &StoreInfo) -> Result<RetryPolicy> {
    let present = store
        .spec
        .get("retrySettings")
        .is_some_and(|r| !r.is_null());
    let (max, interval) = store.retry_settings();
    RetryPolicy::from_settings(present.then_some((max, interval.as_deref())))
}

/// Builds the transport settings of a spec: CA bundle/provider, client certificate, headers.
pub async fn transport_config(
    ctx: &ClientContext<'_>,
    spec: &VaultSpec,
) -> Result<TransportConfig> {
    let ca_provider = spec.ca_provider.as_ref().map(|p| CaProviderRef {
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
        spec.ca_bundle.as_deref().map(str::as_bytes),
        ca_provider.as_ref(),
    )
    .await?;
    let identity_pem = match &spec.tls {
        Some(tls) if tls.cert_secret_ref.is_some() || tls.key_secret_ref.is_some() => {
            let read = |s: Option<&SecretKeySelector>, default: &'static str| {
                let s = s.cloned().unwrap_or_default();
                async move {
                    let name = s.name.clone().unwrap_or_default();
                    let key = s.key.clone().filter(|k| !k.is_empty());
                    let r = SecretKeyRef::new(
                        &name,
                        s.namespace.as_deref(),
                        key.as_deref().unwrap_or(default),
                    );
                    resolve_secret_key_ref(ctx, &r).await
                }
            };
            let mut pem = read(tls.cert_secret_ref.as_ref(), "tls.crt")
                .await
                .map_err(|e| e.wrap("failed to read the vault TLS client certificate"))?;
            pem.push(b'\n');
            pem.extend(
                read(tls.key_secret_ref.as_ref(), "tls.key")
                    .await
                    .map_err(|e| e.wrap("failed to read the vault TLS client key"))?,
            );
            Some(pem)
        }
        _ => None,
    };
    Ok(TransportConfig {
        retry: retry_policy(ctx.store)?,
        server: spec.server.clone(),
        namespace: spec.namespace.clone(),
        headers: spec.headers.clone().unwrap_or_default(),
        ca_pem: ca,
        identity_pem,
        read_your_writes: spec.read_your_writes.unwrap_or(false),
        forward_inconsistent: spec.forward_inconsistent.unwrap_or(false),
    })
}

impl VaultProvider {
    /// A provider with empty caches.
    pub fn new() -> Self {
        Self::default()
    }

    /// A provider with these options.
    pub fn with_options(options: VaultOptions) -> Self {
        VaultProvider {
            sessions: Mutex::new(HashMap::new()),
            leases: generator::LeaseStates::default(),
            options,
        }
    }

    /// Number of cached login sessions.
    pub fn session_count(&self) -> usize {
        self.sessions.lock().map(|s| s.len()).unwrap_or(0)
    }

    /// The (cached) session for `spec` used from `ctx`; `key_extra` separates users of the same
    /// store (e.g. generators).
    pub(crate) async fn session(
        &self,
        ctx: &ClientContext<'_>,
        spec: &VaultSpec,
        key_extra: &str,
    ) -> Result<Arc<Session>> {
        let spec_json = serde_json::to_string(spec).unwrap_or_default();
        let ns = if has_referent_refs(spec) {
            ctx.namespace.unwrap_or("")
        } else {
            ""
        };
        let retry_json = ctx
            .store
            .spec
            .get("retrySettings")
            .map(ToString::to_string)
            .unwrap_or_default();
        let key = hash_hex(&[
            &ctx.store.identity(),
            ctx.store.uid.as_deref().unwrap_or(""),
            &spec_json,
            &retry_json,
            ns,
            key_extra,
        ]);
        let existing = self.sessions.lock().ok().and_then(|s| s.get(&key).cloned());
        if let Some(s) = existing {
            s.set_owned(auth::Owned::from_ctx(ctx));
            // A static token is re-read on every client build, so a rotated token is picked up.
            s.reload_static().await;
            return Ok(s);
        }
        let cfg = transport_config(ctx, spec).await?;
        let transport = Arc::new(Transport::new(&cfg, ctx.recorder.clone())?);
        let session = Arc::new(Session::new(
            transport,
            cfg,
            spec,
            auth::Owned::from_ctx(ctx),
            self.options.token_refresh_fraction.clamp(0.0, 1.0),
        ));
        if let Ok(mut s) = self.sessions.lock() {
            if s.len() >= MAX_SESSIONS {
                // Old store generations and deleted stores: drop sessions no client holds.
                s.retain(|_, v| Arc::strong_count(v) > 1);
            }
            s.insert(key, session.clone());
        }
        Ok(session)
    }

    /// Builds a client for an already parsed spec.
    pub async fn client_for(
        &self,
        ctx: &ClientContext<'_>,
        spec: &VaultSpec,
    ) -> Result<Arc<VaultClient>> {
        if spec.server.is_empty() {
            return Err(ProviderError::invalid("vault server address is required"));
        }
        let referent_unresolved =
            ctx.store.kind.is_cluster() && ctx.is_store_validation() && has_referent_refs(spec);
        let session = self.session(ctx, spec, "").await?;
        if !referent_unresolved {
            // ESO logs in when the client is built: auth errors surface here.
            session.token().await?;
        }
        Ok(Arc::new(VaultClient {
            session,
            mount: spec.path.clone().filter(|p| !p.is_empty()),
            version: spec.version.unwrap_or_default(),
            cas_required: spec
                .check_and_set
                .as_ref()
                .and_then(|c| c.required)
                .unwrap_or(false),
            referent_unresolved,
        }))
    }
}

#[async_trait]
impl Provider for VaultProvider {
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
        let spec: VaultSpec = store.provider_spec(PROVIDER_KEY)?;
        if spec.server.is_empty() {
            return Err(ProviderError::invalid("vault server address is required"));
        }
        let mut warnings = Vec::new();
        let Some(auth) = &spec.auth else {
            // ESO allows no auth (a Vault Agent / proxy adds the token).
            return Ok(warnings);
        };
        for s in selectors(auth) {
            validate_referent_secret_selector(store, s.namespace.as_deref())?;
        }
        for n in sa_namespaces(auth) {
            validate_referent_service_account_selector(store, n)?;
        }
        if let Some(a) = &auth.app_role
            && a.role_id.as_deref().unwrap_or("").is_empty()
            && a.role_ref.is_none()
        {
            return Err(ProviderError::invalid(
                "appRole: either roleId or roleRef must be set",
            ));
        }
        if let Some(k) = &auth.kubernetes
            && k.service_account_ref.is_none()
            && k.secret_ref.is_none()
        {
            esr_provider::identity::require_controller_identity(
                store,
                "vault kubernetes auth without serviceAccountRef or secretRef",
                "set auth.kubernetes.serviceAccountRef or auth.kubernetes.secretRef",
            )?;
        }
        if auth.iam.is_some() || auth.gcp.is_some() {
            warnings.push(
                "vault auth methods iam and gcp are not supported by esr; the store will not become ready"
                    .to_string(),
            );
        }
        Ok(warnings)
    }

    async fn new_client(&self, ctx: &ClientContext<'_>) -> Result<Arc<dyn SecretsClient>> {
        let spec: VaultSpec = ctx.store.provider_spec(PROVIDER_KEY)?;
        let c = self.client_for(ctx, &spec).await?;
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use esr_provider::StoreKind;
    use serde_json::json;

    fn st(kind: StoreKind, vault: serde_json::Value) -> StoreInfo {
        StoreInfo::new(
            kind,
            "s",
            Some("team".into()),
            json!({"provider": {"vault": vault}}),
        )
    }

    #[test]
    fn validate_store_rules() {
        let p = VaultProvider::new();
        let ok = st(
            StoreKind::SecretStore,
            json!({"server": "http://v", "auth": {"tokenSecretRef": {"name": "t", "key": "k"}}}),
        );
        assert_eq!(p.validate_store(&ok).ok(), Some(vec![]));
        let foreign_ns = st(
            StoreKind::SecretStore,
            json!({"server": "http://v", "auth": {"tokenSecretRef": {"name": "t", "namespace": "other"}}}),
        );
        assert!(p.validate_store(&foreign_ns).is_err());
        let no_role = st(
            StoreKind::SecretStore,
            json!({"server": "http://v", "auth": {"appRole": {"secretRef": {"name": "x"}}}}),
        );
        assert_eq!(
            p.validate_store(&no_role).err().map(|e| e.to_string()),
            Some("appRole: either roleId or roleRef must be set".to_string())
        );
        let iam = st(
            StoreKind::ClusterSecretStore,
            json!({"server": "http://v", "auth": {"iam": {"vaultRole": "r"}}}),
        );
        assert_eq!(p.validate_store(&iam).map(|w| w.len()).ok(), Some(1));
        let no_server = st(StoreKind::SecretStore, json!({"server": ""}));
        assert!(p.validate_store(&no_server).is_err());
        let no_auth = st(StoreKind::SecretStore, json!({"server": "http://v"}));
        assert!(p.validate_store(&no_auth).is_ok());
        // kubernetes auth without a reference would use the controller's own token
        let ambient = json!({"server": "http://v", "auth": {"kubernetes": {"role": "r"}}});
        let e = p
            .validate_store(&st(StoreKind::SecretStore, ambient.clone()))
            .unwrap_err();
        assert_eq!(e.kind(), esr_provider::ErrorKind::Auth);
        assert!(e.to_string().contains("serviceAccountRef"), "{e}");
        assert!(
            p.validate_store(&st(StoreKind::ClusterSecretStore, ambient))
                .is_ok()
        );
    }

    #[test]
    fn referent_detection() {
        let spec =
            |v: serde_json::Value| -> VaultSpec { serde_json::from_value(v).unwrap_or_default() };
        assert!(has_referent_refs(&spec(json!({"server": "x",
            "auth": {"appRole": {"roleId": "r", "secretRef": {"name": "s"}}}}))));
        assert!(!has_referent_refs(&spec(json!({"server": "x",
            "auth": {"appRole": {"roleId": "r", "secretRef": {"name": "s", "namespace": "n"}}}}))));
        assert!(has_referent_refs(&spec(json!({"server": "x",
            "auth": {"kubernetes": {"role": "r", "serviceAccountRef": {"name": "sa"}}}}))));
    }
}
