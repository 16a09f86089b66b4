//! `make bench-scale` (scripts/bench-scale.sh): esr's throughput, API requests, memory, CPU and
//! latency with many ExternalSecrets. A benchmark, not a test: it is ignored by `make test`,
//! reports figures and fails only when the workload never becomes Ready or esr dies.
//!
//! 1. W, the API server's write rate: 16 parallel clients create BENCH_SECRETS (50,000)
//!    unrelated Secrets of 1 KiB.
//! 2. BENCH_ES (10,000) ExternalSecrets are created, each extracting one key of a fake
//!    ClusterSecretStore.
//! 3. The release esr starts (manifest flags plus BENCH_ESR_ARGS); the cold sync ends when every
//!    ExternalSecret is Ready. One cold sync needs two writes (the Secret and the status), so
//!    W/2 ExternalSecrets per second is the ceiling the rate is compared with. The end is the
//!    latest `status.refreshTime` (written by esr at the sync, second precision, counted up to the
//!    end of its second), not the moment this harness saw it: a debug harness reading the watch of
//!    10,000 objects lags seconds behind, and a LIST after 10 s of silence is only a safety net.
//! 4. Every managed Secret is checked for the value its ExternalSecret extracts.
//! 5. BENCH_REFRESH (1,000) ExternalSecrets refresh with unchanged data (their refreshInterval
//!    changes from 1h to 2h: a new generation, the same Secret; the `force-sync` annotation would
//!    not do, as an ExternalSecret's annotations are copied to its Secret); their requests are
//!    counted separately.
//! 6. Latency, over BENCH_SAMPLES (100) samples each: a spec change until the Secret holds the
//!    new value, and a new namespace until it has its ClusterExternalSecret's Secret.
//!
//! Requests by verb and resource come from esr-testkit's audit log (esr's User-Agent); on a real
//! cluster (ESR_E2E_KUBECONFIG) they are not available. Peak RSS is VmHWM of the esr process,
//! CPU-seconds its utime + stime.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod es_support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use es_support::*;
use esr_e2e::{CLUSTER_WIDE, Env, str_at};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use serde_json::{Value, json};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A field of /proc/<pid>/status in KiB (VmRSS, VmHWM).
fn proc_status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// utime + stime of a process in seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // Fields after the command (which may contain spaces) start after the last ')'.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest[0] is field 3 (state); utime is field 14, stime field 15.
    let ticks = |i: usize| {
        f.get(i - 3)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // /proc accounts CPU time in clock ticks of 1/100 s (USER_HZ) on Linux.
    (ticks(14) + ticks(15)) / 100.0
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1]
}

/// esr's requests since the audit log was last cleared, by "verb resource[/subresource]".
fn esr_requests(env: &Env) -> Option<BTreeMap<String, usize>> {
    let audit = env.audit()?;
    let mut by: BTreeMap<String, usize> = BTreeMap::new();
    for e in audit
        .entries()
        .iter()
        .filter(|e| e.user_agent.starts_with("esr/"))
    {
        let res = if e.subresource.is_empty() {
            e.resource.clone()
        } else {
            format!("{}/{}", e.resource, e.subresource)
        };
        *by.entry(format!("{} {res}", e.verb)).or_default() += 1;
    }
    Some(by)
}

fn print_requests(what: &str, by: Option<BTreeMap<String, usize>>, n: usize) {
    let Some(by) = by else {
        println!("{what}: n/a (no audit log on a real cluster)");
        return;
    };
    let total: usize = by.values().sum();
    // The per-ExternalSecret requests; watches, lists and leases (a handful in all) as "other".
    let n = n.max(1);
    let mut other = 0;
    let mut parts: Vec<String> = Vec::new();
    for (k, v) in &by {
        if *v * 20 >= n {
            parts.push(format!("{k} {:.2}", *v as f64 / n as f64));
        } else {
            other += v;
        }
    }
    parts.push(format!("other {other} in all"));
    println!(
        "{what}: {:.2} per ExternalSecret ({})",
        total as f64 / n as f64,
        parts.join(", ")
    );
}

fn es_obj(name: &str, key: usize) -> Value {
    json!({"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
        "metadata": {"name": name},
        "spec": {"refreshInterval": "1h",
                 "secretStoreRef": {"kind": "ClusterSecretStore", "name": "bench"},
                 "data": [{"secretKey": "value", "remoteRef": {"key": format!("/bench/{key}")}}]}})
}

/// Runs `n` creations with 16 requests in flight; the seconds it took.
async fn create_parallel<F, Fut>(n: usize, f: F) -> f64
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let t = Instant::now();
    futures::stream::iter(0..n)
        .map(f)
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await;
    t.elapsed().as_secs_f64()
}

