//! Credentials for the three `authType`s, built with azure_identity.

use std::sync::Arc;

use azure_core::credentials::{Secret, TokenCredential};
use azure_core::http::{ClientMethodOptions, Transport};
use azure_identity::{
    ClientAssertion, ClientAssertionCredential, ClientAssertionCredentialOptions,
    ClientSecretCredential, ClientSecretCredentialOptions, ManagedIdentityCredential,
    ManagedIdentityCredentialOptions, UserAssignedId,
};
use esr_api::providers::azurekv::{AzureAuthType, AzureKvProvider};
use esr_provider::refs::{SecretKeyRef, resolve_namespace, resolve_secret_key_ref_string};
use esr_provider::{ClientContext, KubeAccess, ProviderError, Result, StoreInfo};

use crate::config::{AzureOptions, cloud_endpoints};

/// Audience of the ServiceAccount token for workload identity.
pub const WORKLOAD_IDENTITY_AUDIENCE: &str = "api://AzureADTokenExchange";
/// ServiceAccount annotation with the client id.
pub const ANNOTATION_CLIENT_ID: &str = "azure.workload.identity/client-id";
/// ServiceAccount annotation with the tenant id.
pub const ANNOTATION_TENANT_ID: &str = "azure.workload.identity/tenant-id";

/// ESO's `isReferentSpec`: credential references without a namespace.
pub fn is_referent(p: &AzureKvProvider) -> bool {
    let no_ns = |s: &Option<esr_api::v1::SecretKeySelector>| {
        s.as_ref()
            .is_some_and(|s| s.namespace.as_deref().unwrap_or("").is_empty())
    };
    if let Some(a) = &p.auth_secret_ref
        && (no_ns(&a.client_id) || no_ns(&a.client_secret))
    {
        return true;
    }
    p.service_account_ref
        .as_ref()
        .is_some_and(|sa| sa.namespace.as_deref().unwrap_or("").is_empty())
}

/// The authority host of the store's cloud (`customCloudConfig.activeDirectoryEndpoint` wins).
pub fn authority_host(p: &AzureKvProvider) -> Result<String> {
    if let Some(c) = &p.custom_cloud_config
        && !c.active_directory_endpoint.is_empty()
    {
        return Ok(c.active_directory_endpoint.clone());
    }
    let env = p.environment_type.unwrap_or_default();
    cloud_endpoints(env)
        .map(|e| e.authority_host.to_string())
        .ok_or_else(|| {
            ProviderError::invalid(
                "CustomCloudConfig is required when EnvironmentType is AzureStackCloud",
            )
        })
}

async fn read_ref(ctx: &ClientContext<'_>, s: &esr_api::v1::SecretKeySelector) -> Result<String> {
    let r = SecretKeyRef::from(s);
    resolve_secret_key_ref_string(ctx, &r).await
}

fn az_err(e: azure_core::Error) -> ProviderError {
    ProviderError::invalid(format!("cannot create Azure credential: {e}"))
}

/// The credential material a store's clients are built from, for the client cache key: the
/// referenced Secret values of a service principal (so a rotated client secret builds new
/// clients), the identity of a managed identity, the ServiceAccount of workload identity.
/// `None` when something cannot be read: the clients are then built (and the error reported)
/// without the cache.
pub async fn credential_fingerprint(
    ctx: &ClientContext<'_>,
    p: &AzureKvProvider,
) -> Option<String> {
    let mut parts: Vec<String> = vec![format!("{:?}", p.auth_type.unwrap_or_default())];
    if let Some(a) = &p.auth_secret_ref {
        for r in [
            &a.tenant_id,
            &a.client_id,
            &a.client_secret,
            &a.client_certificate,
        ]
        .into_iter()
        .flatten()
        {
            parts.push(read_ref(ctx, r).await.ok()?);
        }
    }
    if let Some(sa) = &p.service_account_ref {
        let ns = resolve_namespace(
            ctx.store,
            ctx.namespace,
            sa.namespace.as_deref(),
            "service account",
        )
        .ok()?;
        parts.push(format!("{ns}/{}", sa.name));
    }
    let refs: Vec<&str> = parts.iter().map(String::as_str).collect();
    Some(crate::cache::key(&refs))
}

