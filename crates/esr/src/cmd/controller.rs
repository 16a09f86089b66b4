//! `esr controller`: run the ExternalSecret, SecretStore, ClusterSecretStore, PushSecret,
//! ClusterExternalSecret and ClusterPushSecret controllers.
//!
//! Flags mirror ESO's `controller` command: every flag of ESO v2.9–v2.14's controller is
//! implemented or accepted with a warning ([`flags`]); docs/cli.md lists them.

mod flags;
mod logfmt;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use esr_controller::clusterexternalsecret::reconcile::Ces;
use esr_controller::clusterpushsecret::reconcile::Cps;
use esr_controller::common::fanout;
use esr_controller::common::observe::{Observation, Observe};
use esr_controller::metrics::rest::RestClientMetricsLayer;
use esr_controller::metrics::{Metrics, Observed};
use esr_controller::runtime::{Clients, Config, Runtime};
use esr_controller::server::{Probes, metrics_router, probes_router, serve};
use esr_provider::KubeClientAccess;
use tracing::{info, warn};

pub use flags::LogFormat;

/// Arguments of `esr controller`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Path to a kubeconfig (default: in-cluster config, then $KUBECONFIG / ~/.kube/config).
    #[arg(long, env = "KUBECONFIG_PATH")]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// Number of concurrent reconciles per controller.
    #[arg(long, default_value_t = 1)]
    pub concurrent: u16,
    /// Watch only this namespace ("" = cluster-wide).
    #[arg(long, default_value = "")]
    pub namespace: String,
    /// Handle only stores with this `spec.controller` (or none).
    #[arg(long, default_value = "default")]
    pub controller_class: String,
    /// Client QPS towards the API server (token bucket; 0 disables).
    #[arg(long, default_value_t = 50.0)]
    pub client_qps: f32,
    /// Client burst towards the API server.
    #[arg(long, default_value_t = 100)]
    pub client_burst: u32,
    /// Address of the /metrics endpoint.
    #[arg(long, default_value = ":8080")]
    pub metrics_addr: String,
    /// Address of the /healthz and /readyz endpoints.
    #[arg(long, default_value = ":8082")]
    pub live_addr: String,
    /// Leader election on a coordination.k8s.io Lease (`--enable-leader-election` or, as Go's
    /// flag package and ESO's chart write it, `--enable-leader-election=true`).
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = flags::go_bool)]
    pub enable_leader_election: bool,
    /// Name of the leader election Lease.
    #[arg(long, default_value = "external-secrets-controller")]
    pub leader_election_id: String,
    /// Namespace of the leader election Lease (default: the pod namespace or "default").
    #[arg(long)]
    pub leader_election_namespace: Option<String>,
    /// Default requeue interval of SecretStores / ClusterSecretStores.
    #[arg(long, default_value = "5m")]
    pub store_requeue_interval: String,
    /// Only use stores whose Ready condition is True.
    #[arg(long, default_value_t = true, num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = flags::go_bool)]
    pub enable_flood_gate: bool,
    /// Reconcile ClusterSecretStores (and ExternalSecrets using them).
    #[arg(long, default_value_t = true, num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = flags::go_bool)]
    pub enable_cluster_store_reconciler: bool,
    /// Reconcile ClusterExternalSecrets.
    #[arg(long, default_value_t = true, num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = flags::go_bool)]
    pub enable_cluster_external_secret_reconciler: bool,
    /// Reconcile PushSecrets.
    #[arg(long, default_value_t = true, num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = flags::go_bool)]
    pub enable_push_secret_reconciler: bool,
    /// Reconcile ClusterPushSecrets.
    #[arg(long, default_value_t = true, num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = flags::go_bool)]
    pub enable_cluster_push_secret_reconciler: bool,
    /// Accepted for ESO compatibility. esr's generators (Password, Fake, VaultDynamicSecret)
    /// return no generator state, exactly as in ESO, so no GeneratorState objects are ever
    /// created whatever the value.
    #[arg(long, default_value_t = true, num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = flags::go_bool)]
    pub enable_generator_state: bool,
    /// Accepted for ESO compatibility (grace period before unused GeneratorStates are collected).
    /// esr's generators return no generator state, so there is nothing to collect.
    #[arg(long, default_value = "2m")]
    pub generator_gc_grace_period: String,
    /// Log level (debug, info, warn, error; zap's dpanic, panic and fatal are error) or a
    /// tracing filter [default: info].
    #[arg(long)]
    pub loglevel: Option<String>,
    /// Log format [default: json, or text with --zap-devel / --zap-encoder=console].
    #[arg(long, value_enum)]
    pub log_format: Option<LogFormat>,
    /// The other ESO controller flags (logging, leader election timings, reconciler toggles and
    /// the flags accepted with a warning).
    #[command(flatten)]
    pub compat: Box<flags::Compat>,
    /// Let namespaced SecretStores authenticate with the controller's own identity (Vault
    /// kubernetes auth without serviceAccountRef/secretRef, the AWS default credential chain,
    /// Azure managed identity or workload identity without serviceAccountRef). Off: only
    /// ClusterSecretStores may (see docs/security.md).
    #[arg(long, default_value_t = false)]
    pub allow_namespaced_store_controller_identity: bool,
    /// Wall-clock limit of one template render (a Go duration); a render past it fails its
    /// ExternalSecret with a clear error.
    #[arg(long, default_value = "5s")]
    pub template_timeout: String,
    /// Number of templates rendered at once, each on its own thread off the async workers
    /// [default: the number of CPUs].
    #[arg(long)]
    pub template_workers: Option<usize>,
    /// Deadline of one provider call of an ExternalSecret (a Go duration), including its wait
    /// for one of the store's slots; a store that does not answer in time fails only the
    /// ExternalSecrets using it.
    #[arg(long, default_value = "10s")]
    pub store_request_timeout: String,
    /// Provider calls in flight per store (SecretStore or ClusterSecretStore).
    #[arg(long, default_value_t = esr_controller::common::storegate::DEFAULT_MAX_IN_FLIGHT)]
    pub store_max_in_flight: usize,
}

