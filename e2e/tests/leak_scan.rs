//! Secret values must never appear in controller logs, events or status. This scenario drives the
//! controller through successes and failures (template errors, invalid keys, a failing store,
//! rotation, drift) with distinctive values, then scans every log line, every Event and the status
//! of every ExternalSecret / store for them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod es_support;

use es_support::*;
use esr_e2e::{Env, wait_for};
use kube::api::ListParams;
use serde_json::json;

const VALUES: &[&str] = &[
    "LEAKCANARY-alpha-7f3a",
    "LEAKCANARY-beta-91c2",
    "LEAKCANARY-rotated-55d0",
    "LEAKCANARY-json-pass-0b1e",
    "LEAKCANARY-source-k8s-c4a9",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_value_in_logs_events_or_status() {
    let env = Env::start().await.unwrap();
    let ns = env.namespace("leak").await.unwrap();
    let src = env.namespace("leak-src").await.unwrap();
    let esr = env.start_esr(&["--loglevel", "debug"]).unwrap();
    apply(
        &env,
        &ns,
        fake_css(
            "fake",
            json!([
                {"key": "/a", "value": VALUES[0]},
                {"key": "/b", "value": VALUES[1]},
                {"key": "/json", "value": format!("{{\"user\":\"u\",\"pass\":\"{}\"}}", VALUES[3])},
                {"key": "/badkeys", "value": format!("{{\"bad key!\":\"{}\"}}", VALUES[0])}
            ]),
        ),
    )
    .await;
    // success with a template
    apply(
        &env,
        &ns,
        es(
            "ok",
            json!({"refreshInterval": "1s", "secretStoreRef": {"kind": "ClusterSecretStore", "name": "fake"},
                   "target": {"name": "ok", "template": {"data": {"dsn": "x://{{ .a }}:{{ .pass }}"}}},
                   "data": [{"secretKey": "a", "remoteRef": {"key": "/a"}}],
                   "dataFrom": [{"extract": {"key": "/json"}}]}),
        ),
    )
    .await;
    // template execution error while values are in scope
    apply(
        &env,
        &ns,
        es(
            "tmpl-error",
            json!({"secretStoreRef": {"kind": "ClusterSecretStore", "name": "fake"},
                   "target": {"template": {"data": {"k": "{{ .a | b64dec }}{{ .missing }}"}}},
                   "data": [{"secretKey": "a", "remoteRef": {"key": "/a"}}]}),
        ),
    )
    .await;
    // a function that fails on the value itself
    apply(
        &env,
        &ns,
        es(
            "fn-error",
            json!({"secretStoreRef": {"kind": "ClusterSecretStore", "name": "fake"},
                   "target": {"template": {"data": {"k": "{{ .b | fail }}"}}},
                   "data": [{"secretKey": "b", "remoteRef": {"key": "/b"}}]}),
        ),
    )
    .await;
    // invalid keys (the key is printed, the value must not be)
    apply(
        &env,
        &ns,
        es(
            "bad-keys",
            json!({"secretStoreRef": {"kind": "ClusterSecretStore", "name": "fake"},
                   "dataFrom": [{"extract": {"key": "/badkeys"}, "rewrite": [{"regexp": {"source": "x", "target": "y"}}]}]}),
        ),
    )
    .await;
    // property that does not exist / decoding failure
    apply(
        &env,
        &ns,
        es(
            "decode-error",
            json!({"secretStoreRef": {"kind": "ClusterSecretStore", "name": "fake"},
                   "data": [{"secretKey": "a", "remoteRef": {"key": "/a", "decodingStrategy": "Base64"}}]}),
        ),
    )
    .await;
    // kubernetes provider reading another namespace
    apply(
        &env,
        &src,
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"v": VALUES[4]}}),
    )
    .await;
    apply(
        &env,
        &ns,
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "r"}}),
    )
    .await;
    apply(
        &env,
        &ns,
        json!({"apiVersion": "external-secrets.io/v1", "kind": "SecretStore", "metadata": {"name": "k8s"},
               "spec": {"provider": {"kubernetes": {"remoteNamespace": src, "auth": {"serviceAccount": {"name": "r"}}}}}}),
    )
    .await;
    apply(
        &env,
        &ns,
        es(
            "k8s",
            json!({"secretStoreRef": {"name": "k8s"},
                   "data": [{"secretKey": "v", "remoteRef": {"key": "s", "property": "v"}},
                            {"secretKey": "w", "remoteRef": {"key": "s", "property": "nope"}}]}),
        ),
    )
    .await;

    wait_secret_data(
        &env,
        &ns,
        "ok",
        &[("dsn", &format!("x://{}:{}", VALUES[0], VALUES[3]))],
    )
    .await;
    for name in ["tmpl-error", "fn-error", "bad-keys", "decode-error", "k8s"] {
        wait_condition(
            &env,
            "ExternalSecret",
            &ns,
            name,
            "False",
            "SecretSyncedError",
        )
        .await;
    }
    // rotation and drift on the healthy one
    apply(
        &env,
        &ns,
        fake_css(
            "fake",
            json!([
                {"key": "/a", "value": VALUES[2]},
                {"key": "/b", "value": VALUES[1]},
                {"key": "/json", "value": format!("{{\"user\":\"u\",\"pass\":\"{}\"}}", VALUES[3])},
                {"key": "/badkeys", "value": format!("{{\"bad key!\":\"{}\"}}", VALUES[0])}
            ]),
        ),
    )
    .await;
    wait_secret_data(
        &env,
        &ns,
        "ok",
        &[("dsn", &format!("x://{}:{}", VALUES[2], VALUES[3]))],
    )
    .await;
    merge_patch(
        &env,
        "Secret",
        &ns,
        "ok",
        json!({"data": {"dsn": "ZHJpZnQ="}}),
    )
    .await;
    wait_secret_data(
        &env,
        &ns,
        "ok",
        &[("dsn", &format!("x://{}:{}", VALUES[2], VALUES[3]))],
    )
    .await;
    // the failures with their real causes (after the stores became Ready)
    wait_event(&env, "bad-keys", "UpdateFailed", "invalid secret keys").await;
    wait_event(&env, "k8s", "UpdateFailed", "spec.data[1] (key: s)").await;
    wait_event(&env, "fn-error", "UpdateFailed", "at key k").await;
    // let a few more failing reconciles (with backoff) happen
    wait_for("several UpdateFailed events", TIMEOUT, || async {
        (events(&env)
            .await
            .iter()
            .filter(|e| e.2 == "UpdateFailed")
            .count()
            >= 5)
            .then_some(())
    })
    .await
    .unwrap();

    let mut haystack = String::new();
    let logs = esr.logs();
    assert!(
        logs.contains("reconciled secret"),
        "the log is captured: {logs}"
    );
    haystack.push_str(&logs);
    for e in events(&env).await {
        println!("event: {e:?}");
        haystack.push_str(&format!("\n{e:?}"));
    }
    for kind in ["ExternalSecret", "SecretStore", "ClusterSecretStore"] {
        let list = api(&env, kind, "")
            .list(&ListParams::default())
            .await
            .unwrap();
        for o in list.items {
            let v = serde_json::to_value(&o).unwrap();
            haystack.push_str(&format!(
                "\n{}",
                v.get("status").cloned().unwrap_or_default()
            ));
        }
    }
    assert!(haystack.contains("UpdateFailed"), "events were collected");
    for v in VALUES {
        assert!(
            !haystack.contains(v),
            "secret value {v} leaked:\n{}",
            context_of(&haystack, v)
        );
    }
    // base64 forms of the values must not leak either
    for v in VALUES {
        let b64 = base64_std(v.as_bytes());
        assert!(!haystack.contains(&b64), "base64 of {v} leaked");
    }
}

fn context_of(h: &str, needle: &str) -> String {
    h.lines()
        .filter(|l| l.contains(needle))
        .take(5)
        .collect::<Vec<_>>()
        .join("\n")
}

fn base64_std(b: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(b)
}
