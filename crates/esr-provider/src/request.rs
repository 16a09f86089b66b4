//! Request and result types passed to providers, decoupled from the CRD wire types.
//!
//! The controller builds them from the esr-api types (`ExternalSecretDataRemoteRef`,
//! `ExternalSecretFind`, `PushSecretData`); providers never see the wire types. Empty strings coming
//! from the wire are normalised to `None` by the constructors and ignored by the accessors.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use serde::{Deserialize, Serialize};

use crate::error::ProviderError;
use crate::keys::go_json_string_map;

/// `remoteRef.metadataPolicy`.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
pub enum MetadataPolicy {
    /// Return the secret value (default).
    #[default]
    None,
    /// Return the secret's metadata (tags, labels, ...) instead of its value.
    Fetch,
}

impl MetadataPolicy {
    /// Parses the wire value (`None` / `Fetch`; empty means `None`).
    pub fn parse(s: &str) -> Result<Self, ProviderError> {
        match s {
            "" | "None" => Ok(MetadataPolicy::None),
            "Fetch" => Ok(MetadataPolicy::Fetch),
            other => Err(ProviderError::invalid(format!(
                "unsupported metadataPolicy {other:?}"
            ))),
        }
    }
}

/// `conversionStrategy`: the esr-api type (one definition for the CRD, the controller and the
/// providers).
pub use esr_api::v1::ConversionStrategy;

/// One remote value to read: ESO's `ExternalSecretDataRemoteRef` minus the parts the controller
/// handles itself (decodingStrategy, conversionStrategy of `data`, nullBytePolicy).
///
/// It is `Ord + Hash` so the controller can de-duplicate fetches within a reconcile.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SecretRef {
    /// `remoteRef.key`.
    pub key: String,
    /// `remoteRef.property` (`None` when empty).
    pub property: Option<String>,
    /// `remoteRef.version` (`None` when empty).
    pub version: Option<String>,
    /// `remoteRef.metadataPolicy`.
    pub metadata_policy: MetadataPolicy,
}

impl SecretRef {
    /// A reference to `key` with no property or version.
    pub fn new(key: impl Into<String>) -> Self {
        SecretRef {
            key: key.into(),
            ..Default::default()
        }
    }

    /// Sets the property (an empty string clears it).
    #[must_use]
    pub fn with_property(mut self, property: impl Into<String>) -> Self {
        self.property = non_empty(property.into());
        self
    }

    /// Sets the version (an empty string clears it).
    #[must_use]
    pub fn with_version(mut self, version: impl Into<String>) -> Self {
        self.version = non_empty(version.into());
        self
    }

    /// Sets the metadata policy.
    #[must_use]
    pub fn with_metadata_policy(mut self, policy: MetadataPolicy) -> Self {
        self.metadata_policy = policy;
        self
    }

    /// The property, `None` if unset or empty.
    pub fn property(&self) -> Option<&str> {
        self.property.as_deref().filter(|p| !p.is_empty())
    }

    /// The version, `None` if unset or empty.
    pub fn version(&self) -> Option<&str> {
        self.version.as_deref().filter(|v| !v.is_empty())
    }

    /// The version as ESO sees it (empty string when unset).
    pub fn version_str(&self) -> &str {
        self.version().unwrap_or("")
    }

    /// True for `metadataPolicy: Fetch`.
    pub fn fetch_metadata(&self) -> bool {
        self.metadata_policy == MetadataPolicy::Fetch
    }
}

/// `find.name`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FindName {
    /// `find.name.regexp` (Go RE2 syntax, unanchored).
    pub regexp: String,
}

/// `dataFrom[].find`: ESO's `ExternalSecretFind` minus decodingStrategy (applied by the controller).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FindRequest {
    /// `find.path` (`None` when empty).
    pub path: Option<String>,
    /// `find.name`.
    pub name: Option<FindName>,
    /// `find.tags`. `Some(empty)` is different from `None` for some providers (ESO checks `!= nil`).
    pub tags: Option<BTreeMap<String, String>>,
    /// `find.conversionStrategy`, applied by the provider to the result keys.
    pub conversion_strategy: ConversionStrategy,
}

