use super::*;
use serde_json::json;

fn spec(v: serde_json::Value) -> PushSecretSpec {
    serde_json::from_value(v).unwrap()
}

fn source() -> Secret {
    serde_json::from_value(json!({"metadata": {"name": "src", "namespace": "a"},
        "data": {"tls.crt": "Q0VSVA==", "tls.key": "S0VZ", "other": "eA=="}}))
    .unwrap()
}

fn ss(name: &str) -> StoreRef {
    StoreRef {
        kind: StoreKind::SecretStore,
        name: name.to_string(),
    }
}

#[test]
fn data_match_entries_and_status_keys() {
    let s = spec(
        json!({"secretStoreRefs": [{"name": "s"}], "selector": {"secret": {"name": "src"}},
        "data": [
            {"match": {"secretKey": "tls.crt", "remoteRef": {"remoteKey": "remote", "property": "crt"}}},
            {"match": {"remoteRef": {"remoteKey": "whole"}}}
        ]}),
    );
    let e = entries_for_store(&s, &ss("s"), &source()).unwrap();
    assert_eq!(e.len(), 2);
    assert_eq!(e[0].secret_key.as_deref(), Some("tls.crt"));
    assert_eq!(status_key(&e[0].remote), "remote/crt");
    assert_eq!(e[1].secret_key, None);
    assert_eq!(status_key(&e[1].remote), "whole");
    let r = request(&e[0], &source()).unwrap();
    assert_eq!(r.value, b"CERT");
    let whole = request(&e[1], &source()).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&whole.value).unwrap();
    assert_eq!(
        v,
        json!({"tls.crt": "CERT", "tls.key": "KEY", "other": "x"})
    );
    assert_eq!(store_key(&ss("s")), "SecretStore/s");
    assert_eq!(
        store_key(&StoreRef {
            kind: StoreKind::ClusterSecretStore,
            name: "c".into()
        }),
        "ClusterSecretStore/c"
    );
    assert_eq!(parse_store_key("ClusterSecretStore/c").unwrap().name, "c");
    assert!(parse_store_key("Bogus/c").is_none());
}

#[test]
fn data_to_match_rewrite_and_bundle() {
    let s = spec(
        json!({"secretStoreRefs": [{"name": "s"}, {"name": "t"}], "selector": {"secret": {"name": "src"}},
        "dataTo": [
            {"storeRef": {"name": "s"}, "match": {"regexp": "^tls\\."},
             "rewrite": [{"regexp": {"source": "^tls\\.(.*)$", "target": "app-$1"}}]},
            {"storeRef": {"name": "t"}, "remoteKey": "bundle", "match": {"regexp": "key|crt"}}
        ]}),
    );
    let e = entries_for_store(&s, &ss("s"), &source()).unwrap();
    let keys: Vec<String> = e.iter().map(|e| status_key(&e.remote)).collect();
    assert_eq!(keys, vec!["app-crt", "app-key"]);
    assert_eq!(e[0].data.match_.secret_key.as_deref(), Some("tls.crt"));
    let t = entries_for_store(&s, &ss("t"), &source()).unwrap();
    assert_eq!(t.len(), 1);
    let v: serde_json::Value =
        serde_json::from_slice(&request(&t[0], &source()).unwrap().value).unwrap();
    assert_eq!(v, json!({"tls.crt": "CERT", "tls.key": "KEY"}));
    // Another store gets nothing from dataTo.
    assert!(
        entries_for_store(&s, &ss("u"), &source())
            .unwrap()
            .is_empty()
    );
    // Bad regexp and unsupported transform are errors.
    let bad = spec(
        json!({"secretStoreRefs": [{"name": "s"}], "selector": {"secret": {"name": "src"}},
        "dataTo": [{"storeRef": {"name": "s"}, "match": {"regexp": "("}}]}),
    );
    assert!(
        entries_for_store(&bad, &ss("s"), &source())
            .unwrap_err()
            .contains("invalid match.regexp")
    );
    // Two entries to the same remote are rejected.
    let dup = spec(
        json!({"secretStoreRefs": [{"name": "s"}], "selector": {"secret": {"name": "src"}},
        "data": [{"match": {"secretKey": "a", "remoteRef": {"remoteKey": "r"}}},
                 {"match": {"secretKey": "b", "remoteRef": {"remoteKey": "r"}}}]}),
    );
    assert!(
        entries_for_store(&dup, &ss("s"), &source())
            .unwrap_err()
            .contains("duplicate")
    );
}

