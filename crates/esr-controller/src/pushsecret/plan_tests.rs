use super::*;
use crate::pushsecret::source::*;
use esr_api::v1alpha1::PushSecret;
use esr_api::v1alpha1::PushSecretStoreRef;
use kube::ResourceExt;
use serde_json::json;
use std::collections::BTreeMap;

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
            .to_string()
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
            .to_string()
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
    // Label-selector refs are resolved by listing stores; store_refs only names the named ones.
    let s = spec(
        json!({"secretStoreRefs": [{"labelSelector": {}}, {"name": "n"}], "selector": {"secret": {"name": "src"}}}),
    );
    assert_eq!(store_refs(&s).unwrap(), vec![ss("n")]);
    let bad = spec(json!({"secretStoreRefs": [{}], "selector": {"secret": {"name": "src"}}}));
    assert_eq!(
        store_refs(&bad).unwrap_err().to_string(),
        "refStore Name must be provided"
    );
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

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn sel(name: &str, kind: StoreKind, l: &[(&str, &str)]) -> SelectedStore {
    SelectedStore {
        store: StoreRef {
            kind,
            name: name.to_string(),
        },
        labels: labels(l),
    }
}

#[test]
fn source_selection_follows_eso_order() {
    let named = spec(json!({"secretStoreRefs": [], "selector": {"secret": {"name": "a"}}}));
    assert_eq!(source_of(&named).unwrap(), Source::Named("a"));
    let by_label = spec(
        json!({"secretStoreRefs": [], "selector": {"secret": {"selector": {"matchLabels": {"push": "yes"}}}}}),
    );
    match source_of(&by_label).unwrap() {
        Source::Selector(s) => {
            assert_eq!(s.match_labels.as_ref().unwrap()["push"], "yes".to_string())
        }
        other => panic!("{other:?}"),
    }
    let generated = spec(
        json!({"secretStoreRefs": [], "selector": {"generatorRef": {"kind": "Password", "name": "pw"}}}),
    );
    match source_of(&generated).unwrap() {
        Source::Generator(g) => assert_eq!(g.name, "pw"),
        other => panic!("{other:?}"),
    }
    let none = spec(json!({"secretStoreRefs": [], "selector": {"secret": {}}}));
    assert_eq!(
        source_of(&none).unwrap_err().to_string(),
        "no secret selector provided"
    );
    // A generator's output becomes the data of an in-memory Secret, pushed like any other.
    assert_eq!(generator_consumer("ns", "ps"), "PushSecret/ns/ps");
    let g = generated_secret("ns", [("password".to_string(), b"pw1".to_vec())].into());
    assert_eq!(g.metadata.name.as_deref(), Some(GENERATED_SECRET_NAME));
    let s = spec(
        json!({"secretStoreRefs": [{"name": "s"}], "selector": {"generatorRef": {"kind": "Password", "name": "pw"}},
        "data": [{"match": {"secretKey": "password", "remoteRef": {"remoteKey": "db"}}}]}),
    );
    let e = entries_for_store(&s, &ss("s"), &g).unwrap();
    assert_eq!(request(&e[0], &g).unwrap().value, b"pw1");
}

#[test]
fn store_selection_skips_deleting_and_foreign_stores_and_dedups() {
    let cand = |name: &str, deleting: bool, controller: Option<&str>| StoreCandidate {
        store: ss(name),
        labels: labels(&[("team", "a")]),
        deleting,
        controller: controller.map(str::to_string),
    };
    let got = select_stores(
        vec![
            cand("b", false, None),
            cand("a", false, Some("")),
            cand("b", false, None),
            cand("gone", true, None),
            cand("other", false, Some("other-class")),
            cand("mine", false, Some("default")),
        ],
        "default",
    );
    let names: Vec<&str> = got.iter().map(|s| s.store.name.as_str()).collect();
    assert_eq!(names, vec!["a", "b", "mine"]);
    assert_eq!(got[0].labels["team"], "a");
}

