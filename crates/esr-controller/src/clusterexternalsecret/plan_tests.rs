use super::*;
use crate::common::fanout::*;
use crate::common::namespaces::*;
use kube::runtime::reflector;
use serde_json::json;

fn ces(spec: serde_json::Value) -> ClusterExternalSecret {
    serde_json::from_value(json!({
        "apiVersion": "external-secrets.io/v1", "kind": "ClusterExternalSecret",
        "metadata": {"name": "wild", "uid": "u-1", "generation": 1,
                     "annotations": {"external-secrets.io/force-sync": "123", "other": "x"}},
        "spec": spec
    }))
    .unwrap()
}

fn ns(name: &str, labels: &[(&str, &str)]) -> NsView {
    NsView::live(name, labels)
}

fn sel(spec: serde_json::Value) -> Result<Selection, SelectionError> {
    Selection::from_spec(&ces(spec).spec)
}

fn world() -> Vec<NsView> {
    vec![
        ns("team-a", &[("env", "prod")]),
        ns("team-b", &[("env", "dev")]),
        ns("feature-123", &[]),
        ns("feature-9", &[]),
        ns("kube-system", &[]),
    ]
}

#[test]
fn selection_by_labels_names_and_regexes() {
    let w = world();
    let s = sel(
        json!({"externalSecretSpec": {}, "namespaceSelectors": [{"matchLabels": {"env": "prod"}}]}),
    );
    assert_eq!(select(s.as_ref().unwrap(), &w).unwrap(), vec!["team-a"]);
    let s = sel(json!({"externalSecretSpec": {}, "namespaces": ["team-b", "absent"]}));
    assert_eq!(select(s.as_ref().unwrap(), &w).unwrap(), vec!["team-b"]);
    let s = sel(json!({"externalSecretSpec": {}, "namespaceRegexes": ["^feature-[0-9]+$"]}));
    assert_eq!(
        select(s.as_ref().unwrap(), &w).unwrap(),
        vec!["feature-123", "feature-9"]
    );
    // Unanchored like Go's MatchString.
    let s = sel(json!({"externalSecretSpec": {}, "namespaceRegexes": ["system"]}));
    assert_eq!(
        select(s.as_ref().unwrap(), &w).unwrap(),
        vec!["kube-system"]
    );
    // ORed, deprecated namespaceSelector included, sorted output.
    let s = sel(json!({"externalSecretSpec": {},
        "namespaceSelector": {"matchExpressions": [{"key": "env", "operator": "In", "values": ["dev"]}]},
        "namespaces": ["kube-system"], "namespaceRegexes": ["^team-a$"]}));
    assert_eq!(
        select(s.as_ref().unwrap(), &w).unwrap(),
        vec!["kube-system", "team-a", "team-b"]
    );
    // Nothing selected without selectors; an empty selector selects everything.
    let s = sel(json!({"externalSecretSpec": {}}));
    assert!(select(s.as_ref().unwrap(), &w).unwrap().is_empty());
    let s = sel(json!({"externalSecretSpec": {}, "namespaceSelectors": [{}]}));
    assert_eq!(select(s.as_ref().unwrap(), &w).unwrap().len(), 5);
}

#[test]
fn invalid_regex_or_selector_fails_as_unknown() {
    let s = sel(json!({"externalSecretSpec": {}, "namespaceRegexes": ["("]}));
    assert!(
        s.as_ref()
            .unwrap_err()
            .to_string()
            .contains("invalid namespaceRegexes")
    );
    let p = plan(&s, "wild", &world(), &[]);
    assert_eq!(p.failed.len(), 1);
    assert_eq!(p.failed[0].0, "unknown");
    assert!(p.apply.is_empty());
    let s = sel(json!({"externalSecretSpec": {},
        "namespaceSelectors": [{"matchExpressions": [{"key": "env", "operator": "In", "values": []}]}]}));
    let p = plan(&s, "wild", &world(), &[]);
    assert_eq!(p.failed[0].0, "unknown");
}

