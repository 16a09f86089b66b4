//! spf13/cast v1.10 conversions (`ToInt64`, `ToInt`, `ToFloat64`) and the Go
//! `strconv` parsers they rely on.

use crate::value::Value;

/// Go's `float64 -> int64` conversion on amd64: truncation, and the "integer
/// indefinite" value `math.MinInt64` for NaN and out-of-range values.
pub fn f64_to_i64(f: f64) -> i64 {
    if f.is_nan() || !(-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&f) {
        return i64::MIN;
    }
    f.trunc() as i64
}

fn underscore_ok(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    let b = if !b.is_empty() && (b[0] == b'-' || b[0] == b'+') {
        &b[1..]
    } else {
        b
    };
    let mut saw = b'^';
    let mut hex = false;
    if b.len() >= 2 && b[0] == b'0' && matches!(b[1].to_ascii_lowercase(), b'b' | b'o' | b'x') {
        i = 2;
        saw = b'0';
        hex = b[1].eq_ignore_ascii_case(&b'x');
    }
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_digit() || (hex && c.is_ascii_hexdigit()) {
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

/// Go's `strconv.ParseInt(s, base, 64)` for base 0 (prefix detection) or an
/// explicit base.
pub fn parse_int(s: &str, base: u32) -> Option<i64> {
    if s.is_empty() {
        return None;
    }
    let (neg, body) = match s.as_bytes()[0] {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let mag = parse_uint(body, base, base == 0 && underscore_ok(s))?;
    if neg {
        if mag > (i64::MAX as u64) + 1 {
            return None;
        }
        Some((mag as i64).wrapping_neg())
    } else {
        i64::try_from(mag).ok()
    }
}

fn parse_uint(s: &str, base: u32, underscores: bool) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    let (base, digits) = if base == 0 {
        let b = s.as_bytes();
        if b[0] == b'0' {
            if b.len() >= 3 && b[1].eq_ignore_ascii_case(&b'x') {
                (16, &s[2..])
            } else if b.len() >= 3 && b[1].eq_ignore_ascii_case(&b'o') {
                (8, &s[2..])
            } else if b.len() >= 3 && b[1].eq_ignore_ascii_case(&b'b') {
                (2, &s[2..])
            } else {
                (8, &s[1..])
            }
        } else {
            (10, s)
        }
    } else {
        (base, s)
    };
    let mut n: u64 = 0;
    let mut any = false;
    for c in digits.chars() {
        if c == '_' {
            if !underscores {
                return None;
            }
            continue;
        }
        let d = c.to_digit(base)?;
        n = n.checked_mul(u64::from(base))?.checked_add(u64::from(d))?;
        any = true;
    }
    if !(any || (base == 8 && digits.is_empty() && s.len() == 1)) {
        // "0" alone is valid (octal prefix with no digits); "0x" is not.
        return if s == "0" { Some(0) } else { None };
    }
    Some(n)
}

/// Go's `strconv.Atoi`.
pub fn atoi(s: &str) -> i64 {
    parse_int(s, 10).unwrap_or(0)
}

/// Go's `strconv.ParseFloat(s, 64)` for decimal inputs (and inf/nan).
pub fn parse_float(s: &str) -> Option<f64> {
    if s.is_empty() || s.contains('_') {
        return None;
    }
    let lower = s.to_ascii_lowercase();
    let body = lower.trim_start_matches(['+', '-']);
    if body.starts_with("0x") {
        return None;
    }
    if body.starts_with("in") && body != "inf" && body != "infinity" {
        return None;
    }
    s.parse::<f64>().ok()
}

/// cast's `trimDecimal`: `"3.7"` -> `"3"`, `"-.5"` -> `"-0"`.
fn trim_decimal(s: &str) -> String {
    if !s.contains('.') {
        return s.to_string();
    }
    let b = s.as_bytes();
    let mut i = 0;
    if i < b.len() && (b[i] == b'-' || b[i] == b'+') {
        i += 1;
    }
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    let int_part = &s[..i];
    if i < b.len() && b[i] == b'.' && b[i + 1..].iter().all(u8::is_ascii_digit) {
        return match int_part {
            "-" | "+" => format!("{int_part}0"),
            "" => "0".to_string(),
            _ => int_part.to_string(),
        };
    }
    s.to_string()
}

/// spf13/cast `ToInt64` (errors give 0).
pub fn to_int64(v: &Value) -> i64 {
    match v {
        Value::Nil => 0,
        Value::Bool(b) => i64::from(*b),
        Value::Int(i) | Value::Int64(i) | Value::Duration(i) => *i,
        Value::Int8(i) => i64::from(*i),
        Value::Int16(i) => i64::from(*i),
        Value::Int32(i) => i64::from(*i),
        Value::Uint(u) | Value::Uint64(u) => *u as i64,
        Value::Uint8(u) => i64::from(*u),
        Value::Uint16(u) => i64::from(*u),
        Value::Uint32(u) => i64::from(*u),
        Value::Float32(f) => f64_to_i64(f64::from(*f)),
        Value::Float64(f) => f64_to_i64(*f),
        Value::String(s) => {
            if s.is_empty() {
                0
            } else {
                parse_int(&trim_decimal(s), 0).unwrap_or(0)
            }
        }
        _ => 0,
    }
}

/// spf13/cast `ToFloat64` (errors give 0).
pub fn to_float64(v: &Value) -> f64 {
    match v {
        Value::Nil => 0.0,
        Value::Bool(b) => f64::from(u8::from(*b)),
        Value::Int(i) | Value::Int64(i) | Value::Duration(i) => *i as f64,
        Value::Int8(i) => f64::from(*i),
        Value::Int16(i) => f64::from(*i),
        Value::Int32(i) => f64::from(*i),
        Value::Uint(u) | Value::Uint64(u) => *u as f64,
        Value::Uint8(u) => f64::from(*u),
        Value::Uint16(u) => f64::from(*u),
        Value::Uint32(u) => f64::from(*u),
        Value::Float32(f) => f64::from(*f),
        Value::Float64(f) => *f,
        Value::String(s) => {
            if s.is_empty() {
                0.0
            } else {
                parse_float(s).unwrap_or(0.0)
            }
        }
        _ => 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: &str) -> Value {
        Value::str(x)
    }

    #[test]
    fn cast_int_strings() {
        assert_eq!(to_int64(&s("42")), 42);
        assert_eq!(to_int64(&s("3.7")), 3);
        assert_eq!(to_int64(&s("-5.5")), -5);
        assert_eq!(to_int64(&s("0x1F")), 31);
        assert_eq!(to_int64(&s("010")), 8);
        assert_eq!(to_int64(&s("08")), 0);
        assert_eq!(to_int64(&s("abc")), 0);
        assert_eq!(to_int64(&s("1e3")), 0);
        assert_eq!(to_int64(&s("1_000")), 1000);
        assert_eq!(to_int64(&s("_1000")), 0);
        assert_eq!(to_int64(&s("9223372036854775807")), i64::MAX);
        assert_eq!(to_int64(&s("9223372036854775808")), 0);
        assert_eq!(to_int64(&s("-9223372036854775808")), i64::MIN);
        assert_eq!(to_int64(&s(".5")), 0);
        assert_eq!(to_int64(&s("0")), 0);
        assert_eq!(to_int64(&s("0b101")), 5);
        assert_eq!(to_int64(&s("0o17")), 15);
        assert_eq!(to_int64(&s("0x")), 0);
    }

    #[test]
    fn cast_other_types() {
        assert_eq!(to_int64(&Value::Float64(1.9)), 1);
        assert_eq!(to_int64(&Value::Float64(-1.9)), -1);
        assert_eq!(to_int64(&Value::Float64(f64::NAN)), i64::MIN);
        assert_eq!(to_int64(&Value::Bool(true)), 1);
        assert_eq!(to_int64(&Value::Nil), 0);
        assert_eq!(to_int64(&Value::Uint64(u64::MAX)), -1);
        assert_eq!(to_float64(&s("1e3")), 1000.0);
        assert!(to_float64(&s("NaN")).is_nan());
        assert_eq!(to_float64(&s("x")), 0.0);
        assert_eq!(to_float64(&Value::Int(3)), 3.0);
    }

    #[test]
    fn atoi_is_strict_decimal() {
        assert_eq!(atoi("+5"), 5);
        assert_eq!(atoi(" 42"), 0);
        assert_eq!(atoi("3.5"), 0);
        assert_eq!(atoi("010"), 10);
        assert_eq!(atoi("1_0"), 0);
    }
}
