//! PushSecret `data[].metadata` in ESO's common envelope:
//! `{apiVersion: kubernetes.external-secrets.io/v1alpha1, kind: PushSecretMetadata, spec: {...}}`
//! (ESO `runtime/esutils/metadata`). Unknown envelope fields are rejected, as ESO does; the spec
//! type decides about its own unknown fields (use `#[serde(deny_unknown_fields)]` to match ESO).

use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::error::{ProviderError, Result};
use crate::keys::json_error_text;

/// `apiVersion` of the metadata envelope.
pub const PUSH_METADATA_API_VERSION: &str = "kubernetes.external-secrets.io/v1alpha1";
/// `kind` of the metadata envelope.
pub const PUSH_METADATA_KIND: &str = "PushSecretMetadata";

/// The parsed envelope.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PushSecretMetadata<T> {
    /// Must be `PushSecretMetadata`.
    #[serde(default)]
    pub kind: String,
    /// Must be `kubernetes.external-secrets.io/v1alpha1`.
    #[serde(default)]
    pub api_version: String,
    /// Provider-specific spec.
    #[serde(default)]
    pub spec: T,
}

/// Parses the metadata (`None` → `Ok(None)`), with ESO's error texts.
pub fn parse_push_metadata<T: DeserializeOwned + Default>(
    data: Option<&serde_json::Value>,
) -> Result<Option<PushSecretMetadata<T>>> {
    let Some(data) = data else {
        return Ok(None);
    };
    if data.is_null() {
        return Ok(None);
    }
    let parsed: PushSecretMetadata<T> = serde_json::from_value(data.clone()).map_err(|e| {
        ProviderError::invalid(format!(
            "failed to parse {PUSH_METADATA_API_VERSION} {PUSH_METADATA_KIND}: {}",
            json_error_text(&e)
        ))
    })?;
    if parsed.api_version != PUSH_METADATA_API_VERSION {
        return Err(ProviderError::invalid(format!(
            "unexpected apiVersion {:?}, expected {PUSH_METADATA_API_VERSION:?}",
            parsed.api_version
        )));
    }
    if parsed.kind != PUSH_METADATA_KIND {
        return Err(ProviderError::invalid(format!(
            "unexpected kind {:?}, expected {PUSH_METADATA_KIND:?}",
            parsed.kind
        )));
    }
    Ok(Some(parsed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Debug, Default, PartialEq, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    struct Spec {
        #[serde(default)]
        remote_namespace: String,
    }

    #[test]
    fn parses_envelope() {
        let v = json!({"apiVersion": PUSH_METADATA_API_VERSION, "kind": PUSH_METADATA_KIND,
                       "spec": {"remoteNamespace": "x"}});
        let m = parse_push_metadata::<Spec>(Some(&v)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(m.map(|m| m.spec.remote_namespace), Some("x".to_string()));
        assert_eq!(parse_push_metadata::<Spec>(None).ok(), Some(None));
        let no_spec = json!({"apiVersion": PUSH_METADATA_API_VERSION, "kind": PUSH_METADATA_KIND});
        assert!(parse_push_metadata::<Spec>(Some(&no_spec)).is_ok());
    }

    #[test]
    fn rejects_wrong_envelope() {
        let e = |v: serde_json::Value| {
            parse_push_metadata::<Spec>(Some(&v))
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        assert_eq!(
            e(json!({"apiVersion": "v1", "kind": PUSH_METADATA_KIND})),
            format!("unexpected apiVersion \"v1\", expected {PUSH_METADATA_API_VERSION:?}")
        );
        assert_eq!(
            e(json!({"apiVersion": PUSH_METADATA_API_VERSION, "kind": "X"})),
            format!("unexpected kind \"X\", expected {PUSH_METADATA_KIND:?}")
        );
        assert!(e(json!({"apiVersion": PUSH_METADATA_API_VERSION, "kind": PUSH_METADATA_KIND, "extra": 1}))
            .starts_with("failed to parse kubernetes.external-secrets.io/v1alpha1 PushSecretMetadata: "));
        assert!(e(json!({"apiVersion": PUSH_METADATA_API_VERSION, "kind": PUSH_METADATA_KIND, "spec": {"bogus": 1}}))
            .starts_with("failed to parse"));
    }
}
