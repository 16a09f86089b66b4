//! The Secrets Manager client of one store: ESO's `SecretsClient` operations on top of the
//! coalescing [`Fetcher`].

use std::collections::BTreeMap;
use std::sync::Arc;

use aws_config::SdkConfig;
use regex::Regex;

use crate::api::{SecretValue, SmApi, find_filters};
use crate::error::{AwsError, AwsErrorKind};
use crate::fetcher::{FetchKey, Fetcher, distinct};
use crate::property::{get_property, json_object_to_map, remove_property, set_property};
use crate::spec::{FindRef, RemoteRef, SecretsManagerSpec, Version};

/// ESO's managed-by tag.
pub const MANAGED_BY_KEY: &str = "managed-by";
pub const MANAGED_BY_VALUE: &str = "external-secrets";
/// ESO's ClientRequestToken for the first version of a pushed secret.
pub const INITIAL_VERSION: &str = "00000000-0000-0000-0000-000000000001";

/// Outcome of [`SmClient::validate`].
#[derive(Debug, Clone, PartialEq)]
pub enum Validation {
    Ready,
    /// Cannot be determined (referent auth, or AWS is throttling).
    Unknown,
    Error(AwsError),
}

/// One store's Secrets Manager client.
pub struct SmClient {
    fetcher: Fetcher<SmApi>,
    prefix: String,
    settings: Option<SecretsManagerSpec>,
    referent_unresolved: bool,
    sdk: SdkConfig,
}

impl std::fmt::Debug for SmClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SmClient")
            .field("prefix", &self.prefix)
            .field("referent_unresolved", &self.referent_unresolved)
            .finish()
    }
}

/// PushSecret metadata (`kind: PushSecretMetadata`, `spec`), the part esr supports.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PushMetadataSpec {
    #[serde(default)]
    tags: Option<BTreeMap<String, String>>,
    #[serde(default)]
    description: String,
    #[serde(default)]
    secret_push_format: String,
    #[serde(default, rename = "kmsKeyId")]
    kms_key_id: String,
    #[serde(default)]
    resource_policy: Option<serde_json::Value>,
    #[serde(default)]
    replication_locations: Option<Vec<String>>,
}

#[derive(Debug)]
struct PushMetadata {
    /// Tags given by the user (None: leave existing tags alone on update).
    user_tags: Option<BTreeMap<String, String>>,
    /// Tags to set: user tags plus managed-by.
    tags: BTreeMap<String, String>,
    description: String,
    as_string: bool,
    kms_key_id: String,
}

fn parse_push_metadata(meta: Option<&serde_json::Value>) -> Result<PushMetadata, AwsError> {
    let spec: PushMetadataSpec = esr_provider::metadata::parse_push_metadata(meta)
        .map_err(|e| {
            AwsError::invalid(format!(
                "failed to parse push secret metadata: {}",
                e.message()
            ))
        })?
        .map(|m| m.spec)
        .unwrap_or_default();
    if spec.resource_policy.is_some() || spec.replication_locations.is_some() {
        return Err(AwsError::invalid(
            "PushSecret metadata resourcePolicy and replicationLocations are not supported by esr yet",
        ));
    }
    let as_string = match spec.secret_push_format.as_str() {
        "" | "binary" => false,
        "string" => true,
        other => {
            return Err(AwsError::invalid(format!(
                "invalid secret push format: {other}"
            )));
        }
    };
    let mut tags = spec.tags.clone().unwrap_or_default();
    if tags.contains_key(MANAGED_BY_KEY) {
        return Err(AwsError::invalid(format!(
            "error parsing tags in metadata: Cannot specify a '{MANAGED_BY_KEY}' tag"
        )));
    }
    tags.insert(MANAGED_BY_KEY.into(), MANAGED_BY_VALUE.into());
    Ok(PushMetadata {
        user_tags: spec.tags.filter(|t| !t.is_empty()),
        tags,
        description: if spec.description.is_empty() {
            format!("secret '{MANAGED_BY_KEY}:{MANAGED_BY_VALUE}'")
        } else {
            spec.description
        },
        as_string,
        kms_key_id: if spec.kms_key_id.is_empty() {
            "alias/aws/secretsmanager".into()
        } else {
            spec.kms_key_id
        },
    })
}

fn extract(r: &RemoteRef, v: &SecretValue) -> Result<Vec<u8>, AwsError> {
    match r.property.as_deref() {
        None | Some("") => v.bytes().ok_or_else(|| {
            AwsError::invalid(format!(
                "invalid secret received. no secret string nor binary for key: {}",
                r.key
            ))
        }),
        Some(p) => get_property(&v.text(), p)
            .map(String::into_bytes)
            .ok_or_else(|| {
                AwsError::invalid(format!("key {p} does not exist in secret {}", r.key))
            }),
    }
}

