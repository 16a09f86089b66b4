//! CustomResourceDefinition validation as kube-apiserver v1.34 does it.
//!
//! The apiserver does not validate the `apiextensions.k8s.io/v1` object as sent: it first converts
//! it to its internal form, and that conversion *hoists* per-version fields. For each of `schema`,
//! `subresources`, `additionalPrinterColumns` and `selectableFields` separately, when every
//! version carries an identical value (absent and empty lists count as equal), the value moves to
//! the top level (`spec.validation`, `spec.subresources`, `spec.additionalPrinterColumns`,
//! `spec.selectableFields`) and is cleared on every version. Validation then runs on that internal
//! form, so:
//!
//! - errors in a hoisted schema are reported once, under `spec.validation.openAPIV3Schema`;
//! - per-version `selectableFields` on a version whose schema was hoisted are refused with
//!   `spec.versions[i].selectableFields: Invalid value: "": may only be set when
//!   `version.schema.openAPIV3Schema` is not included` (versions with identical schemas must carry
//!   identical selectable fields, which are then hoisted too);
//! - hoisted `selectableFields` next to per-version schemas are refused with
//!   `spec.selectableFields: Invalid value: "": may only be set when validations.schema is
//!   included`.
//!
//! Checked here, in the apiserver's order: the CRD name, `spec.group`, `spec.scope`, the presence
//! of a schema, then per version its name, `deprecationWarning`, structural schema,
//! `additionalPrinterColumns` (name, type `boolean|date|integer|number|string`, format, simple
//! JSONPath) and `selectableFields` (a JSONPath to a `string`, `integer` or `boolean` field
//! outside `metadata`, no duplicates, at most 8), then `spec.names`, then the top-level schema,
//! columns and selectable fields. The number of storage versions is checked by the caller.

use esr_schema::FieldError;
use serde_json::Value;

use crate::error::Cause;

/// The most `selectableFields` one version (or the top level) may have.
pub const MAX_SELECTABLE_FIELDS: usize = 8;

const PRINTER_COLUMN_TYPES: &str = "boolean,date,integer,number,string";
const PRINTER_COLUMN_FORMATS: [&str; 8] = [
    "byte",
    "date",
    "date-time",
    "double",
    "float",
    "int32",
    "int64",
    "password",
];

/// One version of a CRD in the apiserver's internal form (hoisted fields cleared).
#[derive(Debug)]
struct Version<'a> {
    name: &'a str,
    raw: &'a Value,
    schema: Option<&'a Value>,
    columns: &'a [Value],
    selectable: &'a [Value],
}

/// A CRD spec in the apiserver's internal form.
#[derive(Debug)]
pub struct Internal<'a> {
    /// The top-level schema (`spec.validation.openAPIV3Schema`), when every version's is the same.
    pub validation: Option<&'a Value>,
    columns: &'a [Value],
    selectable: &'a [Value],
    versions: Vec<Version<'a>>,
}

fn opt(v: &Value) -> Option<&Value> {
    (!v.is_null()).then_some(v)
}

fn list(v: &Value) -> &[Value] {
    v.as_array().map(Vec::as_slice).unwrap_or_default()
}

