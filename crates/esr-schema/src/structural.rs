//! The schema checks the apiserver makes when a CRD is created or updated
//! (apiextensions `ValidateCustomResourceDefinitionOpenAPISchema`, `ValidateStructural` and
//! `ValidateDefaults`).

use serde_json::Value;

use crate::error::FieldError;
use crate::mutate;
use crate::node::{Additional, Node};
use crate::validate;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Root,
    Item,
    Field,
}

const META_FIELDS: [&str; 3] = ["metadata", "kind", "apiVersion"];
const OPENAPI_V3_TYPES: [&str; 6] = ["array", "boolean", "integer", "number", "object", "string"];

fn child(p: &str, c: &str) -> String {
    format!("{p}.{c}")
}
fn key(p: &str, k: &str) -> String {
    format!("{p}[{k}]")
}
fn idx(p: &str, i: usize) -> String {
    format!("{p}[{i}]")
}
fn prop_path(p: &str, k: &str) -> String {
    key(&child(p, "properties"), k)
}

/// Runs every offline check at `root` (e.g. `spec.versions[0].schema.openAPIV3Schema`).
pub(crate) fn check(root_value: &Value, root: &str) -> Vec<FieldError> {
    let node = match Node::parse(root_value, root) {
        Ok(n) => n,
        Err(e) => {
            return vec![FieldError::invalid(
                root,
                &Value::String(String::new()),
                &e.to_string(),
            )];
        }
    };
    let mut errs = Vec::new();
    if node.nullable {
        errs.push(FieldError::forbidden(
            child(root, "nullable"),
            "nullable cannot be true at the root",
        ));
    }

    // Structural invariants and completeness, sorted like the apiserver does.
    let mut structural = Vec::new();
    invariants(&node, Level::Root, root, &mut structural);
    completeness_value_validation(&node, &node, root, root, &mut structural);
    structural.sort_by_key(|e| e.to_string());
    let structural_ok = structural.is_empty();
    errs.extend(structural);

    if structural_ok {
        defaults(&node, root, true, false, &mut errs);
    }

    let ssv = Ssv {
        allow_defaults: true,
        forbidden_reason: String::new(),
        inside_meta: false,
    };
    openapi_schema(&node, root, &ssv, true, &mut errs);
    errs
}

#[derive(Clone)]
struct Ssv {
    allow_defaults: bool,
    forbidden_reason: String,
    inside_meta: bool,
}

impl Ssv {
    fn forbid_defaults(&self, reason: &str) -> Ssv {
        Ssv {
            allow_defaults: false,
            forbidden_reason: reason.to_string(),
            inside_meta: self.inside_meta,
        }
    }
    fn meta(&self) -> Ssv {
        Ssv {
            inside_meta: true,
            ..self.clone()
        }
    }

    fn validate(&self, s: &Node, p: &str, errs: &mut Vec<FieldError>) {
        if let Some(t) = &s.ty
            && !t.is_empty()
            && !OPENAPI_V3_TYPES.contains(&t.as_str())
        {
            let list: Vec<String> = OPENAPI_V3_TYPES.iter().map(|s| s.to_string()).collect();
            errs.push(FieldError::not_supported(
                child(p, "type"),
                &Value::String(t.clone()),
                &list,
            ));
        }
        if s.default.is_some() && !self.allow_defaults {
            let mut detail = "must not be set".to_string();
            if !self.forbidden_reason.is_empty() {
                detail.push(' ');
                detail.push_str(&self.forbidden_reason);
            }
            errs.push(FieldError::forbidden(child(p, "default"), &detail));
        }
        // JSON-schema keywords the apiserver does not support at all.
        for (set, field) in [
            (s.has_id, "id"),
            (s.has_additional_items, "additionalItems"),
            (s.has_pattern_properties, "patternProperties"),
            (s.has_definitions, "definitions"),
            (s.has_dependencies, "dependencies"),
            (s.has_ref, "$ref"),
        ] {
            if set {
                errs.push(FieldError::forbidden(
                    child(p, field),
                    &format!("{field} is not supported"),
                ));
            }
        }
        if s.ty.as_deref() == Some("null") {
            errs.push(FieldError::forbidden(
                child(p, "type"),
                "type cannot be set to null, use nullable as an alternative",
            ));
        }
        if s.items_is_array {
            errs.push(FieldError::forbidden(
                child(p, "items"),
                "items must be a schema object and not an array",
            ));
        }
        if self.inside_meta && s.x_embedded_resource {
            errs.push(FieldError::forbidden(
                child(p, "x-kubernetes-embedded-resource"),
                "must not be used inside of resource meta",
            ));
        }
    }
}

