//! Field ownership (`managedFields`, FieldsV1), server-side apply and strategic merge patch.
//!
//! The model follows sigs.k8s.io/structured-merge-diff: a manager's set holds leaf fields and list
//! items it applied (Apply) or changed (Update); conflicts are fields another manager owns whose
//! value an apply would change.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::registry::{child_schema, items_schema, list_type};

/// A set of field paths in FieldsV1 form.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSet {
    /// The node itself is in the set (`"."`).
    pub member: bool,
    /// Children by encoded path element (`f:name`, `k:{..}`, `v:..`, `i:N`).
    pub children: BTreeMap<String, FieldSet>,
}

/// A path of encoded elements.
pub type FPath = Vec<String>;

impl FieldSet {
    /// Parse a `fieldsV1` value.
    pub fn from_v1(v: &Value) -> Self {
        let mut s = FieldSet::default();
        if let Some(m) = v.as_object() {
            if m.is_empty() {
                s.member = true;
            }
            for (k, cv) in m {
                if k == "." {
                    s.member = true;
                } else {
                    s.children.insert(k.clone(), FieldSet::from_v1(cv));
                }
            }
        }
        s
    }

    /// Render as `fieldsV1`.
    pub fn to_v1(&self) -> Value {
        let mut m = Map::new();
        if self.member && !self.children.is_empty() {
            m.insert(".".into(), json!({}));
        }
        for (k, c) in &self.children {
            m.insert(k.clone(), c.to_v1());
        }
        Value::Object(m)
    }

    /// Add a path as a member.
    pub fn insert(&mut self, path: &[String]) {
        let mut cur = self;
        for p in path {
            cur = cur.children.entry(p.clone()).or_default();
        }
        cur.member = true;
    }

    /// Is a path a member?
    pub fn contains(&self, path: &[String]) -> bool {
        let mut cur = self;
        for p in path {
            match cur.children.get(p) {
                Some(c) => cur = c,
                None => return false,
            }
        }
        cur.member
    }

    /// All member paths.
    pub fn paths(&self) -> Vec<FPath> {
        let mut out = vec![];
        self.walk(&mut vec![], &mut out);
        out
    }

    fn walk(&self, cur: &mut FPath, out: &mut Vec<FPath>) {
        if self.member && !cur.is_empty() {
            out.push(cur.clone());
        }
        for (k, c) in &self.children {
            cur.push(k.clone());
            c.walk(cur, out);
            cur.pop();
        }
    }

    /// Build from paths.
    pub fn from_paths<'a>(paths: impl IntoIterator<Item = &'a FPath>) -> Self {
        let mut s = FieldSet::default();
        for p in paths {
            s.insert(p);
        }
        s
    }

    /// Set difference.
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        let keep: Vec<FPath> = self
            .paths()
            .into_iter()
            .filter(|p| !other.contains(p))
            .collect();
        FieldSet::from_paths(&keep)
    }

    /// Set intersection.
    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let keep: Vec<FPath> = self
            .paths()
            .into_iter()
            .filter(|p| other.contains(p))
            .collect();
        FieldSet::from_paths(&keep)
    }

    /// Set union.
    pub fn union(&self, other: &FieldSet) -> FieldSet {
        let mut s = self.clone();
        for p in other.paths() {
            s.insert(&p);
        }
        s
    }

    /// No members.
    pub fn is_empty(&self) -> bool {
        self.paths().is_empty()
    }
}

/// Render a path like structured-merge-diff: `.metadata.labels.a`, `[name="x"]`, `[="v"]`.
pub fn path_string(p: &FPath) -> String {
    let mut s = String::new();
    for e in p {
        if let Some(f) = e.strip_prefix("f:") {
            s.push('.');
            s.push_str(f);
        } else if let Some(k) = e.strip_prefix("k:") {
            let parts: Vec<String> = serde_json::from_str::<Map<String, Value>>(k)
                .map(|m| m.iter().map(|(k, v)| format!("{k}={v}")).collect())
                .unwrap_or_default();
            s.push_str(&format!("[{}]", parts.join(",")));
        } else if let Some(v) = e.strip_prefix("v:") {
            s.push_str(&format!("[={v}]"));
        } else if let Some(i) = e.strip_prefix("i:") {
            s.push_str(&format!("[{i}]"));
        }
    }
    s
}

