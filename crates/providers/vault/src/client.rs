//! The `SecretsClient` of a Vault store: KV v1/v2 reads, find, push and delete.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use esr_api::providers::vault::VaultKvVersion;
use esr_provider::find::NameMatcher;
use esr_provider::keys::{convert_keys, go_json_marshal_any, json_object_to_map};
use esr_provider::metadata::parse_push_metadata;
use esr_provider::{
    ErrorKind, FindRequest, ProviderError, PushRemoteRef, PushRequest, Result, SecretRef,
    SecretsClient, ValidationResult,
};
use serde_json::{Map, Value, json};

use crate::auth::Session;
use crate::http::Response;
use crate::paths::{build_metadata_path, build_path};

const MANAGED_BY_KEY: &str = "managed-by";
const MANAGED_BY_VALUE: &str = "external-secrets";
const CUSTOM_METADATA: &str = "custom_metadata";
const SYSTEM_METADATA_KEYS: [&str; 3] = ["created_time", "current_version", "delete_version_after"];

/// A client for one Vault store.
#[derive(Debug)]
pub struct VaultClient {
    pub(crate) session: Arc<Session>,
    pub(crate) mount: Option<String>,
    pub(crate) version: VaultKvVersion,
    pub(crate) cas_required: bool,
    /// A referent ClusterSecretStore validated without an ExternalSecret namespace.
    pub(crate) referent_unresolved: bool,
}

/// `esutils.GetByteValueFromMap`: strings as they are, everything else as Go JSON.
pub(crate) fn value_bytes(v: &Value) -> Vec<u8> {
    match v {
        Value::String(s) => s.clone().into_bytes(),
        Value::Null => Vec::new(),
        other => go_json_marshal_any(other),
    }
}

/// ESO `getSecretValue`: whole map as JSON, or a literal key, or a gjson path.
pub(crate) fn secret_value(data: &Map<String, Value>, property: Option<&str>) -> Result<Vec<u8>> {
    let whole = go_json_marshal_any(&Value::Object(data.clone()));
    let Some(p) = property else {
        return Ok(whole);
    };
    if let Some(v) = data.get(p) {
        return Ok(value_bytes(v));
    }
    let text = String::from_utf8_lossy(&whole);
    esr_provider::gjson::get(&text, p)
        .map(String::into_bytes)
        .ok_or_else(|| ProviderError::invalid(format!("cannot find secret data for key: {p:?}")))
}

impl VaultClient {
    fn mount(&self) -> Option<&str> {
        self.mount.as_deref().filter(|m| !m.is_empty())
    }

    fn metadata_path(&self, key: &str) -> Result<String> {
        build_metadata_path(self.mount(), self.version, key).map_err(ProviderError::invalid)
    }

    /// Runs a request with the session token; on 403 logs in again once and retries.
    async fn call(
        &self,
        call: &'static str,
        method: &str,
        path: &str,
        query: &[(String, String)],
        body: Option<&Value>,
    ) -> Result<Option<Response>> {
        let token = self.session.token().await?;
        let first = self
            .session
            .transport
            .request(call, method, path, query, body, Some(&token), None)
            .await;
        match first {
            Err(e) if e.kind() == ErrorKind::Auth => {
                self.session.invalidate(&token).await;
                self.session.reload_static().await;
                let token2 = self.session.token().await?;
                if token2 == token {
                    return Err(e);
                }
                self.session
                    .transport
                    .request(call, method, path, query, body, Some(&token2), None)
                    .await
            }
            other => other,
        }
    }

