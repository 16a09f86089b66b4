//! Small helpers shared by the function groups: registration shorthands and
//! argument accessors. The executor has already checked arity and converted
//! typed parameters, so accessors only pick the expected variant.

use crate::fmt::format_v;
use crate::func::{FuncDef, FuncError, FuncMap};
use crate::limits::{MAX_COLLECTION_LEN, MAX_VALUE_BYTES};
use crate::value::{GoType, Value};

/// Shorthand for the result type of a function body.
pub type R = Result<Value, FuncError>;

/// Go strings holding non-UTF-8 bytes ([`Value::BinaryString`]) reach text
/// functions as UTF-8 with invalid sequences replaced by U+FFFD, which is what
/// Go's rune-wise string functions produce for them.
fn text_args(a: &[Value]) -> Option<Vec<Value>> {
    if !a.iter().any(|v| matches!(v, Value::BinaryString(_))) {
        return None;
    }
    Some(
        a.iter()
            .map(|v| match v {
                Value::BinaryString(b) => Value::String(String::from_utf8_lossy(b).into_owned()),
                other => other.clone(),
            })
            .collect(),
    )
}

/// Registers a text function with fixed parameters (see [`text_args`]).
pub fn def<F>(m: &mut FuncMap, name: &str, params: Vec<GoType>, f: F)
where
    F: Fn(&[Value]) -> R + Send + Sync + 'static,
{
    m.insert(FuncDef::new(
        name,
        params,
        move |a: &[Value]| match text_args(a) {
            Some(conv) => f(&conv),
            None => f(a),
        },
    ));
}

/// Registers a variadic text function (see [`text_args`]).
pub fn defv<F>(m: &mut FuncMap, name: &str, params: Vec<GoType>, variadic: GoType, f: F)
where
    F: Fn(&[Value]) -> R + Send + Sync + 'static,
{
    m.insert(FuncDef::variadic(
        name,
        params,
        variadic,
        move |a: &[Value]| match text_args(a) {
            Some(conv) => f(&conv),
            None => f(a),
        },
    ));
}

/// Registers a function that reads the raw bytes of its string arguments.
pub fn defb<F>(m: &mut FuncMap, name: &str, params: Vec<GoType>, f: F)
where
    F: Fn(&[Value]) -> R + Send + Sync + 'static,
{
    m.insert(FuncDef::new(name, params, f));
}

/// Registers a variadic function that reads raw bytes of string arguments.
pub fn defvb<F>(m: &mut FuncMap, name: &str, params: Vec<GoType>, variadic: GoType, f: F)
where
    F: Fn(&[Value]) -> R + Send + Sync + 'static,
{
    m.insert(FuncDef::variadic(name, params, variadic, f));
}

/// Registers the same definition under several names.
pub fn alias(m: &mut FuncMap, from: &str, to: &str) {
    if let Some(d) = m.get(from) {
        let mut d = (**d).clone();
        d.name = to.to_string();
        m.insert(d);
    }
}

/// A `string` argument (empty if the executor passed something else).
pub fn s(args: &[Value], i: usize) -> &str {
    match args.get(i) {
        Some(Value::String(s)) => s,
        _ => "",
    }
}

/// The bytes of a `string` argument (UTF-8 or binary).
pub fn sb(args: &[Value], i: usize) -> &[u8] {
    args.get(i).and_then(Value::go_str_bytes).unwrap_or(&[])
}

/// An `int`-like argument.
pub fn int(args: &[Value], i: usize) -> i64 {
    args.get(i)
        .and_then(|v| v.int_bits().or_else(|| v.uint_bits().map(|u| u as i64)))
        .unwrap_or(0)
}

/// A `float64` argument.
pub fn float(args: &[Value], i: usize) -> f64 {
    args.get(i).and_then(Value::float_bits).unwrap_or(0.0)
}

/// A `bool` argument.
pub fn boolean(args: &[Value], i: usize) -> bool {
    matches!(args.get(i), Some(Value::Bool(true)))
}

/// Any argument (nil if missing).
pub fn arg(args: &[Value], i: usize) -> Value {
    args.get(i).cloned().unwrap_or(Value::Nil)
}

/// A Go `string` result.
pub fn ok_str(s: impl Into<String>) -> R {
    Ok(Value::String(s.into()))
}

/// An error carrying a Go error text that may include input data.
pub fn err(msg: impl Into<String>) -> FuncError {
    FuncError::new(msg)
}

/// An error whose text never includes input data.
pub fn perr(msg: impl Into<String>) -> FuncError {
    FuncError::public(msg)
}

/// Checks a size against [`MAX_VALUE_BYTES`] and the render's bounds (budget
/// left, deadline, cancellation: see [`crate::limits::RenderLimits`]).
pub fn check_bytes(n: usize) -> Result<(), FuncError> {
    if n > MAX_VALUE_BYTES {
        return Err(perr(format!(
            "value too large: {n} bytes (limit {MAX_VALUE_BYTES})"
        )));
    }
    crate::limits::checkpoint()?;
    crate::limits::fits(n)?;
    Ok(())
}

/// Checks a length against [`MAX_COLLECTION_LEN`] and the render's bounds.
pub fn check_len(n: usize) -> Result<(), FuncError> {
    if n > MAX_COLLECTION_LEN {
        return Err(perr(format!(
            "collection too large: {n} elements (limit {MAX_COLLECTION_LEN})"
        )));
    }
    crate::limits::checkpoint()?;
    crate::limits::fits(n.saturating_mul(std::mem::size_of::<Value>()))?;
    Ok(())
}

/// Checks that the deep size of `values` (about to be copied into a new value)
/// fits the render's budget.
pub fn check_copy(values: &[Value]) -> Result<(), FuncError> {
    let cap = crate::limits::remaining();
    let mut total = 0usize;
    for v in values {
        total = total.saturating_add(crate::limits::value_bytes(v, cap));
        if total > cap {
            break;
        }
    }
    crate::limits::fits(total)?;
    Ok(())
}

/// sprig's `strval`: strings as-is, `[]byte` as text, Stringers and errors via
/// their methods, everything else with `%v`.
pub fn strval(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Bytes(b) | Value::BinaryString(b) => String::from_utf8_lossy(b).into_owned(),
        other => format_v(other),
    }
}

/// Bytes of a string-or-bytes argument (binary data decoded by `b64dec` may
/// arrive as `[]byte`, see [`go_string`]).
pub fn bytes_of(v: &Value) -> Vec<u8> {
    match v {
        Value::String(s) => s.as_bytes().to_vec(),
        Value::Bytes(b) | Value::BinaryString(b) => b.as_ref().clone(),
        _ => Vec::new(),
    }
}

/// A Go string built from bytes ([`Value::BinaryString`] when not UTF-8).
pub fn go_string(b: Vec<u8>) -> Value {
    Value::from_go_bytes(b)
}

/// The Go panic text of a nil map/ slice kind check in sprig's list functions
/// (`reflect.TypeOf(nil).Kind()` dereferences a nil type).
pub const NIL_DEREF: &str = "runtime error: invalid memory address or nil pointer dereference";

/// `%s` of a reflect kind name as sprig's error messages print it.
pub fn kind_of(v: &Value) -> &'static str {
    v.kind_name()
}