fn key_of(item: &Value, keys: &[String]) -> String {
    let mut pairs: Vec<(&String, Value)> = keys
        .iter()
        .map(|k| (k, item.get(k).cloned().unwrap_or(Value::Null)))
        .collect();
    pairs.sort_by(|a, b| a.0.cmp(b.0));
    let mut m = Map::new();
    for (k, v) in pairs {
        if !v.is_null() {
            m.insert(k.clone(), v);
        }
    }
    format!("k:{}", Value::Object(m))
}

/// Leaf paths with their values (list items map to Null markers).
pub fn flatten(v: &Value, schema: Option<&Value>) -> BTreeMap<FPath, Value> {
    let mut out = BTreeMap::new();
    flatten_rec(v, schema, &mut vec![], &mut out);
    out
}

fn flatten_rec(
    v: &Value,
    schema: Option<&Value>,
    cur: &mut FPath,
    out: &mut BTreeMap<FPath, Value>,
) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, cv) in m {
                cur.push(format!("f:{k}"));
                flatten_child(cv, child_schema(schema, k), cur, out);
                cur.pop();
            }
        }
        _ => {
            if !cur.is_empty() {
                out.insert(cur.clone(), v.clone());
            }
        }
    }
}

fn flatten_child(
    cv: &Value,
    cs: Option<&Value>,
    cur: &mut FPath,
    out: &mut BTreeMap<FPath, Value>,
) {
    match cv {
        Value::Array(items) => {
            let (lt, keys) = list_type(cs);
            match lt.as_str() {
                "set" => {
                    for it in items {
                        cur.push(format!("v:{it}"));
                        out.insert(cur.clone(), Value::Null);
                        cur.pop();
                    }
                    if items.is_empty() {
                        out.insert(cur.clone(), cv.clone());
                    }
                }
                "map" if !keys.is_empty() => {
                    for it in items {
                        cur.push(key_of(it, &keys));
                        out.insert(cur.clone(), Value::Null);
                        flatten_rec(it, items_schema(cs), cur, out);
                        cur.pop();
                    }
                    if items.is_empty() {
                        out.insert(cur.clone(), cv.clone());
                    }
                }
                _ => {
                    out.insert(cur.clone(), cv.clone());
                }
            }
        }
        _ => flatten_rec(cv, cs, cur, out),
    }
}

/// Fields that never appear in managedFields.
pub fn trim_for_tracking(obj: &Value, keep_status: bool, only_status: bool) -> Value {
    let mut o = obj.clone();
    if let Some(m) = o.as_object_mut() {
        m.remove("apiVersion");
        m.remove("kind");
        if only_status {
            m.retain(|k, _| k == "status");
        } else if !keep_status {
            m.remove("status");
        }
        if let Some(md) = m.get_mut("metadata").and_then(Value::as_object_mut) {
            for k in [
                "name",
                "namespace",
                "uid",
                "resourceVersion",
                "generation",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "managedFields",
                "selfLink",
                "generateName",
            ] {
                md.remove(k);
            }
            if md.is_empty() {
                m.remove("metadata");
            }
        }
    }
    o
}

/// Leaf set (Apply).
pub fn leaf_set(flat: &BTreeMap<FPath, Value>) -> FieldSet {
    FieldSet::from_paths(flat.keys())
}

/// Full set: leaves plus every prefix except `metadata`.
pub fn full_set(flat: &BTreeMap<FPath, Value>) -> FieldSet {
    let mut s = FieldSet::default();
    for p in flat.keys() {
        for i in 1..=p.len() {
            let pre = &p[..i];
            if pre.len() == 1 && pre[0] == "f:metadata" {
                continue;
            }
            s.insert(pre);
        }
    }
    s
}

