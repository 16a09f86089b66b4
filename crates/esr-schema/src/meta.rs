//! `metadata` of every Kubernetes object (`ObjectMeta`): its fields and their OpenAPI schema.
//!
//! This is the one list of `ObjectMeta` fields in the project. The apiserver keeps exactly these
//! keys in an object's `metadata` (and in an embedded resource's `metadata`); any other key is an
//! unknown field, dropped and, with `fieldValidation=Strict`, reported. The schema is the one the
//! apiserver publishes for `ObjectMeta` in its OpenAPI documents, reduced to what validation and
//! pruning use.

use std::sync::LazyLock;

use serde_json::{Value, json};

/// The OpenAPI schema of `ObjectMeta`: its `properties` are the fields the apiserver keeps.
static OBJECT_META: LazyLock<Value> = LazyLock::new(|| {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "generateName": {"type": "string"},
            "namespace": {"type": "string"},
            "selfLink": {"type": "string"},
            "uid": {"type": "string"},
            "resourceVersion": {"type": "string"},
            "generation": {"type": "integer", "format": "int64"},
            "creationTimestamp": {"type": "string", "format": "date-time"},
            "deletionTimestamp": {"type": "string", "format": "date-time"},
            "deletionGracePeriodSeconds": {"type": "integer", "format": "int64"},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
            "finalizers": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
            "ownerReferences": {
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["uid"],
                "items": {
                    "type": "object",
                    "required": ["apiVersion", "kind", "name", "uid"],
                    "properties": {
                        "apiVersion": {"type": "string"},
                        "kind": {"type": "string"},
                        "name": {"type": "string"},
                        "uid": {"type": "string"},
                        "controller": {"type": "boolean"},
                        "blockOwnerDeletion": {"type": "boolean"}
                    }
                }
            },
            "managedFields": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}, "x-kubernetes-list-type": "atomic"}
        }
    })
});

/// The OpenAPI schema of `ObjectMeta` (a fresh copy, to embed in a kind's schema).
pub fn object_meta_schema() -> Value {
    OBJECT_META.clone()
}

/// Whether `key` is an `ObjectMeta` field the apiserver keeps in `metadata`.
pub fn is_object_meta_field(key: &str) -> bool {
    OBJECT_META["properties"].get(key).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fields_kept_in_metadata() {
        let fields: Vec<&str> = OBJECT_META["properties"]
            .as_object()
            .map(|p| p.keys().map(String::as_str).collect())
            .unwrap_or_default();
        assert_eq!(
            fields.join(" "),
            "name generateName namespace selfLink uid resourceVersion generation creationTimestamp \
             deletionTimestamp deletionGracePeriodSeconds labels annotations finalizers \
             ownerReferences managedFields"
        );
        assert!(is_object_meta_field("managedFields"));
        assert!(!is_object_meta_field("spec"));
        assert!(!is_object_meta_field("Labels"));
        assert_eq!(
            object_meta_schema()["properties"]["generation"]["format"],
            "int64"
        );
    }
}
