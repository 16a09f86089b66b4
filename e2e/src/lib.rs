//! End-to-end test harness for esr.
//!
//! [`Env::start`] gives a Kubernetes API to test against:
//! - by default an in-process `esr-testkit` server (fault injection and the audit log available);
//! - when `ESR_E2E_KUBECONFIG` is set, the cluster of that kubeconfig, unchanged (the usual
//!   `KUBECONFIG` is deliberately ignored so a developer's cluster is never used by accident).
//!
//! It applies the repository's `crds/`, creates one namespace per scenario with
//! [`Env::namespace`] (deleted again when the `Env` is dropped) and starts the real `esr` binary
//! with [`Env::start_esr`] as `esr controller --kubeconfig <path> ...`, logging to a file.
//!
//! The `esr` binary is found as follows: `$ESR_BIN` if set; otherwise `cargo build -p esr --bin esr`
//! runs once per test process (a no-op when up to date) and `<target>/debug/esr` is used, where
//! `<target>` is the directory the test executable lives in (`target/debug/deps/..`).
//!
//! Scenarios that need fault injection call [`Env::supports_faults`] (false on a real cluster)
//! and skip themselves with a printed `skipped: <reason>` line.
//!
//! **Parallel scenarios on one cluster.** On a shared cluster every scenario's esr sees every
//! namespace, so each Env confines its esr processes ([`Env::scope_args`]): a controller class of
//! its own (`--controller-class=esr-e2e-<id>`, given to every store the scenario creates through
//! [`Env::scope_object`]) and no class-less cluster-wide reconcilers (ClusterExternalSecret,
//! ClusterPushSecret) unless the scenario asks for them with [`CLUSTER_WIDE`]. Scenarios that
//! need them, or that create cluster-scoped objects with fixed names, run one at a time in the
//! `e2e-cluster-scoped` test group of the `e2e-real` nextest profile (`make e2e-real`). On a
//! shared cluster the Env deletes the namespaces and cluster-scoped objects it created when
//! dropped, removing esr's finalizers first.
//!
//! **esr runs with the install's arguments.** [`Env::start_esr`] starts esr with the arguments of
//! the esr container of the Deployment in `deploy/manifests/esr.yaml` (parsed once per process,
//! see [`manifest_args`]); a scenario's own arguments override flags of the same name. Settings
//! that only make sense inside a cluster are adapted for a local process (see
//! [`Env::esr_args`]): the listen addresses become free local ports, the leader election
//! namespace becomes a namespace the harness creates per `Env`, and `--kubeconfig` points at the
//! environment. `ESR_E2E_MANIFEST_ARGS=0` turns this off (esr gets only the scenario's arguments).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams,
};
use serde_json::{Value, json};

pub use esr_testkit::{Audit, Faults, TestServer};

/// Label put on every namespace the harness creates.
pub const NAMESPACE_LABEL: &str = "esr-e2e";

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A test environment: an API server (testkit or real), a client and a kubeconfig.
pub struct Env {
    server: Option<TestServer>,
    kubeconfig: PathBuf,
    client: kube::Client,
    namespaces: Mutex<Vec<String>>,
    work: tempfile::TempDir,
    lease_namespace: Option<String>,
    id: String,
    cluster_objects: Mutex<Vec<(ApiResource, String)>>,
}

/// Path of the manifests whose Deployment gives esr's arguments.
pub const MANIFEST_DEPLOYMENT: &str = "deploy/manifests/esr.yaml";

static MANIFEST_ARGS: OnceLock<std::result::Result<Vec<String>, String>> = OnceLock::new();

/// The arguments of the `esr` container of the Deployment in [`MANIFEST_DEPLOYMENT`], without
/// the leading `controller` subcommand (parsed once per process).
pub fn manifest_args() -> Result<Vec<String>> {
    MANIFEST_ARGS
        .get_or_init(|| read_manifest_args(&repo_root().join(MANIFEST_DEPLOYMENT)))
        .clone()
        .map_err(|e| anyhow!(e))
}

fn read_manifest_args(path: &Path) -> std::result::Result<Vec<String>, String> {
    let docs = esr_testkit::read_manifests(path).map_err(|e| e.to_string())?;
    let dep = docs
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .ok_or_else(|| format!("no Deployment in {}", path.display()))?;
    let containers = dep["spec"]["template"]["spec"]["containers"]
        .as_array()
        .ok_or_else(|| format!("the Deployment in {} has no containers", path.display()))?;
    let c = containers
        .iter()
        .find(|c| c["name"] == "esr")
        .or(containers.first())
        .ok_or_else(|| format!("the Deployment in {} has no containers", path.display()))?;
    let args: Vec<String> = c["args"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    match args.split_first() {
        Some((sub, rest)) if sub == "controller" => Ok(rest.to_vec()),
        _ => Err(format!(
            "the esr container in {} does not run `controller`: {args:?}",
            path.display()
        )),
    }
}

/// One command-line flag: its name (`None` for a stray positional token) and its tokens
/// (`--name=value`, `--name value` or a bare `--name`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Flag {
    name: Option<String>,
    tokens: Vec<String>,
}

