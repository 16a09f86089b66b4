//! A thin layer over the Secrets Manager SDK client: every call is counted, guarded by the
//! throttle gate, and its error classified. Outputs are turned into plain structs.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use aws_sdk_secretsmanager::Client;
use aws_sdk_secretsmanager::primitives::Blob;
use aws_sdk_secretsmanager::types::{Filter, FilterNameStringType, Tag};

use crate::calls::{CallLog, PROVIDER_SM};
use crate::error::{AwsError, AwsErrorKind, classify_code, from_sdk};
use crate::fetcher::{Batch, FetchKey, Source};
use crate::spec::Version;

/// A secret value as Secrets Manager returned it.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretValue {
    pub name: String,
    pub arn: String,
    pub version_id: Option<String>,
    pub string: Option<String>,
    pub binary: Option<Vec<u8>>,
}

impl std::fmt::Debug for SecretValue {
    // Never print the value.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretValue")
            .field("name", &self.name)
            .field("version_id", &self.version_id)
            .field("has_string", &self.string.is_some())
            .field("has_binary", &self.binary.is_some())
            .finish()
    }
}

impl SecretValue {
    /// The raw payload (ESO: SecretBinary wins over SecretString when both are set).
    pub fn bytes(&self) -> Option<Vec<u8>> {
        if let Some(b) = &self.binary {
            return Some(b.clone());
        }
        self.string.as_ref().map(|s| s.as_bytes().to_vec())
    }

    /// The payload as text for JSON processing.
    pub fn text(&self) -> String {
        if let Some(b) = &self.binary {
            return String::from_utf8_lossy(b).into_owned();
        }
        self.string.clone().unwrap_or_default()
    }
}

/// DescribeSecret, reduced to what esr needs.
#[derive(Debug, Clone)]
pub struct Described {
    pub arn: String,
    pub name: String,
    pub tags: BTreeMap<String, String>,
    pub has_versions: bool,
}

/// Result of a BatchGetSecretValue by ids.
pub type BatchById = Batch<SecretValue>;

/// After a throttling response, esr stops calling AWS for a while instead of retrying in a tight
/// loop; the pause doubles on each further throttle (1 s .. 64 s) and resets on success.
#[derive(Debug)]
pub struct ThrottleGate {
    /// The service named in messages, e.g. `AWS Secrets Manager`.
    service: &'static str,
    state: Mutex<(Option<Instant>, u32)>,
}

impl Default for ThrottleGate {
    fn default() -> Self {
        Self::for_service("AWS Secrets Manager")
    }
}

impl ThrottleGate {
    pub fn for_service(service: &'static str) -> Self {
        Self {
            service,
            state: Mutex::default(),
        }
    }

    pub fn check(&self, op: &str) -> Result<(), AwsError> {
        let now = Instant::now();
        let guard = self
            .state
            .lock()
            .map_err(|_| AwsError::transient("lock poisoned"))?;
        if let Some(until) = guard.0
            && until > now
        {
            let left = until - now;
            return Err(AwsError::throttled(
                format!(
                    "{op}: {} is throttling requests; esr is backing off for {}s",
                    self.service,
                    left.as_secs().max(1)
                ),
                left,
            ));
        }
        Ok(())
    }

    /// Count a finished call (`provider`/`op` labels) and let the gate see its result: after a
    /// throttling answer the error says how long esr backs off.
    pub fn finish<T>(
        &self,
        calls: &CallLog,
        provider: &'static str,
        op: &'static str,
        res: Result<T, AwsError>,
    ) -> Result<T, AwsError> {
        calls.record(provider, op, res.as_ref().err().map(|e| e.kind));
        match self.observe(&res) {
            Some(pause) => res.map_err(|mut e| {
                e.message = format!(
                    "{} (esr backs off for {}s before calling AWS again)",
                    e.message,
                    pause.as_secs()
                );
                e.retry_after = Some(pause);
                e
            }),
            None => res,
        }
    }

    pub fn observe<T>(&self, res: &Result<T, AwsError>) -> Option<Duration> {
        let Ok(mut guard) = self.state.lock() else {
            return None;
        };
        match res {
            Err(e) if e.kind == AwsErrorKind::Throttled => {
                let streak = (guard.1 + 1).min(7);
                let pause = Duration::from_secs(1 << (streak - 1));
                *guard = (Some(Instant::now() + pause), streak);
                Some(pause)
            }
            Ok(_) => {
                *guard = (None, 0);
                None
            }
            Err(_) => None,
        }
    }
}

