//! The `SecretsClient` of one `gcpsm` store.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use esr_api::providers::gcpsm::LATEST_OR_FETCH;
use esr_provider::find::NameMatcher;
use esr_provider::gjson::lookup_property_bytes;
use esr_provider::keys::{convert_keys, go_json_opt_string_map, json_object_to_map};
use esr_provider::metadata::parse_push_metadata;
use esr_provider::{
    CallRecorder, CallStatus, ErrorKind, FindRequest, ProviderError, PushRemoteRef, PushRequest,
    Result, SecretRef, SecretsClient, ValidationResult,
};
use google_cloud_gax::error::Error as GaxError;
use google_cloud_gax::paginator::Paginator;
use google_cloud_secretmanager_v1::client::SecretManagerService;
use google_cloud_secretmanager_v1::model::{Replication, Secret, SecretPayload, replication};

use crate::error::{is_destroyed_or_disabled, is_not_found, map_error};
use crate::names;
use crate::{MANAGED_BY_KEY, MANAGED_BY_VALUE, METRIC_PROVIDER, calls};

/// ESO's prefix of read errors.
pub const ERR_ACCESS: &str = "unable to access Secret from SecretManager Client";

/// PushSecret `metadata.spec` for Secret Manager.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PushSecretMetadataSpec {
    /// Annotations of the secret.
    #[serde(default)]
    pub annotations: Option<BTreeMap<String, String>>,
    /// Labels of the secret (`managed-by: external-secrets` is always added).
    #[serde(default)]
    pub labels: Option<BTreeMap<String, String>>,
    /// Pub/Sub topics notified of changes (set when the secret is created).
    #[serde(default)]
    pub topics: Option<Vec<String>>,
    /// `Replace` (default: the labels become exactly these) or `Merge` (existing labels kept).
    #[serde(default)]
    pub merge_policy: Option<String>,
    /// KMS key of the user-managed replicas (set when the secret is created).
    #[serde(default)]
    pub cmek_key_name: Option<String>,
    /// One user-managed replication location (deprecated: `replicationLocations`).
    #[serde(default)]
    pub replication_location: Option<String>,
    /// User-managed replication locations (set when the secret is created).
    #[serde(default)]
    pub replication_locations: Option<Vec<String>>,
}

/// A client for one store. `sm` is `None` for a ClusterSecretStore with referent credentials
/// validated without a namespace (ESO reports `ValidationResultUnknown` then).
pub struct GcpSmClient {
    project: String,
    location: Option<String>,
    latest_or_fetch: bool,
    sm: Option<SecretManagerService>,
    recorder: Arc<dyn CallRecorder>,
}

impl std::fmt::Debug for GcpSmClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GcpSmClient")
            .field("project", &self.project)
            .field("location", &self.location)
            .field("ready", &self.sm.is_some())
            .finish()
    }
}