#[test]
fn stale_entries_and_status_patch() {
    let d = |k: &str| -> PushSecretData {
        serde_json::from_value(json!({"match": {"remoteRef": {"remoteKey": k}}})).unwrap()
    };
    let old: Synced = [
        (
            "SecretStore/s".to_string(),
            [("a".to_string(), d("a")), ("b".to_string(), d("b"))].into(),
        ),
        (
            "SecretStore/gone".to_string(),
            [("c".to_string(), d("c"))].into(),
        ),
    ]
    .into();
    let new: Synced = [(
        "SecretStore/s".to_string(),
        [("a".to_string(), d("a"))].into(),
    )]
    .into();
    let stale = stale_entries(&old, &new);
    let got: Vec<(String, String)> = stale
        .iter()
        .map(|(s, r)| (s.clone(), status_key(r)))
        .collect();
    assert_eq!(
        got,
        vec![
            ("SecretStore/gone".into(), "c".into()),
            ("SecretStore/s".into(), "b".into())
        ]
    );
    let p = synced_patch(&old, &new);
    assert_eq!(p["SecretStore/s"]["b"], serde_json::Value::Null);
    assert_eq!(
        p["SecretStore/s"]["a"]["match"]["remoteRef"]["remoteKey"],
        "a"
    );
    assert_eq!(p["SecretStore/gone"], serde_json::Value::Null);
}

#[test]
fn refresh_decision_checks_resource_version_first() {
    let now = Utc::now();
    let hour = Duration::from_secs(3600);
    // Never synced / spec changed: push, even with interval 0.
    assert!(refresh_due(None, "1-x", None, Duration::ZERO, now).is_ok());
    assert!(refresh_due(Some("1-x"), "2-x", Some(now), Duration::ZERO, now).is_ok());
    // Same version, interval 0: never again.
    assert_eq!(
        refresh_due(Some("1-x"), "1-x", Some(now), Duration::ZERO, now),
        Err(None)
    );
    // Same version, not due: requeue at interval - elapsed + 5s.
    let rt = now - chrono::Duration::seconds(600);
    assert_eq!(
        refresh_due(Some("1-x"), "1-x", Some(rt), hour, now),
        Err(Some(Duration::from_secs(3000 + 5)))
    );
    let rt = now - chrono::Duration::seconds(3601);
    assert!(refresh_due(Some("1-x"), "1-x", Some(rt), hour, now).is_ok());
}

#[test]
fn conditions_and_defaults() {
    assert_eq!(
        ready_condition(PushSecretUpdatePolicy::Replace).2,
        "PushSecret synced successfully"
    );
    assert_eq!(
        ready_condition(PushSecretUpdatePolicy::IfNotExists).2,
        "PushSecret synced successfully. Existing secrets in providers unchanged."
    );
    let s = spec(
        json!({"secretStoreRefs": [{"labelSelector": {}}], "selector": {"secret": {"name": "src"}}}),
    );
    assert!(store_refs(&s).is_err());
    assert_eq!(refresh_interval(&s), DEFAULT_REFRESH);
    let s = spec(
        json!({"secretStoreRefs": [{"name": "c", "kind": "ClusterSecretStore"}], "refreshInterval": "10s",
        "selector": {"secret": {"name": "src"}}}),
    );
    assert_eq!(
        store_refs(&s).unwrap()[0].kind,
        StoreKind::ClusterSecretStore
    );
    assert_eq!(refresh_interval(&s), Duration::from_secs(10));
}
