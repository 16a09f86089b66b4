//! One tenant must not stall the others: a poison template, a hung store, a long error, an
//! overloaded client, against esr-testkit (or ESR_E2E_KUBECONFIG) with the real `esr` binary.
//!
//! Waits are generous upper bounds on an eventual state, never timings.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod es_support;

use std::time::Duration;

use es_support::*;
use esr_e2e::{Env, EsrProcess, str_at, wait_for};
use serde_json::{Value, json};

/// A template that stays within the step limit and the memory budget and would run for hours.
const POISON: &str = r#"{{ range until 1000000 }}{{ $h := bcrypt "x" }}{{ end }}{{ .pw }}"#;
/// The value the stores hold: it must never appear in a status, an event or a log.
const VALUE: &str = "s3cr3t-tenant-value";

/// One async worker, as in a pod limited to one CPU: a render holding it would stop everything.
const ONE_WORKER: &[(&str, &str)] = &[("TOKIO_WORKER_THREADS", "1")];

fn store() -> Value {
    fake_css("fake", json!([{"key": "/pw", "value": VALUE}]))
}

fn canary(name: &str, refresh: &str) -> Value {
    es(
        name,
        json!({
            "refreshInterval": refresh,
            "secretStoreRef": {"kind": "ClusterSecretStore", "name": "fake"},
            "target": {"name": name},
            "data": [{"secretKey": "pw", "remoteRef": {"key": "/pw"}}]
        }),
    )
}

fn poison(name: &str) -> Value {
    es(
        name,
        json!({
            "refreshInterval": "1h",
            "secretStoreRef": {"kind": "ClusterSecretStore", "name": "fake"},
            "target": {"name": name, "template": {"data": {"k": POISON}}},
            "data": [{"secretKey": "pw", "remoteRef": {"key": "/pw"}}]
        }),
    )
}

/// The poison as a rewrite `transform` (a template too, run on the same pool).
fn poison_transform(name: &str) -> Value {
    es(
        name,
        json!({
            "refreshInterval": "1h",
            "secretStoreRef": {"kind": "ClusterSecretStore", "name": "fake"},
            "target": {"name": name},
            "dataFrom": [{"find": {"name": {"regexp": ".*"}},
                          "rewrite": [{"transform": {"template": POISON}}]}]
        }),
    )
}

/// One GET, `None` when the server does not answer 200 within 5 s.
async fn try_get(addr: &str, path: &str) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let get = async {
        let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
        s.write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes())
            .await
            .ok()?;
        let mut buf = String::new();
        s.read_to_string(&mut buf).await.ok()?;
        let (head, body) = buf.split_once("\r\n\r\n")?;
        (head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"))
            .then(|| body.to_string())
    };
    tokio::time::timeout(Duration::from_secs(5), get)
        .await
        .ok()
        .flatten()
}

async fn get_ok(addr: &str, path: &str) -> String {
    wait_for(&format!("GET {addr}{path}"), TIMEOUT, || {
        try_get(addr, path)
    })
    .await
    .unwrap()
}