/// Managed identity, and workload identity without `serviceAccountRef` (the webhook-injected
/// environment of the controller's pod), authenticate as the controller: only a
/// ClusterSecretStore may use them (see [`esr_provider::identity`]).
pub fn check_controller_identity(store: &StoreInfo, p: &AzureKvProvider) -> Result<()> {
    match p.auth_type.unwrap_or_default() {
        AzureAuthType::ManagedIdentity => esr_provider::identity::require_controller_identity(
            store,
            "azure managed identity (the identity of the controller's pod)",
            "use authType ServicePrincipal, or WorkloadIdentity with serviceAccountRef",
        ),
        AzureAuthType::WorkloadIdentity if p.service_account_ref.is_none() => {
            esr_provider::identity::require_controller_identity(
                store,
                "azure workload identity without serviceAccountRef (the controller's federated token)",
                "set serviceAccountRef",
            )
        }
        _ => Ok(()),
    }
}

/// Builds the credential for a store.
pub async fn build_credential(
    ctx: &ClientContext<'_>,
    p: &AzureKvProvider,
    opts: &AzureOptions,
    transport: Option<Transport>,
) -> Result<Arc<dyn TokenCredential>> {
    check_controller_identity(ctx.store, p)?;
    let client_options = opts.client_options(transport, &authority_host(p)?);
    match p.auth_type.unwrap_or_default() {
        AzureAuthType::ServicePrincipal => {
            let a = p
                .auth_secret_ref
                .as_ref()
                .ok_or_else(|| ProviderError::invalid("missing secretRef in provider config"))?;
            let tenant = match (&p.tenant_id, &a.tenant_id) {
                (Some(t), _) if !t.is_empty() => t.clone(),
                (_, Some(r)) => read_ref(ctx, r).await?,
                _ => return Err(ProviderError::invalid("missing tenantID in store config")),
            };
            let (Some(client_id_ref), true) = (
                &a.client_id,
                a.client_secret.is_some() || a.client_certificate.is_some(),
            ) else {
                return Err(ProviderError::invalid(
                    "missing accessKeyID/secretAccessKey in store config",
                ));
            };
            if a.client_secret.is_some() && a.client_certificate.is_some() {
                return Err(ProviderError::invalid(
                    "both clientSecret and clientCredentials set",
                ));
            }
            let client_id = read_ref(ctx, client_id_ref).await?;
            if let Some(secret_ref) = &a.client_secret {
                let secret = read_ref(ctx, secret_ref).await?;
                let cred = ClientSecretCredential::new(
                    tenant.trim(),
                    client_id.trim().to_string(),
                    Secret::new(secret),
                    Some(ClientSecretCredentialOptions { client_options }),
                )
                .map_err(az_err)?;
                return Ok(cred);
            }
            let Some(cert_ref) = &a.client_certificate else {
                return Err(ProviderError::invalid(
                    "missing accessKeyID/secretAccessKey in store config",
                ));
            };
            let pem = read_ref(ctx, cert_ref).await?;
            let host = opts.authority_host.clone().unwrap_or(authority_host(p)?);
            let assertion = CertificateAssertion::from_pem(
                pem.as_bytes(),
                client_id.trim(),
                &format!(
                    "{}/{}/oauth2/v2.0/token",
                    host.trim_end_matches('/'),
                    tenant.trim()
                ),
            )?;
            let cred = ClientAssertionCredential::new(
                tenant.trim().to_string(),
                client_id.trim().to_string(),
                assertion,
                Some(ClientAssertionCredentialOptions { client_options }),
            )
            .map_err(az_err)?;
            Ok(cred)
        }
        AzureAuthType::ManagedIdentity => {
            let cred = ManagedIdentityCredential::new(Some(ManagedIdentityCredentialOptions {
                user_assigned_id: p
                    .identity_id
                    .clone()
                    .filter(|i| !i.is_empty())
                    .map(UserAssignedId::ClientId),
                client_options,
            }))
            .map_err(az_err)?;
            Ok(cred)
        }
        AzureAuthType::WorkloadIdentity => {
            let (tenant, client_id, assertion) = workload_identity(ctx, p).await?;
            let cred = ClientAssertionCredential::new(
                tenant,
                client_id,
                assertion,
                Some(ClientAssertionCredentialOptions { client_options }),
            )
            .map_err(az_err)?;
            Ok(cred)
        }
    }
}