/// Differences between two tracked objects.
pub struct Comparison {
    /// Fields added.
    pub added: FieldSet,
    /// Leaf fields whose value changed.
    pub modified: FieldSet,
    /// Fields removed.
    pub removed: FieldSet,
}

/// Compare two (trimmed) objects.
pub fn compare(old: &Value, new: &Value, schema: Option<&Value>) -> Comparison {
    let fo = flatten(old, schema);
    let fnew = flatten(new, schema);
    let full_old = full_set(&fo);
    let full_new = full_set(&fnew);
    let modified: Vec<FPath> = fnew
        .iter()
        .filter(|(p, v)| fo.get(*p).is_some_and(|ov| ov != *v))
        .map(|(p, _)| p.clone())
        .collect();
    Comparison {
        added: full_new.difference(&full_old),
        modified: FieldSet::from_paths(&modified),
        removed: full_old.difference(&full_new),
    }
}

/// One managedFields entry.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Manager name.
    pub manager: String,
    /// `Apply` or `Update`.
    pub operation: String,
    /// apiVersion.
    pub api_version: String,
    /// Time.
    pub time: String,
    /// Subresource ("" or "status").
    pub subresource: String,
    /// Owned fields.
    pub set: FieldSet,
}

/// Parse `metadata.managedFields`.
pub fn read_entries(obj: &Value) -> Vec<Entry> {
    obj["metadata"]["managedFields"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| Entry {
                    manager: e["manager"].as_str().unwrap_or_default().to_string(),
                    operation: e["operation"].as_str().unwrap_or("Update").to_string(),
                    api_version: e["apiVersion"].as_str().unwrap_or_default().to_string(),
                    time: e["time"].as_str().unwrap_or_default().to_string(),
                    subresource: e["subresource"].as_str().unwrap_or_default().to_string(),
                    set: FieldSet::from_v1(&e["fieldsV1"]),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Write `metadata.managedFields` (dropping empty entries).
pub fn write_entries(obj: &mut Value, entries: &[Entry]) {
    let arr: Vec<Value> = entries
        .iter()
        .filter(|e| !e.set.is_empty())
        .map(|e| {
            let mut v = json!({
                "manager": e.manager,
                "operation": e.operation,
                "apiVersion": e.api_version,
                "time": e.time,
                "fieldsType": "FieldsV1",
                "fieldsV1": e.set.to_v1(),
            });
            if !e.subresource.is_empty() {
                v["subresource"] = json!(e.subresource);
            }
            v
        })
        .collect();
    if let Some(md) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        if arr.is_empty() {
            md.remove("managedFields");
        } else {
            md.insert("managedFields".into(), Value::Array(arr));
        }
    }
}

/// Record an Update by `manager` that changed `old` into `new`.
pub fn track_update(
    entries: &mut Vec<Entry>,
    cmp: &Comparison,
    manager: &str,
    api_version: &str,
    subresource: &str,
    now: &str,
) {
    for e in entries.iter_mut() {
        if e.manager == manager && e.operation == "Update" && e.subresource == subresource {
            continue;
        }
        let conflicts = e.set.intersection(&cmp.modified.union(&cmp.added));
        e.set = e.set.difference(&conflicts).difference(&cmp.removed);
    }
    let changed = cmp.modified.union(&cmp.added);
    let pos = entries.iter().position(|e| {
        e.manager == manager && e.operation == "Update" && e.subresource == subresource
    });
    match pos {
        Some(i) => {
            let e = &mut entries[i];
            e.set = e.set.difference(&cmp.removed).union(&changed);
            if !changed.is_empty() {
                e.time = now.to_string();
                e.api_version = api_version.to_string();
            }
        }
        None if !changed.is_empty() => entries.push(Entry {
            manager: manager.to_string(),
            operation: "Update".into(),
            api_version: api_version.to_string(),
            time: now.to_string(),
            subresource: subresource.to_string(),
            set: changed,
        }),
        None => {}
    }
    entries.retain(|e| !e.set.is_empty());
}

/// An SSA conflict: (manager description, path).
pub type Conflicts = Vec<(String, String)>;

fn describe_manager(e: &Entry) -> String {
    if e.operation == "Update" {
        format!("\"{}\" using {} at {}", e.manager, e.api_version, e.time)
    } else {
        format!("\"{}\"", e.manager)
    }
}

/// Server-side apply of `config` onto `live` (both full objects). Returns the new object and entries.
#[allow(clippy::too_many_arguments)]
pub fn apply(
    live: &Value,
    config: &Value,
    schema: Option<&Value>,
    entries: Vec<Entry>,
    manager: &str,
    api_version: &str,
    subresource: &str,
    force: bool,
    now: &str,
) -> Result<(Value, Vec<Entry>), Conflicts> {
    let only_status = subresource == "status";
    let tracked_config = trim_for_tracking(config, true, only_status);
    let mut merged = live.clone();
    merge_into(&mut merged, &tracked_config, schema);
    let new_set = leaf_set(&flatten(&tracked_config, schema));
    let mut entries = entries;
    let idx = entries.iter().position(|e| {
        e.manager == manager && e.operation == "Apply" && e.subresource == subresource
    });
    let last_set = idx.map(|i| entries[i].set.clone()).unwrap_or_default();
    // prune fields this manager applied before and no longer applies, unless someone else owns them
    let mut others = FieldSet::default();
    for (i, e) in entries.iter().enumerate() {
        if Some(i) != idx {
            others = others.union(&e.set);
        }
    }
    let to_remove = last_set.difference(&new_set).difference(&others);
    // A field applied before as a whole (e.g. `labels: {}`) and now applied with children
    // (`labels: {a: b}`) stays: only its children are tracked now, it is not removed.
    let applied_now = new_set.paths();
    let mut removal: Vec<FPath> = to_remove
        .paths()
        .into_iter()
        .filter(|p| {
            !applied_now
                .iter()
                .any(|n| n.len() > p.len() && n.starts_with(p))
        })
        .collect();
    removal.sort_by_key(Vec::len);
    for p in removal {
        remove_path(&mut merged, &p, schema);
    }
    // conflicts against other managers
    let live_t = trim_for_tracking(live, true, false);
    let merged_t = trim_for_tracking(&merged, true, false);
    let cmp = compare(&live_t, &merged_t, schema);
    let changed = cmp.modified.union(&cmp.added);
    let mut conflicts: Conflicts = vec![];
    let mut conflict_sets: Vec<(usize, FieldSet)> = vec![];
    for (i, e) in entries.iter().enumerate() {
        if Some(i) == idx {
            continue;
        }
        let c = e.set.intersection(&changed).intersection(&new_set);
        if !c.is_empty() {
            for p in c.paths() {
                conflicts.push((describe_manager(e), path_string(&p)));
            }
            conflict_sets.push((i, c));
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(conflicts);
    }
    for (i, c) in conflict_sets {
        entries[i].set = entries[i].set.difference(&c);
    }
    for (i, e) in entries.iter_mut().enumerate() {
        if Some(i) != idx {
            e.set = e.set.difference(&cmp.removed);
        }
    }
    let entry = Entry {
        manager: manager.to_string(),
        operation: "Apply".into(),
        api_version: api_version.to_string(),
        time: now.to_string(),
        subresource: subresource.to_string(),
        set: new_set,
    };
    match idx {
        Some(i) => {
            if entries[i].set != entry.set || merged != *live {
                entries[i] = entry;
            }
        }
        None => entries.push(entry),
    }
    entries.retain(|e| !e.set.is_empty());
    Ok((merged, entries))
}

/// The SSA conflict message and causes.
pub fn conflict_error(conflicts: &Conflicts) -> crate::error::ApiError {
    let message = if conflicts.len() == 1 {
        format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            conflicts[0].0, conflicts[0].1
        )
    } else {
        let mut by: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (m, p) in conflicts {
            by.entry(m.as_str()).or_default().push(p.as_str());
        }
        let mut lines = vec![];
        for (m, ps) in by {
            lines.push(format!("conflicts with {m}:"));
            for p in ps {
                lines.push(format!("- {p}"));
            }
        }
        format!(
            "Apply failed with {} conflicts: {}",
            conflicts.len(),
            lines.join("\n")
        )
    };
    let causes: Vec<Value> = conflicts
        .iter()
        .map(|(m, p)| json!({"reason": "FieldManagerConflict", "message": format!("conflict with {m}"), "field": p}))
        .collect();
    crate::error::ApiError {
        code: 409,
        reason: "Conflict".into(),
        message,
        details: Some(json!({"causes": causes})),
    }
}

/// Structured merge of an applied configuration into an object.
pub fn merge_into(target: &mut Value, config: &Value, schema: Option<&Value>) {
    match (target.as_object_mut(), config.as_object()) {
        (Some(t), Some(c)) => {
            for (k, cv) in c {
                let cs = child_schema(schema, k);
                if cv.is_null() {
                    t.remove(k);
                    continue;
                }
                match t.get_mut(k) {
                    Some(tv) => {
                        if let (Some(ta), Some(ca)) = (tv.as_array_mut(), cv.as_array()) {
                            merge_list(ta, ca, cs);
                        } else if tv.is_object() && cv.is_object() {
                            merge_into(tv, cv, cs);
                        } else {
                            *tv = cv.clone();
                        }
                    }
                    None => {
                        t.insert(k.clone(), cv.clone());
                    }
                }
            }
        }
        _ => *target = config.clone(),
    }
}

fn merge_list(target: &mut Vec<Value>, config: &[Value], schema: Option<&Value>) {
    let (lt, keys) = list_type(schema);
    match lt.as_str() {
        "set" => {
            for c in config {
                if !target.contains(c) {
                    target.push(c.clone());
                }
            }
        }
        "map" if !keys.is_empty() => {
            for c in config {
                let k = key_of(c, &keys);
                match target.iter_mut().find(|t| key_of(t, &keys) == k) {
                    Some(t) => merge_into(t, c, items_schema(schema)),
                    None => target.push(c.clone()),
                }
            }
        }
        _ => *target = config.to_vec(),
    }
}

/// Remove a path (as produced by `flatten`) from an object.
pub fn remove_path(v: &mut Value, path: &[String], schema: Option<&Value>) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    if let Some(f) = first.strip_prefix("f:") {
        let Some(m) = v.as_object_mut() else { return };
        if rest.is_empty() {
            m.remove(f);
            return;
        }
        let cs = child_schema(schema, f);
        if let Some(child) = m.get_mut(f) {
            if let Some(arr) = child.as_array_mut() {
                remove_list_elem(arr, rest, cs);
            } else {
                remove_path(child, rest, cs);
            }
        }
    }
}

fn remove_list_elem(arr: &mut Vec<Value>, path: &[String], schema: Option<&Value>) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    if let Some(val) = first.strip_prefix("v:") {
        if let Ok(target) = serde_json::from_str::<Value>(val) {
            arr.retain(|x| *x != target);
        }
    } else if first.starts_with("k:") {
        let (_, keys) = list_type(schema);
        if rest.is_empty() {
            arr.retain(|x| key_of(x, &keys) != *first);
        } else if let Some(item) = arr.iter_mut().find(|x| key_of(x, &keys) == *first) {
            remove_path(item, rest, items_schema(schema));
        }
    }
}

