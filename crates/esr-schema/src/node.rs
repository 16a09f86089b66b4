//! The parsed form of one OpenAPI v3 schema node (a CRD's `JSONSchemaProps`).

use indexmap::IndexMap;
use regex::Regex;
use serde_json::{Map, Value};

use crate::error::SchemaError;
use crate::formats;

/// `additionalProperties`: a bool or a schema.
#[derive(Debug, Clone)]
pub(crate) enum Additional {
    Bool(bool),
    Schema(Box<Node>),
}

/// One schema node with every keyword a CRD schema may carry.
#[derive(Debug, Clone, Default)]
pub(crate) struct Node {
    /// `type` as written.
    pub ty: Option<String>,
    /// The types the validator checks (`x-kubernetes-int-or-string` gives `integer,string`).
    pub types: Vec<String>,
    /// `format` as written.
    pub format: Option<String>,
    /// The format the validator uses, after the apiserver strips unsupported formats.
    pub vformat: Option<String>,
    pub nullable: bool,
    pub default: Option<Value>,
    pub enum_values: Option<Vec<Value>>,
    pub required: Vec<String>,
    pub properties: IndexMap<String, Node>,
    pub additional: Option<Additional>,
    pub items: Option<Box<Node>>,
    pub all_of: Vec<Node>,
    pub any_of: Vec<Node>,
    pub one_of: Vec<Node>,
    pub not: Option<Box<Node>>,
    pub pattern: Option<String>,
    pub regex: Option<Result<Regex, String>>,
    pub min_length: Option<i64>,
    pub max_length: Option<i64>,
    pub min_items: Option<i64>,
    pub max_items: Option<i64>,
    pub min_properties: Option<i64>,
    pub max_properties: Option<i64>,
    pub minimum: Option<f64>,
    pub maximum: Option<f64>,
    pub exclusive_minimum: bool,
    pub exclusive_maximum: bool,
    pub multiple_of: Option<f64>,
    pub unique_items: bool,
    pub x_preserve_unknown_fields: Option<bool>,
    pub x_embedded_resource: bool,
    pub x_int_or_string: bool,
    pub x_list_type: Option<String>,
    pub x_list_map_keys: Vec<String>,
    pub x_map_type: Option<String>,
    pub x_validations: Vec<Value>,
    /// `x_validations` compiled, one to one.
    pub cel_rules: Vec<std::sync::Arc<crate::cel::Rule>>,
    /// Keywords the apiserver forbids or that are forbidden in value validations
    /// (checked by `check_structural`).
    pub has_title: bool,
    pub has_description: bool,
    pub has_external_docs: bool,
    pub has_id: bool,
    pub has_ref: bool,
    pub has_definitions: bool,
    pub has_dependencies: bool,
    pub has_additional_items: bool,
    pub has_pattern_properties: bool,
    pub items_is_array: bool,
    /// The keywords present on this node, in schema order.
    pub keys: Vec<String>,
}

impl Node {
    /// `x-kubernetes-preserve-unknown-fields: true`.
    pub fn preserves_unknown(&self) -> bool {
        self.x_preserve_unknown_fields == Some(true)
    }

    /// The schema applying to a property `key` of an object (properties, else additionalProperties).
    pub fn child(&self, key: &str) -> Option<&Node> {
        if let Some(p) = self.properties.get(key) {
            return Some(p);
        }
        match &self.additional {
            Some(Additional::Schema(s)) => Some(s),
            _ => None,
        }
    }

    /// The structural `additionalProperties` schema, if any.
    pub fn additional_schema(&self) -> Option<&Node> {
        match &self.additional {
            Some(Additional::Schema(s)) => Some(s),
            _ => None,
        }
    }

