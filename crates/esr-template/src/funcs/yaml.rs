//! ESO's `toYaml`/`fromYaml`, byte-compatible with `sigs.k8s.io/yaml` (which
//! goes through JSON and go-yaml v2): YAML 1.1 scalar resolution (`yes`, `on`,
//! `y` are booleans, `0777` is octal), go-yaml v2's key order, quoting rules,
//! literal blocks for multi-line strings and folding of long lines at 80
//! columns. Parsing uses `yaml-rust2`'s event parser; the YAML 1.1 typing is
//! applied here because YAML 1.2 libraries type scalars differently.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

use crate::fmt::format_float;
use crate::func::FuncMap;
use crate::value::{GoType as T, Value};

use super::util::*;

/// A go-yaml v2 value (after JSON round trip for `toYaml`).
#[derive(Clone, Debug, PartialEq)]
enum Y {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Float(f64),
    Str(String),
    Seq(Vec<Y>),
    Map(Vec<(Y, Y)>),
    /// The merge key `<<` (YAML 1.1).
    Merge,
}

// ---------------------------------------------------------------- resolution

fn is_yaml_float(s: &str) -> bool {
    // ^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$
    let b = s.as_bytes();
    let mut i = 0;
    if i < b.len() && (b[i] == b'-' || b[i] == b'+') {
        i += 1;
    }
    let start = i;
    if i < b.len() && b[i] == b'.' {
        i += 1;
        let d = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == d {
            return false;
        }
    } else {
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return false;
        }
        if i < b.len() && b[i] == b'.' {
            i += 1;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
        }
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if i < b.len() && (b[i] == b'-' || b[i] == b'+') {
            i += 1;
        }
        let d = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == d {
            return false;
        }
    }
    i == b.len()
}

fn parse_uint_base0(s: &str) -> Option<u64> {
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
    if digits.is_empty() {
        return None;
    }
    u64::from_str_radix(digits, base).ok()
}

/// go-yaml v2's `resolve` for a plain scalar.
fn resolve(s: &str) -> Y {
    match s {
        "" | "~" | "null" | "Null" | "NULL" => return Y::Null,
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            return Y::Bool(true);
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            return Y::Bool(false);
        }
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => return Y::Float(f64::INFINITY),
        "-.inf" | "-.Inf" | "-.INF" => return Y::Float(f64::NEG_INFINITY),
        ".nan" | ".NaN" | ".NAN" => return Y::Float(f64::NAN),
        _ => {}
    }
    let first = s.as_bytes()[0];
    if first.is_ascii_digit() || first == b'-' || first == b'+' || first == b'.' {
        let plain = s.replace('_', "");
        let (neg, body) = match plain.as_bytes().first() {
            Some(b'-') => (true, &plain[1..]),
            Some(b'+') => (false, &plain[1..]),
            _ => (false, plain.as_str()),
        };
        if let Some(u) = parse_uint_base0(body) {
            if neg {
                if u <= (i64::MAX as u64) + 1 {
                    return Y::Int((u as i64).wrapping_neg());
                }
            } else if let Ok(i) = i64::try_from(u) {
                return Y::Int(i);
            } else {
                return Y::Uint(u);
            }
        }
        if is_yaml_float(&plain) {
            if let Ok(f) = plain.parse::<f64>() {
                return Y::Float(f);
            }
        }
    }
    Y::Str(s.to_string())
}

/// go-yaml v2's `parseTimestamp` check (such strings are quoted on output; when
/// decoding into `interface{}` go-yaml v2 keeps them as strings).
fn is_timestamp(s: &str) -> bool {
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    if digits != 4 || s.as_bytes().get(4) != Some(&b'-') {
        return false;
    }
    [
        "2006-1-2T15:4:5.999999999Z07:00",
        "2006-1-2t15:4:5.999999999Z07:00",
        "2006-1-2 15:4:5.999999999",
        "2006-1-2",
    ]
    .iter()
    .any(|layout| super::gotime::parse(layout, s).is_ok())
}

