//! Runs deploy/argocd/*-health.lua in a real Lua 5.1 interpreter (mlua, vendored) against the
//! fixtures in deploy/argocd/testdata/<kind>/. A fixture's file name states the expected health:
//! `healthy*`, `progressing*`, `degraded*` (optionally prefixed `e2e-` when the e2e suite
//! produced it, see e2e/tests/argocd_fixtures.rs).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use mlua::{Lua, LuaSerdeExt, SerializeOptions, Table};
use serde_json::Value;

fn argocd_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/argocd")
}

/// Runs a health script the way Argo CD does: the object is the global `obj`, the chunk returns
/// a table with `status` and `message`. JSON null becomes nil, as in Argo CD.
fn health(script: &str, obj: &Value) -> (String, String) {
    let lua = Lua::new();
    let opts = SerializeOptions::new()
        .serialize_none_to_null(false)
        .serialize_unit_to_null(false)
        .set_array_metatable(false);
    let value = lua.to_value_with(obj, opts).unwrap();
    lua.globals().set("obj", value).unwrap();
    let hs: Table = lua.load(script).eval().unwrap();
    let status: String = hs.get("status").unwrap();
    let message: Option<String> = hs.get("message").unwrap();
    (status, message.unwrap_or_default())
}

fn expected_status(file: &str) -> &'static str {
    let name = file.strip_prefix("e2e-").unwrap_or(file);
    if name.starts_with("healthy") {
        "Healthy"
    } else if name.starts_with("progressing") {
        "Progressing"
    } else if name.starts_with("degraded") {
        "Degraded"
    } else {
        panic!("fixture {file}: name must start with healthy, progressing or degraded")
    }
}

fn ready_message(obj: &Value) -> Option<String> {
    obj.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Ready")?
        .get("message")?
        .as_str()
        .map(str::to_owned)
}

/// Checks every fixture of a kind; returns the file names checked.
fn check_kind(kind: &str) -> Vec<String> {
    let script = std::fs::read_to_string(argocd_dir().join(format!("{kind}-health.lua"))).unwrap();
    let dir = argocd_dir().join("testdata").join(kind);
    let mut names = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    entries.sort();
    for path in entries {
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        let obj: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let (status, message) = health(&script, &obj);
        let want = expected_status(&file);
        assert_eq!(status, want, "{kind}/{file}: message {message:?}");
        assert!(!message.is_empty(), "{kind}/{file}: empty message");
        if want == "Degraded"
            && let Some(m) = ready_message(&obj)
        {
            assert!(
                message.contains(&m),
                "{kind}/{file}: {message:?} lacks {m:?}"
            );
        }
        names.push(file);
    }
    names
}

fn covers(names: &[String], prefix: &str) -> bool {
    names
        .iter()
        .any(|n| n.strip_prefix("e2e-").unwrap_or(n).starts_with(prefix))
}

#[test]
fn externalsecret_health_fixtures() {
    let names = check_kind("externalsecret");
    for prefix in [
        "healthy",
        "degraded",
        "progressing-no-status",
        "progressing-controller-down",
    ] {
        assert!(
            covers(&names, prefix),
            "no externalsecret fixture for {prefix}"
        );
    }
}

#[test]
fn clusterexternalsecret_health_fixtures() {
    let names = check_kind("clusterexternalsecret");
    for prefix in ["healthy", "degraded", "progressing"] {
        assert!(
            covers(&names, prefix),
            "no clusterexternalsecret fixture for {prefix}"
        );
    }
    // Produced by esr in e2e/tests/argocd_fixtures.rs (clusterexternalsecret_states_for_argocd_health).
    for file in [
        "e2e-healthy.json",
        "e2e-degraded.json",
        "e2e-progressing-spec-changed-controller-down.json",
        "e2e-progressing-controller-down.json",
    ] {
        assert!(
            names.iter().any(|n| n == file),
            "clusterexternalsecret/{file} missing: run ESR_WRITE_ARGOCD_FIXTURES=1 cargo nextest run -p esr-e2e --test argocd_fixtures"
        );
    }
}

