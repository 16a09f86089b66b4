//! Call-count benchmark (not a test): one refresh cycle of N ExternalSecrets, each taking 3
//! properties from one of M secrets (`BENCH_SERVICE=SecretsManager`, the default) or parameters
//! (`BENCH_SERVICE=ParameterStore`), through the provider's client layer, against moto.
//! Run it with `make bench-aws-calls` (scripts/bench-aws-calls.sh).
//!
//! Every ExternalSecret is simulated as the controller reconciles it: an independent task that
//! starts after a small random delay, asks the provider for the store client and reads its
//! three `data[]` entries with one `get_secrets` call.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use aws_sdk_secretsmanager::config::{BehaviorVersion, Credentials, Region};
use esr_provider_aws::{
    AwsError, AwsProvider, AwsProviderOptions, CallLog, CostOptions, Endpoints, KubeSource,
    RemoteRef, StoreClient, StoreIdentity, StoreKind,
};
use rand::Rng;

struct Kube;

#[async_trait]
impl KubeSource for Kube {
    async fn secret_value(&self, _: &str, _: &str, _: &str) -> Result<Vec<u8>, AwsError> {
        Ok(b"testing".to_vec())
    }
    async fn service_account_annotations(
        &self,
        _: &str,
        _: &str,
    ) -> Result<BTreeMap<String, String>, AwsError> {
        Err(AwsError::invalid("not used"))
    }
    async fn service_account_token(
        &self,
        _: &str,
        _: &str,
        _: &[String],
    ) -> Result<String, AwsError> {
        Err(AwsError::invalid("not used"))
    }
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Outcome {
    calls: CallLog,
    /// Per refresh cycle: (AWS calls, wall time).
    cycles: Vec<(u64, Duration)>,
    errors: usize,
}

#[allow(clippy::too_many_arguments)]
async fn cycle(
    service: &str,
    moto: &str,
    prefix: &str,
    n_es: usize,
    n_secrets: usize,
    stagger_ms: u64,
    concurrency: usize,
    cycles: usize,
    cost: CostOptions,
) -> Outcome {
    let pause = cost.cache_ttl + Duration::from_millis(500);
    // The controller's worker pool (`esr controller --concurrent`).
    let workers = Arc::new(tokio::sync::Semaphore::new(concurrency.max(1)));
    let calls = CallLog::new();
    let provider = Arc::new(AwsProvider::new(AwsProviderOptions {
        endpoints: Endpoints {
            all: Some(moto.to_string()),
            ..Default::default()
        },
        cost,
        calls: calls.clone(),
    }));
    let spec = Arc::new(serde_json::json!({
        "service": service, "region": "us-east-1",
        "auth": {"secretRef": {
            "accessKeyIDSecretRef": {"name": "aws", "key": "id", "namespace": "esr-system"},
            "secretAccessKeySecretRef": {"name": "aws", "key": "secret", "namespace": "esr-system"}}}
    }));
    let store = Arc::new(StoreIdentity {
        kind: StoreKind::ClusterSecretStore,
        name: "aws".into(),
        namespace: None,
        uid: "bench".into(),
        generation: 1,
    });
    let kube: Arc<dyn KubeSource> = Arc::new(Kube);
    let mut errors = 0;
    let mut per_cycle = Vec::new();
    for n in 0..cycles {
        if n > 0 {
            // Wait until every cached value has expired: the next cycle is a real refresh.
            tokio::time::sleep(pause).await;
        }
        let before = calls.total();
        let mut rng = rand::rng();
        let plan: Vec<(usize, u64)> = (0..n_es)
            .map(|i| (i % n_secrets, rng.random_range(0..=stagger_ms)))
            .collect();
        let start = Instant::now();
        let tasks: Vec<_> = plan
            .into_iter()
            .map(|(secret, delay)| {
                let (provider, spec, store, kube, workers) = (
                    provider.clone(),
                    spec.clone(),
                    store.clone(),
                    kube.clone(),
                    workers.clone(),
                );
                let key = format!("{prefix}app-{secret:03}");
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(delay)).await;
                    let _worker = workers
                        .acquire()
                        .await
                        .map_err(|_| AwsError::invalid("closed"))?;
                    let ns = format!("team-{}", secret % 10);
                    let client = provider
                        .store_client(&spec, None, &store, Some(&ns), kube)
                        .await?;
                    let refs = ["username", "password", "host"]
                        .map(|p| RemoteRef::key(key.clone()).property(p));
                    let results = match client {
                        StoreClient::SecretsManager(c) => c.get_secrets(&refs).await,
                        StoreClient::ParameterStore(c) => c.get_secrets(&refs).await,
                    };
                    for (r, p) in results.into_iter().zip(["username", "password", "host"]) {
                        let v = r?;
                        if v != format!("{p}-{secret}").into_bytes() {
                            return Err(AwsError::invalid(format!("wrong value for {key}.{p}")));
                        }
                    }
                    Ok::<(), AwsError>(())
                })
            })
            .collect();
        for t in tasks {
            match t.await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    errors += 1;
                    if errors <= 3 {
                        eprintln!("error: {e}");
                    }
                }
                Err(e) => {
                    errors += 1;
                    eprintln!("task failed: {e}");
                }
            }
        }
        per_cycle.push((calls.total() - before, start.elapsed()));
    }
    Outcome {
        calls,
        cycles: per_cycle,
        errors,
    }
}

/// Seeds moto with secrets or parameters (these calls are not counted).
struct Seeder {
    sm: aws_sdk_secretsmanager::Client,
    ssm: aws_sdk_ssm::Client,
}