    /// ESO `readSecret`: the data map of `key` (KV v2: the inner `data`).
    ///
    /// Only a well-formed "not found" is [`ProviderError::not_found`]: a 404 (without data), or
    /// a KV v2 version whose `data` is null because it was deleted or destroyed (Vault answers
    /// 404 with the version's metadata then). Any other shape, such as a 200 with an empty body
    /// or JSON without `data` (a proxy, a misrouted request), is an error: the controller keeps
    /// the target Secret instead of deleting or emptying it.
    pub(crate) async fn read_secret(
        &self,
        key: &str,
        version: Option<&str>,
    ) -> Result<Map<String, Value>> {
        let path = build_path(self.mount(), self.version, key);
        let query: Vec<(String, String)> = version
            .map(|v| vec![("version".to_string(), v.to_string())])
            .unwrap_or_default();
        let resp = self
            .call("ReadSecretData", "GET", &path, &query, None)
            .await
            .map_err(|e| e.wrap("cannot read secret data from Vault"))?;
        let Some(resp) = resp else {
            return Err(ProviderError::not_found());
        };
        let malformed = |what: &str| {
            ProviderError::transient(format!(
                "cannot read secret data from Vault: the answer (HTTP {}) {what}",
                resp.status
            ))
        };
        let Some(body) = resp.body.as_ref() else {
            return Err(malformed("has an empty body"));
        };
        let Some(data) = body.get("data") else {
            return Err(malformed("has no data field"));
        };
        let data = match self.version {
            VaultKvVersion::V1 => data,
            VaultKvVersion::V2 => match data.get("data") {
                None => return Err(ProviderError::invalid("failed to find data field")),
                Some(Value::Null) if resp.status == 404 || kv2_version_deleted(data) => {
                    return Err(ProviderError::not_found());
                }
                Some(Value::Null) => return Err(malformed("has a null data field")),
                Some(d) => d,
            },
        };
        match data {
            Value::Object(m) => Ok(m.clone()),
            Value::Null if resp.status == 404 => Err(ProviderError::not_found()),
            Value::Null => Err(malformed("has a null data field")),
            _ => Err(ProviderError::invalid("failed to unmarshall JSON")),
        }
    }

    /// ESO `readSecretMetadata`: system metadata keys plus `custom_metadata`, as strings.
    pub(crate) async fn read_metadata(&self, key: &str) -> Result<BTreeMap<String, String>> {
        let path = self.metadata_path(key)?;
        let resp = self
            .call("ReadSecretData", "GET", &path, &[], None)
            .await
            .map_err(|e| e.wrap("cannot read secret data from Vault"))?;
        let Some(resp) = resp else {
            return Err(ProviderError::invalid("secret not found"));
        };
        let mut out = BTreeMap::new();
        let Some(data) = resp.data() else {
            return Ok(out);
        };
        if self.version == VaultKvVersion::V2 {
            for k in SYSTEM_METADATA_KEYS {
                if let Some(v) = data.get(k).filter(|v| !v.is_null()) {
                    out.insert(k.to_string(), go_fmt_v(v));
                }
            }
        }
        if let Some(Value::Object(cm)) = data.get(CUSTOM_METADATA) {
            for (k, v) in cm {
                out.insert(k.clone(), go_fmt_v(v));
            }
        }
        Ok(out)
    }

    async fn list_secrets(&self, path: &str) -> Result<Vec<String>> {
        let url = self.metadata_path(path)?;
        let resp = self
            .call(
                "ListSecrets",
                "GET",
                &url,
                &[("list".to_string(), "true".to_string())],
                None,
            )
            .await
            .map_err(|e| e.wrap("cannot read secret data from Vault"))?;
        let Some(resp) = resp else {
            return Err(ProviderError::not_found());
        };
        let keys: Vec<String> = resp
            .data()
            .and_then(|d| d.get("keys"))
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        let mut out = Vec::new();
        for k in keys {
            let full = format!("{path}{k}");
            if k.ends_with('/') {
                out.extend(Box::pin(self.list_secrets(&full)).await?);
            } else {
                out.push(full);
            }
        }
        Ok(out)
    }

    async fn get_secret_inner(&self, r: &SecretRef) -> Result<Vec<u8>> {
        let data = if r.fetch_metadata() {
            if self.version == VaultKvVersion::V1 {
                return Err(ProviderError::invalid(
                    "cannot perform metadata fetch operations with kv version v1",
                ));
            }
            let md = self.read_metadata(&r.key).await?;
            if md.is_empty() {
                return Ok(Vec::new());
            }
            md.into_iter().map(|(k, v)| (k, Value::String(v))).collect()
        } else {
            self.read_secret(&r.key, r.version()).await?
        };
        secret_value(&data, r.property())
    }