/// Strategic merge patch (built-in kinds), with `$patch`, `$retainKeys`,
/// `$deleteFromPrimitiveList/` and `$setElementOrder/` directives.
pub fn strategic_merge(target: &mut Value, patch: &Value, schema: Option<&Value>) {
    let Some(p) = patch.as_object() else {
        *target = patch.clone();
        return;
    };
    if p.get("$patch").and_then(Value::as_str) == Some("replace") {
        let mut clean = patch.clone();
        strip_directives(&mut clean);
        *target = clean;
        return;
    }
    if !target.is_object() {
        *target = json!({});
    }
    let retain: Option<Vec<String>> = p.get("$retainKeys").and_then(Value::as_array).map(|a| {
        a.iter()
            .filter_map(|s| s.as_str().map(str::to_string))
            .collect()
    });
    let Some(t) = target.as_object_mut() else {
        return;
    };
    for (k, pv) in p {
        if k.starts_with("$setElementOrder/") || k == "$retainKeys" || k == "$patch" {
            continue;
        }
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(arr), Some(del)) = (
                t.get_mut(field).and_then(Value::as_array_mut),
                pv.as_array(),
            ) {
                arr.retain(|x| !del.contains(x));
            }
            continue;
        }
        let cs = child_schema(schema, k);
        if pv.is_null() {
            t.remove(k);
            continue;
        }
        if pv.is_object() && pv.get("$patch").and_then(Value::as_str) == Some("delete") {
            t.remove(k);
            continue;
        }
        match (t.get_mut(k), pv) {
            (Some(tv), Value::Object(_)) if tv.is_object() => strategic_merge(tv, pv, cs),
            (Some(tv), Value::Array(pa)) if tv.is_array() => {
                if let Some(ta) = tv.as_array_mut() {
                    smp_list(ta, pa, cs);
                }
            }
            (_, _) => {
                let mut clean = pv.clone();
                strip_directives(&mut clean);
                t.insert(k.clone(), clean);
            }
        }
    }
    if let Some(keys) = retain {
        t.retain(|k, _| keys.contains(k));
    }
}

