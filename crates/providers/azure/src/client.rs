//! The `SecretsClient` for one Azure Key Vault.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use azure_core::http::RequestContent;
use azure_security_keyvault_certificates::CertificateClient;
use azure_security_keyvault_certificates::models::{
    CertificateClientGetCertificateOptions, ImportCertificateParameters,
};
use azure_security_keyvault_keys::KeyClient;
use azure_security_keyvault_keys::models::{
    ImportKeyParameters, JsonWebKey, KeyClientGetKeyOptions,
};
use azure_security_keyvault_secrets::SecretClient;
use azure_security_keyvault_secrets::models::{
    SecretAttributes, SecretClientGetSecretOptions, SecretClientListSecretPropertiesOptions,
    SetSecretParameters,
};
use base64::Engine;
use esr_provider::find::NameMatcher;
use esr_provider::keys::convert_keys;
use esr_provider::metadata::parse_push_metadata;
use esr_provider::{
    CallRecorder, CallStatus, FindRequest, ProviderError, PushRemoteRef, PushRequest, Result,
    SecretRef, SecretsClient, ValidationResult,
};
use futures::StreamExt;
use time::OffsetDateTime;

use crate::METRIC_PROVIDER;
use crate::error::{is_not_found, map_error};
use crate::keys::jwk_from_value;
use crate::object::{
    ObjectRef, ObjectType, expand_secret_tags, get_property, get_secret_tag, name_from_id,
    push_tags, require_managed, secret_map_from_json, secret_map_properties,
};

/// The three data-plane clients of one vault.
pub struct VaultClients {
    /// Secrets.
    pub secrets: SecretClient,
    /// Keys.
    pub keys: KeyClient,
    /// Certificates.
    pub certs: CertificateClient,
}

/// A client for one store. `vault` is `None` for a ClusterSecretStore with referent credentials
/// validated without a namespace (ESO returns `ValidationResultUnknown` then).
pub struct AzureKvClient {
    vault_url: String,
    vault: Option<Arc<VaultClients>>,
    recorder: Arc<dyn CallRecorder>,
}

impl std::fmt::Debug for AzureKvClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AzureKvClient")
            .field("vault_url", &self.vault_url)
            .field("ready", &self.vault.is_some())
            .finish()
    }
}

/// PushSecret `metadata.spec` for Azure Key Vault.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PushSecretMetadataSpec {
    /// RFC 3339 expiry of the pushed secret.
    #[serde(default)]
    pub expiration_date: String,
    /// Extra tags.
    #[serde(default)]
    pub tags: Option<BTreeMap<String, String>>,
}

fn to_btree(tags: Option<HashMap<String, String>>) -> BTreeMap<String, String> {
    tags.map(|t| t.into_iter().collect()).unwrap_or_default()
}

fn to_hash(tags: BTreeMap<String, String>) -> HashMap<String, String> {
    tags.into_iter().collect()
}

/// A plain secret as read from the vault.
struct SecretData {
    value: String,
    tags: BTreeMap<String, String>,
    expires: Option<OffsetDateTime>,
}

impl AzureKvClient {
    /// A client for `vault_url`.
    pub fn new(
        vault_url: String,
        vault: Option<Arc<VaultClients>>,
        recorder: Arc<dyn CallRecorder>,
    ) -> Self {
        AzureKvClient {
            vault_url,
            vault,
            recorder,
        }
    }

    fn vault(&self) -> Result<&VaultClients> {
        self.vault.as_deref().ok_or_else(|| {
            ProviderError::invalid(
                "cannot use a ClusterSecretStore with referent credentials without a namespace",
            )
        })
    }

    fn record<T>(&self, call: &str, r: &std::result::Result<T, azure_core::Error>) {
        let status = match r {
            Ok(_) => CallStatus::Success,
            Err(e) if is_not_found(e) => CallStatus::Error(esr_provider::ErrorKind::NotFound),
            Err(_) => CallStatus::Error(esr_provider::ErrorKind::Transient),
        };
        self.recorder.record(METRIC_PROVIDER, call, status);
    }

    async fn read_secret(&self, name: &str, version: Option<&str>) -> Result<SecretData> {
        let v = self.vault()?;
        let opts = SecretClientGetSecretOptions {
            secret_version: version.map(str::to_string),
            ..Default::default()
        };
        let r = v.secrets.get_secret(name, Some(opts)).await;
        self.record("GetSecret", &r);
        let s = r
            .and_then(|r| r.into_model())
            .map_err(|e| map_error(e, "GetSecret", name))?;
        // Only a 404 is "not found"; an answer without a value is malformed (a proxy, a
        // misrouted request), and reading it as an empty secret would empty the target Secret.
        let Some(value) = s.value else {
            return Err(ProviderError::transient(format!(
                "GetSecret {name}: the Key Vault answer has no value"
            )));
        };
        Ok(SecretData {
            value,
            tags: to_btree(s.tags),
            expires: s.attributes.and_then(|a| a.expires),
        })
    }

