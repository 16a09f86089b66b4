//! The CRD-time checks of `x-kubernetes-validations` (apiextensions `validation.go` and
//! `schema/cel/compilation.go`): every rule and `messageExpression` must compile, and its
//! estimated cost must fit the budget.
//!
//! - A rule's estimated cost is cel-go's static estimate of one evaluation (`has()` is free, as
//!   the apiserver configures it; an identifier or field selection costs 1, a function call 1
//!   plus its arguments, a comprehension its range size × its loop body, string functions a
//!   tenth of the string's length, a list literal 10), times the number of times the rule can
//!   run: the product of `maxItems`/`maxProperties` of the lists and maps above it. Where one of
//!   them is unbounded, the rule's own node bounds it instead: 3 MiB (the request size limit)
//!   divided by one more than the node's smallest JSON encoding (`{}` for an object).
//! - Strings without `maxLength`, lists without `maxItems` and maps without `maxProperties`
//!   are sized the same way from the request size limit.
//! - A rule over 10,000,000 is refused: `<path>.x-kubernetes-validations[i].rule: Forbidden:
//!   estimated rule cost exceeds budget by factor of 1.048576x (try simplifying the rule, or
//!   adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are
//!   declared)`; all rules of a schema together may cost 100,000,000.

use std::collections::HashMap;

use cel::IdedExpr;
use cel::common::ast::operators;
use cel::common::ast::{EntryExpr, Expr, LiteralValue};
use serde_json::Value;

use crate::error::FieldError;
use crate::gofmt;
use crate::node::Node;

/// `celconfig.MaxRequestSizeBytes`.
const MAX_REQUEST_SIZE_BYTES: u64 = 3 * 1024 * 1024;
/// `StaticEstimatedCostLimit`: one rule's estimated cost.
pub(crate) const STATIC_ESTIMATED_COST_LIMIT: u64 = 10_000_000;
/// `StaticEstimatedCRDCostLimit`: all rules of a schema together.
pub(crate) const STATIC_ESTIMATED_CRD_COST_LIMIT: u64 = 100_000_000;

const LIST_CREATE_BASE_COST: u64 = 10;
const MAP_CREATE_BASE_COST: u64 = 30;
const STRUCT_CREATE_BASE_COST: u64 = 40;
const STRING_TRAVERSAL_COST_FACTOR: f64 = 0.1;
const REGEX_STRING_LENGTH_COST_FACTOR: f64 = 0.25;

/// The smallest JSON encoding of a value of this schema (`DeclType.MinSerializedSize`).
fn min_serialized_size(n: &Node) -> u64 {
    if n.x_int_or_string {
        return 1;
    }
    match n.ty.as_deref() {
        Some("object") => {
            if !n.properties.is_empty() {
                let mut size = 2;
                for (name, p) in &n.properties {
                    if n.required.contains(name) && p.default.is_none() {
                        size += name.len() as u64 + min_serialized_size(p) + 4;
                    }
                }
                size
            } else {
                2
            }
        }
        Some("array") => 2,
        Some("string") => 2,
        Some("boolean") => 4,
        _ => 1,
    }
}

/// `maxCardinality(minSize)`: how many values of that size fit in one request.
fn max_cardinality(min_size: u64) -> u64 {
    MAX_REQUEST_SIZE_BYTES / (min_size + 1)
}

/// The most elements a value of this schema can have (list items, map entries, string
/// characters), as cel's type declarations bound them.
fn max_elements(n: &Node) -> u64 {
    match n.ty.as_deref() {
        Some("string") => match n.max_length {
            Some(m) => m.max(0) as u64,
            None => match n.format.as_deref() {
                Some("duration") => 64,
                Some("date") => 12,
                Some("date-time") => 34,
                _ => MAX_REQUEST_SIZE_BYTES - 2,
            },
        },
        Some("array") => match n.max_items {
            Some(m) => m.max(0) as u64,
            None => {
                let min = n.items.as_deref().map(min_serialized_size).unwrap_or(1);
                (MAX_REQUEST_SIZE_BYTES - 2) / (min + 1)
            }
        },
        Some("object") if n.properties.is_empty() => match n.max_properties {
            Some(m) => m.max(0) as u64,
            None => {
                let min = n.additional_schema().map(min_serialized_size).unwrap_or(1);
                (MAX_REQUEST_SIZE_BYTES - 2) / (min + 6)
            }
        },
        _ => MAX_REQUEST_SIZE_BYTES - 2,
    }
}