impl SmClient {
    pub(crate) fn new(
        fetcher: Fetcher<SmApi>,
        prefix: String,
        settings: Option<SecretsManagerSpec>,
        referent_unresolved: bool,
        sdk: SdkConfig,
    ) -> Self {
        Self {
            fetcher,
            prefix,
            settings,
            referent_unresolved,
            sdk,
        }
    }

    /// The call counters of this client.
    pub fn calls(&self) -> &crate::calls::CallLog {
        self.fetcher.api().calls()
    }

    fn key_of(&self, r: &RemoteRef) -> FetchKey {
        FetchKey {
            id: format!("{}{}", self.prefix, r.key),
            version: Version::parse(r.version.as_deref()),
            metadata: r.fetch_metadata,
        }
    }

    fn guard(&self) -> Result<(), AwsError> {
        if self.referent_unresolved {
            return Err(AwsError::invalid(
                "this store uses referent authentication; it can only be used from an ExternalSecret namespace",
            ));
        }
        Ok(())
    }

    /// ESO `GetSecret`.
    pub async fn get_secret(&self, r: &RemoteRef) -> Result<Vec<u8>, AwsError> {
        self.guard()?;
        let v = self.fetcher.fetch(&self.key_of(r)).await?;
        extract(r, &v)
    }

    /// Many `GetSecret`s at once (one reconcile's `data[]`): every distinct secret is read once,
    /// whatever the number of properties taken from it, and distinct secrets are batched.
    pub async fn get_secrets(&self, refs: &[RemoteRef]) -> Vec<Result<Vec<u8>, AwsError>> {
        if let Err(e) = self.guard() {
            return refs.iter().map(|_| Err(e.clone())).collect();
        }
        let keys = distinct(refs.iter().map(|r| self.key_of(r)));
        let fetched: BTreeMap<String, Result<Arc<SecretValue>, AwsError>> = self
            .fetcher
            .fetch_many(&keys)
            .await
            .into_iter()
            .map(|(k, v)| {
                (
                    format!("{}\0{}\0{}", k.id, k.version.label(), k.metadata),
                    v,
                )
            })
            .collect();
        refs.iter()
            .map(|r| {
                let k = self.key_of(r);
                match fetched.get(&format!("{}\0{}\0{}", k.id, k.version.label(), k.metadata)) {
                    Some(Ok(v)) => extract(r, v),
                    Some(Err(e)) => Err(e.clone()),
                    None => Err(AwsError::transient("internal error: fetch result missing")),
                }
            })
            .collect()
    }

    /// ESO `GetSecretMap` (`dataFrom[].extract`).
    pub async fn get_secret_map(
        &self,
        r: &RemoteRef,
    ) -> Result<BTreeMap<String, Vec<u8>>, AwsError> {
        let data = self.get_secret(r).await?;
        json_object_to_map(&String::from_utf8_lossy(&data), &r.key)
    }

