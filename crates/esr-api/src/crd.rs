//! CustomResourceDefinitions generated from the API types.
//!
//! kube-derive produces one CRD per kind; [`crds`] then adjusts them to match ESO v2.9.0's CRDs and
//! the apiserver's structural-schema rules:
//! - schemas: `nullable` is removed everywhere except where ESO keeps it (`status.refreshTime`),
//!   `type: [x, "null"]` and `anyOf: [x, null]` forms collapse to `x`, `title`/`$schema` are dropped,
//!   and the root has no `required` list (ESO's roots have none);
//! - `listKind`, the `status` subresource of the generators (ESO enables it although they have no
//!   status schema) and, for ExternalSecret, SecretStore, ClusterSecretStore and
//!   ClusterExternalSecret, an unserved, deprecated `v1beta1` version with the `v1` schema. ESO
//!   keeps that version in its CRDs (with `served: false`), and the apiserver refuses a CRD update
//!   that drops a version still listed in `status.storedVersions`, so keeping it lets esr's CRDs
//!   replace ESO's in place. It also lets `esr validate` tell "version not served" from "unknown
//!   version".
//!
//! [`crd_file_name`] gives the `crds/<group>_<plural>.yaml` name `esr crdgen` writes.

use crate::generators::{ClusterGenerator, Fake, Password, VaultDynamicSecret};
use crate::v1::{ClusterExternalSecret, ExternalSecret, SecretStore};
use crate::v1alpha1::{ClusterPushSecret, PushSecret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceSubresourceStatus, CustomResourceSubresources,
    JSONSchemaProps,
};
use kube::CustomResourceExt;
use serde_json::Value;

/// Why the CRDs could not be built.
#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    /// A generated schema could not be converted between JSON and `JSONSchemaProps`.
    #[error("CRD {crd}: schema conversion failed: {source}")]
    Schema {
        /// Name of the CRD.
        crd: String,
        /// The conversion error.
        source: serde_json::Error,
    },
    /// A generated CRD lacks the version kube-derive always emits.
    #[error("CRD {0}: generated CRD has no version")]
    NoVersion(String),
}

/// Schema paths (from the root) where ESO's CRDs keep `nullable: true`; it is removed elsewhere so
/// that explicit `null`s are pruned as in ESO.
const KEEP_NULLABLE: [&str; 1] = [".status.refreshTime"];

/// All CRDs esr serves, one per kind, in a stable order.
pub fn crds() -> Result<Vec<CustomResourceDefinition>, CrdError> {
    let mut out = Vec::new();

    let es = finish(ExternalSecret::crd(), true)?;
    out.push(es);

    let ss = finish(SecretStore::crd(), true)?;
    let css = cluster_secret_store_from(&ss);
    out.push(ss);
    out.push(css);

    out.push(finish(ClusterExternalSecret::crd(), true)?);
    out.push(finish(PushSecret::crd(), false)?);
    out.push(finish(ClusterPushSecret::crd(), false)?);

    for generator in [
        ClusterGenerator::crd(),
        Fake::crd(),
        Password::crd(),
        VaultDynamicSecret::crd(),
    ] {
        let mut crd = finish(generator, false)?;
        for version in &mut crd.spec.versions {
            version.subresources = Some(CustomResourceSubresources {
                scale: None,
                status: Some(CustomResourceSubresourceStatus(Value::Object(
                    serde_json::Map::new(),
                ))),
            });
        }
        out.push(crd);
    }
    Ok(out)
}

/// File name `esr crdgen` uses for a CRD: `<group>_<plural>.yaml`.
pub fn crd_file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}_{}.yaml", crd.spec.group, crd.spec.names.plural)
}

/// Normalises a kube-derive CRD; optionally adds the unserved `v1beta1` version.
fn finish(
    mut crd: CustomResourceDefinition,
    add_v1beta1: bool,
) -> Result<CustomResourceDefinition, CrdError> {
    let name = crd.metadata.name.clone().unwrap_or_default();
    crd.spec.names.list_kind = Some(format!("{}List", crd.spec.names.kind));
    for version in &mut crd.spec.versions {
        if let Some(validation) = version.schema.as_mut()
            && let Some(schema) = validation.open_api_v3_schema.take()
        {
            let mut value = serde_json::to_value(&schema).map_err(|source| CrdError::Schema {
                crd: name.clone(),
                source,
            })?;
            normalize_root(&mut value);
            let schema: JSONSchemaProps =
                serde_json::from_value(value).map_err(|source| CrdError::Schema {
                    crd: name.clone(),
                    source,
                })?;
            validation.open_api_v3_schema = Some(schema);
        }
    }
    if add_v1beta1 {
        let v1 = crd
            .spec
            .versions
            .first()
            .cloned()
            .ok_or_else(|| CrdError::NoVersion(name.clone()))?;
        let mut beta = v1;
        beta.name = "v1beta1".to_owned();
        beta.served = false;
        beta.storage = false;
        beta.deprecated = Some(true);
        beta.selectable_fields = None;
        crd.spec.versions.push(beta);
    }
    Ok(crd)
}

/// Builds the ClusterSecretStore CRD from the SecretStore one (same schema, cluster scope).
fn cluster_secret_store_from(ss: &CustomResourceDefinition) -> CustomResourceDefinition {
    let mut css = ss.clone();
    css.metadata.name = Some("clustersecretstores.external-secrets.io".to_owned());
    css.spec.scope = "Cluster".to_owned();
    css.spec.names.kind = "ClusterSecretStore".to_owned();
    css.spec.names.list_kind = Some("ClusterSecretStoreList".to_owned());
    css.spec.names.plural = "clustersecretstores".to_owned();
    css.spec.names.singular = Some("clustersecretstore".to_owned());
    css.spec.names.short_names = Some(vec!["css".to_owned()]);
    for version in &mut css.spec.versions {
        if let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|v| v.open_api_v3_schema.as_mut())
        {
            schema.description = Some(
                "ClusterSecretStore is a cluster-scoped SecretStore: it holds the connection and credentials of a secrets provider and can be used from every namespace its conditions allow."
                    .to_owned(),
            );
        }
    }
    css
}