/// What the estimator knows about an expression's value.
#[derive(Clone, Copy)]
enum Ty<'a> {
    /// A value described by a schema node.
    Schema(&'a Node),
    /// A list of known maximum size, with items of this schema (if known).
    List(u64, Option<&'a Node>),
    /// A string of known maximum length.
    Str(u64),
    /// Anything else (numbers, bools, unknown).
    Other,
}

impl Ty<'_> {
    fn size(&self) -> u64 {
        match self {
            Ty::Schema(n) => max_elements(n),
            Ty::List(s, _) | Ty::Str(s) => *s,
            Ty::Other => 1,
        }
    }

    fn is_stringish(&self) -> bool {
        match self {
            Ty::Schema(n) => n.ty.as_deref() == Some("string") || n.x_int_or_string,
            Ty::Str(_) => true,
            _ => false,
        }
    }
}

/// A cost range, as cel-go's `CostEstimate` (saturating).
#[derive(Clone, Copy, Default)]
struct Est {
    min: u64,
    max: u64,
}

impl Est {
    fn fixed(c: u64) -> Est {
        Est { min: c, max: c }
    }
    fn add(self, o: Est) -> Est {
        Est {
            min: self.min.saturating_add(o.min),
            max: self.max.saturating_add(o.max),
        }
    }
}

fn traversal(size: u64, factor: f64) -> u64 {
    (size as f64 * factor).ceil() as u64
}

struct Estimator<'a> {
    vars: Vec<HashMap<String, Ty<'a>>>,
}

