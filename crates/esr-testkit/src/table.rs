//! `meta.k8s.io/v1` Table responses (what `kubectl get` asks for with `Accept: ...;as=Table`):
//! Name, then a custom resource's `additionalPrinterColumns` (Age when it has none, as the
//! apiserver's CRD handler does), or the columns real servers print for built-in kinds plus Age.

use serde_json::{Value, json};

use crate::registry::ResourceType;

/// Does the Accept header ask for a Table?
pub fn wants_table(accept: &str) -> bool {
    accept
        .split(',')
        .next()
        .is_some_and(|first| first.contains("as=Table"))
}

/// `duration.HumanDuration` of apimachinery.
pub fn human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    let s = secs.max(0);
    let (m, h, d) = (s / 60, s / 3600, s / 86400);
    let y = d / 365;
    if s < 120 {
        format!("{s}s")
    } else if m < 10 {
        if s % 60 == 0 {
            format!("{m}m")
        } else {
            format!("{m}m{}s", s % 60)
        }
    } else if h < 3 {
        format!("{m}m")
    } else if h < 8 {
        if m % 60 == 0 {
            format!("{h}h")
        } else {
            format!("{h}h{}m", m % 60)
        }
    } else if h < 48 {
        format!("{h}h")
    } else if h < 192 {
        if h % 24 == 0 {
            format!("{d}d")
        } else {
            format!("{d}d{}h", h % 24)
        }
    } else if y < 2 {
        format!("{d}d")
    } else if y < 8 {
        let dd = d % 365;
        if dd == 0 {
            format!("{y}y")
        } else {
            format!("{y}y{dd}d")
        }
    } else {
        format!("{y}y")
    }
}

fn age(ts: &Value) -> String {
    match ts
        .as_str()
        .and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok())
    {
        Some(t) => {
            human_duration((chrono::Utc::now() - t.with_timezone(&chrono::Utc)).num_seconds())
        }
        None => "<unknown>".into(),
    }
}

/// Evaluate a kubectl-style JSONPath (`.a.b`, `[0]`, `[*]`, `[?(@.type=="Ready")]`).
pub fn jsonpath<'a>(v: &'a Value, path: &str) -> Vec<&'a Value> {
    let mut cur: Vec<&Value> = vec![v];
    let p = path.trim().trim_start_matches('{').trim_end_matches('}');
    let mut rest = p.trim_start_matches('$');
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            let key = &r[..end];
            rest = &r[end..];
            if key.is_empty() {
                continue;
            }
            cur = cur.into_iter().filter_map(|x| x.get(key)).collect();
        } else if let Some(r) = rest.strip_prefix('[') {
            let Some(end) = r.find(']') else {
                return vec![];
            };
            let inner = &r[..end];
            rest = &r[end + 1..];
            if inner == "*" {
                cur = cur
                    .into_iter()
                    .flat_map(|x| {
                        x.as_array()
                            .map(|a| a.iter().collect::<Vec<_>>())
                            .unwrap_or_default()
                    })
                    .collect();
            } else if let Ok(i) = inner.parse::<usize>() {
                cur = cur.into_iter().filter_map(|x| x.get(i)).collect();
            } else if let Some(f) = inner.strip_prefix("?(@.").and_then(|f| f.strip_suffix(')')) {
                let (k, want) = match f.split_once("==") {
                    Some((k, w)) => (k.trim(), w.trim().trim_matches('"').trim_matches('\'')),
                    None => (f.trim(), ""),
                };
                cur = cur
                    .into_iter()
                    .flat_map(|x| {
                        x.as_array()
                            .map(|a| a.iter().collect::<Vec<_>>())
                            .unwrap_or_default()
                    })
                    .filter(|item| match item.get(k) {
                        Some(Value::String(s)) => want.is_empty() || s == want,
                        Some(other) => {
                            want.is_empty()
                                || serde_json::from_str::<Value>(want).is_ok_and(|w| w == *other)
                        }
                        None => false,
                    })
                    .collect();
            } else {
                return vec![];
            }
        } else {
            return vec![];
        }
    }
    cur
}

fn cell(t: &str, v: Option<&Value>) -> Value {
    match v {
        None | Some(Value::Null) => Value::Null,
        Some(v) if t == "date" => json!(age(v)),
        Some(Value::String(s)) => json!(s),
        Some(Value::Array(a)) if t == "string" => {
            json!(
                a.iter()
                    .map(|x| x
                        .as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| x.to_string()))
                    .collect::<Vec<_>>()
                    .join(",")
            )
        }
        Some(v) if t == "string" => json!(v.to_string()),
        Some(v) => v.clone(),
    }
}

