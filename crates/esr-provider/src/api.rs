//! Conversions from the esr-api wire types into the provider request types.

use esr_api::providers::kubernetes::KubernetesProvider;
use esr_api::v1::{
    CaProvider, CaProviderType, ClusterSecretStore, ExternalSecretDataRemoteRef,
    ExternalSecretFind, SecretKeySelector, SecretStore, SecretStoreKind, SecretStoreRef,
};
use esr_api::v1alpha1::{PushSecretData, PushSecretRemoteRef};
use k8s_openapi::api::core::v1::Secret;

use crate::error::{ProviderError, Result};
use crate::provider::{StoreInfo, StoreKind};
use crate::refs::{CaProviderKind, CaProviderRef, SecretKeyRef};
use crate::request::{
    FindName, FindRequest, MetadataPolicy, PushRemoteRef, PushRequest, SecretRef,
};
use crate::store::StoreRef;

impl From<&ExternalSecretDataRemoteRef> for SecretRef {
    fn from(r: &ExternalSecretDataRemoteRef) -> Self {
        SecretRef {
            key: r.key.clone(),
            property: r.property.clone().filter(|p| !p.is_empty()),
            version: r.version.clone().filter(|v| !v.is_empty()),
            metadata_policy: match r.metadata_policy {
                Some(esr_api::v1::MetadataPolicy::Fetch) => MetadataPolicy::Fetch,
                _ => MetadataPolicy::None,
            },
        }
    }
}

impl From<&ExternalSecretFind> for FindRequest {
    fn from(f: &ExternalSecretFind) -> Self {
        FindRequest {
            path: f.path.clone().filter(|p| !p.is_empty()),
            name: f.name.as_ref().map(|n| FindName {
                regexp: n.regexp.clone().unwrap_or_default(),
            }),
            tags: f.tags.clone(),
            conversion_strategy: f.conversion_strategy.unwrap_or_default(),
        }
    }
}

impl From<&SecretStoreRef> for StoreRef {
    fn from(r: &SecretStoreRef) -> Self {
        StoreRef {
            kind: match r.kind {
                Some(SecretStoreKind::ClusterSecretStore) => StoreKind::ClusterSecretStore,
                _ => StoreKind::SecretStore,
            },
            name: r.name.clone().unwrap_or_default(),
        }
    }
}

impl From<&PushSecretRemoteRef> for PushRemoteRef {
    fn from(r: &PushSecretRemoteRef) -> Self {
        PushRemoteRef {
            remote_key: r.remote_key.clone(),
            property: r.property.clone().filter(|p| !p.is_empty()),
        }
    }
}

impl PushRequest {
    /// Builds a push request from a PushSecret `data[]` entry and the source Secret.
    pub fn from_api(source: Secret, data: &PushSecretData) -> Result<Self> {
        PushRequest::from_secret(
            source,
            (&data.match_.remote_ref).into(),
            data.match_.secret_key.clone(),
            data.metadata.as_ref().map(|m| m.0.clone()),
        )
    }
}

impl<'a> From<&'a SecretKeySelector> for SecretKeyRef<'a> {
    fn from(s: &'a SecretKeySelector) -> Self {
        SecretKeyRef::new(
            s.name.as_deref().unwrap_or(""),
            s.namespace.as_deref(),
            s.key.as_deref().unwrap_or(""),
        )
    }
}

impl<'a> From<&'a CaProvider> for CaProviderRef<'a> {
    fn from(p: &'a CaProvider) -> Self {
        CaProviderRef {
            kind: match p.type_ {
                CaProviderType::Secret => CaProviderKind::Secret,
                CaProviderType::ConfigMap => CaProviderKind::ConfigMap,
            },
            name: &p.name,
            key: p.key.as_deref().unwrap_or(""),
            namespace: p.namespace.as_deref(),
        }
    }
}

impl StoreInfo {
    /// From a typed SecretStore.
    pub fn from_secret_store(store: &SecretStore) -> Result<Self> {
        let mut v = serde_json::to_value(store)
            .map_err(|e| ProviderError::invalid(format!("cannot encode SecretStore: {e}")))?;
        set_kind(&mut v, "SecretStore");
        StoreInfo::from_object(&v)
    }