impl Flag {
    fn value(&self) -> Option<&str> {
        match self.tokens.as_slice() {
            [one] => one.split_once('=').map(|(_, v)| v),
            [_, v] => Some(v),
            _ => None,
        }
    }
}

/// Group tokens into flags. A token that does not start with `-` right after a flag without
/// `=` is that flag's value (esr's boolean flags require `=`, as Go's flag package).
fn split_flags<S: AsRef<str>>(args: &[S]) -> Vec<Flag> {
    let mut out: Vec<Flag> = vec![];
    for a in args {
        let a = a.as_ref();
        if let Some(body) = a.strip_prefix("--").or_else(|| a.strip_prefix('-'))
            && !body.is_empty()
        {
            let name = body.split_once('=').map(|(n, _)| n).unwrap_or(body);
            out.push(Flag {
                name: Some(name.to_string()),
                tokens: vec![a.to_string()],
            });
            continue;
        }
        match out.last_mut() {
            Some(f) if f.name.is_some() && f.tokens.len() == 1 && !f.tokens[0].contains('=') => {
                f.tokens.push(a.to_string());
            }
            _ => out.push(Flag {
                name: None,
                tokens: vec![a.to_string()],
            }),
        }
    }
    out
}

/// Where an effective flag came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    Manifest,
    Scenario,
}

/// The manifests' flags not overridden by the scenario, then the scenario's flags.
fn merge_flags<S: AsRef<str>, T: AsRef<str>>(
    manifest: &[S],
    scenario: &[T],
) -> Vec<(Origin, Flag)> {
    let scen = split_flags(scenario);
    let mut out: Vec<(Origin, Flag)> = split_flags(manifest)
        .into_iter()
        .filter(|f| f.name.is_none() || !scen.iter().any(|s| s.name.is_some() && s.name == f.name))
        .map(|f| (Origin::Manifest, f))
        .collect();
    out.extend(scen.into_iter().map(|f| (Origin::Scenario, f)));
    out
}

fn leader_election_enabled(flags: &[(Origin, Flag)]) -> bool {
    flags
        .iter()
        .rev()
        .find(|(_, f)| f.name.as_deref() == Some("enable-leader-election"))
        .is_some_and(|(_, f)| !matches!(f.value(), Some(v) if v.eq_ignore_ascii_case("false")))
}

impl std::fmt::Debug for Env {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Env")
            .field("kubeconfig", &self.kubeconfig)
            .field("testkit", &self.server.is_some())
            .finish()
    }
}

/// Options of [`Env::start_with`].
#[derive(Debug, Clone, Copy, Default)]
pub struct EnvOptions {
    /// Start esr-testkit with RBAC enforced for ServiceAccount tokens (a real cluster always
    /// enforces it). The harness's own client and kubeconfig stay cluster-admin.
    pub rbac: bool,
}

impl Env {
    /// Start the environment and apply `crds/`.
    pub async fn start() -> Result<Env> {
        Self::start_with(EnvOptions::default()).await
    }

    /// Start the environment with options and apply `crds/`.
    pub async fn start_with(opts: EnvOptions) -> Result<Env> {
        let mut work = tempfile::tempdir().context("temp dir")?;
        // ESR_E2E_KEEP_WORK=1 keeps each test's work dir (esr logs, kubeconfig) for debugging.
        if std::env::var("ESR_E2E_KEEP_WORK").is_ok_and(|v| v == "1") {
            work.disable_cleanup(true);
            eprintln!("e2e work dir kept: {}", work.path().display());
        }
        let (server, kubeconfig, client) =
            match std::env::var_os("ESR_E2E_KUBECONFIG").filter(|v| !v.is_empty()) {
                Some(path) => {
                    let path = PathBuf::from(path);
                    let kc = kube::config::Kubeconfig::read_from(&path)
                        .with_context(|| format!("reading {}", path.display()))?;
                    let cfg = kube::Config::from_custom_kubeconfig(
                        kc,
                        &kube::config::KubeConfigOptions::default(),
                    )
                    .await?;
                    (None, path, kube::Client::try_from(cfg)?)
                }
                None => {
                    let server = TestServer::start_with(esr_testkit::Options {
                        rbac: opts.rbac,
                        ..Default::default()
                    })
                    .await?;
                    let path = work.path().join("kubeconfig");
                    server.write_kubeconfig(&path)?;
                    let client = server.client();
                    (Some(server), path, client)
                }
            };
        let mut env = Env {
            server,
            kubeconfig,
            client,
            namespaces: Mutex::new(vec![]),
            work,
            lease_namespace: None,
            id: random_suffix(),
            cluster_objects: Mutex::new(vec![]),
        };
        env.apply_crds(&repo_root().join("crds")).await?;
        // The manifests enable leader election with the Lease in the release namespace
        // (esr-system). A local esr process takes its Lease in a namespace of this Env instead,
        // so that parallel environments on one cluster never share a Lease.
        if uses_manifest_args() {
            let margs = manifest_args()?;
            if leader_election_enabled(&merge_flags(&margs, &[] as &[&str])) {
                env.lease_namespace = Some(env.namespace("esr-lease").await?);
            }
        }
        Ok(env)
    }

