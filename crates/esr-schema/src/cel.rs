//! `x-kubernetes-validations`: CEL rules compiled with the `cel` crate and evaluated on create
//! and update as the apiextensions-apiserver does (`schema/cel.Validator`).
//!
//! - `self` is the value at the rule's schema node; `oldSelf` the correlated old value. A rule
//!   that uses `oldSelf` (a transition rule) is evaluated only on update and only where an old
//!   value correlates: object properties and map entries by key, `x-kubernetes-list-type: map`
//!   items by their keys. Items of other lists never correlate.
//! - A rule that evaluates to `false` gives a field error at the node's path (plus the rule's
//!   `fieldPath`), of the rule's `reason` (`FieldValueInvalid` by default), with the
//!   `messageExpression` result, else `message`, else `failed rule: <rule>`. Objects and arrays
//!   omit the value (`spec.dataTo[0]: Invalid value: <message>`), scalars show it.
//! - A rule that fails to evaluate gives `Invalid value: "<type>": <error> evaluating rule:
//!   <message or rule>`.
//! - Ratcheting: on update, a failing rule without `oldSelf` is not an error when the value (or,
//!   for a value that does not correlate, its nearest correlated parent) is unchanged.
//! - At the root, `metadata` only carries `name` and `generateName`.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use cel::objects::{Key, Map as CelMap};
use cel::{Context, Env, ExecutionError, Program, Value as CelValue};
use serde_json::Value;

use crate::error::{BadValue, FieldError, FieldErrorKind};
use crate::node::Node;

/// The most bytes a `messageExpression` result may have.
const MAX_MESSAGE_EXPRESSION_BYTES: usize = 5000;

/// One compiled `x-kubernetes-validations` entry.
#[derive(Debug)]
pub(crate) struct Rule {
    /// `rule` as written.
    pub rule: String,
    /// `message` as written.
    pub message: String,
    /// `reason` as written (empty: none).
    pub reason: String,
    /// `fieldPath` as written (empty: none).
    pub field_path: String,
    /// `optionalOldSelf`.
    pub optional_old_self: bool,
    /// The compiled rule, or the compiler's error.
    pub program: Result<Program, String>,
    /// The compiled `messageExpression`, if any.
    pub message_program: Option<Result<Program, String>>,
    /// The rule references `oldSelf`.
    pub uses_old_self: bool,
}

/// The CEL environment: the standard library with the strings, lists and math extensions
/// (the Kubernetes CEL environment includes cel-go's `ext.Strings`, `ext.Lists`, `ext.Math`).
pub(crate) fn env() -> &'static Arc<Env> {
    static ENV: OnceLock<Arc<Env>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Env::stdlib();
        // Registering the crate's own extensions on a fresh stdlib environment cannot
        // conflict; a failure would only leave those functions undeclared.
        for ext in [
            cel::extensions::strings as fn(&mut Env) -> Result<(), cel::DeclarationError>,
            cel::extensions::lists,
            cel::extensions::math,
        ] {
            let _ = env.add_extension(ext);
        }
        crate::cel_lib::register(&mut env);
        Arc::new(env)
    })
}

/// Compiles a CEL expression in [`env`].
pub(crate) fn compile(source: &str) -> Result<Program, String> {
    env().compile(source).map_err(|e| e.to_string())
}

