//! ExternalSecret scenarios against esr-testkit (or ESR_E2E_KUBECONFIG) with the real `esr` binary
//! and the fake and kubernetes providers.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod es_support;

use std::time::Duration;

use es_support::*;
use esr_e2e::{Env, str_at, wait_for};
use serde_json::json;

/// ESO test vector: ObjectHash(map{"foo":"value1","bar":"value2"}).
const HASH_FOO_BAR: &str = "1bed8bcbcb4547ffe19a19cd47d9078e84aa6598266d86b99f992d64";
/// ESO: generation 1, no labels, no annotations.
const RV_GEN1_EMPTY: &str = "1-f47fe3c0b255b6dd8047cdffa772587bb829efe7a1cb70febeda2eb2";

fn foo_bar_store(name: &str) -> serde_json::Value {
    fake_css(
        name,
        json!([
            {"key": "/app/foo", "value": "value1"},
            {"key": "/app/bar", "value": "value2"},
            {"key": "/app/json", "value": "{\"user\":\"u1\",\"pass\":\"p1\"}"}
        ]),
    )
}

fn foo_bar_es(store: &str) -> serde_json::Value {
    es(
        "app",
        json!({
            "refreshInterval": "1h",
            "secretStoreRef": {"kind": "ClusterSecretStore", "name": store},
            "target": {"name": "app-secret"},
            "data": [
                {"secretKey": "foo", "remoteRef": {"key": "/app/foo"}},
                {"secretKey": "bar", "remoteRef": {"key": "/app/bar"}}
            ]
        }),
    )
}

