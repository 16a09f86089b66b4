//! Deploy tooling for esr: renders the Helm chart in `deploy/charts/esr` with esr-template (Go
//! `text/template` + sprig) plus small shims for Helm's own functions and objects (`include`,
//! `tpl`, `required`, `.Values`, `.Release`, `.Chart`, `.Capabilities`), and writes
//! `deploy/manifests/` from it. Helm itself is not used: the chart's templates are kept plain so
//! that this renderer gives the output Helm would give for them.
//!
//! Entry points: [`render_chart`] (one rendered document list), [`render_manifests`] (the files of
//! `deploy/manifests/` as path → content), [`sync_chart_crds`] (the chart's CRD templates from
//! the repository's `crds/`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use esr_template::{ExecOptions, FuncDef, FuncError, FuncMap, GoType, Template, Value};
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
    /// A YAML file does not parse.
    #[error("{path}: {source}")]
    Yaml {
        /// The file.
        path: PathBuf,
        /// The error.
        source: serde_yaml_ng::Error,
    },
    /// A template does not parse or execute.
    #[error("template {name}: {message}")]
    Template {
        /// Template file name.
        name: String,
        /// The engine's message.
        message: String,
    },
    /// A rendered document is not valid YAML.
    #[error("rendered {name} is not valid YAML: {source}")]
    Rendered {
        /// Template file name.
        name: String,
        /// The error.
        source: serde_yaml_ng::Error,
    },
    /// A CRD contains template delimiters and cannot be embedded in the chart verbatim.
    #[error("{0} contains '{{{{'; it cannot be embedded in a chart template verbatim")]
    Delimiters(PathBuf),
}

fn read(path: &Path) -> Result<String, DeployError> {
    std::fs::read_to_string(path).map_err(|source| DeployError::Io {
        path: path.to_path_buf(),
        source,
    })
}

