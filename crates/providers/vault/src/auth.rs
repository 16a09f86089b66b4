//! Logging in to Vault and keeping the token: one [`Session`] per store identity and auth
//! configuration, shared by every client built for it. Tokens are renewed (`renew-self`) once two
//! thirds of their TTL have passed, and replaced by a fresh login when they are not renewable,
//! expired, or rejected with 403.

use std::sync::Arc;
use std::time::Duration;

use esr_api::providers::vault::{VaultAuth, VaultProvider as VaultSpec};
use esr_api::v1::SecretKeySelector;
use esr_provider::refs::{SecretKeyRef, resolve_secret_key_ref_string, service_account_token};
use esr_provider::{ClientContext, ErrorKind, KubeAccess, ProviderError, Result, StoreInfo};
use serde_json::{Value, json};
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::http::{Response, Transport, TransportConfig};

/// Where the in-cluster ServiceAccount token lives (kubernetes auth without a reference).
pub const IN_CLUSTER_TOKEN: &str = "/var/run/secrets/kubernetes.io/serviceaccount/token";

/// What a session needs to resolve credential references later (owned, unlike `ClientContext`).
pub(crate) struct Owned {
    pub store: StoreInfo,
    pub namespace: Option<String>,
    pub kube: Arc<dyn KubeAccess>,
    pub recorder: Arc<dyn esr_provider::CallRecorder>,
}

impl Owned {
    pub fn from_ctx(ctx: &ClientContext<'_>) -> Self {
        Owned {
            store: ctx.store.clone(),
            namespace: ctx.namespace.map(str::to_string),
            kube: ctx.kube.clone(),
            recorder: ctx.recorder.clone(),
        }
    }

    pub fn ctx(&self) -> ClientContext<'_> {
        ClientContext::new(&self.store, self.namespace.as_deref(), self.kube.clone())
            .with_recorder(self.recorder.clone())
    }
}

#[derive(Clone)]
struct TokenEntry {
    token: String,
    renewable: bool,
    obtained: Instant,
    /// Zero: never expires (root tokens, static tokens without TTL).
    ttl: Duration,
}

impl TokenEntry {
    fn from_auth(auth: &Value) -> Result<Self> {
        let token = auth
            .get("client_token")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| ProviderError::auth("the Vault login response has no client_token"))?;
        Ok(TokenEntry {
            token: token.to_string(),
            renewable: auth
                .get("renewable")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            obtained: Instant::now(),
            ttl: Duration::from_secs(
                auth.get("lease_duration")
                    .and_then(Value::as_u64)
                    .unwrap_or(0),
            ),
        })
    }

    fn needs_refresh(&self, fraction: f64) -> bool {
        !self.ttl.is_zero() && self.obtained.elapsed() >= self.ttl.mul_f64(fraction)
    }

    fn expired(&self) -> bool {
        !self.ttl.is_zero() && self.obtained.elapsed() >= self.ttl
    }
}

/// A logged-in (or about to log in) identity on one Vault server.
pub struct Session {
    pub(crate) transport: Arc<Transport>,
    transport_cfg: TransportConfig,
    auth: VaultAuth,
    owned: std::sync::Mutex<Arc<Owned>>,
    token: Mutex<Option<TokenEntry>>,
    refresh_fraction: f64,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("transport", &self.transport)
            .finish_non_exhaustive()
    }
}

fn key_or<'a>(s: &'a SecretKeySelector, default: &'a str) -> &'a str {
    s.key
        .as_deref()
        .filter(|k| !k.is_empty())
        .unwrap_or(default)
}

async fn read_ref(
    ctx: &ClientContext<'_>,
    s: &SecretKeySelector,
    default_key: &str,
    what: &str,
) -> Result<String> {
    let name = s
        .name
        .as_deref()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| ProviderError::invalid(format!("{what}: secret name is required")))?;
    let r = SecretKeyRef::new(name, s.namespace.as_deref(), key_or(s, default_key));
    resolve_secret_key_ref_string(ctx, &r)
        .await
        .map_err(|e| e.wrap(format_args!("cannot read {what}")))
}

impl Session {
    pub(crate) fn new(
        transport: Arc<Transport>,
        transport_cfg: TransportConfig,
        spec: &VaultSpec,
        owned: Owned,
        refresh_fraction: f64,
    ) -> Self {
        Session {
            transport,
            transport_cfg,
            auth: spec.auth.clone().unwrap_or_default(),
            owned: std::sync::Mutex::new(Arc::new(owned)),
            token: Mutex::new(None),
            refresh_fraction,
        }
    }

    pub(crate) fn set_owned(&self, owned: Owned) {
        if let Ok(mut g) = self.owned.lock() {
            *g = Arc::new(owned);
        }
    }

    fn owned(&self) -> Result<Arc<Owned>> {
        self.owned
            .lock()
            .map(|g| g.clone())
            .map_err(|_| ProviderError::transient("vault session state poisoned"))
    }

    /// Namespace of login and token-self requests (`auth.namespace`, else the provider's).
    pub(crate) fn auth_namespace(&self) -> Option<&str> {
        self.auth.namespace.as_deref().filter(|n| !n.is_empty())
    }