/// go-yaml v2's `isBase60Float` (quoted on output for YAML 1.1 compatibility).
fn is_base60_float(s: &str) -> bool {
    // ^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$
    let b = s.as_bytes();
    if b.is_empty() {
        return false;
    }
    let mut i = 0;
    if b[0] == b'-' || b[0] == b'+' {
        i = 1;
    }
    if i >= b.len() || !b[i].is_ascii_digit() {
        return false;
    }
    while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'_') {
        i += 1;
    }
    let mut groups = 0;
    while i < b.len() && b[i] == b':' {
        i += 1;
        let d = i;
        while i < b.len() && b[i].is_ascii_digit() && i - d < 2 {
            i += 1;
        }
        if i == d || (i - d == 2 && b[d] > b'5') {
            return false;
        }
        groups += 1;
    }
    if groups == 0 {
        return false;
    }
    if i < b.len() && b[i] == b'.' {
        i += 1;
        while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'_') {
            i += 1;
        }
    }
    i == b.len()
}

// ---------------------------------------------------------------- parsing

struct Builder {
    stack: Vec<(Y, Option<Y>, usize)>,
    anchors: BTreeMap<usize, Y>,
    root: Option<Y>,
    docs: usize,
}

impl Builder {
    fn push_value(&mut self, v: Y, anchor: usize) {
        if anchor > 0 {
            self.anchors.insert(anchor, v.clone());
        }
        match self.stack.last_mut() {
            None => {
                if self.root.is_none() {
                    self.root = Some(v);
                }
            }
            Some((Y::Seq(items), _, _)) => items.push(v),
            Some((Y::Map(entries), pending, _)) => match pending.take() {
                None => *pending = Some(v),
                Some(k) => entries.push((k, v)),
            },
            Some(_) => {}
        }
    }
}

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, ev: Event, _mark: Marker) {
        if self.docs > 1 {
            return;
        }
        match ev {
            Event::DocumentStart => self.docs += 1,
            Event::Scalar(s, style, anchor, tag) => {
                let v = if style != TScalarStyle::Plain {
                    Y::Str(s)
                } else if s == "<<" && tag.is_none() {
                    Y::Merge
                } else if let Some(t) = tag {
                    match t.suffix.as_str() {
                        "str" => Y::Str(s),
                        _ => resolve(&s),
                    }
                } else {
                    resolve(&s)
                };
                self.push_value(v, anchor);
            }
            Event::SequenceStart(anchor, _) => self.stack.push((Y::Seq(Vec::new()), None, anchor)),
            Event::MappingStart(anchor, _) => self.stack.push((Y::Map(Vec::new()), None, anchor)),
            Event::SequenceEnd | Event::MappingEnd => {
                if let Some((v, _, anchor)) = self.stack.pop() {
                    self.push_value(v, anchor);
                }
            }
            Event::Alias(id) => {
                let v = self.anchors.get(&id).cloned().unwrap_or(Y::Null);
                self.push_value(v, 0);
            }
            _ => {}
        }
    }
}

fn parse_first_doc(s: &str) -> Result<Y, String> {
    parse_first_doc_scan(s).map_err(|e| format!("error converting YAML to JSON: yaml: {e}"))
}

fn parse_first_doc_scan(s: &str) -> Result<Y, yaml_rust2::ScanError> {
    let mut b = Builder {
        stack: Vec::new(),
        anchors: BTreeMap::new(),
        root: None,
        docs: 0,
    };
    let mut p = Parser::new_from_str(s);
    p.load(&mut b, false)?;
    Ok(b.root.unwrap_or(Y::Null))
}