async fn sync_calls(esr: &EsrProcess, ns: &str, name: &str) -> Option<f64> {
    let text = try_get(esr.metrics_addr.as_deref().unwrap(), "/metrics").await?;
    let series = format!("externalsecret_sync_calls_total{{name=\"{name}\",namespace=\"{ns}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&series))
        .and_then(|v| v.trim().parse().ok())
}

fn refresh_time(obj: &Value) -> String {
    str_at(obj, "/status/refreshTime")
        .unwrap_or_default()
        .to_string()
}

/// ESO's default `--concurrent 1`: the poison renders (a target template, and a rewrite
/// transform) fail at their deadline with value-free errors and a backoff, while the canaries
/// keep refreshing and the probes and /metrics answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poison_template_fails_alone_and_canaries_keep_syncing() {
    let env = Env::start().await.unwrap();
    let ns = env.namespace("poison").await.unwrap();
    let esr = env
        .start_esr_with_env(&["--template-timeout=2s"], ONE_WORKER)
        .unwrap();
    apply(&env, &ns, store()).await;
    wait_condition(&env, "ClusterSecretStore", "", "fake", "True", "Valid").await;
    let canaries = ["canary-a", "canary-b", "canary-c"];
    for c in canaries {
        apply(&env, &ns, canary(c, "1s")).await;
    }
    apply(&env, &ns, poison("poison")).await;
    apply(&env, &ns, poison_transform("poison-transform")).await;
    let failed = wait_condition(
        &env,
        "ExternalSecret",
        &ns,
        "poison",
        "False",
        "SecretSyncedError",
    )
    .await;
    assert_eq!(ready(&failed).2, "could not update secret");
    let note = wait_event(
        &env,
        "poison",
        "UpdateFailed",
        "could not execute template: the render exceeded its deadline of 2s",
    )
    .await;
    assert!(!note.contains(VALUE), "{note}");
    wait_condition(
        &env,
        "ExternalSecret",
        &ns,
        "poison-transform",
        "False",
        "SecretSyncedError",
    )
    .await;
    wait_event(
        &env,
        "poison-transform",
        "UpdateFailed",
        "unable to execute transform template: the render exceeded its deadline of 2s",
    )
    .await;
    // The poison is retried with a backoff; meanwhile every canary refreshes again.
    let before: Vec<String> = {
        let mut v = Vec::new();
        for c in canaries {
            v.push(refresh_time(
                &get(&env, "ExternalSecret", &ns, c).await.unwrap(),
            ));
        }
        v
    };
    wait_for("the poison retried", TIMEOUT, || async {
        (sync_calls(&esr, &ns, "poison").await? >= 2.0).then_some(())
    })
    .await
    .unwrap();
    for (c, old) in canaries.iter().zip(before) {
        wait_for(&format!("{c} refreshed"), TIMEOUT, || async {
            let o = get(&env, "ExternalSecret", &ns, c).await?;
            (ready(&o).0 == "True" && refresh_time(&o) != old).then_some(())
        })
        .await
        .unwrap();
        wait_secret_data(&env, &ns, c, &[("pw", VALUE)]).await;
    }
    assert_eq!(
        get_ok(esr.probes_addr.as_deref().unwrap(), "/healthz").await,
        "ok"
    );
    let metrics = get_ok(esr.metrics_addr.as_deref().unwrap(), "/metrics").await;
    assert!(
        metrics.contains("externalsecret_sync_calls_total"),
        "{metrics}"
    );
    for (_, _, _, note, regarding) in events(&env).await {
        assert!(!note.contains(VALUE), "event on {regarding}: {note}");
    }
    let poisoned = get(&env, "ExternalSecret", &ns, "poison").await.unwrap();
    assert!(!poisoned.to_string().contains(VALUE), "{poisoned}");
    assert!(!esr.logs().contains(VALUE));
    assert!(secret(&env, &ns, "poison").await.is_none());
    assert!(secret(&env, &ns, "poison-transform").await.is_none());
}

