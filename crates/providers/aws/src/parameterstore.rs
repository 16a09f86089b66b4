//! The Parameter Store client of one store (`service: ParameterStore`): ESO's `SecretsClient`
//! operations on top of the coalescing [`Fetcher`].
//!
//! * `remoteRef.key` is the parameter name (after `prefix`); `version` selects a version number or
//!   a label (`name:version`); `property` is a gjson path into a JSON value.
//! * Reads of the current value of different parameters are batched into `GetParameters`
//!   (≤ 10 names per call) and coalesced across ExternalSecrets, like Secrets Manager's.
//! * `metadataPolicy: Fetch` returns the parameter's tags as a JSON object.
//! * `find.name` lists `find.path` (default `/`) recursively with `GetParametersByPath` and keeps
//!   the names matching the regexp (if `GetParametersByPath` is denied: `DescribeParameters` and
//!   reads); otherwise `find.tags` selects with `DescribeParameters` tag filters (and `find.path`).
//!   With neither, the error is ESO's `unexpected find operator`.
//! * PushSecret writes with `PutParameter` and refuses to update a parameter without the tag
//!   `managed-by: external-secrets`; DeleteSecret only deletes parameters carrying it.

use std::collections::BTreeMap;
use std::sync::Arc;

use aws_config::SdkConfig;
use aws_credential_types::provider::ProvideCredentials;
use esr_provider::find::NameMatcher;

use crate::client::{MANAGED_BY_KEY, MANAGED_BY_VALUE, Validation};
use crate::error::AwsError;
use crate::fetcher::{FetchKey, Fetcher, distinct};
use crate::property::{get_property, json_object_to_map};
use crate::spec::{FindRef, RemoteRef, Version};
use crate::ssm::{Parameter, PsApi, PutInput, path_filter, tag_filter};

/// PushSecret metadata of Parameter Store (`kind: PushSecretMetadata`, `spec`).
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PushMetadataSpec {
    #[serde(default)]
    secret_type: String,
    #[serde(default, rename = "kmsKeyID")]
    kms_key_id: String,
    #[serde(default)]
    tier: TierSpec,
    #[serde(default)]
    encode_as_decoded: bool,
    #[serde(default)]
    tags: Option<BTreeMap<String, String>>,
    #[serde(default)]
    description: String,
}

#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct TierSpec {
    #[serde(default, rename = "type")]
    tier_type: String,
    #[serde(default)]
    policies: Option<serde_json::Value>,
}

/// PushSecret metadata after ESO's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct PushMetadata {
    /// `secretType`: `String` (default), `StringList` or `SecureString`.
    pub secret_type: String,
    /// `kmsKeyID` (default `alias/aws/ssm`), sent for SecureString only.
    pub kms_key_id: String,
    /// `tier.type` (default `Standard`); `tier.policies` are sent for `Advanced` only.
    pub tier: String,
    pub policies: Option<String>,
    /// Push the whole Secret as a JSON object of plain strings instead of base64 values.
    pub encode_as_decoded: bool,
    /// User tags plus `managed-by: external-secrets`.
    pub tags: BTreeMap<String, String>,
    pub description: String,
}

/// Parse `data[].metadata` with ESO's defaults and its managed-by guard.
pub fn parse_push_metadata(meta: Option<&serde_json::Value>) -> Result<PushMetadata, AwsError> {
    let spec: PushMetadataSpec = esr_provider::metadata::parse_push_metadata(meta)
        .map_err(|e| AwsError::invalid(format!("failed to parse metadata: {}", e.message())))?
        .map(|m| m.spec)
        .unwrap_or_default();
    let mut tags = spec.tags.unwrap_or_default();
    if tags.contains_key(MANAGED_BY_KEY) {
        return Err(AwsError::invalid(format!(
            "error parsing tags in metadata: Cannot specify a '{MANAGED_BY_KEY}' tag"
        )));
    }
    tags.insert(MANAGED_BY_KEY.into(), MANAGED_BY_VALUE.into());
    let or = |s: String, d: &str| if s.is_empty() { d.to_string() } else { s };
    let policies = match &spec.tier.policies {
        Some(p) if !p.is_null() => Some(
            serde_json::to_string(p)
                .map_err(|e| AwsError::invalid(format!("failed to parse metadata: {e}")))?,
        ),
        _ => None,
    };
    Ok(PushMetadata {
        secret_type: or(spec.secret_type, "String"),
        kms_key_id: or(spec.kms_key_id, "alias/aws/ssm"),
        tier: or(spec.tier.tier_type, "Standard"),
        policies,
        encode_as_decoded: spec.encode_as_decoded,
        tags,
        description: or(
            spec.description,
            &format!("secret '{MANAGED_BY_KEY}:{MANAGED_BY_VALUE}'"),
        ),
    })
}

