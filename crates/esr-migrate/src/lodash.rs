//! Translation of KES's lodash templates (`_.template`, default settings) into ESO v2 Go templates.
//!
//! KES renders every string under `spec.template` with lodash, the context being `data` (the
//! fetched values as plain UTF-8 strings, keyed by Secret key), `JSON`, `yaml` and `Buffer`.
//! lodash's default settings make `<%= expr %>` and `${expr}` interpolations, `<%- expr %>` an
//! HTML-escaping interpolation and `<% code %>` arbitrary JavaScript.
//!
//! Only a small, exactly translatable subset of JavaScript expressions is accepted:
//! - `data.key`, `data["key"]`, `data['key']` → `.key` / `index . "key"`;
//! - `JSON.parse(E).a.b`, `JSON.parse(E)["a-b"]` → `index (E | fromJson) "a" "b"`;
//! - `Buffer.from(E)` / `Buffer.from(E, 'utf8')` followed by `.toString('base64')` → `E | b64enc`,
//!   or by `.toString()` / `.toString('utf8')` → `E`;
//! - `Buffer.from(E, 'base64')` followed by `.toString()` / `.toString('utf8')` → `E | b64dec`, or
//!   by `.toString('base64')` → `E`;
//! - `E.toLowerCase()`, `E.toUpperCase()`, `E.trim()` → `lower`, `upper`, `trim`.
//!
//! Anything else is refused with a reason naming the expression; the caller drops that value.

use base64::Engine as _;

/// Where a translated string ends up, which decides how its rendered text is interpreted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    /// A plain value: `stringData`, labels, annotations.
    Plain,
    /// A value of the Secret's `data`: KES's rendered text is base64 that the apiserver decodes,
    /// while ESO's template output is the value itself.
    Base64Data,
}

/// Translates one lodash template string. `Err` carries the reason it cannot be translated.
pub fn translate(src: &str, ctx: Context) -> Result<String, String> {
    let segments = split(src)?;
    let has_expr = segments.iter().any(|s| matches!(s, Segment::Expr(_)));
    match ctx {
        Context::Plain => {
            let mut out = String::new();
            for seg in &segments {
                match seg {
                    Segment::Literal(l) => out.push_str(&escape_literal(l)),
                    Segment::Expr(e) => {
                        let s = parse_expr(e)?;
                        out.push_str("{{ ");
                        out.push_str(&s.top());
                        out.push_str(" }}");
                    }
                }
            }
            Ok(out)
        }
        Context::Base64Data if !has_expr => {
            let literal: String = segments
                .iter()
                .map(|s| match s {
                    Segment::Literal(l) => l.as_str(),
                    Segment::Expr(_) => "",
                })
                .collect();
            let compact: String = literal.chars().filter(|c| !c.is_whitespace()).collect();
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(compact.as_bytes())
                .map_err(|_| {
                    "the literal value is not valid base64 (Secret data must be)".to_string()
                })?;
            let text = String::from_utf8(bytes).map_err(|_| {
                "the literal value decodes to bytes that are not UTF-8, which a Go template cannot hold"
                    .to_string()
            })?;
            Ok(escape_literal(&text))
        }
        Context::Base64Data => {
            let [Segment::Expr(e)] = segments.as_slice() else {
                return Err(
                    "the value mixes literal text with expressions; in Secret data the whole rendered text is base64, which cannot be translated"
                        .to_string(),
                );
            };
            let s = parse_expr(e)?;
            let go = match s {
                GoStr::Pipe(inner, "b64enc") => inner.top(),
                other => GoStr::Pipe(Box::new(other), "b64dec").top(),
            };
            Ok(format!("{{{{ {go} }}}}"))
        }
    }
}

/// True if the string contains lodash template syntax.
pub fn has_template_syntax(src: &str) -> bool {
    src.contains("<%") || src.contains("${")
}

#[derive(Debug, PartialEq)]
enum Segment {
    Literal(String),
    Expr(String),
}