/// `yaml.Unmarshal(text, &map[string]string{})` with sigs.k8s.io/yaml: the YAML step of ESO's
/// `templateAs: KeysAndValues`. go-yaml v2 types the scalars (YAML 1.1: `yes` and `on` are
/// booleans, `0777` is octal); sigs.k8s.io/yaml then turns numbers and booleans into strings
/// because the target is a string (`yes` → `true`, `0777` → `511`, floats with 32-bit `%g`);
/// lists and maps as values fail. Parse errors name only the line, never the text (which may
/// hold secret values).
pub fn string_map(text: &str) -> Result<BTreeMap<String, String>, String> {
    if text.trim().is_empty() {
        return Ok(BTreeMap::new());
    }
    let y = parse_first_doc_scan(text).map_err(|e| {
        format!(
            "error converting YAML to JSON: yaml: line {}: invalid YAML",
            e.marker().line()
        )
    })?;
    let cannot = |kind: &str, target: &str| {
        format!(
            "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {kind} into Go value of type {target}"
        )
    };
    let entries = match y {
        Y::Null => return Ok(BTreeMap::new()),
        Y::Map(entries) => entries,
        Y::Seq(_) => return Err(cannot("array", "map[string]string")),
        Y::Bool(_) => return Err(cannot("bool", "map[string]string")),
        Y::Str(_) | Y::Merge => return Err(cannot("string", "map[string]string")),
        Y::Int(_) | Y::Uint(_) | Y::Float(_) => return Err(cannot("number", "map[string]string")),
    };
    let mut flat = BTreeMap::new();
    flatten_entries(&entries, &mut flat)?;
    let mut out = BTreeMap::new();
    for (k, v) in flat {
        let s = match v {
            Y::Str(s) => s,
            Y::Null => String::new(),
            Y::Bool(b) => b.to_string(),
            Y::Int(i) => i.to_string(),
            Y::Uint(u) => u.to_string(),
            Y::Float(f) => format_float(f, 'g', -1, 32),
            Y::Merge => "<<".to_string(),
            Y::Seq(_) => return Err(cannot("array", "string")),
            Y::Map(_) => return Err(cannot("object", "string")),
        };
        out.insert(k, s);
    }
    Ok(out)
}

/// A mapping's entries with merge keys applied (go-yaml v2 order: later entries win, and of
/// several merged maps the earlier wins).
fn flatten_entries(entries: &[(Y, Y)], out: &mut BTreeMap<String, Y>) -> Result<(), String> {
    for (k, v) in entries {
        if *k == Y::Merge {
            flatten_merge(v, out)?;
            continue;
        }
        out.insert(key_string(k)?, v.clone());
    }
    Ok(())
}

fn flatten_merge(v: &Y, out: &mut BTreeMap<String, Y>) -> Result<(), String> {
    match v {
        Y::Map(entries) => flatten_entries(entries, out),
        Y::Seq(items) => {
            for item in items.iter().rev() {
                if !matches!(item, Y::Map(_)) {
                    return Err("error converting YAML to JSON: yaml: map merge requires map or sequence of maps as the value".into());
                }
                flatten_merge(item, out)?;
            }
            Ok(())
        }
        _ => Err("error converting YAML to JSON: yaml: map merge requires map or sequence of maps as the value".into()),
    }
}

fn key_string(k: &Y) -> Result<String, String> {
    Ok(match k {
        Y::Null => "null".into(),
        Y::Bool(b) => b.to_string(),
        Y::Int(i) => i.to_string(),
        Y::Uint(u) => u.to_string(),
        Y::Float(f) => format_float(*f, 'g', -1, 32),
        Y::Str(s) => s.clone(),
        Y::Merge => "<<".into(),
        _ => return Err("error converting YAML to JSON: unsupported map key".into()),
    })
}

/// YAML → JSON → `interface{}` (numbers become `float64`).
fn to_value(y: &Y) -> Result<Value, String> {
    Ok(match y {
        Y::Null => Value::Nil,
        Y::Bool(b) => Value::Bool(*b),
        Y::Int(i) => Value::Float64(*i as f64),
        Y::Uint(u) => Value::Float64(*u as f64),
        Y::Float(f) => {
            if !f.is_finite() {
                return Err(format!(
                    "error converting YAML to JSON: json: unsupported value: {}",
                    format_float(*f, 'g', -1, 64)
                ));
            }
            Value::Float64(*f)
        }
        Y::Str(s) => Value::str(s.clone()),
        Y::Seq(items) => Value::list(items.iter().map(to_value).collect::<Result<_, _>>()?),
        Y::Map(entries) => {
            let mut m = BTreeMap::new();
            for (k, v) in entries {
                if *k == Y::Merge {
                    merge_into(&mut m, v)?;
                    continue;
                }
                m.insert(key_string(k)?, to_value(v)?);
            }
            Value::map(m)
        }
        Y::Merge => Value::str("<<"),
    })
}