#[test]
fn data_to_store_refs_by_name_or_labels() {
    let r = |v: serde_json::Value| -> PushSecretStoreRef { serde_json::from_value(v).unwrap() };
    let prod = sel("s1", StoreKind::SecretStore, &[("env", "prod")]);
    let cprod = sel("s1", StoreKind::ClusterSecretStore, &[("env", "prod")]);
    assert!(data_to_targets(&r(json!({"name": "s1"})), &prod).unwrap());
    assert!(!data_to_targets(&r(json!({"name": "s1"})), &cprod).unwrap());
    assert!(
        data_to_targets(
            &r(json!({"name": "s1", "kind": "ClusterSecretStore"})),
            &cprod
        )
        .unwrap()
    );
    // The name wins over the selector.
    assert!(
        !data_to_targets(
            &r(json!({"name": "other", "labelSelector": {"matchLabels": {"env": "prod"}}})),
            &prod
        )
        .unwrap()
    );
    assert!(
        data_to_targets(
            &r(json!({"labelSelector": {"matchLabels": {"env": "prod"}}})),
            &prod
        )
        .unwrap()
    );
    assert!(
        !data_to_targets(
            &r(json!({"labelSelector": {"matchLabels": {"env": "dev"}}})),
            &prod
        )
        .unwrap()
    );
    assert!(
        data_to_targets(
            &r(json!({"labelSelector": {"matchExpressions": [{"key": "env", "operator": "In", "values": []}]}})),
            &prod
        )
        .unwrap_err()
        .to_string()
        .starts_with("invalid labelSelector")
    );
    // entries_for_selected: only the label-selected store gets the dataTo keys.
    let s = spec(
        json!({"secretStoreRefs": [{"labelSelector": {}}], "selector": {"secret": {"name": "src"}},
        "dataTo": [{"storeRef": {"labelSelector": {"matchLabels": {"env": "prod"}}}, "match": {"regexp": "^tls"}}]}),
    );
    let e = entries_for_selected(&s, &prod, &source()).unwrap();
    assert_eq!(e.len(), 2);
    let dev = sel("s2", StoreKind::SecretStore, &[("env", "dev")]);
    assert!(
        entries_for_selected(&s, &dev, &source())
            .unwrap()
            .is_empty()
    );
}

#[test]
fn data_to_validation_messages() {
    let v = |dt: serde_json::Value| {
        validate_data_to(&spec(json!({
            "secretStoreRefs": [{"name": "s"}, {"labelSelector": {}, "kind": "ClusterSecretStore"}],
            "selector": {"secret": {"name": "src"}}, "dataTo": [dt]})))
    };
    assert!(v(json!({"storeRef": {"name": "s"}})).is_ok());
    // ESO: a named storeRef must be named in secretStoreRefs, even when a label-selector entry
    // of the same kind is listed too.
    assert_eq!(
        v(json!({"storeRef": {"name": "any", "kind": "ClusterSecretStore"}}))
            .unwrap_err()
            .to_string(),
        "dataTo[0]: storeRef \"any\" not found in secretStoreRefs"
    );
    assert_eq!(
        v(json!({"storeRef": {"name": "t"}}))
            .unwrap_err()
            .to_string(),
        "dataTo[0]: storeRef \"t\" not found in secretStoreRefs"
    );
    assert_eq!(
        v(json!({"match": {"regexp": "x"}}))
            .unwrap_err()
            .to_string(),
        "dataTo[0]: storeRef is required"
    );
    assert_eq!(
        v(json!({"storeRef": {"kind": "SecretStore"}}))
            .unwrap_err()
            .to_string(),
        "dataTo[0]: storeRef must have name or labelSelector"
    );
}