    pub fn parse(v: &Value, path: &str) -> Result<Node, SchemaError> {
        let obj = v.as_object().ok_or_else(|| SchemaError::NotAnObject {
            path: path.to_string(),
        })?;
        let mut n = Node {
            ty: opt_string(obj, "type", path)?,
            format: opt_string(obj, "format", path)?,
            nullable: opt_bool(obj, "nullable", path)?.unwrap_or(false),
            default: obj.get("default").cloned(),
            required: string_list(obj, "required", path)?,
            pattern: opt_string(obj, "pattern", path)?,
            min_length: opt_int(obj, "minLength", path)?,
            max_length: opt_int(obj, "maxLength", path)?,
            min_items: opt_int(obj, "minItems", path)?,
            max_items: opt_int(obj, "maxItems", path)?,
            min_properties: opt_int(obj, "minProperties", path)?,
            max_properties: opt_int(obj, "maxProperties", path)?,
            minimum: opt_num(obj, "minimum", path)?,
            maximum: opt_num(obj, "maximum", path)?,
            exclusive_minimum: opt_bool(obj, "exclusiveMinimum", path)?.unwrap_or(false),
            exclusive_maximum: opt_bool(obj, "exclusiveMaximum", path)?.unwrap_or(false),
            multiple_of: opt_num(obj, "multipleOf", path)?,
            unique_items: opt_bool(obj, "uniqueItems", path)?.unwrap_or(false),
            x_preserve_unknown_fields: opt_bool(obj, "x-kubernetes-preserve-unknown-fields", path)?,
            x_embedded_resource: opt_bool(obj, "x-kubernetes-embedded-resource", path)?
                .unwrap_or(false),
            x_int_or_string: opt_bool(obj, "x-kubernetes-int-or-string", path)?.unwrap_or(false),
            x_list_type: opt_string(obj, "x-kubernetes-list-type", path)?,
            x_list_map_keys: string_list(obj, "x-kubernetes-list-map-keys", path)?,
            x_map_type: opt_string(obj, "x-kubernetes-map-type", path)?,
            has_title: obj
                .get("title")
                .is_some_and(|t| t.as_str().is_some_and(|s| !s.is_empty())),
            has_description: obj
                .get("description")
                .is_some_and(|t| t.as_str().is_some_and(|s| !s.is_empty())),
            has_external_docs: obj.get("externalDocs").is_some_and(|v| !v.is_null()),
            has_id: obj
                .get("id")
                .is_some_and(|t| t.as_str().is_some_and(|s| !s.is_empty())),
            has_ref: obj.get("$ref").is_some_and(|v| !v.is_null()),
            has_definitions: obj
                .get("definitions")
                .and_then(Value::as_object)
                .is_some_and(|m| !m.is_empty()),
            has_dependencies: obj.get("dependencies").is_some_and(|v| !v.is_null()),
            has_additional_items: obj.get("additionalItems").is_some_and(|v| !v.is_null()),
            has_pattern_properties: obj
                .get("patternProperties")
                .and_then(Value::as_object)
                .is_some_and(|m| !m.is_empty()),
            keys: obj.keys().cloned().collect(),
            ..Node::default()
        };
        if let Some(e) = obj.get("enum") {
            match e {
                Value::Array(vals) => n.enum_values = Some(vals.clone()),
                Value::Null => {}
                _ => return Err(bad(path, "enum", "an array")),
            }
        }
        if let Some(xv) = obj.get("x-kubernetes-validations") {
            match xv {
                Value::Array(vals) => {
                    n.x_validations = vals.clone();
                    n.cel_rules = vals
                        .iter()
                        .map(|v| std::sync::Arc::new(crate::cel::Rule::parse(v)))
                        .collect();
                }
                Value::Null => {}
                _ => return Err(bad(path, "x-kubernetes-validations", "an array")),
            }
        }
        if let Some(props) = obj.get("properties") {
            match props {
                Value::Object(m) => {
                    for (k, v) in m {
                        let child = Node::parse(v, &format!("{path}.properties[{k}]"))?;
                        n.properties.insert(k.clone(), child);
                    }
                }
                Value::Null => {}
                _ => return Err(bad(path, "properties", "an object")),
            }
        }
        match obj.get("additionalProperties") {
            None | Some(Value::Null) => {}
            Some(Value::Bool(b)) => n.additional = Some(Additional::Bool(*b)),
            Some(v @ Value::Object(_)) => {
                n.additional = Some(Additional::Schema(Box::new(Node::parse(
                    v,
                    &format!("{path}.additionalProperties"),
                )?)))
            }
            Some(_) => return Err(bad(path, "additionalProperties", "a boolean or a schema")),
        }
        match obj.get("items") {
            None | Some(Value::Null) => {}
            Some(v @ Value::Object(_)) => {
                n.items = Some(Box::new(Node::parse(v, &format!("{path}.items"))?))
            }
            Some(Value::Array(list)) => {
                n.items_is_array = true;
                if let Some(first) = list.first() {
                    n.items = Some(Box::new(Node::parse(first, &format!("{path}.items[0]"))?));
                }
            }
            Some(_) => return Err(bad(path, "items", "a schema")),
        }
        for (kw, target) in [("allOf", 0u8), ("anyOf", 1), ("oneOf", 2)] {
            match obj.get(kw) {
                None | Some(Value::Null) => {}
                Some(Value::Array(list)) => {
                    let mut parsed = Vec::with_capacity(list.len());
                    for (i, s) in list.iter().enumerate() {
                        parsed.push(Node::parse(s, &format!("{path}.{kw}[{i}]"))?);
                    }
                    match target {
                        0 => n.all_of = parsed,
                        1 => n.any_of = parsed,
                        _ => n.one_of = parsed,
                    }
                }
                Some(_) => return Err(bad(path, kw, "an array of schemas")),
            }
        }
        match obj.get("not") {
            None | Some(Value::Null) => {}
            Some(v) => n.not = Some(Box::new(Node::parse(v, &format!("{path}.not"))?)),
        }
        if let Some(t) = &n.ty
            && !t.is_empty()
        {
            n.types = vec![t.clone()];
        }
        if n.x_int_or_string {
            n.types = vec!["integer".to_string(), "string".to_string()];
        }
        n.vformat = n
            .format
            .as_deref()
            .and_then(|f| formats::effective_format(f, &n.types));
        if let Some(p) = &n.pattern
            && !p.is_empty()
        {
            n.regex = Some(formats::compile_go_regex(p));
        }
        Ok(n)
    }
}