impl FindRequest {
    /// The path, `None` if unset or empty.
    pub fn path(&self) -> Option<&str> {
        self.path.as_deref().filter(|p| !p.is_empty())
    }

    /// The name regexp, if a name filter is set.
    pub fn name_regexp(&self) -> Option<&str> {
        self.name.as_ref().map(|n| n.regexp.as_str())
    }
}

/// The remote side of a PushSecret entry (`remoteRef`): used for delete and exists checks.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PushRemoteRef {
    /// `remoteRef.remoteKey`.
    pub remote_key: String,
    /// `remoteRef.property` (`None` when empty).
    pub property: Option<String>,
}

impl PushRemoteRef {
    /// A remote ref without property.
    pub fn new(remote_key: impl Into<String>) -> Self {
        PushRemoteRef {
            remote_key: remote_key.into(),
            property: None,
        }
    }

    /// Sets the property (an empty string clears it).
    #[must_use]
    pub fn with_property(mut self, property: impl Into<String>) -> Self {
        self.property = non_empty(property.into());
        self
    }

    /// The property, `None` if unset or empty.
    pub fn property(&self) -> Option<&str> {
        self.property.as_deref().filter(|p| !p.is_empty())
    }
}

/// Alias: a delete request is just the remote ref.
pub type DeleteRequest = PushRemoteRef;

/// One PushSecret entry to write: ESO's `PushSecret(secret, data)`. `Debug` hides the value and
/// the source Secret's data.
#[derive(Clone, PartialEq)]
pub struct PushRequest {
    /// Where to write.
    pub remote: PushRemoteRef,
    /// `match.secretKey` (`None` when empty: the whole Secret is pushed).
    pub secret_key: Option<String>,
    /// The value to write, computed like ESO's `ExtractSecretData`: the bytes of `secret_key`, or the
    /// JSON object of all keys (string values) when there is no secret key.
    pub value: Vec<u8>,
    /// `data[].metadata` (provider-specific, free-form).
    pub metadata: Option<serde_json::Value>,
    /// The local source Secret (the kubernetes provider pushes its type, labels and annotations).
    pub source: Secret,
}

impl std::fmt::Debug for PushRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushRequest")
            .field("remote", &self.remote)
            .field("secret_key", &self.secret_key)
            .field("value", &format_args!("<{} bytes>", self.value.len()))
            .field("metadata", &self.metadata)
            .field("source", &self.source.metadata.name)
            .finish()
    }
}

impl PushRequest {
    /// Builds a push request from the source Secret, computing [`PushRequest::value`] as ESO does.
    /// Errors with `failed to find secret key in secret with key: K` when the key is missing.
    pub fn from_secret(
        source: Secret,
        remote: PushRemoteRef,
        secret_key: Option<String>,
        metadata: Option<serde_json::Value>,
    ) -> Result<Self, ProviderError> {
        let secret_key = secret_key.and_then(non_empty);
        let data: BTreeMap<String, Vec<u8>> = source
            .data
            .as_ref()
            .map(|d| d.iter().map(|(k, v)| (k.clone(), v.0.clone())).collect())
            .unwrap_or_default();
        let value = match &secret_key {
            None => go_json_string_map(&data),
            Some(k) => data.get(k).cloned().ok_or_else(|| {
                ProviderError::invalid(format!("failed to find secret key in secret with key: {k}"))
            })?,
        };
        Ok(PushRequest {
            remote,
            secret_key,
            value,
            metadata,
            source,
        })
    }

    /// `remoteRef.remoteKey`.
    pub fn remote_key(&self) -> &str {
        &self.remote.remote_key
    }

    /// `remoteRef.property`, `None` if unset or empty.
    pub fn property(&self) -> Option<&str> {
        self.remote.property()
    }