/// Root-level fix-ups plus the recursive normalisation.
fn normalize_root(root: &mut Value) {
    normalize(root, "");
    if let Some(obj) = root.as_object_mut() {
        obj.remove("required");
        obj.remove("title");
        if let Some(props) = obj.get_mut("properties").and_then(Value::as_object_mut) {
            props.insert(
                "apiVersion".to_owned(),
                serde_json::json!({
                    "type": "string",
                    "description": "Versioned schema of this object, `<group>/<version>`.",
                }),
            );
            props.insert(
                "kind".to_owned(),
                serde_json::json!({
                    "type": "string",
                    "description": "Kind of this object.",
                }),
            );
            props.insert(
                "metadata".to_owned(),
                serde_json::json!({
                    "type": "object",
                    "description": "Standard Kubernetes object metadata.",
                }),
            );
        }
    }
}

/// Is this node a Kubernetes `LabelSelector` (exactly `matchExpressions` and `matchLabels`)?
fn is_label_selector(obj: &serde_json::Map<String, Value>) -> bool {
    obj.get("properties")
        .and_then(Value::as_object)
        .is_some_and(|p| {
            p.len() == 2 && p.contains_key("matchExpressions") && p.contains_key("matchLabels")
        })
}

/// Marks a LabelSelector atomic, as Kubernetes' own schema (and ESO's CRDs) do.
fn mark_label_selector_atomic(obj: &mut serde_json::Map<String, Value>) {
    obj.insert(
        "x-kubernetes-map-type".to_owned(),
        Value::String("atomic".to_owned()),
    );
    let Some(exprs) = obj
        .get_mut("properties")
        .and_then(|p| p.get_mut("matchExpressions"))
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    exprs.insert(
        "x-kubernetes-list-type".to_owned(),
        Value::String("atomic".to_owned()),
    );
    if let Some(values) = exprs
        .get_mut("items")
        .and_then(|i| i.get_mut("properties"))
        .and_then(|p| p.get_mut("values"))
        .and_then(Value::as_object_mut)
    {
        values.insert(
            "x-kubernetes-list-type".to_owned(),
            Value::String("atomic".to_owned()),
        );
    }
}

/// Is this schema node the "null" branch schemars emits for `Option`?
fn is_null_branch(v: &Value) -> bool {
    match v.as_object() {
        Some(o) => {
            o.get("type") == Some(&Value::String("null".to_owned()))
                || o.get("enum")
                    .and_then(Value::as_array)
                    .is_some_and(|e| e.len() == 1 && e[0].is_null())
        }
        None => false,
    }
}

/// Recursive structural clean-up of one schema node; `path` is its location from the root
/// (`.spec.target`, `.spec.data[]`, `.spec.tags{}`).
fn normalize(node: &mut Value, path: &str) {
    let Some(obj) = node.as_object_mut() else {
        return;
    };

    // anyOf/oneOf [X, null] -> X (merged into this node, keeping this node's metadata).
    for key in ["anyOf", "oneOf"] {
        let collapse = obj
            .get(key)
            .and_then(Value::as_array)
            .filter(|branches| branches.len() == 2 && branches.iter().any(is_null_branch))
            .and_then(|branches| branches.iter().find(|b| !is_null_branch(b)).cloned());
        if let Some(Value::Object(inner)) = collapse {
            obj.remove(key);
            for (k, v) in inner {
                obj.entry(k).or_insert(v);
            }
        }
    }

    // type: [x, "null"] -> type: x
    if let Some(Value::Array(types)) = obj.get("type") {
        let non_null: Vec<Value> = types
            .iter()
            .filter(|t| t.as_str() != Some("null"))
            .cloned()
            .collect();
        if non_null.len() == 1 {
            obj.insert("type".to_owned(), non_null[0].clone());
        }
    }

    // enum values: drop a `null` member added for Option<Enum>.
    if let Some(Value::Array(values)) = obj.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }

    obj.remove("nullable");
    if KEEP_NULLABLE.contains(&path) {
        obj.insert("nullable".to_owned(), Value::Bool(true));
    }
    // Spell out the two allowed types of an int-or-string, as Kubernetes' own schemas do.
    if obj.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true))
        && !obj.contains_key("anyOf")
    {
        obj.insert(
            "anyOf".to_owned(),
            serde_json::json!([{"type": "integer"}, {"type": "string"}]),
        );
    }
    if is_label_selector(obj) {
        mark_label_selector_atomic(obj);
    }
    obj.remove("title");
    obj.remove("$schema");
    if obj.get("default") == Some(&Value::Null) {
        obj.remove("default");
    }

    if let Some(Value::Object(props)) = obj.get_mut("properties") {
        for (name, child) in props.iter_mut() {
            normalize(child, &format!("{path}.{name}"));
        }
    }
    if let Some(items) = obj.get_mut("items") {
        normalize(items, &format!("{path}[]"));
    }
    if let Some(additional) = obj.get_mut("additionalProperties")
        && additional.is_object()
    {
        normalize(additional, &format!("{path}{{}}"));
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(branches)) = obj.get_mut(key) {
            for branch in branches {
                normalize(branch, path);
            }
        }
    }
    if let Some(not) = obj.get_mut("not") {
        normalize(not, path);
    }
}