/// Converts a v1 CRD to the apiserver's internal form (hoisting identical per-version fields).
pub fn internal(crd: &Value) -> Internal<'_> {
    let versions = list(&crd["spec"]["versions"]);
    let identical = |f: &dyn Fn(&Value) -> bool| versions.iter().all(f);
    let (schema_same, columns_same, selectable_same) = match versions.first() {
        None => (false, false, false),
        Some(first) => (
            identical(&|v| opt(&v["schema"]) == opt(&first["schema"])),
            identical(&|v| {
                list(&v["additionalPrinterColumns"]) == list(&first["additionalPrinterColumns"])
            }),
            identical(&|v| list(&v["selectableFields"]) == list(&first["selectableFields"])),
        ),
    };
    let first = versions.first();
    Internal {
        validation: first
            .filter(|_| schema_same)
            .and_then(|f| opt(&f["schema"]["openAPIV3Schema"])),
        columns: first
            .filter(|_| columns_same)
            .map(|f| list(&f["additionalPrinterColumns"]))
            .unwrap_or_default(),
        selectable: first
            .filter(|_| selectable_same)
            .map(|f| list(&f["selectableFields"]))
            .unwrap_or_default(),
        versions: versions
            .iter()
            .map(|v| Version {
                name: v["name"].as_str().unwrap_or_default(),
                raw: v,
                schema: if schema_same {
                    None
                } else {
                    opt(&v["schema"]["openAPIV3Schema"])
                },
                columns: if columns_same {
                    &[]
                } else {
                    list(&v["additionalPrinterColumns"])
                },
                selectable: if selectable_same {
                    &[]
                } else {
                    list(&v["selectableFields"])
                },
            })
            .collect(),
    }
}

/// The field path under which the apiserver reports errors in version `index`'s schema:
/// `spec.validation.openAPIV3Schema` when all versions share one schema (it is hoisted),
/// `spec.versions[<index>].schema.openAPIV3Schema` otherwise.
pub fn schema_path(crd: &Value, index: usize) -> String {
    if internal(crd).validation.is_some() {
        "spec.validation.openAPIV3Schema".to_string()
    } else {
        format!("spec.versions[{index}].schema.openAPIV3Schema")
    }
}

fn cause(e: FieldError) -> Cause {
    Cause::new(e.kind.reason(), e.message, e.path)
}

fn invalid(path: impl Into<String>, value: &str, detail: &str) -> Cause {
    cause(FieldError::invalid(
        path,
        &Value::String(value.to_string()),
        detail,
    ))
}

/// Everything the apiserver checks on a CRD create or update, except the number of storage
/// versions; empty when the CRD is valid.
pub fn validate(crd: &Value) -> Vec<Cause> {
    let spec = &crd["spec"];
    let names = &spec["names"];
    let str_at = |v: &Value, k: &str| v[k].as_str().unwrap_or_default().to_string();
    let group = str_at(spec, "group");
    let plural = str_at(names, "plural");
    let kind = str_at(names, "kind");
    let name = str_at(&crd["metadata"], "name");
    let mut out = vec![];

    // metadata.name
    if name.is_empty() {
        out.push(cause(FieldError::required(
            "metadata.name",
            "name or generateName is required",
        )));
    } else {
        for msg in esr_schema::names::dns1123_subdomain(&name) {
            out.push(invalid("metadata.name", &name, &msg));
        }
        if name != format!("{plural}.{group}") {
            out.push(invalid(
                "metadata.name",
                &name,
                "must be spec.names.plural+\".\"+spec.group",
            ));
        }
    }

    // spec.group
    if group.is_empty() {
        out.push(cause(FieldError::required("spec.group", "")));
    } else {
        let errs = esr_schema::names::dns1123_subdomain(&group);
        if !errs.is_empty() {
            out.push(invalid("spec.group", &group, &errs.join(",")));
        } else if !group.contains('.') {
            out.push(invalid(
                "spec.group",
                &group,
                "should be a domain with at least one dot",
            ));
        }
    }

    // spec.scope
    match spec["scope"].as_str().unwrap_or_default() {
        "" => out.push(cause(FieldError::required("spec.scope", ""))),
        "Cluster" | "Namespaced" => {}
        other => out.push(cause(FieldError::not_supported(
            "spec.scope",
            &Value::String(other.to_string()),
            &["Cluster".to_string(), "Namespaced".to_string()],
        ))),
    }

    let crd_internal = internal(crd);
    if crd_internal.validation.is_none() {
        for (i, v) in crd_internal.versions.iter().enumerate() {
            if v.schema.is_none() {
                out.push(cause(FieldError::required(
                    format!("spec.versions[{i}].schema.openAPIV3Schema"),
                    "",
                )));
            }
        }
    }

    for (i, v) in crd_internal.versions.iter().enumerate() {
        let base = format!("spec.versions[{i}]");
        for msg in esr_schema::names::dns1035_label(v.name) {
            out.push(invalid(format!("{base}.name"), v.name, &msg));
        }
        out.extend(deprecation_warning(v.raw, &base));
        if let Some(schema) = v.schema {
            out.extend(structural(
                schema,
                &format!("{base}.schema.openAPIV3Schema"),
            ));
        }
        for (j, col) in v.columns.iter().enumerate() {
            out.extend(printer_column(
                col,
                &format!("{base}.additionalPrinterColumns[{j}]"),
            ));
        }
        if !v.selectable.is_empty() {
            match v.schema {
                None => out.push(invalid(
                    format!("{base}.selectableFields"),
                    "",
                    "may only be set when `version.schema.openAPIV3Schema` is not included",
                )),
                Some(schema) => out.extend(selectable_fields(
                    v.selectable,
                    schema,
                    &format!("{base}.selectableFields"),
                )),
            }
        }
    }

    // spec.names (singular and listKind are defaulted from kind before validation)
    if plural.is_empty() {
        out.push(cause(FieldError::required("spec.names.plural", "")));
    }
    if kind.is_empty() {
        out.push(cause(FieldError::required("spec.names.kind", "")));
    }
    out.extend(crd_names(names, "spec.names"));

    // top level (hoisted) fields
    if let Some(schema) = crd_internal.validation {
        out.extend(structural(schema, "spec.validation.openAPIV3Schema"));
    }
    for (j, col) in crd_internal.columns.iter().enumerate() {
        out.extend(printer_column(
            col,
            &format!("spec.additionalPrinterColumns[{j}]"),
        ));
    }
    if !crd_internal.selectable.is_empty() {
        match crd_internal.validation {
            None => out.push(invalid(
                "spec.selectableFields",
                "",
                "may only be set when validations.schema is included",
            )),
            Some(schema) => out.extend(selectable_fields(
                crd_internal.selectable,
                schema,
                "spec.selectableFields",
            )),
        }
    }
    out
}

