//! Value validation as kube-openapi's `SchemaValidator` does it, converted to field errors the way
//! the apiextensions-apiserver does (`kubeOpenAPIResultToFieldErrors`).
//!
//! The validator runs, per node and in this order: type, allOf/anyOf/oneOf/not, string
//! (maxLength, minLength, pattern: first failure wins), format, number (multipleOf, minimum,
//! maximum), array (items, minItems, maxItems, uniqueItems), enum, object (minProperties or
//! maxProperties (returning early), additionalProperties, properties, required). A `null` value is
//! checked by the type and enum validators only.

use serde_json::Value;

use crate::error::{BadValue, FieldError, FieldErrorKind};
use crate::formats;
use crate::gofmt;
use crate::node::{Additional, Node};

const IN: &str = "body";

/// One kube-openapi validation error, before conversion to a field error.
#[derive(Debug, Clone)]
pub(crate) struct VErr {
    /// kube-openapi's `Name` (the dotted path, possibly with a leading `.`).
    name: String,
    kind: VKind,
}

#[derive(Debug, Clone)]
enum VKind {
    Required,
    Enum {
        value: Value,
        values: Vec<Value>,
    },
    TooLong {
        max: i64,
    },
    MaxItems {
        actual: i64,
        max: i64,
    },
    TooManyProperties {
        actual: i64,
        max: i64,
    },
    InvalidType {
        value: Value,
        message: String,
    },
    Invalid {
        value: BadValue,
        message: String,
    },
    /// A composite error (anyOf/oneOf/allOf/not): not a `*errors.Validation`, so the apiserver
    /// reports it at the parent path with an empty value.
    Composite {
        message: String,
    },
}

#[derive(Debug, Default)]
pub(crate) struct VRes {
    pub errs: Vec<VErr>,
    match_count: usize,
}

impl VRes {
    fn merge(&mut self, other: VRes) {
        self.errs.extend(other.errs);
        self.match_count += other.match_count;
    }
    fn err(e: VErr) -> VRes {
        VRes {
            errs: vec![e],
            match_count: 0,
        }
    }
    fn is_valid(&self) -> bool {
        self.errs.is_empty()
    }
}

fn join(path: &str, key: &str) -> String {
    format!("{path}.{key}")
}

/// The kube-openapi data "kind" of a JSON value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Null,
    Bool,
    Int,
    Float,
    String,
    Array,
    Object,
}

fn kind_of(v: &Value) -> Kind {
    match v {
        Value::Null => Kind::Null,
        Value::Bool(_) => Kind::Bool,
        Value::Number(n) => {
            if n.is_i64() {
                Kind::Int
            } else {
                Kind::Float
            }
        }
        Value::String(_) => Kind::String,
        Value::Array(_) => Kind::Array,
        Value::Object(_) => Kind::Object,
    }
}

fn as_f64(v: &Value) -> f64 {
    v.as_f64().unwrap_or(0.0)
}

/// swag.IsFloat64AJSONInteger
fn is_json_integer(f: f64) -> bool {
    const MAX: f64 = 9_007_199_254_740_992.0; // 2^53
    if !f.is_finite() || !(-MAX..=MAX).contains(&f) {
        return false;
    }
    let g = f.trunc();
    if f == g {
        return true;
    }
    let diff = (f - g).abs();
    diff / (f.abs() + g.abs()) < 1e-9
}

/// Validates `data` against `node` at kube-openapi path `path`.
pub(crate) fn validate_node(node: &Node, data: &Value, path: &str) -> VRes {
    let mut r = VRes::default();
    let kind = kind_of(data);
    if kind == Kind::Null {
        r.merge(type_validate(node, data, path));
        r.merge(common_validate(node, data, path));
        return r;
    }
    if !node.types.is_empty() || node.vformat.is_some() {
        r.merge(type_validate(node, data, path));
        r.match_count += 1;
    }
    r.merge(props_validate(node, data, path));
    r.match_count += 1;
    if let Value::String(s) = data {
        r.merge(string_validate(node, s, path));
        r.match_count += 1;
        if let Some(f) = &node.vformat
            && formats::is_string_format(f)
        {
            if !formats::validates(f, s) {
                r.merge(VRes::err(invalid_type(path, f, s)));
            }
            r.match_count += 1;
        }
    }
    if matches!(kind, Kind::Int | Kind::Float) {
        r.merge(number_validate(node, data, path));
        r.match_count += 1;
    }
    if let Value::Array(items) = data {
        r.merge(slice_validate(node, items, path));
        r.match_count += 1;
    }
    r.merge(common_validate(node, data, path));
    r.match_count += 1;
    if let Value::Object(map) = data {
        r.merge(object_validate(node, map, path));
        r.match_count += 1;
    }
    r.match_count += 1;
    r
}