fn read_yaml(path: &Path) -> Result<Json, DeployError> {
    serde_yaml_ng::from_str(&read(path)?).map_err(|source| DeployError::Yaml {
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

/// Deep merge of Helm values: maps merge key by key, anything else replaces.
pub fn merge_values(base: &mut Json, over: &Json) {
    match (base, over) {
        (Json::Object(b), Json::Object(o)) => {
            for (k, v) in o {
                match b.get_mut(k) {
                    Some(slot) if slot.is_object() && v.is_object() => merge_values(slot, v),
                    _ => {
                        b.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (b, o) => *b = o.clone(),
    }
}

/// One rendered template file: its path relative to `templates/` and its YAML documents.
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    /// e.g. `deployment.yaml`, `crds/external-secrets.io_externalsecrets.yaml`.
    pub template: String,
    /// The non-empty documents, as rendered text (each without a leading `---`).
    pub documents: Vec<String>,
}

fn template_error(name: &str, message: impl std::fmt::Display) -> DeployError {
    DeployError::Template {
        name: name.to_string(),
        message: message.to_string(),
    }
}

/// The function map: esr-template's (sprig) plus Helm's `include`, `tpl` and `required`.
/// `helpers` is the text of every `templates/_*.tpl`, made available to `include` and `tpl`.
fn helm_funcs(helpers: Arc<String>) -> FuncMap {
    let cell: Arc<OnceLock<FuncMap>> = Arc::new(OnceLock::new());
    let mut funcs = FuncMap::eso();

    let (c, h) = (cell.clone(), helpers.clone());
    funcs.insert(FuncDef::new(
        "include",
        vec![GoType::String, GoType::Interface],
        move |args| {
            let name = args.first().and_then(Value::as_str).unwrap_or_default();
            let text = format!("{{{{template {name:?} .}}}}{h}");
            run_nested(&c, "include", &text, args.get(1))
        },
    ));
    let (c, h) = (cell.clone(), helpers);
    funcs.insert(FuncDef::new(
        "tpl",
        vec![GoType::String, GoType::Interface],
        move |args| {
            let body = args.first().and_then(Value::as_str).unwrap_or_default();
            let text = format!("{body}{h}");
            run_nested(&c, "tpl", &text, args.get(1))
        },
    ));
    funcs.insert(FuncDef::new(
        "required",
        vec![GoType::String, GoType::Interface],
        |args| {
            let msg = args.first().and_then(Value::as_str).unwrap_or_default();
            match args.get(1) {
                None | Some(Value::Nil) => Err(FuncError::public(msg)),
                Some(v) if v.as_str() == Some("") => Err(FuncError::public(msg)),
                Some(v) => Ok(v.clone()),
            }
        },
    ));
    let _ = cell.set(funcs.clone());
    funcs
}

fn helm_opts() -> ExecOptions {
    // Helm executes with missingkey=zero and then replaces "<no value>" with "".
    ExecOptions {
        missingkey_error: false,
        ..ExecOptions::default()
    }
}

fn run_nested(
    cell: &OnceLock<FuncMap>,
    what: &str,
    text: &str,
    data: Option<&Value>,
) -> Result<Value, FuncError> {
    let funcs = cell
        .get()
        .ok_or_else(|| FuncError::public(format!("{what}: function map not ready")))?;
    let t = Template::parse(what, text, funcs).map_err(|e| FuncError::new(e.to_string()))?;
    let out = t
        .execute(funcs, data.unwrap_or(&Value::Nil), &helm_opts())
        .map_err(|e| FuncError::new(e.to_string()))?;
    Ok(Value::String(
        String::from_utf8_lossy(&out).replace("<no value>", ""),
    ))
}

/// Splits rendered text into its non-empty YAML documents.
fn documents(text: &str) -> Vec<String> {
    let mut docs = Vec::new();
    let mut cur = String::new();
    for line in text.lines() {
        if line.trim_end() == "---" {
            docs.push(std::mem::take(&mut cur));
        } else {
            cur.push_str(line);
            cur.push('\n');
        }
    }
    docs.push(cur);
    docs.into_iter()
        .filter(|d| {
            d.lines()
                .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        })
        .map(|d| d.trim_start_matches('\n').to_string())
        .collect()
}

fn template_files(
    dir: &Path,
    rel: &str,
    out: &mut Vec<(String, PathBuf)>,
) -> Result<(), DeployError> {
    let rd = std::fs::read_dir(dir).map_err(|source| DeployError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut entries: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let rel_name = if rel.is_empty() {
            name.clone()
        } else {
            format!("{rel}/{name}")
        };
        if p.is_dir() {
            template_files(&p, &rel_name, out)?;
        } else {
            out.push((rel_name, p));
        }
    }
    Ok(())
}

/// Renders the chart in `chart_dir` with its `values.yaml` merged with `overrides`.
/// Files under `templates/` whose name starts with `_` only provide `define`s; the others are
/// rendered in path order. Every rendered document must be valid YAML.
pub fn render_chart(
    chart_dir: &Path,
    overrides: &Json,
    release: &Release,
) -> Result<Vec<Rendered>, DeployError> {
    let chart = read_yaml(&chart_dir.join("Chart.yaml"))?;
    let mut values = read_yaml(&chart_dir.join("values.yaml"))?;
    if values.is_null() {
        values = Json::Object(Default::default());
    }
    merge_values(&mut values, overrides);

    let mut files = Vec::new();
    template_files(&chart_dir.join("templates"), "", &mut files)?;
    let mut helpers = String::new();
    let mut templates = Vec::new();
    for (rel, path) in files {
        let base = rel.rsplit('/').next().unwrap_or(&rel);
        if base.starts_with('_') {
            helpers.push_str(&read(&path)?);
        } else if base.ends_with(".yaml") || base.ends_with(".yml") || base.ends_with(".tpl") {
            templates.push((rel, path));
        }
    }
    let funcs = helm_funcs(Arc::new(helpers.clone()));

    let s = |k: &str| chart.get(k).cloned().unwrap_or(Json::Null);
    let root = serde_json::json!({
        "Values": values,
        "Release": {
            "Name": release.name, "Namespace": release.namespace, "Service": "Helm",
            "IsInstall": true, "IsUpgrade": false, "Revision": 1,
        },
        "Chart": {
            "Name": s("name"), "Version": s("version"), "AppVersion": s("appVersion"),
            "Description": s("description"), "Type": s("type"), "KubeVersion": s("kubeVersion"),
        },
        "Capabilities": {
            "KubeVersion": {"Version": "v1.34.0", "Major": "1", "Minor": "34"},
        },
    });
    let data = esr_template::value::from_json(&root);

    // The helpers alone must render to nothing, since they are appended to every template.
    let t =
        Template::parse("_helpers", &helpers, &funcs).map_err(|e| template_error("_helpers", e))?;
    let out = t
        .execute(&funcs, &data, &helm_opts())
        .map_err(|e| template_error("_helpers", e))?;
    if !String::from_utf8_lossy(&out).trim().is_empty() {
        return Err(template_error(
            "_helpers",
            "renders text outside its defines; trim it with {{- ... -}}",
        ));
    }

    let mut rendered = Vec::new();
    for (rel, path) in templates {
        let text = format!("{}{}", read(&path)?, helpers);
        let t = Template::parse(&rel, &text, &funcs).map_err(|e| template_error(&rel, e))?;
        let out = t
            .execute(&funcs, &data, &helm_opts())
            .map_err(|e| template_error(&rel, e))?;
        let out = String::from_utf8_lossy(&out).replace("<no value>", "");
        let docs = documents(&out);
        for d in &docs {
            serde_yaml_ng::from_str::<serde_yaml_ng::Value>(d).map_err(|source| {
                DeployError::Rendered {
                    name: rel.clone(),
                    source,
                }
            })?;
        }
        if !docs.is_empty() {
            rendered.push(Rendered {
                template: rel,
                documents: docs,
            });
        }
    }
    Ok(rendered)
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

/// The chart's CRD templates (`templates/crds/<file>` → content) from the repository's `crds/`,
/// each wrapped in `{{- if .Values.installCRDs }}`.
pub fn chart_crd_templates(crds_dir: &Path) -> Result<BTreeMap<String, String>, DeployError> {
    let mut files = Vec::new();
    template_files(crds_dir, "", &mut files)?;
    let mut out = BTreeMap::new();
    for (rel, path) in files {
        if !rel.ends_with(".yaml") {
            continue;
        }
        let text = read(&path)?;
        if text.contains("{{") {
            return Err(DeployError::Delimiters(path));
        }
        let body = text.trim_start_matches("---\n");
        out.insert(
            rel,
            format!(
                "{{{{- if .Values.installCRDs }}}}\n# Copied from crds/ by `make manifests`. Do not edit.\n{}{}{{{{- end }}}}\n",
                body,
                if body.ends_with('\n') { "" } else { "\n" }
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
