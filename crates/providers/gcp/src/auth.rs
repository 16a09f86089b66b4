//! Credentials for a `gcpsm` store, in ESO's order: `auth.secretRef` (a service-account key),
//! `auth.workloadIdentity` (GKE workload identity), `auth.workloadIdentityFederation`, and
//! otherwise the default credentials (the controller's own identity).
//!
//! * Service-account key: the key JSON read from the Secret signs its own access tokens
//!   (self-signed JWTs with the `cloud-platform` scope).
//! * GKE workload identity: a token of the ServiceAccount (TokenRequest, audience
//!   `<clusterProjectID>.svc.id.goog` plus `serviceAccountRef.audiences`, 15 minutes) is exchanged
//!   at STS for an access token with audience
//!   `identitynamespace:<clusterProjectID>.svc.id.goog:https://container.googleapis.com/v1/projects/<clusterProjectID>/locations/<clusterLocation>/clusters/<clusterName>`.
//!   When the ServiceAccount is annotated `iam.gke.io/gcp-service-account: <email>`, that
//!   federated token then impersonates the Google service account (IAM Credentials
//!   `generateAccessToken`); without the annotation it is used as it is. `clusterProjectID`
//!   defaults to `projectID`; `clusterLocation` and `clusterName` default to the GCE metadata
//!   server's `cluster-location` / `cluster-name` attributes.
//! * Workload identity federation with `serviceAccountRef`: the same exchange with the store's
//!   `audience` (the pool provider); `gcpServiceAccountEmail`, else the annotation, is
//!   impersonated. `credConfig` and `awsSecurityCredentials` are not supported by esr.
//! * Default credentials: `GOOGLE_APPLICATION_CREDENTIALS`, gcloud's file, or the metadata
//!   server. They are the controller's identity, so only a ClusterSecretStore may use them (see
//!   [`esr_provider::identity`]).

use std::sync::Arc;

use esr_api::providers::gcpsm::{
    GcpSmProvider, GcpWorkloadIdentity, GcpWorkloadIdentityFederation,
};
use esr_api::v1::ServiceAccountSelector;
use esr_provider::keys::json_error_text;
use esr_provider::refs::{SecretKeyRef, resolve_namespace, resolve_secret_key_ref_string};
use esr_provider::{
    CallRecorder, CallStatus, ClientContext, KubeAccess, ProviderError, Result, StoreInfo,
};
use google_cloud_auth::credentials::external_account::ProgrammaticBuilder;
use google_cloud_auth::credentials::service_account::{self, AccessSpecifier};
use google_cloud_auth::credentials::subject_token::{
    Builder as SubjectTokenBuilder, SubjectToken, SubjectTokenProvider,
};
use google_cloud_auth::credentials::{CacheableResource, Credentials};
use google_cloud_auth::errors::SubjectTokenProviderError;

use crate::config::{CLOUD_PLATFORM_SCOPE, GcpOptions};
use crate::{METRIC_PROVIDER, calls};

/// ServiceAccount annotation naming the Google service account to impersonate.
pub const GCP_SA_ANNOTATION: &str = "iam.gke.io/gcp-service-account";
/// STS subject token type of a Kubernetes ServiceAccount token.
pub const SUBJECT_TOKEN_TYPE_JWT: &str = "urn:ietf:params:oauth:token-type:jwt";
/// Lifetime of the ServiceAccount tokens requested for the exchange (ESO: 15 minutes).
pub const SA_TOKEN_SECONDS: i64 = 15 * 60;
/// ESO's error text when the key JSON cannot be used.
pub const ERR_JSON_CREDENTIALS: &str = "failed to process the provided JSON credentials";

/// How a store authenticates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthMethod {
    /// `auth.secretRef`.
    ServiceAccountKey,
    /// `auth.workloadIdentity`.
    WorkloadIdentity,
    /// `auth.workloadIdentityFederation`.
    WorkloadIdentityFederation,
    /// Nothing set: the default credentials.
    Default,
}

