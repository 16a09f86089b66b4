//! A YAML writer for JSON values whose output reads the same under YAML 1.1 (kubectl's
//! sigs.k8s.io/yaml, go-yaml v2) and YAML 1.2: a string is written plain only when it cannot be
//! taken for anything else (`yes`, `on`, `1e3`, `0x1f`, `~`, ... are quoted), multi-line strings
//! become literal blocks, and every other string is a JSON (double-quoted) scalar.

use serde_json::Value;

/// Writes one document (without the `---` separator).
pub fn to_string(v: &Value) -> String {
    let mut out = String::new();
    match v {
        Value::Object(m) if !m.is_empty() => write_map(&mut out, m, 0),
        Value::Array(a) if !a.is_empty() => write_seq(&mut out, a, 0),
        other => {
            out.push_str(&scalar(other, 0));
            out.push('\n');
        }
    }
    out
}

fn indent(out: &mut String, n: usize) {
    out.extend(std::iter::repeat_n(' ', n));
}

fn write_map(out: &mut String, m: &serde_json::Map<String, Value>, ind: usize) {
    for (k, v) in m {
        indent(out, ind);
        out.push_str(&key(k));
        out.push(':');
        write_value_after_key(out, v, ind);
    }
}

fn write_value_after_key(out: &mut String, v: &Value, ind: usize) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            out.push('\n');
            write_map(out, m, ind + 2);
        }
        // Sequences under a key are not indented further (kubectl's style).
        Value::Array(a) if !a.is_empty() => {
            out.push('\n');
            write_seq(out, a, ind);
        }
        other => {
            out.push(' ');
            out.push_str(&scalar(other, ind + 2));
            out.push('\n');
        }
    }
}

fn write_seq(out: &mut String, a: &[Value], ind: usize) {
    for v in a {
        indent(out, ind);
        out.push('-');
        match v {
            Value::Object(m) if !m.is_empty() => {
                // The first entry goes on the dash line.
                let mut first = true;
                for (k, val) in m {
                    if first {
                        out.push(' ');
                        first = false;
                    } else {
                        indent(out, ind + 2);
                    }
                    out.push_str(&key(k));
                    out.push(':');
                    write_value_after_key(out, val, ind + 2);
                }
            }
            Value::Array(inner) if !inner.is_empty() => {
                out.push('\n');
                write_seq(out, inner, ind + 2);
            }
            other => {
                out.push(' ');
                out.push_str(&scalar(other, ind + 2));
                out.push('\n');
            }
        }
    }
}

fn key(k: &str) -> String {
    if is_plain_safe(k) {
        k.to_string()
    } else {
        json_quote(k)
    }
}

fn scalar(v: &Value, block_indent: usize) -> String {
    match v {
        Value::Null => "null".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => string(s, block_indent),
        Value::Object(_) => "{}".to_string(),
        Value::Array(_) => "[]".to_string(),
    }
}

fn json_quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("{s:?}"))
}

fn string(s: &str, block_indent: usize) -> String {
    if is_plain_safe(s) {
        return s.to_string();
    }
    if s.contains('\n') && block_ok(s) {
        let trailing = s.len() - s.trim_end_matches('\n').len();
        let chomp = match trailing {
            0 => "-",
            1 => "",
            _ => "+",
        };
        let mut out = format!("|{chomp}\n");
        let body = if trailing >= 1 { &s[..s.len() - 1] } else { s };
        let lines: Vec<&str> = body.split('\n').collect();
        let last = lines.len().saturating_sub(1);
        for (i, line) in lines.iter().enumerate() {
            if !line.is_empty() {
                indent(&mut out, block_indent);
                out.push_str(line);
            }
            if i != last {
                out.push('\n');
            }
        }
        return out;
    }
    json_quote(s)
}

/// A literal block keeps the text exactly if no line starts with a space on the first line (that
/// would need an indentation indicator), there are no control characters but newlines and tabs,
/// and no line has trailing spaces before a newline-only tail.
fn block_ok(s: &str) -> bool {
    !s.starts_with(' ')
        && !s.starts_with('\n')
        && s.chars().all(|c| c == '\n' || c == '\t' || !c.is_control())
        && !s.contains('\u{feff}')
        && !s.lines().any(|l| l.ends_with(' ') || l.ends_with('\t'))
}

/// True if `s` can be written as a plain scalar and still read back as the same string in YAML
/// 1.1 and 1.2.
fn is_plain_safe(s: &str) -> bool {
    let Some(first) = s.chars().next() else {
        return false;
    };
    if !(first.is_ascii_alphabetic() || first == '/' || first == '_' || first == '.') {
        return false;
    }
    if !s
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-".contains(c) || c == ' ')
    {
        return false;
    }
    if s.ends_with(' ') || s.contains("  ") {
        return false;
    }
    let lower = s.to_ascii_lowercase();
    const SPECIAL: &[&str] = &[
        "y", "n", "yes", "no", "on", "off", "true", "false", "null", "nan", ".nan", ".inf",
        "-.inf", "+.inf", ".inf",
    ];
    if SPECIAL.contains(&lower.as_str()) {
        return false;
    }
    // Numbers such as `.5` or `1_000` start with a digit or dot; `.x` with a digit after the dot
    // could be a float.
    if first == '.' && s.chars().nth(1).is_some_and(|c| c.is_ascii_digit()) {
        return false;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ambiguous_strings_are_quoted_and_round_trip() {
        let v = json!({
            "a": "yes", "b": "on", "c": "N", "d": "5", "e": "1e3", "f": "~", "g": "", "h": "plain text",
            "i": "{{ .x }}", "j": "line1\nline2\n", "k": "no newline\nend", "l": "two\n\n",
            "m": " lead\nx", "n": "true", "o": ".5", "p": "kubernetes.io/tls", "q": "a: b", "r": "#c",
            "s": [{"x": 1, "y": [1, 2]}, "z", [true]], "t": {}, "u": [], "v": null, "w": 1.5,
            "x": "trailing \nspace", "yy": "tab\tin", "z": ".dockerconfigjson"
        });
        let text = to_string(&v);
        let back: Value = yaml_serde::from_str(&text).unwrap();
        assert_eq!(back, v, "{text}");
        for quoted in [
            "a: \"yes\"",
            "b: \"on\"",
            "c: \"N\"",
            "d: \"5\"",
            "\"n\": \"true\"",
        ] {
            assert!(text.contains(quoted), "{quoted} in {text}");
        }
        assert!(text.contains("j: |\n  line1\n  line2\n"), "{text}");
        assert!(text.contains("z: .dockerconfigjson\n"), "{text}");
    }
}