    /// The namespace of the leader election Lease of esr processes started with
    /// [`Env::start_esr`] (when the manifests enable leader election).
    pub fn lease_namespace(&self) -> Option<&str> {
        self.lease_namespace.as_deref()
    }

    /// The `esr controller` arguments [`Env::start_esr`] uses for these scenario arguments:
    /// `--kubeconfig <env>`, then the manifests' arguments (see [`manifest_args`]) that the
    /// scenario does not override, adapted for a local process, then the scenario's arguments.
    ///
    /// Adapted (in-cluster only) settings:
    /// - `--metrics-addr` and `--live-addr` (`:8080`, `:8082` in the pod) → `127.0.0.1:<free
    ///   port>`, so that parallel esr processes never clash;
    /// - `--leader-election-namespace` (the release namespace, `esr-system`) → the namespace
    ///   this Env created for the Lease ([`Env::lease_namespace`]);
    /// - the in-cluster config (ServiceAccount token) → `--kubeconfig` of this Env.
    ///
    /// Returns the arguments and the metrics and probes addresses.
    pub fn esr_args(&self, args: &[&str]) -> Result<(Vec<String>, String, String)> {
        self.esr_args_with_kubeconfig(&self.kubeconfig, args)
    }

    /// [`Env::esr_args`] with another kubeconfig (e.g. one of [`Env::kubeconfig_for_token`]).
    pub fn esr_args_with_kubeconfig(
        &self,
        kubeconfig: &Path,
        args: &[&str],
    ) -> Result<(Vec<String>, String, String)> {
        let manifest = if uses_manifest_args() {
            manifest_args()?
        } else {
            vec![]
        };
        let flags = merge_flags(&manifest, &self.with_scope_args(args));
        let metrics = format!("127.0.0.1:{}", free_port()?);
        let live = format!("127.0.0.1:{}", free_port()?);
        let mut metrics_addr = metrics.clone();
        let mut live_addr = live.clone();
        let mut full: Vec<String> = vec![
            "controller".into(),
            "--kubeconfig".into(),
            kubeconfig.to_string_lossy().to_string(),
        ];
        let (mut have_metrics, mut have_live) = (false, false);
        for (origin, f) in &flags {
            let from_manifest = *origin == Origin::Manifest;
            match f.name.as_deref() {
                Some("metrics-addr") if from_manifest => continue,
                Some("live-addr") if from_manifest => continue,
                Some("kubeconfig") if from_manifest => continue,
                Some("leader-election-namespace") if from_manifest => {
                    if let Some(ns) = &self.lease_namespace {
                        full.push(format!("--leader-election-namespace={ns}"));
                    }
                    continue;
                }
                Some("metrics-addr") => {
                    have_metrics = true;
                    metrics_addr = f.value().unwrap_or_default().to_string();
                }
                Some("live-addr") => {
                    have_live = true;
                    live_addr = f.value().unwrap_or_default().to_string();
                }
                _ => {}
            }
            full.extend(f.tokens.iter().cloned());
        }
        if !have_metrics {
            full.push(format!("--metrics-addr={metrics}"));
        }
        if !have_live {
            full.push(format!("--live-addr={live}"));
        }
        Ok((full, metrics_addr, live_addr))
    }

    /// The scenario's arguments preceded by the scope arguments ([`Env::scope_args`]) that the
    /// scenario does not set itself.
    fn with_scope_args(&self, args: &[&str]) -> Vec<String> {
        let own = split_flags(args);
        let mut out: Vec<String> = split_flags(&self.scope_args())
            .into_iter()
            .filter(|d| !own.iter().any(|f| f.name.is_some() && f.name == d.name))
            .flat_map(|d| d.tokens)
            .collect();
        out.extend(args.iter().map(|a| a.to_string()));
        out
    }

    /// The arguments that confine an esr process of this Env to the scenario's own objects on
    /// a shared cluster (a scenario's own flag of the same name wins):
    /// - `--controller-class=<class>` ([`Env::controller_class`]): the stores the scenario
    ///   creates through [`Env::scope_object`] carry this class in `spec.controller`, so the esr
    ///   processes of other scenarios skip them and their ExternalSecrets and PushSecrets;
    /// - `--enable-cluster-external-secret-reconciler=false` and
    ///   `--enable-cluster-push-secret-reconciler=false`: those reconcilers have no class and
    ///   act on every ClusterExternalSecret / ClusterPushSecret of the cluster. Scenarios that
    ///   need them pass [`CLUSTER_WIDE`]; they run serialized among themselves on a shared
    ///   cluster (the `e2e-cluster-scoped` test group of the `e2e-real` nextest profile).
    pub fn scope_args(&self) -> Vec<String> {
        vec![
            format!("--controller-class={}", self.controller_class()),
            "--enable-cluster-external-secret-reconciler=false".into(),
            "--enable-cluster-push-secret-reconciler=false".into(),
        ]
    }