/// A render that would run for an hour holds no async worker (one here): another
/// ExternalSecret syncs and /healthz answers while it runs, and SIGTERM stops esr within a pod's
/// grace period, cancelling the render instead of waiting for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_render_blocks_nothing_and_sigterm_stops_esr() {
    let env = Env::start().await.unwrap();
    let ns = env.namespace("render-term").await.unwrap();
    let mut esr = env
        .start_esr_with_env(&["--template-timeout=1h", "--concurrent=2"], ONE_WORKER)
        .unwrap();
    apply(&env, &ns, store()).await;
    wait_condition(&env, "ClusterSecretStore", "", "fake", "True", "Valid").await;
    apply(&env, &ns, poison("poison")).await;
    wait_for("the poison's reconcile started", TIMEOUT, || async {
        (sync_calls(&esr, &ns, "poison").await? >= 1.0).then_some(())
    })
    .await
    .unwrap();
    apply(&env, &ns, canary("canary", "1h")).await;
    wait_condition(
        &env,
        "ExternalSecret",
        &ns,
        "canary",
        "True",
        "SecretSynced",
    )
    .await;
    wait_secret_data(&env, &ns, "canary", &[("pw", VALUE)]).await;
    assert_eq!(
        get_ok(esr.probes_addr.as_deref().unwrap(), "/healthz").await,
        "ok"
    );
    // The canary synced while the poison render was still running: it has no outcome yet.
    let running = get(&env, "ExternalSecret", &ns, "poison").await.unwrap();
    assert_eq!(ready(&running).0, "", "{running}");
    let status = std::process::Command::new("kill")
        .args(["-TERM", &esr.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    // 30 s: Kubernetes' default terminationGracePeriodSeconds.
    let code = esr.wait_exit(Duration::from_secs(30)).await.unwrap();
    assert_eq!(code, Some(0), "{}", esr.logs());
    assert!(!esr.logs().contains(VALUE));
}

/// An error text longer than an Event note may be (1,024 bytes) still yields its event, cut.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_longer_than_an_event_note_still_yields_an_event() {
    let env = Env::start().await.unwrap();
    let ns = env.namespace("long-err").await.unwrap();
    let _esr = env.start_esr(&[]).unwrap();
    apply(&env, &ns, store()).await;
    wait_condition(&env, "ClusterSecretStore", "", "fake", "True", "Valid").await;
    let key = format!("/missing-{}", "k".repeat(1500));
    apply(
        &env,
        &ns,
        es(
            "long",
            json!({
                "refreshInterval": "1h",
                "secretStoreRef": {"kind": "ClusterSecretStore", "name": "fake"},
                "target": {"name": "long"},
                "data": [{"secretKey": "pw", "remoteRef": {"key": key}}]
            }),
        ),
    )
    .await;
    wait_condition(
        &env,
        "ExternalSecret",
        &ns,
        "long",
        "False",
        "SecretSyncedError",
    )
    .await;
    let note = wait_event(
        &env,
        "long",
        "UpdateFailed",
        "error processing spec.data[0]",
    )
    .await;
    assert!(note.len() <= 1024, "{}", note.len());
    assert!(note.ends_with("..."), "{note}");
    assert!(
        note.starts_with("error processing spec.data[0] (key: /missing-kkk"),
        "{note}"
    );
}

/// A TCP listener that accepts connections and never answers; its address.
async fn hung_server() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    format!("http://{addr}")
}

