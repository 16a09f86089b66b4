//! Discovery, built-in kinds, object semantics, errors, selectors, namespaces, finalizers, GC, tokens.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![recursion_limit = "512"]

mod common;

use common::*;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, ServiceAccount};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

#[tokio::test]
async fn discovery_endpoints() {
    let s = start_with_widgets().await;
    let v = get(&s, "/version").await;
    assert_eq!(v.code, 200);
    assert_eq!(v.body["major"], "1");
    for p in ["/healthz", "/readyz", "/livez"] {
        let r = get(&s, p).await;
        assert_eq!((r.code, r.text.as_str()), (200, "ok"), "{p}");
    }
    let api = get(&s, "/api").await;
    assert_eq!(api.body["kind"], "APIVersions");
    assert_eq!(api.body["versions"], json!(["v1"]));
    let v1 = get(&s, "/api/v1").await;
    let names: Vec<&str> = v1.body["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    for n in [
        "namespaces",
        "secrets",
        "configmaps",
        "serviceaccounts",
        "serviceaccounts/token",
        "events",
        "namespaces/status",
    ] {
        assert!(names.contains(&n), "{n} missing from {names:?}");
    }
    let apis = get(&s, "/apis").await;
    let groups: Vec<&str> = apis.body["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    for g in [
        "apps",
        "events.k8s.io",
        "coordination.k8s.io",
        "authentication.k8s.io",
        "apiextensions.k8s.io",
        "test.esr.dev",
    ] {
        assert!(groups.contains(&g), "{g} missing");
    }
    let tg = apis.body["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "test.esr.dev")
        .unwrap();
    // v1alpha1 is not served; v1 preferred over v1beta1
    assert_eq!(tg["versions"].as_array().unwrap().len(), 2);
    assert_eq!(tg["preferredVersion"]["version"], "v1");
    let gv = get(&s, "/apis/test.esr.dev/v1").await;
    assert_eq!(gv.body["groupVersion"], "test.esr.dev/v1");
    let res = &gv.body["resources"][0];
    assert_eq!(res["name"], "widgets");
    assert_eq!(res["kind"], "Widget");
    assert_eq!(res["namespaced"], true);
    assert_eq!(res["shortNames"], json!(["wd"]));
    assert_eq!(res["categories"], json!(["esr-test"]));
    assert_eq!(
        res["verbs"],
        json!([
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "create",
            "update",
            "watch"
        ])
    );
    assert_eq!(gv.body["resources"][1]["name"], "widgets/status");
    assert_eq!(
        gv.body["resources"][1]["verbs"],
        json!(["get", "patch", "update"])
    );
    assert_eq!(get(&s, "/apis/test.esr.dev/v1alpha1").await.code, 404);
    assert_eq!(
        get(&s, "/apis/test.esr.dev/v1alpha1/namespaces/default/widgets")
            .await
            .code,
        404
    );
    let g = get(&s, "/apis/test.esr.dev").await;
    assert_eq!(g.body["kind"], "APIGroup");
    // kube-rs discovery works end to end
    let d = kube::Discovery::new(s.client()).run().await.unwrap();
    assert!(d.groups().any(|g| g.name() == "test.esr.dev"));
    // OpenAPI v3 advertises fieldValidation on PATCH, with the GVK extension
    let idx = get(&s, "/openapi/v3").await;
    let url = idx.body["paths"]["apis/test.esr.dev/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap()
        .to_string();
    let doc = get(&s, &url).await;
    let p =
        &doc.body["paths"]["/apis/test.esr.dev/v1/namespaces/{namespace}/widgets/{name}"]["patch"];
    assert_eq!(p["x-kubernetes-group-version-kind"]["kind"], "Widget");
    assert!(
        p["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["name"] == "fieldValidation")
    );
    assert!(doc.body["components"]["schemas"]["dev.esr.test.v1.Widget"]["properties"]["spec"]["properties"]["color"].is_object());
    assert_eq!(get(&s, "/openapi/v2").await.code, 404);
}

#[tokio::test]
async fn create_get_update_delete_secret() {
    let s = start().await;
    let api: Api<Secret> = Api::namespaced(s.client(), "default");
    let sec: Secret = serde_json::from_value(json!({
        "metadata": {"name": "s1", "labels": {"a": "1"}},
        "stringData": {"user": "admin"},
        "data": {"pw": "c2VjcmV0"}
    }))
    .unwrap();
    let c = api.create(&PostParams::default(), &sec).await.unwrap();
    let md = &c.metadata;
    assert!(md.uid.is_some() && md.creation_timestamp.is_some() && md.resource_version.is_some());
    assert_eq!(md.generation, None, "secrets have no generation");
    assert!(c.string_data.is_none(), "stringData is folded into data");
    let data = c.data.clone().unwrap();
    assert_eq!(data["user"].0, b"admin");
    assert_eq!(data["pw"].0, b"secret");
    assert_eq!(c.type_.as_deref(), Some("Opaque"));
    // AlreadyExists
    let e = api.create(&PostParams::default(), &sec).await.unwrap_err();
    match e {
        kube::Error::Api(s) => {
            assert_eq!((s.code, s.reason.as_str()), (409, "AlreadyExists"));
            assert_eq!(s.message, "secrets \"s1\" already exists");
        }
        other => panic!("{other}"),
    }
    // update with the current resourceVersion works, a stale one conflicts
    let mut cur = api.get("s1").await.unwrap();
    let stale = cur.clone();
    cur.metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("b".into(), "2".into());
    let upd = api
        .replace("s1", &PostParams::default(), &cur)
        .await
        .unwrap();
    let rv1: u64 = c.metadata.resource_version.unwrap().parse().unwrap();
    let rv2: u64 = upd
        .metadata
        .resource_version
        .clone()
        .unwrap()
        .parse()
        .unwrap();
    assert!(rv2 > rv1, "global monotonic resourceVersion");
    match api
        .replace("s1", &PostParams::default(), &stale)
        .await
        .unwrap_err()
    {
        kube::Error::Api(s) => {
            assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
            assert_eq!(
                s.message,
                "Operation cannot be fulfilled on secrets \"s1\": the object has been modified; please apply your changes to the latest version and try again"
            );
        }
        other => panic!("{other}"),
    }
    // no-op update does not bump resourceVersion
    let same = api
        .replace("s1", &PostParams::default(), &upd)
        .await
        .unwrap();
    assert_eq!(
        same.metadata.resource_version,
        upd.metadata.resource_version
    );
    // delete → Status Success, then NotFound
    let r = api.delete("s1", &DeleteParams::default()).await.unwrap();
    assert!(r.is_right(), "secrets answer a Status on delete");
    match api.get("s1").await.unwrap_err() {
        kube::Error::Api(s) => {
            assert_eq!((s.code, s.reason.as_str()), (404, "NotFound"));
            assert_eq!(s.message, "secrets \"s1\" not found");
        }
        other => panic!("{other}"),
    }
}

#[tokio::test]
async fn status_bodies_match_the_real_apiserver() {
    let s = start().await;
    let r = get(&s, "/api/v1/namespaces/default/secrets/nope").await;
    assert_eq!(
        r.body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "secrets \"nope\" not found", "reason": "NotFound", "details": {"name": "nope", "kind": "secrets"}, "code": 404})
    );
    let r = get(&s, "/api/v1/secrets?labelSelector=a%20in%20(").await;
    assert_eq!(
        r.body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "unable to parse requirement: found '', expected: ',', ')' or identifier", "reason": "BadRequest", "code": 400})
    );
    let r = raw(
        &s,
        "PUT",
        "/api/v1/namespaces/default/secrets",
        "application/json",
        Some(json!({})),
    )
    .await;
    assert_eq!(
        (r.code, r.body["reason"].as_str()),
        (405, Some("MethodNotAllowed"))
    );
    let r = get(&s, "/apis/nope.io/v1/things").await;
    assert_eq!(r.code, 404);
    // immutable secret
    let r = post(&s, "/api/v1/namespaces/default/secrets",
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "imm"}, "immutable": true, "data": {"k": "dg=="}})).await;
    assert_eq!(r.code, 201);
    let r = patch(
        &s,
        "/api/v1/namespaces/default/secrets/imm",
        "application/merge-patch+json",
        json!({"data": {"k": "dw=="}}),
    )
    .await;
    assert_eq!(
        r.body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "Secret \"imm\" is invalid: data: Forbidden: field is immutable when `immutable` is set",
            "reason": "Invalid",
            "details": {"name": "imm", "kind": "Secret", "causes": [{"reason": "FieldValueForbidden", "message": "Forbidden: field is immutable when `immutable` is set", "field": "data"}]},
            "code": 422})
    );
    // immutable configmap
    let cms: Api<ConfigMap> = Api::namespaced(s.client(), "default");
    let cm: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "c"}, "immutable": true, "data": {"a": "1"}}),
    )
    .unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();
    let e = cms
        .patch(
            "c",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"a": "2"}})),
        )
        .await
        .unwrap_err();
    assert!(matches!(e, kube::Error::Api(ref s) if s.code == 422), "{e}");
    // labels can still change on an immutable configmap
    cms.patch(
        "c",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn generate_name_and_name_validation() {
    let s = start().await;
    let api: Api<ConfigMap> = Api::namespaced(s.client(), "default");
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"generateName": "gen-"}})).unwrap();
    let a = api.create(&PostParams::default(), &cm).await.unwrap();
    let b = api.create(&PostParams::default(), &cm).await.unwrap();
    let (na, nb) = (a.metadata.name.unwrap(), b.metadata.name.unwrap());
    assert!(na.starts_with("gen-") && na.len() == 9, "{na}");
    assert_ne!(na, nb);
    let bad: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "Bad_Name"}})).unwrap();
    let e = api.create(&PostParams::default(), &bad).await.unwrap_err();
    assert!(
        matches!(e, kube::Error::Api(ref s) if s.code == 422 && s.reason == "Invalid"),
        "{e}"
    );
}