/// The name and refreshTime of an ExternalSecret that is Ready with a refreshTime other than the
/// one in `before`.
fn done(
    o: &kube::api::DynamicObject,
    before: &BTreeMap<String, String>,
) -> Option<(String, String)> {
    let name = o.metadata.name.clone().unwrap_or_default();
    let status = json!({"status": o.data.get("status").cloned().unwrap_or(Value::Null)});
    let refreshed = str_at(&status, "/status/refreshTime").unwrap_or_default();
    (ready(&status).0 == "True" && before.get(&name).is_none_or(|b| b != refreshed))
        .then(|| (name, refreshed.to_string()))
}

/// When the last of a set of syncs happened, from their refreshTimes (which esr writes at the
/// sync, with second precision). The observer's own delay (a debug harness reading a watch of
/// 10,000 objects lags behind) does not count.
#[derive(Default)]
struct LastSync(Option<chrono::DateTime<chrono::Utc>>);

impl LastSync {
    fn see(&mut self, refresh_time: &str) {
        if let Ok(t) = chrono::DateTime::parse_from_rfc3339(refresh_time) {
            let t = t.with_timezone(&chrono::Utc);
            self.0 = Some(self.0.map_or(t, |m| m.max(t)));
        }
    }

    /// Seconds from `start` to the last sync, counting the last one's whole second.
    fn seconds_since(&self, start: chrono::DateTime<chrono::Utc>) -> Option<f64> {
        let end = self.0? + chrono::Duration::seconds(1);
        Some((end - start).num_milliseconds() as f64 / 1000.0)
    }
}

