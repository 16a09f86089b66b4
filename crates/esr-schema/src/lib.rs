//! Kubernetes structural OpenAPI v3 schema semantics for CRDs, over `serde_json::Value`,
//! as the kube-apiserver (apiextensions-apiserver + kube-openapi) implements them.
//!
//! # Public API (stable: `esr validate` and the esr-testkit API server call it)
//!
//! - [`Schema::new`]: read a CRD version's `schema.openAPIV3Schema`.
//! - [`Schema::from_crd`]: the same, picked from a whole CRD object by version name.
//! - [`Schema::prune`]: drop unknown fields; returns their paths (`spec.x`, `spec.data[0].y`),
//!   sorted. This is what `fieldValidation=Strict` reports as
//!   `strict decoding error: unknown field "spec.x"` (see [`strict_decoding_message`]).
//! - [`Schema::apply_defaults`]: drop `null`s of non-nullable fields without default, then apply
//!   defaults.
//! - [`Schema::validate`]: schema validation, list-set/map uniqueness and embedded-resource checks;
//!   returns [`FieldError`]s whose `Display` is the apiserver's text.
//! - [`Schema::validate_update`]: the same with the old object of an update, for transition
//!   rules (`oldSelf`) and ratcheting.
//! - [`check_structural`] / [`check_structural_at`]: the offline checks the apiserver makes on a CRD
//!   schema when the CRD is created.
//! - [`check_cel_rules`]: the CRD-time compile and cost checks of the CEL rules.
//! - [`invalid_status`]: the 422 `Status` object the apiserver returns for field errors.
//! - [`meta`]: the `ObjectMeta` fields the apiserver keeps in `metadata`, and their schema.
//!
//! The apiserver's order for a create or update is: prune, apply defaults, validate. A full
//! emulation is:
//!
//! ```
//! # use esr_schema::Schema;
//! # let schema = Schema::new(&serde_json::json!({"type": "object"})).unwrap();
//! # let mut obj = serde_json::json!({"apiVersion": "g/v1", "kind": "K"});
//! let unknown = schema.prune(&mut obj);
//! schema.apply_defaults(&mut obj);
//! let errors = schema.validate(&obj);
//! # assert!(unknown.is_empty() && errors.is_empty());
//! ```
//!
//! # Fidelity
//!
//! Error texts follow `k8s.io/apimachinery/pkg/util/validation/field` and kube-openapi's
//! messages, e.g. `spec.target.creationPolicy: Unsupported value: "Foo": supported values:
//! "Owner", "Orphan"`, `spec.secretStoreRef.name: Required value`,
//! `spec.refreshInterval: Invalid value: "integer": spec.refreshInterval in body must be of type
//! string: "integer"`. The apiserver iterates Go maps, so the order of several errors differs
//! between its runs; here it is deterministic (schema property order).
//!
//! Known differences from a real apiserver:
//! - `x-kubernetes-validations` (CEL) rules are evaluated with the `cel` crate (cel-rust), with
//!   the standard library, the strings, lists and math extensions, and the Kubernetes `isSorted`,
//!   `sum`, `min`, `max`, list `indexOf`/`lastIndexOf`, `find`, `findAll` and `isURL`. Not
//!   provided: the quantity, IP/CIDR, semver, format and authorizer libraries, and string
//!   `format: date-time`/`duration`/`byte` fields are plain strings, not timestamps, durations or
//!   bytes. Rules are parsed, not type-checked: a rule the apiserver refuses for a type error
//!   (e.g. `self.size() == 'a'`) is accepted by [`check_cel_rules`] and fails when evaluated.
//!   Texts of compile errors and of most evaluation errors are cel-rust's, not cel-go's
//!   (`no such key: x`, `no such overload`, `division by zero` are cel-go's). There is no
//!   runtime cost budget; the static cost estimate follows cel-go's estimator for the
//!   operators, macros and string functions, and uses 1 for other functions. A rule with
//!   `optionalOldSelf: true` sees `oldSelf` as `null` on create, not as an optional value.
//! - `pattern` uses the `regex` crate with Go's ASCII `\d`, `\w`, `\s`, `\b` semantics. Go-only
//!   syntax (`\Q...\E`, a literal `{` outside a repetition) fails to compile here and is reported
//!   as an invalid pattern; the error text after "pattern is invalid:" is the `regex` crate's.
//! - Formats `email` and `uri` approximate Go's `net/mail` and `net/url` parsers.
//! - Root `metadata` (ObjectMeta) is neither pruned nor validated: the apiserver handles it
//!   itself. Embedded resources get their unknown `metadata` fields dropped and `apiVersion`/`kind`
//!   required, but their names are not validated.
//! - The CRD-level rule that restricts root keywords when the status subresource is enabled is not
//!   checked (it needs the CRD, not the schema).

