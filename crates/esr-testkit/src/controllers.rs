//! Background controllers that a real cluster runs in kube-controller-manager:
//! the garbage collector (ownerReferences, foreground/orphan finalizers), the namespace
//! lifecycle controller (Terminating → empty → gone) and the `default` ServiceAccount creator.
//! They work asynchronously, from the event stream, like the real ones.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use crate::registry::Gr;
use crate::store::{EvType, Event, ObjKey, Store, WriteCtx, owner_uids};

/// Start the controllers; they stop when `stop` is cancelled.
pub fn spawn(store: Arc<Store>, stop: CancellationToken, gc_delay: Duration) {
    let mut rx = store.subscribe();
    tokio::spawn(async move {
        // initial pass
        resync(&store);
        let mut tick = tokio::time::interval(Duration::from_millis(500));
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tick.tick() => resync_terminating(&store),
                ev = rx.recv() => match ev {
                    Ok(ev) => {
                        if !gc_delay.is_zero() && needs_gc(&ev) {
                            tokio::time::sleep(gc_delay).await;
                        }
                        handle(&store, &ev);
                    }
                    Err(RecvError::Lagged(_)) => resync(&store),
                    Err(RecvError::Closed) => break,
                },
            }
        }
    });
}

fn needs_gc(ev: &Event) -> bool {
    ev.typ == EvType::Deleted
}

fn ns_gr() -> Gr {
    Gr {
        group: String::new(),
        plural: "namespaces".into(),
    }
}

fn handle(store: &Store, ev: &Event) {
    let obj = &ev.object;
    let md = &obj["metadata"];
    let uid = md["uid"].as_str().unwrap_or_default();
    let name = md["name"].as_str().unwrap_or_default();
    let is_ns = ev.gr == ns_gr();
    match ev.typ {
        EvType::Deleted => {
            // dependents of a deleted owner
            for dep in store.dependents(uid) {
                collect_dependent(store, &dep);
            }
        }
        EvType::Added | EvType::Modified => {
            if is_ns && ev.typ == EvType::Added {
                let ctx = WriteCtx {
                    manager: "testkit-serviceaccount-controller".into(),
                    ..Default::default()
                };
                let _ = store.create_by_gvr(
                    "",
                    "v1",
                    "serviceaccounts",
                    name,
                    json!({"metadata": {"name": "default"}}),
                    &ctx,
                );
            }
            if !md["deletionTimestamp"].is_null() {
                let fins: Vec<&str> = md["finalizers"]
                    .as_array()
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let key = ObjKey {
                    gr: ev.gr.clone(),
                    ns: ev.ns.clone(),
                    name: name.to_string(),
                };
                if fins.contains(&"orphan") {
                    for dep in store.dependents(uid) {
                        let u = uid.to_string();
                        let _ = store.mutate_key(&dep, |v| remove_owner_ref(v, &u));
                    }
                    let _ = store.mutate_key(&key, |v| remove_finalizer(v, "orphan"));
                } else if fins.contains(&"foregroundDeletion") {
                    let deps = store.dependents(uid);
                    if deps.is_empty() {
                        let _ =
                            store.mutate_key(&key, |v| remove_finalizer(v, "foregroundDeletion"));
                    } else {
                        for dep in deps {
                            let _ = store.delete_key(&dep, Some("Foreground"));
                        }
                    }
                }
                if is_ns {
                    namespace_cleanup(store, name);
                }
            }
            if !owner_uids(obj).is_empty() {
                let key = ObjKey {
                    gr: ev.gr.clone(),
                    ns: ev.ns.clone(),
                    name: name.to_string(),
                };
                if owner_uids(obj).iter().any(|u| !store.uid_exists(u)) {
                    collect_dependent(store, &key);
                }
            }
        }
    }
    // an owner waiting in foreground deletion may now be free
    if ev.typ == EvType::Deleted {
        if let Some(old) = &ev.old {
            for owner in owner_uids(old) {
                if let Some(key) = find_by_uid(store, &owner)
                    && let Some(o) = store.get_key(&key)
                {
                    let deleting = !o["metadata"]["deletionTimestamp"].is_null();
                    let fg = o["metadata"]["finalizers"]
                        .as_array()
                        .is_some_and(|a| a.iter().any(|f| f == "foregroundDeletion"));
                    if deleting && fg && store.dependents(&owner).is_empty() {
                        let _ =
                            store.mutate_key(&key, |v| remove_finalizer(v, "foregroundDeletion"));
                    }
                }
            }
        }
        if !ev.ns.is_empty() {
            namespace_cleanup(store, &ev.ns);
        }
    }
}

