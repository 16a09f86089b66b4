//! Go's `encoding/json` for template values: `json.Marshal` (sorted map keys,
//! HTML escaping, Go float formatting, `[]byte` as base64), `MarshalIndent`, the
//! non-HTML-escaping encoder of `toRawJson`, and `json.Unmarshal` into
//! `interface{}` (numbers become `float64`).

use crate::fmt::format_float;
use crate::value::Value;

use super::objects;

/// A marshal failure, with Go's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarshalError(pub String);

struct Enc {
    out: String,
    escape_html: bool,
    indent: Option<&'static str>,
    depth: usize,
}

fn float_json(f: f64, bits: u32) -> Result<String, MarshalError> {
    if f.is_nan() || f.is_infinite() {
        return Err(MarshalError(format!(
            "json: unsupported value: {}",
            format_float(f, 'g', -1, bits)
        )));
    }
    let abs = f.abs();
    let mut fmtc = 'f';
    if abs != 0.0 {
        let (lo, hi) = if bits == 32 {
            ((abs as f32) < 1e-6, (abs as f32) >= 1e21)
        } else {
            (abs < 1e-6, abs >= 1e21)
        };
        if lo || hi {
            fmtc = 'e';
        }
    }
    let mut s = format_float(f, fmtc, -1, bits);
    if fmtc == 'e' {
        let b = s.as_bytes();
        let n = b.len();
        if n >= 4 && b[n - 4] == b'e' && b[n - 3] == b'-' && b[n - 2] == b'0' {
            let last = b[n - 1];
            s.truncate(n - 2);
            s.push(char::from(last));
        }
    }
    Ok(s)
}

/// Appends a JSON string literal the way `encoding/json` writes it.
pub fn write_string(out: &mut String, s: &str, escape_html: bool) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' if escape_html => out.push_str(&format!("\\u{:04x}", c as u32)),
            '\u{2028}' | '\u{2029}' => out.push_str(&format!("\\u{:04x}", c as u32)),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

impl Enc {
    fn newline(&mut self) {
        if let Some(ind) = self.indent {
            self.out.push('\n');
            for _ in 0..self.depth {
                self.out.push_str(ind);
            }
        }
    }

    fn colon(&mut self) {
        self.out.push(':');
        if self.indent.is_some() {
            self.out.push(' ');
        }
    }

    fn seq<I: Iterator<Item = Value>>(&mut self, items: I, len: usize) -> Result<(), MarshalError> {
        self.out.push('[');
        if len == 0 {
            self.out.push(']');
            return Ok(());
        }
        self.depth += 1;
        for (i, v) in items.enumerate() {
            if i > 0 {
                self.out.push(',');
            }
            self.newline();
            self.value(&v)?;
        }
        self.depth -= 1;
        self.newline();
        self.out.push(']');
        Ok(())
    }

    fn object(&mut self, entries: Vec<(String, Value)>) -> Result<(), MarshalError> {
        self.out.push('{');
        if entries.is_empty() {
            self.out.push('}');
            return Ok(());
        }
        self.depth += 1;
        for (i, (k, v)) in entries.iter().enumerate() {
            if i > 0 {
                self.out.push(',');
            }
            self.newline();
            write_string(&mut self.out, k, self.escape_html);
            self.colon();
            self.value(v)?;
        }
        self.depth -= 1;
        self.newline();
        self.out.push('}');
        Ok(())
    }

    fn value(&mut self, v: &Value) -> Result<(), MarshalError> {
        if self.depth > 1000 {
            return Err(MarshalError(
                "json: unsupported value: encountered a cycle".into(),
            ));
        }
        match v {
            Value::Nil => self.out.push_str("null"),
            Value::Bool(b) => self.out.push_str(if *b { "true" } else { "false" }),
            Value::Int(i) | Value::Int64(i) | Value::Duration(i) => {
                self.out.push_str(&i.to_string())
            }
            Value::Int8(i) => self.out.push_str(&i.to_string()),
            Value::Int16(i) => self.out.push_str(&i.to_string()),
            Value::Int32(i) => self.out.push_str(&i.to_string()),
            Value::Uint(u) | Value::Uint64(u) => self.out.push_str(&u.to_string()),
            Value::Uint8(u) => self.out.push_str(&u.to_string()),
            Value::Uint16(u) => self.out.push_str(&u.to_string()),
            Value::Uint32(u) => self.out.push_str(&u.to_string()),
            Value::Float32(f) => {
                let s = float_json(f64::from(*f), 32)?;
                self.out.push_str(&s);
            }
            Value::Float64(f) => {
                let s = float_json(*f, 64)?;
                self.out.push_str(&s);
            }
            Value::Complex128(..) => {
                return Err(MarshalError("json: unsupported type: complex128".into()));
            }
            Value::String(s) => write_string(&mut self.out, s, self.escape_html),
            Value::BinaryString(b) => {
                write_string(&mut self.out, &String::from_utf8_lossy(b), self.escape_html)
            }
            Value::Bytes(b) => {
                self.out.push('"');
                self.out.push_str(&super::encoding::b64_encode(b));
                self.out.push('"');
            }
            Value::List(l) => self.seq(l.iter().cloned(), l.len())?,
            Value::Slice(s) if s.nil => self.out.push_str("null"),
            Value::Slice(s) => self.seq(s.items.iter().cloned(), s.items.len())?,
            Value::Map(m) => self.object(m.entries())?,
            Value::StringMap(m) => self.object(
                m.iter()
                    .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                    .collect(),
            )?,
            Value::Object(o) => match objects::to_json(o.as_ref()) {
                Some(objects::JsonForm::Raw(s)) => self.out.push_str(&s),
                Some(objects::JsonForm::Value(v)) => self.value(&v)?,
                None => {
                    return Err(MarshalError(format!(
                        "json: unsupported type: {}",
                        o.type_name()
                    )));
                }
            },
            Value::Func(_) => {
                return Err(MarshalError(
                    "json: unsupported type: func(...interface {}) (interface {}, error)".into(),
                ));
            }
        }
        Ok(())
    }
}

