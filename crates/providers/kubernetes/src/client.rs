//! The kubernetes provider's `SecretsClient`.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use base64::Engine as _;
use esr_provider::find::NameMatcher;
use esr_provider::keys::{
    convert_keys, go_json_marshal_any, go_json_opt_string_map, go_json_string_map,
};
use esr_provider::metadata::parse_push_metadata;
use esr_provider::metrics::observe;
use esr_provider::{
    CallRecorder, FindRequest, KubeAccess, ProviderError, PushRemoteRef, PushRequest, Result,
    SecretRef, SecretsClient, StoreKind, ValidationResult,
};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;

use crate::METRIC_PROVIDER;

const CALL_GET: &str = "GetSecret";
const CALL_LIST: &str = "ListSecrets";
const CALL_CREATE: &str = "CreateSecret";
const CALL_UPDATE: &str = "UpdateSecret";
const CALL_DELETE: &str = "DeleteSecret";
const CALL_REVIEW: &str = "CreateSelfSubjectRulesReview";

/// A client for one kubernetes store.
pub struct KubernetesClient {
    kube: Option<Arc<dyn KubeAccess>>,
    remote_namespace: String,
    store_kind: StoreKind,
    referent: bool,
    recorder: Arc<dyn CallRecorder>,
}

impl std::fmt::Debug for KubernetesClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubernetesClient")
            .field("remote_namespace", &self.remote_namespace)
            .field("store_kind", &self.store_kind)
            .field("referent", &self.referent)
            .finish()
    }
}

/// `PushSecretMetadata.spec` of the kubernetes provider.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PushMetadataSpec {
    /// `Merge` (default), `Replace` or `Ignore`: how the target's labels/annotations are updated.
    #[serde(default)]
    pub target_merge_policy: String,
    /// `Merge` (default) or `Replace`: how `labels`/`annotations` combine with the source's.
    #[serde(default)]
    pub source_merge_policy: String,
    /// Labels to set.
    #[serde(default)]
    pub labels: Option<BTreeMap<String, String>>,
    /// Annotations to set.
    #[serde(default)]
    pub annotations: Option<BTreeMap<String, String>>,
    /// Target namespace (ClusterSecretStore only).
    #[serde(default)]
    pub remote_namespace: String,
}

type Labels = Option<BTreeMap<String, String>>;

impl KubernetesClient {
    pub(crate) fn new(
        kube: Option<Arc<dyn KubeAccess>>,
        remote_namespace: String,
        store_kind: StoreKind,
        referent: bool,
        recorder: Arc<dyn CallRecorder>,
    ) -> Self {
        KubernetesClient {
            kube,
            remote_namespace,
            store_kind,
            referent,
            recorder,
        }
    }

    fn kube(&self) -> Result<&Arc<dyn KubeAccess>> {
        self.kube.as_ref().ok_or_else(|| {
            ProviderError::invalid(
                "referent authentication: the client needs the namespace of the ExternalSecret",
            )
        })
    }

    fn observe<T>(&self, call: &str, r: Result<T>) -> Result<T> {
        observe(self.recorder.as_ref(), METRIC_PROVIDER, call, r)
            .map_err(|e| e.with_provider(METRIC_PROVIDER))
    }

    /// GET a Secret. Only the API server's 404 is "not found"; an answer that is not the Secret
    /// asked for (a 200 with `{}` or another object, from a proxy or a misrouted request) is an
    /// error, so the controller keeps the target Secret instead of emptying it.
    async fn get(&self, namespace: &str, name: &str) -> Result<Option<Secret>> {
        let r = self
            .kube()?
            .get_secret(namespace, name)
            .await
            .and_then(|s| match s {
                Some(sec) if sec.metadata.name.as_deref() != Some(name) => {
                    Err(ProviderError::transient(format!(
                        "the API server's answer for secret {name:?} in namespace {namespace:?} is not that Secret"
                    )))
                }
                other => Ok(other),
            });
        self.observe(CALL_GET, r).map_err(|e| e.with_key(name))
    }