fn invalid_type(path: &str, type_name: &str, value: &str) -> VErr {
    VErr {
        name: path.to_string(),
        kind: VKind::InvalidType {
            value: Value::String(value.to_string()),
            message: format!(
                "{path} in {IN} must be of type {type_name}: {}",
                gofmt::quote(value)
            ),
        },
    }
}

fn invalid(path: &str, value: BadValue, message: String) -> VErr {
    VErr {
        name: path.to_string(),
        kind: VKind::Invalid { value, message },
    }
}

fn type_validate(node: &Node, data: &Value, path: &str) -> VRes {
    let types = &node.types;
    let contains = |t: &str| types.iter().any(|x| x == t);
    if data.is_null() {
        if !types.is_empty() && !contains("null") && !node.nullable {
            return VRes::err(invalid_type(path, &types.join(","), "null"));
        }
        return VRes {
            errs: Vec::new(),
            match_count: 1,
        };
    }
    let kind = kind_of(data);
    let (sch_type, format) = match kind {
        Kind::Bool => ("boolean", ""),
        Kind::String => ("string", ""),
        Kind::Int => ("integer", "int64"),
        Kind::Float => ("number", "float64"),
        Kind::Array => ("array", ""),
        Kind::Object | Kind::Null => ("object", ""),
    };
    let t_format = node.vformat.as_deref().unwrap_or("");
    let is_float_int = sch_type == "number" && is_json_integer(as_f64(data)) && contains("integer");
    let is_int_float = sch_type == "integer" && contains("number");
    let is_lower_int = t_format == "int64" && format == "int32";
    let is_lower_float = t_format == "float64" && format == "float32";
    if kind != Kind::String
        && kind != Kind::Array
        && !t_format.is_empty()
        && !(contains(sch_type)
            || format == t_format
            || is_float_int
            || is_int_float
            || is_lower_int
            || is_lower_float)
    {
        return VRes::err(invalid_type(path, t_format, format));
    }
    let numeric = contains("number") || contains("integer");
    if !numeric && !t_format.is_empty() && (kind == Kind::String || kind == Kind::Array) {
        return VRes {
            errs: Vec::new(),
            match_count: 1,
        };
    }
    if !(contains(sch_type) || is_float_int || is_int_float) {
        return VRes::err(invalid_type(path, &types.join(","), sch_type));
    }
    VRes {
        errs: Vec::new(),
        match_count: 1,
    }
}

fn composite(message: String) -> VErr {
    VErr {
        name: String::new(),
        kind: VKind::Composite { message },
    }
}