/// Where the federated token comes from.
#[derive(Clone)]
pub enum FederatedToken {
    /// A TokenRequest for a ServiceAccount, made each time Entra needs a fresh assertion.
    ServiceAccount {
        /// Kubernetes access.
        kube: Arc<dyn KubeAccess>,
        /// Namespace of the ServiceAccount.
        namespace: String,
        /// ServiceAccount name.
        name: String,
        /// Token audiences.
        audiences: Vec<String>,
    },
    /// A projected token file (`AZURE_FEDERATED_TOKEN_FILE`), re-read each time.
    File(String),
}

impl std::fmt::Debug for FederatedToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FederatedToken::ServiceAccount {
                namespace, name, ..
            } => write!(f, "ServiceAccount({namespace}/{name})"),
            FederatedToken::File(p) => write!(f, "File({p})"),
        }
    }
}

#[async_trait::async_trait]
impl ClientAssertion for FederatedToken {
    async fn secret(
        &self,
        _options: Option<ClientMethodOptions<'_>>,
    ) -> azure_core::Result<String> {
        let cred_err = |m: String| {
            azure_core::Error::with_message(azure_core::error::ErrorKind::Credential, m)
        };
        match self {
            FederatedToken::ServiceAccount {
                kube,
                namespace,
                name,
                audiences,
            } => kube
                .create_service_account_token(namespace, name, audiences, None)
                .await
                .map_err(|e| {
                    cred_err(format!(
                        "cannot create service account token {namespace}/{name}: {e}"
                    ))
                }),
            FederatedToken::File(path) => tokio_read(path)
                .await
                .map_err(|e| cred_err(format!("unable to read token file {path}: {e}"))),
        }
    }
}

async fn tokio_read(path: &str) -> std::io::Result<String> {
    tokio::fs::read_to_string(path)
        .await
        .map(|s| s.trim().to_string())
}

/// ESO's workload identity resolution: client and tenant ids from `authSecretRef`,
/// `spec.tenantId` and the ServiceAccount's annotations (conflicts are errors), the token via
/// TokenRequest with audience `api://AzureADTokenExchange` (+ `serviceAccountRef.audiences`).
/// Without `serviceAccountRef`, the webhook-injected env vars are used: the controller's own
/// identity, which only a ClusterSecretStore may use (see [`esr_provider::identity`]).
pub async fn workload_identity(
    ctx: &ClientContext<'_>,
    p: &AzureKvProvider,
) -> Result<(String, String, FederatedToken)> {
    let Some(sa_ref) = &p.service_account_ref else {
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        return match (
            env("AZURE_CLIENT_ID"),
            env("AZURE_TENANT_ID"),
            env("AZURE_FEDERATED_TOKEN_FILE"),
        ) {
            (Some(c), Some(t), Some(f)) => Ok((t, c, FederatedToken::File(f))),
            _ => Err(ProviderError::invalid(
                "missing environment variables. AZURE_CLIENT_ID, AZURE_TENANT_ID and AZURE_FEDERATED_TOKEN_FILE must be set",
            )),
        };
    };
    let ns = resolve_namespace(
        ctx.store,
        ctx.namespace,
        sa_ref.namespace.as_deref(),
        &format!("service account {:?}", sa_ref.name),
    )?;
    let sa = ctx
        .kube
        .get_service_account(&ns, &sa_ref.name)
        .await?
        .ok_or_else(|| {
            ProviderError::invalid(format!(
                "serviceaccounts \"{}\" not found in namespace {ns}",
                sa_ref.name
            ))
        })?;
    let ann = sa.metadata.annotations.unwrap_or_default();

    let mut client_id = String::new();
    if let Some(a) = &p.auth_secret_ref {
        let r = a.client_id.as_ref().ok_or_else(|| {
            ProviderError::invalid("missing accessKeyID/secretAccessKey in store config")
        })?;
        client_id = read_ref(ctx, r).await?;
    }
    if let Some(v) = ann.get(ANNOTATION_CLIENT_ID) {
        if !client_id.is_empty() {
            return Err(ProviderError::invalid(
                "multiple clientID found. Check secretRef and serviceAccountRef",
            ));
        }
        client_id = v.clone();
    }
    if client_id.is_empty() {
        return Err(ProviderError::invalid(format!(
            "missing clientID: either serviceAccountRef or service account annotation '{ANNOTATION_CLIENT_ID}' is missing"
        )));
    }

    let mut tenant = String::new();
    if let Some(r) = p
        .auth_secret_ref
        .as_ref()
        .and_then(|a| a.tenant_id.as_ref())
    {
        tenant = read_ref(ctx, r).await?;
    }
    if tenant.is_empty()
        && let Some(t) = &p.tenant_id
    {
        tenant = t.clone();
    }
    if let Some(v) = ann.get(ANNOTATION_TENANT_ID) {
        if !tenant.is_empty() {
            return Err(ProviderError::invalid(
                "multiple tenantID found. Check secretRef, 'spec.provider.azurekv.tenantId', and serviceAccountRef",
            ));
        }
        tenant = v.clone();
    }
    if tenant.is_empty() {
        tenant = std::env::var("AZURE_TENANT_ID").unwrap_or_default();
    }
    if tenant.is_empty() {
        return Err(ProviderError::invalid("missing tenantID in store config"));
    }
    let mut audiences = vec![WORKLOAD_IDENTITY_AUDIENCE.to_string()];
    audiences.extend(sa_ref.audiences.clone().unwrap_or_default());
    Ok((
        tenant,
        client_id,
        FederatedToken::ServiceAccount {
            kube: ctx.kube.clone(),
            namespace: ns,
            name: sa_ref.name.clone(),
            audiences,
        },
    ))
}