    async fn list(&self, label_selector: Option<&str>) -> Result<Vec<Secret>> {
        let r = self
            .kube()?
            .list_secrets(&self.remote_namespace, label_selector)
            .await;
        self.observe(CALL_LIST, r)
            .map_err(|e| e.wrap("unable to list secrets"))
    }
}

fn data_of(secret: &Secret) -> BTreeMap<String, Vec<u8>> {
    secret
        .data
        .as_ref()
        .map(|d| d.iter().map(|(k, v)| (k.clone(), v.0.clone())).collect())
        .unwrap_or_default()
}

/// `{"annotations":…,"labels":…}` (Go map marshalling: sorted keys, nil maps as `null`).
fn metadata_json(secret: &Secret) -> Vec<u8> {
    let mut out = b"{\"annotations\":".to_vec();
    out.extend(go_json_opt_string_map(secret.metadata.annotations.as_ref()));
    out.extend(b",\"labels\":");
    out.extend(go_json_opt_string_map(secret.metadata.labels.as_ref()));
    out.push(b'}');
    out
}

fn get_from_data(secret: &Secret, property: &str) -> Option<Vec<u8>> {
    let data = secret.data.as_ref()?;
    if let Some(v) = data.get(property) {
        return Some(v.0.clone());
    }
    let idx = property.find('.')?;
    if idx == 0 || idx == property.len() - 1 {
        return None;
    }
    let v = data.get(&property[..idx])?;
    esr_provider::gjson::get_bytes(&v.0, &property[idx + 1..])
}

fn get_from_metadata(secret: &Secret, property: &str) -> Option<Vec<u8>> {
    let path: Vec<&str> = property.split('.').collect();
    let meta = match path[0] {
        "labels" => secret.metadata.labels.as_ref(),
        "annotations" => secret.metadata.annotations.as_ref(),
        _ => return None,
    };
    if path.len() == 1 {
        return Some(go_json_opt_string_map(meta));
    }
    let v = meta?.get(path[1])?;
    if path.len() == 2 {
        return Some(v.clone().into_bytes());
    }
    // ESO joins the rest of the path with "" (dropping the dots); mirrored for compatibility.
    esr_provider::gjson::get(v, &path[2..].concat()).map(String::into_bytes)
}

/// ESO `getPropertyMap`: the map is marshalled with base64 values, the property is looked up with
/// gjson (escaped-dots literal first), and the base64-decoded value must be a JSON object whose
/// values are re-marshalled (so strings come out quoted, as in ESO).
fn get_property_map(
    key: &str,
    property: &str,
    map: &BTreeMap<String, Vec<u8>>,
) -> Result<BTreeMap<String, Vec<u8>>> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let encoded: BTreeMap<&str, String> = map
        .iter()
        .map(|(k, v)| (k.as_str(), b64.encode(v)))
        .collect();
    let json = String::from_utf8(go_json_string_map(&encoded)).unwrap_or_default();
    if property.contains('.')
        && let Some(m) = map_from_value(&esr_provider::gjson::escape_dots(property), &json)?
    {
        return Ok(m);
    }
    map_from_value(property, &json)?.ok_or_else(|| {
        ProviderError::invalid(format!("property {property} does not exist in key {key}"))
    })
}

fn map_from_value(path: &str, json: &str) -> Result<Option<BTreeMap<String, Vec<u8>>>> {
    let Some(val) = esr_provider::gjson::get(json, path) else {
        return Ok(None);
    };
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(val.as_bytes())
        .map_err(|e| {
            let at = match e {
                base64::DecodeError::InvalidByte(i, _) => i,
                base64::DecodeError::InvalidLastSymbol(i, _) => i,
                _ => val.len(),
            };
            ProviderError::invalid(format!("illegal base64 data at input byte {at}"))
        })?;
    let invalid = || ProviderError::invalid("failed to unmarshal secret: invalid JSON format");
    let parsed: serde_json::Value = serde_json::from_slice(&decoded).map_err(|_| invalid())?;
    let obj = match parsed {
        serde_json::Value::Null => serde_json::Map::new(),
        serde_json::Value::Object(o) => o,
        _ => return Err(invalid()),
    };
    Ok(Some(
        obj.iter()
            .map(|(k, v)| (k.clone(), go_json_marshal_any(v)))
            .collect(),
    ))
}