/// Structural-schema errors, then CEL rule errors (rules or messageExpressions that do not
/// compile, estimated cost over budget), as the apiserver reports them for a schema at `path`.
fn structural(schema: &Value, path: &str) -> Vec<Cause> {
    esr_schema::check_structural_at(schema, path)
        .into_iter()
        .chain(esr_schema::check_cel_rules(schema, path))
        .map(cause)
        .collect()
}

fn deprecation_warning(version: &Value, base: &str) -> Vec<Cause> {
    let Some(warning) = version["deprecationWarning"].as_str() else {
        return vec![];
    };
    let path = format!("{base}.deprecationWarning");
    if version["deprecated"].as_bool() != Some(true) {
        return vec![invalid(
            path,
            warning,
            "can only be set for deprecated versions",
        )];
    }
    let mut out = vec![];
    if warning.len() > 256 {
        out.push(invalid(&path, warning, "must be <= 256 characters long"));
    }
    if warning.is_empty() {
        out.push(invalid(&path, warning, "must not be an empty string"));
    }
    if let Some(i) = warning
        .char_indices()
        .find(|(_, c)| c.is_control())
        .map(|(i, _)| i)
    {
        out.push(invalid(
            &path,
            warning,
            &format!(
                "must only contain printable UTF-8 characters; non-printable character found at index {i}"
            ),
        ));
    }
    out
}