#[test]
fn rewrite_transform_and_explicit_data_wins() {
    let s = spec(
        json!({"secretStoreRefs": [{"name": "s"}], "selector": {"secret": {"name": "src"}},
        "data": [{"match": {"secretKey": "tls.key", "remoteRef": {"remoteKey": "explicit"}}}],
        "dataTo": [{"storeRef": {"name": "s"},
            "rewrite": [{"regexp": {"source": "\\.", "target": "-"}},
                        {"transform": {"template": "app/{{ .value | upper }}"}}]}]}),
    );
    let e = entries_for_store(&s, &ss("s"), &source()).unwrap();
    let keys: Vec<(Option<String>, String)> = e
        .iter()
        .map(|e| (e.secret_key.clone(), status_key(&e.remote)))
        .collect();
    assert_eq!(
        keys,
        vec![
            (Some("tls.key".into()), "explicit".into()),
            (Some("other".into()), "app/OTHER".into()),
            (Some("tls.crt".into()), "app/TLS-CRT".into()),
        ]
    );
    // A transform producing an empty key, or failing to parse, is an error naming the entry.
    let empty = spec(
        json!({"secretStoreRefs": [{"name": "s"}], "selector": {"secret": {"name": "src"}},
        "dataTo": [{"storeRef": {"name": "s"}, "rewrite": [{"transform": {"template": ""}}]}]}),
    );
    assert!(
        entries_for_store(&empty, &ss("s"), &source())
            .unwrap_err()
            .to_string()
            .contains("empty remote key")
    );
    let bad = spec(
        json!({"secretStoreRefs": [{"name": "s"}], "selector": {"secret": {"name": "src"}},
        "dataTo": [{"storeRef": {"name": "s"}, "rewrite": [{"transform": {"template": "{{ .value "}}]}]}),
    );
    assert!(
        entries_for_store(&bad, &ss("s"), &source())
            .unwrap_err()
            .to_string()
            .starts_with("dataTo[0].rewrite[0]: unable to parse transform template")
    );
    assert_eq!(rewrite_key(&[], "k", 0).unwrap(), "k");
}

#[test]
fn template_renders_over_the_source_secret() {
    let t: esr_api::v1::ExternalSecretTemplate = serde_json::from_value(json!({
        "metadata": {"labels": {"from": "{{ .other }}"}},
        "data": {"pem": "{{ index . \"tls.crt\" }}\n{{ index . \"tls.key\" }}", "other": "{{ .other | upper }}"},
        "templateFrom": [{"configMap": {"name": "cm", "items": [{"key": "extra"}]}}]
    }))
    .unwrap();
    let sources = esr_template::eso::TemplateSources {
        config_maps: [(
            "cm".to_string(),
            [(
                "extra".to_string(),
                "crt={{ index . \"tls.crt\" }}".to_string(),
            )]
            .into(),
        )]
        .into(),
        secrets: BTreeMap::new(),
    };
    let out = render_template(&t, &source(), &sources).unwrap();
    let d: BTreeMap<String, String> = out
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), String::from_utf8(v.0.clone()).unwrap()))
        .collect();
    assert_eq!(d["pem"], "CERT\nKEY");
    assert_eq!(d["other"], "X");
    assert_eq!(d["extra"], "crt=CERT");
    // Keys the template does not produce stay (the template is laid over the Secret).
    assert_eq!(d["tls.key"], "KEY");
    assert_eq!(out.labels()["from"], "x");
    // Errors name the key, never the values.
    let bad: esr_api::v1::ExternalSecretTemplate =
        serde_json::from_value(json!({"data": {"k": "{{ .missing }}"}})).unwrap();
    let err = render_template(&bad, &source(), &sources)
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("could not execute template"), "{err}");
    assert!(!err.contains("CERT") && !err.contains("KEY"), "{err}");
}

fn ps(v: serde_json::Value) -> PushSecret {
    serde_json::from_value(v).unwrap()
}

