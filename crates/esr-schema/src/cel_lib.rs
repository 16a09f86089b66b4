//! The Kubernetes CEL library functions (`k8s.io/apiserver/pkg/cel/library`) that the `cel`
//! crate does not provide: the lists library (`isSorted`, `sum`, `min`, `max`, `indexOf`,
//! `lastIndexOf` on lists), the regex library (`find`, `findAll`) and `isURL`.
//!
//! `isURL` accepts what Go's `url.ParseRequestURI` accepts, approximated: an absolute path, or
//! a scheme (`[A-Za-z][A-Za-z0-9+.-]*:`) followed by a non-empty rest, without spaces or control
//! characters.

use std::cmp::Ordering;

use cel::common::types::{INT_TYPE, LIST_TYPE, STRING_TYPE};
use cel::common::value::{CowVal, Val};
use cel::{Env, ExecutionError, Value};

fn value(v: &CowVal<'_, '_>) -> Result<Value, ExecutionError> {
    Value::try_from(v.as_ref())
}

fn out<'b, 'v>(v: Value) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let b: Box<dyn Val> = Box::<dyn Val>::try_from(v)?;
    Ok(CowVal::from(b))
}

fn list_arg(args: &[CowVal<'_, '_>], function: &str) -> Result<Vec<Value>, ExecutionError> {
    match args.first().map(value).transpose()? {
        Some(Value::List(l)) => Ok(l.as_ref().clone()),
        _ => Err(ExecutionError::function_error(function, "expected a list")),
    }
}

fn string_arg(args: &[CowVal<'_, '_>], i: usize, function: &str) -> Result<String, ExecutionError> {
    match args.get(i).map(value).transpose()? {
        Some(Value::String(s)) => Ok(s.as_ref().clone()),
        _ => Err(ExecutionError::function_error(
            function,
            "expected a string",
        )),
    }
}

fn compare(a: &Value, b: &Value) -> Result<Ordering, ExecutionError> {
    a.partial_cmp(b)
        .ok_or_else(|| ExecutionError::ValuesNotComparable(a.clone(), b.clone()))
}

fn is_sorted<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let items = list_arg(&args, "isSorted")?;
    for w in items.windows(2) {
        if compare(&w[0], &w[1])? == Ordering::Greater {
            return out(Value::Bool(false));
        }
    }
    out(Value::Bool(true))
}

fn sum<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let items = list_arg(&args, "sum")?;
    let mut acc = Value::Int(0);
    for (i, x) in items.into_iter().enumerate() {
        acc = match (i, &acc, &x) {
            (0, _, _) => x,
            (_, Value::Int(a), Value::Int(b)) => Value::Int(
                a.checked_add(*b)
                    .ok_or_else(|| ExecutionError::function_error("sum", "integer overflow"))?,
            ),
            (_, Value::UInt(a), Value::UInt(b)) => Value::UInt(
                a.checked_add(*b)
                    .ok_or_else(|| ExecutionError::function_error("sum", "integer overflow"))?,
            ),
            (_, Value::Float(a), Value::Float(b)) => Value::Float(a + b),
            _ => return Err(ExecutionError::no_such_overload("sum", vec![])),
        };
    }
    out(acc)
}

fn extreme<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
    function: &str,
    keep: Ordering,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let items = list_arg(&args, function)?;
    let mut it = items.into_iter();
    let Some(mut best) = it.next() else {
        return Err(ExecutionError::function_error(
            function,
            format!("{function} called on empty list"),
        ));
    };
    for x in it {
        if compare(&x, &best)? == keep {
            best = x;
        }
    }
    out(best)
}

fn list_min<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    extreme(args, "min", Ordering::Less)
}

fn list_max<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    extreme(args, "max", Ordering::Greater)
}

fn list_index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let items = list_arg(&args, "indexOf")?;
    let needle = args.get(1).map(value).transpose()?.unwrap_or(Value::Null);
    let i = items
        .iter()
        .position(|x| *x == needle)
        .map_or(-1, |i| i as i64);
    out(Value::Int(i))
}