/// Which of the optional controllers run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Enabled {
    /// ClusterSecretStore controller and watch (and ExternalSecrets using ClusterSecretStores).
    pub cluster_stores: bool,
    /// ClusterExternalSecret controller.
    pub cluster_external_secrets: bool,
    /// ClusterPushSecret controller.
    pub cluster_push_secrets: bool,
    /// PushSecret controller.
    pub push_secrets: bool,
}

impl Enabled {
    /// The reconciler flags, with scoped mode applied: with `--namespace` set no cluster-scoped
    /// controller or watch runs (ClusterSecretStore, ClusterExternalSecret, ClusterPushSecret and
    /// the cluster-wide Namespace watch of the last two), as in ESO's scoped install, whose
    /// namespace-only Role allows none of them.
    pub fn from_args(args: &Args) -> Self {
        let cluster = args.namespace.is_empty();
        Enabled {
            cluster_stores: cluster && args.enable_cluster_store_reconciler,
            cluster_external_secrets: cluster && args.enable_cluster_external_secret_reconciler,
            cluster_push_secrets: cluster && args.enable_cluster_push_secret_reconciler,
            push_secrets: args.enable_push_secret_reconciler,
        }
    }
}

/// The hook recording `<kind>_reconcile_duration` / `<kind>_status_condition` for a cluster-scoped
/// kind, removing the series when the object is deleted.
pub fn observer(metrics: Metrics, kind: Observed) -> Observe {
    Arc::new(move |name: &str, obs: Observation| match obs {
        Observation::Reconciled { took, ready } => metrics.observe(kind, name, "", took, ready),
        Observation::Deleted => metrics.forget_observed(kind, name, ""),
    })
}

/// ESO accepts `:8080`; Rust needs a host.
pub fn parse_addr(s: &str) -> anyhow::Result<SocketAddr> {
    let full = if s.starts_with(':') {
        format!("0.0.0.0{s}")
    } else {
        s.to_string()
    };
    full.parse()
        .with_context(|| format!("invalid address {s:?}"))
}