    async fn read_optional_secret(&self, name: &str) -> Result<Option<SecretData>> {
        match self.read_secret(name, None).await {
            Ok(s) => Ok(Some(s)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn read_key(
        &self,
        name: &str,
        version: Option<&str>,
    ) -> Result<azure_security_keyvault_keys::models::Key> {
        let v = self.vault()?;
        let opts = KeyClientGetKeyOptions {
            key_version: version.map(str::to_string),
            ..Default::default()
        };
        let r = v.keys.get_key(name, Some(opts)).await;
        self.record("GetKey", &r);
        r.and_then(|r| r.into_model())
            .map_err(|e| map_error(e, "GetKey", name))
    }

    async fn read_cert(
        &self,
        name: &str,
        version: Option<&str>,
    ) -> Result<azure_security_keyvault_certificates::models::Certificate> {
        let v = self.vault()?;
        let opts = CertificateClientGetCertificateOptions {
            certificate_version: version.map(str::to_string),
            ..Default::default()
        };
        let r = v.certs.get_certificate(name, Some(opts)).await;
        self.record("GetCertificate", &r);
        r.and_then(|r| r.into_model())
            .map_err(|e| map_error(e, "GetCertificate", name))
    }

    /// Lists the vault's secrets (all pages): `(name, enabled, tags)`.
    pub async fn list_secrets(
        &self,
        max_pages: Option<usize>,
    ) -> Result<Vec<(String, bool, BTreeMap<String, String>)>> {
        let v = self.vault()?;
        let opts = SecretClientListSecretPropertiesOptions {
            maxresults: max_pages.map(|_| 25),
            ..Default::default()
        };
        let pager = v
            .secrets
            .list_secret_properties(Some(opts))
            .map_err(|e| map_error(e, "GetSecrets", ""))?;
        let mut pages = pager.into_pages();
        let mut out = Vec::new();
        let mut n = 0usize;
        while let Some(page) = pages.next().await {
            let page = page.and_then(|p| p.into_model());
            self.record("GetSecrets", &page);
            let page = page.map_err(|e| map_error(e, "GetSecrets", ""))?;
            for item in page.value {
                let Some(id) = item.id.as_deref() else {
                    continue;
                };
                let enabled = item
                    .attributes
                    .as_ref()
                    .and_then(|a| a.enabled)
                    .unwrap_or(false);
                out.push((name_from_id(id).to_string(), enabled, to_btree(item.tags)));
            }
            n += 1;
            if max_pages.is_some_and(|m| n >= m) {
                break;
            }
        }
        Ok(out)
    }

    async fn push_plain_secret(
        &self,
        name: &str,
        value: &[u8],
        expires: Option<OffsetDateTime>,
        user_tags: Option<&BTreeMap<String, String>>,
    ) -> Result<()> {
        let tags = push_tags(user_tags)?;
        let existing = self.read_optional_secret(name).await?;
        let value = String::from_utf8_lossy(value).into_owned();
        if let Some(existing) = &existing {
            require_managed(Some(&existing.tags), "cannot get", "secret", name)?;
            if existing.value == value && existing.expires == expires && existing.tags == tags {
                return Ok(());
            }
        }
        let params = SetSecretParameters {
            value: Some(value),
            tags: Some(to_hash(tags)),
            secret_attributes: Some(SecretAttributes {
                enabled: Some(true),
                expires,
                ..Default::default()
            }),
            ..Default::default()
        };
        let v = self.vault()?;
        let body: RequestContent<SetSecretParameters> = params
            .try_into()
            .map_err(|e| map_error(e, "SetSecret", name))?;
        let r = v.secrets.set_secret(name, body, None).await;
        self.record("SetSecret", &r);
        r.map(|_| ()).map_err(|e| {
            map_error(e, "SetSecret", name).wrap(format!("could not set secret {name}"))
        })
    }

    async fn push_cert(
        &self,
        name: &str,
        value: &[u8],
        user_tags: Option<&BTreeMap<String, String>>,
    ) -> Result<()> {
        let tags = push_tags(user_tags)?;
        let local_der = crate::keys::certificate_der(value)?;
        match self.read_cert(name, None).await {
            Ok(c) => {
                require_managed(
                    Some(&to_btree(c.tags.clone())),
                    "cannot get",
                    "certificate",
                    name,
                )?;
                if local_der.is_some() && c.cer == local_der {
                    return Ok(());
                }
            }
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e),
        }
        let params = ImportCertificateParameters {
            base64_encoded_certificate: Some(
                base64::engine::general_purpose::STANDARD.encode(value),
            ),
            tags: Some(to_hash(tags)),
            ..Default::default()
        };
        let v = self.vault()?;
        let body: RequestContent<ImportCertificateParameters> = params
            .try_into()
            .map_err(|e| map_error(e, "ImportCertificate", name))?;
        let r = v.certs.import_certificate(name, body, None).await;
        self.record("ImportCertificate", &r);
        r.map(|_| ()).map_err(|e| {
            map_error(e, "ImportCertificate", name)
                .wrap(format!("could not import certificate {name}"))
        })
    }

    async fn push_key(
        &self,
        name: &str,
        value: &[u8],
        user_tags: Option<&BTreeMap<String, String>>,
    ) -> Result<()> {
        let tags = push_tags(user_tags)?;
        let jwk = jwk_from_value(value)
            .map_err(|e| e.wrap(format!("could not load private key {name}")))?;
        match self.read_key(name, None).await {
            Ok(k) => {
                require_managed(Some(&to_btree(k.tags.clone())), "cannot get", "key", name)?;
                if let Some(existing) = &k.key
                    && crate::keys::same_public_key(&jwk, existing)
                {
                    return Ok(());
                }
            }
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e),
        }
        let key: JsonWebKey = serde_json::from_value(jwk)
            .map_err(|e| ProviderError::invalid(format!("error parsing key: {e}")))?;
        let params = ImportKeyParameters {
            key: Some(key),
            tags: Some(to_hash(tags)),
            ..Default::default()
        };
        let v = self.vault()?;
        let body: RequestContent<ImportKeyParameters> = params
            .try_into()
            .map_err(|e| map_error(e, "ImportKey", name))?;
        let r = v.keys.import_key(name, body, None).await;
        self.record("ImportKey", &r);
        r.map(|_| ()).map_err(|e| {
            map_error(e, "ImportKey", name).wrap(format!("could not import key {name}"))
        })
    }
}

#[async_trait::async_trait]
impl SecretsClient for AzureKvClient {
    async fn get_secret(&self, r: &SecretRef) -> Result<Vec<u8>> {
        let obj = ObjectRef::parse(&r.key);
        match obj.object_type()? {
            ObjectType::Secret => {
                let s = self.read_secret(obj.name, r.version()).await?;
                if r.fetch_metadata() {
                    get_secret_tag(&s.tags, r.property())
                } else {
                    get_property(&s.value, r.property(), &r.key)
                }
            }
            ObjectType::Cert => {
                let c = self.read_cert(obj.name, r.version()).await?;
                Ok(c.cer.unwrap_or_default())
            }
            ObjectType::Key => {
                let k = self.read_key(obj.name, r.version()).await?;
                serde_json::to_vec(&k.key.unwrap_or_default())
                    .map_err(|e| ProviderError::invalid(format!("error marshalling key: {e}")))
            }
        }
    }