/// Waits until the ExternalSecrets of `ns` named in `names` are all Ready with a refreshTime
/// other than the one in `before` (empty: any), watching them; the latest of their refreshTimes.
async fn wait_ready(
    env: &Env,
    ns: &str,
    names: &BTreeSet<String>,
    before: &BTreeMap<String, String>,
    alive: &mut esr_e2e::EsrProcess,
    timeout: Duration,
) -> LastSync {
    let api = api(env, "ExternalSecret", ns);
    let mut last = LastSync::default();
    let mut pending = names.clone();
    let start = Instant::now();
    let mut stream = watcher(api.clone(), watcher::Config::default()).boxed();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut missed = 0usize;
    let mut heard = Instant::now();
    while !pending.is_empty() {
        tokio::select! {
            ev = stream.next() => {
                heard = Instant::now();
                let objs: Vec<kube::api::DynamicObject> = match ev {
                    Some(Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o))) => vec![o],
                    _ => Vec::new(),
                };
                for o in objs {
                    if let Some((name, at)) = done(&o, before)
                        && pending.remove(&name)
                    {
                        last.see(&at);
                    }
                }
            }
            _ = tick.tick() => {
                assert!(alive.is_running(), "esr exited:\n{}", alive.logs());
                // A safety net for a watch that missed an update: one LIST after 10 s of
                // silence (a LIST of 10,000 objects while the watch is busy would only compete
                // with esr and the API server for the CPU).
                if heard.elapsed() >= Duration::from_secs(10) {
                    heard = Instant::now();
                    let list = api.list(&ListParams::default()).await.unwrap();
                    for o in list.items {
                        if let Some((name, at)) = done(&o, before)
                            && pending.remove(&name)
                        {
                            last.see(&at);
                            missed += 1;
                        }
                    }
                }
                assert!(
                    start.elapsed() < timeout,
                    "{} ExternalSecrets not Ready after {timeout:?}, e.g. {:?}",
                    pending.len(),
                    pending.iter().next()
                );
            }
        }
    }
    if missed > 0 {
        println!("(the watch was silent for 10 s; a LIST then found {missed} more Ready)");
    }
    last
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "benchmark: run with scripts/bench-scale.sh"]
async fn bench_scale() {
    let n_es = env_usize("BENCH_ES", 10_000);
    let n_secrets = env_usize("BENCH_SECRETS", 50_000);
    let n_refresh = env_usize("BENCH_REFRESH", 1_000).min(n_es);
    let n_samples = env_usize("BENCH_SAMPLES", 100);
    let timeout = Duration::from_secs(env_usize("BENCH_TIMEOUT", 3600) as u64);
    let extra = std::env::var("BENCH_ESR_ARGS").unwrap_or_default();
    let env = Env::start().await.unwrap();
    let client = env.client();
    let ns = env.namespace("scale").await.unwrap();
    let noise = env.namespace("noise").await.unwrap();
    let keys: Vec<Value> = (0..10)
        .map(|i| json!({"key": format!("/bench/{i}"), "value": format!("value-{i}")}))
        .collect();
    apply(&env, "", fake_css("bench", Value::Array(keys))).await;

    // 1. W: 16 parallel clients creating the unrelated Secrets.
    let payload = "x".repeat(1024);
    let secs = create_parallel(n_secrets, |i| {
        let api: Api<Secret> = Api::namespaced(client.clone(), &noise);
        let s: Secret = serde_json::from_value(json!({
            "metadata": {"name": format!("unrelated-{i}")}, "stringData": {"payload": payload}
        }))
        .unwrap();
        async move {
            api.create(&PostParams::default(), &s).await.unwrap();
        }
    })
    .await;
    let w = if n_secrets > 0 {
        n_secrets as f64 / secs
    } else {
        0.0
    };
    println!(
        "API server write rate W: {w:.0} writes/s ({n_secrets} Secrets, 16 clients, {secs:.1}s); W/2 = {:.0} ES/s",
        w / 2.0
    );

    // 2. The ExternalSecrets.
    let es_api = api(&env, "ExternalSecret", &ns);
    let secs = create_parallel(n_es, |i| {
        let api = es_api.clone();
        let obj: kube::api::DynamicObject =
            serde_json::from_value(es_obj(&format!("es-{i}"), i % 10)).unwrap();
        async move {
            api.create(&PostParams::default(), &obj).await.unwrap();
        }
    })
    .await;
    println!("created {n_es} ExternalSecrets in {secs:.1}s");
    if let Some(a) = env.audit() {
        a.clear();
    }

    // 3. Cold sync.
    let mut args: Vec<&str> = vec!["--loglevel", "warn"];
    args.extend(CLUSTER_WIDE);
    args.extend(extra.split_whitespace());
    println!("esr controller flags: {}", extra.trim());
    let t = Instant::now();
    let started = chrono::Utc::now();
    let mut esr = env.start_esr(&args).unwrap();
    let pid = esr.pid();
    let names: BTreeSet<String> = (0..n_es).map(|i| format!("es-{i}")).collect();
    let last = wait_ready(&env, &ns, &names, &BTreeMap::new(), &mut esr, timeout).await;
    let observed = t.elapsed().as_secs_f64();
    // The cold sync ends at the last sync, not when this harness saw it.
    let cold = last
        .seconds_since(started)
        .unwrap_or(observed)
        .min(observed);
    println!("cold sync observed by the harness after {observed:.1}s");
    let cpu_cold = cpu_seconds(pid);
    let rate = n_es as f64 / cold;
    let ratio = if w > 0.0 { rate / (w / 2.0) } else { 0.0 };
    println!(
        "cold sync: {n_es} ExternalSecrets Ready in {cold:.1}s = {rate:.0} ES/s = {ratio:.2} x W/2"
    );
    print_requests("cold-sync requests", esr_requests(&env), n_es);
    println!(
        "CPU: {:.2} CPU-seconds per 1,000 cold syncs ({cpu_cold:.1}s in all, startup included)",
        cpu_cold * 1000.0 / n_es.max(1) as f64
    );
    println!(
        "RSS after cold sync: {} MiB (peak {} MiB)",
        proc_status_kib(pid, "VmRSS:") / 1024,
        proc_status_kib(pid, "VmHWM:") / 1024
    );

    // 4. Correctness: every managed Secret holds its ExternalSecret's value.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let lp = ListParams::default().labels("reconcile.external-secrets.io/managed=true");
    let list = secrets.list(&lp).await.unwrap();
    let mut correct = 0;
    for s in &list.items {
        let name = s.metadata.name.clone().unwrap_or_default();
        let Some(i) = name
            .strip_prefix("es-")
            .and_then(|i| i.parse::<usize>().ok())
        else {
            continue;
        };
        let want = format!("value-{}", i % 10);
        if decoded(s).get("value") == Some(&want) {
            correct += 1;
        }
    }
    println!("correct: {correct}/{n_es} managed Secrets hold their ExternalSecret's value");

    // 5. Refresh with unchanged data.
    if n_refresh > 0 {
        let mut before = BTreeMap::new();
        let list = es_api.list(&ListParams::default()).await.unwrap();
        for o in list.items {
            let v = serde_json::to_value(&o).unwrap();
            let name = str_at(&v, "/metadata/name").unwrap_or_default().to_string();
            let rt = str_at(&v, "/status/refreshTime")
                .unwrap_or_default()
                .to_string();
            before.insert(name, rt);
        }
        // refreshTime has second precision: a refresh within the same second would look unchanged.
        tokio::time::sleep(Duration::from_millis(1100)).await;
        if let Some(a) = env.audit() {
            a.clear();
        }
        let picked: BTreeSet<String> = (0..n_refresh).map(|i| format!("es-{i}")).collect();
        let t = Instant::now();
        let started = chrono::Utc::now();
        create_parallel(n_refresh, |i| {
            let api = es_api.clone();
            let patch = json!({"spec": {"refreshInterval": "2h"}});
            async move {
                api.patch(
                    &format!("es-{i}"),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
                .unwrap();
            }
        })
        .await;
        let last = wait_ready(&env, &ns, &picked, &before, &mut esr, timeout).await;
        let observed = t.elapsed().as_secs_f64();
        println!(
            "refresh (unchanged data): {n_refresh} ExternalSecrets in {:.1}s (observed after {observed:.1}s)",
            last.seconds_since(started)
                .unwrap_or(observed)
                .min(observed)
        );
        print_requests("refresh requests", esr_requests(&env), n_refresh);
    }

    // 6a. Spec change -> Secret.
    let mut lat = Vec::with_capacity(n_samples);
    for s in 0..n_samples.min(n_es) {
        let i = s * (n_es / n_samples.min(n_es)).max(1);
        let name = format!("es-{i}");
        let key = (i + 1 + s) % 10;
        let want = format!("value-{key}");
        let t = Instant::now();
        let patch = json!({"spec": {"data": [{"secretKey": "value", "remoteRef": {"key": format!("/bench/{key}")}}]}});
        es_api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
        loop {
            if let Some(sec) = secrets.get_opt(&name).await.unwrap()
                && decoded(&sec).get("value") == Some(&want)
            {
                break;
            }
            assert!(
                t.elapsed() < Duration::from_secs(120),
                "{name} never got {want}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        lat.push(t.elapsed());
    }
    lat.sort();
    println!(
        "spec change -> Secret over {}: p50 {:?} p99 {:?}",
        lat.len(),
        percentile(&lat, 0.5),
        percentile(&lat, 0.99)
    );

    // 6b. New namespace -> ClusterExternalSecret's Secret.
    let ces_gvk =
        kube::api::GroupVersionKind::gvk("external-secrets.io", "v1", "ClusterExternalSecret");
    let ces_api: Api<kube::api::DynamicObject> = Api::all_with(
        client.clone(),
        &kube::api::ApiResource::from_gvk_with_plural(&ces_gvk, "clusterexternalsecrets"),
    );
    let mut ces = json!({"apiVersion": "external-secrets.io/v1", "kind": "ClusterExternalSecret",
        "metadata": {"name": "bench-scale"},
        "spec": {"namespaceSelectors": [{"matchLabels": {"bench-scale": env.id()}}],
                 "externalSecretSpec": es_obj("x", 0)["spec"].clone()}});
    env.scope_object(&mut ces);
    ces_api
        .patch(
            "bench-scale",
            &PatchParams::apply("e2e").force(),
            &Patch::Apply(&ces),
        )
        .await
        .unwrap();
    let mut lat = Vec::with_capacity(n_samples);
    for s in 0..n_samples {
        let name = format!("{}-late-{s}", env.id());
        let nsobj: Namespace = serde_json::from_value(
            json!({"metadata": {"name": name, "labels": {"bench-scale": env.id()}}}),
        )
        .unwrap();
        let api: Api<Secret> = Api::namespaced(client.clone(), &name);
        let t = Instant::now();
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &nsobj)
            .await
            .unwrap();
        env.track_namespace(&name);
        loop {
            if api.get_opt("bench-scale").await.unwrap().is_some() {
                break;
            }
            assert!(
                t.elapsed() < Duration::from_secs(120),
                "no Secret in {name}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        lat.push(t.elapsed());
    }
    lat.sort();
    println!(
        "new namespace -> ClusterExternalSecret Secret over {}: p50 {:?} p99 {:?}",
        lat.len(),
        percentile(&lat, 0.5),
        percentile(&lat, 0.99)
    );
    println!(
        "peak RSS: {} MiB (VmHWM; {} MiB at the end)",
        proc_status_kib(pid, "VmHWM:") / 1024,
        proc_status_kib(pid, "VmRSS:") / 1024
    );
    println!("CPU: {:.1} CPU-seconds in all", cpu_seconds(pid));
    assert!(esr.is_running(), "esr exited:\n{}", esr.logs());
    esr.stop();
}
