//! sprig's deterministic functions: strings, conversions, math, lists, dicts,
//! defaults, reflection, paths, encodings, JSON, dates.

use std::collections::BTreeMap;

use bigdecimal::{BigDecimal, RoundingMode};
use rand::Rng;
use rand::seq::SliceRandom;

use esr_api::duration::GoDuration;

use crate::fmt::{format_v, quote, quote_bytes};
use crate::func::FuncMap;
use crate::value::{GoType as T, MapRef, Value};

use super::cast::{atoi, parse_int, to_float64, to_int64};
use super::gotime::{self, GoTime};
use super::objects::{self, as_time, time};
use super::util::*;
use super::{encoding, gostr, json, paths};

fn slist() -> T {
    T::Slice(Box::new(T::Interface))
}
fn tmap() -> T {
    T::MapStringInterface
}
fn ttime() -> T {
    T::Named(objects::TIME.into())
}

/// Registers the functions of this module.
pub fn install(m: &mut FuncMap) {
    strings(m);
    conversions(m);
    math(m);
    lists(m);
    dicts(m);
    defaults(m);
    reflection(m);
    path_funcs(m);
    encodings(m);
    json_funcs(m);
    dates(m);
}

fn strings(m: &mut FuncMap) {
    use T::{Int, Interface, String as S};
    def(m, "hello", vec![], |_| ok_str("Hello!"));
    def(m, "abbrev", vec![Int, S], |a| {
        ok_str(gostr::abbrev(int(a, 0), s(a, 1)))
    });
    def(m, "abbrevboth", vec![Int, Int, S], |a| {
        ok_str(gostr::abbrevboth(int(a, 0), int(a, 1), s(a, 2)))
    });
    def(m, "trunc", vec![Int, S], |a| {
        ok_str(gostr::trunc(int(a, 0), s(a, 1)))
    });
    def(m, "trim", vec![S], |a| ok_str(s(a, 0).trim()));
    def(m, "upper", vec![S], |a| ok_str(gostr::to_upper(s(a, 0))));
    def(m, "lower", vec![S], |a| ok_str(gostr::to_lower(s(a, 0))));
    def(m, "title", vec![S], |a| ok_str(gostr::title(s(a, 0))));
    def(m, "untitle", vec![S], |a| ok_str(gostr::untitle(s(a, 0))));
    def(m, "substr", vec![Int, Int, S], |a| {
        gostr::substr(int(a, 0), int(a, 1), s(a, 2))
            .map(Value::String)
            .map_err(perr)
    });
    def(m, "repeat", vec![Int, S], |a| {
        let (n, st) = (int(a, 0), s(a, 1));
        if n < 0 {
            return Err(perr("strings: negative Repeat count"));
        }
        check_bytes((n as usize).saturating_mul(st.len()))?;
        ok_str(st.repeat(n as usize))
    });
    for name in ["trimall", "trimAll"] {
        def(m, name, vec![S, S], |a| {
            ok_str(gostr::trim_cutset(s(a, 1), s(a, 0)))
        });
    }
    def(m, "trimSuffix", vec![S, S], |a| {
        ok_str(s(a, 1).strip_suffix(s(a, 0)).unwrap_or(s(a, 1)))
    });
    def(m, "trimPrefix", vec![S, S], |a| {
        ok_str(s(a, 1).strip_prefix(s(a, 0)).unwrap_or(s(a, 1)))
    });
    def(m, "nospace", vec![S], |a| ok_str(gostr::nospace(s(a, 0))));
    def(m, "initials", vec![S], |a| ok_str(gostr::initials(s(a, 0))));
    def(m, "swapcase", vec![S], |a| ok_str(gostr::swapcase(s(a, 0))));
    def(m, "shuffle", vec![S], |a| {
        let mut runes: Vec<char> = s(a, 0).chars().collect();
        runes.shuffle(&mut rand::rng());
        ok_str(runes.into_iter().collect::<String>())
    });
    def(m, "snakecase", vec![S], |a| {
        ok_str(gostr::camel_to_lower(s(a, 0), '_'))
    });
    def(m, "kebabcase", vec![S], |a| {
        ok_str(gostr::camel_to_lower(s(a, 0), '-'))
    });
    def(m, "camelcase", vec![S], |a| {
        ok_str(gostr::pascal_case(s(a, 0)))
    });
    def(m, "wrap", vec![Int, S], |a| {
        ok_str(gostr::wrap_custom(s(a, 1), int(a, 0), "", false))
    });
    def(m, "wrapWith", vec![Int, S, S], |a| {
        let (text, width, sep) = (s(a, 2), int(a, 0).max(1) as usize, s(a, 1));
        check_bytes(
            (text.len() / width + 1)
                .saturating_mul(sep.len())
                .saturating_add(text.len()),
        )?;
        ok_str(gostr::wrap_custom(text, int(a, 0), sep, true))
    });
    def(m, "contains", vec![S, S], |a| {
        Ok(Value::Bool(s(a, 1).contains(s(a, 0))))
    });
    def(m, "hasPrefix", vec![S, S], |a| {
        Ok(Value::Bool(s(a, 1).starts_with(s(a, 0))))
    });
    def(m, "hasSuffix", vec![S, S], |a| {
        Ok(Value::Bool(s(a, 1).ends_with(s(a, 0))))
    });
    defvb(m, "quote", vec![], Interface, |a| {
        let out: Vec<String> = a
            .iter()
            .filter(|v| !v.is_nil())
            .map(|v| match v {
                Value::Bytes(b) | Value::BinaryString(b) => quote_bytes(b),
                other => quote(&strval(other)),
            })
            .collect();
        ok_str(out.join(" "))
    });
    defv(m, "squote", vec![], Interface, |a| {
        let out: Vec<String> = a
            .iter()
            .filter(|v| !v.is_nil())
            .map(|v| format!("'{}'", format_v(v)))
            .collect();
        ok_str(out.join(" "))
    });
    defv(m, "cat", vec![], Interface, |a| {
        let out: Vec<String> = a.iter().filter(|v| !v.is_nil()).map(format_v).collect();
        ok_str(out.join(" "))
    });
    def(m, "indent", vec![Int, S], |a| {
        indent_checked(int(a, 0), s(a, 1), "")
    });
    def(m, "nindent", vec![Int, S], |a| {
        indent_checked(int(a, 0), s(a, 1), "\n")
    });
    def(m, "replace", vec![S, S, S], |a| {
        let (src, old, new) = (s(a, 2), s(a, 0), s(a, 1));
        let n = if old.is_empty() {
            src.chars().count() + 1
        } else {
            src.matches(old).count()
        };
        check_bytes(n.saturating_mul(new.len()).saturating_add(src.len()))?;
        ok_str(gostr::replace_all(src, old, new))
    });
    def(m, "plural", vec![S, S, Int], |a| {
        ok_str(if int(a, 2) == 1 { s(a, 0) } else { s(a, 1) })
    });
    def(m, "toString", vec![Interface], |a| {
        ok_str(strval(&arg(a, 0)))
    });
    def(m, "join", vec![S, Interface], |a| {
        ok_str(strslice(&arg(a, 1)).join(s(a, 0)))
    });
    def(m, "sortAlpha", vec![Interface], |a| {
        let v = arg(a, 0);
        let mut out = if v.as_slice().is_some() || matches!(v, Value::Bytes(_)) {
            strslice(&v)
        } else {
            vec![strval(&v)]
        };
        out.sort();
        Ok(Value::strings(out))
    });
    def(m, "split", vec![S, S], |a| {
        let parts = gostr::split(s(a, 1), s(a, 0));
        check_len(parts.len())?;
        Ok(Value::string_map(
            parts
                .into_iter()
                .enumerate()
                .map(|(i, p)| (format!("_{i}"), p))
                .collect(),
        ))
    });
    def(m, "splitList", vec![S, S], |a| {
        let parts = gostr::split(s(a, 1), s(a, 0));
        check_len(parts.len())?;
        Ok(Value::strings(parts))
    });
    def(m, "splitn", vec![S, Int, S], |a| {
        let parts = gostr::splitn(s(a, 2), s(a, 0), int(a, 1));
        check_len(parts.len())?;
        Ok(Value::string_map(
            parts
                .into_iter()
                .enumerate()
                .map(|(i, p)| (format!("_{i}"), p))
                .collect(),
        ))
    });
    def(m, "toStrings", vec![Interface], |a| {
        Ok(Value::strings(strslice(&arg(a, 0))))
    });
    def(m, "randAlphaNum", vec![Int], |a| {
        rand_string(
            int(a, 0),
            b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
        )
    });
    def(m, "randAlpha", vec![Int], |a| {
        rand_string(
            int(a, 0),
            b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
        )
    });
    def(m, "randNumeric", vec![Int], |a| {
        rand_string(int(a, 0), b"0123456789")
    });
    def(m, "randAscii", vec![Int], |a| {
        let chars: Vec<u8> = (32u8..=126).collect();
        rand_string(int(a, 0), &chars)
    });
}

