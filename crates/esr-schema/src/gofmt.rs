//! Go formatting helpers, so that error texts read exactly like the kube-apiserver's.
//!
//! The apiserver builds its field errors with Go's `fmt` verbs: `%q` for strings, `%v` for
//! numbers and `%#v` for compound values. These functions reproduce those renderings for values
//! decoded from JSON.

use serde_json::Value;

/// Go's `strconv.Quote` (also `%q` and `%#v` of a string).
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if is_print(c) => out.push(c),
            c if (c as u32) < 0x80 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push('"');
    out
}

/// An approximation of Go's `unicode.IsPrint`: graphic characters and the ASCII space.
fn is_print(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    if c.is_control() || c.is_whitespace() {
        return false;
    }
    // Format characters (category Cf) that Go does not consider printable.
    !matches!(c as u32,
        0xAD | 0x600..=0x605 | 0x61C | 0x6DD | 0x70F | 0x180E | 0x200B..=0x200F | 0x202A..=0x202E
        | 0x2060..=0x2064 | 0x2066..=0x206F | 0xFEFF | 0xFFF9..=0xFFFB | 0xE000..=0xF8FF)
}

/// Go's `%v` of a `float64`: the shortest representation, in `%e` form when the decimal
/// exponent is < -4 or >= 6 (what `strconv.FormatFloat(f, 'g', -1, 64)` does).
pub fn float_v(f: f64) -> String {
    if f.is_nan() {
        return "NaN".to_string();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.to_string();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    // Rust's `{:e}` gives the shortest round-trip digits, e.g. "1.234567e6".
    let sci = format!("{f:e}");
    let (mantissa, exp) = match sci.split_once('e') {
        Some((m, e)) => (m.to_string(), e.parse::<i32>().unwrap_or(0)),
        None => (sci.clone(), 0),
    };
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    } else {
        format!("{f}")
    }
}

/// Go's `%v` of a JSON number as the apiserver decodes it (int64 when integral, else float64).
pub fn number_v(n: &serde_json::Number) -> String {
    if let Some(i) = n.as_i64() {
        i.to_string()
    } else if let Some(f) = n.as_f64() {
        float_v(f)
    } else {
        n.to_string()
    }
}

/// Go's `%#v` of a value decoded from JSON into `interface{}`.
pub fn sharp_v(v: &Value) -> String {
    match v {
        Value::Null => "interface {}(nil)".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => number_v(n),
        Value::String(s) => quote(s),
        Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(sharp_v).collect();
            format!("[]interface {{}}{{{}}}", inner.join(", "))
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let inner: Vec<String> = keys
                .iter()
                .map(|k| {
                    format!(
                        "{}:{}",
                        quote(k),
                        map.get(*k).map(sharp_v).unwrap_or_default()
                    )
                })
                .collect();
            format!("map[string]interface {{}}{{{}}}", inner.join(", "))
        }
    }
}

/// Go's `%v` of a slice of enum values as kube-openapi prints it in `should be one of [a b]`.
pub fn enum_list_v(values: &[Value]) -> String {
    let inner: Vec<String> = values.iter().map(plain_v).collect();
    format!("[{}]", inner.join(" "))
}

/// Go's `%v` of a value decoded from JSON.
pub fn plain_v(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => number_v(n),
        Value::String(s) => s.clone(),
        Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(plain_v).collect();
            format!("[{}]", inner.join(" "))
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let inner: Vec<String> = keys
                .iter()
                .map(|k| format!("{}:{}", k, map.get(*k).map(plain_v).unwrap_or_default()))
                .collect();
            format!("map[{}]", inner.join(" "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn quotes_like_go() {
        assert_eq!(quote("Foo"), "\"Foo\"");
        assert_eq!(quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(quote("tab\there\n"), "\"tab\\there\\n\"");
        assert_eq!(quote("\u{1}"), "\"\\x01\"");
        assert_eq!(quote("héllo ✓"), "\"héllo ✓\"");
        assert_eq!(quote("\u{200b}"), "\"\\u200b\"");
    }

    #[test]
    fn floats_like_go() {
        assert_eq!(float_v(1.5), "1.5");
        assert_eq!(float_v(10.0), "10");
        assert_eq!(float_v(100000.0), "100000");
        assert_eq!(float_v(1_000_000.0), "1e+06");
        assert_eq!(float_v(1_234_567.0), "1.234567e+06");
        assert_eq!(float_v(0.0001), "0.0001");
        assert_eq!(float_v(0.00001), "1e-05");
        assert_eq!(float_v(-2.25), "-2.25");
    }

    #[test]
    fn sharp_v_like_go() {
        assert_eq!(
            sharp_v(&json!({"name": "a", "b": 1})),
            "map[string]interface {}{\"b\":1, \"name\":\"a\"}"
        );
        assert_eq!(
            sharp_v(&json!(["a", 2.5, true, null])),
            "[]interface {}{\"a\", 2.5, true, interface {}(nil)}"
        );
        assert_eq!(enum_list_v(&[json!("Owner"), json!(1)]), "[Owner 1]");
    }
}