    /// The controller class of this Env's esr processes: `esr-e2e-<random>`, unique per Env.
    pub fn controller_class(&self) -> String {
        format!("esr-e2e-{}", self.id)
    }

    /// A random id unique to this Env (for cluster-scoped names on a shared cluster).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Prepare an object the scenario is about to create: a SecretStore or ClusterSecretStore
    /// without `spec.controller` gets this Env's class ([`Env::controller_class`]). A
    /// cluster-scoped object (by `kind`) is remembered and deleted with the Env
    /// ([`Env::track_cluster_object`]).
    pub fn scope_object(&self, obj: &mut Value) {
        let kind = obj["kind"].as_str().unwrap_or_default().to_string();
        if matches!(kind.as_str(), "SecretStore" | "ClusterSecretStore")
            && obj["spec"].is_object()
            && obj["spec"].get("controller").is_none()
        {
            obj["spec"]["controller"] = json!(self.controller_class());
        }
        if let Some(ar) = cluster_scoped_resource(&kind)
            && let Some(name) = obj["metadata"]["name"].as_str()
        {
            self.track_cluster_object(ar, name);
        }
    }

    /// Delete this cluster-scoped object with the Env (on a shared cluster; its finalizers
    /// are removed first, since no esr is left running to remove them).
    pub fn track_cluster_object(&self, ar: ApiResource, name: &str) {
        if let Ok(mut g) = self.cluster_objects.lock()
            && !g.iter().any(|(a, n)| a.kind == ar.kind && n == name)
        {
            g.push((ar, name.to_string()));
        }
    }

    /// Delete this namespace (created by the scenario itself) with the Env.
    pub fn track_namespace(&self, name: &str) {
        if let Ok(mut g) = self.namespaces.lock()
            && !g.iter().any(|n| n == name)
        {
            g.push(name.to_string());
        }
    }

    /// A kube client for the environment.
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// The kubeconfig the `esr` process uses.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// True when running against `ESR_E2E_KUBECONFIG`.
    pub fn is_real_cluster(&self) -> bool {
        self.server.is_none()
    }

    /// Fault injection is only available on esr-testkit.
    pub fn supports_faults(&self) -> bool {
        self.server.is_some()
    }

    /// Fault injection (testkit only).
    pub fn faults(&self) -> Option<&Faults> {
        self.server.as_ref().map(TestServer::faults)
    }

    /// The audit log of API calls (testkit only).
    pub fn audit(&self) -> Option<&Audit> {
        self.server.as_ref().map(TestServer::audit)
    }

    /// The testkit server, if any.
    pub fn testkit(&self) -> Option<&TestServer> {
        self.server.as_ref()
    }

    /// A scratch directory that lives as long as the environment.
    pub fn work_dir(&self) -> &Path {
        self.work.path()
    }