/// Secrets Manager API with call counting.
#[derive(Debug)]
pub struct SmApi {
    client: Client,
    calls: CallLog,
    gate: ThrottleGate,
}

fn blob(b: Option<&Blob>) -> Option<Vec<u8>> {
    b.map(|b| b.as_ref().to_vec())
}

impl SmApi {
    pub fn new(client: Client, calls: CallLog) -> Self {
        Self {
            client,
            calls,
            gate: ThrottleGate::default(),
        }
    }

    pub fn calls(&self) -> &CallLog {
        &self.calls
    }

    fn finish<T>(&self, op: &'static str, res: Result<T, AwsError>) -> Result<T, AwsError> {
        self.gate.finish(&self.calls, PROVIDER_SM, op, res)
    }

    pub async fn get_secret_value(
        &self,
        id: &str,
        version: &Version,
    ) -> Result<SecretValue, AwsError> {
        const OP: &str = "GetSecretValue";
        self.gate.check(OP)?;
        let mut req = self.client.get_secret_value().secret_id(id);
        req = match version {
            Version::Current => req.version_stage("AWSCURRENT"),
            Version::Stage(s) => req.version_stage(s),
            Version::Id(v) => req.version_id(v),
        };
        let res = req
            .send()
            .await
            .map(|o| SecretValue {
                name: o.name().unwrap_or(id).to_string(),
                arn: o.arn().unwrap_or_default().to_string(),
                version_id: o.version_id().map(str::to_string),
                string: o.secret_string().map(str::to_string),
                binary: blob(o.secret_binary()),
            })
            .map_err(|e| from_sdk(OP, &e));
        let res = res.map_err(|mut e| {
            if e.is_not_found() {
                e.message = format!(
                    "Secret does not exist: {id} (version {}): {}",
                    version.label(),
                    e.message
                );
            }
            e
        });
        self.finish(OP, res)
    }

    /// BatchGetSecretValue with an explicit id list (≤ 20 ids, AWSCURRENT only).
    pub async fn batch_get_by_ids(&self, ids: &[String]) -> Result<BatchById, AwsError> {
        const OP: &str = "BatchGetSecretValue";
        self.gate.check(OP)?;
        let mut out = BatchById::default();
        let mut token: Option<String> = None;
        loop {
            let res = self
                .client
                .batch_get_secret_value()
                .set_secret_id_list(Some(ids.to_vec()))
                .set_next_token(token.clone())
                .send()
                .await
                .map_err(|e| from_sdk(OP, &e));
            let page = self.finish(OP, res)?;
            for v in page.secret_values() {
                out.values.push(entry_value(v));
            }
            for e in page.errors() {
                let id = e.secret_id().unwrap_or_default().to_string();
                let code = e.error_code().unwrap_or("UnknownError");
                let msg = e.message().unwrap_or("");
                let kind = classify_code(code, msg, None);
                let text = if kind == AwsErrorKind::NotFound {
                    format!("Secret does not exist: {id}: {code}: {msg}")
                } else {
                    format!("BatchGetSecretValue: {id}: {code}: {msg}")
                };
                out.errors.push((id, AwsError::new(kind, text)));
            }
            token = page.next_token().map(str::to_string);
            if token.is_none() {
                break;
            }
        }
        Ok(out)
    }