fn ty(s: &Node) -> &str {
    s.ty.as_deref().unwrap_or("")
}

/// `ValidateCustomResourceDefinitionOpenAPISchema`.
fn openapi_schema(s: &Node, p: &str, ssv: &Ssv, is_root: bool, errs: &mut Vec<FieldError>) {
    ssv.validate(s, p, errs);
    if s.unique_items {
        errs.push(FieldError::forbidden(
            child(p, "uniqueItems"),
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ));
    }
    if let Some(ap) = &s.additional {
        let forbidden = match ap {
            Additional::Bool(b) => !b,
            Additional::Schema(_) => true,
        };
        if !s.properties.is_empty() && forbidden {
            errs.push(FieldError::forbidden(
                child(p, "additionalProperties"),
                "additionalProperties and properties are mutual exclusive",
            ));
        }
        if let Additional::Schema(sch) = ap {
            let sub = if ssv.inside_meta {
                ssv.forbid_defaults("inside additionalProperties applying to object metadata")
            } else {
                ssv.clone()
            };
            openapi_schema(sch, &child(p, "additionalProperties"), &sub, false, errs);
        }
    }
    for (name, prop) in &s.properties {
        let mut sub = ssv.clone();
        if (is_root || s.x_embedded_resource) && META_FIELDS.contains(&name.as_str()) {
            sub = sub.meta();
            if is_root {
                sub = sub.forbid_defaults(&format!("in top-level {name}"));
            }
        }
        openapi_schema(prop, &prop_path(p, name), &sub, false, errs);
    }
    if let Some(not) = &s.not {
        openapi_schema(not, &child(p, "not"), ssv, false, errs);
    }
    for (kw, list) in [
        ("allOf", &s.all_of),
        ("oneOf", &s.one_of),
        ("anyOf", &s.any_of),
    ] {
        for (i, sub) in list.iter().enumerate() {
            openapi_schema(sub, &idx(&child(p, kw), i), ssv, false, errs);
        }
    }
    if let Some(items) = &s.items {
        openapi_schema(items, &child(p, "items"), ssv, false, errs);
    }
    if s.x_preserve_unknown_fields == Some(false) {
        errs.push(FieldError::invalid(
            child(p, "x-kubernetes-preserve-unknown-fields"),
            &Value::Bool(false),
            "must be true or undefined",
        ));
    }
    if s.x_map_type.is_some() && ty(s) != "object" {
        if ty(s).is_empty() {
            errs.push(FieldError::required(
                child(p, "type"),
                "must be object if x-kubernetes-map-type is specified",
            ));
        } else {
            errs.push(FieldError::invalid(
                child(p, "type"),
                &Value::String(ty(s).to_string()),
                "must be object if x-kubernetes-map-type is specified",
            ));
        }
    }
    if let Some(mt) = &s.x_map_type
        && mt != "atomic"
        && mt != "granular"
    {
        errs.push(FieldError::not_supported(
            child(p, "x-kubernetes-map-type"),
            &Value::String(mt.clone()),
            &["atomic".to_string(), "granular".to_string()],
        ));
    }
    if s.x_list_type.is_some() && ty(s) != "array" {
        if ty(s).is_empty() {
            errs.push(FieldError::required(
                child(p, "type"),
                "must be array if x-kubernetes-list-type is specified",
            ));
        } else {
            errs.push(FieldError::invalid(
                child(p, "type"),
                &Value::String(ty(s).to_string()),
                "must be array if x-kubernetes-list-type is specified",
            ));
        }
    } else if s.x_list_type.as_deref() == Some("set")
        && let Some(is) = &s.items
    {
        match ty(is) {
            "array" => {
                if let Some(lt) = &is.x_list_type
                    && lt != "atomic"
                {
                    errs.push(FieldError::invalid(
                        child(&child(p, "items"), "x-kubernetes-list-type"),
                        &Value::String(lt.clone()),
                        "must be atomic as item of a list with x-kubernetes-list-type=set",
                    ));
                }
            }
            "object" if is.x_map_type.as_deref() != Some("atomic") => {
                // The apiserver reports the items' list type here (usually unset, shown as null).
                errs.push(FieldError::invalid(
                    child(&child(p, "items"), "x-kubernetes-map-type"),
                    &is.x_list_type
                        .clone()
                        .map(Value::String)
                        .unwrap_or(Value::Null),
                    "must be atomic as item of a list with x-kubernetes-list-type=set",
                ));
            }
            _ => {}
        }
    }
    if let Some(lt) = &s.x_list_type
        && !["atomic", "set", "map"].contains(&lt.as_str())
    {
        errs.push(FieldError::not_supported(
            child(p, "x-kubernetes-list-type"),
            &Value::String(lt.clone()),
            &["atomic".to_string(), "set".to_string(), "map".to_string()],
        ));
    }
    let map_keys = Value::Array(
        s.x_list_map_keys
            .iter()
            .cloned()
            .map(Value::String)
            .collect(),
    );
    if !s.x_list_map_keys.is_empty() {
        match &s.x_list_type {
            None => errs.push(FieldError::required(
                child(p, "x-kubernetes-list-type"),
                "must be map if x-kubernetes-list-map-keys is non-empty",
            )),
            Some(lt) if lt != "map" => errs.push(FieldError::invalid(
                child(p, "x-kubernetes-list-type"),
                &Value::String(lt.clone()),
                "must be map if x-kubernetes-list-map-keys is non-empty",
            )),
            _ => {}
        }
    }
    if s.x_list_type.as_deref() == Some("map") {
        if s.x_list_map_keys.is_empty() {
            errs.push(FieldError::required(
                child(p, "x-kubernetes-list-map-keys"),
                "must not be empty if x-kubernetes-list-type is map",
            ));
        }
        match &s.items {
            None => errs.push(FieldError::required(
                child(p, "items"),
                "must have a schema if x-kubernetes-list-type is map",
            )),
            Some(is) => {
                if ty(is) != "object" {
                    errs.push(FieldError::invalid(
                        child(&child(p, "items"), "type"),
                        &Value::String(ty(is).to_string()),
                        "must be object if parent array's x-kubernetes-list-type is map",
                    ));
                } else {
                    let mut seen = std::collections::HashSet::new();
                    for k in &s.x_list_map_keys {
                        match is.properties.get(k) {
                            Some(kp) if ty(kp) == "array" || ty(kp) == "object" => errs.push(FieldError::invalid(
                                child(&prop_path(&child(p, "items"), k), "type"),
                                &Value::String(ty(is).to_string()),
                                "must be a scalar type if parent array's x-kubernetes-list-type is map",
                            )),
                            Some(_) => {}
                            None => errs.push(FieldError::invalid(
                                child(p, "x-kubernetes-list-map-keys"),
                                &map_keys,
                                "entries must all be names of item properties",
                            )),
                        }
                        if !seen.insert(k.clone()) {
                            errs.push(FieldError::invalid(
                                child(p, "x-kubernetes-list-map-keys"),
                                &map_keys,
                                "must not contain duplicate entries",
                            ));
                        }
                    }
                }
            }
        }
    }
    // validateMapListKeysMapSet
    if let (Some(lt), Some(is)) = (&s.x_list_type, &s.items)
        && (lt == "set" || lt == "map")
    {
        if is.nullable {
            errs.push(FieldError::forbidden(
                child(&child(p, "items"), "nullable"),
                &format!("cannot be nullable when x-kubernetes-list-type is {lt}"),
            ));
        }
        if lt == "map" {
            for k in &s.x_list_map_keys {
                if let Some(kp) = is.properties.get(k) {
                    if !is.required.contains(k) && kp.default.is_none() {
                        errs.push(FieldError::required(
                            child(&prop_path(&child(p, "items"), k), "default"),
                            "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
                        ));
                    }
                    if kp.nullable {
                        errs.push(FieldError::forbidden(
                            child(&prop_path(&child(p, "items"), k), "nullable"),
                            "this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
                        ));
                    }
                }
            }
        }
    }
    for (i, rule) in s.x_validations.iter().enumerate() {
        let rp = idx(&child(p, "x-kubernetes-validations"), i);
        let get = |k: &str| rule.get(k).and_then(Value::as_str).unwrap_or("");
        let (r, msg, msg_expr, fp) = (
            get("rule"),
            get("message"),
            get("messageExpression"),
            get("fieldPath"),
        );
        let has_newline = |x: &str| x.contains('\n') || x.contains('\r');
        if r.trim().is_empty() {
            errs.push(FieldError::required(
                child(&rp, "rule"),
                "rule is not specified",
            ));
        } else if !msg.is_empty() && msg.trim().is_empty() {
            errs.push(FieldError::invalid(
                child(&rp, "message"),
                &Value::String(msg.to_string()),
                "message must be non-empty if specified",
            ));
        } else if has_newline(msg.trim()) {
            errs.push(FieldError::invalid(
                child(&rp, "message"),
                &Value::String(msg.to_string()),
                "message must not contain line breaks",
            ));
        } else if has_newline(r.trim()) && msg.trim().is_empty() {
            errs.push(FieldError::required(
                child(&rp, "message"),
                "message must be specified if rule contains line breaks",
            ));
        }
        if !msg_expr.is_empty() && msg_expr.trim().is_empty() {
            errs.push(FieldError::required(
                child(&rp, "messageExpression"),
                "messageExpression must be non-empty if specified",
            ));
        }
        if let Some(reason) = rule.get("reason").and_then(Value::as_str) {
            let supported = [
                "FieldValueDuplicate",
                "FieldValueForbidden",
                "FieldValueInvalid",
                "FieldValueRequired",
            ];
            if !supported.contains(&reason) {
                let list: Vec<String> = supported.iter().map(|s| s.to_string()).collect();
                errs.push(FieldError::not_supported(
                    child(&rp, "reason"),
                    &Value::String(reason.to_string()),
                    &list,
                ));
            }
        }
        if !fp.is_empty() && fp.trim().is_empty() {
            errs.push(FieldError::invalid(
                child(&rp, "fieldPath"),
                &Value::String(fp.to_string()),
                "fieldPath must be non-empty if specified",
            ));
        }
        if has_newline(fp) {
            errs.push(FieldError::invalid(
                child(&rp, "fieldPath"),
                &Value::String(fp.to_string()),
                "fieldPath must not contain line breaks",
            ));
        }
    }
}

