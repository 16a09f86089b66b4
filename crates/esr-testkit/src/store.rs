//! The object store: one global resourceVersion, BTreeMap per resource, a bounded event history
//! for watches, and all object semantics (create/update/patch/delete).

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use base64::Engine;
use serde_json::{Map, Value, json};
use tokio::sync::broadcast;

use crate::error::{ApiError, ApiResult, Cause, Subject};
use crate::managed;
use crate::registry::{Gr, Registry, ResourceType, object_root_schema};
use crate::selector::{FieldSelector, LabelSelector};

/// Watch event type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvType {
    /// ADDED
    Added,
    /// MODIFIED
    Modified,
    /// DELETED
    Deleted,
}

impl EvType {
    /// Wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            EvType::Added => "ADDED",
            EvType::Modified => "MODIFIED",
            EvType::Deleted => "DELETED",
        }
    }
}

/// A change, as kept in the history and broadcast to watchers.
#[derive(Debug)]
pub struct Event {
    /// resourceVersion of the change.
    pub rv: u64,
    /// Resource.
    pub gr: Gr,
    /// Namespace ("" for cluster scoped).
    pub ns: String,
    /// Type.
    pub typ: EvType,
    /// The object after the change (for DELETED: the last state with the new resourceVersion).
    pub object: Arc<Value>,
    /// The object before the change.
    pub old: Option<Arc<Value>>,
    /// Cached JSON of `object`.
    pub json: std::sync::OnceLock<bytes::Bytes>,
}

impl Event {
    /// Serialized object (cached).
    pub fn object_json(&self) -> bytes::Bytes {
        self.json
            .get_or_init(|| {
                bytes::Bytes::from(serde_json::to_vec(&*self.object).unwrap_or_default())
            })
            .clone()
    }
}

/// Object identity.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjKey {
    /// Resource.
    pub gr: Gr,
    /// Namespace.
    pub ns: String,
    /// Name.
    pub name: String,
}

/// Field validation directive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValidation {
    /// 400 on unknown fields.
    Strict,
    /// Warning headers, prune.
    Warn,
    /// Prune silently.
    Ignore,
}

/// Request context for writes.
#[derive(Debug, Clone)]
pub struct WriteCtx {
    /// Field manager.
    pub manager: String,
    /// fieldValidation.
    pub validation: FieldValidation,
    /// dryRun=All.
    pub dry_run: bool,
    /// SSA force.
    pub force: bool,
}

impl Default for WriteCtx {
    fn default() -> Self {
        Self {
            manager: "esr-testkit".into(),
            validation: FieldValidation::Ignore,
            dry_run: false,
            force: false,
        }
    }
}

/// Patch type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// RFC 6902.
    Json,
    /// RFC 7386.
    Merge,
    /// Strategic merge.
    Strategic,
    /// Server-side apply.
    Apply,
}

/// Delete options.
#[derive(Debug, Clone, Default)]
pub struct DeleteOpts {
    /// Background / Foreground / Orphan.
    pub propagation: Option<String>,
    /// Precondition uid.
    pub uid: Option<String>,
    /// Precondition resourceVersion.
    pub resource_version: Option<String>,
    /// dryRun.
    pub dry_run: bool,
}

/// Result of a write: the object and warnings.
#[derive(Debug, Clone)]
pub struct WriteResult {
    /// The object as stored (or as it would be with dryRun).
    pub object: Value,
    /// Warning texts.
    pub warnings: Vec<String>,
    /// Was it created (201)?
    pub created: bool,
}

/// A list page.
#[derive(Debug)]
pub struct ListPage {
    /// Items.
    pub items: Vec<Arc<Value>>,
    /// List resourceVersion.
    pub rv: u64,
    /// Continue token.
    pub cont: Option<String>,
    /// Remaining items after this page.
    pub remaining: Option<usize>,
}

/// Store configuration.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// How many events the history keeps for watch resumption.
    pub history_limit: usize,
    /// Broadcast buffer per watcher.
    pub watch_buffer: usize,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            history_limit: 200_000,
            watch_buffer: 65_536,
        }
    }
}

/// Mutable state.
pub struct Inner {
    /// Current resourceVersion.
    pub rv: u64,
    /// Served types.
    pub registry: Registry,
    objects: HashMap<Gr, BTreeMap<(String, String), Arc<Value>>>,
    history: VecDeque<Arc<Event>>,
    /// Events with rv <= compacted are no longer available.
    pub compacted: u64,
    owner_index: HashMap<String, BTreeSet<ObjKey>>,
    uid_index: HashMap<String, ObjKey>,
}

/// The store.
pub struct Store {
    inner: Mutex<Inner>,
    tx: broadcast::Sender<Arc<Event>>,
    cfg: StoreConfig,
}

/// Now, RFC 3339 seconds.
pub fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn md(v: &Value) -> &Value {
    &v["metadata"]
}

fn md_mut(v: &mut Value) -> &mut Map<String, Value> {
    if !v["metadata"].is_object() {
        v["metadata"] = json!({});
    }
    match &mut v["metadata"] {
        Value::Object(m) => m,
        _ => unreachable!("metadata was just set to an object"),
    }
}

fn str_of<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or_default()
}

