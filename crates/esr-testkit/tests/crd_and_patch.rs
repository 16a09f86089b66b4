//! CRD registration and semantics (defaults, pruning, validation, field validation), and patches
//! (merge, JSON, strategic, server-side apply with managedFields and conflicts).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![recursion_limit = "512"]

mod common;

use common::*;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use serde_json::json;

const W: &str = "/apis/test.esr.dev/v1/namespaces/default/widgets";

#[tokio::test]
async fn crd_registers_kinds_immediately_and_can_be_used_by_kube() {
    let s = start_with_widgets().await;
    let crd = get(
        &s,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.test.esr.dev",
    )
    .await;
    let conds = crd.body["status"]["conditions"].as_array().unwrap();
    assert!(
        conds
            .iter()
            .any(|c| c["type"] == "Established" && c["status"] == "True")
    );
    assert_eq!(crd.body["status"]["acceptedNames"]["kind"], "Widget");
    let gvk = GroupVersionKind::gvk("test.esr.dev", "v1", "Widget");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "widgets");
    let api: Api<DynamicObject> = Api::namespaced_with(s.client(), "default", &ar);
    let obj: DynamicObject = serde_json::from_value(widget("w1", "blue")).unwrap();
    let c = api.create(&PostParams::default(), &obj).await.unwrap();
    assert_eq!(c.data["spec"]["size"], 3);
    // the same object is visible through another served version
    let r = get(
        &s,
        "/apis/test.esr.dev/v1beta1/namespaces/default/widgets/w1",
    )
    .await;
    assert_eq!(r.code, 200);
    assert_eq!(r.body["apiVersion"], "test.esr.dev/v1beta1");
    // a cluster-scoped CRD
    let mut crd2 = widget_crd();
    crd2["metadata"]["name"] = json!("gadgets.test.esr.dev");
    crd2["spec"]["names"] = json!({"plural": "gadgets", "kind": "Gadget"});
    crd2["spec"]["scope"] = json!("Cluster");
    let r = post(
        &s,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        crd2,
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.text);
    let r = post(&s, "/apis/test.esr.dev/v1/gadgets", json!({"apiVersion": "test.esr.dev/v1", "kind": "Gadget", "metadata": {"name": "g"}, "spec": {"color": "red"}})).await;
    assert_eq!(r.code, 201, "{}", r.text);
    assert!(r.body["metadata"]["namespace"].is_null());
    // deleting the CRD removes its kinds and objects
    let r = raw(
        &s,
        "DELETE",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.test.esr.dev",
        "application/json",
        None,
    )
    .await;
    assert_eq!(r.code, 200);
    assert_eq!(get(&s, W).await.code, 404);
}