fn init_logging(args: &Args) {
    let s = flags::log_settings(
        args.loglevel.as_deref().unwrap_or("info"),
        args.loglevel.is_some(),
        args.log_format,
        &args.compat,
    );
    let filter = tracing_subscriber::EnvFilter::try_new(&s.filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_timer(s.time)
        .with_writer(std::io::stderr);
    let _ = match s.format {
        LogFormat::Json => builder
            .fmt_fields(tracing_subscriber::fmt::format::JsonFields::new())
            .event_format(logfmt::ZapJson { time: s.time })
            .try_init(),
        LogFormat::Text => builder.try_init(),
    };
    // Once, at start: the ESO flags given that esr accepts without acting on them.
    for w in args.compat.warnings() {
        warn!("{w}");
    }
}

async fn kube_config(path: Option<&std::path::Path>) -> anyhow::Result<kube::Config> {
    match path {
        Some(p) => {
            let kc = kube::config::Kubeconfig::read_from(p)
                .with_context(|| format!("reading {}", p.display()))?;
            Ok(kube::Config::from_custom_kubeconfig(
                kc,
                &kube::config::KubeConfigOptions::default(),
            )
            .await?)
        }
        None => Ok(kube::Config::infer().await?),
    }
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    init_logging(&args);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(16 * 1024 * 1024)
        .build()?;
    let out = rt.block_on(run_async(args));
    // A render stops at its next step once cancelled; one non-interruptible call (a bcrypt, a
    // hash over a large value) may still be running: exit without waiting for it.
    rt.shutdown_timeout(Duration::from_secs(1));
    out?;
    Ok(ExitCode::SUCCESS)
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => futures_pending().await,
        }
    };
    #[cfg(not(unix))]
    let term = futures_pending();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
}

async fn futures_pending() {
    std::future::pending::<()>().await
}