#[tokio::test]
async fn selectors_and_pagination() {
    let s = start().await;
    let api: Api<ConfigMap> = Api::namespaced(s.client(), "default");
    for (i, (env, tier)) in [("prod", "a"), ("prod", "b"), ("dev", "a"), ("test", "")]
        .iter()
        .enumerate()
    {
        let mut labels = json!({"env": env});
        if !tier.is_empty() {
            labels["tier"] = json!(tier);
        }
        let cm: ConfigMap = serde_json::from_value(
            json!({"metadata": {"name": format!("c{i}"), "labels": labels}}),
        )
        .unwrap();
        api.create(&PostParams::default(), &cm).await.unwrap();
    }
    let names = |l: kube::core::ObjectList<ConfigMap>| -> Vec<String> {
        l.items
            .into_iter()
            .map(|c| c.metadata.name.unwrap())
            .collect()
    };
    let q = |sel: &str| ListParams::default().labels(sel);
    assert_eq!(names(api.list(&q("env=prod")).await.unwrap()), ["c0", "c1"]);
    assert_eq!(
        names(api.list(&q("env==prod,tier=b")).await.unwrap()),
        ["c1"]
    );
    assert_eq!(
        names(api.list(&q("env!=prod")).await.unwrap()),
        ["c2", "c3"]
    );
    assert_eq!(
        names(api.list(&q("env in (dev,test)")).await.unwrap()),
        ["c2", "c3"]
    );
    assert_eq!(
        names(api.list(&q("env notin (dev,test)")).await.unwrap()),
        ["c0", "c1"]
    );
    assert_eq!(
        names(api.list(&q("tier")).await.unwrap()),
        ["c0", "c1", "c2"]
    );
    assert_eq!(names(api.list(&q("!tier")).await.unwrap()), ["c3"]);
    let f = ListParams::default().fields("metadata.name=c2");
    assert_eq!(names(api.list(&f).await.unwrap()), ["c2"]);
    let f = ListParams::default().fields("metadata.name!=c2,metadata.namespace=default");
    assert_eq!(names(api.list(&f).await.unwrap()), ["c0", "c1", "c3"]);
    let bad = get(
        &s,
        "/api/v1/namespaces/default/configmaps?fieldSelector=spec.x%3D1",
    )
    .await;
    assert_eq!(bad.code, 400);
    // limit/continue
    let mut seen = vec![];
    let mut lp = ListParams::default().limit(3);
    loop {
        let page = api.list(&lp).await.unwrap();
        let cont = page.metadata.continue_.clone();
        seen.extend(names(page));
        match cont {
            Some(c) if !c.is_empty() => lp = ListParams::default().limit(3).continue_token(&c),
            _ => break,
        }
    }
    assert_eq!(seen, ["c0", "c1", "c2", "c3"]);
    // cluster-wide list sees all namespaces
    let all: Api<ConfigMap> = Api::all(s.client());
    assert_eq!(
        all.list(&ListParams::default()).await.unwrap().items.len(),
        4
    );
}

