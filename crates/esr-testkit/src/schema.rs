//! CRD schema handling: an adapter over `esr-schema` (validation, defaulting, pruning, structural checks).

use serde_json::Value;

/// A compiled CRD version schema.
#[derive(Debug)]
pub struct CompiledSchema {
    inner: esr_schema::Schema,
}

/// One validation failure.
#[derive(Debug, Clone)]
pub struct SchemaViolation {
    /// Field path (`spec.x`).
    pub field: String,
    /// `FieldValueInvalid`, ...
    pub reason: String,
    /// Message without the field.
    pub message: String,
}

impl CompiledSchema {
    /// Compile a schema.
    pub fn new(schema: &Value) -> Result<Self, String> {
        esr_schema::Schema::new(schema)
            .map(|inner| Self { inner })
            .map_err(|e| e.to_string())
    }

    /// Validate an object on create (`old` is `None`) or update (`old` is the stored object):
    /// the schema and its `x-kubernetes-validations` CEL rules.
    pub fn validate(&self, obj: &Value, old: Option<&Value>) -> Vec<SchemaViolation> {
        self.inner
            .validate_update(obj, old)
            .into_iter()
            .map(|e| SchemaViolation {
                field: e.path.clone(),
                reason: e.kind.reason().to_string(),
                message: e.message,
            })
            .collect()
    }

    /// Apply defaults.
    pub fn apply_defaults(&self, obj: &mut Value) {
        self.inner.apply_defaults(obj);
    }

    /// Prune unknown fields; returns the pruned paths (`spec.x`).
    pub fn prune(&self, obj: &mut Value) -> Vec<String> {
        self.inner.prune(obj)
    }
}
