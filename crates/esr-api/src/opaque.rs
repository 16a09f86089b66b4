//! Schema-opaque JSON holders: objects whose contents esr keeps verbatim without typing them.
//!
//! They are used for the ESO providers and generators that esr does not implement (the controller
//! reports them as unsupported) and for free-form, provider-specific metadata.

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// A JSON object kept verbatim. Its CRD schema is `type: object` with
/// `x-kubernetes-preserve-unknown-fields: true`, so the apiserver stores every field as written.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(transparent)]
pub struct OpaqueObject(pub serde_json::Map<String, serde_json::Value>);

impl JsonSchema for OpaqueObject {
    fn schema_name() -> Cow<'static, str> {
        "OpaqueObject".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
        })
    }
}

/// Any JSON value kept verbatim (object, array, string, number or boolean). Its CRD schema has no
/// `type` and sets `x-kubernetes-preserve-unknown-fields: true`, like Kubernetes' `apiextensionsv1.JSON`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(transparent)]
pub struct AnyJson(pub serde_json::Value);

impl JsonSchema for AnyJson {
    fn schema_name() -> Cow<'static, str> {
        "AnyJson".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "x-kubernetes-preserve-unknown-fields": true,
        })
    }
}

/// Regular expressions and limits shared by several schemas (they mirror the Kubernetes name rules).
pub(crate) mod patterns {
    /// A DNS-1123 subdomain (object names), at most 253 characters.
    pub const DNS_SUBDOMAIN: &str =
        r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
    /// A DNS-1123 label (namespace names), at most 63 characters.
    pub const DNS_LABEL: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";
    /// A Secret / ConfigMap data key.
    pub const SECRET_KEY: &str = r"^[-._a-zA-Z0-9]+$";
    /// A sync-window schedule: a cron descriptor, `@every <duration>` or a 5-field cron expression.
    pub const SCHEDULE: &str = r"^(@(annually|yearly|monthly|weekly|daily|midnight|hourly)|@every [^\s]+.*|[^\s]+( [^\s]+){4})$";
}

/// schemars transform for enum types: drops the type-level description so that the description of
/// the field using the enum is kept in the CRD (kube's `Option<Enum>` rewrite would otherwise
/// replace the field's description with the enum's).
pub(crate) fn drop_description(schema: &mut Schema) {
    if let Some(obj) = schema.as_object_mut() {
        obj.remove("description");
    }
}