/// Splits a template into literal text and interpolated expressions.
fn split(src: &str) -> Result<Vec<Segment>, String> {
    let mut out = Vec::new();
    let mut lit = String::new();
    let mut rest = src;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("<%") {
            let Some(end) = after.find("%>") else {
                return Err(format!("unterminated `<%` in {src:?}"));
            };
            let body = &after[..end];
            let whole = &rest[..end + 4];
            if let Some(expr) = body.strip_prefix('=') {
                if !lit.is_empty() {
                    out.push(Segment::Literal(std::mem::take(&mut lit)));
                }
                out.push(Segment::Expr(expr.trim().to_string()));
            } else if body.starts_with('-') {
                return Err(format!(
                    "`{whole}` is an HTML-escaping interpolation, which has no exact Go template equivalent"
                ));
            } else {
                return Err(format!(
                    "`{whole}` evaluates JavaScript code, which cannot be translated"
                ));
            }
            rest = &after[end + 2..];
        } else if let Some(after) = rest.strip_prefix("${") {
            let Some(end) = after.find('}') else {
                return Err(format!("unterminated `${{` in {src:?}"));
            };
            if !lit.is_empty() {
                out.push(Segment::Literal(std::mem::take(&mut lit)));
            }
            out.push(Segment::Expr(after[..end].trim().to_string()));
            rest = &after[end + 1..];
        } else {
            let mut chars = rest.chars();
            if let Some(c) = chars.next() {
                lit.push(c);
            }
            rest = chars.as_str();
        }
    }
    if !lit.is_empty() {
        out.push(Segment::Literal(lit));
    }
    Ok(out)
}

/// Escapes literal text for a Go template: `{{` starts an action, so it is written as an action
/// printing the two braces.
fn escape_literal(s: &str) -> String {
    s.replace("{{", "{{ \"{{\" }}")
}

/// A string-valued Go template operand or pipeline.
#[derive(Debug, Clone, PartialEq)]
enum GoStr {
    /// An operand: `.key`, `(index . "key")`, `(index (…) "a")`.
    Operand(String),
    /// `inner | func`.
    Pipe(Box<GoStr>, &'static str),
}

impl GoStr {
    /// As a top-level pipeline (no enclosing parentheses).
    fn top(&self) -> String {
        match self {
            GoStr::Operand(o) => o
                .strip_prefix('(')
                .and_then(|s| s.strip_suffix(')'))
                .map_or_else(
                    || o.clone(),
                    |inner| {
                        if balanced(inner) {
                            inner.to_string()
                        } else {
                            o.clone()
                        }
                    },
                ),
            GoStr::Pipe(inner, f) => format!("{} | {f}", inner.top()),
        }
    }

    /// As an operand (parenthesised when it is a pipeline).
    fn operand(&self) -> String {
        match self {
            GoStr::Operand(o) => o.clone(),
            GoStr::Pipe(..) => format!("({})", self.top()),
        }
    }
}

/// True if the parentheses of `s` (outside string literals) balance, so that `(s)` can be unwrapped.
fn balanced(s: &str) -> bool {
    let mut depth = 0i32;
    let mut in_str = false;
    let mut escaped = false;
    for c in s.chars() {
        if in_str {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_str = false;
            }
            continue;
        }
        match c {
            '"' => in_str = true,
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth < 0 {
                    return false;
                }
            }
            _ => {}
        }
    }
    depth == 0
}

/// The value of a sub-expression.
#[derive(Debug, Clone)]
enum Val {
    /// A string.
    Str(GoStr),
    /// `JSON.parse(s)` with a property path applied.
    Json(GoStr, Vec<String>),
    /// `Buffer.from(s, enc)`; `from_base64` when enc is base64.
    Buf { src: GoStr, from_base64: bool },
}

impl Val {
    fn into_str(self, expr: &str) -> Result<GoStr, String> {
        match self {
            Val::Str(s) => Ok(s),
            Val::Json(src, path) if !path.is_empty() => {
                let keys: Vec<String> = path.iter().map(|k| go_string(k)).collect();
                Ok(GoStr::Operand(format!(
                    "(index {} {})",
                    GoStr::Pipe(Box::new(src), "fromJson").operand(),
                    keys.join(" ")
                )))
            }
            Val::Json(..) => Err(format!(
                "`{expr}` yields a parsed JSON object, not a string"
            )),
            Val::Buf { .. } => Err(format!(
                "`{expr}` yields a Buffer; only `.toString()` / `.toString('base64')` of it can be translated"
            )),
        }
    }
}

fn go_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("{s:?}"))
}

fn is_go_ident(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Parses a supported JavaScript expression into a string-valued Go pipeline.
fn parse_expr(expr: &str) -> Result<GoStr, String> {
    let mut p = Parser {
        src: expr,
        pos: 0,
        whole: expr,
    };
    let v = p.expr()?;
    p.ws();
    if p.pos != p.src.len() {
        return Err(p.unsupported());
    }
    v.into_str(expr)
}

struct Parser<'a> {
    src: &'a str,
    pos: usize,
    whole: &'a str,
}

