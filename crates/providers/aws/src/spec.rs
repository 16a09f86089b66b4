//! The `spec.provider.aws` store configuration, as ESO v2.9 defines it
//! (`secretstore_aws_types.go`), plus `spec.retrySettings`, and the per-request references.
//!
//! These are deserialised from the store's JSON so that this crate reads exactly the wire format
//! ESO users already have, whatever typed view the rest of esr uses.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::AwsError;

/// Treat an explicit JSON `null` like a missing field.
fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// `spec.provider.aws`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AwsProviderSpec {
    #[serde(default, deserialize_with = "nullable")]
    pub service: String,
    #[serde(default, deserialize_with = "nullable")]
    pub auth: AwsAuth,
    #[serde(default, deserialize_with = "nullable")]
    pub role: String,
    #[serde(default, deserialize_with = "nullable")]
    pub region: String,
    #[serde(default, deserialize_with = "nullable")]
    pub additional_roles: Vec<String>,
    #[serde(default, deserialize_with = "nullable", rename = "externalID")]
    pub external_id: String,
    #[serde(default, deserialize_with = "nullable")]
    pub session_tags: Vec<Option<Tag>>,
    #[serde(default, deserialize_with = "nullable")]
    pub secrets_manager: Option<SecretsManagerSpec>,
    #[serde(default, deserialize_with = "nullable")]
    pub transitive_tag_keys: Vec<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub session_tags_policy: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub custom_session_tags: BTreeMap<String, String>,
    #[serde(default, deserialize_with = "nullable")]
    pub prefix: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AwsAuth {
    #[serde(default, deserialize_with = "nullable")]
    pub secret_ref: Option<AwsAuthSecretRef>,
    #[serde(default, deserialize_with = "nullable")]
    pub jwt: Option<AwsJwtAuth>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AwsAuthSecretRef {
    #[serde(
        default,
        deserialize_with = "nullable",
        rename = "accessKeyIDSecretRef"
    )]
    pub access_key_id: SecretKeySelector,
    #[serde(
        default,
        deserialize_with = "nullable",
        rename = "secretAccessKeySecretRef"
    )]
    pub secret_access_key: SecretKeySelector,
    #[serde(
        default,
        deserialize_with = "nullable",
        rename = "sessionTokenSecretRef"
    )]
    pub session_token: Option<SecretKeySelector>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AwsJwtAuth {
    #[serde(default, deserialize_with = "nullable")]
    pub service_account_ref: Option<ServiceAccountSelector>,
}

/// ESO `SecretKeySelector`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SecretKeySelector {
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    #[serde(default, deserialize_with = "nullable")]
    pub namespace: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub key: Option<String>,
}

/// ESO `ServiceAccountSelector`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ServiceAccountSelector {
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    #[serde(default, deserialize_with = "nullable")]
    pub namespace: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub audiences: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tag {
    pub key: String,
    pub value: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SecretsManagerSpec {
    #[serde(default, deserialize_with = "nullable")]
    pub force_delete_without_recovery: bool,
    #[serde(default, deserialize_with = "nullable")]
    pub recovery_window_in_days: i64,
}

/// `spec.retrySettings`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RetrySettings {
    #[serde(default, deserialize_with = "nullable")]
    pub max_retries: Option<i32>,
    #[serde(default, deserialize_with = "nullable")]
    pub retry_interval: Option<String>,
}

/// `service` of a Secrets Manager store.
pub const SERVICE_SECRETS_MANAGER: &str = "SecretsManager";
/// `service` of a Parameter Store store.
pub const SERVICE_PARAMETER_STORE: &str = "ParameterStore";

impl AwsProviderSpec {
    /// Parse `spec.provider.aws` from JSON.
    pub fn from_json(value: &serde_json::Value) -> Result<Self, AwsError> {
        serde_json::from_value(value.clone())
            .map_err(|e| AwsError::invalid(format!("invalid spec.provider.aws: {e}")))
    }