fn indent_checked(n: i64, text: &str, prefix: &str) -> R {
    if n < 0 {
        return Err(perr("strings: negative Repeat count"));
    }
    let lines = text.bytes().filter(|&b| b == b'\n').count() + 1;
    check_bytes(
        (n as usize)
            .saturating_mul(lines)
            .saturating_add(text.len()),
    )?;
    ok_str(format!("{prefix}{}", gostr::indent(n, text)))
}

fn rand_string(n: i64, chars: &[u8]) -> R {
    if n <= 0 {
        return ok_str("");
    }
    check_bytes(n as usize)?;
    let mut rng = rand::rng();
    ok_str(
        (0..n)
            .map(|_| char::from(chars[rng.random_range(0..chars.len())]))
            .collect::<String>(),
    )
}

/// sprig's `strslice`.
pub fn strslice(v: &Value) -> Vec<String> {
    match v {
        Value::Nil => Vec::new(),
        Value::Bytes(b) => b.iter().map(|x| x.to_string()).collect(),
        Value::BinaryString(_) => vec![strval(v)],
        other => match other.as_slice() {
            Some(items) => items.iter().filter(|x| !x.is_nil()).map(strval).collect(),
            None => vec![strval(other)],
        },
    }
}

fn conversions(m: &mut FuncMap) {
    use T::{Int, Interface, String as S};
    def(m, "atoi", vec![S], |a| Ok(Value::Int(atoi(s(a, 0)))));
    def(m, "int64", vec![Interface], |a| {
        Ok(Value::Int64(to_int64(&arg(a, 0))))
    });
    def(m, "int", vec![Interface], |a| {
        Ok(Value::Int(to_int64(&arg(a, 0))))
    });
    def(m, "float64", vec![Interface], |a| {
        Ok(Value::Float64(to_float64(&arg(a, 0))))
    });
    def(m, "toDecimal", vec![Interface], |a| {
        let txt = format_v(&arg(a, 0));
        Ok(Value::Int64(parse_int(&txt, 8).unwrap_or(0)))
    });
    defv(m, "seq", vec![], Int, |a| {
        let p: Vec<i64> = (0..a.len()).map(|i| int(a, i)).collect();
        let list = match p.len() {
            1 => {
                let (start, end) = (1, p[0]);
                let inc = if end < start { -1 } else { 1 };
                until_step(start, end.wrapping_add(inc), inc)?
            }
            2 => {
                let (start, end) = (p[0], p[1]);
                let step = if end < start { -1 } else { 1 };
                until_step(start, end.wrapping_add(step), step)?
            }
            3 => {
                let (start, step, end) = (p[0], p[1], p[2]);
                let mut inc = 1;
                if end < start {
                    inc = -1;
                    if step > 0 {
                        return ok_str("");
                    }
                }
                until_step(start, end.wrapping_add(inc), step)?
            }
            _ => return ok_str(""),
        };
        ok_str(
            list.iter()
                .map(i64::to_string)
                .collect::<Vec<_>>()
                .join(" "),
        )
    });
    def(m, "until", vec![Int], |a| {
        let n = int(a, 0);
        Ok(Value::ints(until_step(0, n, if n < 0 { -1 } else { 1 })?))
    });
    def(m, "untilStep", vec![Int, Int, Int], |a| {
        Ok(Value::ints(until_step(int(a, 0), int(a, 1), int(a, 2))?))
    });
}