struct Col {
    def: Value,
    get: Box<dyn Fn(&Value) -> Value>,
}

fn col(
    name: &str,
    t: &str,
    desc: &str,
    priority: i64,
    get: impl Fn(&Value) -> Value + 'static,
) -> Col {
    let format = if name == "Name" { "name" } else { "" };
    Col {
        def: json!({"name": name, "type": t, "format": format, "description": desc, "priority": priority}),
        get: Box::new(get),
    }
}

fn columns(rt: &ResourceType) -> Vec<Col> {
    let mut cols = vec![col(
        "Name",
        "string",
        "Name must be unique within a namespace.",
        0,
        |o| o["metadata"]["name"].clone(),
    )];
    let n = |o: &Value, f: &str| o[f].as_object().map(|m| m.len()).unwrap_or(0);
    match (rt.group.as_str(), rt.kind.as_str()) {
        ("", "Secret") => {
            cols.push(col("Type", "string", "The type of the secret", 0, |o| {
                o["type"].clone()
            }));
            cols.push(col(
                "Data",
                "string",
                "The number of data entries",
                0,
                move |o| json!(n(o, "data")),
            ));
        }
        ("", "ConfigMap") => {
            cols.push(col(
                "Data",
                "string",
                "The number of data entries",
                0,
                move |o| json!(n(o, "data") + n(o, "binaryData")),
            ));
        }
        ("", "Namespace") => cols.push(col(
            "Status",
            "string",
            "The status of the namespace",
            0,
            |o| o["status"]["phase"].clone(),
        )),
        ("", "ServiceAccount") => {
            cols.push(col("Secrets", "string", "Number of secrets", 0, move |o| {
                json!(o["secrets"].as_array().map(Vec::len).unwrap_or(0))
            }))
        }
        _ => {}
    }
    let mut has_age = false;
    for pc in &rt.printer_columns {
        let name = pc["name"].as_str().unwrap_or_default().to_string();
        let t = pc["type"].as_str().unwrap_or("string").to_string();
        let path = pc["jsonPath"].as_str().unwrap_or_default().to_string();
        if name == "Age" {
            has_age = true;
        }
        let priority = pc["priority"].as_i64().unwrap_or(0);
        let desc = pc["description"].as_str().unwrap_or_default().to_string();
        let tt = t.clone();
        let mut c = col(&name, &t, &desc, priority, move |o| {
            cell(&tt, jsonpath(o, &path).first().copied())
        });
        if let Some(f) = pc["format"].as_str() {
            c.def["format"] = json!(f);
        }
        cols.push(c);
    }
    // Like the apiserver: a CRD's additionalPrinterColumns replace the default Age column (the
    // CRD defaulting adds Age only when none are given); built-in kinds always show Age.
    if !has_age && rt.printer_columns.is_empty() {
        cols.push(col("Age", "date", "CreationTimestamp is a timestamp representing the server time when this object was created.", 0, |o| {
            json!(age(&o["metadata"]["creationTimestamp"]))
        }));
    }
    cols
}

fn partial(o: &Value) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o["metadata"]})
}

/// A Table for objects.
pub fn table(
    rt: &ResourceType,
    items: &[&Value],
    rv: u64,
    cont: Option<&str>,
    with_columns: bool,
) -> Value {
    let cols = columns(rt);
    let rows: Vec<Value> = items
        .iter()
        .map(|o| json!({"cells": cols.iter().map(|c| (c.get)(o)).collect::<Vec<_>>(), "object": partial(o)}))
        .collect();
    let mut md = json!({"resourceVersion": rv.to_string()});
    if let Some(c) = cont {
        md["continue"] = json!(c);
    }
    let defs: Vec<Value> = if with_columns {
        cols.iter().map(|c| c.def.clone()).collect()
    } else {
        vec![]
    };
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": md, "columnDefinitions": defs, "rows": rows})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_durations() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(125), "2m5s");
        assert_eq!(human_duration(600), "10m");
        assert_eq!(human_duration(3 * 3600 + 60), "3h1m");
        assert_eq!(human_duration(50 * 3600), "2d2h");
    }

    #[test]
    fn jsonpath_filters() {
        let v = json!({"status": {"conditions": [{"type": "A", "status": "False"}, {"type": "Ready", "status": "True"}]}});
        let r = jsonpath(&v, ".status.conditions[?(@.type==\"Ready\")].status");
        assert_eq!(r, vec![&json!("True")]);
        assert_eq!(
            jsonpath(&v, ".status.conditions[0].type"),
            vec![&json!("A")]
        );
    }
}
