//! Deploy tooling for esr: renders the Helm chart in `deploy/charts/esr` with real Helm and
//! writes `deploy/manifests/` from it (`make manifests`).
//!
//! **Rendering is real Helm.** [`render_chart`] installs the chart with the Helm v4 library (see
//! [`helm`]) into an in-process esr-testkit API server and returns the release's manifest, split
//! by template. The bindings available here have no offline `helm template`, and an install gives
//! the same output for the same values and cluster capabilities (Kubernetes version, served API
//! groups), with the API server's validation of every object on top. So there is no second,
//! hand-written renderer to keep in step with Helm: an earlier one (esr-template plus shims for
//! `include`, `tpl`, `required`) is gone, and the chart may use any Helm feature (`fail`,
//! `.Capabilities.APIVersions`, `lookup`, values.schema.json).
//!
//! Entry points: [`render_chart`] (one rendered document list), [`render_manifests`] (the files of
//! `deploy/manifests/` as path → content), [`chart_crd_templates`] (the chart's CRD templates from
//! the repository's `crds/`), [`write_all`] (`make manifests`).

pub mod helm;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value as Json;

/// Errors of the deploy tool.
#[derive(Debug, thiserror::Error)]
pub enum DeployError {
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// Helm failed (or could not be installed).
    #[error("helm {action}: {message}")]
    Helm {
        /// lint, install, uninstall, pip install, ...
        action: String,
        /// Helm's message.
        message: String,
    },
    /// The test API server failed.
    #[error("esr-testkit: {0}")]
    Testkit(Box<esr_testkit::TestkitError>),
    /// A rendered document is not valid YAML.
    #[error("rendered {name} is not valid YAML: {source}")]
    Rendered {
        /// Template file name.
        name: String,
        /// The error.
        source: yaml_serde::Error,
    },
    /// A CRD contains template delimiters and cannot be embedded in the chart verbatim.
    #[error("{0} contains '{{{{'; it cannot be embedded in a chart template verbatim")]
    Delimiters(PathBuf),
    /// A CRD file has no top-level `metadata:` line to add the chart's annotations under.
    #[error("{0} has no top-level `metadata:` line")]
    NoMetadata(PathBuf),
}

impl From<esr_testkit::TestkitError> for DeployError {
    fn from(e: esr_testkit::TestkitError) -> Self {
        DeployError::Testkit(Box::new(e))
    }
}