    /// Static checks ESO's `ValidateStore` makes (service, region, delete settings).
    pub fn validate(&self) -> Result<(), AwsError> {
        if self.service != SERVICE_SECRETS_MANAGER && self.service != SERVICE_PARAMETER_STORE {
            return Err(AwsError::invalid(format!(
                "unknown AWS Provider Service: {} (esr supports SecretsManager and ParameterStore)",
                self.service
            )));
        }
        validate_region(&self.region)?;
        if let Some(sm) = &self.secrets_manager {
            validate_delete_settings(sm)?;
        }
        if let Some(p) = &self.session_tags_policy
            && !matches!(p.as_str(), "" | "None" | "Simple" | "Custom")
        {
            return Err(AwsError::invalid(format!(
                "invalid sessionTagsPolicy {p:?}: must be None, Simple or Custom"
            )));
        }
        if self.auth.secret_ref.is_some() && self.auth.jwt.is_some() {
            return Err(AwsError::invalid(
                "only one of auth.secretRef or auth.jwt can be specified",
            ));
        }
        Ok(())
    }

    /// The session tags to pass to the final AssumeRole call, including the tags
    /// `sessionTagsPolicy: Simple|Custom` adds.
    pub fn effective_session_tags(
        &self,
        store_name: &str,
        store_kind: &str,
        es_namespace: Option<&str>,
    ) -> Vec<(String, String)> {
        let mut tags: Vec<(String, String)> = self
            .session_tags
            .iter()
            .flatten()
            .map(|t| (t.key.clone(), t.value.clone()))
            .collect();
        let policy = self.session_tags_policy.as_deref().unwrap_or("None");
        if policy == "Simple" || policy == "Custom" {
            let mut auto = vec![
                ("esoStoreName".to_string(), store_name.to_string()),
                ("esoStoreKind".to_string(), store_kind.to_string()),
            ];
            if let Some(ns) = es_namespace {
                auto.push(("esoNamespace".to_string(), ns.to_string()));
            }
            if policy == "Custom" {
                for (k, v) in &self.custom_session_tags {
                    auto.push((k.clone(), v.clone()));
                }
            }
            for (k, v) in auto {
                tags.retain(|(ek, _)| *ek != k);
                tags.push((k, v));
            }
        }
        tags
    }

    /// Does the store depend on the namespace of the ExternalSecret (referent auth)?
    /// Mirrors ESO's `IsReferentSpec`; only meaningful for ClusterSecretStores.
    pub fn is_referent(&self) -> bool {
        if let Some(jwt) = &self.auth.jwt
            && let Some(sa) = &jwt.service_account_ref
            && sa.namespace.is_none()
        {
            return true;
        }
        if let Some(sr) = &self.auth.secret_ref
            && (sr.access_key_id.namespace.is_none()
                || sr.secret_access_key.namespace.is_none()
                || sr
                    .session_token
                    .as_ref()
                    .is_some_and(|t| t.namespace.is_none()))
        {
            return true;
        }
        false
    }
}

/// A region must be a valid DNS label, as the AWS endpoint rules require.
pub fn validate_region(region: &str) -> Result<(), AwsError> {
    let ok = !region.is_empty()
        && region.len() <= 63
        && region
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !region.starts_with('-')
        && !region.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(AwsError::invalid(format!("region not found: {region:?}")))
    }
}

/// ESO's `ValidateDeleteSecretInput`.
pub fn validate_delete_settings(sm: &SecretsManagerSpec) -> Result<(), AwsError> {
    if sm.force_delete_without_recovery && sm.recovery_window_in_days > 0 {
        return Err(AwsError::invalid(
            "invalid SecretsManager settings: ForceDeleteWithoutRecovery conflicts with RecoveryWindowInDays",
        ));
    }
    if sm.recovery_window_in_days > 0 && !(7..=30).contains(&sm.recovery_window_in_days) {
        return Err(AwsError::invalid(
            "invalid SecretsManager settings: RecoveryWindowInDays must be between 7 and 30 days",
        ));
    }
    Ok(())
}