/// Label selector from `find.tags` (sorted `k=v`, validated like `labels.ValidatedSelectorFromSet`).
fn tags_selector(tags: &BTreeMap<String, String>) -> Result<String> {
    let value_re = regex::Regex::new(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
        .map_err(|e| ProviderError::invalid(e.to_string()))?;
    let name_re = regex::Regex::new(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
        .map_err(|e| ProviderError::invalid(e.to_string()))?;
    let mut terms = Vec::new();
    for (k, v) in tags {
        let name = k.rsplit_once('/').map(|(_, n)| n).unwrap_or(k);
        if name.is_empty() || name.len() > 63 || !name_re.is_match(name) {
            return Err(ProviderError::invalid(format!(
                "unable to validate selector tags: key: Invalid value: {k:?}: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
            )));
        }
        if v.len() > 63 || !value_re.is_match(v) {
            return Err(ProviderError::invalid(format!(
                "unable to validate selector tags: values[0][{k}]: Invalid value: {v:?}: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
            )));
        }
        terms.push(format!("{k}={v}"));
    }
    Ok(terms.join(","))
}

fn merge_source_metadata(
    local: &Secret,
    meta: Option<&PushMetadataSpec>,
) -> Result<(Labels, Labels)> {
    let labels = local.metadata.labels.clone();
    let annotations = local.metadata.annotations.clone();
    let Some(meta) = meta else {
        return Ok((labels, annotations));
    };
    match meta.source_merge_policy.as_str() {
        "" | "Merge" => {
            let mut l = labels.unwrap_or_default();
            let mut a = annotations.unwrap_or_default();
            l.extend(meta.labels.clone().unwrap_or_default());
            a.extend(meta.annotations.clone().unwrap_or_default());
            Ok((Some(l), Some(a)))
        }
        "Replace" => Ok((meta.labels.clone(), meta.annotations.clone())),
        other => Err(ProviderError::invalid(format!(
            "failed to merge source metadata: unexpected source merge policy {other:?}"
        ))),
    }
}

fn merge_target_metadata(
    remote: &Secret,
    meta: Option<&PushMetadataSpec>,
    source_labels: Labels,
    source_annotations: Labels,
) -> Result<(Labels, Labels)> {
    let mut labels = remote.metadata.labels.clone().unwrap_or_default();
    let mut annotations = remote.metadata.annotations.clone().unwrap_or_default();
    match meta.map(|m| m.target_merge_policy.as_str()).unwrap_or("") {
        "" | "Merge" => {
            labels.extend(source_labels.unwrap_or_default());
            annotations.extend(source_annotations.unwrap_or_default());
            Ok((Some(labels), Some(annotations)))
        }
        "Replace" => Ok((source_labels, source_annotations)),
        "Ignore" => Ok((Some(labels), Some(annotations))),
        other => Err(ProviderError::invalid(format!(
            "failed to merge target metadata: unexpected target merge policy {other:?}"
        ))),
    }
}

/// ESO `mergePushSecretData`.
fn merge_push(
    remote: &mut Secret,
    req: &PushRequest,
    meta: Option<&PushMetadataSpec>,
) -> Result<()> {
    remote.type_ = Some(
        req.source
            .type_
            .clone()
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| "Opaque".to_string()),
    );
    let (sl, sa) = merge_source_metadata(&req.source, meta)?;
    let (labels, annotations) = merge_target_metadata(remote, meta, sl, sa)?;
    remote.metadata.labels = labels;
    remote.metadata.annotations = annotations;
    let data = remote.data.get_or_insert_with(BTreeMap::new);
    match req.property() {
        None => {
            for (k, v) in req.source.data.iter().flatten() {
                data.insert(k.clone(), v.clone());
            }
        }
        Some(p) => {
            data.insert(p.to_string(), ByteString(req.value.clone()));
        }
    }
    Ok(())
}

/// `equality.Semantic.DeepEqual` for what the push touches: nil and empty maps are equal.
fn semantically_equal(a: &Secret, b: &Secret) -> bool {
    fn norm<T: Clone>(m: &Option<BTreeMap<String, T>>) -> Option<BTreeMap<String, T>> {
        m.clone().filter(|m| !m.is_empty())
    }
    a.type_ == b.type_
        && norm(&a.metadata.labels) == norm(&b.metadata.labels)
        && norm(&a.metadata.annotations) == norm(&b.metadata.annotations)
        && norm(&a.data) == norm(&b.data)
}

/// ESO `GetSecret` on an already fetched Secret.
fn extract(secret: Option<&Secret>, r: &SecretRef) -> Result<Vec<u8>> {
    // ESO returns the API error for a missing Secret, which is not NoSecretErr.
    let secret = secret.ok_or_else(|| {
        ProviderError::invalid(format!("secrets {:?} not found", r.key)).with_key(r.key.clone())
    })?;
    match (r.property(), r.fetch_metadata()) {
        (None, true) => Ok(metadata_json(secret)),
        (None, false) => Ok(go_json_string_map(&data_of(secret))),
        (Some(p), true) => get_from_metadata(secret, p).ok_or_else(|| {
            ProviderError::invalid(format!(
                "property {p} does not exist in metadata of secret {:?}",
                r.key
            ))
        }),
        (Some(p), false) => get_from_data(secret, p).ok_or_else(|| {
            ProviderError::invalid(format!(
                "property {p} does not exist in data of secret {:?}",
                r.key
            ))
        }),
    }
}

#[async_trait]
impl SecretsClient for KubernetesClient {
    async fn get_secret(&self, r: &SecretRef) -> Result<Vec<u8>> {
        let secret = self.get(&self.remote_namespace, &r.key).await?;
        extract(secret.as_ref(), r)
    }

    /// Each distinct Secret is read once, whatever the number of properties taken from it.
    async fn get_secrets(&self, refs: &[SecretRef]) -> Vec<Result<Vec<u8>>> {
        let mut fetched: BTreeMap<&str, Result<Option<Secret>>> = BTreeMap::new();
        for r in refs {
            if !fetched.contains_key(r.key.as_str()) {
                let s = self.get(&self.remote_namespace, &r.key).await;
                fetched.insert(r.key.as_str(), s);
            }
        }
        refs.iter()
            .map(|r| match fetched.get(r.key.as_str()) {
                Some(Ok(secret)) => extract(secret.as_ref(), r),
                Some(Err(e)) => Err(e.clone()),
                None => Err(ProviderError::transient("internal: secret was not fetched")),
            })
            .collect()
    }

    async fn get_secret_map(&self, r: &SecretRef) -> Result<BTreeMap<String, Vec<u8>>> {
        let secret = self
            .get(&self.remote_namespace, &r.key)
            .await?
            .ok_or_else(|| ProviderError::not_found().with_key(r.key.clone()))?;
        let map = if r.fetch_metadata() {
            BTreeMap::from([
                (
                    "labels".to_string(),
                    go_json_opt_string_map(secret.metadata.labels.as_ref()),
                ),
                (
                    "annotations".to_string(),
                    go_json_opt_string_map(secret.metadata.annotations.as_ref()),
                ),
            ])
        } else {
            data_of(&secret)
        };
        match r.property() {
            Some(p) => get_property_map(&r.key, p, &map),
            None => Ok(map),
        }
    }

    async fn get_all_secrets(&self, f: &FindRequest) -> Result<BTreeMap<String, Vec<u8>>> {
        let (secrets, matcher) = if let Some(tags) = &f.tags {
            let sel = tags_selector(tags)?;
            let sel = if sel.is_empty() { None } else { Some(sel) };
            (self.list(sel.as_deref()).await?, None)
        } else if let Some(re) = f.name_regexp() {
            let matcher = NameMatcher::new(re)?;
            (self.list(None).await?, Some(matcher))
        } else {
            return Err(ProviderError::invalid(
                "unexpected find operator: the kubernetes provider supports find.tags and find.name",
            ));
        };
        let mut out = Vec::new();
        for s in secrets {
            let name = s.metadata.name.clone().unwrap_or_default();
            if let Some(m) = &matcher
                && !m.matches(&name)
            {
                continue;
            }
            out.push((name, go_json_string_map(&data_of(&s))));
        }
        convert_keys(f.conversion_strategy, out)
    }

    async fn push_secret(&self, req: &PushRequest) -> Result<()> {
        if req.property().is_none() && req.secret_key().is_some() {
            return Err(ProviderError::invalid(
                "requires property in RemoteRef to push secret value if secret key is defined",
            ));
        }
        let meta = parse_push_metadata::<PushMetadataSpec>(req.metadata.as_ref())
            .map_err(|e| e.wrap("unable to parse metadata parameters"))?
            .map(|m| m.spec);
        let mut namespace = self.remote_namespace.clone();
        if let Some(ns) = meta
            .as_ref()
            .map(|m| m.remote_namespace.clone())
            .filter(|n| !n.is_empty())
        {
            if self.store_kind != StoreKind::ClusterSecretStore {
                return Err(ProviderError::invalid(
                    "remoteNamespace override is only supported with ClusterSecretStore",
                ));
            }
            namespace = ns;
        }
        let kube = self.kube()?;
        match self.get(&namespace, req.remote_key()).await? {
            None => {
                let mut secret = Secret {
                    metadata: ObjectMeta {
                        name: Some(req.remote_key().to_string()),
                        namespace: Some(namespace.clone()),
                        ..Default::default()
                    },
                    ..Default::default()
                };
                merge_push(&mut secret, req, meta.as_ref())?;
                let r = kube.create_secret(&secret).await;
                self.observe(CALL_CREATE, r).map(|_| ())
            }
            Some(current) => {
                let mut desired = current.clone();
                merge_push(&mut desired, req, meta.as_ref())?;
                if semantically_equal(&current, &desired) {
                    return Ok(());
                }
                let r = kube.update_secret(&desired).await;
                self.observe(CALL_UPDATE, r).map(|_| ())
            }
        }
    }

    async fn delete_secret(&self, r: &PushRemoteRef) -> Result<()> {
        let kube = self.kube()?;
        let Some(mut secret) = self.get(&self.remote_namespace, &r.remote_key).await? else {
            return Ok(());
        };
        if let Some(p) = r.property() {
            let data = secret.data.get_or_insert_with(BTreeMap::new);
            if !data.contains_key(p) {
                return Ok(());
            }
            if data.len() > 1 {
                data.remove(p);
                let res = kube.update_secret(&secret).await;
                return self.observe(CALL_UPDATE, res).map(|_| ());
            }
        }
        let res = kube
            .delete_secret(&self.remote_namespace, &r.remote_key)
            .await;
        self.observe(CALL_DELETE, res).map(|_| ())
    }

    async fn secret_exists(&self, r: &PushRemoteRef) -> Result<bool> {
        let secret = self.get(&self.remote_namespace, &r.remote_key).await?;
        Ok(match (secret, r.property()) {
            (None, _) => false,
            (Some(_), None) => true,
            (Some(s), Some(p)) => s.data.as_ref().is_some_and(|d| d.contains_key(p)),
        })
    }

    async fn validate(&self) -> ValidationResult {
        if self.store_kind == StoreKind::ClusterSecretStore && self.referent {
            return ValidationResult::Unknown;
        }
        let kube = match self.kube() {
            Ok(k) => k,
            Err(_) => return ValidationResult::Unknown,
        };
        let r = kube.can_get_secrets(&self.remote_namespace).await;
        match self.observe(CALL_REVIEW, r) {
            Ok(true) => ValidationResult::Ready,
            Ok(false) => {
                ValidationResult::Error("client is not allowed to get secrets".to_string())
            }
            Err(e) if e.kind() == esr_provider::ErrorKind::Auth => {
                ValidationResult::Error(format!("could not verify if client is valid: {e}"))
            }
            Err(_) => ValidationResult::Unknown,
        }
    }
}