#[tokio::test]
async fn invalid_crds_are_rejected() {
    let s = start().await;
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let mut bad = widget_crd();
    bad["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-preserve-unknown-fields"] =
        json!(false);
    let r = post(&s, crds, bad).await;
    assert_eq!(r.code, 422, "{}", r.text);
    assert_eq!(r.body["reason"], "Invalid");
    assert!(
        r.body["message"]
            .as_str()
            .unwrap()
            .contains("x-kubernetes-preserve-unknown-fields"),
        "{}",
        r.text
    );
    // non-structural: a property without a type
    let mut bad = widget_crd();
    bad["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["color"] =
        json!({"enum": ["red"]});
    let r = post(&s, crds, bad).await;
    assert_eq!(r.code, 422, "{}", r.text);
    assert!(
        r.body["message"]
            .as_str()
            .unwrap()
            .contains("spec.versions[0].schema.openAPIV3Schema"),
        "{}",
        r.text
    );
    // wrong name
    let mut bad = widget_crd();
    bad["metadata"]["name"] = json!("wrong.test.esr.dev");
    assert_eq!(post(&s, crds, bad).await.code, 422);
    // nothing was registered
    assert_eq!(get(&s, "/apis/test.esr.dev/v1").await.code, 404);
}

#[tokio::test]
async fn schema_validation_defaults_and_pruning() {
    let s = start_with_widgets().await;
    // invalid enum, pattern, type, required → 422 Invalid
    let mut w = widget("bad", "purple");
    w["spec"]["name"] = json!("UPPER");
    w["spec"]["size"] = json!("big");
    let r = post(&s, W, w).await;
    assert_eq!(r.code, 422, "{}", r.text);
    assert_eq!(r.body["reason"], "Invalid");
    let fields: Vec<&str> = r.body["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["field"].as_str().unwrap())
        .collect();
    for f in ["spec.color", "spec.name", "spec.size"] {
        assert!(fields.contains(&f), "{f} not in {fields:?}");
    }
    assert!(
        r.body["message"]
            .as_str()
            .unwrap()
            .starts_with("Widget.test.esr.dev \"bad\" is invalid: ")
    );
    let r = post(&s, W, json!({"apiVersion": "test.esr.dev/v1", "kind": "Widget", "metadata": {"name": "noreq"}, "spec": {}})).await;
    assert_eq!(r.code, 422);
    assert_eq!(r.body["details"]["causes"][0]["field"], "spec.color");
    assert_eq!(
        r.body["details"]["causes"][0]["reason"],
        "FieldValueRequired"
    );
    // unknown fields: Strict → 400 with the real message
    let mut w = widget("u1", "red");
    w["spec"]["x"] = json!(1);
    w["spec"]["extra"] = json!({"anything": {"goes": true}});
    let r = post(&s, &format!("{W}?fieldValidation=Strict"), w.clone()).await;
    assert_eq!(r.code, 400);
    assert_eq!(r.body["reason"], "BadRequest");
    assert_eq!(
        r.body["message"],
        "Widget in version \"v1\" cannot be handled as a Widget: strict decoding error: unknown field \"spec.x\""
    );
    // Warn → created, pruned, Warning header
    let r = post(&s, &format!("{W}?fieldValidation=Warn"), w.clone()).await;
    assert_eq!(r.code, 201);
    assert!(r.body["spec"]["x"].is_null(), "pruned");
    assert_eq!(
        r.body["spec"]["extra"]["anything"]["goes"], true,
        "preserve-unknown-fields kept"
    );
    let warn = r.headers.get("warning").unwrap().to_str().unwrap();
    assert_eq!(warn, "299 - \"unknown field \\\"spec.x\\\"\"");
    // Ignore → pruned silently
    w["metadata"]["name"] = json!("u2");
    let r = post(&s, &format!("{W}?fieldValidation=Ignore"), w).await;
    assert_eq!(r.code, 201);
    assert!(r.headers.get("warning").is_none());
    assert!(r.body["spec"]["x"].is_null());
    // defaults on update too
    let r = patch(
        &s,
        &format!("{W}/u2"),
        "application/json-patch+json",
        json!([{"op": "remove", "path": "/spec/size"}]),
    )
    .await;
    assert_eq!(r.body["spec"]["size"], 3);
    // selectableFields
    let r = get(&s, &format!("{W}?fieldSelector=spec.color%3Dred")).await;
    assert_eq!(r.body["items"].as_array().unwrap().len(), 2);
    // strategic merge is not supported for custom resources
    let r = patch(
        &s,
        &format!("{W}/u2"),
        "application/strategic-merge-patch+json",
        json!({"spec": {"color": "blue"}}),
    )
    .await;
    assert_eq!(r.code, 415);
    // CRs need a resourceVersion on update
    let mut cur = get(&s, &format!("{W}/u2")).await.body;
    cur["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    let r = raw(&s, "PUT", &format!("{W}/u2"), "application/json", Some(cur)).await;
    assert_eq!(r.code, 422);
}

#[tokio::test]
async fn merge_json_and_dry_run_patches() {
    let s = start_with_widgets().await;
    post(&s, W, widget("p", "red")).await;
    let r = patch(
        &s,
        &format!("{W}/p"),
        "application/merge-patch+json",
        json!({"spec": {"tags": ["a"], "size": null}}),
    )
    .await;
    assert_eq!(r.body["spec"]["tags"], json!(["a"]));
    assert_eq!(
        r.body["spec"]["size"], 3,
        "null removes, then the default comes back"
    );
    let r = patch(&s, &format!("{W}/p"), "application/json-patch+json", json!([{"op": "test", "path": "/spec/color", "value": "blue"}, {"op": "replace", "path": "/spec/color", "value": "green"}])).await;
    assert_eq!(r.code, 422, "failed test op");
    let r = patch(&s, &format!("{W}/p"), "application/json-patch+json", json!([{"op": "test", "path": "/spec/color", "value": "red"}, {"op": "replace", "path": "/spec/color", "value": "green"}])).await;
    assert_eq!(r.body["spec"]["color"], "green");
    let rv = r.body["metadata"]["resourceVersion"].clone();
    let r = patch(
        &s,
        &format!("{W}/p?dryRun=All"),
        "application/merge-patch+json",
        json!({"spec": {"color": "blue"}}),
    )
    .await;
    assert_eq!(r.body["spec"]["color"], "blue");
    assert_eq!(
        get(&s, &format!("{W}/p")).await.body["spec"]["color"],
        "green",
        "dry run stored nothing"
    );
    // resourceVersion precondition in a patch
    let r = patch(
        &s,
        &format!("{W}/p"),
        "application/merge-patch+json",
        json!({"metadata": {"resourceVersion": "1"}, "spec": {"color": "blue"}}),
    )
    .await;
    assert_eq!(r.code, 409);
    let r = patch(
        &s,
        &format!("{W}/p"),
        "application/merge-patch+json",
        json!({"metadata": {"resourceVersion": rv}, "spec": {"color": "blue"}}),
    )
    .await;
    assert_eq!(r.code, 200);
    // managedFields track Update operations with "." for structs, like the real server
    let mf = &r.body["metadata"]["managedFields"];
    assert!(
        mf.as_array()
            .unwrap()
            .iter()
            .all(|e| e["operation"] == "Update" && e["fieldsType"] == "FieldsV1")
    );
}

#[tokio::test]
async fn server_side_apply() {
    let s = start().await;
    let ssa = |m: &str| format!("/api/v1/namespaces/default/secrets/ssa?fieldManager={m}");
    let apply = "application/apply-patch+yaml";
    let cfg = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "ssa", "labels": {"a": "1"}}, "data": {"k": "dg=="}});
    // fieldManager is required
    let r = patch(
        &s,
        "/api/v1/namespaces/default/secrets/ssa",
        apply,
        cfg.clone(),
    )
    .await;
    assert_eq!(r.code, 422);
    assert_eq!(
        r.body["message"],
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
    );
    // creates the missing object (201) with the Apply entry of the real server
    let r = patch(&s, &ssa("esr"), apply, cfg.clone()).await;
    assert_eq!(r.code, 201, "{}", r.text);
    let mf = &r.body["metadata"]["managedFields"][0];
    assert_eq!(mf["manager"], "esr");
    assert_eq!(mf["operation"], "Apply");
    assert_eq!(
        mf["fieldsV1"],
        json!({"f:data": {"f:k": {}}, "f:metadata": {"f:labels": {"f:a": {}}}})
    );
    assert_eq!(r.body["type"], "Opaque");
    // another manager, same field, different value → 409 with the real message
    let other = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "ssa", "labels": {"a": "2"}}});
    let r = patch(&s, &ssa("other"), apply, other.clone()).await;
    assert_eq!(
        r.body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "Apply failed with 1 conflict: conflict with \"esr\": .metadata.labels.a", "reason": "Conflict",
            "details": {"causes": [{"reason": "FieldManagerConflict", "message": "conflict with \"esr\"", "field": ".metadata.labels.a"}]},
            "code": 409})
    );
    // same value → shared ownership, no conflict
    let same = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "ssa", "labels": {"a": "1"}}});
    assert_eq!(patch(&s, &ssa("third"), apply, same).await.code, 200);
    // force takes ownership
    let r = patch(&s, &format!("{}&force=true", ssa("other")), apply, other).await;
    assert_eq!(r.code, 200, "{}", r.text);
    assert_eq!(r.body["metadata"]["labels"]["a"], "2");
    let esr_entry = r.body["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["manager"] == "esr")
        .unwrap()
        .clone();
    assert_eq!(
        esr_entry["fieldsV1"],
        json!({"f:data": {"f:k": {}}}),
        "esr lost the label"
    );
    // esr applies again without the data key and with a new one: k is removed, k2 added
    let cfg2 = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "ssa"}, "data": {"k2": "dg=="}});
    let r = patch(&s, &ssa("esr"), apply, cfg2).await;
    assert_eq!(r.body["data"], json!({"k2": "dg=="}));
    assert_eq!(
        r.body["metadata"]["labels"]["a"], "2",
        "other's field stays"
    );
    // conflicts with an Update manager name the manager, apiVersion and time
    let r = patch(
        &s,
        "/api/v1/namespaces/default/secrets/ssa?fieldManager=kubectl-edit",
        "application/merge-patch+json",
        json!({"data": {"k2": "eA=="}}),
    )
    .await;
    assert_eq!(r.code, 200);
    let r = patch(&s, &ssa("esr"), apply, json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "ssa"}, "data": {"k2": "dg=="}})).await;
    assert_eq!(r.code, 409);
    let msg = r.body["message"].as_str().unwrap();
    assert!(
        msg.starts_with(
            "Apply failed with 1 conflict: conflict with \"kubectl-edit\" using v1 at "
        ),
        "{msg}"
    );
    assert!(msg.ends_with(": .data.k2"), "{msg}");
    // kube-rs Patch::Apply
    let api: Api<Secret> = Api::namespaced(s.client(), "default");
    let pp = PatchParams::apply("esr").force();
    let out = api.patch("kube-ssa", &pp, &Patch::Apply(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "kube-ssa"}, "stringData": {"a": "b"}}))).await.unwrap();
    assert_eq!(out.data.unwrap()["a"].0, b"b");
}