impl Parser<'_> {
    fn unsupported(&self) -> String {
        format!(
            "the expression `{}` is not one of the translatable forms (data.x, data[\"x\"], JSON.parse(..).y, Buffer.from(..).toString(..), .toLowerCase(), .toUpperCase(), .trim())",
            self.whole
        )
    }

    fn rest(&self) -> &str {
        &self.src[self.pos..]
    }

    fn ws(&mut self) {
        let trimmed = self.rest().trim_start();
        self.pos = self.src.len() - trimmed.len();
    }

    fn eat(&mut self, tok: &str) -> bool {
        self.ws();
        if self.rest().starts_with(tok) {
            self.pos += tok.len();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, tok: &str) -> Result<(), String> {
        if self.eat(tok) {
            Ok(())
        } else {
            Err(self.unsupported())
        }
    }

    fn ident(&mut self) -> Option<String> {
        self.ws();
        let r = self.rest();
        let len = r
            .char_indices()
            .take_while(|(i, c)| c.is_ascii_alphanumeric() || *c == '_' || *c == '$' && *i == 0)
            .map(|(i, c)| i + c.len_utf8())
            .last()?;
        if r.starts_with(|c: char| c.is_ascii_digit()) {
            return None;
        }
        let id = r[..len].to_string();
        self.pos += len;
        Some(id)
    }

    fn string_lit(&mut self) -> Option<String> {
        self.ws();
        let r = self.rest();
        let quote = r.chars().next().filter(|c| *c == '\'' || *c == '"')?;
        let mut out = String::new();
        let mut chars = r[1..].char_indices();
        while let Some((i, c)) = chars.next() {
            if c == quote {
                self.pos += 1 + i + 1;
                return Some(out);
            }
            if c == '\\' {
                let (_, e) = chars.next()?;
                out.push(match e {
                    'n' => '\n',
                    't' => '\t',
                    'r' => '\r',
                    '0' => '\0',
                    other => other,
                });
            } else {
                out.push(c);
            }
        }
        None
    }

    fn expr(&mut self) -> Result<Val, String> {
        let mut v = self.primary()?;
        loop {
            self.ws();
            if self.eat("[") {
                let key = self.string_lit().ok_or_else(|| self.unsupported())?;
                self.expect("]")?;
                v = self.member(v, key)?;
            } else if self.eat(".") {
                let name = self.ident().ok_or_else(|| self.unsupported())?;
                if self.eat("(") {
                    v = self.method(v, &name)?;
                } else {
                    v = self.member(v, name)?;
                }
            } else {
                return Ok(v);
            }
        }
    }

    fn member(&self, v: Val, key: String) -> Result<Val, String> {
        match v {
            Val::Json(src, mut path) => {
                path.push(key);
                Ok(Val::Json(src, path))
            }
            _ => Err(self.unsupported()),
        }
    }

    /// A method call; the opening parenthesis is consumed.
    fn method(&mut self, v: Val, name: &str) -> Result<Val, String> {
        let arg = if self.eat(")") {
            None
        } else {
            let a = self.string_lit().ok_or_else(|| self.unsupported())?;
            self.expect(")")?;
            Some(a)
        };
        match (name, v, arg.as_deref()) {
            ("toString", Val::Buf { src, from_base64 }, enc) => {
                let to_base64 = match enc {
                    None | Some("utf8" | "utf-8") => false,
                    Some("base64") => true,
                    Some(_) => return Err(self.unsupported()),
                };
                Ok(Val::Str(match (from_base64, to_base64) {
                    (false, false) | (true, true) => src,
                    (false, true) => GoStr::Pipe(Box::new(src), "b64enc"),
                    (true, false) => GoStr::Pipe(Box::new(src), "b64dec"),
                }))
            }
            ("toLowerCase" | "toUpperCase" | "trim", v, None) => {
                let s = v.into_str(self.whole)?;
                let f = match name {
                    "toLowerCase" => "lower",
                    "toUpperCase" => "upper",
                    _ => "trim",
                };
                Ok(Val::Str(GoStr::Pipe(Box::new(s), f)))
            }
            _ => Err(self.unsupported()),
        }
    }

    fn primary(&mut self) -> Result<Val, String> {
        let id = self.ident().ok_or_else(|| self.unsupported())?;
        match id.as_str() {
            "data" => {
                let key = if self.eat("[") {
                    let k = self.string_lit().ok_or_else(|| self.unsupported())?;
                    self.expect("]")?;
                    k
                } else if self.eat(".") {
                    self.ident().ok_or_else(|| self.unsupported())?
                } else {
                    return Err(format!(
                        "`{}` uses the whole `data` object, which cannot be translated",
                        self.whole
                    ));
                };
                Ok(Val::Str(GoStr::Operand(if is_go_ident(&key) {
                    format!(".{key}")
                } else {
                    format!("(index . {})", go_string(&key))
                })))
            }
            "JSON" => {
                self.expect(".")?;
                if self.ident().as_deref() != Some("parse") {
                    return Err(self.unsupported());
                }
                self.expect("(")?;
                let inner = self.expr()?.into_str(self.whole)?;
                self.expect(")")?;
                Ok(Val::Json(inner, Vec::new()))
            }
            "Buffer" => {
                self.expect(".")?;
                if self.ident().as_deref() != Some("from") {
                    return Err(self.unsupported());
                }
                self.expect("(")?;
                let inner = self.expr()?.into_str(self.whole)?;
                let from_base64 = if self.eat(",") {
                    match self.string_lit().as_deref() {
                        Some("utf8" | "utf-8") => false,
                        Some("base64") => true,
                        _ => return Err(self.unsupported()),
                    }
                } else {
                    false
                };
                self.expect(")")?;
                Ok(Val::Buf {
                    src: inner,
                    from_base64,
                })
            }
            _ => Err(self.unsupported()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(s: &str) -> String {
        translate(s, Context::Plain).unwrap()
    }

    fn data(s: &str) -> String {
        translate(s, Context::Base64Data).unwrap()
    }

    #[test]
    fn simple_interpolations() {
        assert_eq!(plain("<%= data.password %>"), "{{ .password }}");
        assert_eq!(plain("<%=data['api-key']%>"), "{{ index . \"api-key\" }}");
        assert_eq!(plain("${ data.user }"), "{{ .user }}");
        assert_eq!(
            plain("user=<%= data.user %>\npass=<%= data[\"pass-word\"] %>\n"),
            "user={{ .user }}\npass={{ index . \"pass-word\" }}\n"
        );
        assert_eq!(plain("no template"), "no template");
        assert_eq!(plain("lit {{ x }}"), "lit {{ \"{{\" }} x }}");
    }

    #[test]
    fn json_buffer_and_methods() {
        assert_eq!(
            plain("<%= JSON.parse(data.creds).user %>"),
            "{{ index (.creds | fromJson) \"user\" }}"
        );
        assert_eq!(
            plain("<%= JSON.parse(data['db-creds'])['user-name'].first %>"),
            "{{ index (index . \"db-creds\" | fromJson) \"user-name\" \"first\" }}"
        );
        assert_eq!(
            plain("<%= Buffer.from(data.x).toString('base64') %>"),
            "{{ .x | b64enc }}"
        );
        assert_eq!(
            plain("<%= Buffer.from(data.x, 'base64').toString() %>"),
            "{{ .x | b64dec }}"
        );
        assert_eq!(plain("<%= data.x.toUpperCase() %>"), "{{ .x | upper }}");
        assert_eq!(
            plain("<%= JSON.parse(data.c).host.toLowerCase() %>"),
            "{{ index (.c | fromJson) \"host\" | lower }}"
        );
    }

    #[test]
    fn base64_data_context() {
        // Buffer→base64 at the top level is the identity in ESO (its output is the value itself).
        assert_eq!(
            data("<%= Buffer.from(data.x).toString('base64') %>"),
            "{{ .x }}"
        );
        assert_eq!(
            data("<%= Buffer.from(JSON.parse(data.c).token).toString('base64') %>"),
            "{{ index (.c | fromJson) \"token\" }}"
        );
        // A plain value placed into data must itself have been base64.
        assert_eq!(data("<%= data.b64 %>"), "{{ .b64 | b64dec }}");
        // Literal base64 is decoded into the plain value.
        assert_eq!(data("aGVsbG8gd29ybGQ="), "hello world");
        assert_eq!(data("e3sgfX0="), "{{ \"{{\" }} }}");
    }

    #[test]
    fn refusals_name_the_expression() {
        let e = translate("<%= data.x.split(',')[0] %>", Context::Plain).unwrap_err();
        assert!(e.contains("data.x.split(',')[0]"), "{e}");
        let e = translate("<% if (data.x) { %>a<% } %>", Context::Plain).unwrap_err();
        assert!(e.contains("evaluates JavaScript"), "{e}");
        let e = translate("<%- data.x %>", Context::Plain).unwrap_err();
        assert!(e.contains("HTML-escaping"), "{e}");
        let e = translate("<%= JSON.parse(data.x) %>", Context::Plain).unwrap_err();
        assert!(e.contains("JSON object"), "{e}");
        let e = translate("<%= data %>", Context::Plain).unwrap_err();
        assert!(e.contains("whole `data`"), "{e}");
        let e = translate("pre<%= data.x %>", Context::Base64Data).unwrap_err();
        assert!(e.contains("mixes literal text"), "{e}");
        let e = translate("not base64!", Context::Base64Data).unwrap_err();
        assert!(e.contains("not valid base64"), "{e}");
        let e = translate("<%= yaml.dump(data) %>", Context::Plain).unwrap_err();
        assert!(e.contains("yaml.dump(data)"), "{e}");
    }
}
