//! The parser of Go's `text/template`: builds the node trees (the main template
//! and every `define`/`block`) with Go's grammar, checks and error texts
//! (`template: key:1: function "env" not defined`).

use std::collections::HashMap;

use crate::func::FuncMap;
use crate::lex::{Item, ItemType, Lexer};
use crate::limits::MAX_PARSE_DEPTH;

/// A parse error, formatted as Go formats it (`template: key:1: …`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError(pub String);

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ParseError {}

/// A number literal with Go's interpretations (`parse.NumberNode`).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Number {
    pub text: String,
    pub is_int: bool,
    pub is_uint: bool,
    pub is_float: bool,
    pub is_complex: bool,
    pub int64: i64,
    pub uint64: u64,
    pub float64: f64,
    pub complex: (f64, f64),
}

#[derive(Clone, Debug)]
pub(crate) enum Arg {
    Field {
        pos: usize,
        idents: Vec<String>,
    },
    Chain {
        pos: usize,
        node: Box<Arg>,
        fields: Vec<String>,
    },
    Identifier {
        pos: usize,
        name: String,
    },
    Pipe(Box<Pipe>),
    Variable {
        pos: usize,
        idents: Vec<String>,
    },
    Bool {
        pos: usize,
        val: bool,
    },
    Dot {
        pos: usize,
    },
    Nil {
        pos: usize,
    },
    Number {
        pos: usize,
        num: Box<Number>,
    },
    Str {
        pos: usize,
        quoted: String,
        text: String,
    },
}

impl Arg {
    pub(crate) fn pos(&self) -> usize {
        match self {
            Arg::Field { pos, .. }
            | Arg::Chain { pos, .. }
            | Arg::Identifier { pos, .. }
            | Arg::Variable { pos, .. }
            | Arg::Bool { pos, .. }
            | Arg::Dot { pos }
            | Arg::Nil { pos }
            | Arg::Number { pos, .. }
            | Arg::Str { pos, .. } => *pos,
            Arg::Pipe(p) => p.pos,
        }
    }
}

impl std::fmt::Display for Arg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Arg::Field { idents, .. } => {
                for i in idents {
                    write!(f, ".{i}")?;
                }
                Ok(())
            }
            Arg::Chain { node, fields, .. } => {
                if let Arg::Pipe(p) = node.as_ref() {
                    write!(f, "({p})")?;
                } else {
                    write!(f, "{node}")?;
                }
                for x in fields {
                    write!(f, ".{x}")?;
                }
                Ok(())
            }
            Arg::Identifier { name, .. } => f.write_str(name),
            Arg::Pipe(p) => write!(f, "{p}"),
            Arg::Variable { idents, .. } => f.write_str(&idents.join(".")),
            Arg::Bool { val, .. } => f.write_str(if *val { "true" } else { "false" }),
            Arg::Dot { .. } => f.write_str("."),
            Arg::Nil { .. } => f.write_str("nil"),
            Arg::Number { num, .. } => f.write_str(&num.text),
            Arg::Str { quoted, .. } => f.write_str(quoted),
        }
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Command {
    pub pos: usize,
    pub args: Vec<Arg>,
}

impl std::fmt::Display for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, a) in self.args.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            if let Arg::Pipe(p) = a {
                write!(f, "({p})")?;
            } else {
                write!(f, "{a}")?;
            }
        }
        Ok(())
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Pipe {
    pub pos: usize,
    pub is_assign: bool,
    pub decl: Vec<String>,
    pub cmds: Vec<Command>,
}

impl std::fmt::Display for Pipe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !self.decl.is_empty() {
            f.write_str(&self.decl.join(", "))?;
            f.write_str(if self.is_assign { " = " } else { " := " })?;
        }
        for (i, c) in self.cmds.iter().enumerate() {
            if i > 0 {
                f.write_str(" | ")?;
            }
            write!(f, "{c}")?;
        }
        Ok(())
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Control {
    pub pos: usize,
    pub pipe: Pipe,
    pub list: Vec<Node>,
    pub else_list: Option<Vec<Node>>,
}

#[derive(Clone, Debug)]
pub(crate) enum Node {
    Text(String),
    Action {
        pos: usize,
        pipe: Pipe,
    },
    If(Box<Control>),
    With(Box<Control>),
    Range(Box<Control>),
    Template {
        pos: usize,
        name: String,
        pipe: Option<Pipe>,
    },
    Break {
        pos: usize,
    },
    Continue {
        pos: usize,
    },
}

impl Node {
    pub(crate) fn pos(&self) -> usize {
        match self {
            Node::Text(_) => 0,
            Node::Action { pos, .. }
            | Node::Template { pos, .. }
            | Node::Break { pos }
            | Node::Continue { pos } => *pos,
            Node::If(c) | Node::With(c) | Node::Range(c) => c.pos,
        }
    }
}

fn list_string(f: &mut std::fmt::Formatter<'_>, l: &[Node]) -> std::fmt::Result {
    for n in l {
        write!(f, "{n}")?;
    }
    Ok(())
}