/// A service principal's certificate (PEM: certificate plus RSA private key, as ESO takes it),
/// presented to Entra as a signed client assertion (RS256 JWT with the certificate's SHA-1
/// thumbprint in `x5t`): Microsoft's certificate-credential format. (azure_identity's
/// `ClientCertificateCredential` needs OpenSSL and PKCS#12.)
#[derive(Clone)]
pub struct CertificateAssertion {
    client_id: String,
    audience: String,
    key: jsonwebtoken::EncodingKey,
    x5t: String,
}

impl std::fmt::Debug for CertificateAssertion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertificateAssertion")
            .field("client_id", &self.client_id)
            .field("x5t", &self.x5t)
            .finish_non_exhaustive()
    }
}

impl CertificateAssertion {
    /// Parses the PEM (a `CERTIFICATE` block and a `PRIVATE KEY` / `RSA PRIVATE KEY` block).
    pub fn from_pem(pem_bytes: &[u8], client_id: &str, audience: &str) -> Result<Self> {
        use base64::Engine;
        use sha1::Digest;
        let blocks = pem::parse_many(pem_bytes).map_err(|_| {
            ProviderError::invalid("authSecretRef.clientCertificate is not valid PEM")
        })?;
        let cert = blocks
            .iter()
            .find(|b| b.tag() == "CERTIFICATE")
            .ok_or_else(|| {
                ProviderError::invalid("authSecretRef.clientCertificate has no CERTIFICATE block")
            })?;
        let key = blocks
            .iter()
            .find(|b| b.tag() == "PRIVATE KEY" || b.tag() == "RSA PRIVATE KEY")
            .ok_or_else(|| {
                ProviderError::invalid(
                    "authSecretRef.clientCertificate has no RSA private key block",
                )
            })?;
        let key =
            jsonwebtoken::EncodingKey::from_rsa_pem(pem::encode(key).as_bytes()).map_err(|_| {
                ProviderError::invalid("authSecretRef.clientCertificate: invalid RSA private key")
            })?;
        let thumbprint = sha1::Sha1::digest(cert.contents());
        Ok(CertificateAssertion {
            client_id: client_id.to_string(),
            audience: audience.to_string(),
            key,
            x5t: base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(thumbprint),
        })
    }

    /// A fresh signed assertion (valid 10 minutes).
    pub fn sign(&self) -> Result<String> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256);
        header.x5t = Some(self.x5t.clone());
        let claims = serde_json::json!({
            "aud": self.audience, "iss": self.client_id, "sub": self.client_id,
            "jti": format!("{nanos:x}"), "iat": now, "nbf": now, "exp": now + 600,
        });
        jsonwebtoken::encode(&header, &claims, &self.key)
            .map_err(|e| ProviderError::invalid(format!("cannot sign client assertion: {e}")))
    }
}

#[async_trait::async_trait]
impl ClientAssertion for CertificateAssertion {
    async fn secret(
        &self,
        _options: Option<ClientMethodOptions<'_>>,
    ) -> azure_core::Result<String> {
        self.sign().map_err(|e| {
            azure_core::Error::with_message(azure_core::error::ErrorKind::Credential, e.to_string())
        })
    }
}