    /// True for `tokenSecretRef` stores.
    pub fn is_static(&self) -> bool {
        self.auth.token_secret_ref.is_some()
    }

    /// A usable token: the cached one, renewed or replaced by a new login when due.
    pub async fn token(&self) -> Result<String> {
        let mut g = self.token.lock().await;
        if let Some(entry) = g.as_ref() {
            if !entry.needs_refresh(self.refresh_fraction) {
                return Ok(entry.token.clone());
            }
            if entry.renewable && !entry.expired() {
                match self.renew_self(&entry.token).await {
                    Ok(renewed) => {
                        let token = renewed.token.clone();
                        *g = Some(renewed);
                        return Ok(token);
                    }
                    Err(e) => {
                        tracing::info!(error = %e, "vault token renewal failed; logging in again");
                    }
                }
            }
        }
        let fresh = self.login().await?;
        let token = fresh.token.clone();
        *g = Some(fresh);
        Ok(token)
    }

    /// Drops the cached token if it is still `used` (after a 403), so the next call logs in again.
    pub async fn invalidate(&self, used: &str) {
        let mut g = self.token.lock().await;
        if g.as_ref().is_some_and(|e| e.token == used) {
            *g = None;
        }
    }

    /// Drops a static token so it is re-read from its Secret.
    pub async fn reload_static(&self) {
        if self.is_static() {
            *self.token.lock().await = None;
        }
    }

    async fn renew_self(&self, token: &str) -> Result<TokenEntry> {
        let resp = self
            .transport
            .request(
                "RenewSelf",
                "POST",
                "auth/token/renew-self",
                &[],
                Some(&json!({})),
                Some(token),
                self.auth_namespace(),
            )
            .await?;
        let auth = resp
            .as_ref()
            .and_then(|r| r.body.as_ref())
            .and_then(|b| b.get("auth"))
            .ok_or_else(|| ProviderError::auth("renew-self returned no auth"))?;
        let mut e = TokenEntry::from_auth(auth)?;
        // renew-self does not repeat the token in every Vault version.
        e.token = token.to_string();
        Ok(e)
    }

    /// Looks the current token up (`auth/token/lookup-self`), as Validate does.
    pub async fn lookup_self(&self) -> Result<Value> {
        let token = self.token().await?;
        let resp = self
            .transport
            .request(
                "LookupSelf",
                "GET",
                "auth/token/lookup-self",
                &[],
                None,
                Some(&token),
                self.auth_namespace(),
            )
            .await;
        match resp {
            Ok(Some(r)) => Ok(r.body.unwrap_or(Value::Null)),
            Ok(None) => Err(ProviderError::auth("token lookup-self returned nothing")),
            Err(e) => {
                if e.kind() == ErrorKind::Auth {
                    self.invalidate(&token).await;
                }
                Err(e)
            }
        }
    }

    async fn login_post(
        &self,
        transport: &Transport,
        mount: &str,
        suffix: &str,
        body: Value,
    ) -> Result<TokenEntry> {
        let mount = mount.trim_matches('/');
        let path = if suffix.is_empty() {
            format!("auth/{mount}/login")
        } else {
            format!("auth/{mount}/login/{suffix}")
        };
        let resp: Option<Response> = transport
            .request(
                "Login",
                "POST",
                &path,
                &[],
                Some(&body),
                None,
                self.auth_namespace(),
            )
            .await
            .map_err(|e| {
                let kind = if e.kind() == ErrorKind::Invalid {
                    ErrorKind::Auth
                } else {
                    e.kind()
                };
                ProviderError::new(kind, format!("vault login failed: {}", e.message()))
                    .with_provider(crate::http::METRIC_PROVIDER)
                    .with_call("Login")
            })?;
        let auth = resp
            .as_ref()
            .and_then(|r| r.body.as_ref())
            .and_then(|b| b.get("auth"))
            .filter(|a| !a.is_null())
            .ok_or_else(|| {
                ProviderError::auth(format!("vault login at {path} returned no auth data"))
            })?;
        TokenEntry::from_auth(auth)
    }