/// What a PushSecret entry pushes.
#[derive(Debug, Clone, Copy)]
pub enum PushValue<'a> {
    /// The value of `match.secretKey`.
    Key(&'a [u8]),
    /// The whole Secret (no `secretKey`): a JSON object of base64 values, or of the plain values
    /// with `encodeAsDecoded`.
    Whole(&'a BTreeMap<String, Vec<u8>>),
}

impl PushValue<'_> {
    fn render(&self, encode_as_decoded: bool) -> Result<String, AwsError> {
        use base64::Engine;
        match self {
            PushValue::Key(v) => Ok(String::from_utf8_lossy(v).into_owned()),
            PushValue::Whole(data) => {
                let m: BTreeMap<&String, String> = data
                    .iter()
                    .map(|(k, v)| {
                        let s = if encode_as_decoded {
                            String::from_utf8_lossy(v).into_owned()
                        } else {
                            base64::engine::general_purpose::STANDARD.encode(v)
                        };
                        (k, s)
                    })
                    .collect();
                serde_json::to_string(&m).map_err(|e| {
                    AwsError::invalid(format!("failed to serialize secret content as JSON: {e}"))
                })
            }
        }
    }
}

/// One store's Parameter Store client.
pub struct PsClient {
    fetcher: Fetcher<PsApi>,
    prefix: String,
    referent_unresolved: bool,
    sdk: SdkConfig,
}

impl std::fmt::Debug for PsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PsClient")
            .field("prefix", &self.prefix)
            .field("referent_unresolved", &self.referent_unresolved)
            .finish()
    }
}

fn extract(r: &RemoteRef, p: &Parameter) -> Result<Vec<u8>, AwsError> {
    match r.property.as_deref() {
        None | Some("") => Ok(p.value.as_bytes().to_vec()),
        Some(prop) => get_property(&p.value, prop)
            .map(String::into_bytes)
            .ok_or_else(|| {
                AwsError::invalid(format!("key {prop} does not exist in secret {}", r.key))
            }),
    }
}