mod cel;
mod cel_lib;
mod cost;
mod error;
mod formats;
pub mod gofmt;
mod listtype;
pub mod meta;
mod mutate;
pub mod names;
mod node;
mod structural;
mod validate;

use serde_json::Value;

pub use error::{FieldError, FieldErrorKind, SchemaError};
pub use formats::compile_go_regex;

use node::Node;

/// A parsed CRD schema (one version's `openAPIV3Schema`).
#[derive(Debug, Clone)]
pub struct Schema {
    root: Node,
    /// Some node carries `x-kubernetes-validations`.
    has_cel: bool,
}

fn has_cel(n: &Node) -> bool {
    !n.cel_rules.is_empty()
        || n.properties.values().any(has_cel)
        || n.additional_schema().is_some_and(has_cel)
        || n.items.as_deref().is_some_and(has_cel)
        || n.all_of.iter().any(has_cel)
}

impl Schema {
    /// Reads a CRD version's `schema.openAPIV3Schema`.
    pub fn new(open_api_v3_schema: &Value) -> Result<Schema, SchemaError> {
        let root = Node::parse(open_api_v3_schema, "openAPIV3Schema")?;
        Ok(Schema {
            has_cel: has_cel(&root),
            root,
        })
    }

    /// Reads the schema of version `version` from a whole `CustomResourceDefinition` object.
    /// `Ok(None)` if the CRD has no such version or the version has no schema.
    pub fn from_crd(crd: &Value, version: &str) -> Result<Option<Schema>, SchemaError> {
        let versions = crd.pointer("/spec/versions").and_then(Value::as_array);
        let Some(v) = versions.and_then(|vs| {
            vs.iter()
                .find(|v| v.get("name").and_then(Value::as_str) == Some(version))
        }) else {
            return Ok(None);
        };
        match v.pointer("/schema/openAPIV3Schema") {
            Some(s) => Schema::new(s).map(Some),
            None => Ok(None),
        }
    }

    /// Validates an object (after pruning and defaulting) as the apiserver does on create:
    /// schema validation, `x-kubernetes-list-type` set/map uniqueness, embedded resources, then
    /// the `x-kubernetes-validations` CEL rules. Same as [`Schema::validate_update`] without an
    /// old object.
    pub fn validate(&self, obj: &Value) -> Vec<FieldError> {
        self.validate_update(obj, None)
    }

    /// Validates an object as the apiserver does on update (`old` is the stored object) or
    /// create (`old` is `None`): schema validation, list-type and embedded-resource checks, and
    /// the CEL rules, transition rules (those using `oldSelf`) only where an old value
    /// correlates. When a schema error of type, required, enum or size is present, the CEL
    /// rules are not run and the apiserver's `<nil>: Invalid value: "null": some validation
    /// rules were not checked because the object was invalid; correct the existing errors to
    /// complete validation` is added instead.
    pub fn validate_update(&self, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
        let r = validate::validate_node(&self.root, obj, "");
        let mut errs = validate::to_field_errors(r.errs, None);
        listtype::validate_embedded("", &self.root, obj, &mut errs, true);
        if let Value::Object(m) = obj {
            listtype::validate_object("", &self.root, m, &mut errs);
        }
        if self.has_cel {
            let blocking = errs.iter().any(|e| {
                matches!(
                    e.kind,
                    FieldErrorKind::NotSupported
                        | FieldErrorKind::Required
                        | FieldErrorKind::TooLong
                        | FieldErrorKind::TooMany
                        | FieldErrorKind::TypeInvalid
                )
            });
            if blocking {
                errs.push(FieldError::build(
                    "<nil>",
                    FieldErrorKind::Invalid,
                    error::BadValue::Raw("null".to_string()),
                    "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
                ));
            } else {
                cel::validate(&self.root, obj, old, &mut errs);
            }
        }
        errs
    }

    /// Applies schema defaults where fields are absent (recursively, into array items and
    /// additionalProperties; an object's default is applied before its children's defaults).
    /// First drops `null`s of non-nullable fields that have no default; a `null` of a
    /// non-nullable field with a default is replaced by the default.
    pub fn apply_defaults(&self, obj: &mut Value) {
        mutate::prune_nulls(obj, Some(&self.root));
        mutate::default(obj, Some(&self.root));
    }

    /// Removes fields the schema does not specify, honouring `x-kubernetes-preserve-unknown-fields`
    /// and embedded resources, and returns the sorted paths of what was removed (e.g. `spec.x`,
    /// `spec.data[0].y`). `apiVersion`, `kind` and `metadata` at the root are left alone.
    pub fn prune(&self, obj: &mut Value) -> Vec<String> {
        mutate::prune_root(obj, &self.root, true)
    }

