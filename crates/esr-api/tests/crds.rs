//! Acceptance: `crds/` is up to date with the types, and every generated CRD passes the
//! structural-schema rules the apiserver enforces that can be checked offline.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use serde_json::{Map, Value};
use std::collections::BTreeSet;
use std::path::Path;

const TYPES: [&str; 6] = ["object", "array", "string", "integer", "number", "boolean"];
/// Keywords that must not appear inside anyOf/oneOf/allOf/not (structural schema rule).
const FORBIDDEN_IN_JUNCTORS: [&str; 5] = [
    "type",
    "description",
    "default",
    "additionalProperties",
    "nullable",
];

#[test]
fn committed_crds_are_up_to_date() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../crds");
    let crds = esr_api::crds().unwrap();
    let mut expected_files = BTreeSet::new();
    let mut stale = Vec::new();
    for crd in &crds {
        let name = esr_api::crd_file_name(crd);
        expected_files.insert(name.clone());
        let want = esr_api::crd_file_content(crd).unwrap();
        match std::fs::read_to_string(dir.join(&name)) {
            Ok(have) if have == want => {}
            Ok(_) => stale.push(format!("{name} differs")),
            Err(e) => stale.push(format!("{name} unreadable: {e}")),
        }
    }
    let present: BTreeSet<String> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".yaml"))
                .collect()
        })
        .unwrap_or_default();
    for extra in present.difference(&expected_files) {
        stale.push(format!("{extra} is not generated any more (delete it)"));
    }
    assert!(
        stale.is_empty(),
        "crds/ is out of date; run `make crds` (esr crdgen --out crds) and commit the result:\n  {}",
        stale.join("\n  ")
    );
}

/// Structural-schema violations found under `node` (at `path`).
fn check_node(path: &str, node: &Value, is_property: bool, problems: &mut Vec<String>) {
    let Some(obj) = node.as_object() else {
        problems.push(format!("{path}: schema is not an object"));
        return;
    };
    let int_or_string = obj.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
    let preserve = obj.get("x-kubernetes-preserve-unknown-fields");
    if preserve == Some(&Value::Bool(false)) {
        problems.push(format!(
            "{path}: x-kubernetes-preserve-unknown-fields: false is not allowed"
        ));
    }
    match obj.get("type") {
        None if int_or_string || preserve == Some(&Value::Bool(true)) => {}
        None => problems.push(format!("{path}: no type")),
        Some(Value::String(t)) if TYPES.contains(&t.as_str()) => {
            if int_or_string {
                problems.push(format!("{path}: int-or-string must not have a type"));
            }
        }
        Some(other) => problems.push(format!("{path}: invalid type {other}")),
    }
    if obj.contains_key("properties") && obj.contains_key("additionalProperties") {
        problems.push(format!("{path}: both properties and additionalProperties"));
    }
    if obj.get("additionalProperties") == Some(&Value::Bool(false)) {
        problems.push(format!(
            "{path}: additionalProperties: false is not allowed"
        ));
    }
    if obj.contains_key("$ref") || obj.contains_key("definitions") || obj.contains_key("$defs") {
        problems.push(format!("{path}: references are not allowed"));
    }
    if obj.contains_key("x-kubernetes-embedded-resource") {
        problems.push(format!("{path}: unexpected embedded resource"));
    }
    if obj.get("nullable") == Some(&Value::Bool(true)) && path != ".status.refreshTime" {
        problems.push(format!(
            "{path}: nullable is only expected on .status.refreshTime"
        ));
    }
    // The root `metadata` must not carry a description (see `every_crd_is_structural`).
    if is_property
        && path != ".metadata"
        && obj
            .get("description")
            .and_then(Value::as_str)
            .is_none_or(|d| d.trim().is_empty())
    {
        problems.push(format!("{path}: no description"));
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(branches) = obj.get(key) {
            let Some(branches) = branches.as_array() else {
                problems.push(format!("{path}: {key} is not a list"));
                continue;
            };
            let int_or_string_form = int_or_string
                && key == "anyOf"
                && branches.len() == 2
                && branches[0] == serde_json::json!({"type": "integer"})
                && branches[1] == serde_json::json!({"type": "string"});
            if !int_or_string_form {
                for branch in branches {
                    check_junctor(&format!("{path}.{key}"), branch, problems);
                }
            }
        }
    }
    if let Some(not) = obj.get("not") {
        check_junctor(&format!("{path}.not"), not, problems);
    }
    if let Some(required) = obj.get("required").and_then(Value::as_array) {
        let props = obj.get("properties").and_then(Value::as_object);
        for r in required {
            let r = r.as_str().unwrap_or_default();
            if !props.is_some_and(|p| p.contains_key(r)) {
                problems.push(format!("{path}: required field {r} is not a property"));
            }
        }
    }
    if let Some(list_type) = obj.get("x-kubernetes-list-type").and_then(Value::as_str)
        && !["atomic", "set", "map"].contains(&list_type)
    {
        problems.push(format!("{path}: bad x-kubernetes-list-type {list_type}"));
    }
    if let Some(map_type) = obj.get("x-kubernetes-map-type").and_then(Value::as_str)
        && !["atomic", "granular"].contains(&map_type)
    {
        problems.push(format!("{path}: bad x-kubernetes-map-type {map_type}"));
    }
    if let Some(default) = obj.get("default") {
        check_default(path, obj, default, problems);
    }
    if let Some(props) = obj.get("properties").and_then(Value::as_object) {
        for (name, child) in props {
            check_node(&format!("{path}.{name}"), child, true, problems);
        }
    }
    if let Some(items) = obj.get("items") {
        check_node(&format!("{path}[]"), items, false, problems);
    }
    if let Some(ap) = obj.get("additionalProperties").filter(|a| a.is_object()) {
        check_node(&format!("{path}{{}}"), ap, false, problems);
    }
}

