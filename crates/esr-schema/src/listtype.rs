//! `x-kubernetes-list-type: set|map` uniqueness (apiextensions `listtype.ValidateListSetsAndMaps`)
//! and the checks on embedded resources (`objectmeta.Validate`).

use serde_json::{Map, Value};

use crate::error::FieldError;
use crate::node::Node;

fn child(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_string()
    } else {
        format!("{parent}.{name}")
    }
}

fn key(parent: &str, k: &str) -> String {
    format!("{parent}[{k}]")
}

fn index(parent: &str, i: usize) -> String {
    format!("{parent}[{i}]")
}

/// Validates list sets and maps below the object `obj` described by `s`.
pub(crate) fn validate_object(
    path: &str,
    s: &Node,
    obj: &Map<String, Value>,
    errs: &mut Vec<FieldError>,
) {
    if let Some(ap) = s.additional_schema() {
        for (k, v) in obj {
            validate_value(&key(path, k), ap, v, errs);
        }
    }
    if !s.properties.is_empty() {
        for (k, v) in obj {
            if let Some(sub) = s.properties.get(k) {
                validate_value(&child(path, k), sub, v, errs);
            }
        }
    }
}

fn validate_value(path: &str, s: &Node, v: &Value, errs: &mut Vec<FieldError>) {
    match v {
        Value::Array(items) => validate_array(path, s, items, errs),
        Value::Object(m) => validate_object(path, s, m, errs),
        _ => {}
    }
}

/// A comparable identity for set membership: scalars compare by value (Go map keys of
/// `interface{}`), compounds by their JSON encoding.
fn identity(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            // Go's json.Marshal sorts map keys.
            let sorted: std::collections::BTreeMap<&String, &Value> = m.iter().collect();
            format!("c:{}", serde_json::to_string(&sorted).unwrap_or_default())
        }
        Value::Array(_) => format!("c:{}", serde_json::to_string(v).unwrap_or_default()),
        Value::Number(n) => match n.as_i64() {
            Some(i) => format!("i:{i}"),
            None => format!("f:{}", n.as_f64().unwrap_or(0.0)),
        },
        Value::String(s) => format!("s:{s}"),
        Value::Bool(b) => format!("b:{b}"),
        Value::Null => "n:".to_string(),
    }
}

/// Indices of the first repeated appearance of each non-unique element.
fn non_unique(ids: &[String]) -> Vec<usize> {
    let mut seen: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    let mut out = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        let count = seen.entry(id.as_str()).or_insert(0);
        *count += 1;
        if *count == 2 {
            out.push(i);
        }
    }
    out
}

fn validate_array(path: &str, s: &Node, items: &[Value], errs: &mut Vec<FieldError>) {
    match s.x_list_type.as_deref() {
        Some("set") if items.len() > 1 => {
            let ids: Vec<String> = items.iter().map(identity).collect();
            for i in non_unique(&ids) {
                errs.push(FieldError::duplicate(index(path, i), &items[i]));
            }
        }
        Some("map") => validate_list_map(path, s, items, errs),
        _ => {}
    }
    if let Some(item_schema) = &s.items {
        for (i, v) in items.iter().enumerate() {
            validate_value(&index(path, i), item_schema, v, errs);
        }
    }
}

fn validate_list_map(path: &str, s: &Node, items: &[Value], errs: &mut Vec<FieldError>) {
    for (i, x) in items.iter().enumerate() {
        if !x.is_null() && !x.is_object() {
            errs.push(FieldError::invalid(
                index(path, i),
                x,
                "must be an object for an array of list-type map",
            ));
            return;
        }
    }
    if items.len() <= 1 {
        return;
    }
    let keys: Vec<Value> = items
        .iter()
        .map(|x| {
            let mut key = Map::new();
            if let Some(obj) = x.as_object() {
                for k in &s.x_list_map_keys {
                    if let Some(v) = obj.get(k) {
                        key.insert(k.clone(), v.clone());
                    }
                }
            }
            Value::Object(key)
        })
        .collect();
    let ids: Vec<String> = if s.x_list_map_keys.len() == 1 {
        keys.iter()
            .map(|k| match k.as_object().and_then(|m| m.values().next()) {
                Some(v) => identity(v),
                None => "u:".to_string(), // unspecified key
            })
            .collect()
    } else {
        keys.iter().map(identity).collect()
    };
    for i in non_unique(&ids) {
        errs.push(FieldError::duplicate(index(path, i), &keys[i]));
    }
}

/// The checks the apiserver makes on `x-kubernetes-embedded-resource` objects (below the root):
/// `apiVersion` and `kind` must be set.
pub(crate) fn validate_embedded(
    path: &str,
    s: &Node,
    v: &Value,
    errs: &mut Vec<FieldError>,
    is_root: bool,
) {
    match v {
        Value::Object(m) => {
            if s.x_embedded_resource && !is_root {
                for f in ["apiVersion", "kind"] {
                    match m.get(f) {
                        None => {
                            errs.push(FieldError::required(child(path, f), "must not be empty"))
                        }
                        Some(Value::String(x)) if x.is_empty() => {
                            errs.push(FieldError::required(child(path, f), "must not be empty"))
                        }
                        _ => {}
                    }
                }
            }
            for (k, val) in m {
                if let Some(sub) = s.child(k) {
                    validate_embedded(&child(path, k), sub, val, errs, false);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = &s.items {
                for (i, val) in items.iter().enumerate() {
                    validate_embedded(&index(path, i), item_schema, val, errs, false);
                }
            }
        }
        _ => {}
    }
}