impl std::fmt::Display for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Node::Text(t) => f.write_str(&crate::fmt::quote(t)),
            Node::Action { pipe, .. } => write!(f, "{{{{{pipe}}}}}"),
            Node::If(c) | Node::With(c) | Node::Range(c) => {
                let kw = match self {
                    Node::If(_) => "if",
                    Node::With(_) => "with",
                    _ => "range",
                };
                write!(f, "{{{{{kw} {}}}}}", c.pipe)?;
                list_string(f, &c.list)?;
                if let Some(e) = &c.else_list {
                    f.write_str("{{else}}")?;
                    list_string(f, e)?;
                }
                f.write_str("{{end}}")
            }
            Node::Template { name, pipe, .. } => match pipe {
                Some(p) => write!(f, "{{{{template {} {p}}}}}", crate::fmt::quote(name)),
                None => write!(f, "{{{{template {}}}}}", crate::fmt::quote(name)),
            },
            Node::Break { .. } => f.write_str("{{break}}"),
            Node::Continue { .. } => f.write_str("{{continue}}"),
        }
    }
}

/// A parsed template set: the main template and its associated definitions.
#[derive(Clone, Debug)]
pub struct Template {
    pub(crate) name: String,
    pub(crate) text: String,
    pub(crate) trees: HashMap<String, Vec<Node>>,
}

impl Template {
    /// The template's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

fn is_empty_tree(l: &[Node]) -> bool {
    l.iter().all(|n| match n {
        Node::Text(t) => t
            .trim_matches(|c: char| c.is_ascii_whitespace() || c == '\u{85}' || c == '\u{a0}')
            .is_empty(),
        _ => false,
    })
}

/// Go's `strconv.Unquote` for the string literals the lexer produces.
pub(crate) fn unquote(s: &str) -> Result<String, String> {
    let b = s.as_bytes();
    if b.len() < 2 {
        return Err("invalid syntax".into());
    }
    let q = b[0];
    if q != b[b.len() - 1] {
        return Err("invalid syntax".into());
    }
    let inner = &s[1..s.len() - 1];
    if q == b'`' {
        if inner.contains('`') {
            return Err("invalid syntax".into());
        }
        return Ok(inner.replace('\r', ""));
    }
    if q != b'"' && q != b'\'' {
        return Err("invalid syntax".into());
    }
    if inner.contains('\n') {
        return Err("invalid syntax".into());
    }
    let mut out: Vec<u8> = Vec::with_capacity(inner.len());
    let mut rest = inner;
    while !rest.is_empty() {
        if q == b'\'' && !out.is_empty() {
            return Err("invalid syntax".into());
        }
        let (c, bytes, tail) = unquote_char(rest, q as char)?;
        match c {
            Some(c) => {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
            None => out.push(bytes),
        }
        rest = tail;
    }
    if q == b'\'' && out.is_empty() {
        return Err("invalid syntax".into());
    }
    Ok(match String::from_utf8(out) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

/// Go's `strconv.UnquoteChar`: returns a rune, or a single byte (for `\x` and
/// octal escapes), and the remaining text.
pub(crate) fn unquote_char(s: &str, quote: char) -> Result<(Option<char>, u8, &str), String> {
    let err = || "invalid syntax".to_string();
    let mut chars = s.chars();
    let c = chars.next().ok_or_else(err)?;
    if c == quote && (quote == '\'' || quote == '"') {
        return Err(err());
    }
    if c != '\\' {
        return Ok((Some(c), 0, chars.as_str()));
    }
    let e = chars.next().ok_or_else(err)?;
    let rest = chars.as_str();
    let simple = match e {
        'a' => Some('\u{7}'),
        'b' => Some('\u{8}'),
        'f' => Some('\u{c}'),
        'n' => Some('\n'),
        'r' => Some('\r'),
        't' => Some('\t'),
        'v' => Some('\u{b}'),
        '\\' => Some('\\'),
        '\'' | '"' => {
            if e != quote {
                return Err(err());
            }
            Some(e)
        }
        _ => None,
    };
    if let Some(c) = simple {
        return Ok((Some(c), 0, rest));
    }
    match e {
        'x' | 'u' | 'U' => {
            let n = match e {
                'x' => 2,
                'u' => 4,
                _ => 8,
            };
            if rest.len() < n || !rest.is_char_boundary(n) {
                return Err(err());
            }
            let v = u32::from_str_radix(&rest[..n], 16).map_err(|_| err())?;
            if e == 'x' {
                return Ok((None, v as u8, &rest[n..]));
            }
            let c = char::from_u32(v).ok_or_else(err)?;
            Ok((Some(c), 0, &rest[n..]))
        }
        '0'..='7' => {
            if rest.len() < 2 || !rest.is_char_boundary(2) {
                return Err(err());
            }
            let digits = format!("{e}{}", &rest[..2]);
            let v = u32::from_str_radix(&digits, 8).map_err(|_| err())?;
            if v > 255 {
                return Err(err());
            }
            Ok((None, v as u8, &rest[2..]))
        }
        _ => Err(err()),
    }
}

fn underscore_ok(s: &str) -> bool {
    // Go's strconv.underscoreOK
    let b = s.as_bytes();
    let mut saw = b'^';
    let mut i = 0;
    if !b.is_empty() && (b[0] == b'-' || b[0] == b'+') {
        i = 1;
    }
    let mut hex = false;
    if b.len() - i >= 2 && b[i] == b'0' {
        let c = b[i + 1] | 0x20;
        if c == b'b' || c == b'o' || c == b'x' {
            hex = c == b'x';
            i += 2;
            saw = b'0';
        }
    }
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_digit() || (hex && (c | 0x20).is_ascii_hexdigit()) {
            saw = b'0';
        } else if c == b'_' {
            if saw != b'0' {
                return false;
            }
            saw = b'_';
        } else {
            if saw == b'_' {
                return false;
            }
            saw = b'!';
        }
        i += 1;
    }
    saw != b'_'
}

fn parse_uint_base0(s: &str) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    let (base, digits) = if let Some(r) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        (16, r)
    } else if let Some(r) = s.strip_prefix("0o").or_else(|| s.strip_prefix("0O")) {
        (8, r)
    } else if let Some(r) = s.strip_prefix("0b").or_else(|| s.strip_prefix("0B")) {
        (2, r)
    } else if s.len() > 1 && s.starts_with('0') {
        (8, &s[1..])
    } else {
        (10, s)
    };
    if s.contains('_') && !underscore_ok(s) {
        return None;
    }
    let clean: String = digits.chars().filter(|c| *c != '_').collect();
    if clean.is_empty() {
        return None;
    }
    u64::from_str_radix(&clean, base).ok()
}

fn parse_int_base0(s: &str) -> Option<i64> {
    let (neg, body) = if let Some(r) = s.strip_prefix('-') {
        (true, r)
    } else if let Some(r) = s.strip_prefix('+') {
        (false, r)
    } else {
        (false, s)
    };
    let u = parse_uint_base0(body)?;
    if neg {
        if u > (i64::MAX as u64) + 1 {
            return None;
        }
        Some((u as i64).wrapping_neg())
    } else {
        i64::try_from(u).ok()
    }
}

/// Go's `strconv.ParseFloat(s, 64)` for Go number syntax (underscores, hex floats).
pub(crate) fn parse_float(s: &str) -> Option<f64> {
    if s.contains('_') && !underscore_ok(s) {
        return None;
    }
    let clean: String = s.chars().filter(|c| *c != '_').collect();
    let (neg, body) = if let Some(r) = clean.strip_prefix('-') {
        (true, r.to_string())
    } else if let Some(r) = clean.strip_prefix('+') {
        (false, r.to_string())
    } else {
        (false, clean.clone())
    };
    let lower = body.to_ascii_lowercase();
    let v = if let Some(hex) = lower.strip_prefix("0x") {
        // hex float: mantissa [p exponent]
        let (mant, exp) = match hex.split_once('p') {
            Some((m, e)) => (m, e.parse::<i32>().ok()?),
            None => (hex, 0),
        };
        let (ip, fp) = mant.split_once('.').unwrap_or((mant, ""));
        if ip.is_empty() && fp.is_empty() {
            return None;
        }
        let mut v = 0f64;
        for c in ip.chars() {
            v = v * 16.0 + f64::from(c.to_digit(16)?);
        }
        let mut scale = 1.0 / 16.0;
        for c in fp.chars() {
            v += f64::from(c.to_digit(16)?) * scale;
            scale /= 16.0;
        }
        v * 2f64.powi(exp)
    } else {
        if body.is_empty()
            || !body
                .bytes()
                .all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'E' | b'+' | b'-'))
        {
            return None;
        }
        body.parse::<f64>().ok()?
    };
    Some(if neg { -v } else { v })
}