    async fn login(&self) -> Result<TokenEntry> {
        let owned = self.owned()?;
        let ctx = owned.ctx();
        let a = &self.auth;
        if let Some(t) = &a.token_secret_ref {
            let token = read_ref(&ctx, t, "token", "tokenSecretRef").await?;
            let token = token.trim().to_string();
            if token.is_empty() {
                return Err(ProviderError::auth("tokenSecretRef: the token is empty"));
            }
            return Ok(TokenEntry {
                token,
                renewable: false,
                obtained: Instant::now(),
                ttl: Duration::ZERO,
            });
        }
        if let Some(r) = &a.app_role {
            let role_id = match (&r.role_id, &r.role_ref) {
                (Some(id), _) if !id.is_empty() => id.clone(),
                (_, Some(rr)) => read_ref(&ctx, rr, "", "appRole.roleRef")
                    .await?
                    .trim()
                    .to_string(),
                _ => {
                    return Err(ProviderError::invalid(
                        "appRole: either roleId or roleRef must be set",
                    ));
                }
            };
            let secret_id = read_ref(&ctx, &r.secret_ref, "", "appRole.secretRef").await?;
            return self
                .login_post(
                    &self.transport,
                    &r.path,
                    "",
                    json!({"role_id": role_id, "secret_id": secret_id.trim()}),
                )
                .await;
        }
        if let Some(k) = &a.kubernetes {
            let jwt = if let Some(sa) = &k.service_account_ref {
                let aud = sa.audiences.clone().unwrap_or_default();
                service_account_token(&ctx, &sa.name, sa.namespace.as_deref(), &aud, Some(600))
                    .await?
            } else if let Some(s) = &k.secret_ref {
                read_ref(&ctx, s, "token", "kubernetes.secretRef").await?
            } else {
                esr_provider::identity::require_controller_identity(
                    &owned.store,
                    "vault kubernetes auth without serviceAccountRef or secretRef",
                    "set auth.kubernetes.serviceAccountRef or auth.kubernetes.secretRef",
                )?;
                tokio::fs::read_to_string(IN_CLUSTER_TOKEN).await.map_err(|e| {
                    ProviderError::auth(format!(
                        "kubernetes auth without serviceAccountRef or secretRef needs the controller's token at {IN_CLUSTER_TOKEN}: {e}"
                    ))
                })?
            };
            return self
                .login_post(
                    &self.transport,
                    &k.mount_path,
                    "",
                    json!({"role": k.role, "jwt": jwt.trim()}),
                )
                .await;
        }
        if let Some(j) = &a.jwt {
            let jwt = if let Some(s) = &j.secret_ref {
                read_ref(&ctx, s, "", "jwt.secretRef").await?
            } else if let Some(k) = &j.kubernetes_service_account_token {
                let mut aud = k.service_account_ref.audiences.clone().unwrap_or_default();
                aud.extend(k.audiences.clone().unwrap_or_default());
                if aud.is_empty() {
                    aud.push("vault".to_string());
                }
                service_account_token(
                    &ctx,
                    &k.service_account_ref.name,
                    k.service_account_ref.namespace.as_deref(),
                    &aud,
                    Some(k.expiration_seconds.unwrap_or(600)),
                )
                .await?
            } else {
                return Err(ProviderError::invalid(
                    "jwt: either secretRef or kubernetesServiceAccountToken must be set",
                ));
            };
            let mut body = json!({"jwt": jwt.trim()});
            if let Some(role) = j.role.as_deref().filter(|r| !r.is_empty()) {
                body["role"] = json!(role);
            }
            return self.login_post(&self.transport, &j.path, "", body).await;
        }
        if let Some(u) = &a.user_pass {
            let pw = match &u.secret_ref {
                Some(s) => read_ref(&ctx, s, "", "userPass.secretRef").await?,
                None => return Err(ProviderError::invalid("userPass: secretRef is required")),
            };
            return self
                .login_post(
                    &self.transport,
                    &u.path,
                    &u.username,
                    json!({"password": pw}),
                )
                .await;
        }
        if let Some(l) = &a.ldap {
            let pw = match &l.secret_ref {
                Some(s) => read_ref(&ctx, s, "", "ldap.secretRef").await?,
                None => return Err(ProviderError::invalid("ldap: secretRef is required")),
            };
            return self
                .login_post(
                    &self.transport,
                    &l.path,
                    &l.username,
                    json!({"password": pw}),
                )
                .await;
        }
        if let Some(c) = &a.cert {
            let cert = match &c.client_cert {
                Some(s) => read_ref(&ctx, s, "tls.crt", "cert.clientCert").await?,
                None => return Err(ProviderError::invalid("cert: clientCert is required")),
            };
            let key = match &c.secret_ref {
                Some(s) => read_ref(&ctx, s, "tls.key", "cert.secretRef").await?,
                None => return Err(ProviderError::invalid("cert: secretRef is required")),
            };
            let mut cfg = self.transport_cfg.clone();
            let mut pem = cert.into_bytes();
            pem.push(b'\n');
            pem.extend_from_slice(key.as_bytes());
            cfg.identity_pem = Some(pem);
            let t = Transport::new(&cfg, owned.recorder.clone())?;
            let mut body = json!({});
            if let Some(role) = c.vault_role.as_deref().filter(|r| !r.is_empty()) {
                body["name"] = json!(role);
            }
            let path = c.path.clone().unwrap_or_else(|| "cert".to_string());
            return self.login_post(&t, &path, "", body).await;
        }
        if a.iam.is_some() {
            return Err(ProviderError::unsupported(
                "vault auth method iam is not supported by esr (use kubernetes, jwt or appRole)",
            ));
        }
        if a.gcp.is_some() {
            return Err(ProviderError::unsupported(
                "vault auth method gcp is not supported by esr (use kubernetes, jwt or appRole)",
            ));
        }
        // No auth method: requests go without a token (ESO allows this for a Vault Agent or
        // proxy that adds the token).
        Ok(TokenEntry {
            token: String::new(),
            renewable: false,
            obtained: Instant::now(),
            ttl: Duration::ZERO,
        })
    }
}
