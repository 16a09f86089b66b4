//! What a webhook answer becomes (pure): `result.jsonPath` selection, the single value of a
//! read ([`secret_value`]) and the map of `dataFrom.extract` and the generator ([`secret_map`]).
//!
//! ESO evaluates the path with a JSONPath library that returns the value itself for a path naming
//! one place (`$.a.b`, `$.items[0]`) and the list of matches for a path that can match several
//! (wildcards, filters, slices, `..`). esr does the same on `jsonpath-rust` (RFC 9535): such a
//! path yields a JSON array of its matches. Error texts name the path as written in the store
//! (the template, not its rendering) and never a value of the response.

use std::collections::BTreeMap;

use esr_provider::keys::{go_json_marshal_any, json_error_text};
use esr_provider::{ProviderError, Result};
use jsonpath_rust::JsonPath;
use jsonpath_rust::parser::model::{Segment, Selector};
use jsonpath_rust::parser::parse_json_path;
use serde_json::Value;

/// Parses a response body as JSON (`failed to parse response json: ...`).
pub fn parse_json(body: &[u8]) -> Result<Value> {
    serde_json::from_slice(body).map_err(|e| {
        ProviderError::invalid(format!(
            "failed to parse response json: {}",
            json_error_text(&e)
        ))
    })
}

/// Selects `path` (rendered) in `doc`; `shown` is the path as the error texts show it.
pub fn select(doc: &Value, path: &str, shown: &str) -> Result<Value> {
    let fail =
        |why: String| ProviderError::invalid(format!("failed to get response path {shown}: {why}"));
    let query = parse_json_path(path).map_err(|_| fail("invalid JSONPath expression".into()))?;
    let singular = query.segments.iter().all(|s| {
        matches!(
            s,
            Segment::Selector(Selector::Name(_)) | Segment::Selector(Selector::Index(_))
        )
    });
    if singular {
        let mut cur = doc;
        for seg in &query.segments {
            cur = match seg {
                Segment::Selector(Selector::Name(name)) => match cur {
                    Value::Object(m) => m
                        .get(name.as_str())
                        .ok_or_else(|| fail(format!("unknown key {name}")))?,
                    other => {
                        return Err(fail(format!(
                            "cannot select key {name} in a {}",
                            json_kind(other)
                        )));
                    }
                },
                Segment::Selector(Selector::Index(i)) => match cur {
                    Value::Array(items) => {
                        let len = i64::try_from(items.len()).unwrap_or(i64::MAX);
                        let at = if *i < 0 { len + i } else { *i };
                        usize::try_from(at)
                            .ok()
                            .and_then(|at| items.get(at))
                            .ok_or_else(|| fail(format!("index out of range: {i}")))?
                    }
                    other => {
                        return Err(fail(format!(
                            "cannot select index {i} in a {}",
                            json_kind(other)
                        )));
                    }
                },
                _ => return Err(fail("invalid JSONPath expression".into())),
            };
        }
        return Ok(cur.clone());
    }
    let found = doc
        .query(path)
        .map_err(|_| fail("invalid JSONPath expression".into()))?;
    Ok(Value::Array(found.into_iter().cloned().collect()))
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "object",
    }
}

/// Go's `%T` of a value decoded into `any`, for ESO's `wrong type` texts.
fn go_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// ESO's value of a read with a JSONPath: strings as they are, `null` empty, booleans
/// `true`/`false`, numbers rounded to an integer (Go's `FormatFloat(v, 'f', 0, 64)`), objects as
/// JSON, and a list its first element (`filter worked but didn't get any result` when empty).
pub fn extract_value(v: &Value) -> Result<Vec<u8>> {
    match v {
        Value::String(s) => Ok(s.clone().into_bytes()),
        Value::Null => Ok(Vec::new()),
        Value::Bool(b) => Ok(b.to_string().into_bytes()),
        Value::Number(n) => Ok(format!("{:.0}", n.as_f64().unwrap_or(0.0)).into_bytes()),
        Value::Array(items) => match items.first() {
            Some(first) => extract_value(first),
            None => Err(ProviderError::invalid(
                "filter worked but didn't get any result",
            )),
        },
        Value::Object(_) => Ok(go_json_marshal_any(v)),
    }
}

/// The value of a read: the body as it is without a path, else [`select`] + [`extract_value`].
pub fn secret_value(body: Vec<u8>, path: &str, shown: &str) -> Result<Vec<u8>> {
    if path.is_empty() {
        return Ok(body);
    }
    let doc = parse_json(&body)?;
    extract_value(&select(&doc, path, shown)?)
}

/// ESO's `GetByteValue` for one value of a map: strings as they are, `null` empty, numbers in
/// Go's shortest form without exponent, booleans `true`/`false`, lists and objects as JSON.
pub fn map_value(v: &Value) -> Vec<u8> {
    match v {
        Value::String(s) => s.clone().into_bytes(),
        Value::Null => Vec::new(),
        Value::Bool(b) => b.to_string().into_bytes(),
        Value::Number(n) => match n.as_f64() {
            Some(f) => format!("{f}").into_bytes(),
            None => n.to_string().into_bytes(),
        },
        other => go_json_marshal_any(other),
    }
}