    async fn cas_version(&self, key: &str, exists: bool) -> Result<u64> {
        if !exists {
            return Ok(0);
        }
        let path = self.metadata_path(key)?;
        let resp = self.call("ReadSecretData", "GET", &path, &[], None).await?;
        Ok(resp
            .as_ref()
            .and_then(|r| r.data())
            .and_then(|d| d.get("current_version"))
            .and_then(Value::as_u64)
            .unwrap_or(1))
    }

    async fn write(&self, path: &str, body: &Value) -> Result<()> {
        self.call("WriteSecretData", "POST", path, &[], Some(body))
            .await
            .map(|_| ())
    }
}

/// Whether a KV v2 read answer's `metadata` says the version was deleted or destroyed.
fn kv2_version_deleted(data: &Value) -> bool {
    let Some(meta) = data.get("metadata") else {
        return false;
    };
    let deleted = meta
        .get("deletion_time")
        .and_then(Value::as_str)
        .is_some_and(|t| !t.is_empty());
    let destroyed = meta.get("destroyed").and_then(Value::as_bool) == Some(true);
    deleted || destroyed
}

fn go_fmt_v(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => String::from_utf8_lossy(&go_json_marshal_any(other)).into_owned(),
    }
}

/// PushSecret metadata spec of the vault provider.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PushMetadataSpec {
    #[serde(default)]
    custom_metadata: Option<BTreeMap<String, String>>,
    #[serde(default)]
    merge_policy: Option<String>,
}

/// ESO `reconcileData`: the map to write and whether it differs from what is stored.
fn reconcile_data(
    existing: Option<&Map<String, Value>>,
    value: &[u8],
    property: Option<&str>,
) -> Result<(Map<String, Value>, bool)> {
    match property {
        None => {
            let incoming: Map<String, Value> = serde_json::from_slice(value).map_err(|_| {
                ProviderError::invalid(if existing.is_none() {
                    "error unmarshalling vault secret: invalid JSON format"
                } else {
                    "error unmarshalling incoming secret value: invalid JSON format"
                })
            })?;
            let changed = existing != Some(&incoming);
            Ok((incoming, changed))
        }
        Some(p) => {
            let mut out = existing.cloned().unwrap_or_default();
            let value = String::from_utf8_lossy(value).into_owned();
            let changed = out.get(p).and_then(Value::as_str) != Some(value.as_str());
            out.insert(p.to_string(), Value::String(value));
            Ok((out, changed))
        }
    }
}

#[async_trait]
impl SecretsClient for VaultClient {
    async fn get_secret(&self, r: &SecretRef) -> Result<Vec<u8>> {
        self.get_secret_inner(r)
            .await
            .map_err(|e| e.with_key(r.key.clone()))
    }

    async fn get_secret_map(&self, r: &SecretRef) -> Result<BTreeMap<String, Vec<u8>>> {
        let data = self.get_secret(r).await?;
        json_object_to_map(&data).map_err(|e| e.with_key(r.key.clone()))
    }

    async fn get_all_secrets(&self, f: &FindRequest) -> Result<BTreeMap<String, Vec<u8>>> {
        if self.version == VaultKvVersion::V1 && f.tags.is_some() {
            return Err(ProviderError::invalid(
                "cannot perform find by tag operations with kv version v1",
            ));
        }
        let search = f.path().map(|p| format!("{p}/")).unwrap_or_default();
        let candidates = self.list_secrets(&search).await?;
        let matcher = f.name_regexp().map(NameMatcher::new).transpose()?;
        let mut found = Vec::new();
        for name in candidates {
            if let Some(m) = &matcher {
                if !m.matches(&name) {
                    continue;
                }
            } else if let Some(tags) = &f.tags {
                let md = self.read_metadata(&name).await?;
                if !tags.iter().all(|(k, v)| md.get(k) == Some(v)) {
                    continue;
                }
            }
            match self.get_secret(&SecretRef::new(name.clone())).await {
                Ok(v) => found.push((name, v)),
                Err(e) if e.is_not_found() => continue,
                Err(e) => return Err(e),
            }
        }
        convert_keys(f.conversion_strategy, found)
    }

