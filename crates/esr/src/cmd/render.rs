//! `esr render -f <files/dirs>`: runs the sync pipeline offline (providers → rewrite → template →
//! plan) for the ExternalSecrets in the given manifests and prints the resulting Secrets as YAML.
//!
//! Stores (SecretStore / ClusterSecretStore), Namespaces and the Secrets / ConfigMaps /
//! ServiceAccounts they reference come from the same files. Stores count as Ready (there is no
//! store controller offline). Secret values appear only in the printed Secrets; errors name the
//! ExternalSecret and ESO's error text, and the exit code is 1.
//!
//! `dataFrom[].sourceRef.generatorRef` works too: generator objects (`Password`, `Fake`,
//! `VaultDynamicSecret`, `ClusterGenerator`, in `generators.external-secrets.io/v1alpha1`) come
//! from the same files. The generator registry reads them, and the Secrets its generators need,
//! through an in-memory, read-only Kubernetes client over the manifests ([`manifest_client`]);
//! anything else (e.g. a TokenRequest) fails with an "offline" error. Each run generates anew: a
//! `VaultDynamicSecret` issues new credentials on every `esr render` (there is no lease state
//! between runs).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, OnceLock, RwLock};

use anyhow::Context as _;
use esr_api::v1::ExternalSecret;
use esr_controller::externalsecret::convert::es_view;
use esr_controller::externalsecret::fetch::{FetchEnv, Fetched, Transforms, fetch};
use esr_controller::externalsecret::plan::{self, Outcome, PlanInput, SecretWrite};
use esr_controller::externalsecret::template::{EsoTemplates, TemplateEngine, load_sources};
use esr_provider::{ResolveOptions, StaticKubeAccess, StaticStoreLookup, StoreInfo};
use k8s_openapi::api::core::v1::Secret;

/// Arguments of `esr render`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Manifest files or directories (recursed for .yaml, .yml and .json).
    #[arg(short = 'f', long = "filename", required = true, num_args = 1..)]
    pub files: Vec<PathBuf>,
    /// `--controller-class` to render as.
    #[arg(long, default_value = "default")]
    pub controller_class: String,
}

fn collect(inputs: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for input in inputs {
        if input.is_dir() {
            let mut stack = vec![input.clone()];
            while let Some(dir) = stack.pop() {
                let mut entries: Vec<PathBuf> = std::fs::read_dir(&dir)
                    .with_context(|| format!("reading {}", dir.display()))?
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .collect();
                entries.sort();
                for p in entries {
                    if p.is_dir() {
                        stack.push(p);
                    } else if matches!(
                        p.extension().and_then(|e| e.to_str()),
                        Some("yaml" | "yml" | "json")
                    ) {
                        out.push(p);
                    }
                }
            }
        } else {
            out.push(input.clone());
        }
    }
    out.sort();
    Ok(out)
}

fn documents(path: &Path) -> anyhow::Result<Vec<serde_json::Value>> {
    let text =
        super::input::read_input(path).with_context(|| format!("reading {}", path.display()))?;
    let mut out = Vec::new();
    for doc in yaml_serde::Deserializer::from_str(&text) {
        let v: serde_json::Value = serde::Deserialize::deserialize(doc)
            .with_context(|| format!("{}: not valid YAML/JSON", path.display()))?;
        match v {
            serde_json::Value::Null => {}
            serde_json::Value::Object(ref o)
                if o.get("kind").and_then(|k| k.as_str()) == Some("List") =>
            {
                out.extend(
                    o.get("items")
                        .and_then(|i| i.as_array())
                        .cloned()
                        .unwrap_or_default(),
                );
            }
            other => out.push(other),
        }
    }
    Ok(out)
}

/// The manifests' objects by API path (`/api/v1/namespaces/<ns>/secrets/<name>`,
/// `/apis/<group>/<version>/[namespaces/<ns>/]<plural>/<name>`), served by [`manifest_client`].
/// Process-wide because the generator registry is installed once per process; each
/// [`render`] replaces the content.
fn manifest_objects() -> &'static RwLock<HashMap<String, serde_json::Value>> {
    static OBJECTS: OnceLock<RwLock<HashMap<String, serde_json::Value>>> = OnceLock::new();
    OBJECTS.get_or_init(|| RwLock::new(HashMap::new()))
}

const CLUSTER_SCOPED: &[&str] = &[
    "Namespace",
    "ClusterGenerator",
    "ClusterSecretStore",
    "ClusterExternalSecret",
    "ClusterPushSecret",
];