    /// BatchGetSecretValue with filters, all pages.
    pub async fn batch_get_by_filters(
        &self,
        filters: &[Filter],
    ) -> Result<Vec<SecretValue>, AwsError> {
        const OP: &str = "BatchGetSecretValue";
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            self.gate.check(OP)?;
            let res = self
                .client
                .batch_get_secret_value()
                .set_filters(Some(filters.to_vec()))
                .set_next_token(token.clone())
                .send()
                .await
                .map_err(|e| from_sdk(OP, &e));
            let page = self.finish(OP, res)?;
            out.extend(page.secret_values().iter().map(entry_value));
            if let Some(e) = page.errors().first() {
                let code = e.error_code().unwrap_or("UnknownError");
                let msg = e.message().unwrap_or("");
                return Err(AwsError::new(
                    classify_code(code, msg, None),
                    format!(
                        "BatchGetSecretValue: {}: {code}: {msg}",
                        e.secret_id().unwrap_or_default()
                    ),
                ));
            }
            token = page.next_token().map(str::to_string);
            if token.is_none() {
                break;
            }
        }
        Ok(out)
    }

    /// ListSecrets with filters, all pages; returns secret names.
    pub async fn list_secret_names(&self, filters: &[Filter]) -> Result<Vec<String>, AwsError> {
        const OP: &str = "ListSecrets";
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            self.gate.check(OP)?;
            let res = self
                .client
                .list_secrets()
                .set_filters(if filters.is_empty() {
                    None
                } else {
                    Some(filters.to_vec())
                })
                .set_next_token(token.clone())
                .send()
                .await
                .map_err(|e| from_sdk(OP, &e));
            let page = self.finish(OP, res)?;
            out.extend(
                page.secret_list()
                    .iter()
                    .filter_map(|s| s.name().map(str::to_string)),
            );
            token = page.next_token().map(str::to_string);
            if token.is_none() {
                break;
            }
        }
        Ok(out)
    }

    /// One ListSecrets call with MaxResults=1: the cheapest call that proves credentials,
    /// region and connectivity.
    pub async fn probe(&self) -> Result<(), AwsError> {
        const OP: &str = "ListSecrets";
        self.gate.check(OP)?;
        let res = self
            .client
            .list_secrets()
            .max_results(1)
            .send()
            .await
            .map(|_| ())
            .map_err(|e| from_sdk(OP, &e));
        self.finish(OP, res)
    }

    pub async fn describe(&self, id: &str) -> Result<Described, AwsError> {
        const OP: &str = "DescribeSecret";
        self.gate.check(OP)?;
        let res = self
            .client
            .describe_secret()
            .secret_id(id)
            .send()
            .await
            .map(|o| Described {
                arn: o.arn().unwrap_or_default().to_string(),
                name: o.name().unwrap_or(id).to_string(),
                tags: o
                    .tags()
                    .iter()
                    .map(|t| {
                        (
                            t.key().unwrap_or_default().to_string(),
                            t.value().unwrap_or_default().to_string(),
                        )
                    })
                    .collect(),
                has_versions: o.version_ids_to_stages().is_some_and(|m| !m.is_empty()),
            })
            .map_err(|e| from_sdk(OP, &e));
        let res = res.map_err(|mut e| {
            if e.is_not_found() {
                e.message = format!("Secret does not exist: {id}: {}", e.message);
            }
            e
        });
        self.finish(OP, res)
    }

    #[allow(clippy::too_many_arguments)]
    pub async fn create(
        &self,
        name: &str,
        value: &[u8],
        as_string: bool,
        tags: &BTreeMap<String, String>,
        description: &str,
        kms_key_id: &str,
        token: &str,
    ) -> Result<(), AwsError> {
        const OP: &str = "CreateSecret";
        self.gate.check(OP)?;
        let mut req = self
            .client
            .create_secret()
            .name(name)
            .description(description)
            .kms_key_id(kms_key_id)
            .client_request_token(token)
            .set_tags(Some(aws_tags(tags)));
        req = if as_string {
            req.secret_string(String::from_utf8_lossy(value))
        } else {
            req.secret_binary(Blob::new(value.to_vec()))
        };
        let res = req.send().await.map(|_| ()).map_err(|e| from_sdk(OP, &e));
        self.finish(OP, res)
    }

    pub async fn put_value(
        &self,
        id: &str,
        value: &[u8],
        as_string: bool,
        token: &str,
    ) -> Result<(), AwsError> {
        const OP: &str = "PutSecretValue";
        self.gate.check(OP)?;
        let mut req = self
            .client
            .put_secret_value()
            .secret_id(id)
            .client_request_token(token);
        req = if as_string {
            req.secret_string(String::from_utf8_lossy(value))
        } else {
            req.secret_binary(Blob::new(value.to_vec()))
        };
        let res = req.send().await.map(|_| ()).map_err(|e| from_sdk(OP, &e));
        self.finish(OP, res)
    }

    pub async fn tag(&self, id: &str, tags: &BTreeMap<String, String>) -> Result<(), AwsError> {
        const OP: &str = "TagResource";
        self.gate.check(OP)?;
        let res = self
            .client
            .tag_resource()
            .secret_id(id)
            .set_tags(Some(aws_tags(tags)))
            .send()
            .await
            .map(|_| ())
            .map_err(|e| from_sdk(OP, &e));
        self.finish(OP, res)
    }

    pub async fn untag(&self, id: &str, keys: Vec<String>) -> Result<(), AwsError> {
        const OP: &str = "UntagResource";
        self.gate.check(OP)?;
        let res = self
            .client
            .untag_resource()
            .secret_id(id)
            .set_tag_keys(Some(keys))
            .send()
            .await
            .map(|_| ())
            .map_err(|e| from_sdk(OP, &e));
        self.finish(OP, res)
    }

    pub async fn delete(
        &self,
        id: &str,
        force: bool,
        recovery_window_days: Option<i64>,
    ) -> Result<(), AwsError> {
        const OP: &str = "DeleteSecret";
        self.gate.check(OP)?;
        let mut req = self.client.delete_secret().secret_id(id);
        if force {
            req = req.force_delete_without_recovery(true);
        }
        if let Some(d) = recovery_window_days {
            req = req.recovery_window_in_days(d);
        }
        let res = req.send().await.map(|_| ()).map_err(|e| from_sdk(OP, &e));
        self.finish(OP, res)
    }
}