    async fn push_secret(&self, req: &PushRequest) -> Result<()> {
        let key = req.remote_key();
        let existing = match self.read_secret(key, None).await {
            Ok(d) => Some(d),
            Err(e) if e.is_not_found() => None,
            Err(e) => return Err(e),
        };
        let path = build_path(self.mount(), self.version, key);
        match self.version {
            VaultKvVersion::V1 => {
                let mut existing = existing;
                if let Some(d) = existing.as_mut() {
                    let managed = d
                        .get(CUSTOM_METADATA)
                        .and_then(|m| m.get(MANAGED_BY_KEY))
                        .and_then(Value::as_str)
                        == Some(MANAGED_BY_VALUE);
                    if !d.contains_key(CUSTOM_METADATA) {
                        return Err(ProviderError::invalid(
                            "secret not managed by external-secrets (no custom_metadata found)",
                        ));
                    }
                    if !managed {
                        return Err(ProviderError::invalid(
                            "secret not managed by external-secrets",
                        ));
                    }
                    d.remove(CUSTOM_METADATA);
                }
                let (mut merged, changed) =
                    reconcile_data(existing.as_ref(), &req.value, req.property())?;
                if existing.is_some() && !changed {
                    return Ok(());
                }
                merged.insert(
                    CUSTOM_METADATA.to_string(),
                    json!({ MANAGED_BY_KEY: MANAGED_BY_VALUE }),
                );
                self.write(&path, &Value::Object(merged))
                    .await
                    .map_err(|e| e.wrap("failed to write secret data"))
            }
            VaultKvVersion::V2 => {
                let exists = existing.is_some();
                let meta_path = self.metadata_path(key)?;
                let (merged, data_changed) =
                    reconcile_data(existing.as_ref(), &req.value, req.property())?;
                // Compare and merge custom metadata only (the system keys are read alongside).
                let remote_meta = if exists {
                    let mut md = self.read_metadata(key).await?;
                    md.retain(|k, _| !SYSTEM_METADATA_KEYS.contains(&k.as_str()));
                    Some(md)
                } else {
                    None
                };
                let parsed = parse_push_metadata::<PushMetadataSpec>(req.metadata.as_ref())
                    .map_err(|e| e.wrap("failed to parse push secret metadata"))?;
                let (policy, custom) = match parsed {
                    Some(p) => (p.spec.merge_policy, p.spec.custom_metadata),
                    None => (None, None),
                };
                let replace = match policy.as_deref() {
                    None | Some("") | Some("Merge") => false,
                    Some("Replace") => true,
                    Some(other) => {
                        return Err(ProviderError::invalid(format!(
                            "unsupported merge policy {other:?}, must be one of: Merge, Replace"
                        )));
                    }
                };
                let mut desired: BTreeMap<String, String> = custom.unwrap_or_default();
                desired.insert(MANAGED_BY_KEY.into(), MANAGED_BY_VALUE.into());
                let (final_meta, meta_changed) = match &remote_meta {
                    None => (desired, true),
                    Some(remote) => {
                        if remote.get(MANAGED_BY_KEY).map(String::as_str) != Some(MANAGED_BY_VALUE)
                        {
                            return Err(ProviderError::invalid(
                                "secret not managed by external-secrets",
                            ));
                        }
                        let mut fin = if replace {
                            BTreeMap::new()
                        } else {
                            remote.clone()
                        };
                        fin.extend(desired);
                        let changed = &fin != remote;
                        (fin, changed)
                    }
                };
                if !data_changed && !meta_changed {
                    return Ok(());
                }
                if meta_changed {
                    self.write(&meta_path, &json!({ CUSTOM_METADATA: final_meta }))
                        .await
                        .map_err(|e| e.wrap("failed to write secret metadata"))?;
                }
                if data_changed {
                    let mut body = json!({ "data": merged });
                    if self.cas_required {
                        let cas = self
                            .cas_version(key, exists)
                            .await
                            .map_err(|e| e.wrap("failed to get CAS version"))?;
                        body["options"] = json!({ "cas": cas });
                    }
                    self.write(&path, &body)
                        .await
                        .map_err(|e| e.wrap("failed to write secret data"))?;
                }
                Ok(())
            }
        }
    }