fn until_step(start: i64, stop: i64, step: i64) -> Result<Vec<i64>, crate::func::FuncError> {
    let mut v = Vec::new();
    if stop < start {
        if step >= 0 {
            return Ok(v);
        }
        check_len(((start as i128 - stop as i128) / -(step as i128)) as usize)?;
        let mut i = start;
        while i > stop {
            v.push(i);
            i = match i.checked_add(step) {
                Some(x) => x,
                None => break,
            };
        }
        return Ok(v);
    }
    if step <= 0 {
        return Ok(v);
    }
    check_len(((stop as i128 - start as i128) / step as i128) as usize)?;
    let mut i = start;
    while i < stop {
        v.push(i);
        i = match i.checked_add(step) {
            Some(x) => x,
            None => break,
        };
    }
    Ok(v)
}

fn dec(f: f64) -> Result<BigDecimal, crate::func::FuncError> {
    if !f.is_finite() {
        return Err(perr(format!(
            "Cannot create a Decimal from {}",
            crate::fmt::format_float(f, 'g', -1, 64)
        )));
    }
    format!("{f:e}")
        .parse::<BigDecimal>()
        .map_err(|e| perr(e.to_string()))
}

fn dec_f64(d: &BigDecimal) -> f64 {
    d.to_string().parse::<f64>().unwrap_or(0.0)
}

fn decimal_op(
    first: &Value,
    rest: &[Value],
    op: fn(&BigDecimal, &BigDecimal) -> Result<BigDecimal, crate::func::FuncError>,
) -> R {
    let mut acc = dec(to_float64(first))?;
    for x in rest {
        acc = op(&acc, &dec(to_float64(x))?)?;
    }
    Ok(Value::Float64(dec_f64(&acc)))
}

fn go_max(a: f64, b: f64) -> f64 {
    if a.is_infinite() && a > 0.0 || b.is_infinite() && b > 0.0 {
        return f64::INFINITY;
    }
    if a.is_nan() || b.is_nan() {
        return f64::NAN;
    }
    if a == 0.0 && b == 0.0 {
        return if a.is_sign_negative() { b } else { a };
    }
    if a > b { a } else { b }
}

fn go_min(a: f64, b: f64) -> f64 {
    if a.is_infinite() && a < 0.0 || b.is_infinite() && b < 0.0 {
        return f64::NEG_INFINITY;
    }
    if a.is_nan() || b.is_nan() {
        return f64::NAN;
    }
    if a == 0.0 && b == 0.0 {
        return if a.is_sign_negative() { a } else { b };
    }
    if a < b { a } else { b }
}

