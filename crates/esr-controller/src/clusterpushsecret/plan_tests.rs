use super::*;
use crate::common::namespaces::*;
use kube::runtime::{reflector, watcher};
use serde_json::json;

fn cps(spec: serde_json::Value) -> ClusterPushSecret {
    serde_json::from_value(json!({
        "apiVersion": "external-secrets.io/v1alpha1", "kind": "ClusterPushSecret",
        "metadata": {"name": "push-all", "uid": "u-1", "generation": 2},
        "spec": spec
    }))
    .unwrap()
}

fn base_spec() -> serde_json::Value {
    json!({
        "pushSecretSpec": {
            "secretStoreRefs": [{"name": "k8s", "kind": "SecretStore"}],
            "selector": {"secret": {"name": "src"}},
            "data": [{"match": {"secretKey": "crt", "remoteRef": {"remoteKey": "pushed"}}}]
        },
        "namespaceSelectors": [{"matchLabels": {"push": "yes"}}]
    })
}

fn ns(name: &str, labels: &[(&str, &str)]) -> NsView {
    NsView::live(name, labels)
}

fn ps_ref(ns: &str, name: &str, owned: bool) -> PsRef {
    PsRef {
        namespace: ns.to_string(),
        name: name.to_string(),
        owned,
    }
}

fn world() -> Vec<NsView> {
    vec![
        ns("a", &[("push", "yes")]),
        ns("b", &[("push", "yes"), ("tier", "db")]),
        ns("c", &[("push", "no")]),
        ns("d", &[]),
    ]
}

#[test]
fn names_and_refresh_defaults() {
    let c = cps(base_spec());
    assert_eq!(ps_name(&c), "push-all");
    let mut spec = base_spec();
    spec["pushSecretName"] = json!("custom");
    spec["refreshTime"] = json!("30s");
    let c = cps(spec);
    assert_eq!(ps_name(&c), "custom");
    assert_eq!(refresh_interval(&c.spec), Some(Duration::from_secs(30)));
    assert_eq!(
        refresh_interval(&cps(base_spec()).spec),
        Some(Duration::from_secs(3600))
    );
    let mut spec = base_spec();
    spec["refreshTime"] = json!("0s");
    assert_eq!(refresh_interval(&cps(spec).spec), None);
}

#[test]
fn plan_selects_ored_label_selectors_only() {
    let mut spec = base_spec();
    spec["namespaceSelectors"] = json!([
        {"matchLabels": {"tier": "db"}},
        {"matchExpressions": [{"key": "push", "operator": "In", "values": ["no"]}]}
    ]);
    let c = cps(spec);
    let p = plan(&selection(&c.spec), "push-all", &world(), &[]);
    assert_eq!(p.apply, vec!["b", "c"]);
    assert!(p.failed.is_empty() && p.delete_old.is_empty() && p.delete_outdated.is_empty());
    assert_eq!(p.select_error, None);

    // No selectors select nothing (ESO lists namespaces per selector).
    let mut spec = base_spec();
    spec["namespaceSelectors"] = json!([]);
    let p = plan(&selection(&cps(spec).spec), "push-all", &world(), &[]);
    assert!(p.apply.is_empty());

    // An empty selector selects every namespace.
    let mut spec = base_spec();
    spec["namespaceSelectors"] = json!([{}]);
    let p = plan(&selection(&cps(spec).spec), "push-all", &world(), &[]);
    assert_eq!(p.apply, vec!["a", "b", "c", "d"]);
}

#[test]
fn plan_removes_from_namespaces_that_stop_matching_and_old_names() {
    let c = cps(base_spec());
    let existing = vec![
        ps_ref("a", "push-all", true),
        ps_ref("c", "push-all", true),  // c no longer matches
        ps_ref("b", "old-name", true),  // pushSecretName changed
        ps_ref("d", "old-name", false), // not ours: never touched
        ps_ref("d", "other", false),
    ];
    let p = plan(&selection(&c.spec), "push-all", &world(), &existing);
    assert_eq!(p.apply, vec!["a", "b"]);
    assert_eq!(
        p.delete_outdated,
        vec![("c".to_string(), "push-all".to_string())]
    );
    assert_eq!(
        p.delete_old,
        vec![("b".to_string(), "old-name".to_string())]
    );
    assert!(p.failed.is_empty());
}