fn bad(path: &str, keyword: &str, expected: &'static str) -> SchemaError {
    SchemaError::BadKeyword {
        path: path.to_string(),
        keyword: keyword.to_string(),
        expected,
    }
}

fn opt_string(
    obj: &Map<String, Value>,
    kw: &str,
    path: &str,
) -> Result<Option<String>, SchemaError> {
    match obj.get(kw) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(bad(path, kw, "a string")),
    }
}

fn opt_bool(obj: &Map<String, Value>, kw: &str, path: &str) -> Result<Option<bool>, SchemaError> {
    match obj.get(kw) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(bad(path, kw, "a boolean")),
    }
}

fn opt_int(obj: &Map<String, Value>, kw: &str, path: &str) -> Result<Option<i64>, SchemaError> {
    match obj.get(kw) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => {
            if let Some(i) = n.as_i64() {
                Ok(Some(i))
            } else if let Some(f) = n.as_f64()
                && f.fract() == 0.0
                && f.abs() < 9.0e15
            {
                #[allow(clippy::cast_possible_truncation)]
                Ok(Some(f as i64))
            } else {
                Err(bad(path, kw, "an integer"))
            }
        }
        Some(_) => Err(bad(path, kw, "an integer")),
    }
}

fn opt_num(obj: &Map<String, Value>, kw: &str, path: &str) -> Result<Option<f64>, SchemaError> {
    match obj.get(kw) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_f64()
            .map(Some)
            .ok_or_else(|| bad(path, kw, "a number")),
        Some(_) => Err(bad(path, kw, "a number")),
    }
}

fn string_list(obj: &Map<String, Value>, kw: &str, path: &str) -> Result<Vec<String>, SchemaError> {
    match obj.get(kw) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| {
                i.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| bad(path, kw, "an array of strings"))
            })
            .collect(),
        Some(_) => Err(bad(path, kw, "an array of strings")),
    }
}