/// go-yaml v2's merge (`<<: *anchor` or `<<: [*a, *b]`, earlier maps win).
fn merge_into(m: &mut BTreeMap<String, Value>, v: &Y) -> Result<(), String> {
    match v {
        Y::Map(entries) => {
            if let Value::Map(src) = to_value(&Y::Map(entries.clone()))? {
                for (k, val) in src.entries() {
                    m.insert(k, val);
                }
            }
            Ok(())
        }
        Y::Seq(items) => {
            for item in items.iter().rev() {
                if !matches!(item, Y::Map(_)) {
                    return Err("error converting YAML to JSON: yaml: map merge requires map or sequence of maps as the value".into());
                }
                merge_into(m, item)?;
            }
            Ok(())
        }
        _ => Err("error converting YAML to JSON: yaml: map merge requires map or sequence of maps as the value".into()),
    }
}

/// ESO `fromYaml`: a `map[string]interface{}`; errors go under the key `Error`.
pub fn from_yaml(s: &str) -> Value {
    let mut m = BTreeMap::new();
    match parse_first_doc(s).and_then(|y| match y {
        Y::Null => Ok(Value::map(BTreeMap::new())),
        Y::Map(_) => to_value(&y),
        Y::Seq(_) => Err("error unmarshaling JSON: while decoding JSON: json: cannot unmarshal array into Go value of type map[string]interface {}".into()),
        _ => Err("error unmarshaling JSON: while decoding JSON: json: cannot unmarshal value into Go value of type map[string]interface {}".into()),
    }) {
        Ok(Value::Map(r)) => return Value::Map(r),
        Ok(_) => {}
        Err(e) => {
            m.insert("Error".to_string(), Value::str(e));
        }
    }
    Value::map(m)
}

// ---------------------------------------------------------------- JSON → Y

fn json_to_y(v: &serde_json::Value) -> Y {
    match v {
        serde_json::Value::Null => Y::Null,
        serde_json::Value::Bool(b) => Y::Bool(*b),
        serde_json::Value::Number(n) => resolve(&n.to_string()),
        serde_json::Value::String(s) => Y::Str(s.clone()),
        serde_json::Value::Array(a) => Y::Seq(a.iter().map(json_to_y).collect()),
        serde_json::Value::Object(o) => Y::Map(
            o.iter()
                .map(|(k, v)| (Y::Str(k.clone()), json_to_y(v)))
                .collect(),
        ),
    }
}

/// go-yaml v2's map key order (numbers inside keys compare numerically, letters
/// after non-letters).
fn key_less(a: &Y, b: &Y) -> Ordering {
    let (Y::Str(a), Y::Str(b)) = (a, b) else {
        return Ordering::Equal;
    };
    let (ar, br): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut i = 0;
    while i < ar.len() && i < br.len() {
        if ar[i] == br[i] {
            i += 1;
            continue;
        }
        let (al, bl) = (ar[i].is_alphabetic(), br[i].is_alphabetic());
        if al && bl {
            return ar[i].cmp(&br[i]);
        }
        if al || bl {
            return if bl {
                Ordering::Less
            } else {
                Ordering::Greater
            };
        }
        let (mut an, mut bn) = (0i64, 0i64);
        if ar[i] == '0' || br[i] == '0' {
            let mut j = i;
            while j > 0 && ar[j - 1].is_ascii_digit() {
                j -= 1;
                if ar[j] != '0' {
                    an = 1;
                    bn = 1;
                    break;
                }
            }
        }
        let mut ai = i;
        while ai < ar.len() && ar[ai].is_ascii_digit() {
            an = an
                .wrapping_mul(10)
                .wrapping_add(i64::from(ar[ai] as u8 - b'0'));
            ai += 1;
        }
        let mut bi = i;
        while bi < br.len() && br[bi].is_ascii_digit() {
            bn = bn
                .wrapping_mul(10)
                .wrapping_add(i64::from(br[bi] as u8 - b'0'));
            bi += 1;
        }
        if an != bn {
            return an.cmp(&bn);
        }
        if ai != bi {
            return ai.cmp(&bi);
        }
        return ar[i].cmp(&br[i]);
    }
    ar.len().cmp(&br.len())
}