    /// `match.secretKey`, `None` if unset or empty.
    pub fn secret_key(&self) -> Option<&str> {
        self.secret_key.as_deref().filter(|k| !k.is_empty())
    }
}

/// Outcome of [`crate::SecretsClient::validate`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ValidationResult {
    /// The store works: Ready=True `Valid`.
    Ready,
    /// Cannot tell (e.g. referent auth): Ready=True `ValidationUnknown`.
    Unknown,
    /// The store does not work: Ready=False `InvalidProviderConfig`; the message goes into the event.
    Error(String),
}

/// What a store can do (`status.capabilities`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Capabilities {
    /// Read only.
    ReadOnly,
    /// Write only (PushSecret).
    WriteOnly,
    /// Read and write.
    ReadWrite,
}

impl Capabilities {
    /// The wire value.
    pub fn as_str(self) -> &'static str {
        match self {
            Capabilities::ReadOnly => "ReadOnly",
            Capabilities::WriteOnly => "WriteOnly",
            Capabilities::ReadWrite => "ReadWrite",
        }
    }
}

/// Maintenance status of a provider (ESO emits `StoreUnmaintained` / `StoreDeprecated` warnings).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Maintenance {
    /// Maintained.
    Maintained,
    /// Not maintained (ESO: Fake).
    NotMaintained,
    /// Deprecated.
    Deprecated,
}

fn non_empty(s: String) -> Option<String> {
    if s.is_empty() { None } else { Some(s) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    fn secret(pairs: &[(&str, &str)]) -> Secret {
        Secret {
            data: Some(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                    .collect(),
            ),
            ..Default::default()
        }
    }

    #[test]
    fn secret_ref_normalises_empty_strings() {
        let r = SecretRef::new("k").with_property("").with_version("");
        assert_eq!(r.property(), None);
        assert_eq!(r.version(), None);
        assert_eq!(r.version_str(), "");
        let r = SecretRef {
            key: "k".into(),
            property: Some(String::new()),
            version: Some("v1".into()),
            metadata_policy: MetadataPolicy::Fetch,
        };
        assert_eq!(r.property(), None);
        assert_eq!(r.version(), Some("v1"));
        assert!(r.fetch_metadata());
    }

    #[test]
    fn push_value_is_one_key_or_json_of_all() {
        let s = secret(&[("b", "2"), ("a", "1")]);
        let whole = PushRequest::from_secret(s.clone(), PushRemoteRef::new("r"), None, None)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(whole.value, br#"{"a":"1","b":"2"}"#.to_vec());
        let one =
            PushRequest::from_secret(s.clone(), PushRemoteRef::new("r"), Some("b".into()), None)
                .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(one.value, b"2".to_vec());
        assert_eq!(one.secret_key(), Some("b"));
        let missing = PushRequest::from_secret(s, PushRemoteRef::new("r"), Some("zz".into()), None);
        assert_eq!(
            missing.map(|_| ()).map_err(|e| e.to_string()),
            Err("failed to find secret key in secret with key: zz".to_string())
        );
    }

    #[test]
    fn push_request_debug_hides_values() {
        let s = secret(&[("k", "top-secret-value")]);
        let r = PushRequest::from_secret(s, PushRemoteRef::new("r"), None, None)
            .unwrap_or_else(|e| panic!("{e}"));
        let d = format!("{r:?}");
        assert!(!d.contains("top-secret-value"), "{d}");
        assert!(!d.contains("116, 111, 112"), "{d}");
    }

    #[test]
    fn parse_wire_enums() {
        assert_eq!(
            MetadataPolicy::parse("Fetch").ok(),
            Some(MetadataPolicy::Fetch)
        );
        assert_eq!(MetadataPolicy::parse("").ok(), Some(MetadataPolicy::None));
        assert!(MetadataPolicy::parse("x").is_err());
        assert_eq!(Capabilities::ReadWrite.as_str(), "ReadWrite");
    }
}