impl RetrySettings {
    /// `(max attempts, fixed delay)` as ESO applies them: maxRetries (default 3) becomes the
    /// SDK's max attempts; retryInterval (a Go duration) the delay between attempts.
    pub fn resolve(&self) -> Result<(u32, Option<Duration>), AwsError> {
        let attempts = self.max_retries.unwrap_or(3).max(1) as u32;
        let delay = match &self.retry_interval {
            Some(s) if !s.is_empty() => {
                Some(esr_api::duration::parse_std(s.trim()).map_err(|e| {
                    AwsError::invalid(format!("unable to initialize aws provider: {e}"))
                })?)
            }
            _ => None,
        };
        Ok((attempts, delay))
    }
}

/// The version selector of a remote reference.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Version {
    /// `AWSCURRENT` (the default; fetchable with BatchGetSecretValue).
    Current,
    /// Any other stage, e.g. `AWSPREVIOUS`.
    Stage(String),
    /// `uuid/<VersionId>`.
    Id(String),
}

impl Version {
    /// ESO's rule: empty → AWSCURRENT, `uuid/<id>` → VersionId, anything else → VersionStage.
    pub fn parse(v: Option<&str>) -> Self {
        match v {
            None | Some("") | Some("AWSCURRENT") => Version::Current,
            Some(s) => match s.strip_prefix("uuid/") {
                Some(id) => Version::Id(id.to_string()),
                None => Version::Stage(s.to_string()),
            },
        }
    }

    pub fn label(&self) -> String {
        match self {
            Version::Current => "AWSCURRENT".into(),
            Version::Stage(s) => s.clone(),
            Version::Id(id) => format!("uuid/{id}"),
        }
    }
}

/// `remoteRef` of `data[]` / `dataFrom[].extract`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RemoteRef {
    pub key: String,
    pub version: Option<String>,
    pub property: Option<String>,
    /// `metadataPolicy: Fetch` returns the secret's tags instead of its value.
    pub fetch_metadata: bool,
}

impl RemoteRef {
    pub fn key(key: impl Into<String>) -> Self {
        Self {
            key: key.into(),
            ..Self::default()
        }
    }
    pub fn property(mut self, p: impl Into<String>) -> Self {
        self.property = Some(p.into());
        self
    }
    pub fn version(mut self, v: impl Into<String>) -> Self {
        self.version = Some(v.into());
        self
    }
    pub fn metadata(mut self) -> Self {
        self.fetch_metadata = true;
        self
    }
}

