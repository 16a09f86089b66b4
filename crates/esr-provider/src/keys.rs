//! Key conversion and Go-compatible JSON helpers shared by providers.
//!
//! ESO builds many values with Go's `encoding/json` (`esutils.JSONMarshal`: HTML escaping off, map
//! keys sorted, trailing newline trimmed). The byte-exact output matters because it lands in Secrets
//! and in the data-hash annotation, so these helpers reproduce it.

use std::collections::BTreeMap;

use crate::error::ProviderError;
use crate::request::ConversionStrategy;

/// ESO's `ConvertKeys`: rewrites every key character that is not a letter, a number, `-`, `.` or `_`.
/// Errors with `secret name collision during conversion: K` when two keys end up equal.
pub fn convert_keys<V>(
    strategy: ConversionStrategy,
    input: impl IntoIterator<Item = (String, V)>,
) -> Result<BTreeMap<String, V>, ProviderError> {
    let mut out = BTreeMap::new();
    for (k, v) in input {
        let key = convert_key(strategy, &k);
        if out.contains_key(&key) {
            return Err(ProviderError::invalid(format!(
                "secret name collision during conversion: {key}"
            )));
        }
        out.insert(key, v);
    }
    Ok(out)
}

/// Converts one key (see [`convert_keys`]).
pub fn convert_key(strategy: ConversionStrategy, key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for c in key.chars() {
        if c.is_alphabetic() || c.is_numeric() || c == '-' || c == '.' || c == '_' {
            out.push(c);
        } else {
            match strategy {
                ConversionStrategy::Default => out.push('_'),
                ConversionStrategy::Unicode => out.push_str(&format!("_U{:04x}_", c as u32)),
            }
        }
    }
    out
}

/// Go `json.Marshal` of a `map[string]string` built from byte values (`string(bytes)`), as ESO's
/// `JSONMarshal` prints it: keys sorted, HTML not escaped, invalid UTF-8 replaced by `\ufffd`.
pub fn go_json_string_map<K, V>(map: &BTreeMap<K, V>) -> Vec<u8>
where
    K: AsRef<str> + Ord,
    V: AsRef<[u8]>,
{
    let mut out = String::from("{");
    for (i, (k, v)) in map.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        go_json_string(&mut out, k.as_ref().as_bytes());
        out.push(':');
        go_json_string(&mut out, v.as_ref());
    }
    out.push('}');
    out.into_bytes()
}

/// Go `json.Marshal` of an optional `map[string]string` (`null` for a nil map).
pub fn go_json_opt_string_map(map: Option<&BTreeMap<String, String>>) -> Vec<u8> {
    match map {
        None => b"null".to_vec(),
        Some(m) => go_json_string_map(m),
    }
}

/// Appends a Go-encoded JSON string (with `SetEscapeHTML(false)`).
pub fn go_json_string(out: &mut String, bytes: &[u8]) {
    out.push('"');
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '\u{8}' => out.push_str("\\b"),
                '\u{c}' => out.push_str("\\f"),
                '\u{2028}' => out.push_str("\\u2028"),
                '\u{2029}' => out.push_str("\\u2029"),
                c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                c => out.push(c),
            }
        }
        if !chunk.invalid().is_empty() {
            out.push_str("\\ufffd");
        }
    }
    out.push('"');
}

/// Go's `json.Marshal` of a value obtained by `json.Unmarshal` into `any`: objects with sorted keys,
/// every number as a float64 (Go formatting), HTML not escaped.
pub fn go_json_marshal_any(value: &serde_json::Value) -> Vec<u8> {
    let mut out = String::new();
    write_go_any(&mut out, value);
    out.into_bytes()
}

fn write_go_any(out: &mut String, value: &serde_json::Value) {
    match value {
        serde_json::Value::Null => out.push_str("null"),
        serde_json::Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        serde_json::Value::Number(n) => out.push_str(&go_format_float(n.as_f64().unwrap_or(0.0))),
        serde_json::Value::String(s) => go_json_string(out, s.as_bytes()),
        serde_json::Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_go_any(out, item);
            }
            out.push(']');
        }
        serde_json::Value::Object(map) => {
            let sorted: BTreeMap<&String, &serde_json::Value> = map.iter().collect();
            out.push('{');
            for (i, (k, v)) in sorted.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                go_json_string(out, k.as_bytes());
                out.push(':');
                write_go_any(out, v);
            }
            out.push('}');
        }
    }
}