fn crd_names(names: &Value, base: &str) -> Vec<Cause> {
    let mut out = vec![];
    let kind = names["kind"].as_str().unwrap_or_default();
    let singular = names["singular"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| kind.to_lowercase());
    let list_kind = names["listKind"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| {
            if kind.is_empty() {
                String::new()
            } else {
                format!("{kind}List")
            }
        });
    let plural = names["plural"].as_str().unwrap_or_default();
    for (field, value) in [("plural", plural), ("singular", singular.as_str())] {
        let errs = esr_schema::names::dns1035_label(value);
        if !value.is_empty() && !errs.is_empty() {
            out.push(invalid(format!("{base}.{field}"), value, &errs.join(",")));
        }
    }
    for (field, value) in [("kind", kind), ("listKind", list_kind.as_str())] {
        let errs = esr_schema::names::dns1035_label(&value.to_lowercase());
        if !value.is_empty() && !errs.is_empty() {
            out.push(invalid(
                format!("{base}.{field}"),
                value,
                &format!(
                    "may have mixed case, but should otherwise match: {}",
                    errs.join(",")
                ),
            ));
        }
    }
    for (i, short) in list(&names["shortNames"]).iter().enumerate() {
        let s = short.as_str().unwrap_or_default();
        let errs = esr_schema::names::dns1035_label(s);
        if !errs.is_empty() {
            out.push(invalid(
                format!("{base}.shortNames[{i}]"),
                s,
                &errs.join(","),
            ));
        }
    }
    if !kind.is_empty() && kind == list_kind {
        out.push(invalid(
            format!("{base}.listKind"),
            &list_kind,
            "kind and listKind may not be the same",
        ));
    }
    for (i, category) in list(&names["categories"]).iter().enumerate() {
        let s = category.as_str().unwrap_or_default();
        let errs = esr_schema::names::dns1035_label(s);
        if !errs.is_empty() {
            out.push(invalid(
                format!("{base}.categories[{i}]"),
                s,
                &errs.join(","),
            ));
        }
    }
    out
}

/// `ValidateCustomResourceColumnDefinition`.
fn printer_column(col: &Value, base: &str) -> Vec<Cause> {
    let mut out = vec![];
    let text = |k: &str| col[k].as_str().unwrap_or_default();
    if text("name").is_empty() {
        out.push(cause(FieldError::required(format!("{base}.name"), "")));
    }
    let ty = text("type");
    let types_msg = format!("must be one of {PRINTER_COLUMN_TYPES}");
    if ty.is_empty() {
        out.push(cause(FieldError::required(
            format!("{base}.type"),
            &types_msg,
        )));
    } else if !PRINTER_COLUMN_TYPES.split(',').any(|t| t == ty) {
        out.push(invalid(format!("{base}.type"), ty, &types_msg));
    }
    let format = text("format");
    if !format.is_empty() && !PRINTER_COLUMN_FORMATS.contains(&format) {
        out.push(invalid(
            format!("{base}.format"),
            format,
            &format!("must be one of {}", PRINTER_COLUMN_FORMATS.join(",")),
        ));
    }
    let path = text("jsonPath");
    if path.is_empty() {
        out.push(cause(FieldError::required(format!("{base}.JSONPath"), "")));
    } else if !path.starts_with('.') {
        out.push(invalid(
            format!("{base}.JSONPath"),
            path,
            "must be a simple json path starting with .",
        ));
    }
    out
}

/// `ValidateCustomResourceSelectableFields` against the (structural) schema of the version.
fn selectable_fields(fields: &[Value], schema: &Value, base: &str) -> Vec<Cause> {
    let mut out = vec![];
    let mut seen: Vec<String> = vec![];
    for (i, f) in fields.iter().enumerate() {
        let path = format!("{base}[{i}].jsonPath");
        let json_path = f["jsonPath"].as_str().unwrap_or_default();
        if json_path.is_empty() {
            out.push(cause(FieldError::required(path, "")));
            continue;
        }
        let (field_path, found) = match resolve_field_path(json_path, schema) {
            Ok(r) => r,
            Err(e) => {
                out.push(invalid(
                    path,
                    json_path,
                    &format!("is an invalid path: {e}"),
                ));
                continue;
            }
        };
        if field_path.root == "metadata" {
            out.push(invalid(
                &path,
                json_path,
                "must not point to fields in metadata",
            ));
        }
        if !matches!(
            found["type"].as_str(),
            Some("string" | "boolean" | "integer")
        ) {
            out.push(invalid(
                &path,
                json_path,
                "must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed.",
            ));
        }
        if seen.contains(&field_path.text) {
            out.push(cause(FieldError::duplicate(
                path,
                &Value::String(json_path.to_string()),
            )));
        } else {
            seen.push(field_path.text);
        }
    }
    if seen.len() > MAX_SELECTABLE_FIELDS {
        out.push(cause(FieldError::too_many(
            base,
            i64::try_from(seen.len()).unwrap_or(i64::MAX),
            i64::try_from(MAX_SELECTABLE_FIELDS).unwrap_or(i64::MAX),
        )));
    }
    out
}