fn sort_maps(y: &mut Y) {
    match y {
        Y::Seq(items) => items.iter_mut().for_each(sort_maps),
        Y::Map(entries) => {
            entries.iter_mut().for_each(|(_, v)| sort_maps(v));
            entries.sort_by(|(a, _), (b, _)| key_less(a, b));
        }
        _ => {}
    }
}

// ---------------------------------------------------------------- emitting

const BEST_WIDTH: usize = 80;

fn is_printable(c: char) -> bool {
    let u = c as u32;
    u == 0x0A
        || (0x20..=0x7E).contains(&u)
        || u == 0x85
        || ((0xA0..=0xD7FF).contains(&u))
        || ((0xE000..=0xFFFD).contains(&u) && u != 0xFEFF)
        || (0x10000..=0x10FFFF).contains(&u)
}

fn is_break(c: char) -> bool {
    matches!(c, '\r' | '\n' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

struct Analysis {
    multiline: bool,
    block_plain: bool,
    single_quoted: bool,
    block: bool,
}

fn analyze(s: &str) -> Analysis {
    if s.is_empty() {
        return Analysis {
            multiline: false,
            block_plain: true,
            single_quoted: true,
            block: false,
        };
    }
    let c: Vec<char> = s.chars().collect();
    let (mut block_ind, mut special) = (false, false);
    let (
        mut line_breaks,
        mut leading_space,
        mut leading_break,
        mut trailing_space,
        mut trailing_break,
    ) = (false, false, false, false, false);
    let (mut break_space, mut space_break) = (false, false);
    let (mut prev_space, mut prev_break) = (false, false);
    if s.starts_with("---") || s.starts_with("...") {
        block_ind = true;
    }
    let mut preceded_ws = true;
    for i in 0..c.len() {
        let ch = c[i];
        let followed_ws =
            i + 1 >= c.len() || c[i + 1] == ' ' || c[i + 1] == '\t' || is_break(c[i + 1]);
        if i == 0 {
            match ch {
                '#' | ',' | '[' | ']' | '{' | '}' | '&' | '*' | '!' | '|' | '>' | '\'' | '"'
                | '%' | '@' | '`' => block_ind = true,
                '?' | ':' => {
                    if followed_ws {
                        block_ind = true;
                    }
                }
                '-' => {
                    if followed_ws {
                        block_ind = true;
                    }
                }
                _ => {}
            }
        } else {
            match ch {
                ':' => {
                    if followed_ws {
                        block_ind = true;
                    }
                }
                '#' => {
                    if preceded_ws {
                        block_ind = true;
                    }
                }
                _ => {}
            }
        }
        if !is_printable(ch) || ch == '\u{FEFF}' {
            special = true;
        }
        if is_break(ch) {
            line_breaks = true;
        }
        if ch == ' ' {
            if i == 0 {
                leading_space = true;
            }
            if i == c.len() - 1 {
                trailing_space = true;
            }
            if prev_break {
                break_space = true;
            }
            prev_space = true;
            prev_break = false;
        } else if is_break(ch) {
            if i == 0 {
                leading_break = true;
            }
            if i == c.len() - 1 {
                trailing_break = true;
            }
            if prev_space {
                space_break = true;
            }
            prev_break = true;
            prev_space = false;
        } else {
            prev_space = false;
            prev_break = false;
        }
        preceded_ws = ch == ' ' || ch == '\t' || is_break(ch);
    }
    let mut a = Analysis {
        multiline: line_breaks,
        block_plain: true,
        single_quoted: true,
        block: true,
    };
    if leading_space || leading_break || trailing_space || trailing_break {
        a.block_plain = false;
    }
    if trailing_space {
        a.block = false;
    }
    if break_space {
        a.block_plain = false;
        a.single_quoted = false;
    }
    if space_break || special {
        a.block_plain = false;
        a.single_quoted = false;
        a.block = false;
    }
    if line_breaks {
        a.block_plain = false;
    }
    if block_ind {
        a.block_plain = false;
    }
    a
}

struct Emitter {
    out: String,
    column: usize,
}

impl Emitter {
    fn write(&mut self, s: &str) {
        for ch in s.chars() {
            if ch == '\n' {
                self.column = 0;
            } else {
                self.column += 1;
            }
            self.out.push(ch);
        }
    }

    fn newline_indent(&mut self, indent: usize) {
        self.write("\n");
        self.write(&" ".repeat(indent));
    }

    fn plain(&mut self, s: &str, indent: usize, allow_breaks: bool) {
        let c: Vec<char> = s.chars().collect();
        let mut spaces = false;
        for i in 0..c.len() {
            if c[i] == ' ' {
                if allow_breaks
                    && !spaces
                    && self.column > BEST_WIDTH
                    && i + 1 < c.len()
                    && c[i + 1] != ' '
                {
                    self.newline_indent(indent);
                } else {
                    self.write(" ");
                }
                spaces = true;
            } else {
                self.out.push(c[i]);
                self.column += 1;
                spaces = false;
            }
        }
    }

    fn single(&mut self, s: &str, indent: usize, allow_breaks: bool) {
        self.write("'");
        let c: Vec<char> = s.chars().collect();
        let mut spaces = false;
        for i in 0..c.len() {
            if c[i] == ' ' {
                if allow_breaks
                    && !spaces
                    && self.column > BEST_WIDTH
                    && i != 0
                    && i != c.len() - 1
                    && c[i + 1] != ' '
                {
                    self.newline_indent(indent);
                } else {
                    self.write(" ");
                }
                spaces = true;
            } else {
                if c[i] == '\'' {
                    self.write("'");
                }
                self.out.push(c[i]);
                self.column += 1;
                spaces = false;
            }
        }
        self.write("'");
    }

    fn double(&mut self, s: &str, indent: usize, allow_breaks: bool) {
        self.write("\"");
        let c: Vec<char> = s.chars().collect();
        let mut spaces = false;
        for i in 0..c.len() {
            let ch = c[i];
            if !is_printable(ch) || ch == '\u{FEFF}' || is_break(ch) || ch == '"' || ch == '\\' {
                let esc = match ch {
                    '\0' => "\\0".to_string(),
                    '\u{7}' => "\\a".into(),
                    '\u{8}' => "\\b".into(),
                    '\t' => "\\t".into(),
                    '\n' => "\\n".into(),
                    '\u{b}' => "\\v".into(),
                    '\u{c}' => "\\f".into(),
                    '\r' => "\\r".into(),
                    '\u{1b}' => "\\e".into(),
                    '"' => "\\\"".into(),
                    '\\' => "\\\\".into(),
                    '\u{85}' => "\\N".into(),
                    '\u{a0}' => "\\_".into(),
                    '\u{2028}' => "\\L".into(),
                    '\u{2029}' => "\\P".into(),
                    c if (c as u32) <= 0xFF => format!("\\x{:02X}", c as u32),
                    c if (c as u32) <= 0xFFFF => format!("\\u{:04X}", c as u32),
                    c => format!("\\U{:08X}", c as u32),
                };
                self.write(&esc);
                spaces = false;
            } else if ch == ' ' {
                if allow_breaks && !spaces && self.column > BEST_WIDTH && i != 0 && i != c.len() - 1
                {
                    self.newline_indent(indent);
                    if c[i + 1] == ' ' {
                        self.write("\\");
                    }
                } else {
                    self.write(" ");
                }
                spaces = true;
            } else {
                self.out.push(ch);
                self.column += 1;
                spaces = false;
            }
        }
        self.write("\"");
    }

    fn literal(&mut self, s: &str, indent: usize) {
        self.write("|");
        if s.starts_with(' ') || s.starts_with('\n') {
            self.write("2");
        }
        if !s.ends_with('\n') {
            self.write("-");
        } else if s.len() == 1 || s[..s.len() - 1].ends_with('\n') {
            self.write("+");
        }
        let body = s.strip_suffix('\n').unwrap_or(s);
        for line in body.split('\n') {
            self.write("\n");
            if !line.is_empty() {
                self.write(&" ".repeat(indent));
                self.write(line);
            }
        }
    }

    /// A string scalar; `indent` is the indentation of continuation lines.
    fn string(&mut self, s: &str, indent: usize, is_key: bool) {
        let can_plain = matches!(resolve(s), Y::Str(_))
            && !is_base60_float(s)
            && !is_timestamp(s)
            && !s.is_empty();
        let a = analyze(s);
        if s.contains('\n') && !is_key {
            if a.block {
                return self.literal(s, indent);
            }
            return self.double(s, indent, true);
        }
        if can_plain && a.block_plain && !a.multiline {
            return self.plain(s, indent, !is_key);
        }
        if !can_plain && !s.contains('\n') {
            return self.double(s, indent, !is_key);
        }
        if a.single_quoted && !a.multiline {
            return self.single(s, indent, !is_key);
        }
        self.double(s, indent, !is_key)
    }

    fn scalar(&mut self, y: &Y, indent: usize, is_key: bool) {
        match y {
            Y::Null => self.write("null"),
            Y::Bool(b) => self.write(if *b { "true" } else { "false" }),
            Y::Int(i) => self.write(&i.to_string()),
            Y::Uint(u) => self.write(&u.to_string()),
            Y::Float(f) => {
                let s = match format_float(*f, 'g', -1, 64).as_str() {
                    "+Inf" => ".inf".to_string(),
                    "-Inf" => "-.inf".to_string(),
                    "NaN" => ".nan".to_string(),
                    other => other.to_string(),
                };
                self.write(&s);
            }
            Y::Str(s) => self.string(s, indent, is_key),
            Y::Seq(_) => self.write("[]"),
            Y::Map(_) => self.write("{}"),
            Y::Merge => self.write("<<"),
        }
    }

    fn is_block(y: &Y) -> bool {
        match y {
            Y::Seq(v) => !v.is_empty(),
            Y::Map(v) => !v.is_empty(),
            _ => false,
        }
    }

    /// Emits a node whose first line continues the current line (after `- `,
    /// or at the document start). `indent` is the node's block indentation.
    fn node(&mut self, y: &Y, indent: usize) {
        match y {
            Y::Map(entries) if !entries.is_empty() => {
                for (i, (k, v)) in entries.iter().enumerate() {
                    if i > 0 {
                        self.newline_indent(indent);
                    }
                    self.scalar(k, indent + 2, true);
                    self.write(":");
                    match v {
                        Y::Map(m) if !m.is_empty() => {
                            self.newline_indent(indent + 2);
                            self.node(v, indent + 2);
                        }
                        Y::Seq(s) if !s.is_empty() => {
                            self.newline_indent(indent);
                            self.node(v, indent);
                        }
                        _ => {
                            self.write(" ");
                            self.scalar(v, indent + 2, false);
                        }
                    }
                }
            }
            Y::Seq(items) if !items.is_empty() => {
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        self.newline_indent(indent);
                    }
                    self.write("- ");
                    if Self::is_block(v) {
                        self.node(v, indent + 2);
                    } else {
                        self.scalar(v, indent + 2, false);
                    }
                }
            }
            other => self.scalar(other, indent + 2, false),
        }
    }
}