    /// `prune`, `apply_defaults` and `validate` in the apiserver's order. Returns the unknown
    /// field paths and the validation errors.
    pub fn admit(&self, obj: &mut Value) -> (Vec<String>, Vec<FieldError>) {
        let unknown = self.prune(obj);
        self.apply_defaults(obj);
        let errs = self.validate(obj);
        (unknown, errs)
    }
}

/// The apiserver's 400 message for unknown fields under `fieldValidation=Strict`:
/// `strict decoding error: unknown field "spec.x", unknown field "spec.y"`.
pub fn strict_decoding_message(unknown_fields: &[String]) -> String {
    let parts: Vec<String> = unknown_fields
        .iter()
        .map(|f| format!("unknown field {}", gofmt::quote(f)))
        .collect();
    format!("strict decoding error: {}", parts.join(", "))
}

/// The apiserver's 422 `Status` for rejected field errors (`apierrors.NewInvalid`):
/// message `<Kind>.<group> "<name>" is invalid: <errors>` (one error as is, several as
/// `[a, b]`, identical texts once), reason `Invalid`, and one cause per error with its
/// `reason()`, body and path.
pub fn invalid_status(group: &str, kind: &str, name: &str, errors: &[FieldError]) -> Value {
    let qualified = if group.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}.{group}")
    };
    let mut seen = std::collections::HashSet::new();
    let texts: Vec<String> = errors
        .iter()
        .map(ToString::to_string)
        .filter(|t| seen.insert(t.clone()))
        .collect();
    let message = match texts.len() {
        0 => format!("{qualified} {} is invalid", gofmt::quote(name)),
        1 => format!(
            "{qualified} {} is invalid: {}",
            gofmt::quote(name),
            texts[0]
        ),
        _ => format!(
            "{qualified} {} is invalid: [{}]",
            gofmt::quote(name),
            texts.join(", ")
        ),
    };
    let causes: Vec<Value> = errors
        .iter()
        .map(|e| serde_json::json!({"reason": e.kind.reason(), "message": e.message, "field": e.path}))
        .collect();
    let mut details = serde_json::Map::new();
    details.insert("name".into(), Value::String(name.to_string()));
    if !group.is_empty() {
        details.insert("group".into(), Value::String(group.to_string()));
    }
    details.insert("kind".into(), Value::String(kind.to_string()));
    details.insert("causes".into(), Value::Array(causes));
    serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": "Invalid",
        "details": Value::Object(details),
        "code": 422
    })
}

/// The checks the apiserver makes on a CRD version's `openAPIV3Schema` at CRD creation:
/// structural-schema rules, forbidden keywords, list/map type rules, defaults that must be
/// pruned and valid, `x-kubernetes-preserve-unknown-fields: false` and so on. Each entry is an
/// apiserver error text with paths rooted at `openAPIV3Schema`. Empty means accepted.
pub fn check_structural(schema: &Value) -> Vec<String> {
    check_structural_at(schema, "openAPIV3Schema")
        .into_iter()
        .map(|e| e.to_string())
        .collect()
}

/// The checks the apiserver makes on a CRD version schema's `x-kubernetes-validations` at CRD
/// creation and update: every `rule` and `messageExpression` compiles, each rule's estimated
/// cost (times how often it can run) stays within 10,000,000 and all of them together within
/// 100,000,000. Field errors are rooted at `root`, e.g.
/// `spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Forbidden:
/// estimated rule cost exceeds budget by factor of 1.048576x (try simplifying the rule, or
/// adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)`.
/// A schema that cannot be read gives no errors here ([`check_structural_at`] reports it).
pub fn check_cel_rules(schema: &Value, root: &str) -> Vec<FieldError> {
    match Node::parse(schema, root) {
        Ok(n) => cost::check(&n, root),
        Err(_) => vec![],
    }
}

/// The estimated cost [`check_cel_rules`] compares with the budget, for every rule and
/// `messageExpression` that compiles: `(path, cost)`, the path ending in `.rule` or
/// `.messageExpression`, in schema order.
pub fn cel_rule_costs(schema: &Value, root: &str) -> Vec<(String, u64)> {
    match Node::parse(schema, root) {
        Ok(n) => cost::costs(&n, root),
        Err(_) => vec![],
    }
}

/// [`check_structural`] with field errors rooted at `root`, e.g.
/// `spec.versions[0].schema.openAPIV3Schema` as the apiserver reports them.
pub fn check_structural_at(schema: &Value, root: &str) -> Vec<FieldError> {
    structural::check(schema, root)
}

#[cfg(test)]
mod tests;