fn parse_complex(text: &str) -> Option<(f64, f64)> {
    // "a+bi" or "a-bi" (as fmt.Sscan accepts for the lexer's complex items)
    let t = text.strip_suffix('i')?;
    let bytes = t.as_bytes();
    let mut split = None;
    for i in (1..bytes.len()).rev() {
        if (bytes[i] == b'+' || bytes[i] == b'-')
            && !matches!(bytes[i - 1], b'e' | b'E' | b'p' | b'P')
        {
            split = Some(i);
            break;
        }
    }
    let i = split?;
    let re = parse_float(&t[..i]).or_else(|| parse_int_base0(&t[..i]).map(|v| v as f64))?;
    let im = parse_float(&t[i..]).or_else(|| parse_int_base0(&t[i..]).map(|v| v as f64))?;
    Some((re, im))
}

impl Number {
    fn simplify_complex(&mut self) {
        self.is_float = self.complex.1 == 0.0;
        if self.is_float {
            self.float64 = self.complex.0;
            let f = self.float64;
            self.is_int = f.fract() == 0.0
                && (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&f);
            if self.is_int {
                self.int64 = f as i64;
            }
            self.is_uint = f.fract() == 0.0 && (0.0..1.844_674_407_370_955_2e19).contains(&f);
            if self.is_uint {
                self.uint64 = f as u64;
            }
        }
    }