fn math(m: &mut FuncMap) {
    use T::{Float64, Int, Interface};
    def(m, "add1", vec![Interface], |a| {
        Ok(Value::Int64(to_int64(&arg(a, 0)).wrapping_add(1)))
    });
    defv(m, "add", vec![], Interface, |a| {
        Ok(Value::Int64(
            a.iter().fold(0i64, |acc, v| acc.wrapping_add(to_int64(v))),
        ))
    });
    def(m, "sub", vec![Interface, Interface], |a| {
        Ok(Value::Int64(to_int64(&a[0]).wrapping_sub(to_int64(&a[1]))))
    });
    def(m, "div", vec![Interface, Interface], |a| {
        let d = to_int64(&a[1]);
        if d == 0 {
            return Err(perr("runtime error: integer divide by zero"));
        }
        Ok(Value::Int64(to_int64(&a[0]).wrapping_div(d)))
    });
    def(m, "mod", vec![Interface, Interface], |a| {
        let d = to_int64(&a[1]);
        if d == 0 {
            return Err(perr("runtime error: integer divide by zero"));
        }
        Ok(Value::Int64(to_int64(&a[0]).wrapping_rem(d)))
    });
    defv(m, "mul", vec![Interface], Interface, |a| {
        Ok(Value::Int64(
            a[1..]
                .iter()
                .fold(to_int64(&a[0]), |acc, v| acc.wrapping_mul(to_int64(v))),
        ))
    });
    def(m, "randInt", vec![Int, Int], |a| {
        let (lo, hi) = (int(a, 0), int(a, 1));
        let n = hi.wrapping_sub(lo);
        if n <= 0 {
            return Err(perr("invalid argument to Intn"));
        }
        Ok(Value::Int(rand::rng().random_range(0..n) + lo))
    });
    def(m, "add1f", vec![Interface], |a| {
        decimal_op(&a[0], &[Value::Int(1)], |x, y| Ok(x + y))
    });
    defv(m, "addf", vec![], Interface, |a| {
        decimal_op(&Value::Float64(0.0), a, |x, y| Ok(x + y))
    });
    defv(m, "subf", vec![Interface], Interface, |a| {
        decimal_op(&a[0], &a[1..], |x, y| Ok(x - y))
    });
    defv(m, "mulf", vec![Interface], Interface, |a| {
        decimal_op(&a[0], &a[1..], |x, y| Ok(x * y))
    });
    defv(m, "divf", vec![Interface], Interface, |a| {
        decimal_op(&a[0], &a[1..], |x, y| {
            if y == &BigDecimal::from(0) {
                return Err(perr("decimal division by zero"));
            }
            Ok((x / y).with_scale_round(16, RoundingMode::HalfUp))
        })
    });
    for name in ["biggest", "max"] {
        defv(m, name, vec![Interface], Interface, |a| {
            Ok(Value::Int64(
                a[1..].iter().map(to_int64).fold(to_int64(&a[0]), i64::max),
            ))
        });
    }
    defv(m, "min", vec![Interface], Interface, |a| {
        Ok(Value::Int64(
            a[1..].iter().map(to_int64).fold(to_int64(&a[0]), i64::min),
        ))
    });
    defv(m, "maxf", vec![Interface], Interface, |a| {
        Ok(Value::Float64(
            a[1..]
                .iter()
                .map(to_float64)
                .fold(to_float64(&a[0]), go_max),
        ))
    });
    defv(m, "minf", vec![Interface], Interface, |a| {
        Ok(Value::Float64(
            a[1..]
                .iter()
                .map(to_float64)
                .fold(to_float64(&a[0]), go_min),
        ))
    });
    def(m, "ceil", vec![Interface], |a| {
        Ok(Value::Float64(to_float64(&a[0]).ceil()))
    });
    def(m, "floor", vec![Interface], |a| {
        Ok(Value::Float64(to_float64(&a[0]).floor()))
    });
    defv(m, "round", vec![Interface, Int], Float64, |a| {
        let round_on = if a.len() > 2 { float(a, 2) } else { 0.5 };
        let val = to_float64(&a[0]);
        let pow = 10f64.powf(int(a, 1) as f64);
        let digit = pow * val;
        let r = if digit.fract() >= round_on {
            digit.ceil()
        } else {
            digit.floor()
        };
        Ok(Value::Float64(r / pow))
    });
}

/// The elements of a slice or array value, or `Err` with sprig's message.
fn items(v: &Value, what: &str) -> Result<Vec<Value>, crate::func::FuncError> {
    match v {
        Value::Nil => Err(perr(NIL_DEREF)),
        Value::Bytes(b) => Ok(b.iter().map(|x| Value::Uint8(*x)).collect()),
        other => match other.as_slice() {
            Some(s) => Ok(s.to_vec()),
            None => Err(err(format!("{what} {}", kind_of(other)))),
        },
    }
}

/// A hashable identity for scalar values (type and value), so `uniq` need not
/// compare every pair; `None` for containers and objects.
fn scalar_key(v: &Value) -> Option<String> {
    match v {
        Value::Nil => Some("nil".into()),
        Value::Bool(_)
        | Value::Int(_)
        | Value::Int8(_)
        | Value::Int16(_)
        | Value::Int32(_)
        | Value::Int64(_)
        | Value::Uint(_)
        | Value::Uint8(_)
        | Value::Uint16(_)
        | Value::Uint32(_)
        | Value::Uint64(_)
        | Value::Duration(_) => Some(format!("{}\0{}", v.type_name(), format_v(v))),
        Value::String(s) => Some(format!("string\0{s}")),
        _ => None,
    }
}

/// sprig's `empty`.
pub fn is_empty(v: &Value) -> bool {
    match v {
        Value::Nil => true,
        Value::Object(o) => !o.is_true() && o.kind() != crate::value::Kind::Struct,
        Value::Func(_) => false,
        other => !other.is_true(),
    }
}