fn is_only_type(s: &Node, t: &str) -> bool {
    s.keys.len() == 1 && s.keys[0] == "type" && ty(s) == t
}

fn is_int_or_string_any_of(s: &Node) -> bool {
    s.any_of.len() == 2
        && is_only_type(&s.any_of[0], "integer")
        && is_only_type(&s.any_of[1], "string")
}

fn is_int_or_string_all_of(s: &Node) -> bool {
    s.all_of.first().is_some_and(is_int_or_string_any_of)
}

/// `validateStructuralInvariants`.
fn invariants(s: &Node, lvl: Level, p: &str, errs: &mut Vec<FieldError>) {
    if ty(s) == "array" && s.items.is_none() {
        errs.push(FieldError::required(child(p, "items"), "must be specified"));
    }
    if let Some(items) = &s.items {
        invariants(items, Level::Item, &child(p, "items"), errs);
    }
    for (k, v) in &s.properties {
        invariants(v, Level::Field, &prop_path(p, k), errs);
    }
    if let Some(ap) = &s.additional {
        if lvl == Level::Root {
            errs.push(FieldError::forbidden(
                child(p, "additionalProperties"),
                "must not be used at the root",
            ));
        }
        if let Additional::Schema(sch) = ap {
            invariants(sch, Level::Field, &child(p, "additionalProperties"), errs);
        }
    }
    if s.x_int_or_string && s.preserves_unknown() {
        errs.push(FieldError::invalid(
            child(p, "x-kubernetes-preserve-unknown-fields"),
            &Value::Bool(true),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    if s.x_int_or_string && s.x_embedded_resource {
        errs.push(FieldError::invalid(
            child(p, "x-kubernetes-embedded-resource"),
            &Value::Bool(true),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    value_validation(
        s,
        is_int_or_string_any_of(s),
        is_int_or_string_all_of(s),
        p,
        errs,
    );

    let check_metadata = lvl == Level::Root || s.x_embedded_resource;
    if s.x_embedded_resource && ty(s) != "object" {
        if ty(s).is_empty() {
            errs.push(FieldError::required(
                child(p, "type"),
                "must be object if x-kubernetes-embedded-resource is true",
            ));
        } else {
            errs.push(FieldError::invalid(
                child(p, "type"),
                &Value::String(ty(s).to_string()),
                "must be object if x-kubernetes-embedded-resource is true",
            ));
        }
    } else if ty(s).is_empty() && !s.x_int_or_string && !s.preserves_unknown() {
        let detail = match lvl {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        errs.push(FieldError::required(child(p, "type"), detail));
    }
    if s.x_embedded_resource && s.additional.is_some() {
        errs.push(FieldError::forbidden(
            child(p, "additionalProperties"),
            "must not be used if x-kubernetes-embedded-resource is set",
        ));
    }
    if lvl == Level::Root && !ty(s).is_empty() && ty(s) != "object" {
        errs.push(FieldError::invalid(
            child(p, "type"),
            &Value::String(ty(s).to_string()),
            "must be object at the root",
        ));
    }
    for f in ["kind", "apiVersion"] {
        if let Some(fs) = s.properties.get(f)
            && check_metadata
            && ty(fs) != "string"
        {
            errs.push(FieldError::invalid(
                child(&prop_path(p, f), "type"),
                &Value::String(ty(fs).to_string()),
                "must be string",
            ));
        }
    }
    if let Some(meta) = s.properties.get("metadata") {
        let mp = prop_path(p, "metadata");
        if check_metadata && ty(meta) != "object" {
            errs.push(FieldError::invalid(
                child(&mp, "type"),
                &Value::String(ty(meta).to_string()),
                "must be object",
            ));
        }
        if lvl == Level::Root && !metadata_is_plain(meta) {
            errs.push(FieldError::forbidden(
                mp,
                "must not specify anything other than name and generateName, but metadata is implicitly specified",
            ));
        }
    }
    if s.x_embedded_resource && !s.preserves_unknown() && s.properties.is_empty() {
        errs.push(FieldError::required(
            child(p, "properties"),
            "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        ));
    }
}

/// Whether a root `metadata` schema restricts nothing but `name` and `generateName`.
fn metadata_is_plain(meta: &Node) -> bool {
    let props_ok = {
        let has_name = meta.properties.contains_key("name");
        let has_gen = meta.properties.contains_key("generateName");
        meta.properties.is_empty()
            || (has_name && has_gen && meta.properties.len() == 2)
            || ((has_name || has_gen) && meta.properties.len() == 1)
    };
    // Everything else must be unset (type and default are ignored).
    let allowed = ["type", "default", "properties"];
    props_ok && meta.keys.iter().all(|k| allowed.contains(&k.as_str()))
}

/// `validateValueValidation` for the value validations (allOf/anyOf/oneOf/not) of a node.
fn value_validation(
    s: &Node,
    skip_any_of: bool,
    skip_first_all_of_any_of: bool,
    p: &str,
    errs: &mut Vec<FieldError>,
) {
    if !skip_any_of {
        for (i, v) in s.any_of.iter().enumerate() {
            nested(v, false, false, &idx(&child(p, "anyOf"), i), errs);
        }
    }
    for (i, v) in s.all_of.iter().enumerate() {
        nested(
            v,
            skip_first_all_of_any_of && i == 0,
            false,
            &idx(&child(p, "allOf"), i),
            errs,
        );
    }
    for (i, v) in s.one_of.iter().enumerate() {
        nested(v, false, false, &idx(&child(p, "oneOf"), i), errs);
    }
    if let Some(not) = &s.not {
        nested(not, false, false, &child(p, "not"), errs);
    }
    if let (Some(pattern), Some(Err(e))) = (&s.pattern, &s.regex) {
        errs.push(FieldError::invalid(
            child(p, "pattern"),
            &Value::String(pattern.clone()),
            &format!("must be a valid regular expression, but isn't: {e}"),
        ));
    }
}

/// `validateNestedValueValidation`: a schema under anyOf/allOf/oneOf/not.
fn nested(
    v: &Node,
    skip_any_of: bool,
    skip_all_of_any_of: bool,
    p: &str,
    errs: &mut Vec<FieldError>,
) {
    value_validation(v, skip_any_of, skip_all_of_any_of, p, errs);
    if let Some(items) = &v.items {
        nested(items, false, false, &child(p, "items"), errs);
    }
    for (k, f) in &v.properties {
        nested(f, false, false, &prop_path(p, k), errs);
    }
    // Keywords a nested value validation must not set, in the apiserver's order, with the
    // wording of its message ("must be empty" / "undefined" / "false").
    const EMPTY: &str = "must be empty to be structural";
    const UNDEFINED: &str = "must be undefined to be structural";
    const FALSE: &str = "must be false to be structural";
    let forbidden = [
        (!ty(v).is_empty(), "type", EMPTY),
        (v.additional.is_some(), "additionalProperties", UNDEFINED),
        (v.default.is_some(), "default", UNDEFINED),
        (v.has_title, "title", EMPTY),
        (v.has_description, "description", EMPTY),
        (v.nullable, "nullable", FALSE),
        (v.has_external_docs, "externalDocs", UNDEFINED),
        (
            v.preserves_unknown(),
            "x-kubernetes-preserve-unknown-fields",
            FALSE,
        ),
        (
            v.x_embedded_resource,
            "x-kubernetes-embedded-resource",
            FALSE,
        ),
        (v.x_int_or_string, "x-kubernetes-int-or-string", FALSE),
        (
            !v.x_list_map_keys.is_empty(),
            "x-kubernetes-list-map-keys",
            EMPTY,
        ),
        (v.x_list_type.is_some(), "x-kubernetes-list-type", UNDEFINED),
        (v.x_map_type.is_some(), "x-kubernetes-map-type", UNDEFINED),
        (
            !v.x_validations.is_empty(),
            "x-kubernetes-validations",
            EMPTY,
        ),
    ];
    for (set, field, msg) in forbidden {
        if set {
            errs.push(FieldError::forbidden(child(p, field), msg));
        }
    }
    if v.properties.contains_key("metadata") {
        errs.push(FieldError::forbidden(
            prop_path(p, "metadata"),
            "must not be specified in a nested context",
        ));
    }
}

/// `validateStructuralCompleteness`: every field or array named in the root's value validations
/// must also be specified in the structural part of the schema.
fn completeness_value_validation(
    v: &Node,
    s: &Node,
    sp: &str,
    vp: &str,
    errs: &mut Vec<FieldError>,
) {
    if let Some(not) = &v.not {
        completeness_nested(not, Some(s), sp, &child(vp, "not"), errs);
    }
    for (kw, list) in [
        ("allOf", &v.all_of),
        ("anyOf", &v.any_of),
        ("oneOf", &v.one_of),
    ] {
        for (i, sub) in list.iter().enumerate() {
            completeness_nested(sub, Some(s), sp, &idx(&child(vp, kw), i), errs);
        }
    }
}

fn completeness_nested(v: &Node, s: Option<&Node>, sp: &str, vp: &str, errs: &mut Vec<FieldError>) {
    let Some(s) = s else {
        errs.push(FieldError::required(
            sp.to_string(),
            &format!("because it is defined in {vp}"),
        ));
        return;
    };
    completeness_value_validation(v, s, sp, vp, errs);
    if let Some(vi) = &v.items {
        completeness_nested(
            vi,
            s.items.as_deref(),
            &child(sp, "items"),
            &child(vp, "items"),
            errs,
        );
    }
    for (k, vf) in &v.properties {
        match s.properties.get(k) {
            None => errs.push(FieldError::required(
                prop_path(sp, k),
                &format!("because it is defined in {}", prop_path(vp, k)),
            )),
            Some(sf) => {
                completeness_nested(vf, Some(sf), &prop_path(sp, k), &prop_path(vp, k), errs)
            }
        }
    }
}

/// `ValidateDefaults`: defaults must be pruned and must validate.
fn defaults(
    s: &Node,
    p: &str,
    is_resource_root: bool,
    inside_meta: bool,
    errs: &mut Vec<FieldError>,
) {
    let embedded = s.x_embedded_resource || is_resource_root;
    let inside_meta = if s.x_embedded_resource {
        false
    } else {
        inside_meta
    };
    if let Some(d) = &s.default
        && !inside_meta
    {
        let mut pruned = d.clone();
        mutate::prune_root(&mut pruned, s, s.x_embedded_resource);
        let dp = child(p, "default");
        if &pruned != d {
            errs.push(FieldError::invalid(
                dp.clone(),
                d,
                "must not have unknown fields",
            ));
        } else {
            let r = validate::validate_node(s, d, "");
            errs.extend(validate::to_field_errors(r.errs, Some(&dp)));
        }
    }
    if let Some(items) = &s.items {
        defaults(items, &child(p, "items"), false, inside_meta, errs);
    }
    for (k, sub) in &s.properties {
        let sub_meta = inside_meta || (embedded && META_FIELDS.contains(&k.as_str()));
        defaults(sub, &prop_path(p, k), false, sub_meta, errs);
    }
}