/// A field path resolved in a schema: its first segment and its `field.Path` text.
struct FieldPath {
    root: String,
    text: String,
}

/// Resolves a selectable field's JSONPath (`.a.b`, `.a['b']`, no array indexes) in a structural
/// schema, as the apiserver's `ValidFieldPath` does; returns the path and the schema it points to.
fn resolve_field_path<'a>(
    json_path: &str,
    schema: &'a Value,
) -> Result<(FieldPath, &'a Value), String> {
    let tokens = tokenize(json_path);
    let mut it = tokens.iter();
    let mut node = schema;
    let mut root = String::new();
    let mut text = String::new();
    let mut step = |name: &str, node: &mut &'a Value| -> Result<(), String> {
        if node.get("properties").is_some_and(Value::is_object) {
            if root.is_empty() && text.is_empty() {
                root = name.to_string();
            }
            if !text.is_empty() {
                text.push('.');
            }
            text.push_str(name);
            *node = node["properties"]
                .get(name)
                .ok_or_else(|| "does not refer to a valid field".to_string())?;
            Ok(())
        } else if node
            .get("additionalProperties")
            .is_some_and(Value::is_object)
        {
            if root.is_empty() && text.is_empty() {
                root = format!("[{name}]");
            }
            text.push_str(&format!("[{name}]"));
            *node = &node["additionalProperties"];
            Ok(())
        } else {
            Err("does not refer to a valid field".to_string())
        }
    };
    while let Some(tok) = it.next() {
        match tok.as_str() {
            "[" => {
                let inner = it
                    .next()
                    .ok_or_else(|| "unexpected end of JSON path".to_string())?;
                let quoted = inner.len() >= 2 && inner.starts_with('\'') && inner.ends_with('\'');
                if !quoted {
                    return Err(format!("expected single quoted string but got {inner}"));
                }
                let name = unescape_single_quoted(&inner[1..inner.len() - 1])
                    .map_err(|e| format!("invalid string literal: {e}"))?;
                step(&name, &mut node)?;
                let close = it
                    .next()
                    .ok_or_else(|| "unexpected end of JSON path".to_string())?;
                if close != "]" {
                    return Err(format!("expected ] but got {close}"));
                }
            }
            "." => {
                let name = it
                    .next()
                    .ok_or_else(|| "unexpected end of JSON path".to_string())?;
                step(name, &mut node)?;
            }
            other => return Err(format!("expected [ or . but got: {other}")),
        }
    }
    Ok((FieldPath { root, text }, node))
}