fn lists(m: &mut FuncMap) {
    use T::{Int, Interface};
    defv(m, "list", vec![], Interface, |a| {
        check_len(a.len())?;
        Ok(Value::list(a.to_vec()))
    });
    alias(m, "list", "tuple");
    for (name, must) in [
        ("append", false),
        ("push", false),
        ("mustAppend", true),
        ("mustPush", true),
    ] {
        let _ = must;
        def(m, name, vec![Interface, Interface], |a| {
            let mut l = items(&a[0], "Cannot push on type")?;
            l.push(a[1].clone());
            check_len(l.len())?;
            Ok(Value::list(l))
        });
    }
    for name in ["prepend", "mustPrepend"] {
        def(m, name, vec![Interface, Interface], |a| {
            let mut l = items(&a[0], "Cannot prepend on type")?;
            l.insert(0, a[1].clone());
            check_len(l.len())?;
            Ok(Value::list(l))
        });
    }
    for name in ["first", "mustFirst"] {
        def(m, name, vec![Interface], |a| {
            Ok(items(&a[0], "Cannot find first on type")?
                .first()
                .cloned()
                .unwrap_or(Value::Nil))
        });
    }
    for name in ["last", "mustLast"] {
        def(m, name, vec![Interface], |a| {
            Ok(items(&a[0], "Cannot find last on type")?
                .last()
                .cloned()
                .unwrap_or(Value::Nil))
        });
    }
    for name in ["rest", "mustRest"] {
        def(m, name, vec![Interface], |a| {
            let l = items(&a[0], "Cannot find rest on type")?;
            if l.is_empty() {
                return Ok(Value::nil_list());
            }
            Ok(Value::list(l.into_iter().skip(1).collect()))
        });
    }
    for name in ["initial", "mustInitial"] {
        def(m, name, vec![Interface], |a| {
            let mut l = items(&a[0], "Cannot find initial on type")?;
            if l.is_empty() {
                return Ok(Value::nil_list());
            }
            l.pop();
            Ok(Value::list(l))
        });
    }
    for name in ["reverse", "mustReverse"] {
        def(m, name, vec![Interface], |a| {
            let mut l = items(&a[0], "Cannot find reverse on type")?;
            l.reverse();
            Ok(Value::list(l))
        });
    }
    for name in ["compact", "mustCompact"] {
        def(m, name, vec![Interface], |a| {
            Ok(Value::list(
                items(&a[0], "Cannot compact on type")?
                    .into_iter()
                    .filter(|x| !is_empty(x))
                    .collect(),
            ))
        });
    }
    for name in ["uniq", "mustUniq"] {
        def(m, name, vec![Interface], |a| {
            let mut out: Vec<Value> = Vec::new();
            let mut seen = std::collections::HashSet::new();
            let mut work = 0usize;
            for x in items(&a[0], "Cannot find uniq on type")? {
                if let Some(k) = scalar_key(&x) {
                    if seen.insert(k) {
                        out.push(x);
                    }
                    continue;
                }
                work += out.len();
                if work > 50_000_000 {
                    return Err(perr("uniq: too much work"));
                }
                if !out.iter().any(|y| y.deep_equal(&x)) {
                    out.push(x);
                }
            }
            Ok(Value::list(out))
        });
    }
    for name in ["without", "mustWithout"] {
        defv(m, name, vec![Interface], Interface, |a| {
            let omit = &a[1..];
            Ok(Value::list(
                items(&a[0], "Cannot find without on type")?
                    .into_iter()
                    .filter(|x| !omit.iter().any(|o| o.deep_equal(x)))
                    .collect(),
            ))
        });
    }
    for name in ["has", "mustHas"] {
        def(m, name, vec![Interface, Interface], |a| {
            if a[1].is_nil() {
                return Ok(Value::Bool(false));
            }
            Ok(Value::Bool(
                items(&a[1], "Cannot find has on type")?
                    .iter()
                    .any(|x| a[0].deep_equal(x)),
            ))
        });
    }
    for name in ["slice", "mustSlice"] {
        defv(m, name, vec![Interface], Interface, |a| {
            let l = items(&a[0], "list should be type of slice or array but")?;
            if l.is_empty() {
                return Ok(Value::Nil);
            }
            let start = if a.len() > 1 { to_int64(&a[1]) } else { 0 };
            let end = if a.len() > 2 {
                to_int64(&a[2])
            } else {
                l.len() as i64
            };
            if start < 0 || end < start || end > l.len() as i64 {
                return Err(perr("reflect: slice index out of range"));
            }
            let part = l[start as usize..end as usize].to_vec();
            Ok(match &a[0] {
                Value::Bytes(_) => Value::bytes(
                    part.iter()
                        .map(|x| match x {
                            Value::Uint8(b) => *b,
                            _ => 0,
                        })
                        .collect::<Vec<u8>>(),
                ),
                Value::Slice(ts) => Value::typed_slice(ts.elem.clone(), part),
                _ => Value::list(part),
            })
        });
    }
    defv(m, "concat", vec![], Interface, |a| {
        check_copy(a)?;
        let mut out = Vec::new();
        for l in a {
            match l {
                Value::Nil => return Err(perr(NIL_DEREF)),
                other => match items(other, "") {
                    Ok(x) => out.extend(x),
                    Err(_) => {
                        return Err(err(format!(
                            "Cannot concat type {} as list",
                            kind_of(other)
                        )));
                    }
                },
            }
            check_len(out.len())?;
        }
        Ok(Value::list(out))
    });
    for name in ["chunk", "mustChunk"] {
        def(m, name, vec![Int, Interface], |a| {
            let size = int(a, 0);
            let l = items(&a[1], "Cannot chunk type")?;
            if size <= 0 {
                return Err(perr("runtime error: makeslice: len out of range"));
            }
            Ok(Value::typed_slice(
                slist(),
                l.chunks(size as usize)
                    .map(|c| Value::list(c.to_vec()))
                    .collect(),
            ))
        });
    }
}