/// The map of `dataFrom.extract` and the generator: the body must be JSON; the value at the path
/// (or the whole body) must be an object, or a string holding one.
pub fn secret_map(body: &[u8], path: &str, shown: &str) -> Result<BTreeMap<String, Vec<u8>>> {
    let mut doc = parse_json(body)?;
    if !path.is_empty() {
        doc = select(&doc, path, shown)?;
    }
    if let Value::String(s) = &doc {
        doc = serde_json::from_str(s).map_err(|e| {
            ProviderError::invalid(format!(
                "failed to parse response json from jsonpath: {}",
                json_error_text(&e)
            ))
        })?;
    }
    match doc {
        Value::Object(m) => Ok(m.iter().map(|(k, v)| (k.clone(), map_value(v))).collect()),
        other => Err(ProviderError::invalid(format!(
            "failed to get response (wrong type: {})",
            go_type(&other)
        ))),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use serde_json::json;

    fn doc() -> Value {
        json!({
            "args": {"parameter": "secret-value"},
            "data": {
                "fields": [
                    {"name": "user", "value": "alice"},
                    {"name": "pass", "value": "hunter2"}
                ],
                "n": 3.7, "t": true, "nil": null,
                "obj": {"b": 1, "a": "x<y"}
            },
            "list": [10, 20, 30]
        })
    }

    fn value(path: &str) -> Result<String> {
        let v = select(&doc(), path, path)?;
        extract_value(&v).map(|b| String::from_utf8(b).unwrap())
    }

    #[test]
    fn singular_paths_return_the_value() {
        assert_eq!(value("$.args.parameter").unwrap(), "secret-value");
        assert_eq!(value("$['args']['parameter']").unwrap(), "secret-value");
        assert_eq!(value("$.list[1]").unwrap(), "20");
        assert_eq!(value("$.list[-1]").unwrap(), "30");
        assert_eq!(value("$.data.t").unwrap(), "true");
        assert_eq!(value("$.data.nil").unwrap(), "");
        // Go's FormatFloat(3.7, 'f', 0, 64)
        assert_eq!(value("$.data.n").unwrap(), "4");
        assert_eq!(value("$.data.obj").unwrap(), r#"{"a":"x<y","b":1}"#);
    }

    #[test]
    fn other_paths_return_the_first_match() {
        assert_eq!(
            value(r#"$.data.fields[?@.name=="pass"].value"#).unwrap(),
            "hunter2"
        );
        assert_eq!(
            value(r#"$.data.fields[?(@.name == "user")].value"#).unwrap(),
            "alice"
        );
        assert_eq!(value("$..parameter").unwrap(), "secret-value");
        let e = value(r#"$.data.fields[?@.name=="nope"].value"#).unwrap_err();
        assert_eq!(e.to_string(), "filter worked but didn't get any result");
    }

    #[test]
    fn missing_paths_are_errors_that_name_the_path_only() {
        let e = select(&doc(), "$.args.nope", "$.args.{{ .remoteRef.property }}").unwrap_err();
        assert_eq!(
            e.to_string(),
            "failed to get response path $.args.{{ .remoteRef.property }}: unknown key nope"
        );
        assert!(!e.is_not_found());
        let e = value("$.list[9]").unwrap_err().to_string();
        assert!(e.ends_with("index out of range: 9"), "{e}");
        let e = value("$.args.parameter.x").unwrap_err().to_string();
        assert!(e.ends_with("cannot select key x in a string"), "{e}");
        assert!(!e.contains("secret-value"), "{e}");
        let e = value("$[?").unwrap_err().to_string();
        assert!(e.ends_with("invalid JSONPath expression"), "{e}");
    }

    #[test]
    fn a_body_that_is_not_json_is_an_error_without_its_text() {
        let e = secret_value(b"<html>hunter2</html>".to_vec(), "$.a", "$.a").unwrap_err();
        assert!(!e.is_not_found());
        let text = e.to_string();
        assert!(
            text.starts_with("failed to parse response json: "),
            "{text}"
        );
        assert!(!text.contains("hunter2"), "{text}");
        // Without a path the body is the value, whatever it is.
        assert_eq!(
            secret_value(b"raw".to_vec(), "", "").unwrap(),
            b"raw".to_vec()
        );
    }

    #[test]
    fn maps_follow_esos_get_byte_value() {
        let body = serde_json::to_vec(&doc()).unwrap();
        let m = secret_map(&body, "$.data", "$.data").unwrap();
        assert_eq!(m["n"], b"3.7");
        assert_eq!(m["t"], b"true");
        assert_eq!(m["nil"], b"");
        assert_eq!(m["obj"], br#"{"a":"x<y","b":1}"#);
        assert_eq!(
            m["fields"],
            br#"[{"name":"user","value":"alice"},{"name":"pass","value":"hunter2"}]"#
        );
        // A string holding a JSON object is parsed again.
        let body = br#"{"inner": "{\"k\": \"v\"}"}"#;
        let m = secret_map(body, "$.inner", "$.inner").unwrap();
        assert_eq!(m["k"], b"v");
        let e = secret_map(&serde_json::to_vec(&doc()).unwrap(), "$.list", "$.list")
            .unwrap_err()
            .to_string();
        assert_eq!(e, "failed to get response (wrong type: []interface {})");
        let e = secret_map(b"[1]", "", "").unwrap_err().to_string();
        assert_eq!(e, "failed to get response (wrong type: []interface {})");
        let e = secret_map(b"nope", "", "").unwrap_err();
        assert!(!e.is_not_found());
    }
}