impl Seeder {
    fn new(moto: &str) -> Self {
        let conf = aws_sdk_secretsmanager::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new("testing", "testing", None, None, "bench"))
            .endpoint_url(moto)
            .build();
        let ssm_conf = aws_sdk_ssm::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new("testing", "testing", None, None, "bench"))
            .endpoint_url(moto)
            .build();
        Self {
            sm: aws_sdk_secretsmanager::Client::from_conf(conf),
            ssm: aws_sdk_ssm::Client::from_conf(ssm_conf),
        }
    }

    async fn create(&self, parameter: bool, name: &str, value: &str) {
        if parameter {
            self.ssm
                .put_parameter()
                .name(name)
                .value(value)
                .r#type(aws_sdk_ssm::types::ParameterType::SecureString)
                .send()
                .await
                .expect("seeding moto");
        } else {
            self.sm
                .create_secret()
                .name(name)
                .secret_string(value)
                .send()
                .await
                .expect("seeding moto");
        }
    }
}

fn report(name: &str, o: &Outcome) {
    println!("== {name}");
    for ((provider, call, status), n) in o.calls.snapshot() {
        println!("   {provider:<20} {call:<22} {status:<8} {n}");
    }
    for (i, (calls, wall)) in o.cycles.iter().enumerate() {
        println!(
            "   cycle {}: AWS calls {calls}, wall time {:.3}s",
            i + 1,
            wall.as_secs_f64()
        );
    }
    println!(
        "   total AWS calls: {}   errors: {}",
        o.calls.total(),
        o.errors
    );
}

#[tokio::main]
async fn main() {
    let Ok(moto) = std::env::var("ESR_TEST_MOTO_ENDPOINT") else {
        eprintln!("ESR_TEST_MOTO_ENDPOINT is not set: run via `make bench-aws-calls`");
        std::process::exit(2);
    };
    let n_es = env_usize("BENCH_EXTERNAL_SECRETS", 1000);
    let n_secrets = env_usize("BENCH_SECRETS", 100);
    let stagger_ms = env_usize("BENCH_STAGGER_MS", 200) as u64;
    let concurrency = env_usize("BENCH_CONCURRENCY", n_es);
    let cycles = env_usize("BENCH_CYCLES", 1).max(1);

    let service = std::env::var("BENCH_SERVICE").unwrap_or_else(|_| "SecretsManager".into());
    let ps = match service.as_str() {
        "SecretsManager" => false,
        "ParameterStore" => true,
        other => {
            eprintln!("BENCH_SERVICE must be SecretsManager or ParameterStore, not {other:?}");
            std::process::exit(2);
        }
    };
    let id = &uuid::Uuid::new_v4().simple().to_string()[..8];
    let prefix = if ps {
        format!("/bench-{id}/")
    } else {
        format!("bench-{id}/")
    };
    let seeder = Seeder::new(&moto);
    for i in 0..n_secrets {
        let value = serde_json::json!({
            "username": format!("username-{i}"),
            "password": format!("password-{i}"),
            "host": format!("host-{i}"),
            "port": 5432,
        });
        seeder
            .create(ps, &format!("{prefix}app-{i:03}"), &value.to_string())
            .await;
    }
    let (what, batch) = if ps {
        ("parameters", "<= 10 names per GetParameters")
    } else {
        ("secrets", "<= 20 ids per BatchGetSecretValue")
    };
    println!(
        "{service}: {n_es} ExternalSecrets x 3 properties from {n_secrets} {what}, one refresh cycle, \
         reconciles started with a random 0-{stagger_ms} ms stagger, {concurrency} at a time"
    );

    let defaults = AwsProviderOptions::from_env()
        .map(|o| o.cost)
        .unwrap_or_default();
    println!(
        "esr settings: cache TTL {:?}, batch window {:?}, refresh-ahead {}, {batch}",
        defaults.cache_ttl, defaults.batch_window, defaults.prefetch
    );
    let esr = cycle(
        &service,
        &moto,
        &prefix,
        n_es,
        n_secrets,
        stagger_ms,
        concurrency,
        cycles,
        defaults,
    )
    .await;
    report(
        if ps {
            "esr (coalescing + cache + GetParameters)"
        } else {
            "esr (coalescing + cache + BatchGetSecretValue)"
        },
        &esr,
    );

    // ESO's behaviour: one GetSecretValue / GetParameter per ExternalSecret per refresh (its
    // cache lives only inside one reconcile). Same code path with the cross-reconcile features
    // switched off.
    let eso_like = cycle(
        &service,
        &moto,
        &prefix,
        n_es,
        n_secrets,
        stagger_ms,
        concurrency,
        1,
        CostOptions {
            cache_ttl: Duration::ZERO,
            batch_window: Duration::ZERO,
            ..CostOptions::default()
        },
    )
    .await;
    report("ESO-equivalent (per-reconcile dedup only)", &eso_like);

    let (first_calls, first_wall) = esr.cycles[0];
    let last_calls = esr.cycles.last().map(|c| c.0).unwrap_or(first_calls);
    println!(
        "RESULT aws_calls={first_calls} steady_state_calls={last_calls} eso_equivalent_calls={} wall_seconds={:.3} goal_met={}",
        eso_like.cycles[0].0,
        first_wall.as_secs_f64(),
        first_calls <= 10 && esr.errors == 0
    );
    if esr.errors > 0 || eso_like.errors > 0 {
        std::process::exit(1);
    }
}