fn deep_copy(v: &Value, depth: usize) -> Result<Value, crate::func::FuncError> {
    if depth > 1000 {
        return Err(perr("deep copy failed"));
    }
    Ok(match v {
        Value::Map(m) => Value::map(
            m.entries()
                .into_iter()
                .map(|(k, v)| deep_copy(&v, depth + 1).map(|c| (k, c)))
                .collect::<Result<_, _>>()?,
        ),
        Value::List(l) => Value::list(
            l.iter()
                .map(|x| deep_copy(x, depth + 1))
                .collect::<Result<_, _>>()?,
        ),
        Value::Slice(s) if s.nil => v.clone(),
        Value::Slice(s) => Value::typed_slice(
            s.elem.clone(),
            s.items
                .iter()
                .map(|x| deep_copy(x, depth + 1))
                .collect::<Result<_, _>>()?,
        ),
        Value::Bytes(b) => Value::bytes(b.as_ref().clone()),
        Value::StringMap(m) => Value::string_map(m.as_ref().clone()),
        other => other.clone(),
    })
}

fn merge_into(dst: &MapRef, src: &MapRef, overwrite: bool, depth: usize) {
    if depth > 100 {
        return;
    }
    for (k, sv) in src.entries() {
        let dv = dst.get(&k);
        if sv.is_nil() {
            if overwrite {
                dst.insert(k, Value::Nil);
            }
            continue;
        }
        let dst_empty = dv.as_ref().is_none_or(is_empty);
        match (&sv, &dv) {
            (Value::Map(sm), Some(Value::Map(dm))) => {
                if !dm.ptr_eq(sm) {
                    merge_into(dm, sm, overwrite, depth + 1);
                }
                if !dst_empty {
                    continue;
                }
            }
            (Value::List(_) | Value::Slice(_), _) => {
                if !dst_empty {
                    if overwrite && !is_empty(&sv) {
                        dst.insert(k, sv.clone());
                    }
                    continue;
                }
            }
            _ => {}
        }
        if overwrite || dv.is_none() || dst_empty {
            dst.insert(k, sv);
        }
    }
}

fn as_map(v: &Value) -> MapRef {
    match v {
        Value::Map(m) => m.clone(),
        _ => MapRef::new(),
    }
}

fn dicts(m: &mut FuncMap) {
    use T::{Interface, String as S};
    defv(m, "dict", vec![], Interface, |a| {
        let mut out = BTreeMap::new();
        for pair in a.chunks(2) {
            let key = strval(&pair[0]);
            out.insert(key, pair.get(1).cloned().unwrap_or_else(|| Value::str("")));
        }
        Ok(Value::map(out))
    });
    def(m, "get", vec![tmap(), S], |a| {
        Ok(as_map(&a[0]).get(s(a, 1)).unwrap_or_else(|| Value::str("")))
    });
    def(m, "set", vec![tmap(), S, Interface], |a| {
        let d = as_map(&a[0]);
        d.insert(s(a, 1).to_string(), a[2].clone());
        Ok(Value::Map(d))
    });
    def(m, "unset", vec![tmap(), S], |a| {
        let d = as_map(&a[0]);
        d.remove(s(a, 1));
        Ok(Value::Map(d))
    });
    def(m, "hasKey", vec![tmap(), S], |a| {
        Ok(Value::Bool(as_map(&a[0]).contains_key(s(a, 1))))
    });
    defv(m, "pluck", vec![S], tmap(), |a| {
        Ok(Value::list(
            a[1..]
                .iter()
                .filter_map(|d| as_map(d).get(s(a, 0)))
                .collect(),
        ))
    });
    defv(m, "keys", vec![], tmap(), |a| {
        Ok(Value::strings(
            a.iter().flat_map(|d| as_map(d).keys()).collect::<Vec<_>>(),
        ))
    });
    defv(m, "pick", vec![tmap()], S, |a| {
        let d = as_map(&a[0]);
        let mut out = BTreeMap::new();
        for k in &a[1..] {
            let k = k.as_str().unwrap_or("");
            if let Some(v) = d.get(k) {
                out.insert(k.to_string(), v);
            }
        }
        Ok(Value::map(out))
    });
    defv(m, "omit", vec![tmap()], S, |a| {
        let omit: Vec<&str> = a[1..].iter().filter_map(Value::as_str).collect();
        Ok(Value::map(
            as_map(&a[0])
                .entries()
                .into_iter()
                .filter(|(k, _)| !omit.contains(&k.as_str()))
                .collect(),
        ))
    });
    for (name, overwrite) in [
        ("merge", false),
        ("mustMerge", false),
        ("mergeOverwrite", true),
        ("mustMergeOverwrite", true),
    ] {
        defv(m, name, vec![tmap()], tmap(), move |a| {
            let dst = as_map(&a[0]);
            for src in &a[1..] {
                merge_into(&dst, &as_map(src), overwrite, 0);
            }
            Ok(Value::Map(dst))
        });
    }
    def(m, "values", vec![tmap()], |a| {
        Ok(Value::list(
            as_map(&a[0])
                .entries()
                .into_iter()
                .map(|(_, v)| v)
                .collect(),
        ))
    });
    for name in ["deepCopy", "mustDeepCopy"] {
        def(m, name, vec![Interface], |a| {
            // copystructure.Copy(nil) asks reflect for the type of the zero Value,
            // which panics; text/template reports the panic as the call's error.
            if a[0].is_nil() {
                return Err(perr("reflect: call of reflect.Value.Type on zero Value"));
            }
            deep_copy(&a[0], 0)
        });
    }
    defv(m, "dig", vec![], Interface, |a| {
        if a.len() < 3 {
            return Err(perr("dig needs at least three arguments"));
        }
        let Value::Map(mut d) = a[a.len() - 1].clone() else {
            return Err(err(format!(
                "interface conversion: interface {{}} is {}, not map[string]interface {{}}",
                a[a.len() - 1].type_name()
            )));
        };
        let def_v = a[a.len() - 2].clone();
        let keys = &a[..a.len() - 2];
        for (i, k) in keys.iter().enumerate() {
            let Value::String(k) = k else {
                return Err(err(format!(
                    "interface conversion: interface {{}} is {}, not string",
                    k.type_name()
                )));
            };
            let Some(step) = d.get(k) else {
                return Ok(def_v);
            };
            if i == keys.len() - 1 {
                return Ok(step);
            }
            match step {
                Value::Map(next) => d = next,
                other => {
                    return Err(err(format!(
                        "interface conversion: interface {{}} is {}, not map[string]interface {{}}",
                        if other.is_nil() {
                            "nil".to_string()
                        } else {
                            other.type_name()
                        }
                    )));
                }
            }
        }
        Ok(def_v)
    });
}