#[test]
fn store_finalizer_references() {
    let by_name = ps(
        json!({"apiVersion": "external-secrets.io/v1alpha1", "kind": "PushSecret",
        "metadata": {"name": "p", "namespace": "a"},
        "spec": {"deletionPolicy": "Delete", "secretStoreRefs": [{"name": "s", "kind": "SecretStore"}],
                 "selector": {"secret": {"name": "src"}}}}),
    );
    let by_label = ps(
        json!({"apiVersion": "external-secrets.io/v1alpha1", "kind": "PushSecret",
        "metadata": {"name": "q", "namespace": "b"},
        "spec": {"deletionPolicy": "Delete",
                 "secretStoreRefs": [{"labelSelector": {"matchLabels": {"push": "yes"}}, "kind": "ClusterSecretStore"}],
                 "selector": {"secret": {"name": "src"}}}}),
    );
    let synced_only = ps(
        json!({"apiVersion": "external-secrets.io/v1alpha1", "kind": "PushSecret",
        "metadata": {"name": "r", "namespace": "a"},
        "spec": {"deletionPolicy": "Delete", "secretStoreRefs": [], "selector": {"secret": {"name": "src"}}},
        "status": {"syncedPushSecrets": {"SecretStore/old": {"k": {"match": {"remoteRef": {"remoteKey": "k"}}}}}}}),
    );
    let keep = ps(
        json!({"apiVersion": "external-secrets.io/v1alpha1", "kind": "PushSecret",
        "metadata": {"name": "n", "namespace": "a"},
        "spec": {"deletionPolicy": "None", "secretStoreRefs": [{"name": "plain"}],
                 "selector": {"secret": {"name": "src"}}}}),
    );
    let all = [by_name, by_label, synced_only, keep];
    let none = BTreeMap::new();
    let ss_kind = StoreKind::SecretStore;
    let css_kind = StoreKind::ClusterSecretStore;
    assert!(store_has_delete_refs(ss_kind, "s", Some("a"), &none, &all));
    // A SecretStore of another namespace with the same name is not referenced.
    assert!(!store_has_delete_refs(ss_kind, "s", Some("b"), &none, &all));
    // Already synced to the store, no longer in the spec: still referenced.
    assert!(store_has_delete_refs(
        ss_kind,
        "old",
        Some("a"),
        &none,
        &all
    ));
    // Label-selected ClusterSecretStores (any namespace).
    assert!(store_has_delete_refs(
        css_kind,
        "c",
        None,
        &labels(&[("push", "yes")]),
        &all
    ));
    assert!(!store_has_delete_refs(css_kind, "c", None, &none, &all));
    // deletionPolicy None never holds a store, but still concerns it (for re-reconciles).
    assert!(!store_has_delete_refs(
        ss_kind,
        "plain",
        Some("a"),
        &none,
        &all
    ));
    assert!(ps_concerns_store(
        &all[3],
        ss_kind,
        "plain",
        Some("a"),
        &none
    ));
    // storeMatchesRef: an empty kind matches both kinds.
    let any_kind: PushSecretStoreRef = serde_json::from_value(json!({"name": "x"})).unwrap();
    assert!(store_matches_ref(&any_kind, css_kind, "x", &none));
    assert!(store_matches_ref(&any_kind, ss_kind, "x", &none));
    let invalid: PushSecretStoreRef = serde_json::from_value(
        json!({"labelSelector": {"matchExpressions": [{"key": "a", "operator": "Bogus"}]}}),
    )
    .unwrap();
    assert!(!store_matches_ref(&invalid, ss_kind, "x", &none));
}

#[test]
fn reverse_unicode_conversion_of_keys() {
    assert_eq!(
        reverse_unicode("some-array_U005b_0_U005d_.entity"),
        "some-array[0].entity"
    );
    assert_eq!(reverse_unicode("emoji_U1f600_!"), "emoji\u{1f600}!");
    assert_eq!(reverse_unicode("plain_Uzz_key"), "plain_Uzz_key");
    // Surrogates are not characters: replaced like Go's %c does.
    assert_eq!(reverse_unicode("_Ud800_"), "\u{FFFD}");
    let src: Secret = serde_json::from_value(json!({"metadata": {"name": "s"},
        "data": {"some-array_U005b_0_U005d_.entity": "dmFsdWU=", "other": "eA=="}}))
    .unwrap();
    // data[]: secretKey names the converted key.
    let s = spec(
        json!({"secretStoreRefs": [{"name": "s"}], "selector": {"secret": {"name": "src"}},
        "data": [{"conversionStrategy": "ReverseUnicode",
                  "match": {"secretKey": "some-array[0].entity", "remoteRef": {"remoteKey": "r"}}},
                 {"match": {"secretKey": "some-array[0].entity", "remoteRef": {"remoteKey": "unconverted"}}}]}),
    );
    let e = entries_for_store(&s, &ss("s"), &src).unwrap();
    assert_eq!(request(&e[0], &src).unwrap().value, b"value");
    assert_eq!(
        request(&e[1], &src).unwrap_err().to_string(),
        "secret key some-array[0].entity does not exist"
    );
    // dataTo: keys are converted before matching and rewriting.
    let s = spec(
        json!({"secretStoreRefs": [{"name": "s"}], "selector": {"secret": {"name": "src"}},
        "dataTo": [{"storeRef": {"name": "s"}, "conversionStrategy": "ReverseUnicode", "match": {"regexp": "\\["}}]}),
    );
    let e = entries_for_store(&s, &ss("s"), &src).unwrap();
    assert_eq!(e.len(), 1);
    assert_eq!(status_key(&e[0].remote), "some-array[0].entity");
    assert_eq!(request(&e[0], &src).unwrap().value, b"value");
    // Collisions are errors.
    let clash: Secret = serde_json::from_value(
        json!({"metadata": {"name": "s"}, "data": {"a_U002e_b": "eA==", "a.b": "eQ=="}}),
    )
    .unwrap();
    assert_eq!(
        reverse_keys(Some(PushSecretConversionStrategy::ReverseUnicode), &clash)
            .unwrap_err()
            .to_string(),
        "secret name collision during conversion: a.b"
    );
}