#[test]
fn plan_applies_adds_finalizers_and_cleans_up() {
    let mut w = world();
    w[1].has_finalizer = true; // team-b: no longer selected
    w[0].has_finalizer = true; // team-a: selected, already has the finalizer
    w[4].terminating = true;
    w[4].has_finalizer = true;
    let s = sel(
        json!({"externalSecretSpec": {}, "namespaceSelectors": [{"matchLabels": {"env": "prod"}}],
        "namespaceRegexes": ["^feature-", "system"]}),
    );
    let existing = vec![
        EsRef {
            namespace: "team-b".into(),
            name: "wild".into(),
            owned: true,
        },
        EsRef {
            namespace: "team-a".into(),
            name: "old-name".into(),
            owned: true,
        },
        EsRef {
            namespace: "team-a".into(),
            name: "wild".into(),
            owned: true,
        },
        EsRef {
            namespace: "kube-system".into(),
            name: "wild".into(),
            owned: true,
        },
        EsRef {
            namespace: "feature-123".into(),
            name: "unrelated".into(),
            owned: false,
        },
    ];
    let p = plan(&s, "wild", &w, &existing);
    assert_eq!(p.apply, vec!["feature-123", "feature-9", "team-a"]);
    assert_eq!(p.add_finalizer, vec!["feature-123", "feature-9"]);
    assert_eq!(p.remove_finalizer, vec!["kube-system", "team-b"]);
    assert_eq!(
        p.delete,
        vec![
            ("team-a".to_string(), "old-name".to_string()),
            ("team-b".to_string(), "wild".to_string())
        ]
    );
    assert!(p.failed.is_empty());
}

#[test]
fn foreign_external_secret_is_a_conflict_and_never_touched() {
    let s = sel(json!({"externalSecretSpec": {}, "namespaces": ["team-a", "team-b"]}));
    let existing = vec![EsRef {
        namespace: "team-a".into(),
        name: "wild".into(),
        owned: false,
    }];
    let p = plan(&s, "wild", &world(), &existing);
    assert_eq!(p.apply, vec!["team-b"]);
    assert_eq!(
        p.failed,
        vec![("team-a".to_string(), ERR_ALREADY_EXISTS.to_string())]
    );
    assert!(p.delete.is_empty());
    assert!(!p.add_finalizer.contains(&"team-a".to_string()));
}

#[test]
fn status_sorted_with_ready_condition() {
    let st = status("wild", vec!["b".into(), "a".into()], vec![]);
    assert_eq!(
        st.provisioned_namespaces,
        Some(vec!["a".to_string(), "b".to_string()])
    );
    assert_eq!(st.failed_namespaces, None);
    let c = &st.conditions.as_ref().unwrap()[0];
    assert_eq!(
        (c.type_.as_str(), c.status.as_str(), c.message.as_deref()),
        ("Ready", "True", None)
    );
    assert_eq!(st.external_secret_name.as_deref(), Some("wild"));

    let st = status(
        "wild",
        vec!["a".into()],
        vec![
            ("z".into(), "boom".into()),
            ("c".into(), ERR_ALREADY_EXISTS.into()),
        ],
    );
    let f = st.failed_namespaces.unwrap();
    assert_eq!(f[0].namespace, "c");
    assert_eq!(f[0].reason.as_deref(), Some(ERR_ALREADY_EXISTS));
    assert_eq!(f[1].namespace, "z");
    let c = &st.conditions.unwrap()[0];
    assert_eq!(
        (c.status.as_str(), c.message.as_deref()),
        ("False", Some(MSG_NAMESPACES_FAILED))
    );
    let v = serde_json::to_value(status("w", vec![], vec![])).unwrap();
    assert_eq!(
        v,
        json!({"externalSecretName": "w", "conditions": [{"type": "Ready", "status": "True"}]})
    );
}

#[test]
fn desired_es_mirrors_metadata_force_sync_and_owner() {
    let c = ces(
        json!({"externalSecretSpec": {"refreshInterval": "1m", "secretStoreRef": {"name": "s"}},
        "externalSecretName": "copy",
        "externalSecretMetadata": {"labels": {"l": "1"}, "annotations": {"a": "2", "external-secrets.io/force-sync": "stale"}}}),
    );
    let es = desired_es(&c, "team-a");
    assert_eq!(es.name_any(), "copy");
    assert_eq!(es.namespace().as_deref(), Some("team-a"));
    assert_eq!(es.labels().get("l").map(String::as_str), Some("1"));
    assert_eq!(es.annotations().get("a").map(String::as_str), Some("2"));
    assert_eq!(
        es.annotations()
            .get(ANNOTATION_FORCE_SYNC)
            .map(String::as_str),
        Some("123")
    );
    assert!(!es.annotations().contains_key("other"));
    let o = &es.owner_references()[0];
    assert_eq!(
        (
            o.kind.as_str(),
            o.name.as_str(),
            o.uid.as_str(),
            o.controller
        ),
        ("ClusterExternalSecret", "wild", "u-1", Some(true))
    );
    assert_eq!(es.spec, c.spec.external_secret_spec);

    // Without the annotation on the CES, force-sync is removed.
    let mut c2 = c.clone();
    c2.metadata.annotations = None;
    assert!(!desired_annotations(&c2).contains_key(ANNOTATION_FORCE_SYNC));
}

