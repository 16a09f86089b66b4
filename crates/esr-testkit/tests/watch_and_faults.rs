//! Watch semantics, kube-rs watcher/reflector/Controller, fault injection and the audit log.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![recursion_limit = "512"]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::*;
use futures::{StreamExt, TryStreamExt};
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use serde_json::{Value, json};

fn cm(name: &str, labels: Value) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap()
}

/// Read raw watch lines until `n` lines arrived or the stream ended.
async fn watch_lines(s: &TestServer, path: &str, n: usize) -> Vec<Value> {
    let req = http::Request::get(path)
        .body(kube::client::Body::empty())
        .unwrap();
    let resp = s.client().send(req).await.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let mut body = resp.into_body();
    let mut buf = Vec::new();
    let mut out = vec![];
    while out.len() < n {
        let Some(frame) = tokio::time::timeout(Duration::from_secs(10), body.frame())
            .await
            .expect("watch line in time")
        else {
            break;
        };
        let frame = frame.unwrap();
        if let Some(d) = frame.data_ref() {
            buf.extend_from_slice(d);
        }
        while let Some(pos) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=pos).collect();
            out.push(serde_json::from_slice(&line).unwrap());
        }
    }
    out
}

#[tokio::test]
async fn watch_lines_bookmarks_selectors_and_timeout() {
    let s = TestServer::start_with(esr_testkit::Options {
        bookmark_interval: Duration::from_millis(200),
        ..Default::default()
    })
    .await
    .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(s.client(), "default");
    let list = api.list(&ListParams::default()).await.unwrap();
    let rv = list.metadata.resource_version.unwrap();
    api.create(&PostParams::default(), &cm("w1", json!({"app": "a"})))
        .await
        .unwrap();
    api.patch(
        "w1",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "v"}})),
    )
    .await
    .unwrap();
    api.patch(
        "w1",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "b"}}})),
    )
    .await
    .unwrap();
    api.delete("w1", &Default::default()).await.unwrap();
    let lines = watch_lines(&s, &format!("/api/v1/namespaces/default/configmaps?watch=true&allowWatchBookmarks=true&resourceVersion={rv}&timeoutSeconds=30"), 5).await;
    let types: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        ["ADDED", "MODIFIED", "MODIFIED", "DELETED", "BOOKMARK"]
    );
    let rvs: Vec<u64> = lines[..4]
        .iter()
        .map(|l| {
            l["object"]["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    assert!(rvs.windows(2).all(|w| w[0] < w[1]), "{rvs:?}");
    assert_eq!(
        lines[4]["object"]["metadata"]["resourceVersion"]
            .as_str()
            .unwrap(),
        rvs[3].to_string()
    );
    assert_eq!(lines[4]["object"]["kind"], "ConfigMap");
    // label selector transitions: leaving the selector is a DELETED
    let lines = watch_lines(&s, &format!("/api/v1/namespaces/default/configmaps?watch=true&labelSelector=app%3Da&resourceVersion={rv}"), 3).await;
    let types: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["ADDED", "MODIFIED", "DELETED"]);
    // timeoutSeconds ends the stream
    let lines = watch_lines(
        &s,
        "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1&resourceVersion=999999",
        100,
    )
    .await;
    assert!(lines.is_empty());
    // sendInitialEvents: ADDED for current objects, then the initial-events-end bookmark
    api.create(&PostParams::default(), &cm("w2", json!({})))
        .await
        .unwrap();
    let lines = watch_lines(&s, "/api/v1/namespaces/default/configmaps?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true", 2).await;
    assert_eq!(lines[0]["type"], "ADDED");
    assert_eq!(lines[1]["type"], "BOOKMARK");
    assert_eq!(
        lines[1]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
}

#[tokio::test]
async fn too_old_resource_version_is_410_in_a_200_stream() {
    let s = start().await;
    let api: Api<ConfigMap> = Api::namespaced(s.client(), "default");
    api.create(&PostParams::default(), &cm("a", json!({})))
        .await
        .unwrap();
    s.faults().expire_resource_versions();
    let lines = watch_lines(
        &s,
        "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=1",
        1,
    )
    .await;
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["type"], "ERROR");
    let st = &lines[0]["object"];
    assert_eq!(st["code"], 410);
    assert_eq!(st["reason"], "Expired");
    let cur = s.store().current_rv();
    assert_eq!(
        st["message"],
        format!("too old resource version: 1 ({cur})")
    );
    // kube-rs sees it as a 410 error event
    let mut stream = api
        .watch(&WatchParams::default(), "1")
        .await
        .unwrap()
        .boxed();
    match stream.try_next().await.unwrap().unwrap() {
        WatchEvent::Error(e) => assert_eq!(e.code, 410),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn kube_watcher_recovers_from_closed_streams_and_410() {
    let s = start().await;
    let api: Api<Secret> = Api::namespaced(s.client(), "default");
    let mut events = watcher(api.clone(), watcher::Config::default()).boxed();
    let mut seen = std::collections::BTreeSet::new();
    let created =
        |n: &str| serde_json::from_value::<Secret>(json!({"metadata": {"name": n}})).unwrap();
    api.create(&PostParams::default(), &created("s0"))
        .await
        .unwrap();
    let next_name =
        |seen: &mut std::collections::BTreeSet<String>, ev: watcher::Event<Secret>| match ev {
            watcher::Event::Apply(o) | watcher::Event::InitApply(o) => {
                seen.insert(o.metadata.name.unwrap());
            }
            _ => {}
        };
    let wait_for = |name: &'static str| name;
    for (step, name) in ["s0", "s1", "s2"].iter().enumerate() {
        if step == 1 {
            s.faults().close_watches();
            api.create(&PostParams::default(), &created(name))
                .await
                .unwrap();
        }
        if step == 2 {
            s.faults().expire_resource_versions();
            s.faults().close_watches();
            api.create(&PostParams::default(), &created(name))
                .await
                .unwrap();
        }
        let target = wait_for(name);
        tokio::time::timeout(Duration::from_secs(20), async {
            while !seen.contains(target) {
                match events.next().await {
                    Some(Ok(ev)) => next_name(&mut seen, ev),
                    Some(Err(_)) => {} // 410 and reconnects surface as errors; the watcher retries
                    None => panic!("watcher ended"),
                }
            }
        })
        .await
        .expect("watcher saw the object");
    }
}

#[tokio::test]
async fn controller_reconciles_owned_objects() {
    let s = start().await;
    let client = s.client();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let runs = Arc::new(AtomicUsize::new(0));
    let ctx = Arc::new((secrets.clone(), Arc::clone(&runs)));
    async fn reconcile(
        cm: Arc<ConfigMap>,
        ctx: Arc<(Api<Secret>, Arc<AtomicUsize>)>,
    ) -> Result<Action, kube::Error> {
        ctx.1.fetch_add(1, Ordering::SeqCst);
        let name = cm.metadata.name.clone().unwrap();
        let owner = json!({"apiVersion": "v1", "kind": "ConfigMap", "name": name, "uid": cm.metadata.uid, "controller": true});
        let desired = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": format!("{name}-out"), "ownerReferences": [owner]},
            "stringData": {"copy": cm.data.as_ref().and_then(|d| d.get("v")).cloned().unwrap_or_default()}});
        ctx.0
            .patch(
                &format!("{name}-out"),
                &PatchParams::apply("test-controller").force(),
                &Patch::Apply(desired),
            )
            .await?;
        Ok(Action::await_change())
    }
    fn error_policy(
        _: Arc<ConfigMap>,
        _: &kube::Error,
        _: Arc<(Api<Secret>, Arc<AtomicUsize>)>,
    ) -> Action {
        Action::requeue(Duration::from_millis(100))
    }
    let ctrl = Controller::new(cms.clone(), watcher::Config::default())
        .owns(secrets.clone(), watcher::Config::default())
        .run(reconcile, error_policy, ctx)
        .for_each(|_| async {});
    let handle = tokio::spawn(ctrl);
    let c: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "src"}, "data": {"v": "one"}})).unwrap();
    cms.create(&PostParams::default(), &c).await.unwrap();
    let got = eventually("owned secret", || async {
        secrets.get_opt("src-out").await.unwrap()
    })
    .await;
    assert_eq!(got.data.unwrap()["copy"].0, b"one");
    cms.patch(
        "src",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"v": "two"}})),
    )
    .await
    .unwrap();
    eventually("updated secret", || async {
        let s = secrets.get("src-out").await.unwrap();
        (s.data.unwrap()["copy"].0 == b"two").then_some(())
    })
    .await;
    // deleting the owned secret triggers a reconcile that recreates it
    secrets
        .delete("src-out", &Default::default())
        .await
        .unwrap();
    eventually("recreated", || async {
        secrets.get_opt("src-out").await.unwrap()
    })
    .await;
    // deleting the owner garbage-collects the secret
    cms.delete("src", &Default::default()).await.unwrap();
    eventually("collected", || async {
        secrets
            .get_opt("src-out")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    handle.abort();
    assert!(runs.load(Ordering::SeqCst) >= 3);
}

#[tokio::test]
async fn fault_injection_and_audit() {
    let s = start().await;
    let api: Api<Secret> = Api::namespaced(s.client(), "default");
    // fail the next 2 gets of secrets with 500
    s.faults().fail_next(Some("get"), Some("secrets"), 2, 500);
    for _ in 0..2 {
        match api.get_opt("x").await.unwrap_err() {
            kube::Error::Api(e) => assert_eq!((e.code, e.reason.as_str()), (500, "InternalError")),
            other => panic!("{other}"),
        }
    }
    assert!(
        api.get_opt("x").await.unwrap().is_none(),
        "third call passes"
    );
    // other verbs/resources are not affected
    // (kube-rs retries 429/503/504 by itself, so use codes it does not retry)
    s.faults()
        .fail_next(Some("list"), Some("configmaps"), 1, 403);
    api.list(&ListParams::default()).await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(s.client(), "default");
    match cms.list(&ListParams::default()).await.unwrap_err() {
        kube::Error::Api(e) => assert_eq!((e.code, e.reason.as_str()), (403, "Forbidden")),
        other => panic!("{other}"),
    }
    // admin endpoint: latency and a rule over HTTP
    let r = post(&s, "/testkit/faults", json!({"action": "fail", "verb": "create", "resource": "secrets", "count": 1, "status": 500})).await;
    assert_eq!(r.code, 200);
    assert_eq!(r.body["rules"][0]["status"], 500);
    let sec: Secret = serde_json::from_value(json!({"metadata": {"name": "n"}})).unwrap();
    assert!(
        matches!(api.create(&PostParams::default(), &sec).await.unwrap_err(), kube::Error::Api(ref e) if e.code == 500)
    );
    api.create(&PostParams::default(), &sec).await.unwrap();
    let r = post(
        &s,
        "/testkit/faults",
        json!({"action": "latency", "millis": 300}),
    )
    .await;
    assert_eq!(r.code, 200);
    let t = std::time::Instant::now();
    api.get("n").await.unwrap();
    let slow = t.elapsed();
    raw(&s, "DELETE", "/testkit/faults", "application/json", None).await;
    // a guaranteed lower bound (the server sleeps first), not a speed assertion
    assert!(
        slow >= Duration::from_millis(300),
        "latency injected: {slow:?}"
    );
    for action in ["closeWatches", "expire"] {
        assert_eq!(
            post(&s, "/testkit/faults", json!({"action": action}))
                .await
                .code,
            200
        );
    }
    // audit: every API call with verb, group, resource, subresource, namespace
    let entries = s.audit().entries();
    assert!(entries.iter().any(|e| e.verb == "get"
        && e.resource == "secrets"
        && e.namespace == "default"
        && e.code == 500));
    assert!(
        entries
            .iter()
            .any(|e| e.verb == "list" && e.resource == "configmaps" && e.code == 403)
    );
    assert!(
        entries
            .iter()
            .any(|e| e.verb == "create" && e.resource == "secrets" && e.code == 201)
    );
    post(
        &s,
        "/api/v1/namespaces/default/serviceaccounts/default/token",
        json!({"spec": {}}),
    )
    .await;
    let r = get(&s, "/testkit/audit").await;
    let items = r.body["items"].as_array().unwrap();
    assert!(items.iter().any(|e| e["verb"] == "create"
        && e["resource"] == "serviceaccounts"
        && e["subresource"] == "token"));
}

#[tokio::test]
async fn watches_end_when_the_client_goes_away() {
    let s = start().await;
    let req = http::Request::get("/api/v1/namespaces/default/secrets?watch=true")
        .body(kube::client::Body::empty())
        .unwrap();
    let resp = s.client().send(req).await.unwrap();
    assert_eq!(s.active_watches(), 1);
    drop(resp);
    eventually("watch task ended", || async {
        (s.active_watches() == 0).then_some(())
    })
    .await;
    // close_watches ends server-side streams too
    let api: Api<Secret> = Api::namespaced(s.client(), "default");
    let mut stream = api
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    assert_eq!(s.active_watches(), 1);
    s.faults().close_watches();
    let end = tokio::time::timeout(Duration::from_secs(10), stream.try_next())
        .await
        .unwrap()
        .unwrap();
    assert!(end.is_none(), "stream ended");
    eventually("no watches", || async {
        (s.active_watches() == 0).then_some(())
    })
    .await;
}

#[tokio::test]
async fn kube_streaming_list_watcher() {
    let s = start().await;
    let api: Api<ConfigMap> = Api::namespaced(s.client(), "default");
    api.create(&PostParams::default(), &cm("pre", json!({})))
        .await
        .unwrap();
    let cfg = watcher::Config::default().streaming_lists();
    let mut events = watcher(api.clone(), cfg).boxed();
    let mut init_done = false;
    let mut saw_pre = false;
    tokio::time::timeout(Duration::from_secs(20), async {
        while !init_done {
            match events.next().await {
                Some(Ok(watcher::Event::InitApply(o))) => {
                    saw_pre |= o.metadata.name.as_deref() == Some("pre")
                }
                Some(Ok(watcher::Event::InitDone)) => init_done = true,
                Some(_) => {}
                None => panic!("ended"),
            }
        }
    })
    .await
    .unwrap();
    assert!(saw_pre, "initial events stream the existing object");
    api.create(&PostParams::default(), &cm("post", json!({})))
        .await
        .unwrap();
    let got = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            if let Some(Ok(watcher::Event::Apply(o))) = events.next().await {
                return o.metadata.name.unwrap();
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(got, "post");
    // a create carrying a resourceVersion is refused like the real storage layer does
    let mut c = cm("rv", json!({}));
    c.metadata.resource_version = Some("5".into());
    let e = api.create(&PostParams::default(), &c).await.unwrap_err();
    assert!(
        matches!(e, kube::Error::Api(ref s) if s.code == 500 && s.reason == "Unknown" && s.message == "resourceVersion should not be set on objects to be created"),
        "{e}"
    );
}

#[tokio::test]
async fn a_chunked_list_is_at_its_first_chunks_resource_version() {
    let s = start().await;
    let api: Api<ConfigMap> = Api::namespaced(s.client(), "default");
    for i in 0..4 {
        api.create(&PostParams::default(), &cm(&format!("c{i}"), json!({})))
            .await
            .unwrap();
    }
    let first = api.list(&ListParams::default().limit(3)).await.unwrap();
    let list_rv = first.metadata.resource_version.clone().unwrap();
    let cont = first.metadata.continue_.clone().unwrap();
    // c0, already read, changes before the next chunk is read.
    api.patch(
        "c0",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "changed"}})),
    )
    .await
    .unwrap();
    let second = api
        .list(&ListParams::default().limit(3).continue_token(&cont))
        .await
        .unwrap();
    assert_eq!(second.items.len(), 1);
    // Every chunk reports the list's resourceVersion (the first chunk's), as kube-apiserver does,
    assert_eq!(
        second.metadata.resource_version.as_deref(),
        Some(list_rv.as_str())
    );
    // so a watch from it sees the change made while the chunks were read.
    let mut stream = api
        .watch(&WatchParams::default(), &list_rv)
        .await
        .unwrap()
        .boxed();
    match stream.try_next().await.unwrap().unwrap() {
        WatchEvent::Modified(c) => {
            assert_eq!(c.metadata.name.as_deref(), Some("c0"));
            assert_eq!(c.data.unwrap()["k"], "changed");
        }
        other => panic!("{other:?}"),
    }
    // A continue token older than the retained history is refused with 410 Expired.
    s.store().expire_history();
    let e = api
        .list(&ListParams::default().limit(3).continue_token(&cont))
        .await
        .unwrap_err();
    assert!(
        matches!(e, kube::Error::Api(ref st) if st.code == 410 && st.reason == "Expired"),
        "{e:?}"
    );
}