impl Rule {
    /// Reads and compiles one `x-kubernetes-validations` entry.
    pub(crate) fn parse(v: &Value) -> Rule {
        let get = |k: &str| {
            v.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let rule = get("rule");
        let message_expression = get("messageExpression");
        let program = compile(&rule);
        let uses_old_self = program
            .as_ref()
            .is_ok_and(|p| p.references().has_variable("oldSelf"));
        let message_program =
            (!message_expression.trim().is_empty()).then(|| compile(&message_expression));
        Rule {
            message: get("message"),
            reason: get("reason"),
            field_path: get("fieldPath"),
            optional_old_self: v.get("optionalOldSelf").and_then(Value::as_bool) == Some(true),
            rule,
            program,
            message_program,
            uses_old_self,
        }
    }

    /// `ruleErrorString`: the trimmed message, else the trimmed rule.
    fn error_string(&self) -> &str {
        if self.message.is_empty() {
            self.rule.trim()
        } else {
            self.message.trim()
        }
    }

    /// `ruleMessageOrDefault`.
    fn message_or_default(&self) -> String {
        if self.message.is_empty() {
            format!("failed rule: {}", self.error_string())
        } else {
            self.message.trim().to_string()
        }
    }

    fn kind(&self) -> FieldErrorKind {
        match self.reason.as_str() {
            "FieldValueForbidden" => FieldErrorKind::Forbidden,
            "FieldValueRequired" => FieldErrorKind::Required,
            "FieldValueDuplicate" => FieldErrorKind::Duplicate,
            _ => FieldErrorKind::Invalid,
        }
    }
}

/// A JSON value as CEL sees it, typed by its schema: `integer` fields are `int`, `number`
/// fields `double`, objects maps with string keys.
pub(crate) fn to_cel(node: Option<&Node>, v: &Value) -> CelValue {
    match v {
        Value::Null => CelValue::Null,
        Value::Bool(b) => CelValue::Bool(*b),
        Value::Number(n) => {
            let is_number = node.is_some_and(|s| s.ty.as_deref() == Some("number"));
            match (is_number, n.as_i64(), n.as_u64()) {
                (false, Some(i), _) => CelValue::Int(i),
                (false, None, Some(u)) => CelValue::UInt(u),
                _ => CelValue::Float(n.as_f64().unwrap_or_default()),
            }
        }
        Value::String(s) => CelValue::String(Arc::new(s.clone())),
        Value::Array(items) => {
            let item = node.and_then(|s| s.items.as_deref());
            CelValue::List(Arc::new(items.iter().map(|x| to_cel(item, x)).collect()))
        }
        Value::Object(m) => {
            let map: HashMap<Key, CelValue> = m
                .iter()
                .map(|(k, x)| {
                    (
                        Key::String(Arc::new(k.clone())),
                        to_cel(node.and_then(|s| s.child(k)), x),
                    )
                })
                .collect();
            CelValue::Map(CelMap { map: Arc::new(map) })
        }
    }
}

/// The root object as its rules see it: `metadata` reduced to `name` and `generateName`.
fn root_view(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(md) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        md.retain(|k, _| k == "name" || k == "generateName");
    }
    v
}

/// cel-go's text for an evaluation error, where the two libraries name the same error.
fn go_error_text(e: &ExecutionError) -> String {
    match e {
        ExecutionError::NoSuchKey(k) => format!("no such key: {k}"),
        ExecutionError::NoSuchOverload(_) => "no such overload".to_string(),
        ExecutionError::DivisionByZero(_) => "division by zero".to_string(),
        ExecutionError::RemainderByZero(_) => "modulus by zero".to_string(),
        ExecutionError::Overflow(..) => "integer overflow".to_string(),
        ExecutionError::IndexOutOfBounds(i) => format!("index out of bounds: {i:?}"),
        other => other.to_string(),
    }
}

fn child(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_string()
    } else {
        format!("{parent}.{name}")
    }
}

/// `fieldPath` as the apiserver appends it to the rule's path: `.a.b` → `a.b`,
/// `.a['b.c']` → `a[b.c]`.
fn normalized_field_path(fp: &str) -> String {
    let mut out = String::new();
    let mut rest = fp.trim();
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&r[..end]);
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix("['") {
            let end = r.find("']").unwrap_or(r.len());
            out.push('[');
            out.push_str(&r[..end].replace("\\'", "'"));
            out.push(']');
            rest = r.get(end + 2..).unwrap_or_default();
        } else {
            let end = rest.find(['.', '[']).unwrap_or(rest.len());
            out.push_str(&rest[..end]);
            rest = &rest[end..];
        }
    }
    out
}

/// Appends a normalized field path to a path (`field.Path.Child`).
fn with_field_path(path: &str, normalized: &str) -> String {
    if normalized.is_empty() {
        path.to_string()
    } else if path.is_empty() {
        normalized.to_string()
    } else {
        format!("{path}.{normalized}")
    }
}

/// The field path the apiserver prints for the root (`<nil>`).
const ROOT_PATH: &str = "<nil>";

/// Evaluates every rule of the schema below `root` against `obj` (and `old` on update).
pub(crate) fn validate(root: &Node, obj: &Value, old: Option<&Value>, errs: &mut Vec<FieldError>) {
    walk(root, "", obj, old, false, true, errs);
}

fn walk(
    node: &Node,
    path: &str,
    v: &Value,
    old: Option<&Value>,
    parent_unchanged: bool,
    is_root: bool,
    errs: &mut Vec<FieldError>,
) {
    if v.is_null() {
        return;
    }
    let unchanged = match old {
        Some(o) => o == v,
        None => parent_unchanged,
    };
    if !node.cel_rules.is_empty() {
        run_rules(node, path, v, old, unchanged, is_root, errs);
    }
    for sub in &node.all_of {
        if !sub.cel_rules.is_empty() {
            run_rules(sub, path, v, old, false, is_root, errs);
        }
    }
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let old_x = old.and_then(|o| o.get(k));
                if let Some(p) = node.properties.get(k) {
                    walk(p, &child(path, k), x, old_x, unchanged, false, errs);
                } else if let Some(ap) = node.additional_schema() {
                    walk(
                        ap,
                        &format!("{path}[{k}]"),
                        x,
                        old_x,
                        unchanged,
                        false,
                        errs,
                    );
                }
            }
        }
        Value::Array(items) => {
            let Some(item) = node.items.as_deref() else {
                return;
            };
            let old_items = old.and_then(Value::as_array);
            for (i, x) in items.iter().enumerate() {
                let old_x = if node.x_list_type.as_deref() == Some("map") {
                    old_items.and_then(|olds| {
                        olds.iter()
                            .find(|o| same_map_keys(&node.x_list_map_keys, o, x))
                    })
                } else {
                    None
                };
                walk(
                    item,
                    &format!("{path}[{i}]"),
                    x,
                    old_x,
                    unchanged,
                    false,
                    errs,
                );
            }
        }
        _ => {}
    }
}