/// What `foo_bar_es` syncs into its Secret.
const FOO_BAR: &[(&str, &str)] = &[("foo", "value1"), ("bar", "value2")];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_ready_and_secret_content_exact() {
    let env = Env::start().await.unwrap();
    let ns = env.namespace("create").await.unwrap();
    let _esr = env.start_esr(&[]).unwrap();
    apply(&env, &ns, foo_bar_store("fake")).await;
    wait_condition(&env, "ClusterSecretStore", "", "fake", "True", "Valid").await;
    apply(&env, &ns, foo_bar_es("fake")).await;
    let es = wait_condition(&env, "ExternalSecret", &ns, "app", "True", "SecretSynced").await;
    assert_eq!(ready(&es).2, "secret synced");
    assert_eq!(
        str_at(&es, "/status/syncedResourceVersion"),
        Some(RV_GEN1_EMPTY)
    );
    assert_eq!(str_at(&es, "/status/binding/name"), Some("app-secret"));
    assert!(str_at(&es, "/status/refreshTime").is_some());
    assert!(
        es["metadata"]["finalizers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f == "externalsecrets.external-secrets.io/externalsecret-cleanup"),
        "{es}"
    );
    let s = wait_secret_data(&env, &ns, "app-secret", FOO_BAR).await;
    let labels = s.metadata.labels.clone().unwrap();
    assert_eq!(labels["reconcile.external-secrets.io/managed"], "true");
    assert_eq!(labels["reconcile.external-secrets.io/created-by"].len(), 56);
    assert_eq!(
        s.metadata.annotations.clone().unwrap()["reconcile.external-secrets.io/data-hash"],
        HASH_FOO_BAR
    );
    let owner = &s.metadata.owner_references.clone().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.controller),
        ("ExternalSecret", "app", Some(true))
    );
    assert_eq!(owner.api_version, "external-secrets.io/v1");
    assert_eq!(owner.uid, es["metadata"]["uid"].as_str().unwrap());
    let fm: Vec<String> = s
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|m| m.manager.clone())
        .collect();
    assert!(
        fm.iter()
            .any(|m| m == "externalsecrets.external-secrets.io/app"),
        "{fm:?}"
    );
    wait_event(&env, "app", "Created", "secret created").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn template_and_extract_render_exact_content() {
    let env = Env::start().await.unwrap();
    let ns = env.namespace("tmpl").await.unwrap();
    let _esr = env.start_esr(&[]).unwrap();
    apply(&env, &ns, foo_bar_store("fake")).await;
    apply(
        &env,
        &ns,
        es(
            "tmpl",
            json!({
                "secretStoreRef": {"kind": "ClusterSecretStore", "name": "fake"},
                "target": {"name": "tmpl", "template": {
                    "type": "kubernetes.io/basic-auth",
                    "metadata": {"labels": {"rendered": "{{ .user }}"}},
                    "data": {"username": "{{ .user }}", "password": "{{ .pass | upper }}"}
                }},
                "dataFrom": [{"extract": {"key": "/app/json"}}]
            }),
        ),
    )
    .await;
    wait_condition(&env, "ExternalSecret", &ns, "tmpl", "True", "SecretSynced").await;
    let s = wait_secret_data(&env, &ns, "tmpl", &[("username", "u1"), ("password", "P1")]).await;
    assert_eq!(s.type_.as_deref(), Some("kubernetes.io/basic-auth"));
    assert_eq!(s.metadata.labels.unwrap()["rendered"], "u1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spec_change_moves_synced_resource_version_to_new_generation() {
    let env = Env::start().await.unwrap();
    let ns = env.namespace("spec").await.unwrap();
    let _esr = env.start_esr(&[]).unwrap();
    apply(&env, &ns, foo_bar_store("fake")).await;
    apply(&env, &ns, foo_bar_es("fake")).await;
    wait_condition(&env, "ExternalSecret", &ns, "app", "True", "SecretSynced").await;
    merge_patch(
        &env,
        "ExternalSecret",
        &ns,
        "app",
        json!({"spec": {"data": [{"secretKey": "foo", "remoteRef": {"key": "/app/foo"}}]}}),
    )
    .await;
    let es = wait_for("syncedResourceVersion 2-", TIMEOUT, || async {
        let o = get(&env, "ExternalSecret", &ns, "app").await?;
        str_at(&o, "/status/syncedResourceVersion")
            .filter(|v| v.starts_with("2-"))
            .map(|_| o.clone())
    })
    .await
    .unwrap();
    assert_eq!(es["metadata"]["generation"], 2);
    // kstatus (Flux) reads observedGeneration: the apiserver keeps it and it follows the spec.
    assert_eq!(es["status"]["observedGeneration"], 2);
    // bar was owned by our field manager: it is removed from the Secret
    wait_secret_data(&env, &ns, "app-secret", &[("foo", "value1")]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn label_only_change_changes_the_hash() {
    let env = Env::start().await.unwrap();
    let ns = env.namespace("label").await.unwrap();
    let _esr = env.start_esr(&[]).unwrap();
    apply(&env, &ns, foo_bar_store("fake")).await;
    apply(&env, &ns, foo_bar_es("fake")).await;
    let before = wait_condition(&env, "ExternalSecret", &ns, "app", "True", "SecretSynced").await;
    let rv_before = str_at(&before, "/status/syncedResourceVersion")
        .unwrap()
        .to_string();
    merge_patch(
        &env,
        "ExternalSecret",
        &ns,
        "app",
        json!({"metadata": {"labels": {"team": "payments"}}}),
    )
    .await;
    let after = wait_for("hash changes", TIMEOUT, || async {
        let o = get(&env, "ExternalSecret", &ns, "app").await?;
        let rv = str_at(&o, "/status/syncedResourceVersion")?.to_string();
        (rv != rv_before).then_some(o)
    })
    .await
    .unwrap();
    assert_eq!(
        after["metadata"]["generation"], 1,
        "labels do not bump the generation"
    );
    let rv = str_at(&after, "/status/syncedResourceVersion").unwrap();
    assert!(rv.starts_with("1-") && rv.len() == 58, "{rv}");
    // without a template the ES labels are copied onto the Secret
    wait_for("label on secret", TIMEOUT, || async {
        let s = secret(&env, &ns, "app-secret").await?;
        (s.metadata.labels?.get("team").map(String::as_str) == Some("payments")).then_some(())
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_value_change_is_picked_up_on_refresh() {
    let env = Env::start().await.unwrap();
    let ns = env.namespace("refresh").await.unwrap();
    let _esr = env.start_esr(&[]).unwrap();
    apply(&env, &ns, foo_bar_store("fake")).await;
    let mut e = foo_bar_es("fake");
    e["spec"]["refreshInterval"] = json!("1s");
    apply(&env, &ns, e).await;
    wait_secret_data(&env, &ns, "app-secret", FOO_BAR).await;
    apply(
        &env,
        "",
        fake_css("fake", json!([{"key": "/app/foo", "value": "rotated"}, {"key": "/app/bar", "value": "value2"}])),
    )
    .await;
    wait_secret_data(
        &env,
        &ns,
        "app-secret",
        &[("foo", "rotated"), ("bar", "value2")],
    )
    .await;
    wait_event(&env, "app", "Updated", "secret updated").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_or_edited_target_secret_is_restored() {
    let env = Env::start().await.unwrap();
    let ns = env.namespace("drift").await.unwrap();
    let _esr = env.start_esr(&[]).unwrap();
    apply(&env, &ns, foo_bar_store("fake")).await;
    apply(&env, &ns, foo_bar_es("fake")).await;
    let s = wait_secret_data(&env, &ns, "app-secret", FOO_BAR).await;
    let uid = s.metadata.uid.clone().unwrap();
    delete(&env, "Secret", &ns, "app-secret").await;
    let s = wait_secret_data(&env, &ns, "app-secret", FOO_BAR).await;
    assert_ne!(s.metadata.uid.unwrap(), uid, "recreated");
    // An edited value and an added key are both reverted.
    for edit in [
        json!({"data": {"foo": "dGFtcGVyZWQ="}}),
        json!({"data": {"extra": "eA=="}}),
    ] {
        merge_patch(&env, "Secret", &ns, "app-secret", edit).await;
        wait_secret_data(&env, &ns, "app-secret", FOO_BAR).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn es_deletion_honours_deletion_policy() {
    let env = Env::start().await.unwrap();
    let ns = env.namespace("delete").await.unwrap();
    let _esr = env.start_esr(&[]).unwrap();
    apply(&env, &ns, foo_bar_store("fake")).await;
    let mut del = foo_bar_es("fake");
    del["metadata"]["name"] = json!("del");
    del["spec"]["target"] = json!({"name": "del-secret", "deletionPolicy": "Delete"});
    let mut keep = foo_bar_es("fake");
    keep["metadata"]["name"] = json!("keep");
    keep["spec"]["target"] =
        json!({"name": "keep-secret", "creationPolicy": "Orphan", "deletionPolicy": "Retain"});
    apply(&env, &ns, del).await;
    apply(&env, &ns, keep).await;
    wait_secret_data(&env, &ns, "del-secret", FOO_BAR).await;
    wait_secret_data(&env, &ns, "keep-secret", FOO_BAR).await;
    delete(&env, "ExternalSecret", &ns, "del").await;
    delete(&env, "ExternalSecret", &ns, "keep").await;
    wait_for("del-secret deleted", TIMEOUT, || async {
        secret(&env, &ns, "del-secret")
            .await
            .is_none()
            .then_some(())
    })
    .await
    .unwrap();
    wait_for("both ES gone", TIMEOUT, || async {
        let a = get(&env, "ExternalSecret", &ns, "del").await;
        let b = get(&env, "ExternalSecret", &ns, "keep").await;
        (a.is_none() && b.is_none()).then_some(())
    })
    .await
    .unwrap();
    let kept = secret(&env, &ns, "keep-secret")
        .await
        .expect("Retain keeps the Secret");
    assert_eq!(decoded(&kept)["foo"], "value1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_secret_store_denied_for_namespace() {
    let env = Env::start().await.unwrap();
    let ns = env.namespace("denied").await.unwrap();
    let _esr = env.start_esr(&[]).unwrap();
    let mut store = foo_bar_store("restricted");
    store["spec"]["conditions"] = json!([{"namespaces": ["somewhere-else"]}]);
    apply(&env, &ns, store).await;
    apply(&env, &ns, foo_bar_es("restricted")).await;
    let es = wait_condition(
        &env,
        "ExternalSecret",
        &ns,
        "app",
        "False",
        "SecretSyncedError",
    )
    .await;
    assert_eq!(ready(&es).2, "could not get secret data from provider");
    let note = wait_event(&env, "app", "UpdateFailed", "denied by spec.condition").await;
    assert_eq!(
        note,
        format!(
            "error processing spec.data[0] (key: /app/foo), err: using cluster store \"restricted\" is not allowed from namespace \"{ns}\": denied by spec.condition"
        )
    );
    assert!(secret(&env, &ns, "app-secret").await.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsupported_provider_is_reported_on_the_store() {
    let env = Env::start().await.unwrap();
    let ns = env.namespace("unsupported").await.unwrap();
    let _esr = env.start_esr(&[]).unwrap();
    apply(
        &env,
        &ns,
        json!({"apiVersion": "external-secrets.io/v1", "kind": "SecretStore", "metadata": {"name": "oracle"},
               "spec": {"provider": {"oracle": {"region": "eu-frankfurt-1", "vault": "ocid1.vault.oc1"}}}}),
    )
    .await;
    let st = wait_condition(
        &env,
        "SecretStore",
        &ns,
        "oracle",
        "False",
        "ProviderNotFound",
    )
    .await;
    assert_eq!(ready(&st).2, "provider oracle is not supported by esr");
    wait_event(
        &env,
        "oracle",
        "ProviderNotFound",
        "provider oracle is not supported by esr",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_not_ready_blocks_the_external_secret() {
    let env = Env::start().await.unwrap();
    let ns = env.namespace("notready").await.unwrap();
    let _esr = env.start_esr(&[]).unwrap();
    let mut store = fake_ss("broken", json!([{"key": "/app/foo", "value": "value1"}]));
    store["spec"]["provider"]["fake"]["validationResult"] = json!(2);
    apply(&env, &ns, store).await;
    let st = wait_condition(
        &env,
        "SecretStore",
        &ns,
        "broken",
        "False",
        "InvalidProviderConfig",
    )
    .await;
    assert_eq!(ready(&st).2, "unable to validate store");
    apply(
        &env,
        &ns,
        es(
            "app",
            json!({"secretStoreRef": {"name": "broken"}, "target": {"name": "app-secret"},
                   "data": [{"secretKey": "foo", "remoteRef": {"key": "/app/foo"}}]}),
        ),
    )
    .await;
    wait_condition(
        &env,
        "ExternalSecret",
        &ns,
        "app",
        "False",
        "SecretSyncedError",
    )
    .await;
    wait_event(
        &env,
        "app",
        "UpdateFailed",
        "SecretStore \"broken\" is not ready",
    )
    .await;
    // fixing the store makes it Ready, which requeues the ExternalSecret
    let mut fixed = fake_ss("broken", json!([{"key": "/app/foo", "value": "value1"}]));
    fixed["spec"]["provider"]["fake"]["validationResult"] = json!(0);
    apply(&env, &ns, fixed).await;
    wait_condition(&env, "ExternalSecret", &ns, "app", "True", "SecretSynced").await;
    wait_secret_data(&env, &ns, "app-secret", &[("foo", "value1")]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubernetes_store_reads_another_namespace() {
    let env = Env::start().await.unwrap();
    let ns = env.namespace("k8s").await.unwrap();
    let src = env.namespace("k8s-src").await.unwrap();
    let _esr = env.start_esr(&[]).unwrap();
    apply(
        &env,
        &src,
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "source"},
               "stringData": {"user": "admin", "token": "t0k"}}),
    )
    .await;
    apply(
        &env,
        &ns,
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "reader"}}),
    )
    .await;
    apply(
        &env,
        &ns,
        json!({"apiVersion": "external-secrets.io/v1", "kind": "SecretStore", "metadata": {"name": "k8s"},
               "spec": {"provider": {"kubernetes": {"remoteNamespace": src,
                        "auth": {"serviceAccount": {"name": "reader"}}}}}}),
    )
    .await;
    apply(
        &env,
        &ns,
        es(
            "app",
            json!({"secretStoreRef": {"name": "k8s"}, "target": {"name": "copied"},
                   "data": [{"secretKey": "u", "remoteRef": {"key": "source", "property": "user"}}],
                   "dataFrom": [{"extract": {"key": "source"}}]}),
        ),
    )
    .await;
    wait_condition(&env, "ExternalSecret", &ns, "app", "True", "SecretSynced").await;
    wait_secret_data(
        &env,
        &ns,
        "copied",
        &[("u", "admin"), ("user", "admin"), ("token", "t0k")],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_stopped_status_stays_on_old_generation() {
    let env = Env::start().await.unwrap();
    let ns = env.namespace("argo").await.unwrap();
    let mut esr = env.start_esr(&[]).unwrap();
    apply(&env, &ns, foo_bar_store("fake")).await;
    apply(&env, &ns, foo_bar_es("fake")).await;
    let es = wait_condition(&env, "ExternalSecret", &ns, "app", "True", "SecretSynced").await;
    assert_eq!(
        str_at(&es, "/status/syncedResourceVersion"),
        Some(RV_GEN1_EMPTY)
    );
    esr.stop();
    merge_patch(
        &env,
        "ExternalSecret",
        &ns,
        "app",
        json!({"spec": {"data": [{"secretKey": "foo", "remoteRef": {"key": "/app/foo"}}]}}),
    )
    .await;
    // Nothing reconciles: Argo CD sees generation 2 with a status still on generation 1.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let es = get(&env, "ExternalSecret", &ns, "app").await.unwrap();
    assert_eq!(es["metadata"]["generation"], 2);
    assert_eq!(
        str_at(&es, "/status/syncedResourceVersion"),
        Some(RV_GEN1_EMPTY)
    );
    assert_eq!(es["status"]["observedGeneration"], 1);
    let _esr2 = env.start_esr(&[]).unwrap();
    wait_for("synced to generation 2", TIMEOUT, || async {
        let o = get(&env, "ExternalSecret", &ns, "app").await?;
        str_at(&o, "/status/syncedResourceVersion")
            .filter(|v| v.starts_with("2-"))
            .map(|_| ())
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_and_probes_are_served() {
    let env = Env::start().await.unwrap();
    let ns = env.namespace("metrics").await.unwrap();
    let esr = env.start_esr(&[]).unwrap();
    apply(&env, &ns, foo_bar_store("fake")).await;
    apply(&env, &ns, foo_bar_es("fake")).await;
    wait_condition(&env, "ExternalSecret", &ns, "app", "True", "SecretSynced").await;
    let m = esr.metrics_addr.clone().unwrap();
    let p = esr.probes_addr.clone().unwrap();
    let text = http_get(&m, "/metrics").await;
    assert!(
        text.contains(&format!(
            "externalsecret_sync_calls_total{{name=\"app\",namespace=\"{ns}\"}}"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "externalsecret_status_condition{{name=\"app\",namespace=\"{ns}\",condition=\"Ready\",status=\"True\"}} 1"
        )),
        "{text}"
    );
    assert!(
        text.contains("clustersecretstore_status_condition{name=\"fake\""),
        "{text}"
    );
    assert!(
        text.contains("externalsecret_reconcile_duration{"),
        "{text}"
    );
    assert_eq!(http_get(&p, "/healthz").await, "ok");
    assert_eq!(http_get(&p, "/readyz").await, "ok");
}

async fn http_get(addr: &str, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = addr.to_string();
    let path = path.to_string();
    wait_for(&format!("GET {addr}{path}"), TIMEOUT, || {
        let addr = addr.clone();
        let path = path.clone();
        async move {
            let mut s = tokio::net::TcpStream::connect(&addr).await.ok()?;
            s.write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes())
                .await
                .ok()?;
            let mut buf = String::new();
            s.read_to_string(&mut buf).await.ok()?;
            let (head, body) = buf.split_once("\r\n\r\n")?;
            head.starts_with("HTTP/1.0 200")
                .then(|| body.to_string())
                .or_else(|| head.starts_with("HTTP/1.1 200").then(|| body.to_string()))
        }
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_election_one_active_and_failover() {
    use k8s_openapi::api::coordination::v1::Lease;
    let env = Env::start().await.unwrap();
    let ns = env.namespace("leader").await.unwrap();
    // The Lease name is given here: the harness's default arguments (deploy/manifests) name it
    // esr-controller, esr's built-in default is ESO's external-secrets-controller.
    let args = [
        "--enable-leader-election",
        "--leader-election-id=external-secrets-controller",
        "--leader-election-namespace",
        ns.as_str(),
    ];
    let mut first = env.start_esr(&args).unwrap();
    apply(&env, &ns, foo_bar_store("fake")).await;
    apply(&env, &ns, foo_bar_es("fake")).await;
    wait_condition(&env, "ExternalSecret", &ns, "app", "True", "SecretSynced").await;
    let leases: kube::Api<Lease> = kube::Api::namespaced(env.client(), &ns);
    let holder = wait_for("lease held", TIMEOUT, || async {
        leases
            .get_opt("external-secrets-controller")
            .await
            .ok()
            .flatten()?
            .spec?
            .holder_identity
    })
    .await
    .unwrap();
    let second = env.start_esr(&args).unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        second.logs().contains("waiting for leadership"),
        "{}",
        second.logs()
    );
    assert!(
        !second.logs().contains("acquired leadership"),
        "only one leader: {}",
        second.logs()
    );
    first.stop();
    // the lease expires (15 s) and the second instance takes over and reconciles new objects
    let mut e = foo_bar_es("fake");
    e["metadata"]["name"] = json!("after-failover");
    e["spec"]["target"] = json!({"name": "after-failover"});
    apply(&env, &ns, e).await;
    wait_for("second instance leads", Duration::from_secs(60), || async {
        let h = leases
            .get_opt("external-secrets-controller")
            .await
            .ok()
            .flatten()?
            .spec?
            .holder_identity?;
        (h != holder).then_some(())
    })
    .await
    .unwrap();
    wait_secret_data(&env, &ns, "after-failover", FOO_BAR).await;
}

/// Renaming the target (creationPolicy Owner) deletes the Secret under the old name, found by
/// its created-by label (from esr's managed-Secret cache), with ESO's `Deleted` event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renamed_target_deletes_the_orphaned_secret() {
    let env = Env::start().await.unwrap();
    let ns = env.namespace("orphan").await.unwrap();
    let _esr = env.start_esr(&[]).unwrap();
    apply(&env, &ns, foo_bar_store("fake")).await;
    let mut es = foo_bar_es("fake");
    es["metadata"]["name"] = json!("renamed");
    es["spec"]["target"] = json!({"name": "first"});
    apply(&env, &ns, es.clone()).await;
    wait_secret_data(&env, &ns, "first", FOO_BAR).await;
    // An unrelated managed Secret with another owner label stays.
    let mut other = foo_bar_es("fake");
    other["metadata"]["name"] = json!("bystander");
    other["spec"]["target"] = json!({"name": "bystander"});
    apply(&env, &ns, other).await;
    wait_secret_data(&env, &ns, "bystander", FOO_BAR).await;

    es["spec"]["target"] = json!({"name": "second"});
    apply(&env, &ns, es).await;
    wait_secret_data(&env, &ns, "second", FOO_BAR).await;
    wait_for("the old target is deleted", TIMEOUT, || async {
        secret(&env, &ns, "first").await.is_none().then_some(())
    })
    .await
    .unwrap();
    wait_event(
        &env,
        "renamed",
        "Deleted",
        "secret deleted because it was orphaned",
    )
    .await;
    assert!(secret(&env, &ns, "bystander").await.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generic_target_fails_with_esos_condition_and_writes_nothing() {
    let env = Env::start().await.unwrap();
    let ns = env.namespace("generic").await.unwrap();
    let mut esr = env.start_esr(&[]).unwrap();
    apply(&env, &ns, foo_bar_store("fake-generic")).await;
    let mut obj = foo_bar_es("fake-generic");
    obj["spec"]["target"] = json!({"name": "app-config",
        "manifest": {"apiVersion": "v1", "kind": "ConfigMap"}});
    apply(&env, &ns, obj.clone()).await;
    let es = wait_condition(
        &env,
        "ExternalSecret",
        &ns,
        "app",
        "False",
        "SecretSyncedError",
    )
    .await;
    assert_eq!(
        ready(&es).2,
        "invalid generic target: generic targets are disabled. Enable with --unsafe-allow-generic-targets flag"
    );
    wait_event(&env, "app", "UpdateFailed", "generic targets are disabled").await;
    assert!(secret(&env, &ns, "app-config").await.is_none());
    assert!(get(&env, "ConfigMap", &ns, "app-config").await.is_none());

    // With --unsafe-allow-generic-targets esr still writes no object, and says so.
    esr.stop();
    let _esr = env
        .start_esr(&["--unsafe-allow-generic-targets=true"])
        .unwrap();
    obj["metadata"]["labels"] = json!({"restart": "1"});
    apply(&env, &ns, obj).await;
    let es = wait_for("generic target refused with the flag", TIMEOUT, || async {
        let o = get(&env, "ExternalSecret", &ns, "app").await?;
        let r = ready(&o);
        r.2.contains("esr does not write generic targets")
            .then_some(r)
    })
    .await
    .unwrap();
    assert_eq!(
        es,
        (
            "False".to_string(),
            "SecretSyncedError".to_string(),
            "invalid generic target: esr does not write generic targets (v1 ConfigMap); only Secret targets are supported".to_string()
        )
    );
    assert!(secret(&env, &ns, "app-config").await.is_none());
    assert!(get(&env, "ConfigMap", &ns, "app-config").await.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eso_v2_10_reasons_and_detailed_messages() {
    let env = Env::start().await.unwrap();
    let ns = env.namespace("reasons").await.unwrap();
    let _esr = env.start_esr(&[]).unwrap();
    apply(&env, &ns, foo_bar_store("fake-reasons")).await;
    apply(&env, &ns, foo_bar_es("fake-reasons")).await;
    wait_secret_data(&env, &ns, "app-secret", FOO_BAR).await;

    // A second ExternalSecret targeting the first one's Secret: SecretOwnedByOther.
    let mut other = foo_bar_es("fake-reasons");
    other["metadata"]["name"] = json!("intruder");
    apply(&env, &ns, other).await;
    let es = wait_condition(
        &env,
        "ExternalSecret",
        &ns,
        "intruder",
        "False",
        "SecretOwnedByOther",
    )
    .await;
    assert_eq!(
        ready(&es).2,
        "target is owned by another ExternalSecret: unable to mutate secret app-secret: secret is owned by another ExternalSecret: app"
    );

    // A Kubernetes API error: `could not update secret: <the API server's message>`.
    apply(
        &env,
        &ns,
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "typed"},
               "type": "Opaque", "stringData": {"x": "y"}}),
    )
    .await;
    let mut typed = foo_bar_es("fake-reasons");
    typed["metadata"]["name"] = json!("typed");
    typed["spec"]["target"] = json!({"name": "typed", "template": {"type": "example.com/custom"}});
    apply(&env, &ns, typed).await;
    let es = wait_condition(
        &env,
        "ExternalSecret",
        &ns,
        "typed",
        "False",
        "SecretSyncedError",
    )
    .await;
    let msg = ready(&es).2;
    assert!(
        msg.starts_with(
            "could not update secret: unable to update secret typed: Secret \"typed\" is invalid: "
        ),
        "{msg}"
    );
    assert!(msg.contains("field is immutable"), "{msg}");
    assert!(!msg.contains("ErrorResponse"), "{msg}");
    // Provider errors stay generic.
    let mut broken = foo_bar_es("fake-reasons");
    broken["metadata"]["name"] = json!("broken");
    broken["spec"]["target"] = json!({"name": "broken-secret"});
    broken["spec"]["data"] = json!([{"secretKey": "k", "remoteRef": {"key": "/missing"}}]);
    apply(&env, &ns, broken).await;
    let es = wait_condition(
        &env,
        "ExternalSecret",
        &ns,
        "broken",
        "False",
        "SecretSyncedError",
    )
    .await;
    assert_eq!(ready(&es).2, "could not get secret data from provider");
}