async fn run_async(args: Args) -> anyhow::Result<()> {
    let mut config = kube_config(args.kubeconfig.as_deref()).await?;
    // Identifies esr (and the process) in API server audit logs; the e2e suite attributes calls
    // with it.
    let agent = format!(
        "esr/{} (pid {})",
        env!("CARGO_PKG_VERSION"),
        std::process::id()
    );
    if let Ok(v) = http::HeaderValue::from_str(&agent) {
        config.headers.push((http::header::USER_AGENT, v));
    }
    let metrics = Metrics::new();
    // rest_client_requests_total counts the requests that leave the rate limiter.
    let api_host = config
        .cluster_url
        .authority()
        .map(|a| a.as_str().to_string())
        .unwrap_or_default();
    // Events are written with a client of their own: the same settings, its own rate-limit
    // bucket (see `Context::events_client`).
    let build_client = || -> anyhow::Result<kube::Client> {
        Ok(kube::client::ClientBuilder::try_from(config.clone())
            .context("building the Kubernetes client")?
            .with_layer(&RestClientMetricsLayer::new(
                metrics.rest_requests.clone(),
                api_host.clone(),
            ))
            .with_layer(&esr_controller::common::ratelimit::RateLimitLayer::new(
                f64::from(args.client_qps),
                args.client_burst,
            ))
            .build())
    };
    let client = build_client()?;
    let event_client = build_client()?;
    let store_requeue = esr_api::duration::parse(&args.store_requeue_interval)
        .ok()
        .and_then(|d| d.to_std())
        .filter(|d| !d.is_zero())
        .unwrap_or(Duration::from_secs(300));
    let enabled = Enabled::from_args(&args);
    if !args.namespace.is_empty() {
        info!(namespace = %args.namespace, "scoped to one namespace: the ClusterSecretStore, ClusterExternalSecret and ClusterPushSecret controllers are off");
    }
    let store_request_timeout = esr_api::duration::parse(&args.store_request_timeout)
        .ok()
        .and_then(|d| d.to_std())
        .filter(|d| !d.is_zero())
        .with_context(|| {
            format!(
                "invalid --store-request-timeout {:?}",
                args.store_request_timeout
            )
        })?;
    let cfg = Config {
        namespace: Some(args.namespace.clone()).filter(|n| !n.is_empty()),
        controller_class: args.controller_class.clone(),
        concurrency: args.concurrent.max(1),
        flood_gate: args.enable_flood_gate,
        store_requeue_interval: store_requeue,
        cluster_stores: enabled.cluster_stores,
        push_secrets: enabled.push_secrets,
        secret_stores: args.compat.enable_secret_store_reconciler,
        allow_generic_targets: args.compat.unsafe_allow_generic_targets,
        render_workers: args
            .template_workers
            .unwrap_or_else(esr_controller::externalsecret::template::default_render_workers)
            .max(1),
        store_limits: esr_controller::common::storegate::StoreLimits {
            timeout: store_request_timeout,
            max_in_flight: args.store_max_in_flight.max(1),
        },
        instance: std::env::var("POD_NAME")
            .ok()
            .or_else(|| std::env::var("HOSTNAME").ok()),
    };
    let lease_timings = args.compat.lease_timings()?;
    if esr_api::duration::parse(&args.generator_gc_grace_period)
        .ok()
        .and_then(|d| d.to_std())
        .is_none()
    {
        anyhow::bail!(
            "invalid --generator-gc-grace-period {:?}",
            args.generator_gc_grace_period
        );
    }
    let ces_observe = observer(metrics.clone(), Observed::ClusterExternalSecret);
    let cps_observe = observer(metrics.clone(), Observed::ClusterPushSecret);
    let probes = Probes::default();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let stopped = move |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|v| *v).await;
    };

    let maddr = parse_addr(&args.metrics_addr)?;
    let laddr = parse_addr(&args.live_addr)?;
    let m_srv = tokio::spawn(serve(
        maddr,
        metrics_router(metrics.clone()),
        stopped(stop_rx.clone()),
    ));
    let l_srv = tokio::spawn(serve(
        laddr,
        probes_router(probes.clone()),
        stopped(stop_rx.clone()),
    ));

    let lease_client = client.clone();
    let generator_recorder: Arc<dyn esr_provider::metrics::CallRecorder> =
        Arc::new(metrics.clone());
    let kube_access = Arc::new(KubeClientAccess::with_config(client.clone(), config));
    esr_provider::identity::set_allow_namespaced_controller_identity(
        args.allow_namespaced_store_controller_identity,
    );
    let template_timeout = esr_api::duration::parse(&args.template_timeout)
        .ok()
        .and_then(|d| d.to_std())
        .filter(|d| !d.is_zero())
        .with_context(|| format!("invalid --template-timeout {:?}", args.template_timeout))?;
    let templates = Arc::new(
        esr_controller::externalsecret::template::EsoTemplates::with_bounds(
            esr_controller::externalsecret::template::RenderBounds {
                timeout: template_timeout,
                ..Default::default()
            },
        ),
    );
    let generators =
        crate::generators::registry_with_recorder(lease_client.clone(), generator_recorder);
    let mut runtime = Runtime::new(
        Clients {
            api: client,
            events: event_client,
        },
        cfg,
        crate::providers::registry(),
        kube_access,
        metrics,
        templates.clone(),
        generators,
    );
    let render_pool = runtime.ctx.render_pool.clone();
    info!(metrics = %maddr, probes = %laddr, "esr controller starting");
    probes.set_ready(true);
    let shutdown = {
        let rx = stop_rx.clone();
        async move { stopped(rx).await }
    };
    let mut lease_release: Option<(kube::Api<k8s_openapi::api::coordination::v1::Lease>, String)> =
        None;
    let mut leader = if args.enable_leader_election {
        let ns = args
            .leader_election_namespace
            .clone()
            .or_else(|| std::env::var("POD_NAMESPACE").ok())
            .or_else(|| {
                std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
                    .ok()
                    .map(|s| s.trim().to_string())
            })
            .unwrap_or_else(|| "default".to_string());
        let host = std::env::var("POD_NAME")
            .or_else(|_| std::env::var("HOSTNAME"))
            .unwrap_or_else(|_| "esr".to_string());
        let me = format!("{host}_{:016x}", rand_id());
        let timings = lease_timings;
        info!(lease = %args.leader_election_id, namespace = %ns, identity = %me, "waiting for leadership");
        let api = tokio::select! {
            api = esr_controller::leader::acquire(lease_client.clone(), &ns, &args.leader_election_id, &me, timings) => api,
            _ = shutdown_signal() => {
                let _ = stop_tx.send(true);
                let _ = m_srv.await;
                let _ = l_srv.await;
                return Ok(());
            }
        };
        lease_release = Some((api.clone(), me.clone()));
        Some(tokio::spawn(esr_controller::leader::hold(
            api,
            args.leader_election_id.clone(),
            me,
            timings,
        )))
    } else {
        None
    };
    let ps_ctrl = enabled.push_secrets.then(|| {
        let rx = stop_rx.clone();
        tokio::spawn(esr_controller::pushsecret::reconcile::run(
            runtime.ctx.clone(),
            async move { stopped(rx).await },
        ))
    });
    let instance = runtime.ctx.config.instance.clone();
    // Rollout on rotation: the workload caches watch esr's namespace scope (a namespace-only Role
    // cannot list workloads cluster-wide).
    let rollout_scope = Some(args.namespace.clone()).filter(|n| !n.is_empty());
    runtime
        .ctx
        .rollouts
        .start(&lease_client, rollout_scope.as_deref());
    let runtime_metrics = runtime.ctx.metrics.runtime.clone();
    // The ClusterExternalSecret controller reads the ExternalSecret controller's cache.
    let shared_es = enabled
        .cluster_external_secrets
        .then(|| runtime.share_external_secrets())
        .flatten();
    let ctrl = tokio::spawn(runtime.run(shutdown));
    // One Namespace watch shared by the ClusterExternalSecret and ClusterPushSecret controllers.
    let ns_feed = esr_controller::common::namespaces::NamespaceFeed::new();
    let ces_ctrl = enabled
        .cluster_external_secrets
        .then(|| ns_feed.subscribe())
        .flatten()
        .map(|namespaces| {
            let rx = stop_rx.clone();
            tokio::spawn(fanout::run(
                lease_client.clone(),
                args.concurrent.max(1),
                runtime_metrics.clone(),
                Some(ces_observe),
                fanout::Sources {
                    namespaces,
                    children: shared_es,
                },
                Ces,
                async move { stopped(rx).await },
            ))
        });
    let cps_ctrl = enabled
        .cluster_push_secrets
        .then(|| ns_feed.subscribe())
        .flatten()
        .map(|namespaces| {
            let rx = stop_rx.clone();
            tokio::spawn(fanout::run(
                lease_client.clone(),
                args.concurrent.max(1),
                runtime_metrics.clone(),
                Some(cps_observe),
                fanout::Sources {
                    namespaces,
                    children: None,
                },
                Cps::new(lease_client.clone(), instance),
                async move { stopped(rx).await },
            ))
        });
    let ns_watch = (ces_ctrl.is_some() || cps_ctrl.is_some()).then(|| {
        let rx = stop_rx.clone();
        tokio::spawn(ns_feed.run(lease_client.clone(), async move { stopped(rx).await }))
    });
    let lost = async {
        match leader.as_mut() {
            Some(h) => {
                let _ = h.await;
            }
            None => std::future::pending::<()>().await,
        }
    };
    let mut leadership_lost = false;
    tokio::select! {
        _ = shutdown_signal() => info!("shutting down"),
        _ = lost => {
            warn!("leader election lost, shutting down");
            leadership_lost = true;
        }
    }
    probes.set_ready(false);
    // Running renders are cancelled and not waited for: the reconciles waiting on them end at
    // once, so shutdown stays within the pod's grace period whatever the templates do.
    templates.cancel_all();
    render_pool.close();
    let _ = stop_tx.send(true);
    let _ = ctrl.await;
    if let Some(h) = ces_ctrl {
        let _ = h.await;
    }
    if let Some(h) = cps_ctrl {
        let _ = h.await;
    }
    if let Some(h) = ns_watch {
        let _ = h.await;
    }
    if let Some(h) = ps_ctrl {
        let _ = h.await;
    }
    // Every controller has stopped: hand the Lease back so a standby (or the next pod of a
    // rolling update) takes over at once instead of after the lease duration.
    if let Some(h) = &leader {
        h.abort();
    }
    if !leadership_lost
        && let Some((api, me)) = &lease_release
        && let Err(e) = esr_controller::leader::release(api, &args.leader_election_id, me).await
    {
        warn!(error = %e, "could not release the lease; a standby takes over when it expires");
    }
    let _ = m_srv.await;
    let _ = l_srv.await;
    if leadership_lost {
        anyhow::bail!("leader election lost");
    }
    Ok(())
}