/// ESO `toYaml`: `sigs.k8s.io/yaml.Marshal` with the trailing newline removed;
/// `""` when the value cannot be marshalled.
pub fn to_yaml(v: &Value) -> String {
    let Ok(json) = super::json::marshal(v) else {
        return String::new();
    };
    let Ok(parsed) = serde_json::from_str::<serde_json::Value>(&json) else {
        return String::new();
    };
    let mut y = json_to_y(&parsed);
    sort_maps(&mut y);
    let mut e = Emitter {
        out: String::new(),
        column: 0,
    };
    e.node(&y, 0);
    e.out
}

/// Registers `toYaml` and `fromYaml`.
pub fn install(m: &mut FuncMap) {
    def(m, "toYaml", vec![T::Interface], |a| ok_str(to_yaml(&a[0])));
    def(m, "fromYaml", vec![T::String], |a| Ok(from_yaml(s(a, 0))));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn y(s: &str) -> String {
        to_yaml(&super::super::json::unmarshal(s).unwrap())
    }

    #[test]
    fn to_yaml_go_style() {
        assert_eq!(y(r#"{"b":1,"a":["x","y"]}"#), "a:\n- x\n- \"y\"\nb: 1");
        assert_eq!(y(r#""str""#), "str");
        assert_eq!(y(r#""yes""#), "\"yes\"");
        assert_eq!(y("[]"), "[]");
        assert_eq!(y("{}"), "{}");
        assert_eq!(y(r#""line1\nline2""#), "|-\n  line1\n  line2");
        assert_eq!(y(r#"{"k":"line1\nline2\n"}"#), "k: |\n  line1\n  line2");
        assert_eq!(
            y(r#"{"a":{"b":{"c":[1,{"d":true}]}}}"#),
            "a:\n  b:\n    c:\n    - 1\n    - d: true"
        );
        assert_eq!(
            y(r#"{"on":"true","port":"5432","user":"admin"}"#),
            "\"on\": \"true\"\nport: \"5432\"\nuser: admin"
        );
        assert_eq!(
            y(r#"{"e":"","s":" lead","at":"@x","c":"a: b","h":"a #b","t":"a\tb"}"#),
            "at: '@x'\nc: 'a: b'\ne: \"\"\nh: 'a #b'\ns: ' lead'\nt: \"a\\tb\""
        );
        assert_eq!(
            y(r#"{"k10":1,"k9":2,"k_":3,"kB":4}"#),
            "k_: 3\nk9: 2\nk10: 1\nkB: 4"
        );
        assert_eq!(y(r#"[[1,2],{"a":[3]}]"#), "- - 1\n  - 2\n- a:\n  - 3");
        assert_eq!(y("1.5"), "1.5");
        assert_eq!(y("1e21"), "1e+21");
        assert_eq!(y(r#""it's""#), "it's");
        assert_eq!(y(r#""1:20""#), "\"1:20\"");
        assert_eq!(
            y(r#"{"d":"2024-01-02","e":"2024-1-2 3:04:05","f":"2024-13-01"}"#),
            "d: \"2024-01-02\"\ne: \"2024-1-2 3:04:05\"\nf: 2024-13-01"
        );
        let long = "word ".repeat(30);
        let out = y(&format!("{{\"k\":\"{}\"}}", long.trim()));
        assert!(out.lines().count() > 1, "{out}");
        assert!(out.lines().all(|l| l.len() <= 90), "{out}");
    }

    #[test]
    fn from_yaml_yaml11() {
        let v = from_yaml("a: yes\nb: no\nc: on\nd: 0777\ne: 1.5\nf: ~\ng: \"yes\"\n");
        let Value::Map(m) = v else {
            panic!("not a map")
        };
        assert!(matches!(m.get("a"), Some(Value::Bool(true))));
        assert!(matches!(m.get("b"), Some(Value::Bool(false))));
        assert!(matches!(m.get("d"), Some(Value::Float64(f)) if f == 511.0));
        assert!(matches!(m.get("f"), Some(Value::Nil)));
        assert!(matches!(m.get("g"), Some(Value::String(s)) if s == "yes"));
        let Value::Map(m) = from_yaml("{bad") else {
            panic!("not a map")
        };
        assert!(m.contains_key("Error"));
        let Value::Map(m) = from_yaml("") else {
            panic!("not a map")
        };
        assert!(m.is_empty());
        let Value::Map(m) = from_yaml("x: &a 1\ny: *a") else {
            panic!("not a map")
        };
        assert!(m.contains_key("true"));
        let Value::Map(m) = from_yaml("a: 1\n---\nb: 2") else {
            panic!("not a map")
        };
        assert!(m.contains_key("a") && !m.contains_key("b"));
        let Value::Map(m) = from_yaml("- a") else {
            panic!("not a map")
        };
        assert!(m.contains_key("Error"));
    }
}
