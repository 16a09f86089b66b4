//! Go's `fmt` printing for [`Value`]s: `Sprint`, `Sprintln`, `Sprintf` with all
//! verbs, flags, widths, precisions and argument indexes, plus the pieces of
//! `strconv` they need (`FormatFloat`, `Quote`). A `time.Duration` prints with
//! [`esr_api::duration::format`] (Go's `Duration.String`).
//!
//! Output matches Go's byte for byte for the types modelled in [`crate::value`]:
//! maps print as `map[k:v]` with sorted keys, floats with `%v` use the shortest
//! representation that switches to exponent form below 1e-4 and from 1e21… no —
//! from an exponent of 6 on (`1e+06`, `1.23456789e+08`), wrong verbs print
//! `%!d(string=x)`, missing and extra arguments `%!s(MISSING)` / `%!(EXTRA …)`.

use crate::value::{GoType, Value};
use esr_api::duration::GoDuration;

/// Maximum nesting depth printed; deeper values print as `...` (cyclic maps).
const MAX_DEPTH: usize = 64;

/// Printing stops past this size (see [`crate::limits::MAX_OUTPUT_BYTES`]).
const MAX_PRINT_BYTES: usize = crate::limits::MAX_OUTPUT_BYTES;

/// `fmt.Sprint`: operands printed with `%v`, a space between two operands when
/// neither is a string.
pub fn sprint(args: &[Value]) -> String {
    sprint_p(args).into_string()
}

/// [`sprint`] returning the exact bytes (Go strings may hold any bytes).
pub fn sprint_bytes(args: &[Value]) -> Vec<u8> {
    sprint_p(args).buf
}

fn sprint_p(args: &[Value]) -> Printer {
    let mut p = Printer::new();
    let mut prev_string = false;
    for (i, a) in args.iter().enumerate() {
        let is_string = matches!(a, Value::String(_) | Value::BinaryString(_));
        if i > 0 && !is_string && !prev_string {
            p.push(' ');
        }
        p.flags = Flags::default();
        p.print_arg(a, 'v', 0);
        prev_string = is_string;
    }
    p
}

/// `fmt.Sprintln`: operands printed with `%v`, always space-separated, newline at
/// the end.
pub fn sprintln(args: &[Value]) -> String {
    sprintln_p(args).into_string()
}

/// [`sprintln`] returning the exact bytes.
pub fn sprintln_bytes(args: &[Value]) -> Vec<u8> {
    sprintln_p(args).buf
}

fn sprintln_p(args: &[Value]) -> Printer {
    let mut p = Printer::new();
    for (i, a) in args.iter().enumerate() {
        if i > 0 {
            p.push(' ');
        }
        p.flags = Flags::default();
        p.print_arg(a, 'v', 0);
    }
    p.push('\n');
    p
}

/// `fmt.Sprint(v)` of a single value (`%v`); nil prints `<nil>`.
pub fn format_v(v: &Value) -> String {
    let mut p = Printer::new();
    p.print_arg(v, 'v', 0);
    p.into_string()
}

/// [`format_v`] returning the exact bytes.
pub fn format_v_bytes(v: &Value) -> Vec<u8> {
    let mut p = Printer::new();
    p.print_arg(v, 'v', 0);
    p.buf
}

/// `fmt.Sprintf`.
pub fn sprintf(format: &str, args: &[Value]) -> String {
    let mut p = Printer::new();
    p.do_printf(format, args);
    p.into_string()
}

/// [`sprintf`] returning the exact bytes.
pub fn sprintf_bytes(format: &str, args: &[Value]) -> Vec<u8> {
    let mut p = Printer::new();
    p.do_printf(format, args);
    p.buf
}

#[derive(Clone, Copy, Default, Debug)]
struct Flags {
    plus: bool,
    minus: bool,
    sharp: bool,
    space: bool,
    zero: bool,
    plus_v: bool,
    sharp_v: bool,
    wid: Option<usize>,
    prec: Option<usize>,
}

struct Printer {
    buf: Vec<u8>,
    flags: Flags,
    erroring: bool,
}

const LDIGITS: &[u8] = b"0123456789abcdefx";
const UDIGITS: &[u8] = b"0123456789ABCDEFX";
const TOO_LARGE: usize = 1_000_000;

impl Printer {
    fn new() -> Self {
        Printer {
            buf: Vec::new(),
            flags: Flags::default(),
            erroring: false,
        }
    }

    fn push(&mut self, c: char) {
        let mut b = [0u8; 4];
        self.push_bytes(c.encode_utf8(&mut b).as_bytes());
    }

    fn push_str(&mut self, s: &str) {
        self.push_bytes(s.as_bytes());
    }

    /// Appends, up to the output limit: past it the printer stops (the caller sees
    /// an output longer than the limit and fails).
    fn push_bytes(&mut self, b: &[u8]) {
        if self.buf.len() > MAX_PRINT_BYTES {
            return;
        }
        self.buf.extend_from_slice(b);
    }

    fn full(&self) -> bool {
        self.buf.len() > MAX_PRINT_BYTES
    }