#[tokio::test]
async fn namespaces_missing_terminating_and_cascade() {
    let s = start().await;
    // missing namespace → 404
    let r = post(
        &s,
        "/api/v1/namespaces/ghost/secrets",
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}}),
    )
    .await;
    assert_eq!(r.body["message"], "namespaces \"ghost\" not found");
    assert_eq!(r.code, 404);
    let ns = ns(&s, "wire2").await;
    let secrets: Api<Secret> = Api::namespaced(s.client(), &ns);
    // default service account appears (like the real serviceaccount controller)
    let sas: Api<ServiceAccount> = Api::namespaced(s.client(), &ns);
    eventually("default sa", || async {
        sas.get_opt("default").await.unwrap()
    })
    .await;
    // a secret with a finalizer keeps the namespace Terminating
    let sec: Secret =
        serde_json::from_value(json!({"metadata": {"name": "held", "finalizers": ["esr/test"]}}))
            .unwrap();
    secrets.create(&PostParams::default(), &sec).await.unwrap();
    let plain: Secret = serde_json::from_value(json!({"metadata": {"name": "plain"}})).unwrap();
    secrets
        .create(&PostParams::default(), &plain)
        .await
        .unwrap();
    let nss: Api<Namespace> = Api::all(s.client());
    let d = nss.delete(&ns, &DeleteParams::default()).await.unwrap();
    let n = d.left().expect("namespace delete returns the object");
    assert_eq!(n.status.unwrap().phase.as_deref(), Some("Terminating"));
    // creating inside it → 403 NamespaceTerminating
    let r = post(
        &s,
        "/api/v1/namespaces/wire2/secrets",
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "late"}}),
    )
    .await;
    assert_eq!(
        r.body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "secrets \"late\" is forbidden: unable to create new content in namespace wire2 because it is being terminated",
            "reason": "Forbidden",
            "details": {"name": "late", "kind": "secrets", "causes": [{"reason": "NamespaceTerminating", "message": "namespace wire2 is being terminated", "field": "metadata.namespace"}]},
            "code": 403})
    );
    // contents are deleted; the finalized one waits with deletionTimestamp
    eventually("plain deleted", || async {
        secrets
            .get_opt("plain")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    let held = secrets.get("held").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    assert!(
        nss.get_opt(&ns).await.unwrap().is_some(),
        "namespace stays while content remains"
    );
    secrets
        .patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    eventually("namespace gone", || async {
        nss.get_opt(&ns).await.unwrap().is_none().then_some(())
    })
    .await;
}

#[tokio::test]
async fn finalizers_and_generation_on_custom_resources() {
    let s = start_with_widgets().await;
    let base = "/apis/test.esr.dev/v1/namespaces/default/widgets";
    let r = post(&s, base, widget("e1", "red")).await;
    assert_eq!(r.code, 201, "{}", r.text);
    assert_eq!(r.body["metadata"]["generation"], 1);
    assert_eq!(r.body["spec"]["size"], 3, "schema default applied");
    // label change: no generation bump
    let r = patch(
        &s,
        &format!("{base}/e1"),
        "application/merge-patch+json",
        json!({"metadata": {"labels": {"a": "b"}, "finalizers": ["esr/test"]}}),
    )
    .await;
    assert_eq!(r.body["metadata"]["generation"], 1);
    // status write: no bump; status on main resource is ignored
    let r = patch(
        &s,
        &format!("{base}/e1/status"),
        "application/merge-patch+json",
        json!({"status": {"phase": "Ready"}, "spec": {"color": "blue"}}),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.text);
    assert_eq!(r.body["status"]["phase"], "Ready");
    assert_eq!(
        r.body["spec"]["color"], "red",
        "status endpoint ignores spec"
    );
    assert_eq!(r.body["metadata"]["generation"], 1);
    let r = patch(
        &s,
        &format!("{base}/e1"),
        "application/merge-patch+json",
        json!({"status": {"phase": "Hacked"}}),
    )
    .await;
    assert_eq!(
        r.body["status"]["phase"], "Ready",
        "main endpoint ignores status"
    );
    // spec change: bump
    let r = patch(
        &s,
        &format!("{base}/e1"),
        "application/merge-patch+json",
        json!({"spec": {"color": "green"}}),
    )
    .await;
    assert_eq!(r.body["metadata"]["generation"], 2);
    // delete with finalizer: object stays with deletionTimestamp, generation bumped
    let r = raw(
        &s,
        "DELETE",
        &format!("{base}/e1"),
        "application/json",
        None,
    )
    .await;
    assert_eq!(r.code, 200);
    assert!(r.body["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(r.body["metadata"]["deletionGracePeriodSeconds"], 0);
    assert_eq!(r.body["metadata"]["generation"], 3);
    // adding a new finalizer now → 422
    let r = patch(
        &s,
        &format!("{base}/e1"),
        "application/merge-patch+json",
        json!({"metadata": {"finalizers": ["esr/test", "esr/other"]}}),
    )
    .await;
    assert_eq!(r.code, 422);
    assert_eq!(
        r.body["message"],
        // The real server lists the (duplicated) cause twice but shows its message once.
        "Widget.test.esr.dev \"e1\" is invalid: metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{\"esr/other\"}"
    );
    assert_eq!(
        r.body["details"]["causes"][0]["reason"],
        "FieldValueForbidden"
    );
    // removing the last finalizer deletes it
    let r = patch(
        &s,
        &format!("{base}/e1"),
        "application/json-patch+json",
        json!([{"op": "remove", "path": "/metadata/finalizers"}]),
    )
    .await;
    assert_eq!(r.code, 200);
    assert_eq!(get(&s, &format!("{base}/e1")).await.code, 404);
}

async fn owned_secret(api: &Api<Secret>, name: &str, owner: &ConfigMap, block: bool) {
    let sec: Secret = serde_json::from_value(json!({"metadata": {"name": name, "ownerReferences": [{
        "apiVersion": "v1", "kind": "ConfigMap", "name": owner.metadata.name, "uid": owner.metadata.uid,
        "controller": true, "blockOwnerDeletion": block}]}})).unwrap();
    api.create(&PostParams::default(), &sec).await.unwrap();
}

#[tokio::test]
async fn owner_reference_garbage_collection() {
    let s = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(s.client(), "default");
    let secrets: Api<Secret> = Api::namespaced(s.client(), "default");
    let mk =
        |n: &str| serde_json::from_value::<ConfigMap>(json!({"metadata": {"name": n}})).unwrap();
    // Background
    let o1 = cms.create(&PostParams::default(), &mk("o1")).await.unwrap();
    owned_secret(&secrets, "d1", &o1, false).await;
    cms.delete("o1", &DeleteParams::background()).await.unwrap();
    eventually("d1 collected", || async {
        secrets.get_opt("d1").await.unwrap().is_none().then_some(())
    })
    .await;
    // Orphan
    let o2 = cms.create(&PostParams::default(), &mk("o2")).await.unwrap();
    owned_secret(&secrets, "d2", &o2, false).await;
    cms.delete("o2", &DeleteParams::orphan()).await.unwrap();
    eventually("o2 gone", || async {
        cms.get_opt("o2").await.unwrap().is_none().then_some(())
    })
    .await;
    let d2 = secrets.get("d2").await.unwrap();
    assert!(
        d2.metadata.owner_references.is_none(),
        "orphaned dependent lost its ownerReference"
    );
    // Foreground: owner waits for dependents
    let o3 = cms.create(&PostParams::default(), &mk("o3")).await.unwrap();
    let f: Secret = serde_json::from_value(json!({"metadata": {"name": "d3", "finalizers": ["esr/hold"], "ownerReferences": [{
        "apiVersion": "v1", "kind": "ConfigMap", "name": "o3", "uid": o3.metadata.uid, "blockOwnerDeletion": true}]}})).unwrap();
    secrets.create(&PostParams::default(), &f).await.unwrap();
    let r = cms.delete("o3", &DeleteParams::foreground()).await.unwrap();
    let o = r.left().expect("owner kept while foreground deletion runs");
    assert!(
        o.metadata
            .finalizers
            .unwrap()
            .contains(&"foregroundDeletion".to_string())
    );
    eventually("d3 deleting", || async {
        secrets
            .get("d3")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
            .then_some(())
    })
    .await;
    assert!(cms.get_opt("o3").await.unwrap().is_some());
    secrets
        .patch(
            "d3",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    eventually("o3 gone", || async {
        cms.get_opt("o3").await.unwrap().is_none().then_some(())
    })
    .await;
    // a dependent created for a missing owner is collected
    let ghost: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "ghost", "uid": "00000000-0000-0000-0000-000000000000"}}),
    )
    .unwrap();
    owned_secret(&secrets, "d4", &ghost, false).await;
    eventually("d4 collected", || async {
        secrets.get_opt("d4").await.unwrap().is_none().then_some(())
    })
    .await;
}