/// Formats a float64 as Go's `encoding/json` does (`'f'` format between 1e-6 and 1e21, else `'e'`
/// with a two-digit-minimum-free exponent, e.g. `1e+21`, `1e-7`).
pub fn go_format_float(f: f64) -> String {
    if !f.is_finite() {
        return "null".to_string();
    }
    let abs = f.abs();
    if abs == 0.0 || (1e-6..1e21).contains(&abs) {
        // Rust's Display is the shortest round-trip representation without exponent.
        return format!("{f}");
    }
    let s = format!("{f:e}");
    // Rust prints `1e21` / `1.5e-7`; Go prints `1e+21` / `1.5e-07` is cleaned to `1.5e-7`.
    match s.split_once('e') {
        Some((mantissa, exp)) if !exp.starts_with('-') => format!("{mantissa}e+{exp}"),
        _ => s,
    }
}

/// ESO's `GetSecretMap` decoding of a JSON object (AWS, Fake, ...): string values are unquoted, every
/// other value is kept as its raw JSON text. Errors (without echoing the input) if the data is not a
/// JSON object.
pub fn json_object_to_map(data: &[u8]) -> Result<BTreeMap<String, Vec<u8>>, ProviderError> {
    // Validate first, like Go's json.Unmarshal into map[string]json.RawMessage.
    serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(data)
        .map_err(|e| ProviderError::invalid(json_error_text(&e)))?;
    let text = std::str::from_utf8(data).map_err(|_| ProviderError::invalid("invalid UTF-8"))?;
    let doc = gjson::parse(text);
    let mut out = BTreeMap::new();
    // Duplicate keys: the last one wins, as in Go.
    doc.each(|k, v| {
        let raw = match v.kind() {
            gjson::Kind::String => v.str().as_bytes().to_vec(),
            _ => v.json().as_bytes().to_vec(),
        };
        out.insert(k.str().to_string(), raw);
        true
    });
    Ok(out)
}