fn to_btree(m: &HashMap<String, String>) -> BTreeMap<String, String> {
    m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

impl GcpSmClient {
    /// A client for `project` (and `location` for regional secrets).
    pub fn new(
        project: String,
        location: Option<String>,
        version_selection_policy: Option<&str>,
        sm: Option<SecretManagerService>,
        recorder: Arc<dyn CallRecorder>,
    ) -> Self {
        GcpSmClient {
            project,
            location: location.filter(|l| !l.is_empty()),
            latest_or_fetch: version_selection_policy == Some(LATEST_OR_FETCH),
            sm,
            recorder,
        }
    }

    fn sm(&self) -> Result<&SecretManagerService> {
        self.sm.as_ref().ok_or_else(|| {
            ProviderError::invalid(
                "cannot use a ClusterSecretStore with referent credentials without a namespace",
            )
        })
    }

    fn record<T>(&self, call: &str, r: &std::result::Result<T, GaxError>) {
        let status = match r {
            Ok(_) => CallStatus::Success,
            Err(e) if is_not_found(e) => CallStatus::Error(ErrorKind::NotFound),
            Err(_) => CallStatus::Error(ErrorKind::Transient),
        };
        self.recorder.record(METRIC_PROVIDER, call, status);
    }

    fn loc(&self) -> Option<&str> {
        self.location.as_deref()
    }

    /// `AccessSecretVersion`: the payload of a version (`Err` as the client returned it).
    async fn access(&self, name: &str) -> std::result::Result<Vec<u8>, GaxError> {
        let sm = match self.sm() {
            Ok(sm) => sm,
            Err(_) => return Err(GaxError::binding("no client")),
        };
        let r = sm.access_secret_version().set_name(name).send().await;
        self.record(calls::ACCESS_SECRET_VERSION, &r);
        r.and_then(|resp| match resp.payload {
            Some(p) => Ok(p.data.to_vec()),
            // Only NOT_FOUND is "missing"; an answer without a payload is malformed.
            None => Err(GaxError::deser(
                "the AccessSecretVersion answer has no payload",
            )),
        })
    }

    /// The newest ENABLED version of a secret (ESO's `LatestOrFetch` fallback), else `latest`.
    async fn latest_enabled(&self, secret: &str) -> std::result::Result<Vec<u8>, GaxError> {
        let sm = match self.sm() {
            Ok(sm) => sm,
            Err(_) => return Err(GaxError::binding("no client")),
        };
        let mut pages = sm
            .list_secret_versions()
            .set_parent(secret)
            .set_filter("state:ENABLED")
            .by_page();
        let mut newest: Option<((i64, i32), String)> = None;
        while let Some(page) = pages.next().await {
            self.record(calls::LIST_SECRET_VERSIONS, &page);
            for v in page?.versions {
                let t = v
                    .create_time
                    .as_ref()
                    .map(|t| (t.seconds(), t.nanos()))
                    .unwrap_or((0, 0));
                if newest.as_ref().is_none_or(|(best, _)| t > *best) {
                    newest = Some((t, v.name.clone()));
                }
            }
        }
        let name = newest
            .map(|(_, n)| n)
            .unwrap_or_else(|| format!("{secret}/versions/latest"));
        self.access(&name).await
    }

    /// The value of `key` at `version` (ESO `GetSecret` without property).
    async fn value(&self, key: &str, version: Option<&str>) -> Result<Vec<u8>> {
        self.sm()?;
        let name = names::version(&self.project, self.loc(), key, version);
        let mut r = self.access(&name).await;
        if self.latest_or_fetch
            && version.is_none_or(str::is_empty)
            && r.as_ref().err().is_some_and(is_destroyed_or_disabled)
        {
            r = self
                .latest_enabled(&names::secret(&self.project, self.loc(), key))
                .await;
        }
        r.map_err(|e| map_error(e, calls::ACCESS_SECRET_VERSION, &name).wrap(ERR_ACCESS))
    }

    /// `GetSecret`: the secret's metadata; `Ok(None)` when it does not exist.
    async fn metadata(&self, key: &str) -> Result<Option<Secret>> {
        let sm = self.sm()?;
        let name = names::secret(&self.project, self.loc(), key);
        let r = sm.get_secret().set_name(&name).send().await;
        self.record(calls::GET_SECRET, &r);
        match r {
            Ok(s) => Ok(Some(s)),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(map_error(e, calls::GET_SECRET, &name)),
        }
    }

    /// `metadataPolicy: Fetch`: labels and annotations (ESO's property syntax
    /// `labels.<k>` / `annotations.<k>` / `labels` / `annotations` / none).
    async fn fetch_metadata(&self, r: &SecretRef) -> Result<Vec<u8>> {
        let Some(s) = self
            .metadata(&r.key)
            .await
            .map_err(|e| e.wrap(ERR_ACCESS))?
        else {
            return Err(ProviderError::not_found().wrap(ERR_ACCESS));
        };
        let labels = to_btree(&s.labels);
        let annotations = to_btree(&s.annotations);
        let property = r.property().unwrap_or("");
        if let Some(k) = property.strip_prefix("annotations.") {
            return annotations
                .get(k)
                .map(|v| v.clone().into_bytes())
                .ok_or_else(|| {
                    ProviderError::invalid(format!(
                        "annotation with key {k} does not exist in secret {}",
                        r.key
                    ))
                });
        }
        if let Some(k) = property.strip_prefix("labels.") {
            return labels
                .get(k)
                .map(|v| v.clone().into_bytes())
                .ok_or_else(|| {
                    ProviderError::invalid(format!(
                        "label with key {k} does not exist in secret {}",
                        r.key
                    ))
                });
        }
        match property {
            "annotations" => Ok(go_json_opt_string_map(Some(&annotations))),
            "labels" => Ok(go_json_opt_string_map(Some(&labels))),
            "" => {
                let a = String::from_utf8_lossy(&go_json_opt_string_map(Some(&annotations)))
                    .into_owned();
                let l =
                    String::from_utf8_lossy(&go_json_opt_string_map(Some(&labels))).into_owned();
                Ok(format!("{{\"annotations\":{a},\"labels\":{l}}}").into_bytes())
            }
            p => Err(ProviderError::invalid(format!(
                "invalid property {p}: metadata property should start with either annotations or labels"
            ))),
        }
    }

    /// `ListSecrets` (all pages) with an optional filter: the short names and labels.
    pub async fn list(
        &self,
        filter: Option<&str>,
        max_pages: Option<usize>,
    ) -> Result<Vec<(String, BTreeMap<String, String>)>> {
        let sm = self.sm()?;
        let parent = names::parent(&self.project, self.loc());
        let mut req = sm.list_secrets().set_parent(&parent);
        if let Some(f) = filter.filter(|f| !f.is_empty()) {
            req = req.set_filter(f);
        }
        let mut pages = req.by_page();
        let mut out = Vec::new();
        let mut n = 0usize;
        while let Some(page) = pages.next().await {
            self.record(calls::LIST_SECRETS, &page);
            let page = page.map_err(|e| {
                map_error(e, calls::LIST_SECRETS, &parent).wrap("failed to list secrets")
            })?;
            for s in page.secrets {
                out.push((names::short_name(&s.name).to_string(), to_btree(&s.labels)));
            }
            n += 1;
            if max_pages.is_some_and(|m| n >= m) {
                break;
            }
        }
        Ok(out)
    }

    async fn create_secret(&self, key: &str, spec: &PushSecretMetadataSpec) -> Result<Secret> {
        let sm = self.sm()?;
        let parent = names::parent(&self.project, self.loc());
        let mut secret = Secret::new().set_labels([(MANAGED_BY_KEY, MANAGED_BY_VALUE)]);
        // Regional secrets take no replication policy.
        if self.location.is_none() {
            secret = secret.set_replication(replication_policy(spec));
        }
        if let Some(topics) = spec.topics.as_ref().filter(|t| !t.is_empty()) {
            secret = secret.set_topics(
                topics
                    .iter()
                    .map(|t| google_cloud_secretmanager_v1::model::Topic::new().set_name(t)),
            );
        }
        let r = sm
            .create_secret()
            .set_parent(&parent)
            .set_secret_id(key)
            .set_secret(secret)
            .send()
            .await;
        self.record(calls::CREATE_SECRET, &r);
        r.map_err(|e| {
            map_error(
                e,
                calls::CREATE_SECRET,
                &names::secret(&self.project, self.loc(), key),
            )
        })
    }
}

/// The replication of a new global secret: automatic, or user-managed in
/// `replicationLocations` (else `replicationLocation`) with the CMEK key on every replica.
fn replication_policy(spec: &PushSecretMetadataSpec) -> Replication {
    let mut locations: Vec<String> = spec.replication_locations.clone().unwrap_or_default();
    if locations.is_empty()
        && let Some(l) = spec.replication_location.as_ref().filter(|l| !l.is_empty())
    {
        locations.push(l.clone());
    }
    if locations.is_empty() {
        return Replication::new().set_automatic(replication::Automatic::new());
    }
    let cmek = spec
        .cmek_key_name
        .as_ref()
        .filter(|k| !k.is_empty())
        .map(|k| {
            google_cloud_secretmanager_v1::model::CustomerManagedEncryption::new()
                .set_kms_key_name(k)
        });
    let replicas = locations.into_iter().map(|l| {
        let mut r = replication::user_managed::Replica::new().set_location(l);
        if let Some(c) = &cmek {
            r = r.set_customer_managed_encryption(c.clone());
        }
        r
    });
    Replication::new().set_user_managed(replication::UserManaged::new().set_replicas(replicas))
}

/// The labels and annotations a push writes (ESO's `buildMetadata`): the secret must carry
/// `managed-by: external-secrets`; labels are the metadata's (`Merge`: on top of the existing
/// ones) plus `managed-by`.
pub fn push_labels(
    remote_key: &str,
    existing: &BTreeMap<String, String>,
    spec: &PushSecretMetadataSpec,
) -> Result<(BTreeMap<String, String>, BTreeMap<String, String>)> {
    if existing.get(MANAGED_BY_KEY).map(String::as_str) != Some(MANAGED_BY_VALUE) {
        return Err(ProviderError::invalid(format!(
            "secret {remote_key} is not managed by external secrets"
        )));
    }
    let mut labels = spec.labels.clone().unwrap_or_default();
    if spec.merge_policy.as_deref() == Some("Merge") {
        labels.extend(existing.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    labels.insert(MANAGED_BY_KEY.to_string(), MANAGED_BY_VALUE.to_string());
    Ok((labels, spec.annotations.clone().unwrap_or_default()))
}

#[async_trait::async_trait]
impl SecretsClient for GcpSmClient {
    async fn get_secret(&self, r: &SecretRef) -> Result<Vec<u8>> {
        if r.fetch_metadata() {
            return self.fetch_metadata(r).await;
        }
        let data = self.value(&r.key, r.version()).await?;
        let Some(property) = r.property() else {
            return Ok(data);
        };
        if serde_json::from_slice::<serde::de::IgnoredAny>(&data).is_err() {
            return Err(ProviderError::invalid(
                "unable to unmarshal secret from JSON",
            ));
        }
        lookup_property_bytes(&data, property).ok_or_else(|| {
            ProviderError::invalid(format!("key {property} does not exist in secret {}", r.key))
        })
    }

    async fn get_secret_map(&self, r: &SecretRef) -> Result<BTreeMap<String, Vec<u8>>> {
        let data = self.get_secret(r).await?;
        json_object_to_map(&data).map_err(|e| e.wrap("unable to unmarshal secret from JSON"))
    }

    async fn get_all_secrets(&self, f: &FindRequest) -> Result<BTreeMap<String, Vec<u8>>> {
        let path = f.path().filter(|p| !p.is_empty());
        let found = if let Some(re) = f.name_regexp() {
            let matcher = NameMatcher::new(re)?;
            let filter = path.map(|p| format!("name:{p}"));
            self.list(filter.as_deref(), None)
                .await?
                .into_iter()
                .filter(|(name, _)| matcher.matches(name))
                .collect::<Vec<_>>()
        } else if let Some(tags) = f.tags.as_ref().filter(|t| !t.is_empty()) {
            let mut filter = tags
                .iter()
                .map(|(k, v)| format!("labels.{k}={v}"))
                .collect::<Vec<_>>()
                .join(" ");
            if let Some(p) = path {
                filter = format!("{filter} name:{p}");
            }
            self.list(Some(&filter), None).await?
        } else {
            return Err(ProviderError::invalid("unexpected find operator"));
        };
        let mut out = BTreeMap::new();
        for (name, _) in found {
            if path.is_some_and(|p| !name.starts_with(p)) {
                continue;
            }
            let v = self.value(&name, None).await?;
            out.insert(name, v);
        }
        convert_keys(f.conversion_strategy, out)
    }

    async fn push_secret(&self, req: &PushRequest) -> Result<()> {
        if req.property().is_some() {
            return Err(ProviderError::unsupported(
                "PushSecret with remoteRef.property is not supported by the esr gcpsm provider yet",
            ));
        }
        let meta = parse_push_metadata::<PushSecretMetadataSpec>(req.metadata.as_ref())
            .map_err(|e| e.wrap("failed to parse PushSecret metadata"))?;
        let spec = meta.map(|m| m.spec).unwrap_or_default();
        let key = req.remote_key();
        let secret = match self.metadata(key).await? {
            Some(s) => s,
            None => self.create_secret(key, &spec).await?,
        };
        let existing_labels = to_btree(&secret.labels);
        let existing_annotations = to_btree(&secret.annotations);
        let (labels, annotations) = push_labels(key, &existing_labels, &spec)?;
        let sm = self.sm()?;
        if labels != existing_labels || annotations != existing_annotations {
            let mut update = Secret::new()
                .set_name(&secret.name)
                .set_etag(&secret.etag)
                .set_labels(labels)
                .set_annotations(annotations);
            if let Some(l) = &self.location {
                update =
                    update.set_replication(Replication::new().set_user_managed(
                        replication::UserManaged::new().set_replicas([
                            replication::user_managed::Replica::new().set_location(l),
                        ]),
                    ));
            }
            let r = sm
                .update_secret()
                .set_secret(update)
                .set_update_mask(
                    google_cloud_wkt::FieldMask::default().set_paths(["labels", "annotations"]),
                )
                .send()
                .await;
            self.record(calls::UPDATE_SECRET, &r);
            r.map_err(|e| map_error(e, calls::UPDATE_SECRET, &secret.name))?;
        }
        let name = names::secret(&self.project, self.loc(), key);
        match self.access(&format!("{name}/versions/latest")).await {
            Ok(current) if current == req.value => return Ok(()),
            Ok(_) => {}
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(map_error(e, calls::ACCESS_SECRET_VERSION, &name)),
        }
        let r = sm
            .add_secret_version()
            .set_parent(&name)
            .set_payload(SecretPayload::new().set_data(req.value.clone()))
            .send()
            .await;
        self.record(calls::ADD_SECRET_VERSION, &r);
        r.map(|_| ())
            .map_err(|e| map_error(e, calls::ADD_SECRET_VERSION, &name))
    }

    async fn delete_secret(&self, r: &PushRemoteRef) -> Result<()> {
        let Some(secret) = self.metadata(&r.remote_key).await? else {
            return Ok(());
        };
        if secret.labels.get(MANAGED_BY_KEY).map(String::as_str) != Some(MANAGED_BY_VALUE) {
            return Ok(());
        }
        let sm = self.sm()?;
        let res = sm
            .delete_secret()
            .set_name(&secret.name)
            .set_etag(&secret.etag)
            .send()
            .await;
        self.record(calls::DELETE_SECRET, &res);
        res.map_err(|e| map_error(e, calls::DELETE_SECRET, &secret.name))
    }

    async fn secret_exists(&self, r: &PushRemoteRef) -> Result<bool> {
        let secret = names::secret(&self.project, self.loc(), &r.remote_key);
        match self.latest_enabled(&secret).await {
            Ok(_) => Ok(true),
            Err(e) if is_not_found(&e) => Ok(false),
            Err(e) => Err(map_error(e, calls::ACCESS_SECRET_VERSION, &secret)),
        }
    }

    async fn validate(&self) -> ValidationResult {
        if self.sm.is_none() {
            return ValidationResult::Unknown;
        }
        // ESO checks the credentials when the client is built and reports Ready without a call.
        ValidationResult::Ready
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(labels: &[(&str, &str)], merge: bool) -> PushSecretMetadataSpec {
        PushSecretMetadataSpec {
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            merge_policy: merge.then(|| "Merge".to_string()),
            ..Default::default()
        }
    }

    #[test]
    fn push_labels_need_the_managed_by_label() {
        let theirs: BTreeMap<String, String> = [("team".to_string(), "x".to_string())].into();
        let e = push_labels("db", &theirs, &spec(&[], false))
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some("secret db is not managed by external secrets")
        );

        let ours: BTreeMap<String, String> = [
            (MANAGED_BY_KEY.to_string(), MANAGED_BY_VALUE.to_string()),
            ("old".to_string(), "1".to_string()),
        ]
        .into();
        let (labels, _) = push_labels("db", &ours, &spec(&[("env", "prod")], false))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            labels.keys().cloned().collect::<Vec<_>>(),
            vec!["env".to_string(), MANAGED_BY_KEY.to_string()],
            "Replace drops the existing labels"
        );
        let (labels, _) = push_labels("db", &ours, &spec(&[("env", "prod")], true))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            labels.get("old").map(String::as_str),
            Some("1"),
            "Merge keeps them"
        );
        assert_eq!(labels.get("env").map(String::as_str), Some("prod"));
    }

    #[test]
    fn replication_defaults_to_automatic() {
        let r = replication_policy(&PushSecretMetadataSpec::default());
        assert!(r.automatic().is_some());
        let r = replication_policy(&PushSecretMetadataSpec {
            replication_location: Some("us-east1".into()),
            replication_locations: Some(vec!["europe-west1".into(), "europe-west4".into()]),
            cmek_key_name: Some("projects/p/locations/l/keyRings/r/cryptoKeys/k".into()),
            ..Default::default()
        });
        let replicas = r
            .user_managed()
            .map(|u| u.replicas.clone())
            .unwrap_or_default();
        assert_eq!(
            replicas
                .iter()
                .map(|r| r.location.clone())
                .collect::<Vec<_>>(),
            vec!["europe-west1".to_string(), "europe-west4".to_string()],
            "replicationLocations wins over replicationLocation"
        );
        assert!(
            replicas
                .iter()
                .all(|r| r.customer_managed_encryption.is_some())
        );
    }
}