/// `json.Marshal`.
pub fn marshal(v: &Value) -> Result<String, MarshalError> {
    let mut e = Enc {
        out: String::new(),
        escape_html: true,
        indent: None,
        depth: 0,
    };
    e.value(v)?;
    Ok(e.out)
}

/// `json.MarshalIndent(v, "", "  ")`.
pub fn marshal_indent(v: &Value) -> Result<String, MarshalError> {
    let mut e = Enc {
        out: String::new(),
        escape_html: true,
        indent: Some("  "),
        depth: 0,
    };
    e.value(v)?;
    Ok(e.out)
}

/// An `Encoder` with `SetEscapeHTML(false)`, trailing newline trimmed.
pub fn marshal_raw(v: &Value) -> Result<String, MarshalError> {
    let mut e = Enc {
        out: String::new(),
        escape_html: false,
        indent: None,
        depth: 0,
    };
    e.value(v)?;
    Ok(e.out)
}

/// `json.Unmarshal` into `interface{}`; `Err` carries Go-like message text.
pub fn unmarshal(s: &str) -> Result<Value, String> {
    match serde_json::from_str::<serde_json::Value>(s) {
        Ok(v) => Ok(crate::value::from_json(&v)),
        Err(e) => Err(go_json_error(&e, s)),
    }
}

fn go_json_error(e: &serde_json::Error, s: &str) -> String {
    if s.trim().is_empty() {
        return "unexpected end of JSON input".to_string();
    }
    match e.classify() {
        serde_json::error::Category::Eof => "unexpected end of JSON input".to_string(),
        _ => format!("invalid character in JSON input: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn marshal_go_style() {
        assert_eq!(marshal(&Value::Float64(1.5)).unwrap(), "1.5");
        assert_eq!(marshal(&Value::Float64(1e6)).unwrap(), "1000000");
        assert_eq!(marshal(&Value::Float64(1e21)).unwrap(), "1e+21");
        assert_eq!(marshal(&Value::Float64(1e-7)).unwrap(), "1e-7");
        assert_eq!(marshal(&Value::Float64(0.000001)).unwrap(), "0.000001");
        assert!(marshal(&Value::Float64(f64::NAN)).is_err());
        assert_eq!(
            marshal(&Value::str("é✓\u{2028}<&>")).unwrap(),
            "\"é✓\\u2028\\u003c\\u0026\\u003e\""
        );
        assert_eq!(marshal_raw(&Value::str("<&>")).unwrap(), "\"<&>\"");
        assert_eq!(
            marshal(&Value::str("a\"b\\c\n\u{1}")).unwrap(),
            "\"a\\\"b\\\\c\\n\\u0001\""
        );
        let l = Value::list(vec![
            Value::Int(1),
            Value::Float64(2.5),
            Value::Bool(true),
            Value::Nil,
        ]);
        assert_eq!(marshal(&l).unwrap(), "[1,2.5,true,null]");
        let mut m = BTreeMap::new();
        m.insert(
            "b".to_string(),
            Value::list(vec![Value::Int(1), Value::Int(2)]),
        );
        m.insert("a".to_string(), Value::Int(1));
        m.insert("c".to_string(), Value::map(BTreeMap::new()));
        let m = Value::map(m);
        assert_eq!(marshal(&m).unwrap(), r#"{"a":1,"b":[1,2],"c":{}}"#);
        assert_eq!(
            marshal_indent(&m).unwrap(),
            "{\n  \"a\": 1,\n  \"b\": [\n    1,\n    2\n  ],\n  \"c\": {}\n}"
        );
        assert_eq!(marshal(&Value::bytes(b"hi".to_vec())).unwrap(), "\"aGk=\"");
    }

    #[test]
    fn unmarshal_numbers_are_float64() {
        assert!(matches!(unmarshal("1").unwrap(), Value::Float64(f) if f == 1.0));
        assert!(
            matches!(unmarshal("9007199254740993").unwrap(), Value::Float64(f) if f == 9007199254740992.0)
        );
        assert!(unmarshal("{bad").is_err());
        assert!(unmarshal("{} x").is_err());
        assert!(matches!(unmarshal("null").unwrap(), Value::Nil));
    }
}