#[async_trait::async_trait]
impl Source for SmApi {
    type Value = SecretValue;
    const MAX_BATCH: usize = 20;

    /// `GetSecretValue`, or for metadata `DescribeSecret` with the tags as a JSON object.
    async fn load_one(&self, key: &FetchKey) -> Result<SecretValue, AwsError> {
        if !key.metadata {
            return self.get_secret_value(&key.id, &key.version).await;
        }
        let d = self.describe(&key.id).await?;
        let json = serde_json::to_string(&d.tags)
            .map_err(|e| AwsError::invalid(format!("cannot encode tags of {}: {e}", key.id)))?;
        Ok(SecretValue {
            name: d.name,
            arn: d.arn,
            version_id: Some(key.version.label()),
            string: Some(json),
            binary: None,
        })
    }

    async fn load_batch(&self, ids: &[String]) -> Result<BatchById, AwsError> {
        self.batch_get_by_ids(ids).await
    }

    fn ids_of(v: &SecretValue) -> [&str; 2] {
        [&v.name, &v.arn]
    }

    fn batch_denied(e: &AwsError) -> bool {
        e.message.starts_with("BatchGetSecretValue: AccessDenied")
    }
}

fn entry_value(v: &aws_sdk_secretsmanager::types::SecretValueEntry) -> SecretValue {
    SecretValue {
        name: v.name().unwrap_or_default().to_string(),
        arn: v.arn().unwrap_or_default().to_string(),
        version_id: v.version_id().map(str::to_string),
        string: v.secret_string().map(str::to_string),
        binary: blob(v.secret_binary()),
    }
}

fn aws_tags(tags: &BTreeMap<String, String>) -> Vec<Tag> {
    tags.iter()
        .map(|(k, v)| Tag::builder().key(k).value(v).build())
        .collect()
}

/// ListSecrets / BatchGetSecretValue filters for ESO's `find` (tags as independent
/// tag-key / tag-value filters, path as a name-prefix filter).
pub fn find_filters(tags: &BTreeMap<String, String>, path: Option<&str>) -> Vec<Filter> {
    let mut filters = Vec::new();
    for (k, v) in tags {
        filters.push(
            Filter::builder()
                .key(FilterNameStringType::TagKey)
                .values(k)
                .build(),
        );
        filters.push(
            Filter::builder()
                .key(FilterNameStringType::TagValue)
                .values(v)
                .build(),
        );
    }
    if let Some(p) = path {
        filters.push(
            Filter::builder()
                .key(FilterNameStringType::Name)
                .values(p)
                .build(),
        );
    }
    filters
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gate_backs_off_and_resets() {
        let gate = ThrottleGate::default();
        gate.check("x").unwrap();
        let err: Result<(), AwsError> = Err(AwsError::throttled("t", Duration::from_secs(1)));
        assert_eq!(gate.observe(&err), Some(Duration::from_secs(1)));
        let blocked = gate.check("GetSecretValue").unwrap_err();
        assert_eq!(blocked.kind, AwsErrorKind::Throttled);
        assert!(blocked.message.contains("backing off"));
        assert_eq!(gate.observe(&err), Some(Duration::from_secs(2)));
        gate.observe::<()>(&Ok(()));
        gate.check("x").unwrap();
    }

    #[test]
    fn value_debug_hides_payload() {
        let v = SecretValue {
            name: "n".into(),
            arn: "a".into(),
            version_id: None,
            string: Some("hunter2".into()),
            binary: None,
        };
        assert!(!format!("{v:?}").contains("hunter2"));
        assert_eq!(v.bytes().unwrap(), b"hunter2");
    }
}