/// `dataFrom[].find`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FindRef {
    pub name_regexp: Option<String>,
    pub tags: BTreeMap<String, String>,
    pub path: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_eso_store_json() {
        let v = serde_json::json!({
            "service": "SecretsManager",
            "region": "eu-west-1",
            "role": "arn:aws:iam::1:role/r",
            "additionalRoles": ["arn:aws:iam::1:role/a"],
            "externalID": "ext",
            "sessionTags": [{"key": "k", "value": "v"}, null],
            "transitiveTagKeys": ["k"],
            "prefix": "team/",
            "secretsManager": {"forceDeleteWithoutRecovery": true},
            "auth": {"secretRef": {
                "accessKeyIDSecretRef": {"name": "aws", "key": "id"},
                "secretAccessKeySecretRef": {"name": "aws", "key": "secret", "namespace": "x"}
            }}
        });
        let s = AwsProviderSpec::from_json(&v).unwrap();
        assert_eq!(s.external_id, "ext");
        let nulls = serde_json::json!({"service": "SecretsManager", "region": "x", "role": null,
            "sessionTags": null, "auth": {"secretRef": null, "jwt": null}, "prefix": null});
        let n = AwsProviderSpec::from_json(&nulls).unwrap();
        assert!(n.session_tags.is_empty() && n.role.is_empty() && n.auth.secret_ref.is_none());
        assert_eq!(s.additional_roles, vec!["arn:aws:iam::1:role/a"]);
        assert_eq!(s.prefix, "team/");
        let sr = s.auth.secret_ref.as_ref().unwrap();
        assert_eq!(sr.access_key_id.key.as_deref(), Some("id"));
        assert_eq!(sr.secret_access_key.namespace.as_deref(), Some("x"));
        assert!(s.is_referent());
        s.validate().unwrap();
        assert_eq!(
            s.effective_session_tags("st", "SecretStore", Some("ns")),
            vec![("k".to_string(), "v".to_string())]
        );
    }

    #[test]
    fn reads_what_the_typed_api_serialises() {
        let wire = serde_json::json!({
            "service": "SecretsManager", "region": "eu-west-1", "role": "arn:r",
            "additionalRoles": ["arn:a"], "externalID": "e", "prefix": "p/",
            "sessionTags": [{"key": "k", "value": "v"}], "sessionTagsPolicy": "Simple",
            "secretsManager": {"recoveryWindowInDays": 7},
            "auth": {"jwt": {"serviceAccountRef": {"name": "sa", "audiences": ["x"]}}}
        });
        let typed: esr_api::providers::aws::AwsProvider =
            serde_json::from_value(wire.clone()).unwrap();
        let back = serde_json::to_value(&typed).unwrap();
        let a = AwsProviderSpec::from_json(&back).unwrap();
        let b = AwsProviderSpec::from_json(&wire).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.auth.jwt.unwrap().service_account_ref.unwrap().name, "sa");
    }

    #[test]
    fn session_tags_policy() {
        let mut s = AwsProviderSpec {
            session_tags_policy: Some("Custom".into()),
            ..Default::default()
        };
        s.custom_session_tags.insert("team".into(), "a".into());
        let tags = s.effective_session_tags("st", "ClusterSecretStore", Some("ns"));
        assert!(tags.contains(&("esoNamespace".into(), "ns".into())));
        assert!(tags.contains(&("esoStoreKind".into(), "ClusterSecretStore".into())));
        assert!(tags.contains(&("team".into(), "a".into())));
    }

    #[test]
    fn rejects_bad_settings() {
        let mut s = AwsProviderSpec {
            service: "SecretsManager".into(),
            region: "us-east-1".into(),
            ..Default::default()
        };
        s.validate().unwrap();
        s.region = "not a region".into();
        assert!(
            s.validate()
                .unwrap_err()
                .message
                .contains("region not found")
        );
        s.region = "us-east-1".into();
        s.secrets_manager = Some(SecretsManagerSpec {
            force_delete_without_recovery: true,
            recovery_window_in_days: 7,
        });
        assert!(s.validate().is_err());
        s.secrets_manager = Some(SecretsManagerSpec {
            force_delete_without_recovery: false,
            recovery_window_in_days: 3,
        });
        assert!(s.validate().is_err());
        s.secrets_manager = None;
        s.service = "ParameterStore".into();
        s.validate().unwrap();
        s.service = "CertificateManager".into();
        assert!(s.validate().is_err());
    }

    #[test]
    fn versions() {
        assert_eq!(Version::parse(None), Version::Current);
        assert_eq!(Version::parse(Some("AWSCURRENT")), Version::Current);
        assert_eq!(
            Version::parse(Some("AWSPREVIOUS")),
            Version::Stage("AWSPREVIOUS".into())
        );
        assert_eq!(Version::parse(Some("uuid/abc")), Version::Id("abc".into()));
    }

    #[test]
    fn retry_settings() {
        let r = RetrySettings {
            max_retries: Some(5),
            retry_interval: Some("2s".into()),
        };
        assert_eq!(r.resolve().unwrap(), (5, Some(Duration::from_secs(2))));
        for bad in ["5", "abc", "-1s"] {
            let r = RetrySettings {
                max_retries: None,
                retry_interval: Some(bad.into()),
            };
            assert!(r.resolve().is_err(), "{bad:?} should be rejected");
        }
    }
}