/// A JSON error description that never contains the input. serde's "invalid type/value" messages
/// quote the offending value (which may be a secret), so those are reduced to their position;
/// syntax, EOF and field-name errors (unknown / missing field) are kept.
pub fn json_error_text(e: &serde_json::Error) -> String {
    use serde_json::error::Category;
    let at = format!("at line {} column {}", e.line(), e.column());
    match e.classify() {
        Category::Eof => format!("unexpected end of JSON input {at}"),
        Category::Syntax => format!("invalid JSON {at}"),
        Category::Io => "I/O error while reading JSON".to_string(),
        Category::Data => {
            let msg = e.to_string();
            if msg.starts_with("invalid type")
                || msg.starts_with("invalid value")
                || msg.contains('"')
            {
                let expected = msg
                    .split_once(", expected ")
                    .map(|(_, rest)| rest.split(" at line ").next().unwrap_or(rest).to_string());
                match expected {
                    Some(exp) if !exp.contains('"') => {
                        format!("invalid type or value {at}, expected {exp}")
                    }
                    _ => format!("invalid type or value {at}"),
                }
            } else {
                msg
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn convert_default_and_unicode() {
        assert_eq!(
            convert_key(ConversionStrategy::Default, "a/b c.d-e_f"),
            "a_b_c.d-e_f"
        );
        assert_eq!(convert_key(ConversionStrategy::Unicode, "a/b"), "a_U002f_b");
        assert_eq!(convert_key(ConversionStrategy::Unicode, "x😀"), "x_U1f600_");
        assert_eq!(convert_key(ConversionStrategy::Default, "héllo"), "héllo");
    }

    #[test]
    fn convert_collision_is_an_error() {
        let r = convert_keys(
            ConversionStrategy::Default,
            vec![("a/b".to_string(), 1), ("a_b".to_string(), 2)],
        );
        assert_eq!(
            r.map_err(|e| e.to_string()),
            Err("secret name collision during conversion: a_b".to_string())
        );
    }

    #[test]
    fn go_json_map_matches_go() {
        let mut m = BTreeMap::new();
        m.insert("b".to_string(), b"x<y>&\"z\"\n".to_vec());
        m.insert("a".to_string(), vec![0xff, b'o', 0x01]);
        m.insert("c".to_string(), "\u{2028}".as_bytes().to_vec());
        assert_eq!(
            String::from_utf8(go_json_string_map(&m)).unwrap_or_default(),
            r#"{"a":"\ufffdo\u0001","b":"x<y>&\"z\"\n","c":"\u2028"}"#
        );
        assert_eq!(go_json_opt_string_map(None), b"null".to_vec());
    }

    #[test]
    fn go_float_format() {
        assert_eq!(go_format_float(1.0), "1");
        assert_eq!(go_format_float(1.5), "1.5");
        assert_eq!(go_format_float(-0.25), "-0.25");
        assert_eq!(go_format_float(1e21), "1e+21");
        assert_eq!(go_format_float(1e-7), "1e-7");
        assert_eq!(go_format_float(123456789.0), "123456789");
    }

    #[test]
    fn marshal_any_sorts_and_uses_float64() {
        let v: serde_json::Value =
            serde_json::from_str(r#"{"z":1.0,"a":[true,null,"s"],"m":{"y":2,"b":"<"}}"#)
                .unwrap_or_default();
        assert_eq!(
            String::from_utf8(go_json_marshal_any(&v)).unwrap_or_default(),
            r#"{"a":[true,null,"s"],"m":{"b":"<","y":2},"z":1}"#
        );
    }

    #[test]
    fn json_object_to_map_unquotes_strings_keeps_raw_json() {
        let m = json_object_to_map(br#"{"s":"v\"q","n":1.50,"o":{"a": 1},"b":true,"nul":null}"#)
            .unwrap_or_default();
        assert_eq!(m.get("s").map(|v| v.as_slice()), Some(&b"v\"q"[..]));
        assert_eq!(m.get("n").map(|v| v.as_slice()), Some(&b"1.50"[..]));
        assert_eq!(m.get("o").map(|v| v.as_slice()), Some(&b"{\"a\": 1}"[..]));
        assert_eq!(m.get("b").map(|v| v.as_slice()), Some(&b"true"[..]));
        assert_eq!(m.get("nul").map(|v| v.as_slice()), Some(&b"null"[..]));
    }

    #[test]
    fn json_object_to_map_rejects_non_objects_without_echoing_input() {
        let e = json_object_to_map(b"supersecret")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(!e.is_empty());
        assert!(!e.contains("supersecret"), "{e}");
        assert!(json_object_to_map(b"[1,2]").is_err());
        for input in [
            &b"\"supersecret\""[..],
            b"123456789",
            b"[\"supersecret\"]",
            b"{\"a\": supersecret}",
        ] {
            let e = json_object_to_map(input)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(!e.is_empty());
            assert!(
                !e.contains("supersecret") && !e.contains("123456789"),
                "{e}"
            );
        }
        assert!(json_object_to_map(b"\"str\"").is_err());
    }

    proptest::proptest! {
        #[test]
        fn go_json_string_round_trips(s in "\\PC*|[\\x00-\\x1f\"\\\\\u{2028}\u{2029}<>&]*") {
            let mut out = String::new();
            go_json_string(&mut out, s.as_bytes());
            let back: String = serde_json::from_str(&out).unwrap_or_default();
            proptest::prop_assert_eq!(back, s);
        }

        #[test]
        fn go_json_string_is_valid_json_for_any_bytes(b in proptest::collection::vec(proptest::num::u8::ANY, 0..64)) {
            let mut out = String::new();
            go_json_string(&mut out, &b);
            proptest::prop_assert!(serde_json::from_str::<String>(&out).is_ok());
        }

        #[test]
        fn converted_keys_are_valid_secret_keys(k in "\\PC{1,20}") {
            let c = convert_key(ConversionStrategy::Default, &k);
            proptest::prop_assert!(c.chars().all(|ch| ch.is_alphanumeric() || ch == '-' || ch == '.' || ch == '_'));
            let u = convert_key(ConversionStrategy::Unicode, &k);
            proptest::prop_assert!(u.chars().all(|ch| ch.is_alphanumeric() || ch == '-' || ch == '.' || ch == '_'));
        }
    }
}