#[test]
fn foreign_push_secret_is_a_failure_and_never_touched() {
    let c = cps(base_spec());
    let existing = vec![ps_ref("b", "push-all", false)];
    let p = plan(&selection(&c.spec), "push-all", &world(), &existing);
    assert_eq!(p.apply, vec!["a"]);
    assert_eq!(
        p.failed,
        vec![("b".to_string(), ERR_ALREADY_EXISTS.to_string())]
    );
    assert!(p.delete_outdated.is_empty() && p.delete_old.is_empty());
    // A foreign one in a namespace that does not match is none of our business.
    let existing = vec![ps_ref("c", "push-all", false)];
    let p = plan(&selection(&c.spec), "push-all", &world(), &existing);
    assert!(p.failed.is_empty() && p.delete_outdated.is_empty());
}

#[test]
fn terminating_namespaces_are_skipped_and_not_cleaned() {
    let c = cps(base_spec());
    let mut w = world();
    w[0].terminating = true;
    let existing = vec![ps_ref("a", "push-all", true), ps_ref("a", "old", true)];
    let p = plan(&selection(&c.spec), "push-all", &w, &existing);
    assert_eq!(p.apply, vec!["b"]);
    assert!(p.delete_outdated.is_empty() && p.delete_old.is_empty());
}

#[test]
fn invalid_selector_is_a_select_error_after_old_name_cleanup() {
    let mut spec = base_spec();
    spec["namespaceSelectors"] =
        json!([{"matchExpressions": [{"key": "push", "operator": "In", "values": []}]}]);
    let c = cps(spec);
    let existing = vec![ps_ref("a", "old", true), ps_ref("a", "push-all", true)];
    let p = plan(&selection(&c.spec), "push-all", &world(), &existing);
    assert!(
        p.select_error
            .as_ref()
            .unwrap()
            .to_string()
            .contains("values set can't be empty")
    );
    assert_eq!(p.delete_old, vec![("a".to_string(), "old".to_string())]);
    assert!(p.apply.is_empty() && p.delete_outdated.is_empty());
}

#[test]
fn status_sorted_with_eso_ready_condition() {
    let st = status(None, "push-all", vec!["b".into(), "a".into()], vec![]);
    assert_eq!(
        serde_json::to_value(&st).unwrap(),
        json!({"provisionedNamespaces": ["a", "b"], "pushSecretName": "push-all",
               "conditions": [{"type": "Ready", "status": "True"}]})
    );
    let st = status(
        Some(&st),
        "push-all",
        vec!["a".into()],
        vec![
            ("z".into(), ERR_ALREADY_EXISTS.into()),
            ("c".into(), "boom".into()),
        ],
    );
    assert_eq!(
        serde_json::to_value(&st).unwrap(),
        json!({"provisionedNamespaces": ["a"], "pushSecretName": "push-all",
               "failedNamespaces": [{"namespace": "c", "reason": "boom"},
                                    {"namespace": "z", "reason": ERR_ALREADY_EXISTS}],
               "conditions": [{"type": "Ready", "status": "False",
                               "message": "one or more namespaces failed"}]})
    );
    // Other condition types are kept; Ready is replaced.
    let mut prev = st.clone();
    prev.conditions.as_mut().unwrap().insert(
        0,
        PushSecretStatusCondition {
            type_: "Other".into(),
            status: "True".into(),
            ..Default::default()
        },
    );
    let st = status(Some(&prev), "push-all", vec![], vec![]);
    let types: Vec<(&str, &str)> = st
        .conditions
        .as_ref()
        .unwrap()
        .iter()
        .map(|c| (c.type_.as_str(), c.status.as_str()))
        .collect();
    assert_eq!(types, vec![("Other", "True"), ("Ready", "True")]);
    assert_eq!(st.provisioned_namespaces, None);
    assert_eq!(st.failed_namespaces, None);
}

fn t(s: i64) -> Time {
    Time(k8s_openapi::jiff::Timestamp::from_second(s).unwrap())
}