    async fn get_secret_map(&self, r: &SecretRef) -> Result<BTreeMap<String, Vec<u8>>> {
        let obj = ObjectRef::parse(&r.key);
        match obj.object_type() {
            Ok(ObjectType::Secret) => {
                let data = self.get_secret(r).await?;
                if r.fetch_metadata() {
                    let s = self.read_secret(obj.name, r.version()).await?;
                    let expanded = expand_secret_tags(obj.name, &s.tags);
                    return Ok(secret_map_properties(&expanded, &r.key, r.property()));
                }
                secret_map_from_json(&data)
            }
            Ok(ObjectType::Cert) => Err(ProviderError::invalid(
                "cannot get use dataFrom to get certificate secret",
            )),
            Ok(ObjectType::Key) => Err(ProviderError::invalid(
                "cannot get use dataFrom to get key secret",
            )),
            Err(e) => Err(e),
        }
    }

    async fn get_all_secrets(&self, f: &FindRequest) -> Result<BTreeMap<String, Vec<u8>>> {
        let matcher = match f.name_regexp().filter(|re| !re.is_empty()) {
            Some(re) => Some(NameMatcher::new(re)?),
            None => None,
        };
        let want_tags = f.tags.as_ref().filter(|t| !t.is_empty());
        let mut out = BTreeMap::new();
        for (name, enabled, tags) in self.list_secrets(None).await? {
            if !enabled {
                continue;
            }
            if let Some(want) = want_tags
                && !want.iter().all(|(k, v)| tags.get(k) == Some(v))
            {
                continue;
            }
            if let Some(m) = &matcher
                && !m.matches(&name)
            {
                continue;
            }
            let s = self.read_secret(&name, None).await?;
            out.insert(name, s.value.into_bytes());
        }
        convert_keys(f.conversion_strategy, out)
    }