/// Splits a JSONPath into `.`, `[`, `]` and the text between them.
fn tokenize(s: &str) -> Vec<String> {
    let mut out = vec![];
    let mut cur = String::new();
    for c in s.chars() {
        if matches!(c, '.' | '[' | ']') {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            out.push(c.to_string());
        } else {
            cur.push(c);
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn unescape_single_quoted(s: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some(e @ ('\'' | '\\')) => out.push(e),
            Some(e) => return Err(format!("invalid escape sequence '\\{e}'")),
            None => return Err("unterminated escape sequence".to_string()),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd(versions: Value) -> Value {
        json!({
            "metadata": {"name": "widgets.test.esr.dev"},
            "spec": {
                "group": "test.esr.dev",
                "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget"},
                "versions": versions,
            }
        })
    }

    fn schema() -> Value {
        json!({"openAPIV3Schema": {"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "name": {"type": "string"},
                "count": {"type": "integer"},
                "ratio": {"type": "number"},
                "tags": {"type": "object", "additionalProperties": {"type": "string"}},
            }},
        }}})
    }

    fn messages(causes: &[Cause]) -> Vec<String> {
        causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect()
    }

    #[test]
    fn identical_schemas_are_hoisted() {
        let c = crd(json!([
            {"name": "v1", "served": true, "storage": true, "schema": schema()},
            {"name": "v1beta1", "served": false, "storage": false, "schema": schema()},
        ]));
        assert!(internal(&c).validation.is_some());
        assert_eq!(schema_path(&c, 1), "spec.validation.openAPIV3Schema");
        let mut other = schema();
        other["openAPIV3Schema"]["description"] = json!("x");
        let c = crd(json!([
            {"name": "v1", "served": true, "storage": true, "schema": schema()},
            {"name": "v1beta1", "served": false, "storage": false, "schema": other},
        ]));
        assert!(internal(&c).validation.is_none());
        assert_eq!(
            schema_path(&c, 1),
            "spec.versions[1].schema.openAPIV3Schema"
        );
    }

    #[test]
    fn selectable_fields_on_one_of_two_identical_versions_are_refused() {
        let c = crd(json!([
            {"name": "v1", "served": true, "storage": true, "schema": schema(),
             "selectableFields": [{"jsonPath": ".spec.name"}]},
            {"name": "v1beta1", "served": false, "storage": false, "schema": schema()},
        ]));
        assert_eq!(
            messages(&validate(&c)),
            [
                "spec.versions[0].selectableFields: Invalid value: \"\": may only be set when `version.schema.openAPIV3Schema` is not included"
            ]
        );
    }

    #[test]
    fn identical_selectable_fields_with_distinct_schemas_are_refused() {
        let mut other = schema();
        other["openAPIV3Schema"]["description"] = json!("x");
        let sf = json!([{"jsonPath": ".spec.name"}]);
        let c = crd(json!([
            {"name": "v1", "served": true, "storage": true, "schema": schema(), "selectableFields": sf},
            {"name": "v2", "served": true, "storage": false, "schema": other, "selectableFields": sf},
        ]));
        assert_eq!(
            messages(&validate(&c)),
            [
                "spec.selectableFields: Invalid value: \"\": may only be set when validations.schema is included"
            ]
        );
    }

    #[test]
    fn selectable_field_rules() {
        let fields: Vec<Value> = [
            ".spec.name",
            ".spec.count",
            ".spec.ratio",
            ".spec.missing",
            "spec.name",
            ".spec['name']",
            ".spec.tags.a",
            ".metadata.name",
            "",
        ]
        .iter()
        .map(|p| json!({"jsonPath": p}))
        .collect();
        let c = crd(json!([
            {"name": "v1", "served": true, "storage": true, "schema": schema(), "selectableFields": fields},
        ]));
        let p = "spec.selectableFields";
        assert_eq!(
            messages(&validate(&c)),
            [
                format!(
                    "{p}[2].jsonPath: Invalid value: \".spec.ratio\": must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed."
                ),
                format!(
                    "{p}[3].jsonPath: Invalid value: \".spec.missing\": is an invalid path: does not refer to a valid field"
                ),
                format!(
                    "{p}[4].jsonPath: Invalid value: \"spec.name\": is an invalid path: expected [ or . but got: spec"
                ),
                format!("{p}[5].jsonPath: Duplicate value: \".spec['name']\""),
                format!(
                    "{p}[7].jsonPath: Invalid value: \".metadata.name\": is an invalid path: does not refer to a valid field"
                ),
                format!("{p}[8].jsonPath: Required value"),
            ]
        );
    }

    #[test]
    fn at_most_eight_selectable_fields() {
        let mut s = schema();
        let props = s["openAPIV3Schema"]["properties"]["spec"]["properties"]
            .as_object_mut()
            .unwrap();
        for i in 0..9 {
            props.insert(format!("c{i}"), json!({"type": "string"}));
        }
        let fields: Vec<Value> = (0..9)
            .map(|i| json!({"jsonPath": format!(".spec.c{i}")}))
            .collect();
        let c = crd(json!([
            {"name": "v1", "served": true, "storage": true, "schema": s, "selectableFields": fields},
        ]));
        assert_eq!(
            messages(&validate(&c)),
            ["spec.selectableFields: Too many: 9: must have at most 8 items"]
        );
    }

    #[test]
    fn printer_column_rules() {
        let c = crd(json!([
            {"name": "v1", "served": true, "storage": true, "schema": schema(),
             "additionalPrinterColumns": [
                {"name": "A", "type": "string", "jsonPath": ".spec.name"},
                {"name": "", "type": "text", "format": "uuid", "jsonPath": "spec.name"},
                {"name": "C", "jsonPath": ""},
             ]},
        ]));
        let p = "spec.additionalPrinterColumns";
        assert_eq!(
            messages(&validate(&c)),
            [
                format!("{p}[1].name: Required value"),
                format!(
                    "{p}[1].type: Invalid value: \"text\": must be one of boolean,date,integer,number,string"
                ),
                format!(
                    "{p}[1].format: Invalid value: \"uuid\": must be one of byte,date,date-time,double,float,int32,int64,password"
                ),
                format!(
                    "{p}[1].JSONPath: Invalid value: \"spec.name\": must be a simple json path starting with ."
                ),
                format!(
                    "{p}[2].type: Required value: must be one of boolean,date,integer,number,string"
                ),
                format!("{p}[2].JSONPath: Required value"),
            ]
        );
    }

    #[test]
    fn per_version_columns_are_checked_where_they_differ() {
        let c = crd(json!([
            {"name": "v1", "served": true, "storage": true, "schema": schema(),
             "additionalPrinterColumns": [{"name": "A", "type": "strin", "jsonPath": ".spec.name"}]},
            {"name": "v2", "served": true, "storage": false, "schema": schema()},
        ]));
        assert_eq!(
            messages(&validate(&c)),
            [
                "spec.versions[0].additionalPrinterColumns[0].type: Invalid value: \"strin\": must be one of boolean,date,integer,number,string"
            ]
        );
    }

    #[test]
    fn structural_errors_of_a_hoisted_schema_are_reported_once_at_the_top_level() {
        let bad = json!({"openAPIV3Schema": {"type": "object", "properties": {
            "spec": {"type": "object", "properties": {"x": {}}},
        }}});
        let c = crd(json!([
            {"name": "v1", "served": true, "storage": true, "schema": bad},
            {"name": "v2", "served": true, "storage": false, "schema": bad},
        ]));
        let m = messages(&validate(&c));
        assert!(!m.is_empty());
        assert!(
            m.iter()
                .all(|e| e.starts_with("spec.validation.openAPIV3Schema.properties[spec]")),
            "{m:?}"
        );
    }

    #[test]
    fn version_and_crd_names() {
        let mut c = crd(json!([
            {"name": "V1", "served": true, "storage": true, "schema": schema()},
        ]));
        c["metadata"]["name"] = json!("widgets.other.dev");
        c["spec"]["names"]["listKind"] = json!("Widget");
        let m = messages(&validate(&c));
        assert_eq!(
            m,
            [
                "metadata.name: Invalid value: \"widgets.other.dev\": must be spec.names.plural+\".\"+spec.group",
                "spec.versions[0].name: Invalid value: \"V1\": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
                "spec.names.listKind: Invalid value: \"Widget\": kind and listKind may not be the same",
            ]
        );
    }
}