#[test]
fn errored_status_keeps_transition_time_and_provisioned() {
    let ok = status(None, "old", vec!["a".into()], vec![]);
    let st = errored_status(Some(&ok), "new", MSG_TARGET_NAMESPACES, None, t(100));
    let ready = st.conditions.as_ref().unwrap().last().unwrap().clone();
    assert_eq!(ready.status, "False");
    assert_eq!(ready.reason.as_deref(), Some("Errored"));
    assert_eq!(ready.message.as_deref(), Some(MSG_TARGET_NAMESPACES));
    assert_eq!(ready.last_transition_time, Some(t(100)));
    assert_eq!(st.push_secret_name.as_deref(), Some("new"));
    assert_eq!(st.provisioned_namespaces, Some(vec!["a".to_string()]));

    // Same status again: condition unchanged, time kept.
    let again = errored_status(Some(&st), "new", MSG_TARGET_NAMESPACES, None, t(200));
    assert_eq!(again, st);
    // Other message, still False: time kept, failures replaced.
    let other = errored_status(
        Some(&st),
        "new",
        MSG_DELETE_OLD,
        Some(vec![("a".into(), "denied".into())]),
        t(300),
    );
    let ready = other.conditions.as_ref().unwrap().last().unwrap();
    assert_eq!(ready.message.as_deref(), Some(MSG_DELETE_OLD));
    assert_eq!(ready.last_transition_time, Some(t(100)));
    assert_eq!(
        other.failed_namespaces,
        Some(vec![ClusterPushSecretNamespaceFailure {
            namespace: "a".into(),
            reason: Some("denied".into())
        }])
    );
}

#[test]
fn desired_push_secret_has_metadata_spec_and_controller_ref() {
    let mut spec = base_spec();
    spec["pushSecretMetadata"] = json!({"labels": {"team": "x"}, "annotations": {"a": "1"}});
    let c = cps(spec);
    let ps = desired_ps(&c, "a");
    let v = serde_json::to_value(&ps).unwrap();
    assert_eq!(v["metadata"]["name"], "push-all");
    assert_eq!(v["metadata"]["namespace"], "a");
    assert_eq!(v["metadata"]["labels"], json!({"team": "x"}));
    assert_eq!(v["metadata"]["annotations"], json!({"a": "1"}));
    assert_eq!(
        v["metadata"]["ownerReferences"],
        json!([{"apiVersion": "external-secrets.io/v1alpha1", "kind": "ClusterPushSecret",
                "name": "push-all", "uid": "u-1", "controller": true, "blockOwnerDeletion": true}])
    );
    assert_eq!(v["spec"]["selector"], json!({"secret": {"name": "src"}}));
    assert!(owned_by(&ps, "push-all"));
    assert!(!owned_by(&ps, "other"));
    assert_eq!(controller_name(&ps), Some("push-all"));

    // A PushSecret controlled by something else, or only referencing us, is not owned.
    let mut foreign = ps.clone();
    foreign.metadata.owner_references.as_mut().unwrap()[0].kind = "ClusterExternalSecret".into();
    assert!(!owned_by(&foreign, "push-all"));
    let mut weak = ps.clone();
    weak.metadata.owner_references.as_mut().unwrap()[0].controller = None;
    assert!(!owned_by(&weak, "push-all"));
}