/// The method a store uses (ESO's order).
pub fn method(p: &GcpSmProvider) -> AuthMethod {
    let auth = p.auth.as_ref();
    if auth.and_then(|a| a.secret_ref.as_ref()).is_some() {
        AuthMethod::ServiceAccountKey
    } else if auth.and_then(|a| a.workload_identity.as_ref()).is_some() {
        AuthMethod::WorkloadIdentity
    } else if auth
        .and_then(|a| a.workload_identity_federation.as_ref())
        .is_some()
    {
        AuthMethod::WorkloadIdentityFederation
    } else {
        AuthMethod::Default
    }
}

/// ESO's `isReferentSpec`: a credential reference without a namespace.
pub fn is_referent(p: &GcpSmProvider) -> bool {
    let Some(auth) = &p.auth else {
        return false;
    };
    if let Some(sr) = &auth.secret_ref
        && sr
            .secret_access_key
            .as_ref()
            .is_none_or(|s| s.namespace.as_deref().unwrap_or("").is_empty())
    {
        return true;
    }
    auth.workload_identity.as_ref().is_some_and(|wi| {
        wi.service_account_ref
            .namespace
            .as_deref()
            .unwrap_or("")
            .is_empty()
    })
}

/// The default credentials authenticate as the controller: only a ClusterSecretStore (or a
/// controller started with the opt-in) may use them.
pub fn check_controller_identity(store: &StoreInfo, p: &GcpSmProvider) -> Result<()> {
    if method(p) == AuthMethod::Default {
        return esr_provider::identity::require_controller_identity(
            store,
            "gcpsm without auth (the default credentials of the controller)",
            "set auth.secretRef or auth.workloadIdentity",
        );
    }
    Ok(())
}

/// Builds the credentials of a store and fetches a first token (ESO checks the token source
/// when it builds a client: `unable to get credentials: ...`).
pub async fn build_credentials(
    ctx: &ClientContext<'_>,
    p: &GcpSmProvider,
    opts: &GcpOptions,
) -> Result<Credentials> {
    check_controller_identity(ctx.store, p)?;
    let auth = p.auth.clone().unwrap_or_default();
    let creds = match method(p) {
        AuthMethod::ServiceAccountKey => {
            let sel = auth
                .secret_ref
                .and_then(|s| s.secret_access_key)
                .unwrap_or_default();
            let key = resolve_secret_key_ref_string(ctx, &SecretKeyRef::from(&sel)).await?;
            service_account_credentials(&key)?
        }
        AuthMethod::WorkloadIdentity => {
            let wi = auth.workload_identity.unwrap_or_default();
            workload_identity(ctx, p, &wi, opts).await?
        }
        AuthMethod::WorkloadIdentityFederation => {
            let wif = auth.workload_identity_federation.unwrap_or_default();
            workload_identity_federation(ctx, &wif, opts).await?
        }
        AuthMethod::Default => google_cloud_auth::credentials::Builder::default()
            .with_scopes([CLOUD_PLATFORM_SCOPE])
            .build()
            .map_err(|e| ProviderError::auth(format!("unable to get credentials: {e}")))?,
    };
    check_token(&creds).await?;
    Ok(creds)
}

/// Credentials from a service-account key (JSON). Errors never echo the key.
pub fn service_account_credentials(key_json: &str) -> Result<Credentials> {
    let v: serde_json::Value = serde_json::from_str(key_json).map_err(|e| {
        ProviderError::invalid(format!("{ERR_JSON_CREDENTIALS}: {}", json_error_text(&e)))
    })?;
    service_account::Builder::new(v)
        .with_access_specifier(AccessSpecifier::from_scopes([CLOUD_PLATFORM_SCOPE]))
        .build()
        .map_err(|e| ProviderError::invalid(format!("{ERR_JSON_CREDENTIALS}: {e}")))
}