    /// From a typed ClusterSecretStore.
    pub fn from_cluster_secret_store(store: &ClusterSecretStore) -> Result<Self> {
        let mut v = serde_json::to_value(store).map_err(|e| {
            ProviderError::invalid(format!("cannot encode ClusterSecretStore: {e}"))
        })?;
        set_kind(&mut v, "ClusterSecretStore");
        StoreInfo::from_object(&v)
    }

    /// The typed `spec.provider.kubernetes`.
    pub fn kubernetes_spec(&self) -> Result<KubernetesProvider> {
        self.provider_spec("kubernetes")
    }
}

fn set_kind(v: &mut serde_json::Value, kind: &str) {
    if let Some(o) = v.as_object_mut() {
        o.insert("kind".into(), serde_json::Value::String(kind.into()));
        o.entry("apiVersion")
            .or_insert_with(|| serde_json::Value::String("external-secrets.io/v1".into()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use esr_api::v1::SecretStoreSpec;
    use serde_json::json;

    #[test]
    fn remote_ref_conversion() {
        let r: ExternalSecretDataRemoteRef = serde_json::from_value(json!({
            "key": "k", "property": "", "version": "v2", "metadataPolicy": "Fetch"
        }))
        .unwrap_or_default();
        let s = SecretRef::from(&r);
        assert_eq!(s.key, "k");
        assert_eq!(s.property(), None);
        assert_eq!(s.version(), Some("v2"));
        assert!(s.fetch_metadata());
    }

    #[test]
    fn find_conversion() {
        let f: ExternalSecretFind = serde_json::from_value(json!({
            "name": {"regexp": "^db"}, "tags": {"a": "b"}, "conversionStrategy": "Unicode"
        }))
        .unwrap_or_default();
        let r = FindRequest::from(&f);
        assert_eq!(r.name_regexp(), Some("^db"));
        assert_eq!(r.tags.as_ref().map(|t| t.len()), Some(1));
        assert_eq!(
            r.conversion_strategy,
            crate::request::ConversionStrategy::Unicode
        );
        assert_eq!(r.path(), None);
    }

    #[test]
    fn store_ref_conversion() {
        let r: SecretStoreRef =
            serde_json::from_value(json!({"name": "x", "kind": "ClusterSecretStore"}))
                .unwrap_or_default();
        assert_eq!(
            StoreRef::from(&r),
            StoreRef::new(Some("ClusterSecretStore"), "x")
        );
        let r: SecretStoreRef = serde_json::from_value(json!({"name": "y"})).unwrap_or_default();
        assert_eq!(StoreRef::from(&r).kind, StoreKind::SecretStore);
    }

    #[test]
    fn typed_stores_to_store_info() {
        let spec: SecretStoreSpec = serde_json::from_value(json!({
            "provider": {"fake": {"data": [{"key": "a", "value": "b"}]}},
            "conditions": [{"namespaces": ["x"]}]
        }))
        .unwrap_or_default();
        let css = ClusterSecretStore::new("c", spec.clone());
        let info = StoreInfo::from_cluster_secret_store(&css).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(info.kind, StoreKind::ClusterSecretStore);
        assert_eq!(info.provider_key().ok(), Some("fake"));
        let conds = crate::store::store_conditions(&info).unwrap_or_default();
        assert_eq!(conds.len(), 1);
        let mut ss = SecretStore::new("s", spec);
        ss.metadata.namespace = Some("ns".into());
        let info = StoreInfo::from_secret_store(&ss).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(info.kind, StoreKind::SecretStore);
        assert_eq!(info.namespace.as_deref(), Some("ns"));
        let fake: esr_api::providers::fake::FakeProvider =
            info.provider_spec("fake").unwrap_or_default();
        assert_eq!(fake.data.len(), 1);
    }

    #[test]
    fn selector_conversion() {
        let s: SecretKeySelector =
            serde_json::from_value(json!({"name": "n", "key": "k"})).unwrap_or_default();
        let r = SecretKeyRef::from(&s);
        assert_eq!((r.name, r.namespace, r.key), ("n", None, "k"));
    }
}