fn find_by_uid(store: &Store, uid: &str) -> Option<ObjKey> {
    store.key_by_uid(uid)
}

/// A dependent whose owners are (partly) gone: delete it if no owner is left, else drop dangling refs.
fn collect_dependent(store: &Store, dep: &ObjKey) {
    let Some(obj) = store.get_key(dep) else {
        return;
    };
    let owners = owner_uids(&obj);
    let alive: Vec<&String> = owners.iter().filter(|u| store.uid_exists(u)).collect();
    if alive.is_empty() {
        let _ = store.delete_key(dep, Some("Background"));
    } else if alive.len() < owners.len() {
        let dead: Vec<String> = owners
            .iter()
            .filter(|u| !store.uid_exists(u))
            .cloned()
            .collect();
        let _ = store.mutate_key(dep, |v| {
            for d in &dead {
                remove_owner_ref(v, d);
            }
        });
    }
}

fn remove_owner_ref(v: &mut Value, uid: &str) {
    if let Some(a) = v["metadata"]["ownerReferences"].as_array_mut() {
        a.retain(|o| o["uid"].as_str() != Some(uid));
        if a.is_empty()
            && let Some(m) = v["metadata"].as_object_mut()
        {
            m.remove("ownerReferences");
        }
    }
}

fn remove_finalizer(v: &mut Value, f: &str) {
    if let Some(a) = v["metadata"]["finalizers"].as_array_mut() {
        a.retain(|x| x.as_str() != Some(f));
        if a.is_empty()
            && let Some(m) = v["metadata"].as_object_mut()
        {
            m.remove("finalizers");
        }
    }
}

fn namespace_cleanup(store: &Store, ns: &str) {
    let nskey = ObjKey {
        gr: ns_gr(),
        ns: String::new(),
        name: ns.to_string(),
    };
    let Some(nsobj) = store.get_key(&nskey) else {
        return;
    };
    if nsobj["metadata"]["deletionTimestamp"].is_null() {
        return;
    }
    let keys = store.keys_in_namespace(ns);
    if keys.is_empty() {
        store.remove_now(&nskey);
        return;
    }
    for k in keys {
        let deleting = store
            .get_key(&k)
            .is_some_and(|o| !o["metadata"]["deletionTimestamp"].is_null());
        if !deleting {
            let _ = store.delete_key(&k, Some("Background"));
        }
    }
}

fn resync_terminating(store: &Store) {
    for k in store.keys_in_namespace("") {
        if k.gr == ns_gr()
            && let Some(o) = store.get_key(&k)
            && !o["metadata"]["deletionTimestamp"].is_null()
        {
            namespace_cleanup(store, &k.name);
        }
    }
}

fn resync(store: &Store) {
    for k in store.keys_in_namespace("") {
        if k.gr == ns_gr() {
            let ctx = WriteCtx {
                manager: "testkit-serviceaccount-controller".into(),
                ..Default::default()
            };
            let _ = store.create_by_gvr(
                "",
                "v1",
                "serviceaccounts",
                &k.name,
                json!({"metadata": {"name": "default"}}),
                &ctx,
            );
        }
    }
    for k in store.all_keys() {
        if let Some(o) = store.get_key(&k)
            && owner_uids(&o).iter().any(|u| !store.uid_exists(u))
        {
            collect_dependent(store, &k);
        }
    }
    resync_terminating(store);
}