/// The API path of an object (kube's plural: the lower-cased kind + `s`, right for every kind
/// render reads: secrets, configmaps, serviceaccounts and the generator kinds).
fn object_path(obj: &serde_json::Value) -> Option<String> {
    let (api, kind) = kind_of(obj);
    let name = obj.pointer("/metadata/name").and_then(|n| n.as_str())?;
    if api.is_empty() || kind.is_empty() || name.is_empty() {
        return None;
    }
    let prefix = if api.contains('/') {
        format!("/apis/{api}")
    } else {
        format!("/api/{api}")
    };
    let plural = format!("{}s", kind.to_ascii_lowercase());
    Some(if CLUSTER_SCOPED.contains(&kind) {
        format!("{prefix}/{plural}/{name}")
    } else {
        let ns = obj
            .pointer("/metadata/namespace")
            .and_then(|n| n.as_str())
            .filter(|n| !n.is_empty())
            .unwrap_or("default");
        format!("{prefix}/namespaces/{ns}/{plural}/{name}")
    })
}

/// An object as the API server would return it: a Secret's `stringData` is merged into `data`
/// (base64, `stringData` wins).
fn as_served(obj: &serde_json::Value) -> serde_json::Value {
    use base64::Engine as _;
    let mut o = obj.clone();
    if kind_of(obj) != ("v1", "Secret") {
        return o;
    }
    let Some(map) = o.as_object_mut() else {
        return o;
    };
    if let Some(serde_json::Value::Object(sd)) = map.remove("stringData") {
        let data = map
            .entry("data")
            .or_insert_with(|| serde_json::Value::Object(Default::default()));
        if !data.is_object() {
            *data = serde_json::Value::Object(Default::default());
        }
        if let Some(d) = data.as_object_mut() {
            for (k, v) in sd {
                let text = v.as_str().unwrap_or_default();
                d.insert(
                    k,
                    base64::engine::general_purpose::STANDARD
                        .encode(text)
                        .into(),
                );
            }
        }
    }
    o
}

fn api_response(
    status: http::StatusCode,
    body: &serde_json::Value,
) -> http::Response<kube::client::Body> {
    let mut r = http::Response::new(kube::client::Body::from(body.to_string().into_bytes()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    r
}

fn api_status(
    status: http::StatusCode,
    reason: &str,
    message: String,
) -> http::Response<kube::client::Body> {
    api_response(
        status,
        &serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": status.as_u16()
        }),
    )
}

/// Answers one request of the in-memory API: GET of an object from the manifests, else
/// NotFound; other verbs are refused (render is offline).
fn manifest_api(method: &http::Method, path: &str) -> http::Response<kube::client::Body> {
    if method != http::Method::GET {
        return api_status(
            http::StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            format!("esr render is offline: {method} {path} is not available"),
        );
    }
    let objects = manifest_objects()
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    match objects.get(path) {
        Some(o) => api_response(http::StatusCode::OK, o),
        None => api_status(
            http::StatusCode::NOT_FOUND,
            "NotFound",
            format!("{path} not found in the given manifests"),
        ),
    }
}

/// A Kubernetes client answering from the manifests given to `esr render` (GET only).
pub fn manifest_client() -> kube::Client {
    let svc = tower::service_fn(|req: http::Request<kube::client::Body>| async move {
        Ok::<_, std::convert::Infallible>(manifest_api(req.method(), req.uri().path()))
    });
    kube::Client::new(svc, "default")
}

fn kind_of(v: &serde_json::Value) -> (&str, &str) {
    (
        v.get("apiVersion").and_then(|x| x.as_str()).unwrap_or(""),
        v.get("kind").and_then(|x| x.as_str()).unwrap_or(""),
    )
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(run_async(args))
}

