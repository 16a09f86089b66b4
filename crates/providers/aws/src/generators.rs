//! The AWS generators, `ECRAuthorizationToken` and `STSSessionToken`, as ESO v2.9 runs them.
//!
//! Credentials are resolved like a SecretStore's in the referrer's namespace (`auth.secretRef`
//! Secrets and the `auth.jwt` ServiceAccount are read there; see [`crate::auth`]), then `role` is
//! assumed if set. Without `auth`, the controller's own credentials (the SDK default chain) are
//! used only where esr allows the controller identity for namespaced objects
//! ([`esr_provider::identity`]), as for a SecretStore.
//!
//! Output keys (ESO's):
//! * ECRAuthorizationToken (`scope: private`, the default): `username`, `password` (the decoded
//!   `user:password` authorization token), `proxy_endpoint` (e.g.
//!   `https://123456789012.dkr.ecr.eu-west-1.amazonaws.com`) and `expires_at` (Unix seconds).
//!   `scope: public` (ECR Public) is not implemented by esr.
//! * STSSessionToken: `access_key_id`, `secret_access_key`, `session_token` and `expiration`
//!   (Unix seconds). `auth.jwt` is refused (GetSessionToken needs long-term credentials).
//!
//! Each call is counted: `AWS/ECR` `GetAuthorizationToken`, `AWS/STS` `GetSessionToken` (and the
//! STS calls of role assumption).

use std::collections::BTreeMap;
use std::sync::Arc;

use aws_config::retry::RetryConfig;
use base64::Engine;
use esr_api::generators::{AwsGeneratorSession, ECRAuthorizationTokenSpec, STSSessionTokenSpec};

use crate::auth::{
    BuildInput, Endpoints, KubeSource, StoreIdentity, StoreKind, build_config, resolve_base,
    sts_client,
};
use crate::calls::{CallLog, PROVIDER_STS};
use crate::error::{AwsError, from_sdk};
use crate::spec::AwsProviderSpec;

/// `provider` label of ECR calls.
pub const PROVIDER_ECR: &str = "AWS/ECR";

/// The generated data: key → value.
pub type Generated = BTreeMap<String, Vec<u8>>;

/// Runs the AWS generators.
#[derive(Debug, Clone, Default)]
pub struct AwsGenerators {
    endpoints: Endpoints,
    calls: CallLog,
}

/// What one generator run needs besides its spec.
pub struct GenerateInput<'a> {
    /// The generator object's name.
    pub name: &'a str,
    /// The referrer's namespace: credential references resolve here.
    pub namespace: &'a str,
    pub kube: Arc<dyn KubeSource>,
}

/// The store-like view of the generator's auth, role and region.
fn session_spec(session: &AwsGeneratorSession) -> Result<AwsProviderSpec, AwsError> {
    let json = serde_json::json!({
        "service": "SecretsManager",
        "region": session.region,
        "role": session.role.as_deref().unwrap_or_default(),
        "auth": session.auth,
    });
    let spec = AwsProviderSpec::from_json(&json)?;
    crate::spec::validate_region(&spec.region)?;
    Ok(spec)
}

fn unix_seconds(t: &aws_smithy_types::DateTime) -> String {
    t.secs().to_string()
}

impl AwsGenerators {
    pub fn new(endpoints: Endpoints, calls: CallLog) -> Self {
        Self { endpoints, calls }
    }

    pub fn calls(&self) -> &CallLog {
        &self.calls
    }

    async fn sdk(
        &self,
        spec: &AwsProviderSpec,
        input: &GenerateInput<'_>,
    ) -> Result<aws_config::SdkConfig, AwsError> {
        let store = StoreIdentity {
            kind: StoreKind::SecretStore,
            name: input.name.to_string(),
            namespace: Some(input.namespace.to_string()),
            uid: String::new(),
            generation: 0,
        };
        let base = resolve_base(spec, &store, Some(input.namespace), input.kube.as_ref()).await?;
        let built = build_config(BuildInput {
            spec,
            retry: RetryConfig::standard(),
            base,
            session_tags: Vec::new(),
            endpoints: &self.endpoints,
            kube: input.kube.clone(),
            calls: self.calls.clone(),
        })
        .await
        .map_err(|mut e| {
            e.message = format!("unable to create aws session: {}", e.message);
            e
        })?;
        Ok(built.sdk)
    }