/// Fetches a token once, so a broken credential fails when the client is built.
async fn check_token(creds: &Credentials) -> Result<()> {
    match creds.headers(http::Extensions::new()).await {
        Ok(CacheableResource::New { .. } | CacheableResource::NotModified) => Ok(()),
        Err(e) => Err(ProviderError::auth(format!(
            "unable to get credentials: {}",
            chain_text(&e)
        ))),
    }
}

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

/// A ServiceAccount token source for the STS exchange: a TokenRequest each time a fresh subject
/// token is needed, counted as `GenerateServiceAccountToken`.
#[derive(Clone)]
pub struct KubeSubjectToken {
    kube: Arc<dyn KubeAccess>,
    recorder: Arc<dyn CallRecorder>,
    namespace: String,
    name: String,
    audiences: Vec<String>,
}

impl std::fmt::Debug for KubeSubjectToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeSubjectToken")
            .field(
                "serviceAccount",
                &format_args!("{}/{}", self.namespace, self.name),
            )
            .field("audiences", &self.audiences)
            .finish()
    }
}

/// A TokenRequest failure.
#[derive(Debug, thiserror::Error)]
#[error("unable to fetch pod token: {0}")]
pub struct SubjectTokenError(ProviderError);

impl SubjectTokenProviderError for SubjectTokenError {
    fn is_transient(&self) -> bool {
        matches!(
            self.0.kind(),
            esr_provider::ErrorKind::Transient | esr_provider::ErrorKind::Throttled
        )
    }
}

impl SubjectTokenProvider for KubeSubjectToken {
    type Error = SubjectTokenError;

    async fn subject_token(&self) -> std::result::Result<SubjectToken, Self::Error> {
        let r = self
            .kube
            .create_service_account_token(
                &self.namespace,
                &self.name,
                &self.audiences,
                Some(SA_TOKEN_SECONDS),
            )
            .await;
        let status = match &r {
            Ok(_) => CallStatus::Success,
            Err(e) => CallStatus::Error(e.kind()),
        };
        self.recorder
            .record(METRIC_PROVIDER, calls::GENERATE_SA_TOKEN, status);
        r.map(|t| SubjectTokenBuilder::new(t).build())
            .map_err(SubjectTokenError)
    }
}

/// The ServiceAccount of a reference (ESO's namespace rule) and its GCP service-account
/// annotation.
async fn service_account(
    ctx: &ClientContext<'_>,
    sa_ref: &ServiceAccountSelector,
) -> Result<(String, Option<String>)> {
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
    let gsa = sa
        .metadata
        .annotations
        .and_then(|a| a.get(GCP_SA_ANNOTATION).cloned())
        .filter(|v| !v.is_empty());
    Ok((ns, gsa))
}

/// The identity pool and provider of GKE workload identity.
pub fn gke_identity(cluster_project: &str, location: &str, cluster: &str) -> (String, String) {
    (
        format!("{cluster_project}.svc.id.goog"),
        format!(
            "https://container.googleapis.com/v1/projects/{cluster_project}/locations/{location}/clusters/{cluster}"
        ),
    )
}