    async fn delete_secret(&self, r: &PushRemoteRef) -> Result<()> {
        let key = r.remote_key.as_str();
        let path = build_path(self.mount(), self.version, key);
        let meta_path = self.metadata_path(key)?;
        let mut data = match self.read_secret(key, None).await {
            Ok(d) => d,
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) => return Err(e),
        };
        let managed = match self.version {
            VaultKvVersion::V2 => {
                self.read_metadata(key)
                    .await?
                    .get(MANAGED_BY_KEY)
                    .map(String::as_str)
                    == Some(MANAGED_BY_VALUE)
            }
            VaultKvVersion::V1 => {
                data.get(CUSTOM_METADATA)
                    .and_then(|m| m.get(MANAGED_BY_KEY))
                    .and_then(Value::as_str)
                    == Some(MANAGED_BY_VALUE)
            }
        };
        if !managed {
            return Ok(());
        }
        if let Some(p) = r.property() {
            data.remove(p);
            if self.version == VaultKvVersion::V1
                && data.len() == 1
                && data.contains_key(CUSTOM_METADATA)
            {
                data.remove(CUSTOM_METADATA);
            }
            if !data.is_empty() {
                let body = match self.version {
                    VaultKvVersion::V1 => Value::Object(data),
                    VaultKvVersion::V2 if self.cas_required => {
                        let cas = self.cas_version(key, true).await?;
                        json!({ "data": data, "options": { "cas": cas } })
                    }
                    VaultKvVersion::V2 => json!({ "data": data }),
                };
                return self
                    .call("DeleteSecret", "POST", &path, &[], Some(&body))
                    .await
                    .map(|_| ());
            }
        }
        self.call("DeleteSecret", "DELETE", &path, &[], None)
            .await
            .map_err(|e| e.wrap(format_args!("could not delete secret {key}")))?;
        if self.version == VaultKvVersion::V2 {
            self.call("DeleteSecret", "DELETE", &meta_path, &[], None)
                .await
                .map_err(|e| e.wrap(format_args!("could not delete secret metadata {key}")))?;
        }
        Ok(())
    }

    async fn secret_exists(&self, r: &PushRemoteRef) -> Result<bool> {
        let data = match self.read_secret(&r.remote_key, None).await {
            Ok(d) => d,
            Err(e) if e.is_not_found() => return Ok(false),
            Err(e) => return Err(e),
        };
        match r.property() {
            None => Ok(true),
            Some(p) => Ok(secret_value(&data, Some(p)).is_ok()),
        }
    }

    async fn validate(&self) -> ValidationResult {
        if self.referent_unresolved {
            return ValidationResult::Unknown;
        }
        match self.session.lookup_self().await {
            Ok(_) => ValidationResult::Ready,
            Err(e) => ValidationResult::Error(format!("cannot validate the vault token: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    #[test]
    fn property_literal_key_first_then_gjson() {
        let d = map(json!({"a.b": "literal", "a": {"b": "nested", "n": 1}, "s": "x<y"}));
        assert_eq!(
            secret_value(&d, Some("a.b")).ok(),
            Some(b"literal".to_vec())
        );
        assert_eq!(secret_value(&d, Some("a.n")).ok(), Some(b"1".to_vec()));
        assert_eq!(
            secret_value(&d, Some("a")).ok(),
            Some(br#"{"b":"nested","n":1}"#.to_vec())
        );
        assert_eq!(
            secret_value(&d, None).ok(),
            Some(br#"{"a":{"b":"nested","n":1},"a.b":"literal","s":"x<y"}"#.to_vec())
        );
        let e = secret_value(&d, Some("zz")).err().map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some("cannot find secret data for key: \"zz\"")
        );
    }

    #[test]
    fn reconcile_whole_and_property() {
        let cur = map(json!({"a": "1"}));
        let (m, ch) = reconcile_data(Some(&cur), br#"{"a":"1"}"#, None).unwrap_or_default();
        assert!(!ch);
        assert_eq!(m, cur);
        let (m, ch) = reconcile_data(Some(&cur), b"2", Some("b")).unwrap_or_default();
        assert!(ch);
        assert_eq!(Value::Object(m), json!({"a": "1", "b": "2"}));
        let (_, ch) = reconcile_data(Some(&cur), b"1", Some("a")).unwrap_or_default();
        assert!(!ch);
        assert!(reconcile_data(None, b"not json", None).is_err());
    }
}