fn smp_list(target: &mut Vec<Value>, patch: &[Value], schema: Option<&Value>) {
    let (lt, keys) = list_type(schema);
    if patch
        .iter()
        .any(|x| x.get("$patch").and_then(Value::as_str) == Some("replace"))
    {
        *target = patch
            .iter()
            .filter(|x| x.get("$patch").is_none())
            .cloned()
            .collect();
        return;
    }
    match lt.as_str() {
        "set" => {
            for x in patch {
                if !target.contains(x) {
                    target.push(x.clone());
                }
            }
        }
        "map" if !keys.is_empty() => {
            for x in patch {
                let k = key_of(x, &keys[..1]);
                let pos = target.iter().position(|t| key_of(t, &keys[..1]) == k);
                if x.get("$patch").and_then(Value::as_str) == Some("delete") {
                    if let Some(i) = pos {
                        target.remove(i);
                    }
                    continue;
                }
                match pos {
                    Some(i) => strategic_merge(&mut target[i], x, items_schema(schema)),
                    None => {
                        let mut clean = x.clone();
                        strip_directives(&mut clean);
                        target.push(clean);
                    }
                }
            }
        }
        _ => {
            let mut clean = Value::Array(patch.to_vec());
            strip_directives(&mut clean);
            if let Value::Array(a) = clean {
                *target = a;
            }
        }
    }
}