    pub(crate) fn new(text: &str, typ: ItemType) -> Result<Number, String> {
        let mut n = Number {
            text: text.to_string(),
            ..Default::default()
        };
        match typ {
            ItemType::CharConstant => {
                let inner = &text[1..];
                let (c, byte, tail) = unquote_char(inner, '\'')?;
                if tail != "'" {
                    return Err(format!("malformed character constant: {text}"));
                }
                let r = match c {
                    Some(c) => c as u32,
                    None => u32::from(byte),
                };
                n.int64 = i64::from(r);
                n.is_int = true;
                n.uint64 = u64::from(r);
                n.is_uint = true;
                n.float64 = f64::from(r);
                n.is_float = true;
                return Ok(n);
            }
            ItemType::Complex => {
                let c = parse_complex(text)
                    .ok_or_else(|| format!("expected integer or float; found {text}"))?;
                n.is_complex = true;
                n.complex = c;
                n.simplify_complex();
                return Ok(n);
            }
            _ => {}
        }
        if let Some(t) = text.strip_suffix('i')
            && let Some(f) = parse_float(t).or_else(|| parse_int_base0(t).map(|v| v as f64))
        {
            n.is_complex = true;
            n.complex = (0.0, f);
            n.simplify_complex();
            return Ok(n);
        }
        let u = parse_uint_base0(text);
        if let Some(u) = u {
            n.is_uint = true;
            n.uint64 = u;
        }
        if let Some(i) = parse_int_base0(text) {
            n.is_int = true;
            n.int64 = i;
            if i == 0 {
                n.is_uint = true;
                n.uint64 = 0;
            }
        }
        if n.is_int {
            n.is_float = true;
            n.float64 = n.int64 as f64;
        } else if n.is_uint {
            n.is_float = true;
            n.float64 = n.uint64 as f64;
        } else if let Some(f) = parse_float(text) {
            if !text.contains(['.', 'e', 'E', 'p', 'P']) {
                return Err(format!("integer overflow: {}", crate::fmt::quote(text)));
            }
            n.is_float = true;
            n.float64 = f;
            if f.fract() == 0.0
                && (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&f)
            {
                n.is_int = true;
                n.int64 = f as i64;
            }
            if f.fract() == 0.0 && (0.0..1.844_674_407_370_955_2e19).contains(&f) {
                n.is_uint = true;
                n.uint64 = f as u64;
            }
        }
        if !n.is_int && !n.is_uint && !n.is_float {
            return Err(format!(
                "illegal number syntax: {}",
                crate::fmt::quote(text)
            ));
        }
        Ok(n)
    }
}

struct Parser<'f> {
    name: String,
    items: Vec<Item>,
    idx: usize,
    furthest: usize,
    funcs: &'f FuncMap,
    vars: Vec<String>,
    range_depth: usize,
    depth: usize,
    action_line: usize,
    trees: HashMap<String, Vec<Node>>,
}

type PResult<T> = Result<T, ParseError>;

const BUILTINS: &[&str] = &[
    "and", "call", "html", "index", "slice", "js", "len", "not", "or", "print", "printf",
    "println", "urlquery", "eq", "ge", "gt", "le", "lt", "ne",
];

/// Whether `name` is a text/template builtin function.
pub(crate) fn is_builtin(name: &str) -> bool {
    BUILTINS.contains(&name)
}

impl<'f> Parser<'f> {
    fn errorf(&self, msg: impl std::fmt::Display) -> ParseError {
        let line = self.items.get(self.furthest).map(|i| i.line).unwrap_or(1);
        ParseError(format!("template: {}:{}: {}", self.name, line, msg))
    }

    fn next(&mut self) -> Item {
        let i = self.idx.min(self.items.len().saturating_sub(1));
        if self.idx < self.items.len() {
            self.idx += 1;
        }
        if i > self.furthest {
            self.furthest = i;
        }
        self.items[i].clone()
    }

    fn backup(&mut self) {
        self.idx = self.idx.saturating_sub(1);
    }

    fn peek(&mut self) -> Item {
        let it = self.next();
        self.backup();
        it
    }

    fn next_non_space(&mut self) -> Item {
        loop {
            let it = self.next();
            if it.typ != ItemType::Space {
                return it;
            }
        }
    }

    fn peek_non_space(&mut self) -> Item {
        let it = self.next_non_space();
        self.backup();
        it
    }

    fn unexpected(&self, token: &Item, context: &str) -> ParseError {
        if token.typ == ItemType::Error {
            let mut extra = String::new();
            if self.action_line != 0 && self.action_line != token.line {
                extra = format!(" in action started at {}:{}", self.name, self.action_line);
                if token.val.ends_with(" action") {
                    extra = extra[" in action".len()..].to_string();
                }
            }
            return self.errorf(format!("{token}{extra}"));
        }
        self.errorf(format!("unexpected {token} in {context}"))
    }

    fn expect(&mut self, t: ItemType, context: &str) -> PResult<Item> {
        let token = self.next_non_space();
        if token.typ != t {
            return Err(self.unexpected(&token, context));
        }
        Ok(token)
    }

    fn has_function(&self, name: &str) -> bool {
        self.funcs.contains(name) || is_builtin(name)
    }

    fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_PARSE_DEPTH {
            return Err(self.errorf("max expression depth exceeded"));
        }
        Ok(())
    }

    fn add_tree(&mut self, name: String, root: Vec<Node>) -> PResult<()> {
        match self.trees.get(&name) {
            Some(existing) if !is_empty_tree(existing) => {
                if !is_empty_tree(&root) {
                    return Err(self.errorf(format!(
                        "template: multiple definition of template {}",
                        crate::fmt::quote(&name)
                    )));
                }
                Ok(())
            }
            _ => {
                self.trees.insert(name, root);
                Ok(())
            }
        }
    }

    fn parse(&mut self) -> PResult<Vec<Node>> {
        let mut root = Vec::new();
        while self.peek().typ != ItemType::Eof {
            if self.peek().typ == ItemType::LeftDelim {
                let save = self.idx;
                self.next();
                if self.next_non_space().typ == ItemType::Define {
                    self.parse_definition()?;
                    continue;
                }
                self.idx = save;
            }
            match self.text_or_action()? {
                Parsed::Node(n) => root.push(n),
                Parsed::End => return Err(self.errorf("unexpected {{end}}")),
                Parsed::Else => return Err(self.errorf("unexpected {{else}}")),
            }
        }
        Ok(root)
    }

    fn parse_definition(&mut self) -> PResult<()> {
        let context = "define clause";
        let token = self.next_non_space();
        if token.typ != ItemType::String && token.typ != ItemType::RawString {
            return Err(self.unexpected(&token, context));
        }
        let name = unquote(&token.val).map_err(|e| self.errorf(e))?;
        self.expect(ItemType::RightDelim, context)?;
        let saved_vars = std::mem::replace(&mut self.vars, vec!["$".to_string()]);
        let saved_range = std::mem::replace(&mut self.range_depth, 0);
        let (list, end) = self.item_list()?;
        self.vars = saved_vars;
        self.range_depth = saved_range;
        if end != Parsed::End {
            return Err(self.errorf(format!("unexpected {} in {context}", end.describe())));
        }
        self.add_tree(name, list)
    }

    fn item_list(&mut self) -> PResult<(Vec<Node>, Parsed)> {
        let mut list = Vec::new();
        while self.peek_non_space().typ != ItemType::Eof {
            match self.text_or_action()? {
                Parsed::Node(n) => list.push(n),
                other => return Ok((list, other)),
            }
        }
        Err(self.errorf("unexpected EOF"))
    }

    fn text_or_action(&mut self) -> PResult<Parsed> {
        let token = self.next_non_space();
        match token.typ {
            ItemType::Text => Ok(Parsed::Node(Node::Text(token.val.to_string()))),
            ItemType::LeftDelim => {
                self.action_line = token.line;
                let r = self.action();
                self.action_line = 0;
                r
            }
            _ => Err(self.unexpected(&token, "input")),
        }
    }

    fn action(&mut self) -> PResult<Parsed> {
        let token = self.next_non_space();
        match token.typ {
            ItemType::Block => return self.block_control().map(Parsed::Node),
            ItemType::Break => return self.break_control(token.pos, "break").map(Parsed::Node),
            ItemType::Continue => {
                return self.break_control(token.pos, "continue").map(Parsed::Node);
            }
            ItemType::Else => return self.else_control(),
            ItemType::End => {
                self.expect(ItemType::RightDelim, "end")?;
                return Ok(Parsed::End);
            }
            ItemType::If => {
                return self
                    .control("if")
                    .map(|c| Parsed::Node(Node::If(Box::new(c))));
            }
            ItemType::Range => {
                return self
                    .control("range")
                    .map(|c| Parsed::Node(Node::Range(Box::new(c))));
            }
            ItemType::Template => return self.template_control().map(Parsed::Node),
            ItemType::With => {
                return self
                    .control("with")
                    .map(|c| Parsed::Node(Node::With(Box::new(c))));
            }
            _ => {}
        }
        self.backup();
        let token = self.peek();
        let pipe = self.pipeline("command", ItemType::RightDelim)?;
        Ok(Parsed::Node(Node::Action {
            pos: token.pos,
            pipe,
        }))
    }

    fn break_control(&mut self, pos: usize, kw: &str) -> PResult<Node> {
        let token = self.next_non_space();
        if token.typ != ItemType::RightDelim {
            return Err(self.unexpected(&token, &format!("{{{{{kw}}}}}")));
        }
        if self.range_depth == 0 {
            return Err(self.errorf(format!("{{{{{kw}}}}} outside {{{{range}}}}")));
        }
        Ok(if kw == "break" {
            Node::Break { pos }
        } else {
            Node::Continue { pos }
        })
    }

    fn else_control(&mut self) -> PResult<Parsed> {
        let peek = self.peek_non_space();
        if peek.typ == ItemType::If || peek.typ == ItemType::With {
            return Ok(Parsed::Else);
        }
        self.expect(ItemType::RightDelim, "else")?;
        Ok(Parsed::Else)
    }

    fn control(&mut self, context: &str) -> PResult<Control> {
        self.enter()?;
        let nvars = self.vars.len();
        let r = stacker::maybe_grow(64 * 1024, 2 * 1024 * 1024, || self.control_inner(context));
        self.vars.truncate(nvars);
        self.depth -= 1;
        r
    }

    fn control_inner(&mut self, context: &str) -> PResult<Control> {
        let pipe = self.pipeline(context, ItemType::RightDelim)?;
        if context == "range" {
            self.range_depth += 1;
        }
        let r = self.item_list();
        if context == "range" {
            self.range_depth -= 1;
        }
        let (list, next) = r?;
        let mut else_list = None;
        match next {
            Parsed::End => {}
            Parsed::Else => {
                let pk = self.peek_non_space();
                if context == "if" && pk.typ == ItemType::If {
                    self.next_non_space();
                    let c = self.control("if")?;
                    else_list = Some(vec![Node::If(Box::new(c))]);
                } else if context == "with" && pk.typ == ItemType::With {
                    self.next_non_space();
                    let c = self.control("with")?;
                    else_list = Some(vec![Node::With(Box::new(c))]);
                } else {
                    let (el, next) = self.item_list()?;
                    if next != Parsed::End {
                        return Err(self.errorf(format!("expected end; found {}", next.describe())));
                    }
                    else_list = Some(el);
                }
            }
            Parsed::Node(_) => {}
        }
        Ok(Control {
            pos: pipe.pos,
            pipe,
            list,
            else_list,
        })
    }

    fn parse_template_name(&self, token: &Item, context: &str) -> PResult<String> {
        match token.typ {
            ItemType::String | ItemType::RawString => {
                unquote(&token.val).map_err(|e| self.errorf(e))
            }
            _ => Err(self.unexpected(token, context)),
        }
    }

    fn template_control(&mut self) -> PResult<Node> {
        let context = "template clause";
        let token = self.next_non_space();
        let name = self.parse_template_name(&token, context)?;
        let mut pipe = None;
        if self.next_non_space().typ != ItemType::RightDelim {
            self.backup();
            pipe = Some(self.pipeline(context, ItemType::RightDelim)?);
        }
        Ok(Node::Template {
            pos: token.pos,
            name,
            pipe,
        })
    }

    fn block_control(&mut self) -> PResult<Node> {
        let context = "block clause";
        let token = self.next_non_space();
        let name = self.parse_template_name(&token, context)?;
        let pipe = self.pipeline(context, ItemType::RightDelim)?;
        let saved_vars = std::mem::replace(&mut self.vars, vec!["$".to_string()]);
        let saved_range = std::mem::replace(&mut self.range_depth, 0);
        self.enter()?;
        let r = self.item_list();
        self.depth -= 1;
        self.vars = saved_vars;
        self.range_depth = saved_range;
        let (list, end) = r?;
        if end != Parsed::End {
            return Err(self.errorf(format!("unexpected {} in {context}", end.describe())));
        }
        self.add_tree(name.clone(), list)?;
        Ok(Node::Template {
            pos: token.pos,
            name,
            pipe: Some(pipe),
        })
    }

    fn pipeline(&mut self, context: &str, end: ItemType) -> PResult<Pipe> {
        self.enter()?;
        let r = stacker::maybe_grow(64 * 1024, 2 * 1024 * 1024, || {
            self.pipeline_inner(context, end)
        });
        self.depth -= 1;
        r
    }

    fn pipeline_inner(&mut self, context: &str, end: ItemType) -> PResult<Pipe> {
        let token = self.peek_non_space();
        let mut pipe = Pipe {
            pos: token.pos,
            is_assign: false,
            decl: Vec::new(),
            cmds: Vec::new(),
        };
        'decls: loop {
            let v = self.peek_non_space();
            if v.typ != ItemType::Variable {
                break;
            }
            let save = self.idx;
            self.next_non_space();
            let token_after = self.peek();
            let next = self.peek_non_space();
            match next.typ {
                ItemType::Assign | ItemType::Declare => {
                    pipe.is_assign = next.typ == ItemType::Assign;
                    self.next_non_space();
                    pipe.decl.push(v.val.to_string());
                    self.vars.push(v.val.to_string());
                    break 'decls;
                }
                ItemType::Char if &*next.val == "," => {
                    self.next_non_space();
                    pipe.decl.push(v.val.to_string());
                    self.vars.push(v.val.to_string());
                    if context == "range" && pipe.decl.len() < 2 {
                        match self.peek_non_space().typ {
                            ItemType::Variable | ItemType::RightDelim | ItemType::RightParen => {
                                continue 'decls;
                            }
                            _ => return Err(self.errorf("range can only initialize variables")),
                        }
                    }
                    return Err(self.errorf(format!("too many declarations in {context}")));
                }
                _ => {
                    let _ = token_after;
                    self.idx = save;
                    break 'decls;
                }
            }
        }
        loop {
            let token = self.next_non_space();
            if token.typ == end {
                self.check_pipeline(&pipe, context)?;
                return Ok(pipe);
            }
            match token.typ {
                ItemType::Bool
                | ItemType::CharConstant
                | ItemType::Complex
                | ItemType::Dot
                | ItemType::Field
                | ItemType::Identifier
                | ItemType::Number
                | ItemType::Nil
                | ItemType::RawString
                | ItemType::String
                | ItemType::Variable
                | ItemType::LeftParen => {
                    self.backup();
                    let c = self.command()?;
                    pipe.cmds.push(c);
                }
                _ => return Err(self.unexpected(&token, context)),
            }
        }
    }

    fn check_pipeline(&self, pipe: &Pipe, context: &str) -> PResult<()> {
        if pipe.cmds.is_empty() {
            return Err(self.errorf(format!("missing value for {context}")));
        }
        for (i, c) in pipe.cmds.iter().enumerate().skip(1) {
            if let Some(
                Arg::Bool { .. }
                | Arg::Dot { .. }
                | Arg::Nil { .. }
                | Arg::Number { .. }
                | Arg::Str { .. },
            ) = c.args.first()
            {
                return Err(self.errorf(format!(
                    "non executable command in pipeline stage {}",
                    i + 1
                )));
            }
        }
        Ok(())
    }

    fn command(&mut self) -> PResult<Command> {
        let pos = self.peek_non_space().pos;
        let mut cmd = Command {
            pos,
            args: Vec::new(),
        };
        loop {
            self.peek_non_space();
            if let Some(op) = self.operand()? {
                cmd.args.push(op);
            }
            let token = self.next();
            match token.typ {
                ItemType::Space => continue,
                ItemType::RightDelim | ItemType::RightParen => self.backup(),
                ItemType::Pipe => {}
                _ => return Err(self.unexpected(&token, "operand")),
            }
            break;
        }
        if cmd.args.is_empty() {
            return Err(self.errorf("empty command"));
        }
        Ok(cmd)
    }

    fn operand(&mut self) -> PResult<Option<Arg>> {
        let Some(node) = self.term()? else {
            return Ok(None);
        };
        if self.peek().typ == ItemType::Field {
            let pos = self.peek().pos;
            let mut fields = Vec::new();
            while self.peek().typ == ItemType::Field {
                let f = self.next().val;
                fields.push(f[1..].to_string());
            }
            return Ok(Some(match node {
                Arg::Field { idents, .. } => {
                    let mut idents = idents;
                    idents.extend(fields);
                    Arg::Field { pos, idents }
                }
                Arg::Variable { idents, .. } => {
                    let mut idents = idents;
                    idents.extend(fields);
                    Arg::Variable { pos, idents }
                }
                Arg::Bool { .. }
                | Arg::Str { .. }
                | Arg::Number { .. }
                | Arg::Nil { .. }
                | Arg::Dot { .. } => {
                    return Err(self.errorf(format!(
                        "unexpected . after term {}",
                        crate::fmt::quote(&node.to_string())
                    )));
                }
                other => Arg::Chain {
                    pos,
                    node: Box::new(other),
                    fields,
                },
            }));
        }
        Ok(Some(node))
    }

    fn term(&mut self) -> PResult<Option<Arg>> {
        let token = self.next_non_space();
        Ok(Some(match token.typ {
            ItemType::Identifier => {
                if !self.has_function(&token.val) {
                    return Err(self.errorf(format!(
                        "function {} not defined",
                        crate::fmt::quote(&token.val)
                    )));
                }
                Arg::Identifier {
                    pos: token.pos,
                    name: token.val.to_string(),
                }
            }
            ItemType::Dot => Arg::Dot { pos: token.pos },
            ItemType::Nil => Arg::Nil { pos: token.pos },
            ItemType::Variable => {
                let idents: Vec<String> = token.val.split('.').map(str::to_string).collect();
                if !self.vars.iter().any(|v| *v == idents[0]) {
                    return Err(self.errorf(format!(
                        "undefined variable {}",
                        crate::fmt::quote(&idents[0])
                    )));
                }
                Arg::Variable {
                    pos: token.pos,
                    idents,
                }
            }
            ItemType::Field => Arg::Field {
                pos: token.pos,
                idents: token.val[1..].split('.').map(str::to_string).collect(),
            },
            ItemType::Bool => Arg::Bool {
                pos: token.pos,
                val: &*token.val == "true",
            },
            ItemType::CharConstant | ItemType::Complex | ItemType::Number => {
                let num = Number::new(&token.val, token.typ).map_err(|e| self.errorf(e))?;
                Arg::Number {
                    pos: token.pos,
                    num: Box::new(num),
                }
            }
            ItemType::LeftParen => Arg::Pipe(Box::new(
                self.pipeline("parenthesized pipeline", ItemType::RightParen)?,
            )),
            ItemType::String | ItemType::RawString => {
                let s = unquote(&token.val).map_err(|e| self.errorf(e))?;
                Arg::Str {
                    pos: token.pos,
                    quoted: token.val.to_string(),
                    text: s,
                }
            }
            _ => {
                self.backup();
                return Ok(None);
            }
        }))
    }
}