#[tokio::test]
async fn server_side_apply_list_types() {
    let s = start_with_widgets().await;
    let apply = "application/apply-patch+yaml";
    let url = |m: &str| format!("{W}/lists?fieldManager={m}");
    let a = json!({"apiVersion": "test.esr.dev/v1", "kind": "Widget", "metadata": {"name": "lists", "finalizers": ["a/one"]},
        "spec": {"color": "red", "tags": ["x"], "ports": [{"name": "http", "port": 80}]}});
    assert_eq!(patch(&s, &url("m1"), apply, a).await.code, 201);
    let b = json!({"apiVersion": "test.esr.dev/v1", "kind": "Widget", "metadata": {"name": "lists", "finalizers": ["b/two"]},
        "spec": {"tags": ["y"], "ports": [{"name": "grpc", "port": 90}]}});
    let r = patch(&s, &url("m2"), apply, b).await;
    assert_eq!(r.code, 200, "{}", r.text);
    assert_eq!(
        r.body["metadata"]["finalizers"],
        json!(["a/one", "b/two"]),
        "finalizers merge as a set"
    );
    assert_eq!(r.body["spec"]["tags"], json!(["x", "y"]), "list-type set");
    assert_eq!(
        r.body["spec"]["ports"].as_array().unwrap().len(),
        2,
        "list-type map by name"
    );
    let m2 = r.body["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["manager"] == "m2")
        .unwrap()
        .clone();
    assert_eq!(
        m2["fieldsV1"]["f:spec"]["f:ports"]["k:{\"name\":\"grpc\"}"],
        json!({".": {}, "f:name": {}, "f:port": {}})
    );
    assert_eq!(
        m2["fieldsV1"]["f:metadata"]["f:finalizers"],
        json!({"v:\"b/two\"": {}})
    );
    // m2 stops applying its port: only its item goes
    let b2 = json!({"apiVersion": "test.esr.dev/v1", "kind": "Widget", "metadata": {"name": "lists"}, "spec": {"tags": ["y"]}});
    let r = patch(&s, &url("m2"), apply, b2).await;
    assert_eq!(
        r.body["spec"]["ports"],
        json!([{"name": "http", "port": 80}])
    );
    assert_eq!(r.body["metadata"]["finalizers"], json!(["a/one"]));
}

#[tokio::test]
async fn table_responses_for_kubectl_get() {
    let s = start_with_widgets().await;
    post(&s, W, widget("t1", "red")).await;
    let accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
    let r = get_accept(&s, W, accept).await;
    assert_eq!(r.body["kind"], "Table");
    assert_eq!(r.body["apiVersion"], "meta.k8s.io/v1");
    let cols: Vec<&str> = r.body["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    // As the apiserver: the CRD's printer columns replace the default Age column.
    assert_eq!(cols, ["Name", "Color"]);
    let row = &r.body["rows"][0];
    assert_eq!(row["cells"][0], "t1");
    assert_eq!(row["cells"][1], "red");
    assert_eq!(row["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(row["object"]["metadata"]["name"], "t1");
    let r = get_accept(&s, "/api/v1/namespaces", accept).await;
    let cols: Vec<&str> = r.body["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(cols, ["Name", "Status", "Age"]);
    // plain JSON without the Table accept
    assert_eq!(get(&s, W).await.body["kind"], "WidgetList");
}