    /// ECRAuthorizationToken: one `GetAuthorizationToken` call.
    pub async fn ecr_authorization_token(
        &self,
        spec: &ECRAuthorizationTokenSpec,
        input: &GenerateInput<'_>,
    ) -> Result<Generated, AwsError> {
        const OP: &str = "GetAuthorizationToken";
        if spec.scope.as_deref() == Some("public") {
            return Err(AwsError::invalid(
                "ECRAuthorizationToken scope public (ECR Public) is not supported by esr",
            ));
        }
        let session = session_spec(&spec.session)?;
        let sdk = self.sdk(&session, input).await?;
        let mut b = aws_sdk_ecr::config::Builder::from(&sdk);
        if let Some(ep) = &self.endpoints.ecr {
            b = b.endpoint_url(ep);
        }
        let ecr = aws_sdk_ecr::Client::from_conf(b.build());
        let res = ecr
            .get_authorization_token()
            .send()
            .await
            .map_err(|e| from_sdk(OP, &e));
        self.calls
            .record(PROVIDER_ECR, OP, res.as_ref().err().map(|e| e.kind));
        let out = res.map_err(|mut e| {
            e.message = format!("unable to get authorization token: {}", e.message);
            e
        })?;
        let data = out.authorization_data();
        let [d] = data else {
            return Err(AwsError::invalid(format!(
                "unexpected number of authorization tokens. expected 1, found {}",
                data.len()
            )));
        };
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(d.authorization_token().unwrap_or_default())
            .map_err(|e| AwsError::invalid(format!("illegal base64 data: {e}")))?;
        let text = String::from_utf8_lossy(&decoded);
        let parts: Vec<&str> = text.split(':').collect();
        let [user, password] = parts.as_slice() else {
            return Err(AwsError::invalid("unexpected token format"));
        };
        let mut m = Generated::new();
        m.insert("username".into(), user.as_bytes().to_vec());
        m.insert("password".into(), password.as_bytes().to_vec());
        m.insert(
            "proxy_endpoint".into(),
            d.proxy_endpoint().unwrap_or_default().as_bytes().to_vec(),
        );
        m.insert(
            "expires_at".into(),
            d.expires_at()
                .map(unix_seconds)
                .unwrap_or_default()
                .into_bytes(),
        );
        Ok(m)
    }

    /// STSSessionToken: one `GetSessionToken` call with the request parameters.
    pub async fn sts_session_token(
        &self,
        spec: &STSSessionTokenSpec,
        input: &GenerateInput<'_>,
    ) -> Result<Generated, AwsError> {
        const OP: &str = "GetSessionToken";
        if spec.session.auth.as_ref().is_some_and(|a| a.jwt.is_some()) {
            return Err(AwsError::invalid(
                "jwt auth cannot be used for STS Session Token generation",
            ));
        }
        let session = session_spec(&spec.session)?;
        let sdk = self.sdk(&session, input).await?;
        let sts = sts_client(&sdk, &self.endpoints);
        let mut req = sts.get_session_token();
        if let Some(p) = &spec.request_parameters {
            req = req
                .set_duration_seconds(p.session_duration)
                .set_serial_number(p.serial_number.clone())
                .set_token_code(p.token_code.clone());
        }
        let res = req.send().await.map_err(|e| from_sdk(OP, &e));
        self.calls
            .record(PROVIDER_STS, OP, res.as_ref().err().map(|e| e.kind));
        let out = res.map_err(|mut e| {
            e.message = format!("unable to get authorization token: {}", e.message);
            e
        })?;
        let c = out
            .credentials()
            .ok_or_else(|| AwsError::invalid("no credentials found"))?;
        let mut m = Generated::new();
        m.insert(
            "access_key_id".into(),
            c.access_key_id().as_bytes().to_vec(),
        );
        m.insert(
            "secret_access_key".into(),
            c.secret_access_key().as_bytes().to_vec(),
        );
        m.insert(
            "session_token".into(),
            c.session_token().as_bytes().to_vec(),
        );
        m.insert(
            "expiration".into(),
            unix_seconds(c.expiration()).into_bytes(),
        );
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_spec_from_generator_fields() {
        let auth: esr_api::providers::aws::AwsAuth = serde_json::from_value(serde_json::json!({
            "secretRef": {
                "accessKeyIDSecretRef": {"name": "aws", "key": "id"},
                "secretAccessKeySecretRef": {"name": "aws", "key": "secret"}
            }
        }))
        .unwrap();
        let session = |region: &str, role: Option<&str>, auth| AwsGeneratorSession {
            region: region.to_string(),
            role: role.map(str::to_string),
            auth,
        };
        let s = session_spec(&session(
            "eu-west-1",
            Some("arn:aws:iam::1:role/r"),
            Some(auth),
        ))
        .unwrap();
        assert_eq!(s.region, "eu-west-1");
        assert_eq!(s.role, "arn:aws:iam::1:role/r");
        let sr = s.auth.secret_ref.unwrap();
        assert_eq!(sr.access_key_id.name, "aws");
        assert_eq!(sr.secret_access_key.key.as_deref(), Some("secret"));
        assert!(
            session_spec(&session("not a region", None, None))
                .unwrap_err()
                .message
                .contains("region not found")
        );
        let s = session_spec(&session("us-east-1", None, None)).unwrap();
        assert!(s.role.is_empty() && s.auth.secret_ref.is_none() && s.auth.jwt.is_none());
    }
}