    fn into_string(self) -> String {
        match String::from_utf8(self.buf) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        }
    }

    // ---- padding ------------------------------------------------------------------

    fn write_padding(&mut self, n: usize) {
        let c = if self.flags.zero && !self.flags.minus {
            '0'
        } else {
            ' '
        };
        for _ in 0..n {
            self.push(c);
        }
    }

    fn pad(&mut self, s: &str) {
        let Some(wid) = self.flags.wid.filter(|w| *w > 0) else {
            self.push_str(s);
            return;
        };
        let n = s.chars().count();
        let width = wid.saturating_sub(n);
        if !self.flags.minus {
            self.write_padding(width);
            self.push_str(s);
        } else {
            self.push_str(s);
            self.write_padding(width);
        }
    }

    fn pad_no_zero(&mut self, s: &str) {
        let z = self.flags.zero;
        self.flags.zero = false;
        self.pad(s);
        self.flags.zero = z;
    }

    // ---- printf driver -----------------------------------------------------------

    fn do_printf(&mut self, format: &str, args: &[Value]) {
        let fb = format.as_bytes();
        let end = fb.len();
        let mut arg_num = 0usize;
        let mut reordered = false;
        let mut i = 0usize;
        'format: while i < end {
            let mut good_arg_num = true;
            let lasti = i;
            while i < end && fb[i] != b'%' {
                i += 1;
            }
            if i > lasti {
                self.push_str(&format[lasti..i]);
            }
            if i >= end {
                break;
            }
            i += 1; // skip %
            self.flags = Flags::default();
            // flags
            while i < end {
                let c = fb[i];
                match c {
                    b'#' => self.flags.sharp = true,
                    b'0' => self.flags.zero = !self.flags.minus,
                    b'+' => self.flags.plus = true,
                    b'-' => {
                        self.flags.minus = true;
                        self.flags.zero = false;
                    }
                    b' ' => self.flags.space = true,
                    _ => {
                        if c.is_ascii_lowercase() && arg_num < args.len() {
                            let verb = c as char;
                            if verb == 'v' {
                                self.flags.sharp_v = self.flags.sharp;
                                self.flags.sharp = false;
                                self.flags.plus_v = self.flags.plus;
                                self.flags.plus = false;
                            }
                            let verb = if verb == 'w' { 'v' } else { verb };
                            self.print_arg(&args[arg_num], verb, 0);
                            arg_num += 1;
                            i += 1;
                            continue 'format;
                        }
                        break;
                    }
                }
                i += 1;
            }
            // argument index
            let (na, ni, mut after_index, ok) = arg_number(arg_num, format, i, args.len());
            arg_num = na;
            i = ni;
            if after_index {
                reordered = true;
            }
            if !ok {
                good_arg_num = false;
            }
            // width
            if i < end && fb[i] == b'*' {
                i += 1;
                let (w, present, na) = int_from_arg(args, arg_num);
                arg_num = na;
                if !present {
                    self.push_str("%!(BADWIDTH)");
                    self.flags.wid = None;
                } else if w < 0 {
                    self.flags.wid = Some(w.unsigned_abs() as usize);
                    self.flags.minus = true;
                    self.flags.zero = false;
                } else {
                    self.flags.wid = Some(w as usize);
                }
                after_index = false;
            } else {
                let (w, present, ni) = parse_num(fb, i, end);
                i = ni;
                self.flags.wid = if present { Some(w) } else { None };
                if after_index && present {
                    good_arg_num = false;
                }
            }
            // precision
            if i + 1 < end && fb[i] == b'.' {
                i += 1;
                if after_index {
                    good_arg_num = false;
                }
                let (na, ni, ai, ok) = arg_number(arg_num, format, i, args.len());
                arg_num = na;
                i = ni;
                after_index = ai;
                if ai {
                    reordered = true;
                }
                if !ok {
                    good_arg_num = false;
                }
                if i < end && fb[i] == b'*' {
                    i += 1;
                    let (p, present, na) = int_from_arg(args, arg_num);
                    arg_num = na;
                    if p < 0 {
                        self.flags.prec = None;
                    } else if present {
                        self.flags.prec = Some(p as usize);
                    }
                    if !present {
                        self.push_str("%!(BADPREC)");
                        self.flags.prec = None;
                    }
                    after_index = false;
                } else {
                    let (p, present, ni) = parse_num(fb, i, end);
                    i = ni;
                    self.flags.prec = Some(if present { p } else { 0 });
                }
            }
            if !after_index {
                let (na, ni, ai, ok) = arg_number(arg_num, format, i, args.len());
                arg_num = na;
                i = ni;
                after_index = ai;
                if ai {
                    reordered = true;
                }
                if !ok {
                    good_arg_num = false;
                }
            }
            let _ = after_index;
            if i >= end {
                self.push_str("%!(NOVERB)");
                break;
            }
            let verb = format[i..].chars().next().unwrap_or('?');
            i += verb.len_utf8();
            if verb == '%' {
                self.push('%');
            } else if !good_arg_num {
                self.push_str("%!");
                self.push(verb);
                self.push_str("(BADINDEX)");
            } else if arg_num >= args.len() {
                self.push_str("%!");
                self.push(verb);
                self.push_str("(MISSING)");
            } else {
                let mut verb = verb;
                if verb == 'w' {
                    verb = 'v';
                }
                if verb == 'v' {
                    self.flags.sharp_v = self.flags.sharp;
                    self.flags.sharp = false;
                    self.flags.plus_v = self.flags.plus;
                    self.flags.plus = false;
                }
                self.print_arg(&args[arg_num], verb, 0);
                arg_num += 1;
            }
        }
        if !reordered && arg_num < args.len() {
            self.flags = Flags::default();
            self.push_str("%!(EXTRA ");
            for (k, a) in args[arg_num..].iter().enumerate() {
                if k > 0 {
                    self.push_str(", ");
                }
                if a.is_nil() {
                    self.push_str("<nil>");
                } else {
                    self.push_str(&a.type_name());
                    self.push('=');
                    self.print_arg(a, 'v', 0);
                }
            }
            self.push(')');
        }
    }

    // ---- values ------------------------------------------------------------------

    fn bad_verb(&mut self, v: &Value, verb: char, depth: usize) {
        self.erroring = true;
        self.push_str("%!");
        self.push(verb);
        self.push('(');
        if v.is_nil() {
            self.push_str("<nil>");
        } else {
            self.push_str(&v.type_name());
            self.push('=');
            self.print_arg(v, 'v', depth);
        }
        self.push(')');
        self.erroring = false;
    }

    fn print_arg(&mut self, v: &Value, verb: char, depth: usize) {
        if self.full() {
            return;
        }
        if depth > MAX_DEPTH {
            self.push_str("...");
            return;
        }
        if v.is_nil() {
            if depth > 0 {
                // a nil element inside a container (its static type is `interface {}`)
                self.pad(if self.flags.sharp_v && verb == 'v' {
                    "interface {}(nil)"
                } else {
                    "<nil>"
                });
                return;
            }
            match verb {
                'T' | 'v' => self.pad("<nil>"),
                _ => self.bad_verb(v, verb, depth),
            }
            return;
        }
        if verb == 'T' {
            let t = v.type_name();
            self.pad(&t);
            return;
        }
        if verb == 'p' {
            match v {
                Value::Map(_)
                | Value::List(_)
                | Value::Slice(_)
                | Value::Bytes(_)
                | Value::Func(_) => {
                    self.pad("0xc000010000");
                }
                Value::Object(o) if o.type_name().starts_with('*') => self.pad("0xc000010000"),
                _ => self.bad_verb(v, verb, depth),
            }
            return;
        }
        if verb == 'v' && self.flags.sharp_v && self.fmt_go_syntax(v, depth) {
            return;
        }
        match v {
            Value::Nil => {}
            Value::Bool(b) => match verb {
                't' | 'v' => self.pad(if *b { "true" } else { "false" }),
                _ => self.bad_verb(v, verb, depth),
            },
            Value::Int(i) | Value::Int64(i) => self.fmt_integer(*i as u64, true, verb, v, depth),
            Value::Int8(i) => self.fmt_integer(i64::from(*i) as u64, true, verb, v, depth),
            Value::Int16(i) => self.fmt_integer(i64::from(*i) as u64, true, verb, v, depth),
            Value::Int32(i) => self.fmt_integer(i64::from(*i) as u64, true, verb, v, depth),
            Value::Uint(u) | Value::Uint64(u) => self.fmt_integer(*u, false, verb, v, depth),
            Value::Uint8(u) => self.fmt_integer(u64::from(*u), false, verb, v, depth),
            Value::Uint16(u) => self.fmt_integer(u64::from(*u), false, verb, v, depth),
            Value::Uint32(u) => self.fmt_integer(u64::from(*u), false, verb, v, depth),
            Value::Duration(d) => match verb {
                'v' | 's' | 'x' | 'X' | 'q' if !self.erroring => {
                    let s = esr_api::duration::format(GoDuration::from_nanos(*d));
                    self.fmt_string(&s, verb, v, depth);
                }
                _ => self.fmt_integer(*d as u64, true, verb, v, depth),
            },
            Value::Float32(f) => self.fmt_float_verb(f64::from(*f), 32, verb, v, depth),
            Value::Float64(f) => self.fmt_float_verb(*f, 64, verb, v, depth),
            Value::Complex128(re, im) => self.fmt_complex(*re, *im, verb, v, depth),
            Value::String(s) => self.fmt_string(s, verb, v, depth),
            Value::BinaryString(b) => self.fmt_string_bytes(b, verb, v, depth),
            Value::Bytes(b) => self.fmt_bytes(b, verb, v, depth),
            Value::List(items) => self.fmt_list(items, verb, depth),
            Value::Slice(s) => {
                if s.elem == GoType::Uint8 && matches!(verb, 's' | 'q' | 'x' | 'X') {
                    let bytes: Vec<u8> = s
                        .items
                        .iter()
                        .map(|x| x.uint_bits().unwrap_or(0) as u8)
                        .collect();
                    self.fmt_bytes(&bytes, verb, v, depth);
                } else {
                    self.fmt_list(&s.items, verb, depth)
                }
            }
            Value::Map(m) => {
                let entries = m.entries();
                self.push_str("map[");
                for (k, (key, val)) in entries.iter().enumerate() {
                    if k > 0 {
                        self.push(' ');
                    }
                    let kv = Value::String(key.clone());
                    self.print_arg(&kv, verb, depth + 1);
                    self.push(':');
                    self.print_arg(val, verb, depth + 1);
                }
                self.push(']');
            }
            Value::StringMap(m) => {
                self.push_str("map[");
                for (k, (key, val)) in m.iter().enumerate() {
                    if k > 0 {
                        self.push(' ');
                    }
                    self.fmt_string(key, verb, &Value::Nil, depth + 1);
                    self.push(':');
                    self.fmt_string(val, verb, &Value::Nil, depth + 1);
                }
                self.push(']');
            }
            Value::Object(o) => match verb {
                'v' | 's' | 'x' | 'X' | 'q' => {
                    let s = if verb == 's' {
                        o.format_s()
                    } else {
                        o.format_v()
                    };
                    self.fmt_string(&s, verb, v, depth);
                }
                _ => self.bad_verb(v, verb, depth),
            },
            Value::Func(_) => match verb {
                'v' => self.pad("0x4a3b20"),
                _ => self.bad_verb(v, verb, depth),
            },
        }
    }

    /// `%#v` of the values whose Go syntax differs from `%v`: composites print as
    /// `type{elem, elem}` (maps as `type{key:value, ...}` in key order), `[]byte` in
    /// hex (`[]byte{0x61}`), and `time.Duration` as its integer (it has a `String`
    /// method but no `GoString`). Returns false for every other value.
    fn fmt_go_syntax(&mut self, v: &Value, depth: usize) -> bool {
        match v {
            Value::List(items) => self.fmt_go_elems(&v.type_name(), items.iter(), depth),
            Value::Slice(s) if s.nil => {
                self.push_str(&v.type_name());
                self.push_str("(nil)");
            }
            Value::Slice(s) => self.fmt_go_elems(&v.type_name(), s.items.iter(), depth),
            Value::Bytes(b) => {
                self.push_str("[]byte{");
                for (k, c) in b.iter().enumerate() {
                    if k > 0 {
                        self.push_str(", ");
                    }
                    self.push_str(&format!("{c:#x}"));
                }
                self.push('}');
            }
            Value::Map(m) => self.fmt_go_map(&v.type_name(), m.entries(), depth),
            Value::StringMap(m) => self.fmt_go_map(
                "map[string]string",
                m.iter().map(|(k, s)| (k.clone(), Value::String(s.clone()))),
                depth,
            ),
            Value::Duration(d) => self.fmt_integer(*d as u64, true, 'v', v, depth),
            _ => return false,
        }
        true
    }

    fn fmt_go_map(
        &mut self,
        type_name: &str,
        entries: impl IntoIterator<Item = (String, Value)>,
        depth: usize,
    ) {
        self.push_str(type_name);
        self.push('{');
        for (k, (key, val)) in entries.into_iter().enumerate() {
            if k > 0 {
                self.push_str(", ");
            }
            self.print_arg(&Value::String(key), 'v', depth + 1);
            self.push(':');
            self.print_arg(&val, 'v', depth + 1);
        }
        self.push('}');
    }

    fn fmt_go_elems<'a>(
        &mut self,
        type_name: &str,
        items: impl Iterator<Item = &'a Value>,
        depth: usize,
    ) {
        self.push_str(type_name);
        self.push('{');
        for (k, it) in items.enumerate() {
            if k > 0 {
                self.push_str(", ");
            }
            self.print_arg(it, 'v', depth + 1);
        }
        self.push('}');
    }

    fn fmt_list(&mut self, items: &[Value], verb: char, depth: usize) {
        self.push('[');
        for (k, it) in items.iter().enumerate() {
            if k > 0 {
                self.push(' ');
            }
            self.print_arg(it, verb, depth + 1);
        }
        self.push(']');
    }

    fn fmt_string(&mut self, s: &str, verb: char, v: &Value, depth: usize) {
        self.fmt_string_bytes(s.as_bytes(), verb, v, depth)
    }

    fn fmt_string_bytes(&mut self, s: &[u8], verb: char, v: &Value, depth: usize) {
        match verb {
            'v' => {
                if self.flags.sharp_v {
                    let q = quote_bytes_with(s, false);
                    self.pad(&q);
                } else {
                    self.fmt_s(s)
                }
            }
            's' => self.fmt_s(s),
            'x' => self.fmt_sx(s, LDIGITS),
            'X' => self.fmt_sx(s, UDIGITS),
            'q' => self.fmt_q(s),
            _ => {
                if v.is_nil() {
                    // map[string]string elements: type is string
                    self.bad_verb(&Value::from_go_bytes(s.to_vec()), verb, depth)
                } else {
                    self.bad_verb(v, verb, depth)
                }
            }
        }
    }

    fn fmt_bytes(&mut self, b: &[u8], verb: char, v: &Value, depth: usize) {
        match verb {
            's' => self.fmt_s(b),
            'x' => self.fmt_sx(b, LDIGITS),
            'X' => self.fmt_sx(b, UDIGITS),
            'q' => self.fmt_q(b),
            _ => {
                self.push('[');
                for (k, c) in b.iter().enumerate() {
                    if k > 0 {
                        self.push(' ');
                    }
                    self.fmt_integer(u64::from(*c), false, verb, &Value::Uint8(*c), depth + 1);
                }
                self.push(']');
                let _ = v;
            }
        }
    }

    fn truncate<'a>(&self, s: &'a [u8]) -> &'a [u8] {
        if let Some(p) = self.flags.prec {
            let mut n = 0usize;
            let mut idx = 0usize;
            for chunk in s.utf8_chunks() {
                for c in chunk.valid().chars() {
                    if n == p {
                        return &s[..idx];
                    }
                    n += 1;
                    idx += c.len_utf8();
                }
                for _ in chunk.invalid() {
                    if n == p {
                        return &s[..idx];
                    }
                    n += 1;
                    idx += 1;
                }
            }
        }
        s
    }

    fn pad_bytes(&mut self, s: &[u8]) {
        let Some(wid) = self.flags.wid.filter(|w| *w > 0) else {
            self.push_bytes(s);
            return;
        };
        let n = rune_count(s);
        let width = wid.saturating_sub(n);
        if !self.flags.minus {
            self.write_padding(width);
            self.push_bytes(s);
        } else {
            self.push_bytes(s);
            self.write_padding(width);
        }
    }

    fn fmt_s(&mut self, s: &[u8]) {
        let t = self.truncate(s);
        self.pad_bytes(t);
    }

    fn fmt_sx(&mut self, b: &[u8], digits: &[u8]) {
        let mut length = b.len();
        if let Some(p) = self.flags.prec
            && p < length
        {
            length = p;
        }
        let mut width = 2 * length;
        if width > 0 {
            if self.flags.space {
                if self.flags.sharp {
                    width *= 2;
                }
                width += length - 1;
            } else if self.flags.sharp {
                width += 2;
            }
        } else {
            if let Some(w) = self.flags.wid {
                self.write_padding(w);
            }
            return;
        }
        let wid = self.flags.wid.unwrap_or(0);
        if wid > width && !self.flags.minus {
            self.write_padding(wid - width);
        }
        let mut out = String::with_capacity(width);
        if self.flags.sharp {
            out.push('0');
            out.push(digits[16] as char);
        }
        for (i, c) in b.iter().take(length).enumerate() {
            if self.flags.space && i > 0 {
                out.push(' ');
                if self.flags.sharp {
                    out.push('0');
                    out.push(digits[16] as char);
                }
            }
            out.push(digits[(c >> 4) as usize] as char);
            out.push(digits[(c & 0xF) as usize] as char);
        }
        self.push_str(&out);
        if wid > width && self.flags.minus {
            self.write_padding(wid - width);
        }
    }

    fn fmt_q(&mut self, s: &[u8]) {
        let s = self.truncate(s);
        if self.flags.sharp
            && let Ok(text) = std::str::from_utf8(s)
            && can_backquote(text)
        {
            let q = format!("`{text}`");
            self.pad(&q);
            return;
        }
        let q = quote_bytes_with(s, self.flags.plus);
        self.pad(&q);
    }

    fn fmt_integer(&mut self, u: u64, signed: bool, verb: char, v: &Value, depth: usize) {
        match verb {
            'v' => {
                if self.flags.sharp_v && !signed {
                    self.fmt_0x64(u, true)
                } else {
                    self.fmt_int_base(u, 10, signed, verb, LDIGITS)
                }
            }
            'd' => self.fmt_int_base(u, 10, signed, verb, LDIGITS),
            'b' => self.fmt_int_base(u, 2, signed, verb, LDIGITS),
            'o' | 'O' => self.fmt_int_base(u, 8, signed, verb, LDIGITS),
            'x' => self.fmt_int_base(u, 16, signed, verb, LDIGITS),
            'X' => self.fmt_int_base(u, 16, signed, verb, UDIGITS),
            'c' => {
                let c = char::from_u32(u32::try_from(u).unwrap_or(0xFFFD)).unwrap_or('\u{FFFD}');
                let s = c.to_string();
                self.pad(&s);
            }
            'q' => {
                let c = char::from_u32(u32::try_from(u).unwrap_or(0xFFFD)).unwrap_or('\u{FFFD}');
                let s = if self.flags.sharp && can_backquote(&c.to_string()) && c != '`' {
                    format!("'{c}'")
                } else {
                    quote_rune(c, self.flags.plus)
                };
                self.pad(&s);
            }
            'U' => {
                let mut s = format!("U+{u:04X}");
                if self.flags.prec.is_some_and(|p| p > 4) {
                    let p = self.flags.prec.unwrap_or(4);
                    s = format!("U+{u:0p$X}");
                }
                if self.flags.sharp
                    && let Some(c) = u32::try_from(u).ok().and_then(char::from_u32)
                    && is_print(c)
                {
                    s.push_str(&format!(" '{c}'"));
                }
                self.pad_no_zero(&s);
            }
            _ => self.bad_verb(v, verb, depth),
        }
    }

    fn fmt_0x64(&mut self, u: u64, leading0x: bool) {
        let sharp = self.flags.sharp;
        self.flags.sharp = leading0x;
        self.fmt_int_base(u, 16, false, 'v', LDIGITS);
        self.flags.sharp = sharp;
    }

    fn fmt_int_base(&mut self, u: u64, base: u64, signed: bool, verb: char, digits: &[u8]) {
        let negative = signed && (u as i64) < 0;
        let mut u = if negative {
            (u as i64).unsigned_abs()
        } else {
            u
        };
        let mut prec = 0usize;
        if let Some(p) = self.flags.prec {
            prec = p;
            if prec == 0 && u == 0 {
                let z = self.flags.zero;
                self.flags.zero = false;
                let w = self.flags.wid.unwrap_or(0);
                self.write_padding(w);
                self.flags.zero = z;
                return;
            }
        } else if self.flags.zero && !self.flags.minus && self.flags.wid.is_some() {
            prec = self.flags.wid.unwrap_or(0);
            if negative || self.flags.plus || self.flags.space {
                prec = prec.saturating_sub(1);
            }
        }
        let mut rev: Vec<u8> = Vec::with_capacity(24);
        if u == 0 {
            rev.push(b'0');
        }
        while u > 0 {
            rev.push(digits[(u % base) as usize]);
            u /= base;
        }
        while rev.len() < prec {
            rev.push(b'0');
        }
        if self.flags.sharp {
            match base {
                2 => {
                    rev.push(b'b');
                    rev.push(b'0');
                }
                8 if rev.last() != Some(&b'0') => {
                    rev.push(b'0');
                }
                16 => {
                    rev.push(digits[16]);
                    rev.push(b'0');
                }
                _ => {}
            }
        }
        if verb == 'O' {
            rev.push(b'o');
            rev.push(b'0');
        }
        if negative {
            rev.push(b'-');
        } else if self.flags.plus {
            rev.push(b'+');
        } else if self.flags.space {
            rev.push(b' ');
        }
        rev.reverse();
        let s = String::from_utf8_lossy(&rev).into_owned();
        self.pad_no_zero(&s);
    }

    fn fmt_float_verb(&mut self, f: f64, bits: u32, verb: char, v: &Value, depth: usize) {
        match verb {
            'v' => self.fmt_float(f, bits, 'g', -1),
            'b' | 'g' | 'G' | 'x' | 'X' => self.fmt_float(f, bits, verb, -1),
            'f' | 'e' | 'E' => self.fmt_float(f, bits, verb, 6),
            'F' => self.fmt_float(f, bits, 'f', 6),
            _ => self.bad_verb(v, verb, depth),
        }
    }

    fn fmt_complex(&mut self, re: f64, im: f64, verb: char, v: &Value, depth: usize) {
        match verb {
            'v' | 'b' | 'g' | 'G' | 'x' | 'X' | 'f' | 'F' | 'e' | 'E' => {
                let old_plus = self.flags.plus;
                self.push('(');
                let (vb, prec) = match verb {
                    'v' => ('g', -1),
                    'f' | 'e' | 'E' => (verb, 6),
                    'F' => ('f', 6),
                    _ => (verb, -1),
                };
                self.fmt_float(re, 64, vb, prec);
                self.flags.plus = true;
                self.fmt_float(im, 64, vb, prec);
                self.push_str("i)");
                self.flags.plus = old_plus;
            }
            _ => self.bad_verb(v, verb, depth),
        }
    }

    fn fmt_float(&mut self, v: f64, bits: u32, verb: char, prec: i32) {
        let prec = match self.flags.prec {
            Some(p) => i32::try_from(p).unwrap_or(i32::MAX),
            None => prec,
        };
        let formatted = format_float(v, verb, prec, bits);
        let mut num: Vec<u8> = Vec::with_capacity(formatted.len() + 1);
        if formatted.starts_with('-') || formatted.starts_with('+') {
            num.extend_from_slice(formatted.as_bytes());
        } else {
            num.push(b'+');
            num.extend_from_slice(formatted.as_bytes());
        }
        if self.flags.space && num[0] == b'+' && !self.flags.plus {
            num[0] = b' ';
        }
        if num.len() > 1 && (num[1] == b'I' || num[1] == b'N') {
            let z = self.flags.zero;
            self.flags.zero = false;
            if num[1] == b'N' && !self.flags.space && !self.flags.plus {
                num.remove(0);
            }
            let s = String::from_utf8_lossy(&num).into_owned();
            self.pad(&s);
            self.flags.zero = z;
            return;
        }
        if self.flags.sharp && verb != 'b' {
            let mut digits: i32 = 0;
            if matches!(verb, 'v' | 'g' | 'G' | 'x') {
                digits = prec;
                if digits == -1 {
                    digits = 6;
                }
            }
            let mut tail: Vec<u8> = Vec::new();
            let mut has_point = false;
            let mut saw_nonzero = false;
            let mut i = 1;
            while i < num.len() {
                match num[i] {
                    b'.' => has_point = true,
                    b'p' | b'P' => {
                        tail.extend_from_slice(&num[i..]);
                        num.truncate(i);
                        break;
                    }
                    b'e' | b'E' if verb != 'x' && verb != 'X' => {
                        tail.extend_from_slice(&num[i..]);
                        num.truncate(i);
                        break;
                    }
                    c => {
                        if c != b'0' {
                            saw_nonzero = true;
                        }
                        if saw_nonzero {
                            digits -= 1;
                        }
                    }
                }
                i += 1;
            }
            if !has_point {
                if num.len() == 2 && num[1] == b'0' {
                    digits -= 1;
                }
                num.push(b'.');
            }
            while digits > 0 {
                num.push(b'0');
                digits -= 1;
            }
            num.extend_from_slice(&tail);
        }
        let s = String::from_utf8_lossy(&num).into_owned();
        if self.flags.plus || num[0] != b'+' {
            let wid = self.flags.wid.unwrap_or(0);
            if self.flags.zero && !self.flags.minus && self.flags.wid.is_some() && wid > num.len() {
                self.push(num[0] as char);
                self.write_padding(wid - num.len());
                self.push_str(&s[1..]);
                return;
            }
            self.pad(&s);
            return;
        }
        self.pad(&s[1..]);
    }
}