fn props_validate(node: &Node, data: &Value, path: &str) -> VRes {
    let mut main = VRes::default();
    let qpath = gofmt::quote(path);
    if !node.any_of.is_empty() {
        let mut best: Option<VRes> = None;
        let mut first_success: Option<VRes> = None;
        let mut succeeded = false;
        for s in &node.any_of {
            let r = validate_node(s, data, path);
            if r.is_valid() {
                best = None;
                succeeded = true;
                first_success = Some(r);
                break;
            }
            if best.as_ref().is_none_or(|b| r.match_count > b.match_count) {
                best = Some(r);
            }
        }
        if !succeeded {
            main.errs.push(composite(format!(
                "{qpath} must validate at least one schema (anyOf)"
            )));
        }
        if let Some(b) = best {
            main.merge(b);
        } else if let Some(f) = first_success {
            main.merge(f);
        }
    }
    if !node.one_of.is_empty() {
        let mut best: Option<VRes> = None;
        let mut first_success: Option<VRes> = None;
        let mut validated = 0usize;
        for s in &node.one_of {
            let r = validate_node(s, data, path);
            if r.is_valid() {
                validated += 1;
                best = None;
                if first_success.is_none() {
                    first_success = Some(r);
                }
                continue;
            }
            if validated == 0 && best.as_ref().is_none_or(|b| r.match_count > b.match_count) {
                best = Some(r);
            }
        }
        if validated != 1 {
            let extra = if validated == 0 {
                "Found none valid".to_string()
            } else {
                format!("Found {validated} valid alternatives")
            };
            main.errs.push(composite(format!(
                "{qpath} must validate one and only one schema (oneOf). {extra}"
            )));
            if let Some(b) = best {
                main.merge(b);
            }
        } else if let Some(f) = first_success {
            main.merge(f);
        }
    }
    if !node.all_of.is_empty() {
        let mut validated = 0usize;
        for s in &node.all_of {
            let r = validate_node(s, data, path);
            if r.is_valid() {
                validated += 1;
            }
            main.merge(r);
        }
        if validated != node.all_of.len() {
            let extra = if validated == 0 {
                ". None validated"
            } else {
                ""
            };
            main.errs.push(composite(format!(
                "{qpath} must validate all the schemas (allOf){extra}"
            )));
        }
    }
    if let Some(not) = &node.not
        && validate_node(not, data, path).is_valid()
    {
        main.errs.push(composite(format!(
            "{qpath} must not validate the schema (not)"
        )));
    }
    main.match_count += 1;
    main
}

fn string_validate(node: &Node, s: &str, path: &str) -> VRes {
    let len = i64::try_from(s.chars().count()).unwrap_or(i64::MAX);
    let data = Value::String(s.to_string());
    if let Some(max) = node.max_length
        && len > max
    {
        return VRes::err(VErr {
            name: path.to_string(),
            kind: VKind::TooLong { max },
        });
    }
    if let Some(min) = node.min_length
        && len < min
    {
        return VRes::err(invalid(
            path,
            BadValue::Json(data),
            format!("{path} in {IN} should be at least {min} chars long"),
        ));
    }
    if let (Some(pattern), Some(re)) = (&node.pattern, &node.regex) {
        match re {
            Ok(re) => {
                if !re.is_match(s) {
                    return VRes::err(invalid(
                        path,
                        BadValue::Json(data),
                        format!("{path} in {IN} should match '{pattern}'"),
                    ));
                }
            }
            Err(e) => {
                return VRes::err(invalid(
                    path,
                    BadValue::Json(data),
                    format!("{path} in {IN} should match '{pattern}, but pattern is invalid: {e}'"),
                ));
            }
        }
    }
    VRes::default()
}

