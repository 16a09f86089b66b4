//! Pruning and defaulting (apiextensions `structural/pruning` and `structural/defaulting`).

use serde_json::Value;

use crate::node::{Additional, Node};

const META_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

struct PathBuf {
    parts: Vec<String>,
}

impl PathBuf {
    fn key(&mut self, k: &str) {
        if !self.parts.is_empty() {
            self.parts.push(".".to_string());
        }
        self.parts.push(k.to_string());
    }
    fn index(&mut self, i: usize) {
        self.parts.push(format!("[{i}]"));
    }
    fn mark(&self) -> usize {
        self.parts.len()
    }
    fn reset(&mut self, m: usize) {
        self.parts.truncate(m);
    }
    fn with_key(&self, k: &str) -> String {
        if self.parts.is_empty() {
            k.to_string()
        } else {
            format!("{}.{k}", self.parts.concat())
        }
    }
}

/// Prunes `x` (the object root when `root`), returning the sorted paths of dropped fields.
pub(crate) fn prune_root(x: &mut Value, s: &Node, root: bool) -> Vec<String> {
    let mut p = PathBuf { parts: Vec::new() };
    let mut out = Vec::new();
    prune(
        x,
        Some(s),
        root || s.x_embedded_resource,
        &mut p,
        &mut out,
        true,
    );
    out.sort();
    out
}

fn prune(
    x: &mut Value,
    s: Option<&Node>,
    embedded: bool,
    p: &mut PathBuf,
    out: &mut Vec<String>,
    at_root: bool,
) {
    if let Some(node) = s
        && node.preserves_unknown()
    {
        skip_prune(x, node, embedded, p, out, at_root);
        return;
    }
    let mark = p.mark();
    match x {
        Value::Object(map) => {
            let Some(node) = s else {
                let keys: Vec<String> = map.keys().cloned().collect();
                for k in keys {
                    out.push(p.with_key(&k));
                    map.remove(&k);
                }
                return;
            };
            let keys: Vec<String> = map.keys().cloned().collect();
            for k in keys {
                if embedded && META_FIELDS.contains(&k.as_str()) {
                    if !at_root && k == "metadata" {
                        coerce_embedded_metadata(map.get_mut(&k), p, out);
                    }
                    continue;
                }
                if let Some(prop) = node.properties.get(&k) {
                    p.key(&k);
                    if let Some(v) = map.get_mut(&k) {
                        prune(v, Some(prop), prop.x_embedded_resource, p, out, false);
                    }
                    p.reset(mark);
                } else if let Some(ap) = &node.additional {
                    p.key(&k);
                    let sub = match ap {
                        Additional::Schema(sch) => Some(sch.as_ref()),
                        Additional::Bool(_) => None,
                    };
                    if let Some(v) = map.get_mut(&k) {
                        prune(
                            v,
                            sub,
                            sub.is_some_and(|n| n.x_embedded_resource),
                            p,
                            out,
                            false,
                        );
                    }
                    p.reset(mark);
                } else {
                    if !META_FIELDS.contains(&k.as_str()) || !p.parts.is_empty() {
                        out.push(p.with_key(&k));
                    }
                    map.remove(&k);
                }
            }
        }
        Value::Array(items) => {
            let item_schema = s.and_then(|n| n.items.as_deref());
            for (i, v) in items.iter_mut().enumerate() {
                p.index(i);
                prune(
                    v,
                    item_schema,
                    item_schema.is_some_and(|n| n.x_embedded_resource),
                    p,
                    out,
                    false,
                );
                p.reset(mark);
            }
        }
        _ => {}
    }
}