fn parse_num(fb: &[u8], mut i: usize, end: usize) -> (usize, bool, usize) {
    if i >= end {
        return (0, false, end);
    }
    let mut num = 0usize;
    let mut isnum = false;
    while i < end && fb[i].is_ascii_digit() {
        if num >= TOO_LARGE {
            return (0, false, end);
        }
        num = num * 10 + usize::from(fb[i] - b'0');
        isnum = true;
        i += 1;
    }
    (num, isnum, i)
}

/// Returns (argNum, i, found, ok).
fn arg_number(
    arg_num: usize,
    format: &str,
    i: usize,
    num_args: usize,
) -> (usize, usize, bool, bool) {
    let fb = format.as_bytes();
    if fb.len() <= i || fb[i] != b'[' {
        return (arg_num, i, false, true);
    }
    // parseArgNumber
    let s = &fb[i..];
    if s.len() < 3 {
        return (arg_num, i + 1, false, false);
    }
    for j in 1..s.len() {
        if s[j] == b']' {
            let (width, ok, newi) = parse_num(s, 1, j);
            if !ok || newi != j {
                return (arg_num, i + j + 1, false, false);
            }
            let idx = width as isize - 1;
            if idx >= 0 && (idx as usize) < num_args {
                return (idx as usize, i + j + 1, true, true);
            }
            return (arg_num, i + j + 1, true, false);
        }
    }
    (arg_num, i + 1, false, false)
}