impl<'a> Estimator<'a> {
    fn lookup(&self, name: &str) -> Ty<'a> {
        self.vars
            .iter()
            .rev()
            .find_map(|m| m.get(name).copied())
            .unwrap_or(Ty::Other)
    }

    /// The cost of `e` and what its value is.
    fn cost(&mut self, e: &IdedExpr) -> (Est, Ty<'a>) {
        match &e.expr {
            Expr::Literal(LiteralValue::String(s)) => {
                (Est::default(), Ty::Str(s.inner().chars().count() as u64))
            }
            Expr::Literal(_) | Expr::Unspecified => (Est::default(), Ty::Other),
            Expr::Ident(name) => (Est::fixed(1), self.lookup(name)),
            Expr::Select(sel) => {
                let (c, t) = self.cost(&sel.operand);
                let child = match t {
                    Ty::Schema(n) => n.child(&sel.field).map_or(Ty::Other, Ty::Schema),
                    _ => Ty::Other,
                };
                if sel.test {
                    (c, Ty::Other)
                } else {
                    (c.add(Est::fixed(1)), child)
                }
            }
            Expr::List(l) => {
                let mut sum = Est::fixed(LIST_CREATE_BASE_COST);
                for x in &l.elements {
                    sum = sum.add(self.cost(x).0);
                }
                (sum, Ty::List(l.elements.len() as u64, None))
            }
            Expr::Map(m) => {
                let mut sum = Est::fixed(MAP_CREATE_BASE_COST);
                for entry in &m.entries {
                    if let EntryExpr::MapEntry(me) = &entry.expr {
                        sum = sum.add(self.cost(&me.key).0).add(self.cost(&me.value).0);
                    }
                }
                (sum, Ty::Other)
            }
            Expr::Struct(s) => {
                let mut sum = Est::fixed(STRUCT_CREATE_BASE_COST);
                for entry in &s.entries {
                    if let EntryExpr::StructField(f) = &entry.expr {
                        sum = sum.add(self.cost(&f.value).0);
                    }
                }
                (sum, Ty::Other)
            }
            Expr::Comprehension(c) => {
                let (range_cost, range_ty) = self.cost(&c.iter_range);
                let mut sum = range_cost.add(self.cost(&c.accu_init).0);
                let item = match range_ty {
                    Ty::Schema(n) => match n.items.as_deref() {
                        Some(i) => Ty::Schema(i),
                        // a map iterates its keys
                        None => Ty::Str(MAX_REQUEST_SIZE_BYTES - 2),
                    },
                    Ty::List(_, Some(i)) => Ty::Schema(i),
                    _ => Ty::Other,
                };
                let mut scope = HashMap::new();
                scope.insert(c.iter_var.clone(), item);
                scope.insert(c.accu_var.clone(), Ty::List(range_ty.size(), None));
                self.vars.push(scope);
                let loop_cost = self.cost(&c.loop_cond).0.add(self.cost(&c.loop_step).0);
                self.vars.pop();
                let mut rscope = HashMap::new();
                rscope.insert(c.accu_var.clone(), Ty::List(range_ty.size(), None));
                self.vars.push(rscope);
                sum = sum.add(self.cost(&c.result).0);
                self.vars.pop();
                let n = range_ty.size();
                sum = sum.add(Est {
                    min: 0,
                    max: n.saturating_mul(loop_cost.max),
                });
                let result_ty = match range_ty {
                    Ty::Schema(n) => Ty::List(max_elements(n), n.items.as_deref()),
                    other => other,
                };
                (sum, result_ty)
            }
            Expr::Call(call) => self.call(call),
        }
    }

    fn call(&mut self, call: &cel::common::ast::CallExpr) -> (Est, Ty<'a>) {
        let mut sum = Est::default();
        let target = call.target.as_deref().map(|t| {
            let (c, ty) = self.cost(t);
            sum = sum.add(c);
            ty
        });
        let mut arg_costs = vec![];
        let mut arg_tys = vec![];
        for a in &call.args {
            let (c, ty) = self.cost(a);
            arg_costs.push(c);
            arg_tys.push(ty);
        }
        let name = call.func_name.as_str();
        match name {
            operators::LOGICAL_AND | operators::LOGICAL_OR => {
                let (l, r) = (
                    arg_costs.first().copied().unwrap_or_default(),
                    arg_costs.get(1).copied().unwrap_or_default(),
                );
                return (
                    Est {
                        min: l.min,
                        max: l.max.saturating_add(r.max),
                    },
                    Ty::Other,
                );
            }
            operators::CONDITIONAL => {
                let c = arg_costs.first().copied().unwrap_or_default();
                let t = arg_costs.get(1).copied().unwrap_or_default();
                let f = arg_costs.get(2).copied().unwrap_or_default();
                let ty = arg_tys.get(1).copied().unwrap_or(Ty::Other);
                return (
                    Est {
                        min: c.min.saturating_add(t.min.min(f.min)),
                        max: c.max.saturating_add(t.max.max(f.max)),
                    },
                    ty,
                );
            }
            _ => {}
        }
        for c in &arg_costs {
            sum = sum.add(*c);
        }
        let first = target
            .or_else(|| arg_tys.first().copied())
            .unwrap_or(Ty::Other);
        let second = if target.is_some() {
            arg_tys.first().copied()
        } else {
            arg_tys.get(1).copied()
        }
        .unwrap_or(Ty::Other);
        let (cost, result) = match name {
            "contains" | "startsWith" | "endsWith" => (
                1 + traversal(first.size(), STRING_TRAVERSAL_COST_FACTOR),
                Ty::Other,
            ),
            "matches" => {
                let s = 1 + traversal(first.size(), STRING_TRAVERSAL_COST_FACTOR);
                let r = 1 + traversal(second.size(), REGEX_STRING_LENGTH_COST_FACTOR);
                (s.saturating_mul(r), Ty::Other)
            }
            operators::IN => match second {
                Ty::List(n, _) => (1 + n, Ty::Other),
                Ty::Schema(n) if n.ty.as_deref() == Some("array") => {
                    (1 + max_elements(n), Ty::Other)
                }
                _ => (1, Ty::Other),
            },
            operators::EQUALS
            | operators::NOT_EQUALS
            | operators::LESS
            | operators::LESS_EQUALS
            | operators::GREATER
            | operators::GREATER_EQUALS => {
                if first.is_stringish() || second.is_stringish() {
                    let n = first.size().min(second.size());
                    (1 + traversal(n, STRING_TRAVERSAL_COST_FACTOR), Ty::Other)
                } else if matches!(first, Ty::List(..))
                    || matches!(first, Ty::Schema(n) if n.ty.as_deref() == Some("array"))
                {
                    (1 + first.size().min(second.size()), Ty::Other)
                } else {
                    (1, Ty::Other)
                }
            }
            operators::ADD => {
                if first.is_stringish() {
                    let n = first.size().saturating_add(second.size());
                    (1 + traversal(n, STRING_TRAVERSAL_COST_FACTOR), Ty::Str(n))
                } else if let Ty::List(n, item) = first {
                    let m = n.saturating_add(second.size());
                    (
                        1 + traversal(m, STRING_TRAVERSAL_COST_FACTOR),
                        Ty::List(m, item),
                    )
                } else {
                    (1, Ty::Other)
                }
            }
            "lowerAscii" | "upperAscii" | "trim" | "replace" | "split" | "substring" | "charAt"
            | "indexOf" | "lastIndexOf" | "join" | "reverse" | "find" | "findAll" | "isURL"
            | "url" => (
                1 + traversal(first.size(), STRING_TRAVERSAL_COST_FACTOR),
                if matches!(name, "lowerAscii" | "upperAscii" | "trim" | "reverse") {
                    Ty::Str(first.size())
                } else {
                    Ty::Other
                },
            ),
            "isSorted" | "sum" | "min" | "max" | "distinct" | "sort" => {
                (1 + first.size(), Ty::Other)
            }
            operators::INDEX => {
                let item = match first {
                    Ty::Schema(n) => n
                        .items
                        .as_deref()
                        .or_else(|| n.additional_schema())
                        .map_or(Ty::Other, Ty::Schema),
                    Ty::List(_, Some(i)) => Ty::Schema(i),
                    _ => Ty::Other,
                };
                (1, item)
            }
            _ => (1, Ty::Other),
        };
        (sum.add(Est::fixed(cost)), result)
    }
}