fn number_validate(node: &Node, data: &Value, path: &str) -> VRes {
    let mut res = VRes::default();
    let int_val = data.as_i64();
    let fval = as_f64(data);
    let bad = || BadValue::Json(data.clone());
    if let Some(factor) = node.multiple_of {
        match int_val {
            Some(i) => {
                #[allow(clippy::cast_possible_truncation)]
                let f = factor as i64;
                if f < 0 {
                    res.errs.push(invalid(
                        path,
                        BadValue::Int(f),
                        format!("factor MultipleOf declared for {path} must be positive: {f}"),
                    ));
                } else if f != 0 && (i / f) * f != i {
                    res.errs.push(invalid(
                        path,
                        bad(),
                        format!("{path} in {IN} should be a multiple of {f}"),
                    ));
                }
            }
            None => {
                if factor < 0.0 {
                    res.errs.push(invalid(
                        path,
                        BadValue::Json(serde_json::json!(factor)),
                        format!(
                            "factor MultipleOf declared for {path} must be positive: {}",
                            gofmt::float_v(factor)
                        ),
                    ));
                } else {
                    let mult = if factor < 1.0 {
                        1.0 / factor * fval
                    } else {
                        fval / factor
                    };
                    if !is_json_integer(mult) {
                        res.errs.push(invalid(
                            path,
                            bad(),
                            format!(
                                "{path} in {IN} should be a multiple of {}",
                                gofmt::float_v(factor)
                            ),
                        ));
                    }
                }
            }
        }
    }
    if let Some(min) = node.minimum {
        let excl = node.exclusive_minimum;
        let (fail, shown) = match int_val {
            Some(i) => {
                #[allow(clippy::cast_possible_truncation)]
                let m = min as i64;
                ((!excl && i < m) || (excl && i <= m), m.to_string())
            }
            None => (
                (!excl && fval < min) || (excl && fval <= min),
                gofmt::float_v(min),
            ),
        };
        if fail {
            let op = if excl {
                "greater than"
            } else {
                "greater than or equal to"
            };
            res.errs.push(invalid(
                path,
                bad(),
                format!("{path} in {IN} should be {op} {shown}"),
            ));
        }
    }
    if let Some(max) = node.maximum {
        let excl = node.exclusive_maximum;
        let (fail, shown) = match int_val {
            Some(i) => {
                #[allow(clippy::cast_possible_truncation)]
                let m = max as i64;
                ((!excl && i > m) || (excl && i >= m), m.to_string())
            }
            None => (
                (!excl && fval > max) || (excl && fval >= max),
                gofmt::float_v(max),
            ),
        };
        if fail {
            let op = if excl {
                "less than"
            } else {
                "less than or equal to"
            };
            res.errs.push(invalid(
                path,
                bad(),
                format!("{path} in {IN} should be {op} {shown}"),
            ));
        }
    }
    res.match_count += 1;
    res
}

fn slice_validate(node: &Node, items: &[Value], path: &str) -> VRes {
    let mut res = VRes::default();
    if let Some(item_schema) = &node.items {
        for (i, v) in items.iter().enumerate() {
            res.merge(validate_node(item_schema, v, &format!("{path}[{i}]")));
        }
    }
    let size = i64::try_from(items.len()).unwrap_or(i64::MAX);
    if let Some(min) = node.min_items
        && size < min
    {
        res.errs.push(invalid(
            path,
            BadValue::Int(size),
            format!("{path} in {IN} should have at least {min} items"),
        ));
    }
    if let Some(max) = node.max_items
        && size > max
    {
        res.errs.push(VErr {
            name: path.to_string(),
            kind: VKind::MaxItems { actual: size, max },
        });
    }
    if node.unique_items {
        let dup = items
            .iter()
            .enumerate()
            .any(|(i, a)| items[..i].contains(a));
        if dup {
            res.errs.push(invalid(
                path,
                BadValue::Json(Value::String(String::new())),
                format!("{path} in {IN} shouldn't contain duplicates"),
            ));
        }
    }
    res.match_count += 1;
    res
}

/// kube-openapi's enum comparison: Go reflect conversion of the value to the enum value's type,
/// then deep equality.
fn enum_matches(data: &Value, ev: &Value) -> bool {
    match (data, ev) {
        (Value::Null, _) => false,
        (Value::String(a), Value::String(b)) => a == b,
        (Value::Bool(a), Value::Bool(b)) => a == b,
        (Value::Number(a), Value::Number(b)) => match (a.as_i64(), b.as_i64()) {
            (Some(x), Some(y)) => x == y,
            (Some(x), None) => {
                #[allow(clippy::cast_precision_loss)]
                let xf = x as f64;
                Some(xf) == b.as_f64()
            }
            (None, Some(y)) => {
                // float64 converted to int64 truncates
                #[allow(clippy::cast_possible_truncation)]
                let xt = a.as_f64().map(|f| f as i64);
                xt == Some(y)
            }
            (None, None) => a.as_f64() == b.as_f64(),
        },
        // Go converts an integer to a string as a code point.
        (Value::Number(a), Value::String(b)) => a
            .as_i64()
            .map(|i| {
                u32::try_from(i)
                    .ok()
                    .and_then(char::from_u32)
                    .unwrap_or('\u{FFFD}')
                    .to_string()
            })
            .is_some_and(|s| &s == b),
        (Value::Array(_), Value::Array(_)) | (Value::Object(_), Value::Object(_)) => data == ev,
        _ => false,
    }
}