fn read(path: &Path) -> Result<String, DeployError> {
    std::fs::read_to_string(path).map_err(|source| DeployError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// The Helm release a chart is rendered for.
#[derive(Debug, Clone)]
pub struct Release {
    /// `.Release.Name`.
    pub name: String,
    /// `.Release.Namespace`.
    pub namespace: String,
}

impl Default for Release {
    fn default() -> Self {
        Release {
            name: "esr".into(),
            namespace: "esr-system".into(),
        }
    }
}

/// One rendered template file: its path relative to `templates/` and its YAML documents.
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    /// e.g. `deployment.yaml`, `crds/external-secrets.io_externalsecrets.yaml`.
    pub template: String,
    /// The non-empty documents, as rendered text (each without a leading `---` or `# Source`).
    pub documents: Vec<String>,
}

/// Splits a Helm release manifest into its documents by `# Source: <chart>/templates/<file>`
/// header, in the manifest's order (Helm's install order), grouping consecutive documents of one
/// template.
pub fn split_manifest(manifest: &str) -> Result<Vec<Rendered>, DeployError> {
    let mut chunks: Vec<String> = vec![String::new()];
    for line in manifest.lines() {
        if line.trim_end() == "---" {
            chunks.push(String::new());
        } else if let Some(cur) = chunks.last_mut() {
            cur.push_str(line);
            cur.push('\n');
        }
    }
    let mut out: Vec<Rendered> = Vec::new();
    for chunk in chunks {
        let mut lines = chunk.lines().skip_while(|l| l.trim().is_empty());
        let Some(source) = lines.next().and_then(|l| l.strip_prefix("# Source: ")) else {
            continue;
        };
        let template = source
            .split_once("/templates/")
            .map(|(_, t)| t.to_string())
            .unwrap_or_else(|| source.to_string());
        let body: String = lines.map(|l| format!("{l}\n")).collect();
        let body = format!("{}\n", body.trim_end());
        if !body
            .lines()
            .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        {
            continue;
        }
        yaml_serde::from_str::<yaml_serde::Value>(&body).map_err(|source| {
            DeployError::Rendered {
                name: template.clone(),
                source,
            }
        })?;
        match out.last_mut() {
            Some(last) if last.template == template => last.documents.push(body),
            _ => out.push(Rendered {
                template,
                documents: vec![body],
            }),
        }
    }
    Ok(out)
}

/// A minimal `monitoring.coreos.com/v1` ServiceMonitor CRD, so that renders with
/// `serviceMonitor.enabled: true` install into the test API server as into a cluster with the
/// Prometheus Operator.
const SERVICE_MONITOR_CRD: &str = include_str!("../helm/servicemonitor-crd.yaml");

/// Renders the chart in `chart_dir` with real Helm for `release`, with `values` over the chart's
/// `values.yaml`: installs it into a fresh in-process esr-testkit (which serves the
/// ServiceMonitor CRD and has the namespace of `scopedNamespace`, as the cluster would) and
/// returns the release's manifest by template. Helm's errors (`fail`, `required`, a value that
/// values.schema.json rejects) and the API server's rejections are [`DeployError::Helm`].
pub fn render_chart(
    chart_dir: &Path,
    values: &Json,
    release: &Release,
) -> Result<Vec<Rendered>, DeployError> {
    render_chart_with(chart_dir, values, release, &[])
}

/// [`render_chart`] into a cluster that also has `objects` (for example a CRD that makes it serve
/// an API group the chart looks for in `.Capabilities.APIVersions`).
pub fn render_chart_with(
    chart_dir: &Path,
    values: &Json,
    release: &Release,
    objects: &[Json],
) -> Result<Vec<Rendered>, DeployError> {
    let helm = helm::Helm::ensure()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|source| DeployError::Io {
            path: PathBuf::from("tokio runtime"),
            source,
        })?;
    let server = rt.block_on(esr_testkit::TestServer::start())?;
    for doc in yaml_serde::Deserializer::from_str(SERVICE_MONITOR_CRD) {
        let v: Json =
            serde::Deserialize::deserialize(doc).map_err(|source| DeployError::Rendered {
                name: "servicemonitor-crd.yaml".into(),
                source,
            })?;
        server.apply_object(v)?;
    }
    for o in objects {
        server.apply_object(o.clone())?;
    }
    if let Some(ns) = values["scopedNamespace"].as_str().filter(|n| !n.is_empty()) {
        server.apply_object(serde_json::json!({
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}
        }))?;
    }
    let manifest = helm.install(server.kubeconfig_path(), release, chart_dir, values);
    drop(server);
    drop(rt);
    split_manifest(&manifest?)
}

/// The repository root (this crate lives in `crates/esr-deploytool`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The kustomization file of `deploy/manifests/`. Named `Kustomization` (a name kustomize
/// accepts) rather than `kustomization.yaml`, so that `kubectl apply -f deploy/manifests/`, which
/// reads every `.yaml`/`.yml`/`.json` file of the directory, applies only Kubernetes objects.
pub const MANIFESTS_KUSTOMIZATION: &str = "Kustomization";

/// File names `deploy/manifests/` used to have; `make manifests` removes them.
const STALE_MANIFEST_FILES: &[&str] = &["kustomization.yaml"];

const MANIFEST_HEADER: &str = "# Generated by `make manifests` from deploy/charts/esr with default values \
(release \"esr\", namespace \"esr-system\"). Do not edit.\n";

/// The files of `deploy/manifests/` (file name → content) for the chart's default values:
/// `crds.yaml` (the CRDs), `esr.yaml` (everything else) and [`MANIFESTS_KUSTOMIZATION`].
pub fn render_manifests(chart_dir: &Path) -> Result<BTreeMap<String, String>, DeployError> {
    let rendered = render_chart(
        chart_dir,
        &Json::Object(Default::default()),
        &Release::default(),
    )?;
    let mut crds = String::from(MANIFEST_HEADER);
    let mut rest = String::from(MANIFEST_HEADER);
    for r in rendered {
        let target = if r.template.starts_with("crds/") {
            &mut crds
        } else {
            &mut rest
        };
        for d in r.documents {
            target.push_str(&format!("---\n# Source: esr/templates/{}\n{d}", r.template));
            if !target.ends_with('\n') {
                target.push('\n');
            }
        }
    }
    let mut files = BTreeMap::new();
    files.insert("crds.yaml".to_string(), crds);
    files.insert("esr.yaml".to_string(), rest);
    files.insert(
        MANIFESTS_KUSTOMIZATION.to_string(),
        format!(
            "{MANIFEST_HEADER}apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - crds.yaml\n  - esr.yaml\n"
        ),
    );
    Ok(files)
}