fn int_from_arg(args: &[Value], arg_num: usize) -> (i64, bool, usize) {
    if arg_num < args.len() {
        let v = &args[arg_num];
        let n = match v {
            Value::Uint(u) | Value::Uint64(u) => i64::try_from(*u).ok(),
            _ => v.int_bits().or_else(|| v.uint_bits().map(|u| u as i64)),
        };
        if let Some(n) = n {
            if n.unsigned_abs() > TOO_LARGE as u64 {
                return (0, false, arg_num + 1);
            }
            return (n, true, arg_num + 1);
        }
        return (0, false, arg_num + 1);
    }
    (0, false, arg_num)
}

// ---- strconv.FormatFloat -------------------------------------------------------------

/// Decimal digits of a float: `digits` (no leading zeros, may be empty for 0) and
/// the decimal point position `dp` (value = 0.digits × 10^dp).
struct Digits {
    d: Vec<u8>,
    dp: i32,
}

fn parse_exp_form(s: &str) -> Digits {
    // s like "1.2345e8" or "1e-7" or "0e0" (non-negative)
    let (mant, exp) = s.split_once('e').unwrap_or((s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let d: Vec<u8> = mant.bytes().filter(|c| c.is_ascii_digit()).collect();
    if d.iter().all(|c| *c == b'0') {
        return Digits {
            d: Vec::new(),
            dp: 0,
        };
    }
    Digits { d, dp: exp + 1 }
}

fn shortest_digits(v: f64, bits: u32) -> Digits {
    let s = if bits == 32 {
        format!("{:e}", (v as f32).abs())
    } else {
        format!("{:e}", v.abs())
    };
    parse_exp_form(&s)
}

fn precision_digits(v: f64, bits: u32, sig: usize) -> Digits {
    let p = sig.saturating_sub(1);
    let s = if bits == 32 {
        format!("{:.*e}", p, (v as f32).abs())
    } else {
        format!("{:.*e}", p, v.abs())
    };
    parse_exp_form(&s)
}

fn fmt_e(out: &mut String, d: &Digits, prec: i32, fmt: char) {
    let first = if d.d.is_empty() { b'0' } else { d.d[0] };
    out.push(first as char);
    if prec > 0 {
        out.push('.');
        let mut i = 1usize;
        let m = d.d.len().min(prec as usize + 1);
        if i < m {
            out.push_str(std::str::from_utf8(&d.d[i..m]).unwrap_or(""));
            i = m;
        }
        while i <= prec as usize {
            out.push('0');
            i += 1;
        }
    }
    out.push(fmt);
    let mut exp = d.dp - 1;
    if d.d.is_empty() {
        exp = 0;
    }
    if exp < 0 {
        out.push('-');
        exp = -exp;
    } else {
        out.push('+');
    }
    if exp < 10 {
        out.push('0');
        out.push_str(&exp.to_string());
    } else {
        out.push_str(&exp.to_string());
    }
}

fn fmt_f(out: &mut String, d: &Digits, prec: i32) {
    if d.dp > 0 {
        let m = d.d.len().min(d.dp as usize);
        out.push_str(std::str::from_utf8(&d.d[..m]).unwrap_or(""));
        for _ in m..d.dp as usize {
            out.push('0');
        }
    } else {
        out.push('0');
    }
    if prec > 0 {
        out.push('.');
        for i in 1..=prec {
            let j = d.dp + i - 1;
            let c = if j >= 0 && (j as usize) < d.d.len() {
                d.d[j as usize]
            } else {
                b'0'
            };
            out.push(c as char);
        }
    }
}

/// Go's `strconv.FormatFloat(v, fmt, prec, bits)` for the formats `e`, `E`, `f`,
/// `g`, `G` (`prec` -1 = shortest representation that round-trips).
pub fn format_float(v: f64, fmt: char, prec: i32, bits: u32) -> String {
    let mut out = String::new();
    if v.is_nan() {
        return "NaN".into();
    }
    if v.is_infinite() {
        return if v > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    if v.is_sign_negative() {
        out.push('-');
    }
    let shortest = prec < 0;
    match fmt {
        'f' | 'F' => {
            if shortest {
                let d = shortest_digits(v, bits);
                let p = (d.d.len() as i32 - d.dp).max(0);
                fmt_f(&mut out, &d, p);
            } else {
                let s = if bits == 32 {
                    format!("{:.*}", prec as usize, (v as f32).abs())
                } else {
                    format!("{:.*}", prec as usize, v.abs())
                };
                out.push_str(&s);
            }
        }
        'e' | 'E' => {
            if shortest {
                let d = shortest_digits(v, bits);
                let p = (d.d.len() as i32 - 1).max(0);
                fmt_e(&mut out, &d, p, fmt);
            } else {
                let d = precision_digits(v, bits, prec as usize + 1);
                fmt_e(&mut out, &d, prec, fmt);
            }
        }
        'g' | 'G' => {
            let efmt = if fmt == 'g' { 'e' } else { 'E' };
            let (d, mut prec) = if shortest {
                let d = shortest_digits(v, bits);
                let n = d.d.len() as i32;
                (d, n)
            } else {
                let p = if prec == 0 { 1 } else { prec };
                let mut d = precision_digits(v, bits, p as usize);
                while d.d.last() == Some(&b'0') {
                    d.d.pop();
                }
                if d.d.is_empty() {
                    d.dp = 0;
                }
                (d, p)
            };
            let nd = d.d.len() as i32;
            let mut eprec = prec;
            if eprec > nd && nd >= d.dp {
                eprec = nd;
            }
            if shortest {
                eprec = 6;
            }
            let exp = d.dp - 1;
            if exp < -4 || exp >= eprec {
                if prec > nd {
                    prec = nd;
                }
                fmt_e(&mut out, &d, prec - 1, efmt);
            } else {
                if prec > d.dp {
                    prec = nd;
                }
                fmt_f(&mut out, &d, (prec - d.dp).max(0));
            }
        }
        'b' => {
            let bitsv = v.to_bits();
            let mant = bitsv & ((1u64 << 52) - 1);
            let exp = ((bitsv >> 52) & 0x7FF) as i64;
            let (m, e) = if exp == 0 {
                (mant, -1074)
            } else {
                (mant | (1u64 << 52), exp - 1075)
            };
            out.push_str(&format!("{m}p{}{e}", if e >= 0 { "+" } else { "" }));
        }
        _ => {
            // hexadecimal float (%x): not modelled exactly; use %e
            let d = shortest_digits(v, bits);
            let p = (d.d.len() as i32 - 1).max(0);
            fmt_e(&mut out, &d, p, 'e');
        }
    }
    out
}

// ---- strconv.Quote ---------------------------------------------------------------------

/// Go's `unicode.IsPrint` (approximated without the Unicode tables for unassigned
/// code points): letters, marks, numbers, punctuation, symbols and U+0020.
pub fn is_print(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    if c.is_control() || c.is_whitespace() {
        return false;
    }
    let u = c as u32;
    !matches!(u,
        0x00AD | 0x034F | 0x061C | 0x115F | 0x1160 | 0x17B4 | 0x17B5 | 0x180B..=0x180F
        | 0x200B..=0x200F | 0x2028..=0x202E | 0x2060..=0x206F | 0x3164 | 0xFE00..=0xFE0F
        | 0xFEFF | 0xFFA0 | 0xFFF0..=0xFFFB | 0xFFFE | 0xFFFF | 0xE000..=0xF8FF
        | 0x1BCA0..=0x1BCA3 | 0x1D173..=0x1D17A | 0xE0000..=0xE0FFF | 0xF0000..=0x10FFFF)
        && (u & 0xFFFE) != 0xFFFE
}

fn append_escaped_rune(out: &mut String, r: char, quote: char, ascii_only: bool) {
    if r == quote || r == '\\' {
        out.push('\\');
        out.push(r);
        return;
    }
    if ascii_only {
        if (r as u32) < 0x80 && is_print(r) {
            out.push(r);
            return;
        }
    } else if is_print(r) {
        out.push(r);
        return;
    }
    match r {
        '\u{7}' => out.push_str("\\a"),
        '\u{8}' => out.push_str("\\b"),
        '\u{c}' => out.push_str("\\f"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\u{b}' => out.push_str("\\v"),
        _ => {
            let u = r as u32;
            if u < 0x20 || u == 0x7f {
                out.push_str(&format!("\\x{u:02x}"));
            } else if u < 0x10000 {
                out.push_str(&format!("\\u{u:04x}"));
            } else {
                out.push_str(&format!("\\U{u:08x}"));
            }
        }
    }
}

fn quote_with(s: &str, quote: char, ascii_only: bool) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for r in s.chars() {
        append_escaped_rune(&mut out, r, quote, ascii_only);
    }
    out.push(quote);
    out
}

/// Go's `strconv.Quote` for a valid UTF-8 string.
pub fn quote(s: &str) -> String {
    quote_with(s, '"', false)
}

/// Go's `strconv.Quote` for arbitrary bytes: invalid UTF-8 bytes become `\xNN`.
pub fn quote_bytes(b: &[u8]) -> String {
    quote_bytes_with(b, false)
}

/// Go's `strconv.Quote` (or `QuoteToASCII` with `ascii_only`) for arbitrary bytes.
pub fn quote_bytes_with(b: &[u8], ascii_only: bool) -> String {
    let mut out = String::with_capacity(b.len() + 2);
    out.push('"');
    for chunk in b.utf8_chunks() {
        for r in chunk.valid().chars() {
            append_escaped_rune(&mut out, r, '"', ascii_only);
        }
        for x in chunk.invalid() {
            out.push_str(&format!("\\x{x:02x}"));
        }
    }
    out.push('"');
    out
}

/// Number of runes Go counts in a byte string (each invalid byte counts as one).
pub fn rune_count(b: &[u8]) -> usize {
    b.utf8_chunks()
        .map(|c| c.valid().chars().count() + c.invalid().len())
        .sum()
}

fn quote_rune(c: char, ascii_only: bool) -> String {
    let mut out = String::new();
    out.push('\'');
    append_escaped_rune(&mut out, c, '\'', ascii_only);
    out.push('\'');
    out
}

fn can_backquote(s: &str) -> bool {
    s.chars()
        .all(|c| c != '`' && c != '\u{FEFF}' && (c == '\t' || !(c < ' ' || c == '\u{7f}')))
}

#[cfg(test)]
#[allow(clippy::approx_constant)]
mod tests {
    use super::*;

    fn f(fmt: &str, args: &[Value]) -> String {
        sprintf(fmt, args)
    }

    #[test]
    fn floats_v() {
        assert_eq!(format_v(&Value::Float64(1e6)), "1e+06");
        assert_eq!(format_v(&Value::Float64(123456789.0)), "1.23456789e+08");
        assert_eq!(format_v(&Value::Float64(100000.0)), "100000");
        assert_eq!(format_v(&Value::Float64(0.0001)), "0.0001");
        assert_eq!(format_v(&Value::Float64(0.00001)), "1e-05");
        assert_eq!(format_v(&Value::Float64(2.5)), "2.5");
        assert_eq!(format_v(&Value::Float64(1.0)), "1");
        assert_eq!(format_v(&Value::Float64(0.0)), "0");
        assert_eq!(format_v(&Value::Float64(-0.0)), "-0");
        assert_eq!(format_v(&Value::Float64(1e21)), "1e+21");
        assert_eq!(format_v(&Value::Float64(f64::INFINITY)), "+Inf");
        assert_eq!(format_v(&Value::Float64(f64::NAN)), "NaN");
        assert_eq!(format_v(&Value::Complex128(0.0, 1.0)), "(0+1i)");
        assert_eq!(format_v(&Value::Float32(0.1)), "0.1");
    }

    #[test]
    fn printf_verbs() {
        assert_eq!(f("%e", &[Value::Float64(1234.5678)]), "1.234568e+03");
        assert_eq!(f("%08.3f", &[Value::Float64(3.14159)]), "0003.142");
        assert_eq!(f("%10.4f|", &[Value::Float64(3.14159265)]), "    3.1416|");
        assert_eq!(f("%.1f", &[Value::Float64(2.25)]), "2.2");
        assert_eq!(f("%g", &[Value::Float64(100000.0)]), "100000");
        assert_eq!(f("%.3g", &[Value::Float64(1234.5678)]), "1.23e+03");
        assert_eq!(f("%.3g", &[Value::Float64(1.0)]), "1");
        assert_eq!(f("%#.3g", &[Value::Float64(1.0)]), "1.00");
        assert_eq!(f("%+.2e", &[Value::Float64(0.0)]), "+0.00e+00");
        assert_eq!(f("%x", &[Value::Int(-255)]), "-ff");
        assert_eq!(f("%#x", &[Value::Int(255)]), "0xff");
        assert_eq!(f("%08b", &[Value::Int(5)]), "00000101");
        assert_eq!(f("%o %O", &[Value::Int(8), Value::Int(8)]), "10 0o10");
        assert_eq!(f("%c", &[Value::Int(65)]), "A");
        assert_eq!(f("%q", &[Value::Int(65)]), "'A'");
        assert_eq!(f("%U", &[Value::Int(0x1F600)]), "U+1F600");
        assert_eq!(f("%+d", &[Value::Int(5)]), "+5");
        assert_eq!(f("%-5s|", &[Value::str("ab")]), "ab   |");
        assert_eq!(f("%5.1s|", &[Value::str("abc")]), "    a|");
        assert_eq!(f("%x", &[Value::str("hi")]), "6869");
        assert_eq!(f("% X", &[Value::str("hi")]), "68 69");
        assert_eq!(f("%q", &[Value::str("a\"b\n")]), "\"a\\\"b\\n\"");
        assert_eq!(f("%#q", &[Value::str("ab")]), "`ab`");
        assert_eq!(f("%t", &[Value::Bool(true)]), "true");
        assert_eq!(
            f("%T", &[Value::map(Default::default())]),
            "map[string]interface {}"
        );
        assert_eq!(
            f("%s", &[Value::str("a"), Value::str("b")]),
            "a%!(EXTRA string=b)"
        );
        assert_eq!(f("%d", &[Value::str("42")]), "%!d(string=42)");
        assert_eq!(f("%s", &[Value::Int(42)]), "%!s(int=42)");
        assert_eq!(f("%s %s", &[Value::str("a")]), "a %!s(MISSING)");
        assert_eq!(f("%", &[]), "%!(NOVERB)");
        assert_eq!(f("%%", &[]), "%");
        assert_eq!(f("%[2]s %[1]s", &[Value::str("a"), Value::str("b")]), "b a");
        assert_eq!(f("%*d", &[Value::Int(4), Value::Int(7)]), "   7");
        assert_eq!(f("%-*d|", &[Value::Int(4), Value::Int(7)]), "7   |");
        assert_eq!(f("%.*f", &[Value::Int(2), Value::Float64(3.14159)]), "3.14");
        assert_eq!(f("%d", &[Value::Nil]), "%!d(<nil>)");
        assert_eq!(f("%v", &[Value::Nil]), "<nil>");
        assert_eq!(f("%!", &[]), "%!!(MISSING)");
        assert_eq!(f("%z", &[Value::Int(1)]), "%!z(int=1)");
        assert_eq!(f("%.0d", &[Value::Int(0)]), "");
        assert_eq!(f("%6.2f%%", &[Value::Float64(12.3456)]), " 12.35%");
        assert_eq!(f("%v", &[Value::Duration(3_600_000_000_000)]), "1h0m0s");
        assert_eq!(f("%d", &[Value::Duration(5)]), "5");
        assert_eq!(f("%x", &[Value::bytes(vec![1u8, 171])]), "01ab");
        assert_eq!(f("%v", &[Value::bytes(vec![1u8, 171])]), "[1 171]");
        assert_eq!(f("%s", &[Value::bytes(b"hi".to_vec())]), "hi");
    }

    #[test]
    fn containers() {
        let l = Value::list(vec![
            Value::Int(1),
            Value::str("a"),
            Value::Float64(2.5),
            Value::Nil,
        ]);
        assert_eq!(format_v(&l), "[1 a 2.5 <nil>]");
        assert_eq!(f("%d", &[l]), "[1 %!d(string=a) %!d(float64=2.5) <nil>]");
        let mut m = std::collections::BTreeMap::new();
        m.insert("b".to_string(), Value::Int(2));
        m.insert("a".to_string(), Value::list(vec![Value::Int(1)]));
        assert_eq!(format_v(&Value::map(m)), "map[a:[1] b:2]");
        assert_eq!(f("%q", &[Value::strings(["a", "b"])]), "[\"a\" \"b\"]");
        assert_eq!(f("%5v|", &[Value::ints([1, 2])]), "[    1     2]|");
    }

    #[test]
    fn sprint_spacing() {
        assert_eq!(sprint(&[Value::Int(1), Value::str("a")]), "1a");
        assert_eq!(sprint(&[Value::Int(1), Value::Int(2)]), "1 2");
        assert_eq!(sprint(&[Value::str("a"), Value::str("b")]), "ab");
        assert_eq!(
            sprint(&[Value::Bool(true), Value::Bool(false)]),
            "true false"
        );
        assert_eq!(sprint(&[Value::Nil]), "<nil>");
        assert_eq!(sprintln(&[Value::str("a"), Value::str("b")]), "a b\n");
    }

    #[test]
    fn quoting() {
        assert_eq!(quote("é\u{0}\u{7f}"), "\"é\\x00\\x7f\"");
        assert_eq!(quote("\u{200b}"), "\"\\u200b\"");
        assert_eq!(quote_bytes(b"a\xffb"), "\"a\\xffb\"");
    }
}