fn rand_id() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    #[test]
    fn observer_records_and_forgets_cluster_series() {
        let m = Metrics::new();
        let ces = observer(m.clone(), Observed::ClusterExternalSecret);
        let cps = observer(m.clone(), Observed::ClusterPushSecret);
        let took = Duration::from_millis(3);
        ces(
            "wild",
            Observation::Reconciled {
                took,
                ready: Some(true),
            },
        );
        cps(
            "push-all",
            Observation::Reconciled {
                took,
                ready: Some(false),
            },
        );
        let text = m.encode();
        for want in [
            "clusterexternalsecret_status_condition{name=\"wild\",namespace=\"\",condition=\"Ready\",status=\"True\"} 1",
            "clusterexternalsecret_reconcile_duration{name=\"wild\",namespace=\"\"} 3000000",
            "clusterpushsecret_status_condition{name=\"push-all\",namespace=\"\",condition=\"Ready\",status=\"False\"} 1",
            "clusterpushsecret_status_condition{name=\"push-all\",namespace=\"\",condition=\"Ready\",status=\"True\"} 0",
        ] {
            assert!(text.contains(want), "missing {want} in {text}");
        }
        ces("wild", Observation::Deleted);
        let text = m.encode();
        assert!(!text.contains("name=\"wild\""), "{text}");
        assert!(text.contains("name=\"push-all\""), "{text}");
        cps("push-all", Observation::Deleted);
        assert!(!m.encode().contains("name=\"push-all\""));
    }

    #[test]
    fn scoped_mode_starts_no_cluster_scoped_controller() {
        let all = Enabled::from_args(&Cli::try_parse_from(["esr"]).unwrap().args);
        assert_eq!(
            all,
            Enabled {
                cluster_stores: true,
                cluster_external_secrets: true,
                cluster_push_secrets: true,
                push_secrets: true,
            }
        );
        let scoped = Enabled::from_args(
            &Cli::try_parse_from(["esr", "--namespace=team-a"])
                .unwrap()
                .args,
        );
        assert_eq!(
            scoped,
            Enabled {
                cluster_stores: false,
                cluster_external_secrets: false,
                cluster_push_secrets: false,
                push_secrets: true,
            }
        );
        let off = Enabled::from_args(
            &Cli::try_parse_from([
                "esr",
                "--enable-cluster-store-reconciler=false",
                "--enable-push-secret-reconciler=false",
            ])
            .unwrap()
            .args,
        );
        assert!(!off.cluster_stores && !off.push_secrets);
        assert!(off.cluster_external_secrets && off.cluster_push_secrets);
    }

    #[test]
    fn eso_flags_are_accepted_with_eso_defaults() {
        let c = Cli::try_parse_from(["esr"]).unwrap();
        assert!(c.args.enable_cluster_push_secret_reconciler);
        assert!(c.args.enable_generator_state);
        assert_eq!(c.args.generator_gc_grace_period, "2m");
        let c = Cli::try_parse_from([
            "esr",
            "--enable-cluster-push-secret-reconciler=false",
            "--enable-generator-state=false",
            "--generator-gc-grace-period=5m",
        ])
        .unwrap();
        assert!(!c.args.enable_cluster_push_secret_reconciler);
        assert!(!c.args.enable_generator_state);
        assert_eq!(c.args.generator_gc_grace_period, "5m");
        // Go's flag package accepts a bare boolean flag.
        let c = Cli::try_parse_from(["esr", "--enable-cluster-push-secret-reconciler"]).unwrap();
        assert!(c.args.enable_cluster_push_secret_reconciler);
    }

    #[test]
    fn every_eso_controller_flag_is_accepted() {
        // ESO v2.9–v2.14's controller flags, as a Deployment or the chart's extraArgs write them.
        let eso = [
            "--metrics-addr=:8080",
            "--live-addr=:8082",
            "--controller-class=default",
            "--enable-leader-election",
            "--leader-election-id=external-secrets-controller",
            "--leader-election-lease-duration=30s",
            "--leader-election-renew-deadline=20s",
            "--leader-election-retry-period=4s",
            "--concurrent=3",
            "--client-qps=10",
            "--client-burst=20",
            "--loglevel=debug",
            "--zap-time-encoding=iso8601",
            "--zap-log-level=info",
            "--zap-encoder=console",
            "--zap-devel=false",
            "--zap-stacktrace-level=error",
            "--namespace=",
            "--enable-cluster-store-reconciler=true",
            "--enable-secret-store-reconciler=false",
            "--enable-cluster-external-secret-reconciler=T",
            "--enable-cluster-push-secret-reconciler=1",
            "--enable-push-secret-reconciler=true",
            "--enable-secrets-caching=false",
            "--enable-configmaps-caching=false",
            "--enable-managed-secrets-caching=true",
            "--enable-secret-api-read-on-cache-mismatch=true",
            "--enable-partial-cache=true",
            "--store-requeue-interval=5m",
            "--enable-flood-gate",
            "--enable-generator-state=true",
            "--generator-gc-grace-period=2m",
            "--enable-extended-metric-labels=false",
            "--enable-http2=false",
            "--enable-v2-providers=false",
            "--unsafe-allow-generic-targets=false",
            "--metrics-secure=false",
            "--metrics-auth=false",
            "--metrics-cert-dir=/tmp",
            "--metrics-cert-name=tls.crt",
            "--metrics-key-name=tls.key",
            "--tls-ciphers=TLS_AES_128_GCM_SHA256",
            "--tls-min-version=1.2",
            "--tls-curve-preferences=X25519",
            "--template-left-delimiter={{",
            "--template-right-delimiter=}}",
            "--enable-vault-token-cache=false",
            "--vault-token-cache-size=262144",
            "--experimental-enable-vault-token-cache=false",
            "--experimental-vault-token-cache-size=262144",
            "--experimental-enable-aws-session-cache=false",
            "--experimental-enable-doppler-oidc-cache=false",
            "--experimental-doppler-oidc-cache-size=100",
            "--doppler-etag-cache-size=100",
            "--mysterybox-tokens-cache-size=10",
            "--mysterybox-connections-cache-size=10",
            "--pulumi-oidc-cache-size=10",
        ];
        let c = Cli::try_parse_from(std::iter::once("esr").chain(eso)).unwrap();
        assert!(c.args.enable_leader_election && c.args.enable_flood_gate);
        assert!(!c.args.compat.enable_secret_store_reconciler);
        assert!(c.args.enable_cluster_push_secret_reconciler);
        assert_eq!(c.args.concurrent, 3);
        let t = c.args.compat.lease_timings().unwrap();
        assert_eq!(t.lease_duration, Duration::from_secs(30));
        assert_eq!(
            c.args.compat.warnings().len(),
            28,
            "{:?}",
            c.args.compat.warnings()
        );
        // The chart's defaults: nothing to warn about.
        let c = Cli::try_parse_from([
            "esr",
            "--concurrent=1",
            "--metrics-addr=:8080",
            "--loglevel=info",
            "--zap-time-encoding=epoch",
        ])
        .unwrap();
        assert!(c.args.compat.warnings().is_empty());
        // Outside ESO's set: still an error.
        let err = Cli::try_parse_from(["esr", "--enable-everything=true"]).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::UnknownArgument);
        // Go's flag package reads `--flag false` as a bare flag plus an argument.
        assert!(Cli::try_parse_from(["esr", "--enable-flood-gate", "false"]).is_err());
    }
}