/// Inside value validations only validation keywords are allowed.
fn check_junctor(path: &str, node: &Value, problems: &mut Vec<String>) {
    let Some(obj) = node.as_object() else {
        problems.push(format!("{path}: branch is not an object"));
        return;
    };
    for key in FORBIDDEN_IN_JUNCTORS {
        if obj.contains_key(key) {
            problems.push(format!(
                "{path}: {key} is not allowed inside anyOf/oneOf/allOf/not"
            ));
        }
    }
    for key in obj.keys().filter(|k| k.starts_with("x-kubernetes-")) {
        problems.push(format!(
            "{path}: {key} is not allowed inside anyOf/oneOf/allOf/not"
        ));
    }
    if let Some(props) = obj.get("properties").and_then(Value::as_object) {
        for (name, child) in props {
            check_junctor(&format!("{path}.{name}"), child, problems);
        }
    }
    if let Some(items) = obj.get("items") {
        check_junctor(&format!("{path}[]"), items, problems);
    }
}

/// A default must validate against the schema it sits in (type, enum, pattern, lengths, known
/// properties), because the apiserver rejects CRDs with invalid defaults.
fn check_default(
    path: &str,
    schema: &Map<String, Value>,
    value: &Value,
    problems: &mut Vec<String>,
) {
    let type_ok = match schema.get("type").and_then(Value::as_str) {
        Some("string") => value.is_string(),
        Some("boolean") => value.is_boolean(),
        Some("integer") => value.is_i64() || value.is_u64(),
        Some("number") => value.is_number(),
        Some("array") => value.is_array(),
        Some("object") => value.is_object(),
        _ => true,
    };
    if !type_ok {
        problems.push(format!("{path}: default {value} does not match the type"));
        return;
    }
    if let Some(values) = schema.get("enum").and_then(Value::as_array)
        && !values.contains(value)
    {
        problems.push(format!("{path}: default {value} is not in the enum"));
    }
    if let (Some(pattern), Some(s)) = (
        schema.get("pattern").and_then(Value::as_str),
        value.as_str(),
    ) {
        let re = regex::Regex::new(pattern).unwrap();
        if !re.is_match(s) {
            problems.push(format!(
                "{path}: default {value} does not match the pattern"
            ));
        }
    }
    if let Some(s) = value.as_str() {
        let len = s.chars().count() as u64;
        if schema
            .get("minLength")
            .and_then(Value::as_u64)
            .is_some_and(|m| len < m)
            || schema
                .get("maxLength")
                .and_then(Value::as_u64)
                .is_some_and(|m| len > m)
        {
            problems.push(format!(
                "{path}: default {value} violates the length limits"
            ));
        }
    }
    if let Some(map) = value.as_object() {
        let props = schema.get("properties").and_then(Value::as_object);
        for (k, v) in map {
            match props.and_then(|p| p.get(k)).and_then(Value::as_object) {
                Some(child) => check_default(&format!("{path}.{k}"), child, v, problems),
                None => problems.push(format!(
                    "{path}: default sets unknown field {k} (it would be pruned)"
                )),
            }
        }
    }
}