fn strip_directives(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|k, _| !k.starts_with('$'));
            for (_, c) in m.iter_mut() {
                strip_directives(c);
            }
        }
        Value::Array(a) => {
            for c in a {
                strip_directives(c);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fieldsv1_roundtrip() {
        let v = json!({"f:spec": {".": {}, "f:a": {}, "f:b": {".": {}, "f:c": {}}}, "f:metadata": {"f:labels": {"f:x": {}}}});
        assert_eq!(FieldSet::from_v1(&v).to_v1(), v);
    }

    #[test]
    fn apply_conflict_message() {
        let live = json!({"metadata": {"name": "s", "labels": {"a": "1"}}, "data": {"k": "dg=="}});
        let cfg = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "labels": {"a": "1"}}, "data": {"k": "dg=="}});
        let (obj, entries) =
            apply(&json!({}), &cfg, None, vec![], "esr", "v1", "", false, "t").unwrap();
        assert_eq!(obj["data"]["k"], "dg==");
        assert_eq!(
            entries[0].set.to_v1(),
            json!({"f:data": {"f:k": {}}, "f:metadata": {"f:labels": {"f:a": {}}}})
        );
        let cfg2 = json!({"metadata": {"name": "s", "labels": {"a": "2"}}});
        let err = apply(
            &live,
            &cfg2,
            None,
            entries.clone(),
            "other",
            "v1",
            "",
            false,
            "t",
        )
        .unwrap_err();
        let e = conflict_error(&err);
        assert_eq!(
            e.message,
            "Apply failed with 1 conflict: conflict with \"esr\": .metadata.labels.a"
        );
        // same value: shared ownership, no conflict
        let cfg3 = json!({"metadata": {"name": "s", "labels": {"a": "1"}}});
        assert!(apply(&live, &cfg3, None, entries, "other", "v1", "", false, "t").is_ok());
    }

    #[test]
    fn apply_removes_fields_no_longer_applied() {
        let cfg = json!({"metadata": {"name": "s"}, "data": {"a": "1", "b": "2"}});
        let (obj, entries) = apply(
            &json!({"metadata": {"name": "s"}}),
            &cfg,
            None,
            vec![],
            "m",
            "v1",
            "",
            false,
            "t",
        )
        .unwrap();
        let cfg2 = json!({"metadata": {"name": "s"}, "data": {"a": "1"}});
        let (obj2, _) = apply(&obj, &cfg2, None, entries, "m", "v1", "", false, "t").unwrap();
        assert_eq!(obj2["data"], json!({"a": "1"}));
    }

    #[test]
    fn apply_keeps_a_map_first_applied_empty_then_with_entries() {
        let live = json!({"metadata": {"name": "s"}});
        let cfg = json!({"metadata": {"name": "s", "labels": {}}, "data": {"a": "1"}});
        let (obj, entries) = apply(&live, &cfg, None, vec![], "m", "v1", "", false, "t").unwrap();
        let cfg2 = json!({"metadata": {"name": "s", "labels": {"x": "y"}}, "data": {"a": "1"}});
        let (obj2, entries2) =
            apply(&obj, &cfg2, None, entries, "m", "v1", "", false, "t").unwrap();
        assert_eq!(obj2["metadata"]["labels"], json!({"x": "y"}));
        // Applying without the label removes it again.
        let cfg3 = json!({"metadata": {"name": "s"}, "data": {"a": "1"}});
        let (obj3, _) = apply(&obj2, &cfg3, None, entries2, "m", "v1", "", false, "t").unwrap();
        assert_eq!(
            obj3["metadata"].get("labels").cloned().unwrap_or(json!({})),
            json!({})
        );
    }

    #[test]
    fn smp_merges_by_key() {
        let schema = json!({"properties": {"metadata": {"properties": {"ownerReferences": {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["uid"]},
            "finalizers": {"x-kubernetes-list-type": "set"}}}}});
        let mut t = json!({"metadata": {"ownerReferences": [{"uid": "1", "name": "a"}], "finalizers": ["x"]}});
        let p = json!({"metadata": {"ownerReferences": [{"uid": "2", "name": "b"}, {"uid": "1", "$patch": "delete"}], "finalizers": ["y"]}});
        strategic_merge(&mut t, &p, Some(&schema));
        assert_eq!(
            t,
            json!({"metadata": {"ownerReferences": [{"uid": "2", "name": "b"}], "finalizers": ["x", "y"]}})
        );
    }
}