impl PsClient {
    pub(crate) fn new(
        fetcher: Fetcher<PsApi>,
        prefix: String,
        referent_unresolved: bool,
        sdk: SdkConfig,
    ) -> Self {
        Self {
            fetcher,
            prefix,
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
            // Any non-empty version is a selector (`name:version`).
            version: match r.version.as_deref() {
                None | Some("") => Version::Current,
                Some(v) => Version::Stage(v.to_string()),
            },
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
        let p = self.fetcher.fetch(&self.key_of(r)).await?;
        extract(r, &p)
    }

    /// Many `GetSecret`s at once (one reconcile's `data[]`): every distinct parameter is read
    /// once, and distinct parameters are batched into `GetParameters`.
    pub async fn get_secrets(&self, refs: &[RemoteRef]) -> Vec<Result<Vec<u8>, AwsError>> {
        if let Err(e) = self.guard() {
            return refs.iter().map(|_| Err(e.clone())).collect();
        }
        let keys = distinct(refs.iter().map(|r| self.key_of(r)));
        let fetched: std::collections::HashMap<FetchKey, Result<Arc<Parameter>, AwsError>> =
            self.fetcher.fetch_many(&keys).await.into_iter().collect();
        refs.iter()
            .map(|r| match fetched.get(&self.key_of(r)) {
                Some(Ok(p)) => extract(r, p),
                Some(Err(e)) => Err(e.clone()),
                None => Err(AwsError::transient("internal error: fetch result missing")),
            })
            .collect()
    }

    /// ESO `GetSecretMap` (`dataFrom[].extract`): a JSON object, string values unquoted.
    pub async fn get_secret_map(
        &self,
        r: &RemoteRef,
    ) -> Result<BTreeMap<String, Vec<u8>>, AwsError> {
        let data = self.get_secret(r).await?;
        json_object_to_map(&String::from_utf8_lossy(&data), &r.key)
    }

    /// Read the current value of `names` (batched), skipping parameters deleted meanwhile.
    async fn read_all(&self, names: Vec<String>) -> Result<BTreeMap<String, Vec<u8>>, AwsError> {
        let keys: Vec<FetchKey> = names
            .into_iter()
            .map(|n| FetchKey::value(n, Version::Current))
            .collect();
        let mut out = BTreeMap::new();
        for (k, res) in self.fetcher.fetch_many(&keys).await {
            match res {
                Ok(p) => {
                    out.insert(k.id, p.value.as_bytes().to_vec());
                }
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// ESO `GetAllSecrets` (`dataFrom[].find`): keys are the parameter names.
    pub async fn get_all_secrets(
        &self,
        find: &FindRef,
    ) -> Result<BTreeMap<String, Vec<u8>>, AwsError> {
        self.guard()?;
        let api = self.fetcher.api();
        if let Some(re) = find.name_regexp.as_deref() {
            let matcher = NameMatcher::new(re).map_err(|e| AwsError::invalid(e.message()))?;
            let path = find.path.clone().unwrap_or_else(|| "/".to_string());
            return match api.get_parameters_by_path(&path).await {
                Ok(params) => {
                    let mut out = BTreeMap::new();
                    for p in params {
                        if !matcher.matches(&p.name) {
                            continue;
                        }
                        out.insert(p.name.clone(), p.value.as_bytes().to_vec());
                        self.fetcher.seed(p).await;
                    }
                    Ok(out)
                }
                Err(e) if e.message.starts_with("GetParametersByPath: AccessDenied") => {
                    tracing::info!(path = %path, "GetParametersByPath: access denied. using fallback to describe parameters. It is recommended to add ssm:GetParametersByPath permissions");
                    let filters = match &find.path {
                        Some(p) => vec![path_filter(p)?],
                        None => Vec::new(),
                    };
                    let names = api
                        .describe_parameter_names(&filters)
                        .await?
                        .into_iter()
                        .filter(|n| matcher.matches(n))
                        .collect();
                    self.read_all(names).await
                }
                Err(mut e) => {
                    e.message = format!("fetching parameters by path {path}: {}", e.message);
                    Err(e)
                }
            };
        }
        if !find.tags.is_empty() {
            let mut filters = find
                .tags
                .iter()
                .map(|(k, v)| tag_filter(k, v))
                .collect::<Result<Vec<_>, _>>()?;
            if let Some(p) = &find.path {
                filters.push(path_filter(p)?);
            }
            let names = api.describe_parameter_names(&filters).await?;
            return self.read_all(names).await;
        }
        Err(AwsError::invalid("unexpected find operator"))
    }

    /// ESO `SecretExists`.
    pub async fn secret_exists(&self, remote_key: &str) -> Result<bool, AwsError> {
        self.guard()?;
        let name = format!("{}{}", self.prefix, remote_key);
        match self.fetcher.api().get_parameter(&name, false).await {
            Ok(_) => Ok(true),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// ESO `PushSecret`: create `prefix + remote_key` (with the tags) or, if it carries
    /// `managed-by: external-secrets`, overwrite its value when it differs and reconcile its tags.
    pub async fn push_secret(
        &self,
        remote_key: &str,
        value: PushValue<'_>,
        metadata: Option<&serde_json::Value>,
    ) -> Result<(), AwsError> {
        self.guard()?;
        let meta = parse_push_metadata(metadata)?;
        let value = value.render(meta.encode_as_decoded)?;
        let name = format!("{}{}", self.prefix, remote_key);
        let mut input = PutInput {
            name: name.clone(),
            value,
            parameter_type: meta.secret_type.clone(),
            description: meta.description.clone(),
            key_id: (meta.secret_type == "SecureString").then(|| meta.kms_key_id.clone()),
            tier: None,
            policies: None,
            tags: BTreeMap::new(),
            overwrite: true,
        };
        if meta.tier == "Advanced" {
            input.tier = Some(meta.tier.clone());
            input.policies = meta.policies.clone();
        }
        let api = self.fetcher.api();
        let res = async {
            let existing = match api.get_parameter(&name, true).await {
                Ok(p) => p,
                Err(e) if e.is_not_found() => {
                    // Tags can only be given when creating (overwrite = false).
                    input.tags = meta.tags.clone();
                    input.overwrite = false;
                    return api.put_parameter(&input).await;
                }
                Err(mut e) => {
                    e.message = format!("unexpected error getting parameter {name}: {}", e.message);
                    return Err(e);
                }
            };
            let tags = api.list_tags(&name).await.map_err(|mut e| {
                e.message = format!(
                    "error getting the existing tags for the parameter {name}: {}",
                    e.message
                );
                e
            })?;
            if tags.get(MANAGED_BY_KEY).map(String::as_str) != Some(MANAGED_BY_VALUE) {
                return Err(AwsError::invalid("secret not managed by external-secrets"));
            }
            if existing.value == input.value {
                return Ok(());
            }
            api.put_parameter(&input).await?;
            let remove: Vec<String> = tags
                .keys()
                .filter(|k| !meta.tags.contains_key(*k))
                .cloned()
                .collect();
            if !remove.is_empty() {
                api.remove_tags(&name, remove).await?;
            }
            let modified = meta
                .tags
                .iter()
                .any(|(k, v)| k != MANAGED_BY_KEY && tags.get(k) != Some(v));
            if modified {
                api.add_tags(&name, &meta.tags).await?;
            }
            Ok(())
        }
        .await;
        self.fetcher.invalidate(&name).await;
        res
    }

    /// ESO `DeleteSecret`: deletes `prefix + remote_key` if it carries the managed-by tag; a
    /// missing or foreign parameter counts as deleted.
    pub async fn delete_secret(&self, remote_key: &str) -> Result<(), AwsError> {
        self.guard()?;
        let name = format!("{}{}", self.prefix, remote_key);
        let api = self.fetcher.api();
        let res = async {
            match api.get_parameter(&name, false).await {
                Ok(_) => {}
                Err(e) if e.is_not_found() => return Ok(()),
                Err(mut e) => {
                    e.message = format!("unexpected error getting parameter {name}: {}", e.message);
                    return Err(e);
                }
            }
            let tags = api.list_tags(&name).await.map_err(|mut e| {
                e.message = format!(
                    "error getting the existing tags for the parameter {name}: {}",
                    e.message
                );
                e
            })?;
            if tags.get(MANAGED_BY_KEY).map(String::as_str) != Some(MANAGED_BY_VALUE) {
                return Ok(());
            }
            match api.delete_parameter(&name).await {
                Ok(()) => Ok(()),
                Err(e) if e.is_not_found() => Ok(()),
                Err(mut e) => {
                    e.message = format!("could not delete parameter {name}: {}", e.message);
                    Err(e)
                }
            }
        }
        .await;
        self.fetcher.invalidate(&name).await;
        res
    }

    /// Store validation as ESO does it for Parameter Store: the credentials resolve (static keys,
    /// or STS for roles and IRSA). No Parameter Store call is made. Referent stores: Unknown.
    pub async fn validate(&self) -> Validation {
        if self.referent_unresolved {
            return Validation::Unknown;
        }
        let Some(provider) = self.sdk.credentials_provider() else {
            return Validation::Error(AwsError::auth("no AWS credentials provider"));
        };
        match provider.provide_credentials().await {
            Ok(_) => Validation::Ready,
            Err(e) => {
                let e = crate::error::credentials_error(&e);
                if e.kind == crate::error::AwsErrorKind::Throttled {
                    Validation::Unknown
                } else {
                    Validation::Error(e)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn envelope(spec: serde_json::Value) -> serde_json::Value {
        serde_json::json!({"apiVersion": "kubernetes.external-secrets.io/v1alpha1",
            "kind": "PushSecretMetadata", "spec": spec})
    }

    #[test]
    fn push_metadata_defaults() {
        let m = parse_push_metadata(None).unwrap();
        assert_eq!(m.secret_type, "String");
        assert_eq!(m.kms_key_id, "alias/aws/ssm");
        assert_eq!(m.tier, "Standard");
        assert_eq!(m.description, "secret 'managed-by:external-secrets'");
        assert_eq!(
            m.tags,
            BTreeMap::from([("managed-by".to_string(), "external-secrets".to_string())])
        );
        assert!(!m.encode_as_decoded);
        assert_eq!(m.policies, None);
    }

    #[test]
    fn push_metadata_options_and_guard() {
        let v = envelope(serde_json::json!({
            "secretType": "SecureString", "kmsKeyID": "k", "description": "d",
            "encodeAsDecoded": true,
            "tier": {"type": "Advanced", "policies": [{"type": "Expiration", "version": "1.0",
                "attributes": {"timestamp": "2030-01-01T00:00:00.000Z"}}]},
            "tags": {"team": "a"}
        }));
        let m = parse_push_metadata(Some(&v)).unwrap();
        assert_eq!(m.secret_type, "SecureString");
        assert_eq!(m.kms_key_id, "k");
        assert_eq!(m.tier, "Advanced");
        assert!(m.encode_as_decoded);
        assert_eq!(
            m.policies.as_deref(),
            Some(
                r#"[{"type":"Expiration","version":"1.0","attributes":{"timestamp":"2030-01-01T00:00:00.000Z"}}]"#
            )
        );
        assert_eq!(m.tags.len(), 2);
        let bad = envelope(serde_json::json!({"tags": {"managed-by": "me"}}));
        assert_eq!(
            parse_push_metadata(Some(&bad)).unwrap_err().message,
            "error parsing tags in metadata: Cannot specify a 'managed-by' tag"
        );
        let bad = envelope(serde_json::json!({"nope": 1}));
        assert!(
            parse_push_metadata(Some(&bad))
                .unwrap_err()
                .message
                .starts_with("failed to parse metadata")
        );
    }

    #[test]
    fn whole_secret_values() {
        let data = BTreeMap::from([
            ("b".to_string(), b"two".to_vec()),
            ("a".to_string(), b"<one>".to_vec()),
        ]);
        assert_eq!(
            PushValue::Whole(&data).render(false).unwrap(),
            r#"{"a":"PG9uZT4=","b":"dHdv"}"#
        );
        assert_eq!(
            PushValue::Whole(&data).render(true).unwrap(),
            r#"{"a":"<one>","b":"two"}"#
        );
        assert_eq!(PushValue::Key(b"v").render(false).unwrap(), "v");
    }

    #[test]
    fn extract_property() {
        let p = Parameter {
            name: "/n".into(),
            arn: String::new(),
            version: 1,
            value: r#"{"user":"u","a.b":"lit"}"#.into(),
        };
        assert_eq!(
            extract(&RemoteRef::key("/n").property("user"), &p).unwrap(),
            b"u"
        );
        assert_eq!(
            extract(&RemoteRef::key("/n").property("a.b"), &p).unwrap(),
            b"lit"
        );
        assert_eq!(
            extract(&RemoteRef::key("/n").property("x"), &p)
                .unwrap_err()
                .message,
            "key x does not exist in secret /n"
        );
        assert_eq!(
            extract(&RemoteRef::key("/n"), &p).unwrap(),
            p.value.as_bytes()
        );
    }
}
