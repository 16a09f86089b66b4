//! In-place swap of ESO's Deployment: `esr controller` started with exactly the arguments ESO's
//! Helm chart renders (fixtures in e2e/fixtures/, one argument per line) runs and syncs. Only the
//! listen ports are mapped to free local ports (`--metrics-addr`, and `--live-addr` whose default
//! `:8082` the chart leaves in place), and `--kubeconfig` stands in for the in-cluster config.
//! esr's own deploy manifest args are not added.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod es_support;

use std::time::Duration;

use es_support::*;
use esr_e2e::{Env, repo_root};
use serde_json::json;

fn fixture_args(name: &str) -> Vec<String> {
    let path = repo_root().join("e2e/fixtures").join(name);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

fn free_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    format!("127.0.0.1:{}", l.local_addr().unwrap().port())
}

/// Starts `esr controller` with exactly `args` (plus `--kubeconfig` and a free `--live-addr`).
fn start_exact(env: &Env, args: &[String]) -> esr_e2e::EsrProcess {
    let mut full = vec![
        "controller".to_string(),
        format!("--kubeconfig={}", env.kubeconfig_path().display()),
    ];
    full.extend(args.iter().cloned());
    full.push(format!("--live-addr={}", free_addr()));
    let refs: Vec<&str> = full.iter().map(String::as_str).collect();
    env.start_esr_raw(&refs).unwrap()
}

/// The fixture's arguments with `--metrics-addr` mapped to a free local port.
fn swapped_args(name: &str) -> Vec<String> {
    let args = fixture_args(name);
    assert!(
        args.iter().any(|a| a.starts_with("--metrics-addr=")),
        "{args:?}"
    );
    args.into_iter()
        .map(|a| {
            if a.starts_with("--metrics-addr=") {
                format!("--metrics-addr={}", free_addr())
            } else {
                a
            }
        })
        .collect()
}

async fn syncs(env: &Env, ns: &str, store: &str) {
    // ESO's chart passes no --controller-class, so esr runs as class "default". The store says
    // so explicitly: the harness would otherwise give it this Env's own class, and on a shared
    // cluster a store without a class would be reconciled by every other scenario's esr too.
    let mut store_obj = fake_ss(store, json!([{"key": "/app/foo", "value": "value1"}]));
    store_obj["spec"]["controller"] = json!("default");
    apply(env, ns, store_obj).await;
    wait_condition(env, "SecretStore", ns, store, "True", "Valid").await;
    apply(
        env,
        ns,
        es(
            "app",
            json!({"refreshInterval": "1h", "secretStoreRef": {"name": store},
                   "target": {"name": "app-secret"},
                   "data": [{"secretKey": "foo", "remoteRef": {"key": "/app/foo"}}]}),
        ),
    )
    .await;
    let es = wait_condition(env, "ExternalSecret", ns, "app", "True", "SecretSynced").await;
    assert_eq!(ready(&es).2, "secret synced");
    wait_secret_data(env, ns, "app-secret", &[("foo", "value1")]).await;
}

/// The timestamp (`ts`, a number or a string by the time encoding) of the first JSON log line.
fn first_timestamp(logs: &str) -> String {
    logs.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find_map(|v| match v.get("ts")? {
            serde_json::Value::String(s) => Some(s.clone()),
            t => Some(t.to_string()),
        })
        .unwrap_or_else(|| panic!("no JSON log line with a timestamp:\n{logs}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eso_chart_default_args_run_and_sync() {
    let env = Env::start().await.unwrap();
    let ns = env.namespace("swap").await.unwrap();
    let args = swapped_args("eso-chart-default-args.txt");
    assert_eq!(args.len(), 4, "{args:?}");
    let mut esr = start_exact(&env, &args);
    syncs(&env, &ns, "fake").await;
    assert!(esr.is_running(), "{}", esr.logs());
    // --zap-time-encoding=epoch: seconds since the epoch, as zap writes them.
    let ts = first_timestamp(&esr.logs());
    let secs: f64 = ts
        .parse()
        .unwrap_or_else(|e| panic!("{ts:?} is not an epoch timestamp: {e}"));
    assert!(secs > 1.0e9, "{ts}");
    // Nothing the chart passes by default is ignored.
    assert!(
        !esr.logs().contains("accepted for ESO compatibility"),
        "{}",
        esr.logs()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eso_chart_args_with_leader_election_timings_and_extra_args() {
    let env = Env::start().await.unwrap();
    let ns = env.namespace("swap-extra").await.unwrap();
    let mut args = swapped_args("eso-chart-extra-args.txt");
    // In a pod the Lease namespace is the pod's; here it is a namespace of this test.
    args.push(format!("--leader-election-namespace={ns}"));
    let mut esr = start_exact(&env, &args);
    syncs(&env, &ns, "fake").await;
    assert!(esr.is_running(), "{}", esr.logs());
    // The Lease carries --leader-election-lease-duration.
    let lease =
        kube::Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(env.client(), &ns)
            .get("external-secrets-controller")
            .await
            .unwrap();
    assert_eq!(lease.spec.unwrap().lease_duration_seconds, Some(30));
    let logs = esr.logs();
    // --zap-time-encoding=rfc3339.
    let ts = first_timestamp(&logs);
    assert!(
        ts.len() == 20 && ts.ends_with('Z') && ts.as_bytes()[10] == b'T',
        "{ts}"
    );
    // One warning per accepted-but-ignored flag, logged once.
    for flag in [
        "--enable-configmaps-caching",
        "--enable-managed-secrets-caching",
        "--enable-secrets-caching",
        "--experimental-enable-vault-token-cache",
        "--metrics-secure",
    ] {
        let needle = format!("{flag} is accepted for ESO compatibility and has no effect");
        assert_eq!(logs.matches(&needle).count(), 1, "{flag}:\n{logs}");
    }
    esr.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flags_outside_esos_set_still_fail() {
    let env = Env::start().await.unwrap();
    let mut esr = env
        .start_esr_raw(&["controller", "--enable-everything=true"])
        .unwrap();
    let code = esr.wait_exit(Duration::from_secs(30)).await.unwrap();
    assert_eq!(code, Some(2), "{}", esr.logs());
    assert!(esr.logs().contains("--enable-everything"), "{}", esr.logs());
}