    async fn push_secret(&self, req: &PushRequest) -> Result<()> {
        let meta = parse_push_metadata::<PushSecretMetadataSpec>(req.metadata.as_ref())
            .map_err(|e| e.wrap("failed to parse push secret metadata"))?;
        let spec = meta.map(|m| m.spec).unwrap_or_default();
        let expires = if spec.expiration_date.is_empty() {
            None
        } else {
            Some(
                OffsetDateTime::parse(
                    &spec.expiration_date,
                    &time::format_description::well_known::Rfc3339,
                )
                .map_err(|e| {
                    ProviderError::invalid(format!(
                        "error parsing expiration date in metadata: {e}. Expected format: YYYY-MM-DDTHH:MM:SSZ (RFC3339). Example: 2024-12-31T20:00:00Z"
                    ))
                })?,
            )
        };
        let obj = ObjectRef::parse(req.remote_key());
        match obj.object_type() {
            Ok(ObjectType::Secret) => {
                self.push_plain_secret(obj.name, &req.value, expires, spec.tags.as_ref())
                    .await
            }
            Ok(ObjectType::Cert) => {
                self.push_cert(obj.name, &req.value, spec.tags.as_ref())
                    .await
            }
            Ok(ObjectType::Key) => {
                self.push_key(obj.name, &req.value, spec.tags.as_ref())
                    .await
            }
            Err(_) => Err(ProviderError::invalid(format!(
                "secret type {} not supported",
                obj.type_name
            ))),
        }
    }

    async fn delete_secret(&self, r: &PushRemoteRef) -> Result<()> {
        let obj = ObjectRef::parse(&r.remote_key);
        let name = obj.name;
        let v = self.vault()?;
        match obj.object_type() {
            Ok(ObjectType::Secret) => {
                let Some(s) = self.read_optional_secret(name).await? else {
                    return Ok(());
                };
                require_managed(Some(&s.tags), "error getting", "secret", name)?;
                let r = v.secrets.delete_secret(name, None).await;
                self.record("DeleteSecret", &r);
                r.map(|_| ())
                    .map_err(|e| map_error(e, "DeleteSecret", name))
            }
            Ok(ObjectType::Cert) => {
                let c = match self.read_cert(name, None).await {
                    Ok(c) => c,
                    Err(e) if e.is_not_found() => return Ok(()),
                    Err(e) => return Err(e),
                };
                require_managed(
                    Some(&to_btree(c.tags)),
                    "error getting",
                    "certificate",
                    name,
                )?;
                let r = v.certs.delete_certificate(name, None).await;
                self.record("DeleteCertificate", &r);
                r.map(|_| ())
                    .map_err(|e| map_error(e, "DeleteCertificate", name))
            }
            Ok(ObjectType::Key) => {
                let k = match self.read_key(name, None).await {
                    Ok(k) => k,
                    Err(e) if e.is_not_found() => return Ok(()),
                    Err(e) => return Err(e),
                };
                require_managed(Some(&to_btree(k.tags)), "error getting", "key", name)?;
                let r = v.keys.delete_key(name, None).await;
                self.record("DeleteKey", &r);
                r.map(|_| ()).map_err(|e| map_error(e, "DeleteKey", name))
            }
            Err(_) => Err(ProviderError::invalid(format!(
                "secret type '{}' is not supported",
                obj.type_name
            ))),
        }
    }

    async fn secret_exists(&self, r: &PushRemoteRef) -> Result<bool> {
        let obj = ObjectRef::parse(&r.remote_key);
        let res = match obj.object_type() {
            Ok(ObjectType::Secret) => self.read_secret(obj.name, None).await.map(|_| ()),
            Ok(ObjectType::Cert) => self.read_cert(obj.name, None).await.map(|_| ()),
            Ok(ObjectType::Key) => self.read_key(obj.name, None).await.map(|_| ()),
            Err(_) => {
                return Err(ProviderError::invalid(format!(
                    "secret type '{}' is not supported",
                    obj.type_name
                )));
            }
        };
        match res {
            Ok(()) => Ok(true),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn validate(&self) -> ValidationResult {
        if self.vault.is_none() {
            return ValidationResult::Unknown;
        }
        match self.list_secrets(Some(1)).await {
            Ok(_) => ValidationResult::Ready,
            Err(e) => ValidationResult::Error(format!(
                "cannot list secrets of vault {}: {e}",
                self.vault_url
            )),
        }
    }
}