fn common_validate(node: &Node, data: &Value, path: &str) -> VRes {
    match &node.enum_values {
        Some(values) if !values.is_empty() => {
            if values.iter().any(|ev| enum_matches(data, ev)) {
                VRes::default()
            } else {
                VRes::err(VErr {
                    name: path.to_string(),
                    kind: VKind::Enum {
                        value: data.clone(),
                        values: values.clone(),
                    },
                })
            }
        }
        _ => VRes::default(),
    }
}

fn object_validate(node: &Node, map: &serde_json::Map<String, Value>, path: &str) -> VRes {
    let num = i64::try_from(map.len()).unwrap_or(i64::MAX);
    if let Some(min) = node.min_properties
        && num < min
    {
        return VRes::err(invalid(
            path,
            BadValue::Int(num),
            format!("{path} in {IN} should have at least {min} properties"),
        ));
    }
    if let Some(max) = node.max_properties
        && num > max
    {
        return VRes::err(VErr {
            name: path.to_string(),
            kind: VKind::TooManyProperties { actual: num, max },
        });
    }
    let mut res = VRes::default();
    match &node.additional {
        Some(Additional::Bool(false)) => {
            for k in map.keys() {
                if !node.properties.contains_key(k) {
                    res.errs.push(invalid(
                        path,
                        BadValue::Json(Value::String(k.clone())),
                        format!("{path}.{k} in {IN} is a forbidden property"),
                    ));
                }
            }
        }
        Some(Additional::Schema(s)) => {
            for (k, v) in map {
                if !node.properties.contains_key(k) {
                    res.merge(validate_node(s, v, &join(path, k)));
                }
            }
        }
        _ => {}
    }
    for (name, prop) in &node.properties {
        if let Some(v) = map.get(name) {
            let rname = if path.is_empty() {
                name.clone()
            } else {
                join(path, name)
            };
            res.merge(validate_node(prop, v, &rname));
        }
    }
    for k in &node.required {
        if !map.contains_key(k) {
            res.errs.push(VErr {
                name: join(path, k),
                kind: VKind::Required,
            });
        }
    }
    res
}

/// Converts kube-openapi errors to field errors. `prefix` is the apiserver's `fldPath`
/// (`None` at the root of an object, `Some("...default")` when validating a default).
pub(crate) fn to_field_errors(errs: Vec<VErr>, prefix: Option<&str>) -> Vec<FieldError> {
    let nil_path = || {
        prefix
            .map(str::to_string)
            .unwrap_or_else(|| "<nil>".to_string())
    };
    errs.into_iter()
        .map(|e| {
            let path = if !e.name.is_empty() && e.name != "." {
                let trimmed = e.name.strip_prefix('.').unwrap_or(&e.name);
                match prefix {
                    Some(p) => format!("{p}.{trimmed}"),
                    None => trimmed.to_string(),
                }
            } else {
                nil_path()
            };
            match e.kind {
                VKind::Required => FieldError::required(path, ""),
                VKind::Enum { value, values } => {
                    let supported: Vec<String> = values
                        .iter()
                        .map(|v| match v {
                            Value::String(s) => s.clone(),
                            other => other.to_string(),
                        })
                        .collect();
                    FieldError::not_supported(path, &value, &supported)
                }
                VKind::TooLong { max } => FieldError::too_long(path, max),
                VKind::MaxItems { actual, max } | VKind::TooManyProperties { actual, max } => {
                    FieldError::too_many(path, actual, max)
                }
                VKind::InvalidType { value, message } => FieldError::build(
                    path,
                    FieldErrorKind::TypeInvalid,
                    BadValue::Json(value),
                    &message,
                ),
                VKind::Invalid { value, message } => {
                    FieldError::build(path, FieldErrorKind::Invalid, value, &message)
                }
                VKind::Composite { message } => FieldError::build(
                    nil_path(),
                    FieldErrorKind::Invalid,
                    BadValue::Json(Value::String(String::new())),
                    &message,
                ),
            }
        })
        .collect()
}