#[test]
fn data_to_selector_must_match_a_resolved_store() {
    let s = spec(json!({
        "secretStoreRefs": [{"labelSelector": {"matchLabels": {"env": "prod"}}}],
        "selector": {"secret": {"name": "src"}},
        "dataTo": [{"storeRef": {"labelSelector": {"matchLabels": {"env": "prod"}}}}]}));
    let prod = sel("s1", StoreKind::SecretStore, &[("env", "prod")]);
    let dev = sel("s2", StoreKind::SecretStore, &[("env", "dev")]);
    assert!(check_data_to_selectors(&s, std::slice::from_ref(&prod)).is_ok());
    assert_eq!(
        check_data_to_selectors(&s, std::slice::from_ref(&dev))
            .unwrap_err()
            .to_string(),
        "dataTo[0]: storeRef labelSelector does not match any store in secretStoreRefs"
    );
    assert!(check_data_to_selectors(&s, &[]).is_err());
    // Named storeRefs are checked by validate_data_to, not here.
    let named = spec(json!({
        "secretStoreRefs": [{"name": "s2"}], "selector": {"secret": {"name": "src"}},
        "dataTo": [{"storeRef": {"name": "s2"}}]}));
    assert!(check_data_to_selectors(&named, &[dev]).is_ok());
}

#[test]
fn missing_source_is_errored_unless_something_pushed_is_to_be_deleted() {
    let synced: Synced = [(
        "SecretStore/s".to_string(),
        [(
            "db".to_string(),
            serde_json::from_value::<PushSecretData>(
                json!({"match": {"remoteRef": {"remoteKey": "db"}}}),
            )
            .unwrap(),
        )]
        .into(),
    )]
    .into();
    let del = spec(
        json!({"secretStoreRefs": [{"name": "s"}], "deletionPolicy": "Delete",
        "selector": {"secret": {"name": "src"}}}),
    );
    assert_eq!(
        missing_source(&del, "src", &synced),
        MissingSource::SourceDeleted("source secret src does not exist".into())
    );
    // Nothing synced yet.
    assert_eq!(
        missing_source(&del, "src", &Synced::new()),
        MissingSource::Errored
    );
    // deletionPolicy None.
    let keep = spec(json!({"secretStoreRefs": [{"name": "s"}],
        "selector": {"secret": {"name": "src"}}}));
    assert_eq!(
        missing_source(&keep, "src", &synced),
        MissingSource::Errored
    );
    assert_eq!(MSG_NO_SOURCE, "could not get source secret");
}

#[test]
fn missing_source_key_fails_before_the_provider() {
    let s = spec(
        json!({"secretStoreRefs": [{"name": "s"}], "selector": {"secret": {"name": "src"}},
        "data": [{"match": {"secretKey": "nope", "remoteRef": {"remoteKey": "remote"}}}]}),
    );
    let e = entries_for_store(&s, &ss("s"), &source()).unwrap();
    assert_eq!(
        request(&e[0], &source()).unwrap_err().to_string(),
        "secret key nope does not exist"
    );
}

fn at(secs: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(1_700_000_000 + secs, 0).unwrap()
}