async fn run_async(args: Args) -> anyhow::Result<ExitCode> {
    let out = render(&args).await?;
    print!("{}", out.yaml);
    for m in &out.messages {
        eprintln!("{m}");
    }
    Ok(if out.failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// What `esr render` produced.
#[derive(Debug, Default)]
pub struct Output {
    /// The Secrets, as a multi-document YAML stream.
    pub yaml: String,
    /// Notes and errors (stderr).
    pub messages: Vec<String>,
    /// Whether any ExternalSecret failed.
    pub failed: bool,
}

/// Renders the ExternalSecrets of the given files.
pub async fn render(args: &Args) -> anyhow::Result<Output> {
    let mut out = Output::default();
    let mut objects = Vec::new();
    for f in collect(&args.files)? {
        objects.extend(documents(&f)?);
    }
    let kube = Arc::new(StaticKubeAccess::new());
    let mut served = HashMap::new();
    let mut lookup = StaticStoreLookup::new();
    let mut externals = Vec::new();
    let mut existing: BTreeMap<(String, String), Secret> = BTreeMap::new();
    for mut obj in objects {
        let (api, kind) = kind_of(&obj);
        let (api, kind) = (api.to_string(), kind.to_string());
        let is_es_group = api.starts_with("external-secrets.io/");
        match (is_es_group, kind.as_str()) {
            (true, "SecretStore") | (true, "ClusterSecretStore") => {
                if kind == "SecretStore" && obj.pointer("/metadata/namespace").is_none() {
                    obj["metadata"]["namespace"] = serde_json::Value::String("default".into());
                }
                let info =
                    StoreInfo::from_object(&obj).map_err(|e| anyhow::anyhow!("{kind}: {e}"))?;
                lookup.add_store(info.with_ready(true));
            }
            (true, "ExternalSecret") => {
                if obj.pointer("/metadata/namespace").is_none() {
                    obj["metadata"]["namespace"] = serde_json::Value::String("default".into());
                }
                let es: ExternalSecret =
                    serde_json::from_value(obj).context("invalid ExternalSecret")?;
                externals.push(es);
            }
            (false, "Namespace") if api == "v1" => {
                let name = obj
                    .pointer("/metadata/name")
                    .and_then(|n| n.as_str())
                    .unwrap_or("")
                    .to_string();
                let labels: BTreeMap<String, String> = obj
                    .pointer("/metadata/labels")
                    .and_then(|l| serde_json::from_value(l.clone()).ok())
                    .unwrap_or_default();
                lookup.add_namespace(&name, labels);
            }
            _ => {
                if api == "v1"
                    && kind == "Secret"
                    && let Ok(s) = serde_json::from_value::<Secret>(obj.clone())
                {
                    let ns = s
                        .metadata
                        .namespace
                        .clone()
                        .unwrap_or_else(|| "default".into());
                    existing.insert((ns, s.metadata.name.clone().unwrap_or_default()), s);
                }
                if let Some(path) = object_path(&obj) {
                    served.insert(path, as_served(&obj));
                }
                kube.add_objects(std::iter::once(&obj));
            }
        }
    }
    if externals.is_empty() {
        anyhow::bail!("no ExternalSecret found in the given files");
    }
    *manifest_objects()
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = served;
    let generators = crate::generators::registry(manifest_client());

    let templates = EsoTemplates::new();
    let registry = crate::providers::registry();
    let env = FetchEnv {
        lookup: &lookup,
        registry: &registry,
        kube: kube.clone(),
        recorder: esr_provider::metrics::noop_recorder(),
        resolve: ResolveOptions {
            controller_class: args.controller_class.clone(),
            flood_gate: false,
        },
        transforms: Transforms::Inline(templates.transformer()),
        gate: None,
        generators: Some(&generators),
    };
    let now = chrono::Utc::now();
    let mut printed = 0;
    for es in &externals {
        let id = format!(
            "ExternalSecret {}/{}",
            es.metadata.namespace.as_deref().unwrap_or("default"),
            es.metadata.name.as_deref().unwrap_or("")
        );
        let view = es_view(es, None);
        if let Some(msg) = generic_target_refusal(&view, now) {
            out.messages.push(format!("error: {id}: {msg}"));
            out.failed = true;
            continue;
        }
        let data = match fetch(&env, es).await {
            Fetched::Skip => {
                out.messages.push(format!(
                    "{id}: skipped (its store belongs to another controller class)"
                ));
                continue;
            }
            Fetched::Data(d) => d,
        };
        let sources = load_sources(kube.as_ref(), es).await;
        let renderer = templates.renderer(es, &sources);
        let target = existing.get(&(view.namespace.clone(), view.target_name.clone()));
        let p = plan::plan(PlanInput {
            es: &view,
            provider: data,
            existing: target,
            owned_secret_names: &[],
            renderer: renderer.as_ref(),
            start: now,
            jitter: std::time::Duration::ZERO,
        });
        match &p.outcome {
            Outcome::Retry(e) | Outcome::Terminal(e) => {
                let msg = p
                    .status
                    .ready()
                    .map(|c| c.message.clone())
                    .unwrap_or_default();
                out.messages.push(format!("error: {id}: {msg}: {e}"));
                out.failed = true;
                continue;
            }
            Outcome::Done => {}
        }
        let secret = match &p.write {
            SecretWrite::Create(s) | SecretWrite::Update(s) => Some((**s).clone()),
            SecretWrite::None => match (view.creation, target) {
                (plan::CreationPolicy::None, _) => {
                    out.messages
                        .push(format!("{id}: creationPolicy=None, no Secret is written"));
                    None
                }
                (_, Some(t)) => Some(t.clone()),
                (_, None) => {
                    let reason = p
                        .status
                        .ready()
                        .map(|c| c.message.clone())
                        .unwrap_or_default();
                    out.messages.push(format!("{id}: no Secret: {reason}"));
                    None
                }
            },
            SecretWrite::Delete(_) => {
                out.messages.push(format!(
                    "{id}: the Secret would be deleted (deletionPolicy=Delete, no data)"
                ));
                None
            }
        };
        if let Some(mut s) = secret {
            s.metadata.managed_fields = None;
            s.metadata.resource_version = None;
            s.metadata.uid = None;
            // Offline there is no ExternalSecret UID, so an owner reference could not be applied.
            if let Some(refs) = s.metadata.owner_references.as_mut() {
                refs.retain(|r| !r.uid.is_empty());
            }
            if s.metadata
                .owner_references
                .as_ref()
                .is_some_and(|r| r.is_empty())
            {
                s.metadata.owner_references = None;
            }
            let mut v = serde_json::to_value(&s)?;
            if let Some(o) = v.as_object_mut() {
                o.insert("apiVersion".into(), "v1".into());
                o.insert("kind".into(), "Secret".into());
            }
            if printed > 0 {
                out.yaml.push_str("---\n");
            }
            out.yaml.push_str(&yaml_serde::to_string(&v)?);
            printed += 1;
        }
    }
    Ok(out)
}

/// A generic target (`target.manifest`) is never rendered as a Secret: the controller's Ready
/// message for it (ESO's, as without `--unsafe-allow-generic-targets`).
fn generic_target_refusal(
    view: &plan::EsView,
    now: chrono::DateTime<chrono::Utc>,
) -> Option<String> {
    let err = plan::generic_target_error(view.manifest.as_ref(), false)?;
    let p = plan::generic_target_failed(view, &err, now);
    p.status.ready().map(|c| c.message.clone())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    fn args(files: Vec<PathBuf>) -> Args {
        Args {
            files,
            controller_class: "default".into(),
        }
    }

    fn secrets(yaml: &str) -> Vec<Secret> {
        yaml_serde::Deserializer::from_str(yaml)
            .map(|d| serde::Deserialize::deserialize(d).unwrap())
            .collect()
    }

    fn value(s: &Secret, k: &str) -> String {
        String::from_utf8(s.data.as_ref().unwrap()[k].0.clone()).unwrap()
    }

    #[tokio::test]
    async fn renders_the_examples() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
        let out = render(&args(vec![dir])).await.unwrap();
        assert!(!out.failed, "{:?}", out.messages);
        let s = secrets(&out.yaml);
        let by_name = |n: &str| {
            s.iter()
                .find(|x| x.metadata.name.as_deref() == Some(n))
                .unwrap()
        };
        assert_eq!(
            value(by_name("db-credentials"), "dsn"),
            "postgres://app:demo-db-password@db.demo.svc:5432/app"
        );
        assert_eq!(
            value(by_name("team-keys"), "alpha-api-key"),
            "demo-alpha-key"
        );
        assert_eq!(
            value(by_name("app-config"), "password"),
            "demo-source-password"
        );
        let labels = by_name("db-credentials").metadata.labels.clone().unwrap();
        assert_eq!(labels["reconcile.external-secrets.io/managed"], "true");
        assert!(
            by_name("db-credentials")
                .metadata
                .owner_references
                .is_none()
        );
    }

    #[tokio::test]
    async fn generator_refs_read_generators_from_the_manifests() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("m.yaml"),
            r#"
apiVersion: generators.external-secrets.io/v1alpha1
kind: Fake
metadata: {name: fake, namespace: ns}
spec: {data: {api-key: from-fake}}
---
apiVersion: generators.external-secrets.io/v1alpha1
kind: Password
metadata: {name: pw, namespace: ns}
spec: {length: 12, digits: 3, symbols: 0, noUpper: false, allowRepeat: true}
---
apiVersion: generators.external-secrets.io/v1alpha1
kind: ClusterGenerator
metadata: {name: cluster-fake}
spec: {kind: Fake, generator: {fakeSpec: {data: {cluster-key: from-cluster}}}}
---
apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {name: gen, namespace: ns}
spec:
  target: {name: gen}
  dataFrom:
    - sourceRef: {generatorRef: {apiVersion: generators.external-secrets.io/v1alpha1, kind: Fake, name: fake}}
    - sourceRef: {generatorRef: {apiVersion: generators.external-secrets.io/v1alpha1, kind: Password, name: pw}}
    - sourceRef: {generatorRef: {apiVersion: generators.external-secrets.io/v1alpha1, kind: ClusterGenerator, name: cluster-fake}}
---
apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {name: missing, namespace: ns}
spec:
  target: {name: missing}
  dataFrom:
    - sourceRef: {generatorRef: {apiVersion: generators.external-secrets.io/v1alpha1, kind: VaultDynamicSecret, name: nope}}
"#,
        )
        .unwrap();
        let out = render(&args(vec![dir.path().to_path_buf()])).await.unwrap();
        let s = secrets(&out.yaml);
        assert_eq!(s.len(), 1, "{}", out.yaml);
        assert_eq!(value(&s[0], "api-key"), "from-fake");
        assert_eq!(value(&s[0], "cluster-key"), "from-cluster");
        assert_eq!(value(&s[0], "password").len(), 12);
        // The VaultDynamicSecret kind is registered; its object is not in the manifests.
        assert!(out.failed);
        assert_eq!(out.messages.len(), 1, "{:?}", out.messages);
        let m = &out.messages[0];
        assert!(m.starts_with("error: ExternalSecret ns/missing:"), "{m}");
        assert!(
            m.contains("unable to get generator VaultDynamicSecret/nope"),
            "{m}"
        );
        assert!(m.contains("not found in the given manifests"), "{m}");
    }

    #[test]
    fn object_paths_follow_the_kubernetes_api() {
        let p = |v: serde_json::Value| object_path(&v);
        assert_eq!(
            p(serde_json::json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "s", "namespace": "team"}})),
            Some("/api/v1/namespaces/team/secrets/s".into())
        );
        assert_eq!(
            p(serde_json::json!({"apiVersion": "generators.external-secrets.io/v1alpha1",
                "kind": "VaultDynamicSecret", "metadata": {"name": "db"}})),
            Some(
                "/apis/generators.external-secrets.io/v1alpha1/namespaces/default/vaultdynamicsecrets/db"
                    .into()
            )
        );
        assert_eq!(
            p(
                serde_json::json!({"apiVersion": "generators.external-secrets.io/v1alpha1",
                "kind": "ClusterGenerator", "metadata": {"name": "g"}})
            ),
            Some("/apis/generators.external-secrets.io/v1alpha1/clustergenerators/g".into())
        );
        assert_eq!(p(serde_json::json!({"kind": "Secret"})), None);
        let served = as_served(&serde_json::json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s"}, "data": {"a": "eA==", "b": "eA=="},
            "stringData": {"b": "token-b"}}));
        assert_eq!(
            served["data"],
            serde_json::json!({"a": "eA==", "b": "dG9rZW4tYg=="})
        );
        assert!(served.get("stringData").is_none());
    }

    #[tokio::test]
    async fn errors_name_the_external_secret_and_fail() {
        let dir = std::env::temp_dir().join(format!("esr-render-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("m.yaml"),
            r#"
apiVersion: external-secrets.io/v1
kind: SecretStore
metadata: {name: s, namespace: ns}
spec: {provider: {fake: {data: [{key: a, value: top-secret-value}]}}}
---
apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {name: broken, namespace: ns}
spec:
  secretStoreRef: {name: s}
  data: [{secretKey: k, remoteRef: {key: missing}}]
"#,
        )
        .unwrap();
        let out = render(&args(vec![dir.clone()])).await.unwrap();
        assert!(out.failed);
        assert_eq!(
            out.messages,
            vec![
                "error: ExternalSecret ns/broken: could not get secret data from provider: error processing spec.data[0] (key: missing), err: Secret does not exist"
                    .to_string()
            ]
        );
        assert!(out.yaml.is_empty());
        assert!(!out.messages.concat().contains("top-secret-value"));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn generic_targets_print_no_secret() {
        let dir = std::env::temp_dir().join(format!("esr-render-generic-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("m.yaml"),
            r#"
apiVersion: external-secrets.io/v1
kind: SecretStore
metadata: {name: s, namespace: ns}
spec: {provider: {fake: {data: [{key: a, value: v}]}}}
---
apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {name: cm, namespace: ns}
spec:
  secretStoreRef: {name: s}
  target: {name: app-config, manifest: {apiVersion: v1, kind: ConfigMap}}
  data: [{secretKey: k, remoteRef: {key: a}}]
"#,
        )
        .unwrap();
        let out = render(&args(vec![dir.clone()])).await.unwrap();
        assert!(out.failed);
        assert!(out.yaml.is_empty(), "{}", out.yaml);
        assert_eq!(
            out.messages,
            vec![
                "error: ExternalSecret ns/cm: invalid generic target: generic targets are disabled. Enable with --unsafe-allow-generic-targets flag"
                    .to_string()
            ]
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}