fn same_map_keys(keys: &[String], a: &Value, b: &Value) -> bool {
    keys.iter().all(|k| a.get(k) == b.get(k))
}

fn run_rules(
    node: &Node,
    path: &str,
    v: &Value,
    old: Option<&Value>,
    unchanged: bool,
    is_root: bool,
    errs: &mut Vec<FieldError>,
) {
    let ty = node.ty.clone().unwrap_or_default();
    let err_path = if path.is_empty() { ROOT_PATH } else { path };
    let (self_json, old_json) = if is_root {
        (root_view(v), old.map(root_view))
    } else {
        (v.clone(), old.cloned())
    };
    let self_val = to_cel(Some(node), &self_json);
    let old_val = old_json.as_ref().map(|o| to_cel(Some(node), o));
    let mut ctx = Context::with_env(env().clone());
    ctx.add_variable_from_value("self", self_val);
    if let Some(o) = &old_val {
        ctx.add_variable_from_value("oldSelf", o.clone());
    }
    for rule in &node.cel_rules {
        let program = match &rule.program {
            Ok(p) => p,
            Err(e) => {
                errs.push(FieldError::invalid(
                    err_path,
                    &Value::String(ty.clone()),
                    &format!("rule compile error: {e}"),
                ));
                continue;
            }
        };
        if rule.uses_old_self && old_val.is_none() && !rule.optional_old_self {
            continue;
        }
        let result = if rule.optional_old_self && old_val.is_none() {
            // `oldSelf` is an absent optional: evaluate with `oldSelf` as null.
            let mut c = Context::with_env(env().clone());
            c.add_variable_from_value("self", to_cel(Some(node), &self_json));
            c.add_variable_from_value("oldSelf", CelValue::Null);
            program.execute(&c)
        } else {
            program.execute(&ctx)
        };
        match result {
            Ok(CelValue::Bool(true)) => continue,
            Ok(CelValue::Bool(false)) => {}
            Ok(other) => {
                errs.push(FieldError::invalid(
                    err_path,
                    &Value::String(ty.clone()),
                    &format!(
                        "rule compile error: rule must evaluate to a bool, not {:?}",
                        other.type_of()
                    ),
                ));
                continue;
            }
            Err(e) => {
                let text = go_error_text(&e);
                let detail = if text.starts_with("no such overload") {
                    format!(
                        "'{text}': call arguments did not match a supported operator, function or macro signature for rule: {}",
                        rule.error_string()
                    )
                } else {
                    format!("{text} evaluating rule: {}", rule.error_string())
                };
                errs.push(FieldError::invalid(
                    err_path,
                    &Value::String(ty.clone()),
                    &detail,
                ));
                continue;
            }
        }
        if !rule.uses_old_self && unchanged {
            // Ratcheting: an unchanged value keeps passing (the apiserver only warns).
            continue;
        }
        let detail = rule
            .message_program
            .as_ref()
            .and_then(|p| p.as_ref().ok())
            .and_then(|p| match p.execute(&ctx) {
                Ok(CelValue::String(s)) => {
                    let t = s.trim();
                    (!t.is_empty() && !t.contains('\n') && t.len() <= MAX_MESSAGE_EXPRESSION_BYTES)
                        .then(|| t.to_string())
                }
                _ => None,
            })
            .unwrap_or_else(|| rule.message_or_default());
        let value = if ty == "object" || ty == "array" {
            BadValue::Omit
        } else {
            BadValue::Json(v.clone())
        };
        let fp = normalized_field_path(&rule.field_path);
        let p = if path.is_empty() && !fp.is_empty() {
            fp
        } else {
            with_field_path(err_path, &fp)
        };
        errs.push(FieldError::build(p, rule.kind(), value, &detail));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_paths_normalize() {
        assert_eq!(normalized_field_path(".a.b"), "a.b");
        assert_eq!(normalized_field_path(".a['b.c']"), "a[b.c]");
        assert_eq!(normalized_field_path(""), "");
        assert_eq!(with_field_path("spec", "a.b"), "spec.a.b");
    }
}