async fn workload_identity(
    ctx: &ClientContext<'_>,
    p: &GcpSmProvider,
    wi: &GcpWorkloadIdentity,
    opts: &GcpOptions,
) -> Result<Credentials> {
    let lookup = |e: ProviderError| e.wrap("unable to lookup workload identity");
    let cluster_project = match non_empty(&wi.cluster_project_id).or(non_empty(&p.project_id)) {
        Some(pid) => pid,
        None => metadata_value("project/project-id")
            .await
            .map_err(|e| lookup(e.wrap("unable to get project id")))?,
    };
    let location = match non_empty(&wi.cluster_location) {
        Some(l) => l,
        None => metadata_value("instance/attributes/cluster-location")
            .await
            .map_err(|e| lookup(e.wrap("unable to determine cluster location")))?,
    };
    let cluster = match non_empty(&wi.cluster_name) {
        Some(c) => c,
        None => metadata_value("instance/attributes/cluster-name")
            .await
            .map_err(|e| lookup(e.wrap("unable to determine cluster name")))?,
    };
    let (pool, provider) = gke_identity(&cluster_project, &location, &cluster);
    let (ns, gsa) = service_account(ctx, &wi.service_account_ref).await?;
    let mut audiences = vec![pool.clone()];
    audiences.extend(wi.service_account_ref.audiences.clone().unwrap_or_default());
    let source = KubeSubjectToken {
        kube: ctx.kube.clone(),
        recorder: ctx.recorder.clone(),
        namespace: ns,
        name: wi.service_account_ref.name.clone(),
        audiences,
    };
    exchange(
        source,
        &format!("identitynamespace:{pool}:{provider}"),
        gsa,
        opts,
    )
}

async fn workload_identity_federation(
    ctx: &ClientContext<'_>,
    wif: &GcpWorkloadIdentityFederation,
    opts: &GcpOptions,
) -> Result<Credentials> {
    const PREFIX: &str = "invalid workloadIdentityFederation config";
    let count = usize::from(wif.cred_config.is_some())
        + usize::from(wif.service_account_ref.is_some())
        + usize::from(wif.aws_security_credentials.is_some());
    if count != 1 {
        return Err(ProviderError::invalid(format!(
            "{PREFIX}: exactly one of credConfig, awsSecurityCredentials or serviceAccountRef must be provided"
        )));
    }
    let Some(sa_ref) = &wif.service_account_ref else {
        return Err(ProviderError::unsupported(
            "workloadIdentityFederation with credConfig or awsSecurityCredentials is not supported by esr: use serviceAccountRef",
        ));
    };
    let Some(audience) = non_empty(&wif.audience) else {
        return Err(ProviderError::invalid(format!(
            "{PREFIX}: audience must be provided, when serviceAccountRef or awsSecurityCredentials is provided"
        )));
    };
    let (ns, annotated) = service_account(ctx, sa_ref).await?;
    let audiences = match sa_ref.audiences.clone().filter(|a| !a.is_empty()) {
        Some(a) => a,
        None => vec![audience.clone()],
    };
    let source = KubeSubjectToken {
        kube: ctx.kube.clone(),
        recorder: ctx.recorder.clone(),
        namespace: ns,
        name: sa_ref.name.clone(),
        audiences,
    };
    let gsa = non_empty(&wif.gcp_service_account_email).or(annotated);
    exchange(source, &audience, gsa, opts)
}

/// The STS exchange (and the impersonation of `gsa`, if any) on the auth crate's external
/// account credentials.
fn exchange(
    source: KubeSubjectToken,
    audience: &str,
    gsa: Option<String>,
    opts: &GcpOptions,
) -> Result<Credentials> {
    let mut b = ProgrammaticBuilder::new(Arc::new(source))
        .with_audience(audience)
        .with_subject_token_type(SUBJECT_TOKEN_TYPE_JWT)
        .with_token_url(opts.sts_url())
        .with_scopes([CLOUD_PLATFORM_SCOPE]);
    if let Some(gsa) = gsa {
        b = b.with_target_principal(gsa);
    }
    b.build()
        .map_err(|e| ProviderError::invalid(format!("unable to initialize workload identity: {e}")))
}

fn non_empty(v: &Option<String>) -> Option<String> {
    v.clone().filter(|s| !s.is_empty())
}

/// Env var naming the GCE metadata server host (as Google's libraries read it).
pub const ENV_GCE_METADATA_HOST: &str = "GCE_METADATA_HOST";