#[tokio::test]
async fn deletecollection_and_preconditions() {
    let s = start().await;
    let api: Api<ConfigMap> = Api::namespaced(s.client(), "default");
    for i in 0..3 {
        let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": format!("x{i}"), "labels": {"grp": if i < 2 { "a" } else { "b" }}}})).unwrap();
        api.create(&PostParams::default(), &cm).await.unwrap();
    }
    api.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels("grp=a"),
    )
    .await
    .unwrap();
    let left: Vec<String> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|c| c.metadata.name.unwrap())
        .collect();
    assert_eq!(left, ["x2"]);
    let dp = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: Some("wrong".into()),
            resource_version: None,
        }),
        ..Default::default()
    };
    let e = api.delete("x2", &dp).await.unwrap_err();
    assert!(matches!(e, kube::Error::Api(ref s) if s.code == 409), "{e}");
}

#[tokio::test]
async fn service_account_tokens_and_token_review() {
    let s = start().await;
    let sas: Api<ServiceAccount> = Api::namespaced(s.client(), "default");
    let sa: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "vault-auth"}})).unwrap();
    let sa = sas.create(&PostParams::default(), &sa).await.unwrap();
    let r = post(&s, "/api/v1/namespaces/default/serviceaccounts/vault-auth/token",
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"audiences": ["vault"], "expirationSeconds": 600}})).await;
    assert_eq!(r.code, 201, "{}", r.text);
    let token = r.body["status"]["token"].as_str().unwrap().to_string();
    assert!(r.body["status"]["expirationTimestamp"].is_string());
    // claims layout
    use base64::Engine;
    let payload = token.split('.').nth(1).unwrap();
    let claims: Value = serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(payload)
            .unwrap(),
    )
    .unwrap();
    assert_eq!(claims["sub"], "system:serviceaccount:default:vault-auth");
    assert_eq!(claims["aud"], json!(["vault"]));
    assert_eq!(claims["iss"], s.url());
    assert_eq!(claims["kubernetes.io"]["namespace"], "default");
    assert_eq!(
        claims["kubernetes.io"]["serviceaccount"]["name"],
        "vault-auth"
    );
    assert_eq!(
        claims["kubernetes.io"]["serviceaccount"]["uid"],
        json!(sa.metadata.uid)
    );
    for c in ["exp", "iat", "nbf"] {
        assert!(claims[c].is_i64(), "{c}");
    }
    // TokenReview
    let review = |tok: &str, aud: Value| json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": tok, "audiences": aud}});
    let r = post(
        &s,
        "/apis/authentication.k8s.io/v1/tokenreviews",
        review(&token, json!(["vault"])),
    )
    .await;
    assert_eq!(r.code, 201);
    assert_eq!(r.body["status"]["authenticated"], true);
    assert_eq!(
        r.body["status"]["user"]["username"],
        "system:serviceaccount:default:vault-auth"
    );
    assert_eq!(r.body["status"]["user"]["uid"], json!(sa.metadata.uid));
    let r = post(
        &s,
        "/apis/authentication.k8s.io/v1/tokenreviews",
        review(&token, json!(["other"])),
    )
    .await;
    assert_eq!(r.body["status"]["authenticated"], false);
    let r = post(
        &s,
        "/apis/authentication.k8s.io/v1/tokenreviews",
        review("garbage.token.x", json!([])),
    )
    .await;
    assert_eq!(r.body["status"]["authenticated"], false);
    // deleting the service account invalidates its tokens
    sas.delete("vault-auth", &DeleteParams::default())
        .await
        .unwrap();
    let r = post(
        &s,
        "/apis/authentication.k8s.io/v1/tokenreviews",
        review(&token, json!(["vault"])),
    )
    .await;
    assert_eq!(r.body["status"]["authenticated"], false);
    // missing SA → 404; too short expiry → 422
    let r = post(
        &s,
        "/api/v1/namespaces/default/serviceaccounts/nope/token",
        json!({"spec": {}}),
    )
    .await;
    assert_eq!(r.code, 404);
    let r = post(
        &s,
        "/api/v1/namespaces/default/serviceaccounts/default/token",
        json!({"spec": {"expirationSeconds": 10}}),
    )
    .await;
    assert_eq!(r.code, 422);
    // OIDC discovery: the token verifies against the published JWKS
    let oc = get(&s, "/.well-known/openid-configuration").await;
    assert_eq!(oc.body["issuer"], s.url());
    assert_eq!(oc.body["jwks_uri"], format!("{}/openid/v1/jwks", s.url()));
    let jwks = get(&s, "/openid/v1/jwks").await;
    let k = &jwks.body["keys"][0];
    assert_eq!(
        (k["kty"].as_str(), k["alg"].as_str()),
        (Some("EC"), Some("ES256"))
    );
    let r = post(
        &s,
        "/api/v1/namespaces/default/serviceaccounts/default/token",
        json!({"spec": {}}),
    )
    .await;
    let tok2 = r.body["status"]["token"].as_str().unwrap();
    let key = jsonwebtoken::DecodingKey::from_ec_components(
        k["x"].as_str().unwrap(),
        k["y"].as_str().unwrap(),
    )
    .unwrap();
    let mut v = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::ES256);
    v.set_audience(&["https://kubernetes.default.svc.cluster.local"]);
    let d = jsonwebtoken::decode::<Value>(tok2, &key, &v).unwrap();
    assert_eq!(d.claims["sub"], "system:serviceaccount:default:default");
}