#[test]
fn every_crd_is_structural() {
    let crds = common::our_crds();
    assert!(crds.len() >= 10, "expected at least ESO's 10 core CRDs");
    let mut problems = Vec::new();
    for crd in &crds {
        let name = crd["metadata"]["name"].as_str().unwrap();
        let versions = crd["spec"]["versions"].as_array().unwrap();
        let storage = versions
            .iter()
            .filter(|v| v["storage"] == Value::Bool(true))
            .count();
        if storage != 1 {
            problems.push(format!("{name}: {storage} storage versions"));
        }
        for version in versions {
            let vname = version["name"].as_str().unwrap();
            let mut local = Vec::new();
            let root = &version["schema"]["openAPIV3Schema"];
            if root["type"] != "object" {
                local.push("root: type must be object".to_owned());
            }
            check_node("", root, false, &mut local);
            // metadata may only restrict name and generateName (and carry nothing else, not even a
            // description); esr restricts nothing.
            let metadata = &root["properties"]["metadata"];
            if metadata != &serde_json::json!({"type": "object"}) {
                local.push(format!(
                    ".metadata: only `type: object` is allowed, got {metadata}"
                ));
            }
            let has_status = root["properties"].get("status").is_some();
            if has_status && version["subresources"]["status"].is_null() {
                local.push("status without status subresource".to_owned());
            }
            for column in version["additionalPrinterColumns"]
                .as_array()
                .into_iter()
                .flatten()
            {
                if !["string", "date", "integer", "number", "boolean"]
                    .contains(&column["type"].as_str().unwrap_or_default())
                {
                    local.push(format!("printer column {column}: bad type"));
                }
            }
            problems.extend(local.into_iter().map(|p| format!("{name} {vname} {p}")));
        }
    }
    assert!(
        problems.is_empty(),
        "structural problems:\n  {}",
        problems.join("\n  ")
    );
}

#[test]
fn structural_checker_rejects_bad_schemas() {
    // The checker must actually catch violations (a check that cannot fail is no check).
    let bad = serde_json::json!({
        "type": "object",
        "properties": {
            "untyped": {"description": "x"},
            "both": {"type": "object", "description": "x", "properties": {}, "additionalProperties": {"type": "string"}},
            "nopreserve": {"type": "object", "description": "x", "x-kubernetes-preserve-unknown-fields": false},
            "typedAnyOf": {"description": "x", "type": "string", "anyOf": [{"type": "string"}]},
            "badDefault": {"description": "x", "type": "string", "enum": ["A"], "default": "B"},
            "nodesc": {"type": "string"}
        }
    });
    let mut problems = Vec::new();
    check_node("", &bad, false, &mut problems);
    let text = problems.join("\n");
    for expected in [
        ".untyped: no type",
        ".both: both properties and additionalProperties",
        ".nopreserve: x-kubernetes-preserve-unknown-fields: false",
        ".typedAnyOf.anyOf: type is not allowed",
        ".badDefault: default \"B\" is not in the enum",
        ".nodesc: no description",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
}

#[test]
fn every_crd_passes_esr_schema_apiserver_checks() {
    // Independent cross-check with esr-schema's re-implementation of the apiserver's CRD schema
    // validation (structural rules, defaults, list/map types).
    let mut problems = Vec::new();
    for crd in common::our_crds() {
        let name = crd["metadata"]["name"].as_str().unwrap().to_owned();
        for version in crd["spec"]["versions"].as_array().unwrap() {
            for p in esr_schema::check_structural(&version["schema"]["openAPIV3Schema"]) {
                problems.push(format!("{name} {}: {p}", version["name"]));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "apiserver would reject:\n  {}",
        problems.join("\n  ")
    );
}