/// A Vault store whose server accepts connections and never answers delays only the
/// ExternalSecrets that use it: fake-store ExternalSecrets in another namespace sync while the
/// hung ones are stuck, and the hung ones fail with a value-free timeout error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_store_delays_only_its_own_external_secrets() {
    let env = Env::start().await.unwrap();
    let tenant = env.namespace("hung").await.unwrap();
    let others = env.namespace("others").await.unwrap();
    // The flood gate off: the store is used whatever its Ready condition (its validation hangs
    // too), as when a Vault that was healthy stops answering.
    let esr = env.start_esr(&["--enable-flood-gate=false"]).unwrap();
    let server = hung_server().await;
    apply(
        &env,
        &tenant,
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "vault-token"},
               "stringData": {"token": "root"}}),
    )
    .await;
    apply(
        &env,
        &tenant,
        json!({"apiVersion": "external-secrets.io/v1", "kind": "SecretStore",
               "metadata": {"name": "vault"},
               "spec": {"provider": {"vault": {"server": server, "path": "secret",
                        "auth": {"tokenSecretRef": {"name": "vault-token", "key": "token"}}}}}}),
    )
    .await;
    let hung = ["hung-a", "hung-b", "hung-c"];
    for h in hung {
        apply(
            &env,
            &tenant,
            es(
                h,
                json!({"refreshInterval": "1h", "secretStoreRef": {"name": "vault"},
                       "target": {"name": h},
                       "data": [{"secretKey": "pw", "remoteRef": {"key": "app", "property": "pw"}}]}),
            ),
        )
        .await;
    }
    wait_for("a hung reconcile started", TIMEOUT, || async {
        let mut started = 0.0;
        for h in hung {
            started += sync_calls(&esr, &tenant, h).await.unwrap_or(0.0);
        }
        (started >= 1.0).then_some(())
    })
    .await
    .unwrap();
    apply(
        &env,
        &others,
        fake_ss("fake", json!([{"key": "/pw", "value": VALUE}])),
    )
    .await;
    let fine = ["fine-a", "fine-b", "fine-c"];
    for f in fine {
        apply(
            &env,
            &others,
            es(
                f,
                json!({"refreshInterval": "1h", "secretStoreRef": {"name": "fake"},
                       "target": {"name": f},
                       "data": [{"secretKey": "pw", "remoteRef": {"key": "/pw"}}]}),
            ),
        )
        .await;
    }
    let t0 = std::time::Instant::now();
    // Generous: several hung calls may run (one at a time with `--concurrent 1`) before them.
    for f in fine {
        wait_for(&format!("{f} synced"), Duration::from_secs(120), || async {
            let o = get(&env, "ExternalSecret", &others, f).await?;
            (ready(&o).0 == "True").then_some(())
        })
        .await
        .unwrap();
        wait_secret_data(&env, &others, f, &[("pw", VALUE)]).await;
        println!("{f} synced after {:?}", t0.elapsed());
    }
    for h in hung {
        wait_for(&format!("{h} failed"), Duration::from_secs(120), || async {
            let o = get(&env, "ExternalSecret", &tenant, h).await?;
            (ready(&o).0 == "False").then_some(())
        })
        .await
        .unwrap();
        println!("{h} failed after {:?}", t0.elapsed());
    }
    let store = format!("SecretStore/{tenant}/vault");
    let note = wait_event(&env, "hung-a", "UpdateFailed", &store).await;
    assert!(
        note.contains("did not answer within 10s") || note.contains("is not answering"),
        "{note}"
    );
}

/// A saturated API client (`--client-qps 5`) and ExternalSecrets refreshing every second: the
/// refreshes of the synced ones never keep the others from their first sync, so every
/// ExternalSecret gets a status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_a_saturated_client_every_external_secret_gets_a_status() {
    let env = Env::start().await.unwrap();
    let ns = env.namespace("starve").await.unwrap();
    let _esr = env
        .start_esr(&["--client-qps=5", "--client-burst=5", "--concurrent=4"])
        .unwrap();
    apply(&env, &ns, store()).await;
    wait_condition(&env, "ClusterSecretStore", "", "fake", "True", "Valid").await;
    let names: Vec<String> = (0..30).map(|i| format!("es-{i:02}")).collect();
    for n in &names {
        apply(&env, &ns, canary(n, "1s")).await;
    }
    let t0 = std::time::Instant::now();
    // Generous: 30 first syncs at 5 API calls per second.
    let result = wait_for(
        "every ExternalSecret has a status",
        Duration::from_secs(240),
        || async {
            let (count, without) = statusless(&env, &ns).await?;
            (count == names.len() && without.is_empty()).then_some(())
        },
    )
    .await;
    if let Err(e) = result {
        panic!("{e}; without a status: {:?}", statusless(&env, &ns).await);
    }
    println!("every ExternalSecret had a status after {:?}", t0.elapsed());
    for n in &names {
        let o = get(&env, "ExternalSecret", &ns, n).await.unwrap();
        assert_eq!(ready(&o).0, "True", "{o}");
    }
}

/// How many ExternalSecrets `ns` holds, and the names of those without a Ready condition.
async fn statusless(env: &Env, ns: &str) -> Option<(usize, Vec<String>)> {
    let list = api(env, "ExternalSecret", ns)
        .list(&Default::default())
        .await
        .ok()?;
    let without = list
        .items
        .iter()
        .map(|o| serde_json::to_value(o).unwrap())
        .filter(|o| ready(o).0.is_empty())
        .filter_map(|o| str_at(&o, "/metadata/name").map(String::from))
        .collect();
    Some((list.items.len(), without))
}