    /// Server-side apply every CustomResourceDefinition of a directory and wait until established.
    pub async fn apply_crds(&self, dir: &Path) -> Result<usize> {
        let api: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        let mut names = vec![];
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .with_context(|| format!("reading {}", dir.display()))?
            .filter_map(std::result::Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
            .collect();
        files.sort();
        for f in files {
            for doc in esr_testkit::read_manifests(&f)? {
                if doc["kind"] != "CustomResourceDefinition" {
                    continue;
                }
                let name = doc["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                api.patch(
                    &name,
                    &PatchParams::apply("esr-e2e").force(),
                    &Patch::Apply(&doc),
                )
                .await
                .with_context(|| format!("applying {} from {}", name, f.display()))?;
                names.push(name);
            }
        }
        for name in &names {
            wait_for(
                &format!("CRD {name} established"),
                Duration::from_secs(60),
                || async {
                    let crd = api.get_opt(name).await.ok().flatten()?;
                    let established = crd
                        .status?
                        .conditions?
                        .iter()
                        .any(|c| c.type_ == "Established" && c.status == "True");
                    established.then_some(())
                },
            )
            .await?;
        }
        Ok(names.len())
    }

    /// Create a namespace `<prefix>-<random>` for one scenario; it is deleted when the Env is dropped.
    pub async fn namespace(&self, prefix: &str) -> Result<String> {
        let api: Api<Namespace> = Api::all(self.client.clone());
        let name = format!("{prefix}-{}", random_suffix());
        let ns: Namespace = serde_json::from_value(
            json!({"metadata": {"name": name, "labels": {NAMESPACE_LABEL: "true"}}}),
        )?;
        api.create(&PostParams::default(), &ns)
            .await
            .with_context(|| format!("creating namespace {name}"))?;
        if let Ok(mut g) = self.namespaces.lock() {
            g.push(name.clone());
        }
        Ok(name)
    }

    /// Delete the namespaces and cluster-scoped objects this Env created (also done on drop
    /// on a shared cluster; esr-testkit goes away with the Env).
    pub async fn cleanup(&self) -> Result<()> {
        let (names, objects) = self.take_created();
        delete_created(&self.client, names, objects).await
    }

    fn take_created(&self) -> (Vec<String>, Vec<(ApiResource, String)>) {
        let names = match self.namespaces.lock() {
            Ok(mut g) => g.drain(..).collect(),
            Err(_) => vec![],
        };
        let objects = match self.cluster_objects.lock() {
            Ok(mut g) => g.drain(..).collect(),
            Err(_) => vec![],
        };
        (names, objects)
    }

    /// Start `esr controller` with the install's arguments (see [`Env::esr_args`]) overridden
    /// by `args`; stdout and stderr go to a log file.
    pub fn start_esr(&self, args: &[&str]) -> Result<EsrProcess> {
        let (full, metrics, live) = self.esr_args(args)?;
        let refs: Vec<&str> = full.iter().map(String::as_str).collect();
        let mut p = self.start_esr_raw(&refs)?;
        p.metrics_addr = Some(metrics);
        p.probes_addr = Some(live);
        Ok(p)
    }

    /// [`Env::start_esr`] with another kubeconfig, e.g. one acting as a ServiceAccount
    /// ([`Env::kubeconfig_for_token`]).
    pub fn start_esr_with_kubeconfig(
        &self,
        kubeconfig: &Path,
        args: &[&str],
    ) -> Result<EsrProcess> {
        let (full, metrics, live) = self.esr_args_with_kubeconfig(kubeconfig, args)?;
        let refs: Vec<&str> = full.iter().map(String::as_str).collect();
        let mut p = self.start_esr_raw(&refs)?;
        p.metrics_addr = Some(metrics);
        p.probes_addr = Some(live);
        Ok(p)
    }

    /// A kubeconfig (in the work dir) for the environment's cluster whose user authenticates
    /// with `token` only (e.g. a ServiceAccount token from TokenRequest).
    pub fn kubeconfig_for_token(&self, token: &str) -> Result<PathBuf> {
        let text = std::fs::read_to_string(&self.kubeconfig)
            .with_context(|| format!("reading {}", self.kubeconfig.display()))?;
        let mut kc: Value = yaml_serde::from_str(&text)?;
        let current = kc["current-context"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let user = kc["contexts"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["name"] == current.as_str()))
            .and_then(|c| c["context"]["user"].as_str())
            .ok_or_else(|| {
                anyhow!(
                    "{}: no user in context {current:?}",
                    self.kubeconfig.display()
                )
            })?
            .to_string();
        let users = kc["users"]
            .as_array_mut()
            .ok_or_else(|| anyhow!("{}: no users", self.kubeconfig.display()))?;
        users.retain(|u| u["name"] == user.as_str());
        for u in users.iter_mut() {
            u["user"] = json!({"token": token});
        }
        let path = self
            .work
            .path()
            .join(format!("kubeconfig-{}", random_suffix()));
        std::fs::write(&path, yaml_serde::to_string(&kc)?)?;
        Ok(path)
    }

    /// [`Env::start_esr`] with extra environment variables for the esr process (e.g.
    /// `TOKIO_WORKER_THREADS=1`, one async worker as in a pod limited to one CPU).
    pub fn start_esr_with_env(&self, args: &[&str], vars: &[(&str, &str)]) -> Result<EsrProcess> {
        let (full, metrics, live) = self.esr_args(args)?;
        let refs: Vec<&str> = full.iter().map(String::as_str).collect();
        let mut p = self.start_esr_raw_with_env(&refs, vars)?;
        p.metrics_addr = Some(metrics);
        p.probes_addr = Some(live);
        Ok(p)
    }

    /// Start the esr binary with exactly these arguments (any subcommand), logging to a file.
    pub fn start_esr_raw(&self, args: &[&str]) -> Result<EsrProcess> {
        self.start_esr_raw_with_env(args, &[])
    }

    /// [`Env::start_esr_raw`] with extra environment variables.
    pub fn start_esr_raw_with_env(
        &self,
        args: &[&str],
        vars: &[(&str, &str)],
    ) -> Result<EsrProcess> {
        let bin = esr_binary()?;
        let log_path = self
            .work
            .path()
            .join(format!("esr-{}.log", random_suffix()));
        let log = std::fs::File::create(&log_path)?;
        let log2 = log.try_clone()?;
        let child = Command::new(&bin)
            .args(args)
            .env_remove("KUBECONFIG")
            .env("RUST_BACKTRACE", "1")
            .envs(vars.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log2))
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        Ok(EsrProcess {
            child,
            log_path,
            args: args.iter().map(|a| a.to_string()).collect(),
            metrics_addr: None,
            probes_addr: None,
        })
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        // On testkit everything goes away with the server; on a shared cluster delete what
        // the scenario created.
        if self.server.is_some() {
            return;
        }
        let (names, objects) = self.take_created();
        if names.is_empty() && objects.is_empty() {
            return;
        }
        let client = self.client.clone();
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            if let Err(e) = rt.block_on(delete_created(&client, names, objects)) {
                eprintln!("e2e cleanup: {e:#}");
            }
        })
        .join();
    }
}