#[test]
fn pushsecret_health_fixtures() {
    let names = check_kind("pushsecret");
    for prefix in ["healthy", "degraded", "progressing-controller-down"] {
        assert!(covers(&names, prefix), "no pushsecret fixture for {prefix}");
    }
}

fn es(generation: i64, synced: Option<&str>, ready: Option<(&str, &str)>) -> Value {
    let mut obj = serde_json::json!({
        "apiVersion": "external-secrets.io/v1",
        "kind": "ExternalSecret",
        "metadata": {"name": "x", "namespace": "d", "generation": generation},
        "spec": {"refreshInterval": "1h"},
    });
    let mut status = serde_json::Map::new();
    if let Some(s) = synced {
        status.insert("syncedResourceVersion".into(), s.into());
    }
    if let Some((st, msg)) = ready {
        status.insert(
            "conditions".into(),
            serde_json::json!([{"type": "Ready", "status": st, "message": msg}]),
        );
    }
    obj["status"] = Value::Object(status);
    obj
}

fn es_script() -> String {
    std::fs::read_to_string(argocd_dir().join("externalsecret-health.lua")).unwrap()
}

#[test]
fn externalsecret_generation_prefix_is_exact() {
    let script = es_script();
    // "1-…" must not count as synced for generation 11, nor "11-…" for generation 1.
    let (s, m) = health(&script, &es(11, Some("1-abc"), Some(("True", "ok"))));
    assert_eq!(s, "Progressing");
    assert!(m.contains("generation 11"), "{m}");
    let (s, _) = health(&script, &es(1, Some("11-abc"), Some(("True", "ok"))));
    assert_eq!(s, "Progressing");
    let (s, _) = health(&script, &es(11, Some("11-abc"), Some(("True", "ok"))));
    assert_eq!(s, "Healthy");
    // Not a "<generation>-" value at all.
    let (s, _) = health(&script, &es(1, Some("abc"), Some(("True", "ok"))));
    assert_eq!(s, "Progressing");
}

#[test]
fn externalsecret_zero_interval_periodic_does_not_wait_for_spec_changes() {
    let script = es_script();
    let mut obj = es(3, Some("2-abc"), Some(("True", "secret synced")));
    obj["spec"]["refreshInterval"] = "0s".into();
    assert_eq!(health(&script, &obj).0, "Healthy");
    obj["spec"]["refreshInterval"] = "10s".into();
    assert_eq!(health(&script, &obj).0, "Progressing");
    obj["spec"]["refreshPolicy"] = "OnChange".into();
    obj["spec"]["refreshInterval"] = "0s".into();
    assert_eq!(health(&script, &obj).0, "Progressing");
}

#[test]
fn externalsecret_unknown_ready_is_progressing() {
    let (s, _) = health(&es_script(), &es(1, None, Some(("Unknown", "pending"))));
    assert_eq!(s, "Progressing");
}

/// The argocd-cm snippet installs exactly the tested scripts, under Argo CD's key names.
#[test]
fn argocd_cm_patch_embeds_the_scripts() {
    let text = std::fs::read_to_string(argocd_dir().join("argocd-cm-patch.yaml")).unwrap();
    let cm: Value = yaml_serde::from_str(&text).unwrap();
    assert_eq!(cm["kind"], "ConfigMap");
    assert_eq!(cm["metadata"]["name"], "argocd-cm");
    let data = cm["data"].as_object().unwrap();
    assert_eq!(data.len(), 3);
    for (kind, file) in [
        ("ExternalSecret", "externalsecret-health.lua"),
        ("ClusterExternalSecret", "clusterexternalsecret-health.lua"),
        ("PushSecret", "pushsecret-health.lua"),
    ] {
        let key = format!("resource.customizations.health.external-secrets.io_{kind}");
        let embedded = data[&key].as_str().unwrap();
        let script = std::fs::read_to_string(argocd_dir().join(file)).unwrap();
        assert_eq!(embedded, script, "{key} differs from {file}");
    }
}
