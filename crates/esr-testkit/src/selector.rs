//! Label selectors (equality and set based) and field selectors, parsed like `k8s.io/apimachinery/pkg/labels`.

use serde_json::Value;

use crate::error::ApiError;

/// One label requirement.
#[derive(Debug, Clone, PartialEq)]
pub enum Req {
    /// `key` exists.
    Exists(String),
    /// `!key`.
    NotExists(String),
    /// `key=v`, `key==v`, `key in (a,b)`.
    In(String, Vec<String>),
    /// `key!=v`, `key notin (a,b)`.
    NotIn(String, Vec<String>),
    /// `key>n`.
    Gt(String, i64),
    /// `key<n`.
    Lt(String, i64),
}

/// A parsed label selector (all requirements must hold).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector(pub Vec<Req>);

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Open,
    Close,
    Comma,
    Not,
    Eq,
    DoubleEq,
    NotEq,
    In,
    NotInOp,
    Gt,
    Lt,
    End,
}

impl Tok {
    fn lit(&self) -> String {
        match self {
            Tok::Ident(s) => s.clone(),
            Tok::Open => "(".into(),
            Tok::Close => ")".into(),
            Tok::Comma => ",".into(),
            Tok::Not => "!".into(),
            Tok::Eq => "=".into(),
            Tok::DoubleEq => "==".into(),
            Tok::NotEq => "!=".into(),
            Tok::In => "in".into(),
            Tok::NotInOp => "notin".into(),
            Tok::Gt => ">".into(),
            Tok::Lt => "<".into(),
            Tok::End => String::new(),
        }
    }
}

fn lex(s: &str) -> Vec<Tok> {
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    let mut out = vec![];
    while i < chars.len() {
        let c = chars[i];
        match c {
            ' ' | '\t' | '\n' | '\r' => i += 1,
            '(' => {
                out.push(Tok::Open);
                i += 1
            }
            ')' => {
                out.push(Tok::Close);
                i += 1
            }
            ',' => {
                out.push(Tok::Comma);
                i += 1
            }
            '!' if chars.get(i + 1) == Some(&'=') => {
                out.push(Tok::NotEq);
                i += 2
            }
            '!' => {
                out.push(Tok::Not);
                i += 1
            }
            '=' if chars.get(i + 1) == Some(&'=') => {
                out.push(Tok::DoubleEq);
                i += 2
            }
            '=' => {
                out.push(Tok::Eq);
                i += 1
            }
            '>' => {
                out.push(Tok::Gt);
                i += 1
            }
            '<' => {
                out.push(Tok::Lt);
                i += 1
            }
            _ => {
                let start = i;
                while i < chars.len() && !" \t\n\r(),!=<>".contains(chars[i]) {
                    i += 1;
                }
                let w: String = chars[start..i].iter().collect();
                out.push(match w.as_str() {
                    "in" => Tok::In,
                    "notin" => Tok::NotInOp,
                    _ => Tok::Ident(w),
                });
            }
        }
    }
    out.push(Tok::End);
    out
}

fn perr(msg: String) -> ApiError {
    ApiError::bad_request(format!("unable to parse requirement: {msg}"))
}