/// The cluster-scoped kinds scenarios create, by kind.
fn cluster_scoped_resource(kind: &str) -> Option<ApiResource> {
    let (group, version, plural) = match kind {
        "ClusterSecretStore" => ("external-secrets.io", "v1", "clustersecretstores"),
        "ClusterExternalSecret" => ("external-secrets.io", "v1", "clusterexternalsecrets"),
        "ClusterPushSecret" => ("external-secrets.io", "v1alpha1", "clusterpushsecrets"),
        "ClusterGenerator" => (
            "generators.external-secrets.io",
            "v1alpha1",
            "clustergenerators",
        ),
        "ClusterRole" => ("rbac.authorization.k8s.io", "v1", "clusterroles"),
        "ClusterRoleBinding" => ("rbac.authorization.k8s.io", "v1", "clusterrolebindings"),
        _ => return None,
    };
    let gvk = GroupVersionKind::gvk(group, version, kind);
    Some(ApiResource::from_gvk_with_plural(&gvk, plural))
}

/// The namespaced esr kinds that carry finalizers.
fn finalized_resources() -> Vec<ApiResource> {
    [
        ("ExternalSecret", "v1", "externalsecrets"),
        ("SecretStore", "v1", "secretstores"),
        ("PushSecret", "v1alpha1", "pushsecrets"),
    ]
    .into_iter()
    .map(|(kind, version, plural)| {
        let gvk = GroupVersionKind::gvk("external-secrets.io", version, kind);
        ApiResource::from_gvk_with_plural(&gvk, plural)
    })
    .collect()
}

/// Merge-patch `metadata.finalizers` away (a missing object is fine).
async fn drop_finalizers(api: &Api<DynamicObject>, name: &str) -> Result<()> {
    let patch = json!({"metadata": {"finalizers": null}});
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(anyhow!(e).context(format!("removing the finalizers of {name}"))),
    }
}