/// The estimated cost of one evaluation of `program` with `self` of schema `node`.
pub(crate) fn estimate(expr: &IdedExpr, node: &Node) -> u64 {
    let mut scope = HashMap::new();
    scope.insert("self".to_string(), Ty::Schema(node));
    scope.insert("oldSelf".to_string(), Ty::Schema(node));
    let mut est = Estimator { vars: vec![scope] };
    est.cost(expr).0.max
}

/// `getCostErrorMessage`.
fn cost_error_message(cost_name: &str, cost: u64, limit: u64) -> String {
    let factor = cost as f64 / limit as f64;
    let f = if factor > 100.0 {
        "more than 100x".to_string()
    } else if factor < 1.5 {
        format!("{factor:.6}x")
    } else {
        format!("{factor:.1}x")
    };
    format!(
        "{cost_name} exceeds budget by factor of {f} (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
    )
}

/// Go's `%#v` of an `apiextensions.ValidationRule`, as the apiserver shows a rule that does not
/// compile.
fn go_rule_value(rule: &Value) -> String {
    let get = |k: &str| gofmt::quote(rule.get(k).and_then(Value::as_str).unwrap_or_default());
    let reason = match rule.get("reason").and_then(Value::as_str) {
        Some(r) => format!("\"{r}\""),
        None => "(*apiextensions.FieldValueErrorReason)(nil)".to_string(),
    };
    let optional = match rule.get("optionalOldSelf").and_then(Value::as_bool) {
        Some(b) => format!("(*bool)({b})"),
        None => "(*bool)(nil)".to_string(),
    };
    format!(
        "apiextensions.ValidationRule{{Rule:{}, Message:{}, MessageExpression:{}, Reason:{reason}, FieldPath:{}, OptionalOldSelf:{optional}}}",
        get("rule"),
        get("message"),
        get("messageExpression"),
        get("fieldPath"),
    )
}

struct Totals {
    total: u64,
    paths: Vec<(u64, String)>,
}

/// The estimated cost of every rule and `messageExpression` (times how often it can run), with
/// its path, in schema order.
pub(crate) fn costs(root_node: &Node, root: &str) -> Vec<(String, u64)> {
    let mut errs = vec![];
    let mut totals = Totals {
        total: 0,
        paths: vec![],
    };
    walk(root_node, root, Some(1), &mut errs, &mut totals);
    totals.paths.into_iter().map(|(c, p)| (p, c)).collect()
}