#[test]
fn up_to_date_detection_tolerates_server_defaults() {
    let c =
        ces(json!({"externalSecretSpec": {"secretStoreRef": {"name": "s"}}, "namespaces": ["a"]}));
    let created = desired_es(&c, "a");
    // The server adds defaults.
    let mut served = serde_json::to_value(&created).unwrap();
    served["spec"]["refreshInterval"] = json!("1h0m0s");
    served["spec"]["target"] = json!({"creationPolicy": "Owner", "deletionPolicy": "Retain"});
    served["metadata"]["resourceVersion"] = json!("7");
    let served: ExternalSecret = serde_json::from_value(served).unwrap();
    assert!(es_up_to_date(&c, &served, true));
    // A CES generation not yet fully applied forces an update.
    assert!(!es_up_to_date(&c, &served, false));
    // A changed spec value or label is detected.
    let c2 = ces(json!({"externalSecretSpec": {"secretStoreRef": {"name": "t"}}}));
    assert!(!es_up_to_date(&c2, &served, true));
    let mut foreign = served.clone();
    foreign.metadata.owner_references = None;
    assert!(!es_up_to_date(&c, &foreign, true));
    let upd = updated_es(&c2, &served);
    assert_eq!(upd.metadata.resource_version.as_deref(), Some("7"));
    assert_eq!(upd.spec, c2.spec.external_secret_spec);
    assert_eq!(upd.owner_references().len(), 1);
}

#[test]
fn json_containment() {
    assert!(json_contained(&json!({"a": 1}), &json!({"a": 1, "b": 2})));
    assert!(!json_contained(&json!({"a": 1, "b": 2}), &json!({"a": 1})));
    assert!(!json_contained(&json!([1, 2]), &json!([1])));
    assert!(json_contained(
        &json!([{"x": 1}]),
        &json!([{"x": 1, "y": 0}])
    ));
    assert!(!json_contained(&json!("a"), &json!("b")));
}

#[test]
fn refresh_time_parsing() {
    let mut c = ces(json!({"externalSecretSpec": {}}));
    assert_eq!(refresh_interval(&c.spec), Some(DEFAULT_REFRESH));
    c.spec.refresh_time = Some("30s".into());
    assert_eq!(refresh_interval(&c.spec), Some(Duration::from_secs(30)));
    c.spec.refresh_time = Some("0s".into());
    assert_eq!(refresh_interval(&c.spec), None);
}

#[test]
fn namespace_events_map_to_matching_ces() {
    use kube::runtime::watcher::Event;
    let (reader, mut writer) = reflector::store();
    writer.apply_watcher_event(&Event::Init);
    let mut a = ces(json!({"externalSecretSpec": {}, "namespaceRegexes": ["^feature-"]}));
    a.metadata.name = Some("a".into());
    let mut b = ces(
        json!({"externalSecretSpec": {}, "namespaceSelectors": [{"matchLabels": {"env": "prod"}}]}),
    );
    b.metadata.name = Some("b".into());
    writer.apply_watcher_event(&Event::InitApply(a));
    writer.apply_watcher_event(&Event::InitApply(b));
    writer.apply_watcher_event(&Event::InitDone);
    let n: Namespace = serde_json::from_value(json!({"metadata": {"name": "feature-1"}})).unwrap();
    let got: Vec<String> = ces_for_namespace(&reader, &n)
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert_eq!(got, vec!["a"]);
    // A namespace that stopped matching still maps through the finalizer.
    let n: Namespace = serde_json::from_value(json!({"metadata": {"name": "x",
        "finalizers": ["externalsecrets.external-secrets.io/ces-b"]}}))
    .unwrap();
    let got: Vec<String> = ces_for_namespace(&reader, &n)
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert_eq!(got, vec!["b"]);
    let n: Namespace = serde_json::from_value(json!({"metadata": {"name": "y"}})).unwrap();
    assert!(ces_for_namespace(&reader, &n).is_empty());
}

#[test]
fn a_foreign_external_secret_does_not_block_the_applied_generation() {
    assert!(only_foreign_failures(&[], ERR_ALREADY_EXISTS));
    assert!(only_foreign_failures(
        &[("a".into(), ERR_ALREADY_EXISTS.into())],
        ERR_ALREADY_EXISTS
    ));
    assert!(!only_foreign_failures(
        &[
            ("a".into(), ERR_ALREADY_EXISTS.into()),
            (
                "b".into(),
                "Operation cannot be fulfilled: the object has been modified".into()
            )
        ],
        ERR_ALREADY_EXISTS
    ));
}