/// Delete cluster-scoped objects and namespaces a scenario created on a shared cluster. The
/// scenario's esr is gone by now, so the finalizers esr adds (ExternalSecret, PushSecret,
/// store, and the per-ClusterExternalSecret namespace finalizer) are removed first; otherwise
/// the objects and their namespaces would stay terminating forever.
async fn delete_created(
    client: &kube::Client,
    namespaces: Vec<String>,
    objects: Vec<(ApiResource, String)>,
) -> Result<()> {
    let mut first_error: Option<anyhow::Error> = None;
    let mut note = |r: Result<()>| {
        if let Err(e) = r
            && first_error.is_none()
        {
            first_error = Some(e);
        }
    };
    for (ar, name) in &objects {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), ar);
        note(drop_finalizers(&api, name).await);
        match api.delete(name, &DeleteParams::background()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => note(Err(
                anyhow!(e).context(format!("deleting {} {name}", ar.kind))
            )),
        }
    }
    let ns_api: Api<Namespace> = Api::all(client.clone());
    for ns in &namespaces {
        for ar in finalized_resources() {
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
            let Ok(list) = api.list(&ListParams::default()).await else {
                continue;
            };
            for o in list.items {
                if o.metadata
                    .finalizers
                    .as_ref()
                    .is_some_and(|f| !f.is_empty())
                    && let Some(name) = o.metadata.name.as_deref()
                {
                    note(drop_finalizers(&api, name).await);
                }
            }
        }
        if let Ok(Some(n)) = ns_api.get_opt(ns).await
            && n.metadata
                .finalizers
                .as_ref()
                .is_some_and(|f| !f.is_empty())
        {
            let patch = json!({"metadata": {"finalizers": null}});
            if let Err(e) = ns_api
                .patch(ns, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                note(Err(anyhow!(e).context(format!("namespace {ns} finalizers"))));
            }
        }
        match ns_api.delete(ns, &DeleteParams::background()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => note(Err(anyhow!(e).context(format!("deleting namespace {ns}")))),
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Arguments for scenarios that need esr's cluster-wide reconcilers without a controller
/// class (ClusterExternalSecret, ClusterPushSecret): they override the defaults of
/// [`Env::scope_args`]. Such scenarios belong to the `e2e-cluster-scoped` nextest test group.
pub const CLUSTER_WIDE: &[&str] = &[
    "--enable-cluster-external-secret-reconciler=true",
    "--enable-cluster-push-secret-reconciler=true",
];

/// A running `esr` process; killed on drop.
#[derive(Debug)]
pub struct EsrProcess {
    child: Child,
    log_path: PathBuf,
    /// The arguments esr was started with.
    pub args: Vec<String>,
    /// `127.0.0.1:port` of /metrics (controller only).
    pub metrics_addr: Option<String>,
    /// `127.0.0.1:port` of /healthz and /readyz (controller only).
    pub probes_addr: Option<String>,
}

impl EsrProcess {
    /// The log file (stdout and stderr).
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// Everything logged so far.
    pub fn logs(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// Process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Still running?
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Wait for the process to exit (with a timeout) and return its exit code.
    pub async fn wait_exit(&mut self, timeout: Duration) -> Result<Option<i32>> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(st) = self.child.try_wait()? {
                return Ok(st.code());
            }
            if tokio::time::Instant::now() >= deadline {
                bail!("esr did not exit within {timeout:?}; log:\n{}", self.logs());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Stop the process: SIGTERM, then SIGKILL after 5 s.
    pub fn stop(&mut self) {
        if !self.is_running() {
            return;
        }
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        for _ in 0..100 {
            if !self.is_running() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for EsrProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Poll `f` every 100 ms until it returns `Some` or `timeout` passes.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut f: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return Ok(v);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(anyhow!("timed out after {timeout:?} waiting for {what}"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Print the skip line and return true when fault injection is unavailable.
pub fn skip_without_faults(env: &Env, scenario: &str) -> bool {
    if env.supports_faults() {
        return false;
    }
    println!(
        "skipped: {scenario} needs fault injection, which a real cluster (ESR_E2E_KUBECONFIG) does not offer"
    );
    true
}

fn uses_manifest_args() -> bool {
    std::env::var("ESR_E2E_MANIFEST_ARGS").as_deref() != Ok("0")
}

fn random_suffix() -> String {
    use rand::Rng;
    const ALPHA: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..6)
        .map(|_| ALPHA[rng.random_range(0..ALPHA.len())] as char)
        .collect()
}

fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

static ESR_BIN: OnceLock<std::result::Result<PathBuf, String>> = OnceLock::new();

/// Locate (and once per process, build) the `esr` binary. See the crate docs.
pub fn esr_binary() -> Result<PathBuf> {
    ESR_BIN
        .get_or_init(locate_esr)
        .clone()
        .map_err(|e| anyhow!(e))
}

fn locate_esr() -> std::result::Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("ESR_BIN").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    let bin = profile_dir()?.join("esr");
    if std::env::var("ESR_E2E_NO_BUILD").as_deref() != Ok("1") {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "-q", "-p", "esr", "--bin", "esr"])
            .current_dir(repo_root())
            .status()
            .map_err(|e| format!("running cargo build -p esr: {e}"))?;
        if !status.success() {
            return Err(format!("cargo build -p esr failed: {status}"));
        }
    }
    if bin.exists() {
        Ok(bin)
    } else {
        Err(format!("{} does not exist", bin.display()))
    }
}

/// The directory cargo puts binaries in (`target/debug`), found from the running test executable
/// (`target/debug/deps/<test>`).
fn profile_dir() -> std::result::Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    exe.parent()
        .and_then(|d| {
            if d.ends_with("deps") {
                d.parent()
            } else {
                Some(d)
            }
        })
        .map(Path::to_path_buf)
        .ok_or_else(|| "cannot find the target directory".to_string())
}

/// A test-support server of `crates/testsupport` (`esr-azure-kv-test-server`,
/// `esr-gcp-test-server`) run as a process for one test; killed on drop.
///
/// It is started as `<bin> <dir> <args..> <dir>/seed.json` in a fresh temporary `dir`, writes its
/// CA (`ca.pem`) and other files into `dir`, and `dir/url` once it listens.
pub struct ServerProcess {
    child: Child,
    /// The server's directory.
    pub dir: PathBuf,
    /// The server's `https://127.0.0.1:<port>`.
    pub url: String,
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl ServerProcess {
    /// Starts `bin` of the crate `package` (built with cargo when missing) with `args` and `seed`;
    /// `tag` names the directory.
    pub fn start(
        bin: &str,
        package: &str,
        tag: &str,
        args: &[&str],
        seed: &Value,
    ) -> Result<ServerProcess> {
        let path = profile_dir().map_err(|e| anyhow!(e))?.join(bin);
        if !path.exists() {
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let status = Command::new(cargo)
                .args(["build", "-q", "-p", package, "--bin", bin])
                .current_dir(repo_root())
                .status()
                .with_context(|| format!("building {bin}"))?;
            if !status.success() {
                bail!("building {bin} failed: {status}");
            }
        }
        let dir = std::env::temp_dir().join(format!("esr-e2e-{bin}-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let seed_file = dir.join("seed.json");
        std::fs::write(&seed_file, seed.to_string())?;
        let child = Command::new(&path)
            .arg(&dir)
            .args(args)
            .arg(&seed_file)
            .stdout(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {}", path.display()))?;
        let mut server = ServerProcess {
            child,
            dir,
            url: String::new(),
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(url) = std::fs::read_to_string(server.dir.join("url")) {
                server.url = url;
                return Ok(server);
            }
            if std::time::Instant::now() >= deadline {
                bail!("{bin} did not start within 60s");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The PEM file of the CA that signed the server's certificate.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }
}

/// Runs the `#[ignore]`d test `name` of this test binary in a child process that `setup` gives
/// environment variables (the esr processes a scenario starts inherit the test process's
/// environment, which a test cannot change in its own process); an error unless the child passed
/// and printed `ok_line`.
pub fn run_ignored_in_child(
    name: &str,
    ok_line: &str,
    setup: impl FnOnce(&mut Command),
) -> Result<()> {
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(exe);
    cmd.args(["--exact", name, "--ignored", "--nocapture"]);
    setup(&mut cmd);
    let out = cmd.output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || !stdout.contains(ok_line) {
        bail!(
            "{name} failed in its child process ({}):\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// Runs `esr render -f <file>` with the environment `setup` gives it.
pub fn esr_render_output(
    file: &Path,
    setup: impl FnOnce(&mut Command),
) -> Result<std::process::Output> {
    let mut cmd = Command::new(esr_binary()?);
    cmd.args(["render", "-f"]).arg(file);
    setup(&mut cmd);
    Ok(cmd.output()?)
}

/// What `esr render -f <file>` prints ([`esr_render_output`]); an error when it fails.
pub fn esr_render(file: &Path, setup: impl FnOnce(&mut Command)) -> Result<String> {
    let out = esr_render_output(file, setup)?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        bail!(
            "esr render failed ({}):\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(stdout)
}

/// The moto (AWS API) endpoint `scripts/test-servers.sh` started (`ESR_TEST_MOTO_ENDPOINT`), or
/// `None` after printing a `skipped:` line when it is not set; with `ESR_REQUIRE_SERVERS=1` a
/// missing endpoint fails the test instead.
pub fn moto_endpoint() -> Option<String> {
    match std::env::var("ESR_TEST_MOTO_ENDPOINT") {
        Ok(v) if !v.is_empty() => Some(v),
        _ => {
            assert!(
                std::env::var("ESR_REQUIRE_SERVERS").as_deref() != Ok("1"),
                "ESR_TEST_MOTO_ENDPOINT is not set but ESR_REQUIRE_SERVERS=1"
            );
            println!(
                "skipped: ESR_TEST_MOTO_ENDPOINT is not set (run under scripts/test-servers.sh)"
            );
            None
        }
    }
}

/// Read a value at a JSON pointer as a string (helper for scenarios).
pub fn str_at<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Value::as_str)
}

/// The text of an esr process's `/metrics` ([`EsrProcess::metrics_addr`]), read with a plain
/// HTTP/1.0 GET.
pub fn metrics_text(addr: &str) -> Result<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).with_context(|| format!("connect {addr}"))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(s, "GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut resp = String::new();
    s.read_to_string(&mut resp)?;
    match resp.split_once("\r\n\r\n") {
        Some((head, body))
            if head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200") =>
        {
            Ok(body.to_string())
        }
        _ => bail!("GET {addr}/metrics: {}", resp.lines().next().unwrap_or("")),
    }
}

/// The sum of the samples of `metric` in a metrics text whose labels include every one of
/// `labels` (written `name="value"`).
pub fn metric_sum(text: &str, metric: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(metric) && l[metric.len()..].starts_with('{'))
        .filter(|l| labels.iter().all(|want| l.contains(want)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MANIFEST: &[&str] = &[
        "--concurrent=1",
        "--metrics-addr=:8080",
        "--live-addr=:8082",
        "--enable-leader-election",
        "--leader-election-namespace=esr-system",
        "--log-format=json",
    ];

    fn names(flags: &[(Origin, Flag)]) -> Vec<(Origin, String)> {
        flags
            .iter()
            .map(|(o, f)| (*o, f.tokens.join(" ")))
            .collect()
    }

    #[test]
    fn scenario_flags_override_manifest_flags_of_the_same_name() {
        let m = merge_flags(
            MANIFEST,
            &[
                "--loglevel",
                "debug",
                "--concurrent",
                "4",
                "--log-format=text",
            ],
        );
        let got = names(&m);
        assert_eq!(
            got,
            vec![
                (Origin::Manifest, "--metrics-addr=:8080".to_string()),
                (Origin::Manifest, "--live-addr=:8082".to_string()),
                (Origin::Manifest, "--enable-leader-election".to_string()),
                (
                    Origin::Manifest,
                    "--leader-election-namespace=esr-system".to_string()
                ),
                (Origin::Scenario, "--loglevel debug".to_string()),
                (Origin::Scenario, "--concurrent 4".to_string()),
                (Origin::Scenario, "--log-format=text".to_string()),
            ]
        );
        assert!(leader_election_enabled(&m));
    }

    #[test]
    fn leader_election_can_be_switched_off() {
        let m = merge_flags(MANIFEST, &["--enable-leader-election=false"]);
        assert!(!leader_election_enabled(&m));
        assert!(!leader_election_enabled(&merge_flags(
            &["--concurrent=1"],
            &[] as &[&str]
        )));
        assert!(leader_election_enabled(&merge_flags(
            &["--enable-leader-election=true"],
            &[] as &[&str]
        )));
    }

    #[test]
    fn bare_boolean_is_not_given_the_next_flag_as_value() {
        let f = split_flags(&["--enable-leader-election", "--namespace", "a", "x"]);
        assert_eq!(f.len(), 3);
        assert_eq!(f[0].value(), None);
        assert_eq!(f[1].value(), Some("a"));
        assert_eq!(f[2].name, None);
    }

    #[test]
    fn the_manifests_deployment_runs_the_controller() {
        let args = manifest_args().unwrap();
        assert!(!args.is_empty());
        assert!(args.iter().all(|a| a.starts_with("--")), "{args:?}");
    }
}