fn defaults(m: &mut FuncMap) {
    use T::{Bool, Interface};
    defv(m, "default", vec![Interface], Interface, |a| {
        if a.len() < 2 || is_empty(&a[1]) {
            return Ok(a[0].clone());
        }
        Ok(a[1].clone())
    });
    def(m, "empty", vec![Interface], |a| {
        Ok(Value::Bool(is_empty(&a[0])))
    });
    defv(m, "coalesce", vec![], Interface, |a| {
        Ok(a.iter()
            .find(|v| !is_empty(v))
            .cloned()
            .unwrap_or(Value::Nil))
    });
    defv(m, "all", vec![], Interface, |a| {
        Ok(Value::Bool(a.iter().all(|v| !is_empty(v))))
    });
    defv(m, "any", vec![], Interface, |a| {
        Ok(Value::Bool(a.iter().any(|v| !is_empty(v))))
    });
    def(m, "ternary", vec![Interface, Interface, Bool], |a| {
        Ok(if boolean(a, 2) {
            a[0].clone()
        } else {
            a[1].clone()
        })
    });
    def(m, "fail", vec![T::String], |a| Err(err(s(a, 0))));
}

fn reflection(m: &mut FuncMap) {
    use T::{Interface, String as S};
    def(m, "typeOf", vec![Interface], |a| ok_str(a[0].type_name()));
    def(m, "typeIs", vec![S, Interface], |a| {
        Ok(Value::Bool(s(a, 0) == a[1].type_name()))
    });
    def(m, "typeIsLike", vec![S, Interface], |a| {
        let t = a[1].type_name();
        Ok(Value::Bool(s(a, 0) == t || format!("*{}", s(a, 0)) == t))
    });
    def(m, "kindOf", vec![Interface], |a| ok_str(a[0].kind_name()));
    def(m, "kindIs", vec![S, Interface], |a| {
        Ok(Value::Bool(s(a, 0) == a[1].kind_name()))
    });
    def(m, "deepEqual", vec![Interface, Interface], |a| {
        Ok(Value::Bool(a[0].deep_equal(&a[1])))
    });
}

fn path_funcs(m: &mut FuncMap) {
    use T::String as S;
    for (p, name) in [("", "base"), ("os", "Base")] {
        let n = if p.is_empty() {
            name.to_string()
        } else {
            format!("{p}{name}")
        };
        def(m, &n, vec![S], |a| ok_str(paths::base(s(a, 0))));
    }
    for n in ["dir", "osDir"] {
        def(m, n, vec![S], |a| ok_str(paths::dir(s(a, 0))));
    }
    for n in ["clean", "osClean"] {
        def(m, n, vec![S], |a| ok_str(paths::clean(s(a, 0))));
    }
    for n in ["ext", "osExt"] {
        def(m, n, vec![S], |a| ok_str(paths::ext(s(a, 0))));
    }
    for n in ["isAbs", "osIsAbs"] {
        def(m, n, vec![S], |a| Ok(Value::Bool(paths::is_abs(s(a, 0)))));
    }
}

fn encodings(m: &mut FuncMap) {
    use T::String as S;
    defb(m, "b64enc", vec![S], |a| {
        ok_str(encoding::b64_encode(sb(a, 0)))
    });
    defb(m, "b64dec", vec![S], |a| {
        match encoding::b64_decode(sb(a, 0)) {
            Ok(b) => Ok(go_string(b)),
            Err(e) => ok_str(e.to_string()),
        }
    });
    defb(m, "b32enc", vec![S], |a| {
        ok_str(encoding::b32_encode(sb(a, 0)))
    });
    defb(m, "b32dec", vec![S], |a| {
        match encoding::b32_decode(sb(a, 0)) {
            Ok(b) => Ok(go_string(b)),
            Err(e) => ok_str(e.to_string()),
        }
    });
    defb(m, "hexdec", vec![S], |a| {
        match encoding::hex_decode(sb(a, 0)) {
            Ok(b) => Ok(go_string(b)),
            Err(e) => ok_str(e),
        }
    });
}