impl LabelSelector {
    /// Parse; errors are 400 BadRequest with the apiserver's text.
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        let toks = lex(s);
        let mut p = 0usize;
        let mut reqs = vec![];
        if toks.len() == 1 {
            return Ok(Self(reqs));
        }
        loop {
            // requirement
            let mut negate = false;
            if toks[p] == Tok::Not {
                negate = true;
                p += 1;
            }
            let key = match &toks[p] {
                Tok::Ident(k) => k.clone(),
                t => return Err(perr(format!("found '{}', expected: identifier", t.lit()))),
            };
            validate_key(&key)?;
            p += 1;
            if negate {
                match toks[p] {
                    Tok::Comma | Tok::End => {
                        reqs.push(Req::NotExists(key));
                    }
                    ref t => {
                        return Err(perr(format!(
                            "found '{}', expected: ',' or 'end of string'",
                            t.lit()
                        )));
                    }
                }
            } else {
                match toks[p].clone() {
                    Tok::Comma | Tok::End => reqs.push(Req::Exists(key)),
                    Tok::Eq | Tok::DoubleEq | Tok::NotEq => {
                        let op = toks[p].clone();
                        p += 1;
                        let val = match &toks[p] {
                            Tok::Ident(v) => {
                                p += 1;
                                v.clone()
                            }
                            Tok::Comma | Tok::End => String::new(),
                            t => {
                                return Err(perr(format!(
                                    "found '{}', expected: identifier",
                                    t.lit()
                                )));
                            }
                        };
                        validate_value(&val)?;
                        reqs.push(if op == Tok::NotEq {
                            Req::NotIn(key, vec![val])
                        } else {
                            Req::In(key, vec![val])
                        });
                    }
                    Tok::Gt | Tok::Lt => {
                        let op = toks[p].clone();
                        p += 1;
                        let n = match &toks[p] {
                            Tok::Ident(v) => v.parse::<i64>().map_err(|_| {
                                perr(
                                    "for 'Gt', 'Lt' operators, the value must be an integer"
                                        .to_string(),
                                )
                            })?,
                            t => {
                                return Err(perr(format!(
                                    "found '{}', expected: identifier",
                                    t.lit()
                                )));
                            }
                        };
                        p += 1;
                        reqs.push(if op == Tok::Gt {
                            Req::Gt(key, n)
                        } else {
                            Req::Lt(key, n)
                        });
                    }
                    Tok::In | Tok::NotInOp => {
                        let op = toks[p].clone();
                        p += 1;
                        if toks[p] != Tok::Open {
                            return Err(perr(format!("found '{}', expected: '('", toks[p].lit())));
                        }
                        p += 1;
                        let mut vals = vec![];
                        // values
                        loop {
                            match &toks[p] {
                                Tok::Ident(v) => {
                                    validate_value(v)?;
                                    vals.push(v.clone());
                                    p += 1;
                                    match &toks[p] {
                                        Tok::Comma => p += 1,
                                        Tok::Close => {
                                            p += 1;
                                            break;
                                        }
                                        t => {
                                            return Err(perr(format!(
                                                "found '{}', expected: ',', ')' or identifier",
                                                t.lit()
                                            )));
                                        }
                                    }
                                }
                                Tok::Close => {
                                    p += 1;
                                    break;
                                }
                                Tok::Comma => {
                                    vals.push(String::new());
                                    p += 1;
                                }
                                t => {
                                    return Err(perr(format!(
                                        "found '{}', expected: ',', ')' or identifier",
                                        t.lit()
                                    )));
                                }
                            }
                        }
                        if vals.is_empty() {
                            return Err(perr(
                                "for 'in', 'notin' operators, values set can't be empty".into(),
                            ));
                        }
                        reqs.push(if op == Tok::In {
                            Req::In(key, vals)
                        } else {
                            Req::NotIn(key, vals)
                        });
                    }
                    t => {
                        return Err(perr(format!(
                            "found '{}', expected: in, notin, =, ==, !=, gt, lt",
                            t.lit()
                        )));
                    }
                }
            }
            match &toks[p] {
                Tok::End => break,
                Tok::Comma => {
                    p += 1;
                    if toks[p] == Tok::End {
                        return Err(perr("found '', expected: identifier after ','".into()));
                    }
                }
                t => {
                    return Err(perr(format!(
                        "found '{}', expected: ',' or 'end of string'",
                        t.lit()
                    )));
                }
            }
        }
        Ok(Self(reqs))
    }

    /// Does a label map match?
    pub fn matches(&self, labels: Option<&serde_json::Map<String, Value>>) -> bool {
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            Req::Exists(k) => get(k).is_some(),
            Req::NotExists(k) => get(k).is_none(),
            Req::In(k, vs) => get(k).is_some_and(|v| vs.iter().any(|x| x == v)),
            Req::NotIn(k, vs) => get(k).is_none_or(|v| !vs.iter().any(|x| x == v)),
            Req::Gt(k, n) => get(k)
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v > *n),
            Req::Lt(k, n) => get(k)
                .and_then(|v| v.parse::<i64>().ok())
                .is_some_and(|v| v < *n),
        })
    }

    /// True when there are no requirements.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

fn validate_key(k: &str) -> Result<(), ApiError> {
    let (prefix, name) = match k.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .last()
            .is_some_and(|c| c.is_ascii_alphanumeric());
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
    });
    if name_ok && prefix_ok {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "unable to parse requirement: values[0][{k}]: Invalid value: \"{k}\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
        )))
    }
}

fn validate_value(v: &str) -> Result<(), ApiError> {
    let ok = v.is_empty()
        || (v.len() <= 63
            && v.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
            && v.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
            && v.chars().last().is_some_and(|c| c.is_ascii_alphanumeric()));
    if ok {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "unable to parse requirement: values[0][{v}]: Invalid value: \"{v}\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
        )))
    }
}

/// A parsed field selector: (path, equals?, value).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector(pub Vec<(String, bool, String)>);

impl FieldSelector {
    /// Parse `a=b,c!=d`.
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        let mut out = vec![];
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, eq, v) = if let Some((k, v)) = part.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = part.split_once("==") {
                (k, true, v)
            } else if let Some((k, v)) = part.split_once('=') {
                (k, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                )));
            };
            out.push((k.trim().to_string(), eq, v.trim().to_string()));
        }
        Ok(Self(out))
    }

    /// Does an object match?
    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(path, eq, want)| {
            let got = field_value(obj, path);
            (got == *want) == *eq
        })
    }

    /// The value required for a path by an `=` term.
    pub fn equals(&self, path: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(p, eq, _)| p == path && *eq)
            .map(|(_, _, v)| v.as_str())
    }
}

/// The string form of a field (scalars only; missing → "").
pub fn field_value(obj: &Value, path: &str) -> String {
    let mut cur = obj;
    for seg in path.split('.') {
        match cur.get(seg) {
            Some(v) => cur = v,
            None => return String::new(),
        }
    }
    match cur {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Object(o) if path == "source" => o
            .get("component")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_set_based() {
        let s = LabelSelector::parse("a in (x,y),b notin (z),c,!d,e=1,f!=2").unwrap();
        assert_eq!(s.0.len(), 6);
        let l = json!({"a": "x", "c": "", "e": "1", "f": "3"});
        assert!(s.matches(l.as_object()));
        let l2 = json!({"a": "q", "c": "", "e": "1"});
        assert!(!s.matches(l2.as_object()));
    }

    #[test]
    fn error_text_matches_apiserver() {
        let e = LabelSelector::parse("a in (").unwrap_err();
        assert_eq!(
            e.message,
            "unable to parse requirement: found '', expected: ',', ')' or identifier"
        );
        assert_eq!(e.code, 400);
    }
}
