//! Writes whose response is read only in part.
//!
//! kube's `Api` parses a write's whole response into the typed object: spec, status, data and
//! the managedFields the API server adds to every object. A reconcile that ignores the answer of
//! its finalizer and status patches, and reads only a few fields of the Secret it creates, pays for
//! all of that on every write; during a cold sync of thousands of ExternalSecrets it was a tenth
//! of esr's CPU. These requests are built with kube's own `Request` builder and sent through the
//! same `Client` (so the same middleware, metrics and error mapping: a refused write is a
//! `kube::Error::Api` as before), and serde skips whatever the [`Written`] shape does not name
//! without building it.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Patch, PatchParams, PostParams};
use kube::core::{ObjectMeta, Request};
use kube::{Client, Resource};
use serde::Deserialize;

/// What is read of a written object: the metadata a reconcile remembers, and for a Secret its
/// type, immutability and data (which the data-hash annotation is checked against).
#[derive(Debug, Default, Deserialize)]
pub struct Written {
    /// resourceVersion, labels and annotations.
    #[serde(default)]
    pub metadata: WrittenMeta,
    /// A Secret's `type`.
    #[serde(default, rename = "type")]
    pub type_: Option<String>,
    /// A Secret's `immutable`.
    #[serde(default)]
    pub immutable: Option<bool>,
    /// A Secret's `data`.
    #[serde(default)]
    pub data: Option<BTreeMap<String, ByteString>>,
}

/// The metadata read of a written object (managedFields are skipped unparsed).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WrittenMeta {
    /// The object's new resourceVersion.
    pub resource_version: Option<String>,
    /// Its labels.
    pub labels: Option<BTreeMap<String, String>>,
    /// Its annotations.
    pub annotations: Option<BTreeMap<String, String>>,
}

impl Written {
    /// The written Secret, as far as it was read.
    pub fn into_secret(self) -> Secret {
        Secret {
            metadata: ObjectMeta {
                resource_version: self.metadata.resource_version,
                labels: self.metadata.labels,
                annotations: self.metadata.annotations,
                ..Default::default()
            },
            type_: self.type_,
            immutable: self.immutable,
            data: self.data,
            ..Default::default()
        }
    }
}

fn request<K: Resource<DynamicType = ()>>(namespace: Option<&str>) -> Request {
    Request::new(K::url_path(&(), namespace))
}

/// `Api::<K>::patch` (or, with `subresource`, `patch_subresource`), reading [`Written`].
pub async fn patch<K, P>(
    client: &Client,
    namespace: Option<&str>,
    name: &str,
    subresource: Option<&str>,
    patch: &Patch<P>,
) -> Result<Written, kube::Error>
where
    K: Resource<DynamicType = ()>,
    P: serde::Serialize + std::fmt::Debug,
{
    let pp = PatchParams::default();
    let r = request::<K>(namespace);
    let req = match subresource {
        Some(sub) => r.patch_subresource(sub, name, &pp, patch),
        None => r.patch(name, &pp, patch),
    }
    .map_err(kube::Error::BuildRequest)?;
    client.request::<Written>(req).await
}

/// `Api::<K>::create` (`name` `None`) or `Api::<K>::replace` of `name`, reading [`Written`].
pub async fn put<K>(
    client: &Client,
    namespace: Option<&str>,
    name: Option<&str>,
    pp: &PostParams,
    obj: &K,
) -> Result<Written, kube::Error>
where
    K: Resource<DynamicType = ()> + serde::Serialize,
{
    let body = serde_json::to_vec(obj).map_err(kube::Error::SerdeError)?;
    let r = request::<K>(namespace);
    let req = match name {
        None => r.create(pp, body),
        Some(name) => r.replace(name, pp, body),
    }
    .map_err(kube::Error::BuildRequest)?;
    client.request::<Written>(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_secret_is_read_without_its_managed_fields() {
        let body = serde_json::json!({
            "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {
                "name": "db", "namespace": "a", "resourceVersion": "42",
                "labels": {"reconcile.external-secrets.io/managed": "true"},
                "annotations": {"reconcile.external-secrets.io/data-hash": "h"},
                "managedFields": [{"manager": "esr", "operation": "Update",
                    "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:k": {}}}}]
            },
            "data": {"k": "dg=="}
        });
        let w: Written = serde_json::from_value(body).unwrap();
        let s = w.into_secret();
        assert_eq!(s.metadata.resource_version.as_deref(), Some("42"));
        assert_eq!(s.type_.as_deref(), Some("Opaque"));
        assert_eq!(s.data.unwrap()["k"].0, b"v".to_vec());
        assert_eq!(s.metadata.annotations.unwrap().len(), 1);
        assert_eq!(s.metadata.labels.unwrap().len(), 1);
        assert!(s.metadata.managed_fields.is_none());
    }

    #[test]
    fn requests_go_where_kube_api_sends_them() {
        use k8s_openapi::api::core::v1::Secret;
        let r = request::<Secret>(Some("a"));
        let p = Patch::Merge(serde_json::json!({"status": {}}));
        let req = r
            .patch_subresource("status", "db", &PatchParams::default(), &p)
            .unwrap();
        assert_eq!(req.uri(), "/api/v1/namespaces/a/secrets/db/status?");
        assert_eq!(req.method(), "PATCH");
        let c = request::<Secret>(Some("a"))
            .create(&PostParams::default(), b"{}".to_vec())
            .unwrap();
        assert_eq!(c.uri(), "/api/v1/namespaces/a/secrets?");
    }
}