fn json_funcs(m: &mut FuncMap) {
    use T::{Interface, String as S};
    def(m, "fromJson", vec![S], |a| {
        Ok(json::unmarshal(s(a, 0)).unwrap_or(Value::Nil))
    });
    def(m, "mustFromJson", vec![S], |a| {
        json::unmarshal(s(a, 0)).map_err(err)
    });
    def(m, "toJson", vec![Interface], |a| {
        ok_str(json::marshal(&a[0]).unwrap_or_default())
    });
    def(m, "mustToJson", vec![Interface], |a| {
        json::marshal(&a[0])
            .map(Value::String)
            .map_err(|e| err(e.0))
    });
    def(m, "toPrettyJson", vec![Interface], |a| {
        ok_str(json::marshal_indent(&a[0]).unwrap_or_default())
    });
    def(m, "mustToPrettyJson", vec![Interface], |a| {
        json::marshal_indent(&a[0])
            .map(Value::String)
            .map_err(|e| err(e.0))
    });
    for n in ["toRawJson", "mustToRawJson"] {
        def(m, n, vec![Interface], |a| {
            json::marshal_raw(&a[0])
                .map(Value::String)
                .map_err(|e| err(e.0))
        });
    }
}

fn time_of(v: &Value) -> GoTime {
    if let Some(t) = as_time(v) {
        return t;
    }
    match v {
        Value::Int64(i) | Value::Int(i) => GoTime::from_unix(*i),
        Value::Int32(i) => GoTime::from_unix(i64::from(*i)),
        _ => GoTime::now(),
    }
}

fn dates(m: &mut FuncMap) {
    use T::{Interface, String as S};
    def(m, "now", vec![], |_| Ok(time(GoTime::now())));
    def(m, "date", vec![S, Interface], |a| {
        ok_str(time_of(&a[1]).in_zone("Local").format(s(a, 0)))
    });
    for n in ["dateInZone", "date_in_zone"] {
        def(m, n, vec![S, Interface, S], |a| {
            ok_str(time_of(&a[1]).in_zone(s(a, 2)).format(s(a, 0)))
        });
    }
    def(m, "htmlDate", vec![Interface], |a| {
        ok_str(time_of(&a[0]).in_zone("Local").format("2006-01-02"))
    });
    def(m, "htmlDateInZone", vec![Interface, S], |a| {
        ok_str(time_of(&a[0]).in_zone(s(a, 1)).format("2006-01-02"))
    });
    for n in ["dateModify", "date_modify"] {
        def(m, n, vec![S, ttime()], |a| {
            let t = as_time(&a[1]).unwrap_or_else(GoTime::zero);
            Ok(time(match esr_api::duration::parse(s(a, 0)) {
                Ok(d) => t.add(d.as_nanos()),
                Err(_) => t,
            }))
        });
    }
    for n in ["mustDateModify", "must_date_modify"] {
        def(m, n, vec![S, ttime()], |a| {
            let t = as_time(&a[1]).unwrap_or_else(GoTime::zero);
            esr_api::duration::parse(s(a, 0))
                .map(|d| time(t.add(d.as_nanos())))
                .map_err(|e| err(e.to_string()))
        });
    }
    def(m, "toDate", vec![S, S], |a| {
        Ok(time(
            gotime::parse(s(a, 0), s(a, 1)).unwrap_or_else(|_| GoTime::zero()),
        ))
    });
    def(m, "mustToDate", vec![S, S], |a| {
        gotime::parse(s(a, 0), s(a, 1))
            .map(time)
            .map_err(|e| err(e.0))
    });
    def(m, "unixEpoch", vec![ttime()], |a| {
        ok_str(
            as_time(&a[0])
                .unwrap_or_else(GoTime::zero)
                .unix()
                .to_string(),
        )
    });
    def(m, "ago", vec![Interface], |a| {
        let t = time_of(&a[0]);
        let since = GoTime::now()
            .utc
            .signed_duration_since(t.utc)
            .num_nanoseconds()
            .unwrap_or(i64::MAX);
        ok_str(esr_api::duration::format(GoDuration::from_nanos(
            gotime::duration_round(since, 1_000_000_000),
        )))
    });
    def(m, "duration", vec![Interface], |a| {
        let n = match &a[0] {
            Value::String(st) => parse_int(st, 10).unwrap_or(0),
            Value::Int64(i) => *i,
            _ => 0,
        };
        ok_str(esr_api::duration::format(GoDuration::from_nanos(
            n.wrapping_mul(1_000_000_000),
        )))
    });
    def(m, "durationRound", vec![Interface], |a| {
        let d: i64 = match &a[0] {
            Value::String(st) => esr_api::duration::parse(st).map_or(0, GoDuration::as_nanos),
            Value::Int64(i) => *i,
            v => match as_time(v) {
                Some(t) => GoTime::now()
                    .utc
                    .signed_duration_since(t.utc)
                    .num_nanoseconds()
                    .unwrap_or(i64::MAX),
                None => 0,
            },
        };
        let u = d.unsigned_abs();
        const H: u64 = 3_600_000_000_000;
        let (year, month, day, hour, minute, second) = (
            H * 24 * 365,
            H * 24 * 30,
            H * 24,
            H,
            60_000_000_000u64,
            1_000_000_000u64,
        );
        let out = if u > year {
            format!("{}y", u / year)
        } else if u > month {
            format!("{}mo", u / month)
        } else if u > day {
            format!("{}d", u / day)
        } else if u > hour {
            format!("{}h", u / hour)
        } else if u > minute {
            format!("{}m", u / minute)
        } else if u > second {
            format!("{}s", u / second)
        } else {
            "0s".to_string()
        };
        ok_str(out)
    });
}