/// The `crds.create*` value that also gates a CRD file (`<group>_<plural>.yaml`), as in ESO's
/// chart; the CRDs not listed here are gated by `installCRDs` alone.
const CRD_CREATE_VALUES: &[(&str, &str)] = &[
    (
        "external-secrets.io_clusterexternalsecrets.yaml",
        "createClusterExternalSecret",
    ),
    (
        "external-secrets.io_clustersecretstores.yaml",
        "createClusterSecretStore",
    ),
    ("external-secrets.io_secretstores.yaml", "createSecretStore"),
    (
        "generators.external-secrets.io_clustergenerators.yaml",
        "createClusterGenerator",
    ),
    (
        "external-secrets.io_clusterpushsecrets.yaml",
        "createClusterPushSecret",
    ),
    ("external-secrets.io_pushsecrets.yaml", "createPushSecret"),
];

/// The chart's CRD templates (`templates/crds/<file>` → content) from the repository's `crds/`:
/// each CRD verbatim, rendered when `installCRDs` (and its `crds.create*` value, see
/// [`CRD_CREATE_VALUES`]) is true, with `crds.annotations` added to its metadata.
pub fn chart_crd_templates(crds_dir: &Path) -> Result<BTreeMap<String, String>, DeployError> {
    let rd = std::fs::read_dir(crds_dir).map_err(|source| DeployError::Io {
        path: crds_dir.to_path_buf(),
        source,
    })?;
    let mut files: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    files.sort();
    let mut out = BTreeMap::new();
    for path in files {
        let Some(name) = path.file_name().map(|n| n.to_string_lossy().into_owned()) else {
            continue;
        };
        if !name.ends_with(".yaml") {
            continue;
        }
        let text = read(&path)?;
        if text.contains("{{") {
            return Err(DeployError::Delimiters(path));
        }
        let body = text.trim_start_matches("---\n");
        if !body.lines().any(|l| l == "metadata:") {
            return Err(DeployError::NoMetadata(path));
        }
        let mut annotated = String::new();
        for line in body.lines() {
            annotated.push_str(line);
            annotated.push('\n');
            if line == "metadata:" {
                annotated.push_str(
                    "  {{- with .Values.crds.annotations }}\n  annotations:\n    {{- toYaml . | nindent 4 }}\n  {{- end }}\n",
                );
            }
        }
        let condition = match CRD_CREATE_VALUES.iter().find(|(f, _)| *f == name) {
            Some((_, value)) => format!("and .Values.installCRDs .Values.crds.{value}"),
            None => ".Values.installCRDs".to_string(),
        };
        out.insert(
            name,
            format!(
                "{{{{- if {condition} }}}}\n# Copied from crds/ by `make manifests`. Do not edit.\n{annotated}{{{{- end }}}}\n"
            ),
        );
    }
    Ok(out)
}

fn write(path: &Path, content: &str) -> Result<(), DeployError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|source| DeployError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    std::fs::write(path, content).map_err(|source| DeployError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// Writes the chart's CRD templates and `deploy/manifests/` under `root` (`make manifests`).
/// Returns the files written.
pub fn write_all(root: &Path) -> Result<Vec<PathBuf>, DeployError> {
    let chart = root.join("deploy/charts/esr");
    let mut written = Vec::new();
    for (rel, content) in chart_crd_templates(&root.join("crds"))? {
        let p = chart.join("templates/crds").join(rel);
        write(&p, &content)?;
        written.push(p);
    }
    for (name, content) in render_manifests(&chart)? {
        let p = root.join("deploy/manifests").join(name);
        write(&p, &content)?;
        written.push(p);
    }
    for stale in STALE_MANIFEST_FILES {
        let p = root.join("deploy/manifests").join(stale);
        if p.exists() {
            std::fs::remove_file(&p).map_err(|source| DeployError::Io {
                path: p.clone(),
                source,
            })?;
        }
    }
    Ok(written)
}