#[tokio::test]
async fn other_builtin_kinds_are_served() {
    let s = start().await;
    for (path, body) in [
        (
            "/api/v1/namespaces/default/events",
            json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "ev1"},
            "involvedObject": {"kind": "Secret", "name": "s", "namespace": "default"}, "reason": "Synced", "message": "ok", "type": "Normal"}),
        ),
        (
            "/apis/events.k8s.io/v1/namespaces/default/events",
            json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "ev2"},
            "regarding": {"kind": "Secret", "name": "s"}, "reason": "Synced", "note": "ok", "type": "Normal", "action": "Sync",
            "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "esr", "reportingInstance": "esr-1"}),
        ),
        (
            "/apis/coordination.k8s.io/v1/namespaces/default/leases",
            json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "esr-leader"},
            "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}}),
        ),
        (
            "/apis/apps/v1/namespaces/default/deployments",
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": "nginx", "env": [{"name": "A", "value": "1"}]}]}}}}),
        ),
    ] {
        let r = post(&s, path, body).await;
        assert_eq!(r.code, 201, "{path}: {}", r.text);
    }
    let r = get(&s, "/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Ds,involvedObject.kind%3DSecret").await;
    assert_eq!(r.body["items"].as_array().unwrap().len(), 1);
    let r = get(&s, "/apis/apps/v1/namespaces/default/deployments/web").await;
    assert_eq!(r.body["metadata"]["generation"], 1);
    // strategic merge on a Deployment merges containers and env by name
    let r = patch(&s, "/apis/apps/v1/namespaces/default/deployments/web", "application/strategic-merge-patch+json",
        json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "env": [{"name": "B", "value": "2"}]}, {"name": "side", "image": "busybox"}]}}}})).await;
    assert_eq!(r.code, 200, "{}", r.text);
    let c = &r.body["spec"]["template"]["spec"]["containers"];
    assert_eq!(c.as_array().unwrap().len(), 2);
    assert_eq!(c[0]["image"], "nginx");
    assert_eq!(
        c[0]["env"],
        json!([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}])
    );
    assert_eq!(r.body["metadata"]["generation"], 2);
}