fn finalizer_steps(steps: &[Step]) -> Vec<Vec<String>> {
    steps
        .iter()
        .filter_map(|s| match s {
            Step::SetFinalizers(f) => Some(f.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn admission_keeps_foreign_push_secrets_untouched_and_manages_the_finalizer() {
    let fin = FINALIZER_PUSHSECRET.to_string();
    let live = |policy: &str, finalizers: &[&str]| {
        ps(
            json!({"metadata": {"name": "p", "namespace": "a", "finalizers": finalizers},
                  "spec": {"deletionPolicy": policy, "secretStoreRefs": [{"name": "s"}],
                           "selector": {"secret": {"name": "src"}}}}),
        )
    };
    let candidate = |controller: Option<&str>| StoreCandidate {
        store: ss("s"),
        labels: BTreeMap::new(),
        deleting: false,
        controller: controller.map(str::to_string),
    };
    let proceed = |a: Admission| match a {
        Admission::Proceed(steps) => finalizer_steps(&steps),
        other => panic!("{other:?}"),
    };
    // Delete policy without the finalizer: it is added; None with it: it is removed.
    assert_eq!(
        proceed(admit(&live("Delete", &["x"]), None, "")),
        vec![vec!["x".to_string(), fin.clone()]]
    );
    assert_eq!(
        proceed(admit(&live("None", &["x", &fin]), None, "")),
        vec![vec!["x".to_string()]]
    );
    assert!(proceed(admit(&live("Delete", &[&fin]), None, "")).is_empty());
    // Every store of another class: nothing at all, even for a PushSecret being deleted.
    let foreign = [candidate(Some("other"))];
    match admit(&live("Delete", &[]), Some(&foreign), "") {
        Admission::Stop(s) => assert!(s.steps.is_empty() && matches!(s.end, End::Await(_))),
        other => panic!("{other:?}"),
    }
    let mixed = [candidate(Some("other")), candidate(None)];
    assert!(matches!(
        admit(&live("Delete", &[&fin]), Some(&mixed), ""),
        Admission::Proceed(_)
    ));
    // Being deleted with Delete: everything pushed is deleted first; the finalizer goes only
    // when that worked.
    let deleting = ps(
        json!({"metadata": {"name": "p", "namespace": "a", "finalizers": ["x", fin],
                                 "deletionTimestamp": "2024-01-01T00:00:00Z"},
        "spec": {"deletionPolicy": "Delete", "secretStoreRefs": [{"name": "s"}],
                 "selector": {"secret": {"name": "src"}}},
        "status": {"syncedPushSecrets": {"SecretStore/s": {"r": {"match": {"remoteRef": {"remoteKey": "r"}}}}}}}),
    );
    match admit(&deleting, None, "") {
        Admission::DeleteAll(e) => assert_eq!(
            e,
            vec![("SecretStore/s".to_string(), PushRemoteRef::new("r"))]
        ),
        other => panic!("{other:?}"),
    }
    let done = deleted(&deleting, Failures::default());
    assert_eq!(finalizer_steps(&done.steps), vec![vec!["x".to_string()]]);
    let failed = deleted(&deleting, Failures(vec![PushError::MissingKey("k".into())]));
    assert!(finalizer_steps(&failed.steps).is_empty());
    match failed.end {
        End::Fail(f) => assert_eq!(
            f.to_string(),
            "error deleting secrets: secret key k does not exist"
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn push_outcomes_fold_into_synced_entries_and_errors_in_order() {
    let s = spec(json!({"secretStoreRefs": [{"name": "s"}, {"name": "t"}],
        "selector": {"secret": {"name": "src"}}, "updatePolicy": "IfNotExists",
        "data": [{"match": {"secretKey": "tls.crt", "remoteRef": {"remoteKey": "crt"}}},
                 {"match": {"secretKey": "tls.key", "remoteRef": {"remoteKey": "key"}}},
                 {"match": {"secretKey": "nope", "remoteRef": {"remoteKey": "gone"}}}]}));
    let stores = [
        sel("s", StoreKind::SecretStore, &[]),
        sel("t", StoreKind::SecretStore, &[]),
    ];
    let plan = push_plan(&s, &stores, &[source()]);
    assert_eq!(plan.len(), 2);
    assert!(plan[0].ops.iter().all(|o| match o {
        PushOp::Push { only_if_absent, .. } => *only_if_absent,
        PushOp::Invalid(_) => true,
    }));
    assert!(matches!(
        &plan[0].ops[2],
        PushOp::Invalid(PushError::Prepare(_))
    ));
    let entry = |k: &str| -> PushSecretData {
        serde_json::from_value(json!({"match": {"secretKey": k, "remoteRef": {"remoteKey": k}}}))
            .unwrap()
    };
    let old: Synced = BTreeMap::from([
        (
            "SecretStore/s".to_string(),
            BTreeMap::from([("key".to_string(), entry("old-key"))]),
        ),
        (
            "SecretStore/t".to_string(),
            BTreeMap::from([("crt".to_string(), entry("old-crt"))]),
        ),
    ]);
    let outcomes = vec![
        StoreOutcome::Ran(vec![
            OpOutcome::Pushed,
            OpOutcome::Failed(ProviderError::transient("down")),
            OpOutcome::Invalid,
        ]),
        StoreOutcome::NoClient(ClientError::Provider(ProviderError::auth("denied"))),
    ];
    let p = pushed(&old, plan, outcomes);
    // Pushed entries are new; a failed one keeps what was synced; a store without a client
    // keeps all its entries.
    assert_eq!(
        p.synced["SecretStore/s"]["crt"]
            .match_
            .secret_key
            .as_deref(),
        Some("tls.crt")
    );
    assert_eq!(p.synced["SecretStore/s"]["key"], entry("old-key"));
    assert_eq!(p.synced["SecretStore/t"], old["SecretStore/t"]);
    let texts: Vec<String> = p.errors.iter().map(|e| e.to_string()).collect();
    assert_eq!(
        texts,
        vec![
            "set secret failed: could not write remote ref key to target secretstore s: down",
            "set secret failed: secret key nope does not exist",
            "could not get secrets client for store t: denied",
        ]
    );
    // The failures end the reconcile: Ready=False with every text joined, no refresh recorded.
    let obj = ps(json!({"metadata": {"name": "p", "namespace": "a"}, "spec": s}));
    let end = finish(&obj, &old, p, at(0));
    assert!(matches!(end.steps[0], Step::Ready(false)));
    match &end.steps[2] {
        Step::Status(patch) => {
            assert_eq!(patch["status"]["conditions"][0]["reason"], "Errored");
            assert_eq!(
                patch["status"]["conditions"][0]["message"],
                texts.join("; ")
            );
            assert!(patch["status"].get("refreshTime").is_none());
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(end.end, End::Fail(Failure::Push(_))));
}

#[test]
fn a_clean_push_records_the_refresh_and_announces_only_changes() {
    let s = json!({"refreshInterval": "10s", "secretStoreRefs": [{"name": "s"}],
                   "selector": {"secret": {"name": "src"}}});
    let fresh = ps(json!({"metadata": {"name": "p", "namespace": "a"}, "spec": s}));
    let ok = |obj: &PushSecret, old: &Synced, new: Synced| {
        finish(
            obj,
            old,
            Pushed {
                synced: new,
                errors: vec![],
            },
            at(0),
        )
    };
    let synced: Synced = BTreeMap::from([("SecretStore/s".to_string(), BTreeMap::new())]);
    let first = ok(&fresh, &Synced::new(), synced.clone());
    match &first.steps[0] {
        Step::Status(patch) => {
            assert_eq!(patch["status"]["conditions"][0]["status"], "True");
            assert_eq!(patch["status"]["refreshTime"], "2023-11-14T22:13:20Z");
            assert_eq!(patch["status"]["syncedResourceVersion"], current_rv(&fresh));
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(first.steps[1], Step::Ready(true)));
    assert!(matches!(
        &first.steps[2],
        Step::Event {
            warning: false,
            reason: REASON_SYNCED,
            ..
        }
    ));
    assert!(matches!(first.end, End::Requeue(d) if d == Duration::from_secs(10)));
    // Already Ready with the same message and nothing changed: no event.
    let ready = ps(
        json!({"metadata": {"name": "p", "namespace": "a"}, "spec": s,
        "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Synced",
                                   "message": MSG_SYNCED}]}}),
    );
    assert_eq!(ok(&ready, &synced, synced.clone()).steps.len(), 2);
}