#[derive(Debug, PartialEq)]
enum Parsed {
    Node(Node),
    End,
    Else,
}

impl PartialEq for Node {
    fn eq(&self, _other: &Self) -> bool {
        false
    }
}

impl Parsed {
    fn describe(&self) -> String {
        match self {
            Parsed::Node(n) => n.to_string(),
            Parsed::End => "{{end}}".into(),
            Parsed::Else => "{{else}}".into(),
        }
    }
}

/// Parses `text` as the template `name` with the functions of `funcs` (plus the
/// builtins) available, as Go's `template.New(name).Funcs(funcs).Parse(text)`.
pub fn parse(name: &str, text: &str, funcs: &FuncMap) -> Result<Template, ParseError> {
    parse_delims(name, text, funcs, "", "")
}

/// [`parse`] with custom action delimiters (`Delims(left, right)`; empty strings
/// mean the defaults `{{` and `}}`).
pub fn parse_delims(
    name: &str,
    text: &str,
    funcs: &FuncMap,
    left: &str,
    right: &str,
) -> Result<Template, ParseError> {
    let items = Lexer::lex_delims(text, left, right);
    let mut p = Parser {
        name: name.to_string(),
        items,
        idx: 0,
        furthest: 0,
        funcs,
        vars: vec!["$".to_string()],
        range_depth: 0,
        depth: 0,
        action_line: 0,
        trees: HashMap::new(),
    };
    let root = p.parse()?;
    p.add_tree(name.to_string(), root)?;
    Ok(Template {
        name: name.to_string(),
        text: text.to_string(),
        trees: p.trees,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn perr(s: &str) -> String {
        match parse("key", s, &FuncMap::new()) {
            Ok(_) => String::new(),
            Err(e) => e.0,
        }
    }

    #[test]
    fn errors() {
        assert_eq!(
            perr("{{ env \"HOME\" }}"),
            "template: key:1: function \"env\" not defined"
        );
        assert_eq!(
            perr("{{ $y }}"),
            "template: key:1: undefined variable \"$y\""
        );
        assert_eq!(perr("{{ if .user }}x"), "template: key:1: unexpected EOF");
        assert_eq!(perr("{{ else }}"), "template: key:1: unexpected {{else}}");
        assert_eq!(perr("{{ end }}"), "template: key:1: unexpected {{end}}");
        assert_eq!(
            perr("{{ break }}"),
            "template: key:1: {{break}} outside {{range}}"
        );
        assert_eq!(
            perr("{{ range }}{{ end }}"),
            "template: key:1: missing value for range"
        );
        assert_eq!(
            perr("{{ $x := }}"),
            "template: key:1: missing value for command"
        );
        assert_eq!(
            perr("{{ \"a\" | \"b\" }}"),
            "template: key:1: non executable command in pipeline stage 2"
        );
        assert_eq!(
            perr("{{ .user # }}"),
            "template: key:1: unexpected \"#\" in operand"
        );
        assert_eq!(
            perr("{{ .user ) }}"),
            "template: key:1: unexpected right paren"
        );
        assert_eq!(
            perr("{{ ..user }}"),
            "template: key:1: unexpected . after term \".\""
        );
        assert_eq!(
            perr("{{ 'ab' }}"),
            "template: key:1: malformed character constant: 'ab'"
        );
        assert_eq!(
            perr("{{ /* bad */ }}"),
            "template: key:1: unexpected \"/\" in command"
        );
        assert_eq!(perr("a\n{{ .x"), "template: key:2: unclosed action");
        assert_eq!(
            perr("{{ define \"b\" }}o{{ end }}{{ block \"b\" . }}d{{ end }}"),
            "template: key:1: template: multiple definition of template \"b\""
        );
        assert_eq!(perr("{{ 1i }}"), "");
        assert_eq!(
            perr("{{ 0x1F }}{{ 1_000 }}{{ 0o17 }}{{ 0b101 }}{{ 1e6 }}{{ 'a' }}{{ -1.5 }}"),
            ""
        );
        assert_eq!(
            perr("{{ 99999999999999999999 }}"),
            "template: key:1: integer overflow: \"99999999999999999999\""
        );
    }

    #[test]
    fn numbers() {
        let n = Number::new("0x1F", ItemType::Number).unwrap_or_default();
        assert!(n.is_int && n.int64 == 31);
        let n = Number::new("1.0", ItemType::Number).unwrap_or_default();
        assert!(n.is_int && n.is_float && n.int64 == 1);
        let n = Number::new("3.5", ItemType::Number).unwrap_or_default();
        assert!(!n.is_int && n.is_float);
        let n = Number::new("'a'", ItemType::CharConstant).unwrap_or_default();
        assert!(n.is_int && n.int64 == 97);
        let n = Number::new("1+2i", ItemType::Complex).unwrap_or_default();
        assert!(n.is_complex && n.complex == (1.0, 2.0));
        let n = Number::new("010", ItemType::Number).unwrap_or_default();
        assert_eq!(n.int64, 8);
        assert!(Number::new("1__0", ItemType::Number).is_err());
    }

    #[test]
    fn unquoting() {
        assert_eq!(unquote("\"\\u00e9\\x41\"").as_deref(), Ok("éA"));
        assert_eq!(unquote("`a\\n`").as_deref(), Ok("a\\n"));
        assert!(unquote("\"\\'\"").is_err());
    }
}
