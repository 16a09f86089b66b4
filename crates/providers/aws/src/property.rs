//! ESO's property semantics for AWS Secrets Manager payloads.
//!
//! * `property` is a gjson path; if it contains dots, the literal dotted key (dots escaped) is
//!   tried first, then the path as written (ESO `escapeDotsIfRequired`).
//! * the value is gjson's `String()`: strings unquoted, objects/arrays/numbers as raw JSON,
//!   `true`/`false`, and `""` for null.
//! * GetSecretMap: a JSON object whose string values are unquoted and other values kept as raw JSON.

use std::collections::BTreeMap;

use crate::error::AwsError;

/// Look up `property` in `payload` the way ESO does (the shared esr gjson helper: literal dotted
/// key first, values rendered like Go's `gjson.Result.String()`). `None` if it does not exist.
pub fn get_property(payload: &str, property: &str) -> Option<String> {
    esr_provider::gjson::lookup_property(payload, property)
}

/// Decode a JSON object payload into key → bytes (ESO `GetSecretMap`).
pub fn json_object_to_map(payload: &str, key: &str) -> Result<BTreeMap<String, Vec<u8>>, AwsError> {
    esr_provider::keys::json_object_to_map(payload.as_bytes()).map_err(|e| {
        AwsError::invalid(format!("unable to unmarshal secret {key}: {}", e.message()))
    })
}

/// Split a gjson/sjson path on unescaped dots, unescaping `\.`.
fn split_path(path: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut cur = String::new();
    let mut chars = path.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            '.' => parts.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    parts.push(cur);
    parts
}

/// Set `property` to the string `value` inside the JSON object `existing` (sjson `SetBytes`),
/// creating intermediate objects. Used by PushSecret with a property.
pub fn set_property(existing: &str, property: &str, value: &[u8]) -> Result<Vec<u8>, AwsError> {
    let mut root: serde_json::Value = if existing.trim().is_empty() {
        serde_json::Value::Object(serde_json::Map::new())
    } else {
        serde_json::from_str(existing).map_err(|_| {
            AwsError::invalid(
                "PushSecret for aws secrets manager with a pushSecretData property requires a json secret",
            )
        })?
    };
    let text = String::from_utf8_lossy(value).into_owned();
    let parts = split_path(property);
    let mut node = &mut root;
    for (i, part) in parts.iter().enumerate() {
        if !node.is_object() {
            *node = serde_json::Value::Object(serde_json::Map::new());
        }
        let serde_json::Value::Object(map) = node else {
            return Err(AwsError::invalid("internal error: expected a JSON object"));
        };
        if i + 1 == parts.len() {
            map.insert(part.clone(), serde_json::Value::String(text));
            break;
        }
        node = map
            .entry(part.clone())
            .or_insert_with(|| serde_json::Value::Object(serde_json::Map::new()));
    }
    serde_json::to_vec(&root).map_err(|e| AwsError::invalid(format!("cannot encode JSON: {e}")))
}

/// Remove `property` from the JSON object `existing`. Returns the new payload and whether the
/// object is now empty. `None` if the property was not there.
pub fn remove_property(existing: &str, property: &str) -> Option<(Vec<u8>, bool)> {
    let mut root: serde_json::Value = serde_json::from_str(existing).ok()?;
    let parts = split_path(property);
    let mut node = &mut root;
    for (i, part) in parts.iter().enumerate() {
        let map = node.as_object_mut()?;
        if i + 1 == parts.len() {
            map.remove(part)?;
            break;
        }
        node = map.get_mut(part)?;
    }
    let empty = root.as_object().is_some_and(|m| m.is_empty());
    serde_json::to_vec(&root).ok().map(|v| (v, empty))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = r#"{"a":{"b":"nested"},"a.b":"literal","n":1.50,"t":true,"z":null,
        "arr":[{"x":"first"},{"x":"second"}],"obj":{"k": "v"},"esc":"line\nbreak","c.d":{"e":"deep"}}"#;

    #[test]
    fn literal_dotted_key_wins() {
        assert_eq!(get_property(DOC, "a.b").as_deref(), Some("literal"));
    }

    #[test]
    fn nested_and_escaped_paths() {
        assert_eq!(get_property(DOC, "a").as_deref(), Some(r#"{"b":"nested"}"#));
        assert_eq!(get_property(DOC, "a\\.b").as_deref(), Some("literal"));
        assert_eq!(get_property(DOC, "arr.1.x").as_deref(), Some("second"));
        assert_eq!(get_property(DOC, "arr.#").as_deref(), Some("2"));
        // literal key "c.d" then .e is not a literal key: falls back to the gjson path.
        assert_eq!(get_property(DOC, "c\\.d.e").as_deref(), Some("deep"));
    }

    #[test]
    fn scalar_rendering() {
        // Go's gjson reformats non-integer numbers.
        assert_eq!(get_property(DOC, "n").as_deref(), Some("1.5"));
        assert_eq!(get_property(DOC, "t").as_deref(), Some("true"));
        assert_eq!(get_property(DOC, "z").as_deref(), Some(""));
        assert_eq!(get_property(DOC, "esc").as_deref(), Some("line\nbreak"));
        assert_eq!(get_property(DOC, "obj").as_deref(), Some(r#"{"k": "v"}"#));
        assert_eq!(get_property(DOC, "missing"), None);
    }

    #[test]
    fn map_decoding() {
        let m =
            json_object_to_map(r#"{"s":"x\"y","n":1.0,"o":{"a": [1, 2]},"b":false}"#, "k").unwrap();
        assert_eq!(m["s"], b"x\"y");
        assert_eq!(m["n"], b"1.0");
        assert_eq!(m["o"], br#"{"a": [1, 2]}"#);
        assert_eq!(m["b"], b"false");
        assert!(json_object_to_map("[1]", "k").is_err());
        assert!(json_object_to_map("nope", "k").is_err());
    }

    #[test]
    fn push_merging() {
        let v = set_property("", "user", b"alice").unwrap();
        assert_eq!(v, br#"{"user":"alice"}"#);
        let v = set_property(r#"{"user":"alice"}"#, "db.pass", b"s").unwrap();
        assert_eq!(v, br#"{"user":"alice","db":{"pass":"s"}}"#);
        let v = set_property(r#"{"a":1}"#, "x\\.y", b"1").unwrap();
        assert_eq!(v, br#"{"a":1,"x.y":"1"}"#);
        assert!(set_property("not json", "a", b"1").is_err());
        let (v, empty) = remove_property(r#"{"a":"1","b":"2"}"#, "a").unwrap();
        assert_eq!(v, br#"{"b":"2"}"#);
        assert!(!empty);
        let (_, empty) = remove_property(r#"{"a":"1"}"#, "a").unwrap();
        assert!(empty);
        assert!(remove_property(r#"{"a":"1"}"#, "q").is_none());
    }
}