fn finalizers(v: &Value) -> Vec<String> {
    md(v)["finalizers"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Owner uids of an object.
pub fn owner_uids(v: &Value) -> Vec<String> {
    md(v)["ownerReferences"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|o| o["uid"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn random_suffix() -> String {
    use rand::Rng;
    const ALPHA: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..5)
        .map(|_| ALPHA[rng.random_range(0..ALPHA.len())] as char)
        .collect()
}

fn go_string_slice(v: &[String]) -> String {
    let q: Vec<String> = v.iter().map(|s| format!("{s:?}")).collect();
    format!("[]string{{{}}}", q.join(", "))
}

impl Store {
    /// A store with the built-in types and the default namespaces.
    pub fn new(cfg: StoreConfig) -> Arc<Self> {
        let (tx, _) = broadcast::channel(cfg.watch_buffer.max(16));
        let s = Arc::new(Self {
            inner: Mutex::new(Inner {
                rv: 0,
                registry: Registry::builtin(),
                objects: HashMap::new(),
                history: VecDeque::new(),
                compacted: 0,
                owner_index: HashMap::new(),
                uid_index: HashMap::new(),
            }),
            tx,
            cfg,
        });
        let ctx = WriteCtx::default();
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            let _ = s.create_by_gvr(
                "",
                "v1",
                "namespaces",
                "",
                json!({"metadata": {"name": ns}}),
                &ctx,
            );
        }
        s
    }

    /// Lock the state.
    pub fn lock(&self) -> MutexGuard<'_, Inner> {
        match self.inner.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Subscribe to all future events.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.tx.subscribe()
    }

    /// Look up a type.
    pub fn resource(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceType>> {
        self.lock().registry.get(group, version, plural)
    }

    /// Registry snapshot.
    pub fn registry(&self) -> Registry {
        self.lock().registry.clone()
    }

    /// Current resourceVersion.
    pub fn current_rv(&self) -> u64 {
        self.lock().rv
    }

    /// Drop the whole event history: older resourceVersions now give 410.
    pub fn expire_history(&self) {
        let mut g = self.lock();
        g.compacted = g.rv;
        g.history.clear();
    }

    fn commit(
        &self,
        g: &mut Inner,
        key: &ObjKey,
        typ: EvType,
        mut obj: Value,
        old: Option<Arc<Value>>,
    ) -> Arc<Value> {
        g.rv += 1;
        let rv = g.rv;
        md_mut(&mut obj).insert("resourceVersion".into(), json!(rv.to_string()));
        let obj = Arc::new(obj);
        let map = g.objects.entry(key.gr.clone()).or_default();
        let k = (key.ns.clone(), key.name.clone());
        if let Some(o) = &old {
            for u in owner_uids(o) {
                if let Some(set) = g.owner_index.get_mut(&u) {
                    set.remove(key);
                    if set.is_empty() {
                        g.owner_index.remove(&u);
                    }
                }
            }
        }
        match typ {
            EvType::Deleted => {
                map.remove(&k);
                if let Some(u) = md(&obj)["uid"].as_str() {
                    g.uid_index.remove(u);
                }
            }
            _ => {
                map.insert(k, Arc::clone(&obj));
                if let Some(u) = md(&obj)["uid"].as_str() {
                    g.uid_index.insert(u.to_string(), key.clone());
                }
                for u in owner_uids(&obj) {
                    g.owner_index.entry(u).or_default().insert(key.clone());
                }
            }
        }
        let ev = Arc::new(Event {
            rv,
            gr: key.gr.clone(),
            ns: key.ns.clone(),
            typ,
            object: Arc::clone(&obj),
            old,
            json: std::sync::OnceLock::new(),
        });
        g.history.push_back(Arc::clone(&ev));
        while g.history.len() > self.cfg.history_limit {
            if let Some(e) = g.history.pop_front() {
                g.compacted = e.rv;
            }
        }
        let _ = self.tx.send(ev);
        obj
    }

    fn get_locked(g: &Inner, gr: &Gr, ns: &str, name: &str) -> Option<Arc<Value>> {
        g.objects
            .get(gr)
            .and_then(|m| m.get(&(ns.to_string(), name.to_string())))
            .cloned()
    }

    /// Does an object with this uid exist?
    pub fn uid_exists(&self, uid: &str) -> bool {
        self.lock().uid_index.contains_key(uid)
    }

    /// The key of the object with this uid.
    pub fn key_by_uid(&self, uid: &str) -> Option<ObjKey> {
        self.lock().uid_index.get(uid).cloned()
    }

    /// Dependents of an owner uid.
    pub fn dependents(&self, uid: &str) -> Vec<ObjKey> {
        self.lock()
            .owner_index
            .get(uid)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Get by key.
    pub fn get_key(&self, key: &ObjKey) -> Option<Arc<Value>> {
        let g = self.lock();
        Self::get_locked(&g, &key.gr, &key.ns, &key.name)
    }

    /// All object keys in a namespace.
    pub fn keys_in_namespace(&self, ns: &str) -> Vec<ObjKey> {
        let g = self.lock();
        let mut out = vec![];
        for (gr, m) in &g.objects {
            for (ns2, name) in m.keys() {
                if ns2 == ns {
                    out.push(ObjKey {
                        gr: gr.clone(),
                        ns: ns2.clone(),
                        name: name.clone(),
                    });
                }
            }
        }
        out
    }

    /// All objects with ownerReferences or deletion in progress (GC resync).
    pub fn all_keys(&self) -> Vec<ObjKey> {
        let g = self.lock();
        g.objects
            .iter()
            .flat_map(|(gr, m)| {
                m.keys().map(move |(ns, n)| ObjKey {
                    gr: gr.clone(),
                    ns: ns.clone(),
                    name: n.clone(),
                })
            })
            .collect()
    }

    /// Get an object.
    pub fn get(&self, rt: &ResourceType, ns: &str, name: &str) -> ApiResult<Value> {
        let g = self.lock();
        Self::get_locked(&g, &rt.gr(), ns, name)
            .map(|o| for_version(&o, rt))
            .ok_or_else(|| ApiError::not_found(&rt.subject(), name))
    }

    /// List objects.
    pub fn list(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        labels: &LabelSelector,
        fields: &FieldSelector,
        limit: Option<usize>,
        cont: Option<&str>,
    ) -> ApiResult<ListPage> {
        // A chunked list is one list at the first chunk's resourceVersion: every chunk reports it
        // (the continue token carries it), so a watch started from the list's resourceVersion
        // replays every change made while the chunks were read. Reporting the current
        // resourceVersion instead would lose those changes for good. The items are the current
        // ones (this store keeps no past states), which a watch from that version converges from.
        let mut list_rv: Option<u64> = None;
        let start: Option<(String, String)> = match cont {
            Some(c) if !c.is_empty() => {
                let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .decode(c)
                    .ok()
                    .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
                    .ok_or_else(|| {
                        ApiError::bad_request("continue key is not valid: illegal base64 data")
                    })?;
                list_rv = raw.get("rv").and_then(Value::as_u64);
                Some((
                    str_of(&raw, "ns").to_string(),
                    str_of(&raw, "name").to_string(),
                ))
            }
            _ => None,
        };
        let g = self.lock();
        if let Some(r) = list_rv
            && r < g.compacted
        {
            return Err(ApiError::expired(
                "The provided continue parameter is too old to display a consistent list result. \
                 You can start a new list without the continue parameter.",
            ));
        }
        let rv = list_rv.unwrap_or(g.rv);
        let Some(map) = g.objects.get(&rt.gr()) else {
            return Ok(ListPage {
                items: vec![],
                rv,
                cont: None,
                remaining: None,
            });
        };
        let range: Box<dyn Iterator<Item = (&(String, String), &Arc<Value>)>> = match (&start, ns) {
            (Some(s), _) => Box::new(map.range((
                std::ops::Bound::Excluded(s.clone()),
                std::ops::Bound::Unbounded,
            ))),
            (None, Some(n)) if !n.is_empty() => Box::new(
                map.range((n.to_string(), String::new())..)
                    .take_while(move |((k, _), _)| k == n),
            ),
            _ => Box::new(map.iter()),
        };
        let mut items = vec![];
        let mut cont_out = None;
        let mut remaining = 0usize;
        let mut last: Option<(String, String)> = None;
        for ((ons, oname), obj) in range {
            if let Some(n) = ns
                && !n.is_empty()
                && ons != n
            {
                continue;
            }
            if !labels.matches(md(obj)["labels"].as_object()) || !fields.matches(obj) {
                continue;
            }
            if let Some(l) = limit
                && l > 0
                && items.len() >= l
            {
                remaining += 1;
                continue;
            }
            items.push(Arc::clone(obj));
            last = Some((ons.clone(), oname.clone()));
        }
        if remaining > 0
            && let Some((lns, lname)) = last
        {
            let tok = json!({"rv": rv, "ns": lns, "name": lname}).to_string();
            cont_out = Some(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(tok));
        }
        drop(g);
        let items = if items
            .first()
            .is_some_and(|o| str_of(o, "apiVersion") != rt.api_version())
        {
            items
                .into_iter()
                .map(|o| Arc::new(for_version(&o, rt)))
                .collect()
        } else {
            items
        };
        Ok(ListPage {
            items,
            rv,
            cont: cont_out,
            remaining: if remaining > 0 { Some(remaining) } else { None },
        })
    }

    /// Start a watch: the events to send first, a receiver for the rest, and the current rv.
    /// `rv` None/0 or `initial` → synthetic ADDED events for current objects.
    #[allow(clippy::type_complexity)]
    pub fn watch(
        &self,
        rt: &ResourceType,
        rv: Option<u64>,
        initial: bool,
    ) -> ApiResult<(
        Vec<(EvType, Arc<Value>, Option<Arc<Value>>)>,
        broadcast::Receiver<Arc<Event>>,
        u64,
    )> {
        let g = self.lock();
        let gr = rt.gr();
        let mut first = vec![];
        match rv {
            Some(r) if r > 0 && !initial => {
                if r < g.compacted {
                    return Err(ApiError::expired(format!(
                        "too old resource version: {r} ({})",
                        g.compacted
                    )));
                }
                for e in g.history.iter().filter(|e| e.rv > r && e.gr == gr) {
                    first.push((e.typ, Arc::clone(&e.object), e.old.clone()));
                }
            }
            _ => {
                if let Some(m) = g.objects.get(&gr) {
                    for o in m.values() {
                        first.push((EvType::Added, Arc::clone(o), None));
                    }
                }
            }
        }
        let rx = self.tx.subscribe();
        Ok((first, rx, g.rv))
    }

    /// Create by group/version/plural (internal callers).
    pub fn create_by_gvr(
        &self,
        group: &str,
        version: &str,
        plural: &str,
        ns: &str,
        body: Value,
        ctx: &WriteCtx,
    ) -> ApiResult<WriteResult> {
        let rt = self
            .resource(group, version, plural)
            .ok_or_else(ApiError::path_not_found)?;
        self.create(&rt, ns, body, ctx)
    }

    /// Create.
    pub fn create(
        &self,
        rt: &ResourceType,
        ns: &str,
        body: Value,
        ctx: &WriteCtx,
    ) -> ApiResult<WriteResult> {
        let mut g = self.lock();
        self.create_locked(&mut g, rt, ns, body, ctx, None)
    }

    fn check_body_kind(rt: &ResourceType, body: &mut Value) -> ApiResult<()> {
        if !body.is_object() {
            return Err(ApiError::bad_request(
                "the body of the request must be a JSON object",
            ));
        }
        let av = str_of(body, "apiVersion").to_string();
        let kind = str_of(body, "kind").to_string();
        if (!av.is_empty() && av != rt.api_version()) || (!kind.is_empty() && kind != rt.kind) {
            let same_group = av.split_once('/').map(|(g, _)| g).unwrap_or("") == rt.group;
            if !(same_group && kind == rt.kind) {
                return Err(ApiError::bad_request(format!(
                    "the API version in the data ({av}) does not match the expected API version ({})",
                    rt.api_version()
                )));
            }
        }
        body["apiVersion"] = json!(rt.api_version());
        body["kind"] = json!(rt.kind);
        Ok(())
    }

    fn check_namespace(g: &Inner, rt: &ResourceType, ns: &str, name: &str) -> ApiResult<()> {
        if !rt.namespaced {
            return Ok(());
        }
        let nsgr = Gr {
            group: String::new(),
            plural: "namespaces".into(),
        };
        match Self::get_locked(g, &nsgr, "", ns) {
            None => Err(ApiError::not_found(
                &Subject {
                    group: "",
                    plural: "namespaces",
                    kind: "Namespace",
                },
                ns,
            )),
            Some(n) if !md(&n)["deletionTimestamp"].is_null() => {
                Err(ApiError::namespace_terminating(&rt.plural, name, ns))
            }
            Some(_) => Ok(()),
        }
    }

    fn create_locked(
        &self,
        g: &mut Inner,
        rt: &ResourceType,
        ns: &str,
        mut obj: Value,
        ctx: &WriteCtx,
        entries: Option<Vec<managed::Entry>>,
    ) -> ApiResult<WriteResult> {
        if rt.create_only {
            return Err(ApiError::method_not_allowed("POST", &rt.plural));
        }
        Self::check_body_kind(rt, &mut obj)?;
        let subject = rt.subject();
        // metadata
        {
            let m = md_mut(&mut obj);
            let body_ns = m
                .get("namespace")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            if rt.namespaced {
                if !body_ns.is_empty() && body_ns != ns {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                m.insert("namespace".into(), json!(ns));
            } else {
                m.remove("namespace");
            }
            let name = m
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            if name.is_empty() {
                let gen_name = m
                    .get("generateName")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                if gen_name.is_empty() {
                    return Err(ApiError::invalid(
                        &subject,
                        "",
                        vec![Cause::new(
                            "FieldValueRequired",
                            "Required value: name or generateName is required",
                            "metadata.name",
                        )],
                    ));
                }
                let mut candidate = format!("{gen_name}{}", random_suffix());
                while Self::get_locked(g, &rt.gr(), ns, &candidate).is_some() {
                    candidate = format!("{gen_name}{}", random_suffix());
                }
                m.insert("name".into(), json!(candidate));
            }
        }
        let name = str_of(md(&obj), "name").to_string();
        let name_causes = crate::object_validation::name(rt, &name);
        if !name_causes.is_empty() {
            return Err(ApiError::invalid(&subject, &name, name_causes));
        }
        Self::check_namespace(g, rt, ns, &name)?;
        if Self::get_locked(g, &rt.gr(), ns, &name).is_some() {
            return Err(ApiError::already_exists(&subject, &name));
        }
        // reset system fields
        {
            let m = md_mut(&mut obj);
            for k in [
                "resourceVersion",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "selfLink",
                "managedFields",
            ] {
                m.remove(k);
            }
            m.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
            m.insert("creationTimestamp".into(), json!(now()));
            if rt.has_generation {
                m.insert("generation".into(), json!(1));
            } else {
                m.remove("generation");
            }
        }
        if rt.status_subresource
            && rt.custom
            && let Some(o) = obj.as_object_mut()
        {
            o.remove("status");
        }
        let warnings = self.type_prepare(g, rt, None, &mut obj, ctx)?;
        // managedFields
        let now_s = now();
        let entries = match entries {
            Some(e) => e,
            None => {
                let mut e = vec![];
                let schema = object_root_schema(rt);
                let cmp = managed::compare(
                    &json!({}),
                    &managed::trim_for_tracking(&obj, !rt.status_subresource, false),
                    Some(&schema),
                );
                managed::track_update(&mut e, &cmp, &ctx.manager, &rt.api_version(), "", &now_s);
                e
            }
        };
        managed::write_entries(&mut obj, &entries);
        if rt.kind == "CustomResourceDefinition" {
            self.register_crd(g, &mut obj, ctx.dry_run)?;
        }
        if ctx.dry_run {
            return Ok(WriteResult {
                object: obj,
                warnings,
                created: true,
            });
        }
        let key = ObjKey {
            gr: rt.gr(),
            ns: if rt.namespaced {
                ns.to_string()
            } else {
                String::new()
            },
            name,
        };
        let stored = self.commit(g, &key, EvType::Added, obj, None);
        Ok(WriteResult {
            object: for_version(&stored, rt),
            warnings,
            created: true,
        })
    }

    /// Type-specific preparation and validation (shared by create and update).
    fn type_prepare(
        &self,
        _g: &Inner,
        rt: &ResourceType,
        old: Option<&Value>,
        obj: &mut Value,
        ctx: &WriteCtx,
    ) -> ApiResult<Vec<String>> {
        let name = str_of(md(obj), "name").to_string();
        let subject = rt.subject();
        let mut warnings = vec![];
        // unknown fields
        let mut unknown = unknown_metadata_fields(obj);
        if rt.custom {
            if let Some(c) = &rt.compiled {
                let mut pruned = c.prune(obj);
                unknown.append(&mut pruned);
            }
        } else {
            unknown.append(&mut unknown_top_level(rt, obj));
        }
        if !unknown.is_empty() {
            match ctx.validation {
                FieldValidation::Strict => {
                    let parts: Vec<String> = unknown
                        .iter()
                        .map(|u| format!("unknown field \"{u}\""))
                        .collect();
                    return Err(ApiError::bad_request(format!(
                        "{} in version \"{}\" cannot be handled as a {}: strict decoding error: {}",
                        rt.kind,
                        rt.version,
                        rt.kind,
                        parts.join(", ")
                    )));
                }
                FieldValidation::Warn => {
                    for u in &unknown {
                        warnings.push(format!("unknown field \"{u}\""));
                    }
                }
                FieldValidation::Ignore => {}
            }
        }
        match (rt.group.as_str(), rt.kind.as_str()) {
            ("", "Secret") => {
                if let Some(sd) = obj.get("stringData").and_then(Value::as_object).cloned() {
                    if !obj["data"].is_object() {
                        obj["data"] = json!({});
                    }
                    for (k, v) in sd {
                        let s = v.as_str().unwrap_or_default();
                        obj["data"][k.as_str()] =
                            json!(base64::engine::general_purpose::STANDARD.encode(s));
                    }
                }
                if let Some(o) = obj.as_object_mut() {
                    o.remove("stringData");
                    if o.get("type")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .is_empty()
                    {
                        o.insert("type".into(), json!("Opaque"));
                    }
                }
                if let Some(data) = obj.get("data").and_then(Value::as_object) {
                    for (k, v) in data {
                        let ok = v.as_str().is_some_and(|s| {
                            base64::engine::general_purpose::STANDARD.decode(s).is_ok()
                        });
                        if !ok {
                            return Err(ApiError::bad_request(format!(
                                "Secret in version \"v1\" cannot be handled as a Secret: illegal base64 data at input byte 0 (data[{k}])"
                            )));
                        }
                    }
                }
                if let Some(old) = old {
                    if old["type"] != obj["type"] {
                        return Err(ApiError::invalid(
                            &subject,
                            &name,
                            vec![Cause::new(
                                "FieldValueInvalid",
                                format!(
                                    "Invalid value: \"{}\": field is immutable",
                                    str_of(obj, "type")
                                ),
                                "type",
                            )],
                        ));
                    }
                    immutable_check(rt, old, obj, &["data"])?;
                }
            }
            ("", "ConfigMap") => {
                if let Some(old) = old {
                    immutable_check(rt, old, obj, &["data", "binaryData"])?;
                }
            }
            ("", "Namespace") => {
                let m = md_mut(obj);
                let labels = m.entry("labels").or_insert(json!({}));
                if let Some(l) = labels.as_object_mut() {
                    l.insert("kubernetes.io/metadata.name".into(), json!(name));
                }
                if old.is_none() {
                    obj["spec"] = json!({"finalizers": ["kubernetes"]});
                    obj["status"] = json!({"phase": "Active"});
                }
            }
            ("apiextensions.k8s.io", "CustomResourceDefinition") => {
                if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
                    spec.entry("conversion")
                        .or_insert(json!({"strategy": "None"}));
                }
            }
            _ => {}
        }
        let object_causes = crate::object_validation::validate(rt, obj);
        if !object_causes.is_empty() {
            return Err(ApiError::invalid(&subject, &name, object_causes));
        }
        if rt.custom
            && let Some(c) = &rt.compiled
        {
            c.apply_defaults(obj);
            let errs = c.validate(obj, old);
            if !errs.is_empty() {
                let causes = errs
                    .into_iter()
                    .map(|e| Cause::new(&e.reason, e.message, e.field))
                    .collect();
                return Err(ApiError::invalid(&subject, &name, causes));
            }
        }
        if let Some(refs) = md(obj)["ownerReferences"].as_array() {
            let mut causes = vec![];
            for (i, r) in refs.iter().enumerate() {
                for f in ["apiVersion", "kind", "name", "uid"] {
                    if str_of(r, f).is_empty() {
                        causes.push(Cause::new(
                            "FieldValueInvalid",
                            format!("Invalid value: \"\": {f} must not be empty"),
                            format!("metadata.ownerReferences[{i}].{f}"),
                        ));
                    }
                }
            }
            if refs
                .iter()
                .filter(|r| r["controller"].as_bool() == Some(true))
                .count()
                > 1
            {
                causes.push(Cause::new(
                    "FieldValueInvalid",
                    "Invalid value: []v1.OwnerReference{...}: Only one reference can have Controller set to true",
                    "metadata.ownerReferences",
                ));
            }
            if !causes.is_empty() {
                return Err(ApiError::invalid(&subject, &name, causes));
            }
        }
        Ok(warnings)
    }

    fn register_crd(&self, g: &mut Inner, crd: &mut Value, dry_run: bool) -> ApiResult<()> {
        let name = str_of(md(crd), "name").to_string();
        let types =
            crate::registry::crd_types(crd).map_err(|c| crate::registry::invalid_crd(&name, c))?;
        let spec = &crd["spec"];
        let group = str_of(spec, "group").to_string();
        let plural = str_of(&spec["names"], "plural").to_string();
        let storage: Vec<String> = spec["versions"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter(|v| v["storage"].as_bool() == Some(true))
                    .map(|v| str_of(v, "name").to_string())
                    .collect()
            })
            .unwrap_or_default();
        let mut names = spec["names"].clone();
        if names["singular"].is_null() {
            names["singular"] = json!(str_of(&spec["names"], "kind").to_lowercase());
        }
        if names["listKind"].is_null() {
            names["listKind"] = json!(format!("{}List", str_of(&spec["names"], "kind")));
        }
        let t = now();
        crd["status"] = json!({
            "acceptedNames": names,
            "conditions": [
                {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": t},
                {"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": t}
            ],
            "storedVersions": storage,
        });
        if !dry_run {
            g.registry.set_crd_types(&group, &plural, types);
        }
        Ok(())
    }

    /// Update (PUT).
    pub fn update(
        &self,
        rt: &ResourceType,
        ns: &str,
        name: &str,
        mut body: Value,
        sub: &str,
        ctx: &WriteCtx,
    ) -> ApiResult<WriteResult> {
        Self::check_body_kind(rt, &mut body)?;
        let mut g = self.lock();
        let ns = if rt.namespaced { ns } else { "" };
        let old = Self::get_locked(&g, &rt.gr(), ns, name)
            .ok_or_else(|| ApiError::not_found(&rt.subject(), name))?;
        let body_name = str_of(md(&body), "name");
        if !body_name.is_empty() && body_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        let rv = str_of(md(&body), "resourceVersion").to_string();
        if rv.is_empty() {
            if rt.custom {
                return Err(ApiError::invalid(
                    &rt.subject(),
                    name,
                    vec![Cause::new(
                        "FieldValueInvalid",
                        "Invalid value: 0x0: must be specified for an update",
                        "metadata.resourceVersion",
                    )],
                ));
            }
        } else if rv != str_of(md(&old), "resourceVersion") {
            return Err(ApiError::conflict_modified(&rt.subject(), name));
        }
        self.finish_update(&mut g, rt, &old, body, sub, ctx, None)
    }

    /// Patch.
    #[allow(clippy::too_many_arguments)]
    pub fn patch(
        &self,
        rt: &ResourceType,
        ns: &str,
        name: &str,
        pt: PatchType,
        patch: Value,
        sub: &str,
        ctx: &WriteCtx,
    ) -> ApiResult<WriteResult> {
        let mut g = self.lock();
        let ns = if rt.namespaced { ns } else { "" };
        let old = Self::get_locked(&g, &rt.gr(), ns, name);
        let schema = object_root_schema(rt);
        let old = match old {
            Some(o) => o,
            None if pt == PatchType::Apply && sub.is_empty() => {
                let mut cfg = patch;
                Self::check_body_kind(rt, &mut cfg)?;
                let bn = str_of(md(&cfg), "name");
                if !bn.is_empty() && bn != name {
                    return Err(ApiError::bad_request(format!(
                        "the name of the object ({bn}) does not match the name on the URL ({name})"
                    )));
                }
                let base = json!({"apiVersion": rt.api_version(), "kind": rt.kind, "metadata": {"name": name, "namespace": ns}});
                let (obj, entries) = managed::apply(
                    &base,
                    &cfg,
                    Some(&schema),
                    vec![],
                    &ctx.manager,
                    &rt.api_version(),
                    "",
                    ctx.force,
                    &now(),
                )
                .map_err(|c| managed::conflict_error(&c))?;
                return self.create_locked(&mut g, rt, ns, obj, ctx, Some(entries));
            }
            None => return Err(ApiError::not_found(&rt.subject(), name)),
        };
        let current = for_version(&old, rt);
        let (new, entries) = match pt {
            PatchType::Json => {
                let p: json_patch::Patch = serde_json::from_value(patch)
                    .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
                let mut v = current.clone();
                json_patch::patch(&mut v, &p).map_err(|e| {
                    ApiError::new(
                        422,
                        "Invalid",
                        format!(
                            "the server rejected our request due to an error in our request: {e}"
                        ),
                    )
                })?;
                (v, None)
            }
            PatchType::Merge => {
                if !patch.is_object() {
                    return Err(ApiError::bad_request("the patch must be a JSON object"));
                }
                let mut v = current.clone();
                json_patch::merge(&mut v, &patch);
                (v, None)
            }
            PatchType::Strategic => {
                if rt.custom {
                    return Err(ApiError::unsupported_media_type(
                        "application/strategic-merge-patch+json",
                    ));
                }
                let mut v = current.clone();
                managed::strategic_merge(&mut v, &patch, Some(&schema));
                (v, None)
            }
            PatchType::Apply => {
                let mut cfg = patch;
                Self::check_body_kind(rt, &mut cfg)?;
                let bn = str_of(md(&cfg), "name");
                if !bn.is_empty() && bn != name {
                    return Err(ApiError::bad_request(format!(
                        "the name of the object ({bn}) does not match the name on the URL ({name})"
                    )));
                }
                let entries = managed::read_entries(&current);
                let mut live = current.clone();
                if let Some(m) = live.get_mut("metadata").and_then(Value::as_object_mut) {
                    m.remove("managedFields");
                }
                let (obj, entries) = managed::apply(
                    &live,
                    &cfg,
                    Some(&schema),
                    entries,
                    &ctx.manager,
                    &rt.api_version(),
                    sub,
                    ctx.force,
                    &now(),
                )
                .map_err(|c| managed::conflict_error(&c))?;
                (obj, Some(entries))
            }
        };
        let prv = str_of(md(&new), "resourceVersion").to_string();
        if !prv.is_empty() && prv != str_of(md(&old), "resourceVersion") {
            return Err(ApiError::conflict_modified(&rt.subject(), name));
        }
        self.finish_update(&mut g, rt, &old, new, sub, ctx, entries)
    }

    #[allow(clippy::too_many_arguments)]
    fn finish_update(
        &self,
        g: &mut Inner,
        rt: &ResourceType,
        old: &Arc<Value>,
        mut new: Value,
        sub: &str,
        ctx: &WriteCtx,
        entries: Option<Vec<managed::Entry>>,
    ) -> ApiResult<WriteResult> {
        let name = str_of(md(old), "name").to_string();
        let subject = rt.subject();
        if !new.is_object() {
            return Err(ApiError::bad_request("the object must be a JSON object"));
        }
        new["apiVersion"] = json!(rt.api_version());
        new["kind"] = json!(rt.kind);
        let old_v: &Value = old;
        if sub == "status" {
            let status = new.get("status").cloned();
            let mut base = (**old).clone();
            if let Some(o) = base.as_object_mut() {
                match status {
                    Some(s) => {
                        o.insert("status".into(), s);
                    }
                    None => {
                        o.remove("status");
                    }
                }
            }
            base["apiVersion"] = json!(rt.api_version());
            new = base;
        } else if rt.status_subresource
            && let Some(o) = new.as_object_mut()
        {
            match old_v.get("status") {
                Some(s) => {
                    o.insert("status".into(), s.clone());
                }
                None => {
                    o.remove("status");
                }
            }
        }
        // system metadata is kept from the stored object
        {
            let om = md(old_v).clone();
            let m = md_mut(&mut new);
            for k in [
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
                "name",
                "namespace",
                "resourceVersion",
            ] {
                match om.get(k) {
                    Some(v) => {
                        m.insert(k.into(), v.clone());
                    }
                    None => {
                        m.remove(k);
                    }
                }
            }
            m.remove("managedFields");
        }
        let warnings = self.type_prepare(g, rt, Some(old_v), &mut new, ctx)?;
        // finalizers cannot be added while deleting
        if !md(old_v)["deletionTimestamp"].is_null() {
            let oldf = finalizers(old_v);
            let added: Vec<String> = finalizers(&new)
                .into_iter()
                .filter(|f| !oldf.contains(f))
                .collect();
            if !added.is_empty() {
                let msg = format!(
                    "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers {}",
                    go_string_slice(&added)
                );
                return Err(ApiError::invalid(
                    &subject,
                    &name,
                    vec![
                        Cause::new("FieldValueForbidden", msg.clone(), "metadata.finalizers"),
                        Cause::new("FieldValueForbidden", msg, "metadata.finalizers"),
                    ],
                ));
            }
        }
        if rt.has_generation && spec_changed(old_v, &new) {
            let gen_n = md(old_v)["generation"].as_i64().unwrap_or(1) + 1;
            md_mut(&mut new).insert("generation".into(), json!(gen_n));
        }
        let schema = object_root_schema(rt);
        let entries = match entries {
            Some(e) => e,
            None => {
                let mut e = managed::read_entries(old_v);
                let only_status = sub == "status";
                let keep_status = only_status || !rt.status_subresource;
                let cmp = managed::compare(
                    &managed::trim_for_tracking(old_v, keep_status, only_status),
                    &managed::trim_for_tracking(&new, keep_status, only_status),
                    Some(&schema),
                );
                managed::track_update(&mut e, &cmp, &ctx.manager, &rt.api_version(), sub, &now());
                e
            }
        };
        managed::write_entries(&mut new, &entries);
        // no-op?
        if strip_managed(&new) == strip_managed(&for_version(old_v, rt)) {
            return Ok(WriteResult {
                object: for_version(old_v, rt),
                warnings,
                created: false,
            });
        }
        if rt.kind == "CustomResourceDefinition" {
            self.register_crd(g, &mut new, ctx.dry_run)?;
        }
        if ctx.dry_run {
            return Ok(WriteResult {
                object: new,
                warnings,
                created: false,
            });
        }
        let key = ObjKey {
            gr: rt.gr(),
            ns: str_of(md(old_v), "namespace").to_string(),
            name,
        };
        let deleting = !md(&new)["deletionTimestamp"].is_null();
        let typ = if deleting && finalizers(&new).is_empty() {
            EvType::Deleted
        } else {
            EvType::Modified
        };
        if typ == EvType::Deleted && rt.kind == "CustomResourceDefinition" {
            self.drop_crd_instances(g, &new);
        }
        let stored = self.commit(g, &key, typ, new, Some(Arc::clone(old)));
        Ok(WriteResult {
            object: for_version(&stored, rt),
            warnings,
            created: false,
        })
    }

    fn drop_crd_instances(&self, g: &mut Inner, crd: &Value) {
        let group = str_of(&crd["spec"], "group").to_string();
        let plural = str_of(&crd["spec"]["names"], "plural").to_string();
        let gr = Gr {
            group: group.clone(),
            plural: plural.clone(),
        };
        let objs: Vec<(ObjKey, Arc<Value>)> = g
            .objects
            .get(&gr)
            .map(|m| {
                m.iter()
                    .map(|((ns, n), o)| {
                        (
                            ObjKey {
                                gr: gr.clone(),
                                ns: ns.clone(),
                                name: n.clone(),
                            },
                            Arc::clone(o),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        for (k, o) in objs {
            let v = (*o).clone();
            self.commit(g, &k, EvType::Deleted, v, Some(o));
        }
        g.registry.set_crd_types(&group, &plural, vec![]);
    }

    /// Delete. Returns the object (possibly still present with deletionTimestamp) and whether it is gone.
    pub fn delete(
        &self,
        rt: &ResourceType,
        ns: &str,
        name: &str,
        opts: &DeleteOpts,
    ) -> ApiResult<(Value, bool)> {
        let mut g = self.lock();
        let ns = if rt.namespaced { ns } else { "" };
        let old = Self::get_locked(&g, &rt.gr(), ns, name)
            .ok_or_else(|| ApiError::not_found(&rt.subject(), name))?;
        if let Some(u) = &opts.uid {
            let have = str_of(md(&old), "uid");
            if u != have {
                return Err(ApiError::conflict(
                    &rt.subject(),
                    name,
                    &format!(
                        "Precondition failed: UID in precondition: {u}, UID in object meta: {have}"
                    ),
                ));
            }
        }
        if let Some(r) = &opts.resource_version {
            let have = str_of(md(&old), "resourceVersion");
            if r != have {
                return Err(ApiError::conflict(
                    &rt.subject(),
                    name,
                    &format!(
                        "Precondition failed: ResourceVersion in precondition: {r}, ResourceVersion in object meta: {have}"
                    ),
                ));
            }
        }
        let mut new = (*old).clone();
        let key = ObjKey {
            gr: rt.gr(),
            ns: ns.to_string(),
            name: name.to_string(),
        };
        let mut fins = finalizers(&new);
        match opts.propagation.as_deref() {
            Some("Foreground") if !fins.iter().any(|f| f == "foregroundDeletion") => {
                fins.push("foregroundDeletion".into())
            }
            Some("Orphan") if !fins.iter().any(|f| f == "orphan") => fins.push("orphan".into()),
            Some("Foreground") | Some("Orphan") | Some("Background") | None => {}
            Some(other) => {
                return Err(ApiError::invalid(
                    &rt.subject(),
                    name,
                    vec![Cause::new(
                        "FieldValueNotSupported",
                        format!(
                            "Unsupported value: \"{other}\": supported values: \"Foreground\", \"Background\", \"Orphan\""
                        ),
                        "propagationPolicy",
                    )],
                ));
            }
        }
        let is_ns = rt.group.is_empty() && rt.kind == "Namespace";
        if is_ns || !fins.is_empty() {
            if !md(&new)["deletionTimestamp"].is_null() && fins == finalizers(&old) {
                return Ok((for_version(&old, rt), false));
            }
            {
                let m = md_mut(&mut new);
                if !fins.is_empty() {
                    m.insert("finalizers".into(), json!(fins));
                }
                if m.get("deletionTimestamp").is_none_or(Value::is_null) {
                    m.insert("deletionTimestamp".into(), json!(now()));
                    m.insert("deletionGracePeriodSeconds".into(), json!(0));
                    if rt.has_generation {
                        let gen_n = m.get("generation").and_then(Value::as_i64).unwrap_or(1) + 1;
                        m.insert("generation".into(), json!(gen_n));
                    }
                }
            }
            if is_ns {
                new["status"]["phase"] = json!("Terminating");
            }
            if opts.dry_run {
                return Ok((for_version(&new, rt), false));
            }
            let stored = self.commit(&mut g, &key, EvType::Modified, new, Some(old));
            return Ok((for_version(&stored, rt), false));
        }
        if opts.dry_run {
            return Ok((for_version(&old, rt), true));
        }
        if rt.kind == "CustomResourceDefinition" {
            self.drop_crd_instances(&mut g, &new);
        }
        let stored = self.commit(&mut g, &key, EvType::Deleted, new, Some(old));
        Ok((for_version(&stored, rt), true))
    }

    /// Internal delete by key (GC and namespace controller).
    pub fn delete_key(&self, key: &ObjKey, propagation: Option<&str>) -> ApiResult<()> {
        let rt = {
            let g = self.lock();
            g.registry.any_version(&key.gr)
        };
        let Some(rt) = rt else { return Ok(()) };
        let opts = DeleteOpts {
            propagation: propagation.map(str::to_string),
            ..Default::default()
        };
        match self.delete(&rt, &key.ns, &key.name, &opts) {
            Ok(_) => Ok(()),
            Err(e) if e.code == 404 => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Internal: rewrite an object by key with a function (GC, namespace controller). No-op if unchanged.
    pub fn mutate_key(&self, key: &ObjKey, f: impl FnOnce(&mut Value)) -> ApiResult<()> {
        let mut g = self.lock();
        let Some(rt) = g.registry.any_version(&key.gr) else {
            return Ok(());
        };
        let Some(old) = Self::get_locked(&g, &key.gr, &key.ns, &key.name) else {
            return Ok(());
        };
        let mut new = (*old).clone();
        f(&mut new);
        if new == *old {
            return Ok(());
        }
        let ctx = WriteCtx {
            manager: "testkit-controller-manager".into(),
            ..Default::default()
        };
        self.finish_update(&mut g, &rt, &old, new, "", &ctx, None)
            .map(|_| ())
    }

    /// Internal: mutate the status of an object (namespace phase).
    pub fn remove_now(&self, key: &ObjKey) {
        let mut g = self.lock();
        if let Some(old) = Self::get_locked(&g, &key.gr, &key.ns, &key.name) {
            let v = (*old).clone();
            self.commit(&mut g, key, EvType::Deleted, v, Some(old));
        }
    }
}

fn immutable_check(rt: &ResourceType, old: &Value, new: &Value, fields: &[&str]) -> ApiResult<()> {
    if old["immutable"].as_bool() != Some(true) {
        return Ok(());
    }
    let name = str_of(md(old), "name");
    let mut causes = vec![];
    if new["immutable"].as_bool() != Some(true) {
        causes.push(Cause::new(
            "FieldValueForbidden",
            "Forbidden: field is immutable when `immutable` is set",
            "immutable",
        ));
    }
    for f in fields {
        if old.get(*f) != new.get(*f) {
            causes.push(Cause::new(
                "FieldValueForbidden",
                "Forbidden: field is immutable when `immutable` is set",
                *f,
            ));
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(&rt.subject(), name, causes))
    }
}

fn unknown_metadata_fields(obj: &mut Value) -> Vec<String> {
    let mut out = vec![];
    if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        let bad: Vec<String> = m
            .keys()
            .filter(|k| !esr_schema::meta::is_object_meta_field(k))
            .cloned()
            .collect();
        for b in bad {
            m.remove(&b);
            out.push(format!("metadata.{b}"));
        }
    }
    out
}

fn unknown_top_level(rt: &ResourceType, obj: &mut Value) -> Vec<String> {
    let mut out = vec![];
    let props = rt.schema.get("properties").and_then(Value::as_object);
    if let (Some(props), Some(o)) = (props, obj.as_object_mut()) {
        let bad: Vec<String> = o
            .keys()
            .filter(|k| !props.contains_key(k.as_str()) && *k != "apiVersion" && *k != "kind")
            .cloned()
            .collect();
        for b in bad {
            o.remove(&b);
            out.push(b);
        }
    }
    out
}

fn spec_changed(old: &Value, new: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(o) = v.as_object_mut() {
            o.remove("metadata");
            o.remove("status");
            o.remove("apiVersion");
            o.remove("kind");
        }
        v
    };
    strip(old) != strip(new)
        || (md(old)["deletionTimestamp"].is_null() && !md(new)["deletionTimestamp"].is_null())
}

fn strip_managed(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("managedFields");
        m.remove("resourceVersion");
    }
    v
}

/// The object as seen through a given served version.
pub fn for_version(obj: &Value, rt: &ResourceType) -> Value {
    let mut v = obj.clone();
    let av = rt.api_version();
    if str_of(&v, "apiVersion") != av {
        v["apiVersion"] = json!(av);
    }
    v
}
