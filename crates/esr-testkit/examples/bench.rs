//! Benchmark (not a test): create throughput and watch fan-out latency with 10,000 Secrets.
//! Run with `make bench-testkit` (scripts/bench-testkit.sh). Env: BENCH_OBJECTS (10000),
//! BENCH_WATCHERS (10), BENCH_CONCURRENCY (32).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};

fn env_num(k: &str, d: usize) -> usize {
    std::env::var(k)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(d)
}

fn pct(v: &mut [Duration], p: f64) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    v.sort();
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i.min(v.len() - 1)]
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let n = env_num("BENCH_OBJECTS", 10_000);
    let watchers = env_num("BENCH_WATCHERS", 10);
    let conc = env_num("BENCH_CONCURRENCY", 32);
    let server = esr_testkit::TestServer::start().await?;
    let client = server.client();
    let api: Api<Secret> = Api::namespaced(client.clone(), "default");
    let sent: Arc<Mutex<HashMap<String, Instant>>> =
        Arc::new(Mutex::new(HashMap::with_capacity(n)));
    let rv = api
        .list(&ListParams::default())
        .await?
        .metadata
        .resource_version
        .unwrap_or_default();

    // watchers
    let mut handles = vec![];
    for _ in 0..watchers {
        let api = api.clone();
        let sent = Arc::clone(&sent);
        let rv = rv.clone();
        handles.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(n);
            let mut s = api
                .watch(&WatchParams::default().timeout(290), &rv)
                .await?
                .boxed();
            while lat.len() < n {
                match s.try_next().await? {
                    Some(WatchEvent::Added(o)) => {
                        let name = o.metadata.name.unwrap_or_default();
                        let t0 = sent.lock().ok().and_then(|m| m.get(&name).copied());
                        if let Some(t0) = t0 {
                            lat.push(t0.elapsed());
                        }
                    }
                    Some(_) => {}
                    None => break,
                }
            }
            Ok::<(Vec<Duration>, Instant), anyhow::Error>((lat, Instant::now()))
        }));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;

    // create
    let start = Instant::now();
    let results: Vec<anyhow::Result<()>> = stream::iter(0..n)
        .map(|i| {
            let api = api.clone();
            let sent = Arc::clone(&sent);
            async move {
                let name = format!("bench-{i:05}");
                let s: Secret = serde_json::from_value(serde_json::json!({
                    "metadata": {"name": name, "labels": {"bench": "true", "shard": (i % 10).to_string()}},
                    "stringData": {"username": format!("user-{i}"), "password": "not-a-real-secret"}
                }))?;
                if let Ok(mut m) = sent.lock() {
                    m.insert(name, Instant::now());
                }
                api.create(&PostParams::default(), &s).await?;
                Ok(())
            }
        })
        .buffer_unordered(conc)
        .collect()
        .await;
    let create_elapsed = start.elapsed();
    let failures = results.iter().filter(|r| r.is_err()).count();

    let mut all = vec![];
    let mut last_seen = start;
    for h in handles {
        let (lat, done) = h.await??;
        if lat.len() < n {
            anyhow::bail!("a watcher saw only {} of {n} events", lat.len());
        }
        last_seen = last_seen.max(done);
        all.extend(lat);
    }
    let t = Instant::now();
    let listed = api
        .list(&ListParams::default().labels("bench=true"))
        .await?
        .items
        .len();
    let list_elapsed = t.elapsed();
    let t = Instant::now();
    let shard = api
        .list(&ListParams::default().labels("shard in (3,7)"))
        .await?
        .items
        .len();
    let sel_elapsed = t.elapsed();

    // custom resources: ExternalSecrets from the repository's CRDs (schema defaulting + validation)
    let crds = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../crds");
    let mut cr_line = String::from("custom resources: skipped (no crds/)");
    if crds
        .join("external-secrets.io_externalsecrets.yaml")
        .exists()
    {
        server.apply_crds_from_dir(&crds)?;
        let ncr = env_num("BENCH_CRS", n);
        let gvk = kube::api::GroupVersionKind::gvk("external-secrets.io", "v1", "ExternalSecret");
        let ar = kube::api::ApiResource::from_gvk_with_plural(&gvk, "externalsecrets");
        let es_api: Api<kube::api::DynamicObject> =
            Api::namespaced_with(client.clone(), "default", &ar);
        let t = Instant::now();
        let res: Vec<anyhow::Result<()>> = stream::iter(0..ncr)
            .map(|i| {
                let es_api = es_api.clone();
                async move {
                    let o: kube::api::DynamicObject = serde_json::from_value(serde_json::json!({
                        "apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
                        "metadata": {"name": format!("es-{i:05}")},
                        "spec": {"refreshInterval": "1h", "secretStoreRef": {"name": "store", "kind": "SecretStore"},
                                 "target": {"name": format!("out-{i:05}")},
                                 "data": [{"secretKey": "password", "remoteRef": {"key": "db", "property": "password"}}]}
                    }))?;
                    es_api.create(&PostParams::default(), &o).await?;
                    Ok(())
                }
            })
            .buffer_unordered(conc)
            .collect()
            .await;
        let el = t.elapsed();
        let fails = res.iter().filter(|r| r.is_err()).count();
        cr_line = format!(
            "create ExternalSecret: {:.0} objects/s ({ncr} in {el:.2?}, {fails} failures)",
            ncr as f64 / el.as_secs_f64()
        );
    }

    println!("esr-testkit benchmark: {n} Secrets, {watchers} watchers, concurrency {conc}");
    println!("{cr_line}");
    println!(
        "create: {:.0} objects/s ({n} in {:.2?}, {failures} failures)",
        n as f64 / create_elapsed.as_secs_f64(),
        create_elapsed
    );
    println!(
        "watch fan-out latency (create sent → ADDED received, {} deliveries): p50 {:.2?}, p99 {:.2?}, max {:.2?}",
        all.len(),
        pct(&mut all, 0.50),
        pct(&mut all, 0.99),
        pct(&mut all, 1.0)
    );
    println!(
        "all watchers had every event {:.2?} after the first create",
        last_seen - start
    );
    println!(
        "list {listed} Secrets: {list_elapsed:.2?}; label selector list ({shard} items): {sel_elapsed:.2?}"
    );
    Ok(())
}