#[tokio::test]
async fn access_reviews_allow_everything() {
    let s = start().await;
    let r = post(&s, "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"namespace": "default", "verb": "get", "resource": "secrets"}}})).await;
    assert_eq!(r.code, 201);
    assert_eq!(r.body["status"]["allowed"], true);
    assert_eq!(r.body["spec"]["resourceAttributes"]["verb"], "get");
    let r = post(&s, "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "spec": {"namespace": "default"}})).await;
    assert_eq!(r.body["status"]["resourceRules"][0]["verbs"], json!(["*"]));
    assert_eq!(
        get(&s, "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews")
            .await
            .code,
        405
    );
}

/// RBAC kinds, Service, StatefulSet, DaemonSet and PodDisruptionBudget are stored and served to
/// kube-rs like on a real server (discovery, typed create/get/list, strategic merge, generation).
#[tokio::test]
async fn rbac_service_and_workload_kinds_are_served() {
    use k8s_openapi::api::apps::v1::{DaemonSet, StatefulSet};
    use k8s_openapi::api::core::v1::Service;
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
    let s = start().await;
    let c = s.client();

    // Discovery: kube-rs finds every kind with its scope.
    let d = kube::Discovery::new(c.clone()).run().await.unwrap();
    for (group, kind, namespaced) in [
        ("rbac.authorization.k8s.io", "Role", true),
        ("rbac.authorization.k8s.io", "ClusterRole", false),
        ("rbac.authorization.k8s.io", "RoleBinding", true),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding", false),
        ("", "Service", true),
        ("apps", "StatefulSet", true),
        ("apps", "DaemonSet", true),
        ("policy", "PodDisruptionBudget", true),
    ] {
        let (ar, caps) = d
            .resolve_gvk(&kube::api::GroupVersionKind::gvk(group, "v1", kind))
            .unwrap_or_else(|| panic!("{group}/{kind} not discovered"));
        assert_eq!(ar.kind, kind);
        assert_eq!(
            caps.scope == kube::discovery::Scope::Namespaced,
            namespaced,
            "{kind}"
        );
    }
    let v1 = get(&s, "/api/v1").await;
    let svc = v1.body["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "services")
        .unwrap();
    assert_eq!(svc["shortNames"], json!(["svc"]));

    // RBAC objects round-trip through the typed API.
    let cr: ClusterRole = serde_json::from_value(json!({"metadata": {"name": "reader"},
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]}]}))
    .unwrap();
    Api::<ClusterRole>::all(c.clone())
        .create(&PostParams::default(), &cr)
        .await
        .unwrap();
    let got = Api::<ClusterRole>::all(c.clone())
        .get("reader")
        .await
        .unwrap();
    assert_eq!(got.rules.unwrap()[0].verbs, vec!["get", "list"]);
    let crb: ClusterRoleBinding = serde_json::from_value(json!({"metadata": {"name": "reader"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": "default"}]}))
    .unwrap();
    Api::<ClusterRoleBinding>::all(c.clone())
        .create(&PostParams::default(), &crb)
        .await
        .unwrap();
    let role: Role = serde_json::from_value(json!({"metadata": {"name": "le"},
        "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get"]}]}))
    .unwrap();
    let roles: Api<Role> = Api::namespaced(c.clone(), "default");
    roles.create(&PostParams::default(), &role).await.unwrap();
    // rules are an atomic list: a merge patch replaces them
    let r = roles
        .patch(
            "le",
            &PatchParams::default(),
            &Patch::Merge(json!({"rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "update"]}]})),
        )
        .await
        .unwrap();
    assert_eq!(r.rules.unwrap()[0].verbs, vec!["get", "update"]);
    let rb: RoleBinding = serde_json::from_value(json!({"metadata": {"name": "le"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "le"},
        "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": "default"}]}))
    .unwrap();
    Api::<RoleBinding>::namespaced(c.clone(), "default")
        .create(&PostParams::default(), &rb)
        .await
        .unwrap();
    assert_eq!(
        Api::<RoleBinding>::all(c.clone())
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    // RBAC kinds and Services have no generation; unknown top-level fields are refused (Strict).
    let r = post(
        &s,
        "/apis/rbac.authorization.k8s.io/v1/clusterroles?fieldValidation=Strict",
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "bad"}, "bogus": 1}),
    )
    .await;
    assert_eq!(r.code, 400, "{}", r.text);
    assert!(r.text.contains("unknown field \\\"bogus\\\""), "{}", r.text);

    // Service: ports merge by (port, protocol) with a strategic merge patch.
    let svc: Service = serde_json::from_value(json!({"metadata": {"name": "m"}, "spec": {"type": "ClusterIP",
        "selector": {"app": "m"}, "ports": [{"name": "metrics", "port": 8080, "targetPort": "metrics", "protocol": "TCP"}]}}))
    .unwrap();
    let svcs: Api<Service> = Api::namespaced(c.clone(), "default");
    let created = svcs.create(&PostParams::default(), &svc).await.unwrap();
    assert_eq!(created.metadata.generation, None);
    let r = svcs
        .patch(
            "m",
            &PatchParams::default(),
            &Patch::Strategic(
                json!({"spec": {"ports": [{"name": "health", "port": 8082, "protocol": "TCP"}]}}),
            ),
        )
        .await
        .unwrap();
    let ports = r.spec.unwrap().ports.unwrap();
    assert_eq!(
        ports.iter().map(|p| p.port).collect::<Vec<_>>(),
        vec![8080, 8082]
    );

    // StatefulSet / DaemonSet: generation 1 on create, bumped by a pod template change, not by
    // a metadata change; containers merge by name.
    let tpl = json!({"metadata": {"labels": {"app": "w"}}, "spec": {"containers": [{"name": "w", "image": "busybox"}]}});
    let sts: StatefulSet = serde_json::from_value(
        json!({"metadata": {"name": "w"}, "spec": {"serviceName": "w",
        "selector": {"matchLabels": {"app": "w"}}, "template": tpl}}),
    )
    .unwrap();
    let ds: DaemonSet = serde_json::from_value(
        json!({"metadata": {"name": "w"}, "spec": {"selector": {"matchLabels": {"app": "w"}}, "template": tpl}}),
    )
    .unwrap();
    let stss: Api<StatefulSet> = Api::namespaced(c.clone(), "default");
    let dss: Api<DaemonSet> = Api::namespaced(c.clone(), "default");
    assert_eq!(
        stss.create(&PostParams::default(), &sts)
            .await
            .unwrap()
            .metadata
            .generation,
        Some(1)
    );
    assert_eq!(
        dss.create(&PostParams::default(), &ds)
            .await
            .unwrap()
            .metadata
            .generation,
        Some(1)
    );
    let bump = json!({"spec": {"template": {"metadata": {"annotations": {"x": "1"}}}}});
    let label = json!({"metadata": {"labels": {"l": "1"}}});
    let r = stss
        .patch("w", &PatchParams::default(), &Patch::Merge(&label))
        .await
        .unwrap();
    assert_eq!(r.metadata.generation, Some(1));
    let r = stss
        .patch("w", &PatchParams::default(), &Patch::Merge(&bump))
        .await
        .unwrap();
    assert_eq!(r.metadata.generation, Some(2));
    let r = dss
        .patch("w", &PatchParams::default(), &Patch::Merge(&bump))
        .await
        .unwrap();
    assert_eq!(r.metadata.generation, Some(2));
    let r = dss
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"template": {"spec": {"containers": [{"name": "side", "image": "x"}]}}}})),
        )
        .await
        .unwrap();
    assert_eq!(
        r.spec.unwrap().template.spec.unwrap().containers.len(),
        2,
        "containers merged by name"
    );
    // metadata-only lists (what rollout's metadata watchers use)
    let md = stss.list_metadata(&ListParams::default()).await.unwrap();
    assert_eq!(md.items.len(), 1);
    assert_eq!(md.items[0].metadata.name.as_deref(), Some("w"));

    // PodDisruptionBudget: stored, generation, status subresource.
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({"metadata": {"name": "p"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "w"}}}}))
    .unwrap();
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(c.clone(), "default");
    let created = pdbs.create(&PostParams::default(), &pdb).await.unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    assert_eq!(
        created.spec.unwrap().min_available,
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(1))
    );
    let r = get(
        &s,
        "/apis/policy/v1/namespaces/default/poddisruptionbudgets/p/status",
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.text);
}