/// The CRD-time CEL checks of one version's schema, rooted at `root`.
pub(crate) fn check(root_node: &Node, root: &str) -> Vec<FieldError> {
    let mut errs = vec![];
    let mut totals = Totals {
        total: 0,
        paths: vec![],
    };
    walk(root_node, root, Some(1), &mut errs, &mut totals);
    if totals.total > STATIC_ESTIMATED_CRD_COST_LIMIT {
        totals.paths.sort_by_key(|p| std::cmp::Reverse(p.0));
        for (_, p) in totals.paths.iter().take(4) {
            errs.push(FieldError::forbidden(
                p.clone(),
                "contributed to estimated rule & messageExpression cost total exceeding cost limit for entire OpenAPIv3 schema",
            ));
        }
        errs.push(FieldError::forbidden(
            root,
            &cost_error_message(
                "x-kubernetes-validations estimated rule & messageExpression cost total for entire OpenAPIv3 schema",
                totals.total,
                STATIC_ESTIMATED_CRD_COST_LIMIT,
            ),
        ));
    }
    errs
}

fn mul(card: Option<u64>, bound: Option<i64>) -> Option<u64> {
    match (card, bound) {
        (Some(c), Some(b)) => Some(c.saturating_mul(b.max(0) as u64)),
        _ => None,
    }
}

fn walk(n: &Node, p: &str, card: Option<u64>, errs: &mut Vec<FieldError>, totals: &mut Totals) {
    for (i, (raw, rule)) in n.x_validations.iter().zip(&n.cel_rules).enumerate() {
        let rp = format!("{p}.x-kubernetes-validations[{i}]");
        let times = card.unwrap_or_else(|| max_cardinality(min_serialized_size(n)));
        if rule.rule.trim().is_empty() {
            continue;
        }
        match &rule.program {
            Err(e) => errs.push(compile_error(
                format!("{rp}.rule"),
                raw,
                &format!("compilation failed: {e}"),
            )),
            Ok(program) => {
                let cost = estimate(program.expression(), n).saturating_mul(times);
                totals.total = totals.total.saturating_add(cost);
                totals.paths.push((cost, format!("{rp}.rule")));
                if cost > STATIC_ESTIMATED_COST_LIMIT {
                    errs.push(FieldError::forbidden(
                        format!("{rp}.rule"),
                        &cost_error_message(
                            "estimated rule cost",
                            cost,
                            STATIC_ESTIMATED_COST_LIMIT,
                        ),
                    ));
                }
            }
        }
        match &rule.message_program {
            Some(Err(e)) => errs.push(compile_error(
                format!("{rp}.messageExpression"),
                raw,
                &format!("messageExpression compilation failed: {e}"),
            )),
            Some(Ok(program)) => {
                let cost = estimate(program.expression(), n).saturating_mul(times);
                totals.total = totals.total.saturating_add(cost);
                totals.paths.push((cost, format!("{rp}.messageExpression")));
                if cost > STATIC_ESTIMATED_COST_LIMIT {
                    errs.push(FieldError::forbidden(
                        format!("{rp}.messageExpression"),
                        &cost_error_message(
                            "estimated messageExpression cost",
                            cost,
                            STATIC_ESTIMATED_COST_LIMIT,
                        ),
                    ));
                }
            }
            None => {}
        }
    }
    for (k, c) in &n.properties {
        walk(c, &format!("{p}.properties[{k}]"), card, errs, totals);
    }
    if let Some(ap) = n.additional_schema() {
        walk(
            ap,
            &format!("{p}.additionalProperties"),
            mul(card, n.max_properties),
            errs,
            totals,
        );
    }
    if let Some(items) = n.items.as_deref() {
        walk(
            items,
            &format!("{p}.items"),
            mul(card, n.max_items),
            errs,
            totals,
        );
    }
}

/// Renders a rule that failed to compile the way the apiserver shows it.
fn compile_error(path: String, raw: &Value, detail: &str) -> FieldError {
    FieldError::build(
        path,
        crate::error::FieldErrorKind::Invalid,
        crate::error::BadValue::Raw(go_rule_value(raw)),
        detail,
    )
}