fn list_last_index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let items = list_arg(&args, "lastIndexOf")?;
    let needle = args.get(1).map(value).transpose()?.unwrap_or(Value::Null);
    let i = items
        .iter()
        .rposition(|x| *x == needle)
        .map_or(-1, |i| i as i64);
    out(Value::Int(i))
}

fn regex(
    args: &[CowVal<'_, '_>],
    function: &str,
) -> Result<(String, regex::Regex), ExecutionError> {
    let s = string_arg(args, 0, function)?;
    let re = string_arg(args, 1, function)?;
    let re = crate::formats::compile_go_regex(&re)
        .map_err(|e| ExecutionError::function_error(function, e))?;
    Ok((s, re))
}

fn find<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (s, re) = regex(&args, "find")?;
    let m = re
        .find(&s)
        .map(|m| m.as_str().to_string())
        .unwrap_or_default();
    out(Value::from(m))
}

fn find_all_n(s: &str, re: &regex::Regex, n: i64) -> Value {
    let all = re.find_iter(s).map(|m| Value::from(m.as_str().to_string()));
    let found: Vec<Value> = if n < 0 {
        all.collect()
    } else {
        all.take(n as usize).collect()
    };
    Value::List(found.into())
}

fn find_all<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (s, re) = regex(&args, "findAll")?;
    out(find_all_n(&s, &re, -1))
}

fn find_all_limit<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (s, re) = regex(&args, "findAll")?;
    let n = match args.get(2).map(value).transpose()? {
        Some(Value::Int(n)) => n,
        _ => return Err(ExecutionError::function_error("findAll", "expected an int")),
    };
    out(find_all_n(&s, &re, n))
}

/// `url.ParseRequestURI` succeeds (approximated, see the module doc).
pub(crate) fn is_request_uri(s: &str) -> bool {
    if s.is_empty() || s.chars().any(|c| c.is_control() || c == ' ') {
        return false;
    }
    if s.starts_with('/') {
        return true;
    }
    let Some((scheme, rest)) = s.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        && !rest.is_empty()
}

fn is_url<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let s = string_arg(&args, 0, "isURL")?;
    out(Value::Bool(is_request_uri(&s)))
}

/// Registers the functions on `env`. A name the environment already declares with the same
/// signature is left as it is.
pub(crate) fn register(env: &mut Env) {
    let members: [(
        &str,
        &str,
        Vec<cel::common::types::Type>,
        cel::common::functions::Function,
    ); 8] = [
        ("isSorted", "list_is_sorted", vec![], is_sorted),
        ("sum", "list_sum", vec![], sum),
        ("min", "list_min", vec![], list_min),
        ("max", "list_max", vec![], list_max),
        (
            "indexOf",
            "list_index_of",
            vec![cel::common::types::DYN_TYPE],
            list_index_of,
        ),
        (
            "lastIndexOf",
            "list_last_index_of",
            vec![cel::common::types::DYN_TYPE],
            list_last_index_of,
        ),
        ("find", "string_find", vec![STRING_TYPE], find),
        ("findAll", "string_find_all", vec![STRING_TYPE], find_all),
    ];
    for (i, (name, id, args, f)) in members.into_iter().enumerate() {
        let target = if i < 6 { LIST_TYPE } else { STRING_TYPE };
        let _ = env.add_member_overload(name, id, target, args, f);
    }
    let _ = env.add_member_overload(
        "findAll",
        "string_find_all_n",
        STRING_TYPE,
        vec![STRING_TYPE, INT_TYPE],
        find_all_limit,
    );
    let _ = env.add_overload("isURL", "string_is_url", vec![STRING_TYPE], is_url);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_uris() {
        assert!(is_request_uri("https://example.com/x"));
        assert!(is_request_uri("/path"));
        assert!(!is_request_uri("example.com"));
        assert!(!is_request_uri("a b:c"));
        assert!(!is_request_uri(""));
    }
}