/// Reads a value of the GCE metadata server (`computeMetadata/v1/<path>`).
pub async fn metadata_value(path: &str) -> Result<String> {
    let host = std::env::var(ENV_GCE_METADATA_HOST)
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "metadata.google.internal".to_string());
    let url = format!("http://{host}/computeMetadata/v1/{path}");
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(5))
        .no_proxy()
        .build()
        .map_err(|e| ProviderError::transient(format!("metadata server client: {e}")))?;
    let resp = client
        .get(&url)
        .header("Metadata-Flavor", "Google")
        .send()
        .await
        .map_err(|e| ProviderError::transient(format!("metadata server {url}: {e}")))?;
    if !resp.status().is_success() {
        return Err(ProviderError::transient(format!(
            "metadata server {url}: HTTP {}",
            resp.status().as_u16()
        )));
    }
    let text = resp
        .text()
        .await
        .map_err(|e| ProviderError::transient(format!("metadata server {url}: {e}")))?;
    let text = text.trim().to_string();
    if text.is_empty() {
        return Err(ProviderError::transient(format!(
            "metadata server {url}: empty answer"
        )));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(v: serde_json::Value) -> GcpSmProvider {
        serde_json::from_value(v).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn method_order_and_referent() {
        let sa = spec(
            json!({"projectID": "p", "auth": {"secretRef": {"secretAccessKeySecretRef": {"name": "s", "key": "k"}}}}),
        );
        assert_eq!(method(&sa), AuthMethod::ServiceAccountKey);
        assert!(is_referent(&sa));
        let sa_ns = spec(
            json!({"auth": {"secretRef": {"secretAccessKeySecretRef": {"name": "s", "key": "k", "namespace": "n"}}}}),
        );
        assert!(!is_referent(&sa_ns));
        let wi = spec(json!({"auth": {"workloadIdentity": {"serviceAccountRef": {"name": "x"}}}}));
        assert_eq!(method(&wi), AuthMethod::WorkloadIdentity);
        assert!(is_referent(&wi));
        let wif = spec(json!({"auth": {"workloadIdentityFederation": {"audience": "a"}}}));
        assert_eq!(method(&wif), AuthMethod::WorkloadIdentityFederation);
        assert!(!is_referent(&wif));
        assert_eq!(
            method(&spec(json!({"projectID": "p"}))),
            AuthMethod::Default
        );
    }

    #[test]
    fn default_credentials_need_a_cluster_store_or_the_opt_in() {
        let p = spec(json!({"projectID": "p"}));
        let ss = StoreInfo::new(
            esr_provider::StoreKind::SecretStore,
            "s",
            Some("n".into()),
            json!({}),
        );
        let e = check_controller_identity(&ss, &p).err().map(|e| e.kind());
        assert_eq!(e, Some(esr_provider::ErrorKind::Auth));
        let css = StoreInfo::new(
            esr_provider::StoreKind::ClusterSecretStore,
            "s",
            None,
            json!({}),
        );
        assert!(check_controller_identity(&css, &p).is_ok());
        let with_key = spec(
            json!({"auth": {"secretRef": {"secretAccessKeySecretRef": {"name": "s", "key": "k"}}}}),
        );
        assert!(check_controller_identity(&ss, &with_key).is_ok());
    }

    #[test]
    fn gke_identity_names() {
        let (pool, provider) = gke_identity("cp", "europe-west1", "prod");
        assert_eq!(pool, "cp.svc.id.goog");
        assert_eq!(
            provider,
            "https://container.googleapis.com/v1/projects/cp/locations/europe-west1/clusters/prod"
        );
    }

    #[test]
    fn bad_key_json_does_not_echo_the_key() {
        let e = service_account_credentials("{\"private_key\": \"TOPSECRET\"")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.starts_with(ERR_JSON_CREDENTIALS), "{e}");
        assert!(!e.contains("TOPSECRET"), "{e}");
        let e = service_account_credentials(
            "{\"type\": \"service_account\", \"private_key\": \"TOPSECRET\"}",
        )
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
        assert!(e.starts_with(ERR_JSON_CREDENTIALS), "{e}");
        assert!(!e.contains("TOPSECRET"), "{e}");
    }
}