fn skip_prune(
    x: &mut Value,
    s: &Node,
    embedded: bool,
    p: &mut PathBuf,
    out: &mut Vec<String>,
    at_root: bool,
) {
    let mark = p.mark();
    match x {
        Value::Object(map) => {
            let keys: Vec<String> = map.keys().cloned().collect();
            for k in keys {
                if embedded && META_FIELDS.contains(&k.as_str()) {
                    if !at_root && k == "metadata" {
                        coerce_embedded_metadata(map.get_mut(&k), p, out);
                    }
                    continue;
                }
                let sub = if let Some(prop) = s.properties.get(&k) {
                    Some(Some(prop))
                } else {
                    s.additional.as_ref().map(|ap| match ap {
                        Additional::Schema(sch) => Some(sch.as_ref()),
                        Additional::Bool(_) => None,
                    })
                };
                if let Some(sub) = sub {
                    p.key(&k);
                    if let Some(v) = map.get_mut(&k) {
                        prune(
                            v,
                            sub,
                            sub.is_some_and(|n| n.x_embedded_resource),
                            p,
                            out,
                            false,
                        );
                    }
                    p.reset(mark);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = s.items.as_deref() {
                for (i, v) in items.iter_mut().enumerate() {
                    p.index(i);
                    skip_prune(
                        v,
                        item_schema,
                        item_schema.x_embedded_resource,
                        p,
                        out,
                        false,
                    );
                    p.reset(mark);
                }
            }
        }
        _ => {}
    }
}

/// Drops unknown `ObjectMeta` fields of an embedded resource (`objectmeta.Coerce`).
fn coerce_embedded_metadata(meta: Option<&mut Value>, p: &mut PathBuf, out: &mut Vec<String>) {
    let Some(Value::Object(m)) = meta else {
        return;
    };
    let mark = p.mark();
    p.key("metadata");
    let keys: Vec<String> = m.keys().cloned().collect();
    for k in keys {
        if !crate::meta::is_object_meta_field(&k) {
            out.push(p.with_key(&k));
            m.remove(&k);
        }
    }
    p.reset(mark);
}

/// `PruneNonNullableNullsWithoutDefaults`: drops `null`s of non-nullable fields without default.
pub(crate) fn prune_nulls(x: &mut Value, s: Option<&Node>) {
    match x {
        Value::Object(map) => {
            let keys: Vec<String> = map.keys().cloned().collect();
            for k in keys {
                let sub = s.and_then(|n| n.child(&k));
                let drop = map.get(&k).is_some_and(Value::is_null)
                    && sub.is_some_and(|n| !n.nullable && n.default.is_none());
                if drop {
                    map.remove(&k);
                } else if let Some(v) = map.get_mut(&k) {
                    prune_nulls(v, sub);
                }
            }
        }
        Value::Array(items) => {
            let item_schema = s.and_then(|n| n.items.as_deref());
            for v in items.iter_mut() {
                prune_nulls(v, item_schema);
            }
        }
        _ => {}
    }
}

fn non_nullable_null(x: &Value, s: Option<&Node>) -> bool {
    x.is_null() && s.is_some_and(|n| !n.nullable)
}

/// `structuraldefaulting.Default`.
pub(crate) fn default(x: &mut Value, s: Option<&Node>) {
    let Some(node) = s else {
        return;
    };
    match x {
        Value::Object(map) => {
            for (k, prop) in &node.properties {
                let Some(d) = &prop.default else {
                    continue;
                };
                let needs = match map.get(k) {
                    None => true,
                    Some(v) => non_nullable_null(v, Some(prop)),
                };
                if needs {
                    map.insert(k.clone(), d.clone());
                }
            }
            let keys: Vec<String> = map.keys().cloned().collect();
            for k in keys {
                if let Some(prop) = node.properties.get(&k) {
                    if let Some(v) = map.get_mut(&k) {
                        default(v, Some(prop));
                    }
                } else if let Some(ap) = &node.additional {
                    let sub = match ap {
                        Additional::Schema(sch) => Some(sch.as_ref()),
                        Additional::Bool(_) => None,
                    };
                    if let Some(v) = map.get_mut(&k) {
                        // A null becomes the (possibly absent) default, which is then defaulted too.
                        if non_nullable_null(v, sub) {
                            *v = sub.and_then(|n| n.default.clone()).unwrap_or(Value::Null);
                        }
                        default(v, sub);
                    }
                }
            }
        }
        Value::Array(items) => {
            let item_schema = node.items.as_deref();
            for v in items.iter_mut() {
                if non_nullable_null(v, item_schema) {
                    *v = item_schema
                        .and_then(|n| n.default.clone())
                        .unwrap_or(Value::Null);
                }
                default(v, item_schema);
            }
        }
        _ => {}
    }
}