    /// ESO `GetAllSecrets` (`dataFrom[].find`): keys are the secret names.
    pub async fn get_all_secrets(
        &self,
        find: &FindRef,
    ) -> Result<BTreeMap<String, Vec<u8>>, AwsError> {
        self.guard()?;
        let name = find.name_regexp.as_deref();
        if name.is_none() && find.tags.is_empty() {
            return Err(AwsError::invalid("unexpected find operator"));
        }
        let matcher = match name {
            Some(n) => Some(
                Regex::new(n)
                    .map_err(|e| AwsError::invalid(format!("invalid find.name.regexp: {e}")))?,
            ),
            None => None,
        };
        let matches = |n: &str| matcher.as_ref().is_none_or(|m| m.is_match(n));
        let api = self.fetcher.api();

        // With a path or tags, one BatchGetSecretValue (per 20 secrets) returns names and values.
        if find.path.is_some() || !find.tags.is_empty() {
            let filters = find_filters(&find.tags, find.path.as_deref());
            match api.batch_get_by_filters(&filters).await {
                Ok(values) => {
                    let mut out = BTreeMap::new();
                    for v in values {
                        if !matches(&v.name) {
                            continue;
                        }
                        if let Some(b) = v.bytes() {
                            out.insert(v.name.clone(), b);
                        }
                        self.fetcher.seed(v).await;
                    }
                    return Ok(out);
                }
                Err(e) if e.message.starts_with("BatchGetSecretValue: AccessDenied") => {
                    tracing::warn!(error = %e.message, "BatchGetSecretValue denied for find; falling back to ListSecrets + GetSecretValue");
                }
                Err(e) => return Err(e),
            }
        }
        // ListSecrets, then read the matching secrets (coalesced and batched).
        let filters = find_filters(&find.tags, find.path.as_deref());
        let names: Vec<String> = api
            .list_secret_names(&filters)
            .await?
            .into_iter()
            .filter(|n| matches(n))
            .collect();
        let keys: Vec<FetchKey> = names
            .iter()
            .map(|n| FetchKey::value(n.clone(), Version::Current))
            .collect();
        let mut out = BTreeMap::new();
        for (k, res) in self.fetcher.fetch_many(&keys).await {
            match res {
                Ok(v) => {
                    if let Some(b) = v.bytes() {
                        out.insert(k.id, b);
                    }
                }
                // Deleted between the listing and the read.
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// ESO `SecretExists`.
    pub async fn secret_exists(&self, remote_key: &str) -> Result<bool, AwsError> {
        self.guard()?;
        let id = format!("{}{}", self.prefix, remote_key);
        match self
            .fetcher
            .api()
            .get_secret_value(&id, &Version::Current)
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// ESO `PushSecret`: create or update `prefix + remote_key`; refuses to touch a secret that
    /// does not carry `managed-by: external-secrets`. With a property, the value is merged into
    /// the secret's JSON object.
    pub async fn push_secret(
        &self,
        remote_key: &str,
        property: Option<&str>,
        value: &[u8],
        metadata: Option<&serde_json::Value>,
    ) -> Result<(), AwsError> {
        self.guard()?;
        let meta = parse_push_metadata(metadata)?;
        let name = format!("{}{}", self.prefix, remote_key);
        let property = property.filter(|p| !p.is_empty());
        let api = self.fetcher.api();
        let res = async {
            let described = match api.describe(&name).await {
                Ok(d) => d,
                Err(e) if e.is_not_found() => {
                    let v = match property {
                        Some(p) => set_property("", p, value)?,
                        None => value.to_vec(),
                    };
                    return api
                        .create(
                            &name,
                            &v,
                            meta.as_string,
                            &meta.tags,
                            &meta.description,
                            &meta.kms_key_id,
                            INITIAL_VERSION,
                        )
                        .await;
                }
                Err(e) => return Err(e),
            };
            if described.tags.get(MANAGED_BY_KEY).map(String::as_str) != Some(MANAGED_BY_VALUE) {
                return Err(AwsError::invalid(format!(
                    "secret not managed by external-secrets: {name} has no tag {MANAGED_BY_KEY}={MANAGED_BY_VALUE}"
                )));
            }
            let current = if described.has_versions {
                Some(api.get_secret_value(&name, &Version::Current).await?)
            } else {
                None
            };
            let new_value = match (property, &current) {
                (None, _) => value.to_vec(),
                (Some(p), None) => set_property("", p, value)?,
                (Some(p), Some(cur)) => set_property(&cur.text(), p, value)?,
            };
            if meta.user_tags.is_some() {
                let remove: Vec<String> = described
                    .tags
                    .keys()
                    .filter(|k| !meta.tags.contains_key(*k))
                    .cloned()
                    .collect();
                if !remove.is_empty() {
                    api.untag(&described.arn, remove).await?;
                }
                let modified = meta
                    .tags
                    .iter()
                    .any(|(k, v)| k != MANAGED_BY_KEY && described.tags.get(k) != Some(v));
                if modified {
                    api.tag(&described.arn, &meta.tags).await?;
                }
            }
            if let Some(cur) = &current
                && cur.bytes().as_deref() == Some(new_value.as_slice())
            {
                return Ok(());
            }
            let token = if current.is_some() {
                uuid::Uuid::new_v4().to_string()
            } else {
                INITIAL_VERSION.to_string()
            };
            api.put_value(&described.arn, &new_value, meta.as_string, &token)
                .await
        }
        .await;
        self.fetcher.invalidate(&name).await;
        res
    }

    /// ESO `DeleteSecret`: deletes `prefix + remote_key` if esr manages it (with the store's
    /// recovery window / force settings). With a property, only that property is removed, and
    /// the secret is deleted when no property is left.
    pub async fn delete_secret(
        &self,
        remote_key: &str,
        property: Option<&str>,
    ) -> Result<(), AwsError> {
        self.guard()?;
        let name = format!("{}{}", self.prefix, remote_key);
        let api = self.fetcher.api();
        let res = async {
            let described = match api.describe(&name).await {
                Ok(d) => d,
                Err(e) if e.is_not_found() => return Ok(()),
                Err(e) => return Err(e),
            };
            if described.tags.get(MANAGED_BY_KEY).map(String::as_str) != Some(MANAGED_BY_VALUE) {
                return Ok(());
            }
            if let Some(p) = property.filter(|p| !p.is_empty()) {
                let cur = match api
                    .get_secret_value(&described.arn, &Version::Current)
                    .await
                {
                    Ok(v) => v,
                    Err(e) if e.is_not_found() => return Ok(()),
                    Err(e) => return Err(e),
                };
                match remove_property(&cur.text(), p) {
                    None => return Ok(()),
                    Some((rest, false)) => {
                        let as_string = cur.binary.is_none();
                        let token = uuid::Uuid::new_v4().to_string();
                        return api
                            .put_value(&described.arn, &rest, as_string, &token)
                            .await;
                    }
                    Some((_, true)) => {}
                }
            }
            let (force, window) = match &self.settings {
                Some(s) => (
                    s.force_delete_without_recovery,
                    Some(s.recovery_window_in_days).filter(|d| *d > 0),
                ),
                None => (false, None),
            };
            match api.delete(&described.arn, force, window).await {
                Err(e) if e.is_not_found() => Ok(()),
                other => other,
            }
        }
        .await;
        self.fetcher.invalidate(&name).await;
        res
    }

    /// Store validation: one `ListSecrets(MaxResults=1)` resolves the credentials (STS for roles
    /// and IRSA, as ESO's Validate does) and proves that region, endpoint and credentials work.
    /// An AccessDenied answer still proves the credentials valid, so it counts as Ready.
    pub async fn validate(&self) -> Validation {
        if self.referent_unresolved {
            return Validation::Unknown;
        }
        match self.fetcher.api().probe().await {
            Ok(()) => Validation::Ready,
            // Permission to list is not needed by esr: being denied proves the credentials valid.
            Err(e) if e.message.starts_with("ListSecrets: AccessDenied") => Validation::Ready,
            Err(e) if e.kind == AwsErrorKind::Throttled => Validation::Unknown,
            Err(e) if e.kind == AwsErrorKind::Transient && !e.message.contains("credentials") => {
                Validation::Error(AwsError::new(
                    e.kind,
                    format!(
                        "{} (check spec.provider.aws.region {:?} and network access to Secrets Manager)",
                        e.message,
                        self.sdk.region().map(|r| r.as_ref()).unwrap_or("")
                    ),
                ))
            }
            Err(e) => Validation::Error(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_metadata_defaults_and_guards() {
        let m = parse_push_metadata(None).unwrap();
        assert!(!m.as_string);
        assert_eq!(m.tags.get(MANAGED_BY_KEY).unwrap(), MANAGED_BY_VALUE);
        assert_eq!(m.kms_key_id, "alias/aws/secretsmanager");
        assert_eq!(m.description, "secret 'managed-by:external-secrets'");
        let v = serde_json::json!({"apiVersion": "kubernetes.external-secrets.io/v1alpha1",
            "kind": "PushSecretMetadata", "spec": {"secretPushFormat": "string", "tags": {"team": "a"}}});
        let m = parse_push_metadata(Some(&v)).unwrap();
        assert!(m.as_string);
        assert_eq!(m.tags.len(), 2);
        let envelope = |spec: serde_json::Value| {
            serde_json::json!({"apiVersion": "kubernetes.external-secrets.io/v1alpha1",
                "kind": "PushSecretMetadata", "spec": spec})
        };
        let bad = envelope(serde_json::json!({"tags": {"managed-by": "me"}}));
        assert!(parse_push_metadata(Some(&bad)).is_err());
        let bad = envelope(serde_json::json!({"secretPushFormat": "yaml"}));
        assert!(parse_push_metadata(Some(&bad)).is_err());
        let bad = envelope(serde_json::json!({"unknownField": 1}));
        assert!(parse_push_metadata(Some(&bad)).is_err());
        let bad = serde_json::json!({"spec": {}});
        assert!(parse_push_metadata(Some(&bad)).is_err());
    }

    #[test]
    fn extract_property_and_errors() {
        let v = SecretValue {
            name: "n".into(),
            arn: "a".into(),
            version_id: None,
            string: Some(r#"{"user":"u","a.b":"lit"}"#.into()),
            binary: None,
        };
        assert_eq!(
            extract(&RemoteRef::key("n").property("user"), &v).unwrap(),
            b"u"
        );
        assert_eq!(
            extract(&RemoteRef::key("n").property("a.b"), &v).unwrap(),
            b"lit"
        );
        let e = extract(&RemoteRef::key("n").property("nope"), &v).unwrap_err();
        assert_eq!(e.message, "key nope does not exist in secret n");
        let empty = SecretValue { string: None, ..v };
        assert!(extract(&RemoteRef::key("n"), &empty).is_err());
    }
}