#[test]
fn update_replaces_metadata_and_spec_keeping_other_owners_and_finalizers() {
    let c = cps(base_spec());
    let existing: PushSecret = serde_json::from_value(json!({
        "apiVersion": "external-secrets.io/v1alpha1", "kind": "PushSecret",
        "metadata": {"name": "push-all", "namespace": "a", "resourceVersion": "7",
                     "labels": {"stale": "1"}, "finalizers": ["pushsecret.externalsecrets.io/finalizer"],
                     "ownerReferences": [
                        {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm", "uid": "cm-1"},
                        {"apiVersion": "external-secrets.io/v1alpha1", "kind": "ClusterPushSecret",
                         "name": "push-all", "uid": "old-uid", "controller": true}]},
        "spec": {"secretStoreRefs": [], "selector": {"secret": {"name": "old"}}},
        "status": {"refreshTime": null}
    }))
    .unwrap();
    let u = updated_ps(&c, &existing);
    let v = serde_json::to_value(&u).unwrap();
    assert_eq!(v["metadata"]["resourceVersion"], "7");
    assert_eq!(v["metadata"]["labels"], json!({}));
    assert_eq!(
        v["metadata"]["finalizers"],
        json!(["pushsecret.externalsecrets.io/finalizer"])
    );
    let owners = v["metadata"]["ownerReferences"].as_array().unwrap();
    assert_eq!(owners.len(), 2);
    assert_eq!(owners[0]["uid"], "cm-1");
    assert_eq!(owners[1]["uid"], "u-1");
    assert_eq!(v["spec"]["selector"], json!({"secret": {"name": "src"}}));
    assert!(v.get("status").is_none() || v["status"].is_null());
    // The old-uid owner made it "owned" by name (as ESO) but not up to date.
    assert!(owned_by(&existing, "push-all"));
    assert!(!ps_up_to_date(&c, &existing, true));
}

#[test]
fn up_to_date_detection_tolerates_server_defaults() {
    let c = cps(base_spec());
    let mut server: serde_json::Value = serde_json::to_value(desired_ps(&c, "a")).unwrap();
    server["spec"]["refreshInterval"] = json!("1h0m0s");
    server["spec"]["updatePolicy"] = json!("Replace");
    server["metadata"]["resourceVersion"] = json!("3");
    let server: PushSecret = serde_json::from_value(server).unwrap();
    assert!(ps_up_to_date(&c, &server, true));
    // Until the current generation was fully applied once, an update is forced.
    assert!(!ps_up_to_date(&c, &server, false));
    // A changed spec field is detected.
    let mut edited = serde_json::to_value(&server).unwrap();
    edited["spec"]["selector"]["secret"]["name"] = json!("other");
    let edited: PushSecret = serde_json::from_value(edited).unwrap();
    assert!(!ps_up_to_date(&c, &edited, true));
    // Label drift is detected.
    let mut drift = server.clone();
    drift
        .metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert("x".into(), "y".into());
    assert!(!ps_up_to_date(&c, &drift, true));
}

#[test]
fn namespace_and_push_secret_events_map_to_cluster_push_secrets() {
    let (reader, mut writer) = reflector::store::<ClusterPushSecret>();
    let mut listed = cps(base_spec());
    listed.status = Some(ClusterPushSecretStatus {
        provisioned_namespaces: Some(vec!["old-ns".into()]),
        ..Default::default()
    });
    let mut other_spec = base_spec();
    other_spec["namespaceSelectors"] = json!([{"matchLabels": {"tier": "db"}}]);
    other_spec["pushSecretName"] = json!("db-push");
    let mut other: ClusterPushSecret = cps(other_spec);
    other.metadata.name = Some("db".into());
    writer.apply_watcher_event(&watcher::Event::Apply(listed.clone()));
    writer.apply_watcher_event(&watcher::Event::Apply(other.clone()));

    let namespace = |name: &str, labels: serde_json::Value| -> Namespace {
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap()
    };
    let names = |refs: Vec<ObjectRef<ClusterPushSecret>>| {
        let mut n: Vec<String> = refs.into_iter().map(|r| r.name).collect();
        n.sort();
        n
    };
    assert_eq!(
        names(cps_for_namespace(
            &reader,
            &namespace("x", json!({"push": "yes"}))
        )),
        vec!["push-all"]
    );
    assert_eq!(
        names(cps_for_namespace(
            &reader,
            &namespace("x", json!({"push": "yes", "tier": "db"}))
        )),
        vec!["db", "push-all"]
    );
    // Stopped matching but still provisioned: the owner must clean up.
    assert_eq!(
        names(cps_for_namespace(&reader, &namespace("old-ns", json!({})))),
        vec!["push-all"]
    );
    assert!(cps_for_namespace(&reader, &namespace("y", json!({}))).is_empty());

    let owned = desired_ps(&other, "n");
    assert_eq!(names(cps_for_ps(&reader, &owned)), vec!["db"]);
    let foreign: PushSecret = serde_json::from_value(json!({
        "metadata": {"name": "push-all", "namespace": "n"},
        "spec": {"secretStoreRefs": [], "selector": {"secret": {"name": "s"}}}
    }))
    .unwrap();
    assert_eq!(names(cps_for_ps(&reader, &foreign)), vec!["push-all"]);
}
