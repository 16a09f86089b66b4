//! `esr template`: renders an ExternalSecret's `spec.target.template` offline, like
//! ESO's `esoctl template`, and prints the resulting Secret as YAML.
//!
//! ```text
//! esr template -f externalsecret.yaml --data data.yaml [--base64] [--template-from cm.yaml ...]
//! ```
//!
//! * `--data`: a YAML or JSON map of key → value (the provider data). Values are
//!   plain text, or base64 with `--base64`. A `kind: Secret` manifest also works
//!   (its `data` is base64, its `stringData` plain).
//! * `--template-from`: ConfigMap or Secret manifests (multi-document YAML allowed)
//!   referenced by `templateFrom`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use base64::Engine as _;
use esr_api::v1::ExternalSecretTemplate;
use esr_template::{RenderInput, RenderedSecret, TemplateSources, render_secret};
use yaml_serde::Value as Yaml;

/// Arguments of `esr template`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The ExternalSecret manifest (YAML or JSON).
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    pub file: PathBuf,
    /// The provider data: a YAML/JSON map of key to value, or a Secret manifest.
    #[arg(long = "data", value_name = "FILE")]
    pub data: Option<PathBuf>,
    /// The values of the data map are base64-encoded.
    #[arg(long = "base64")]
    pub base64: bool,
    /// ConfigMap or Secret manifests referenced by `templateFrom` (repeatable).
    #[arg(long = "template-from", value_name = "FILE")]
    pub template_from: Vec<PathBuf>,
}

fn read(path: &Path) -> anyhow::Result<String> {
    super::input::read_input(path).with_context(|| format!("reading {}", path.display()))
}

fn b64(s: &str, what: &str) -> anyhow::Result<Vec<u8>> {
    base64::engine::general_purpose::STANDARD
        .decode(s.trim())
        .with_context(|| format!("{what} is not valid base64"))
}

fn scalar(v: &Yaml) -> Option<String> {
    match v {
        Yaml::String(s) => Some(s.clone()),
        Yaml::Number(n) => Some(n.to_string()),
        Yaml::Bool(b) => Some(b.to_string()),
        Yaml::Null => Some(String::new()),
        _ => None,
    }
}

fn string_map(v: Option<&Yaml>, what: &str) -> anyhow::Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    let Some(v) = v else { return Ok(out) };
    let Yaml::Mapping(m) = v else {
        if matches!(v, Yaml::Null) {
            return Ok(out);
        }
        bail!("{what} must be a map");
    };
    for (k, v) in m {
        let (Some(k), Some(v)) = (scalar(k), scalar(v)) else {
            bail!("{what} must map strings to strings")
        };
        out.insert(k, v);
    }
    Ok(out)
}

fn is_secret_manifest(doc: &Yaml) -> bool {
    doc.get("kind").and_then(Yaml::as_str) == Some("Secret") && doc.get("apiVersion").is_some()
}

/// Secret manifest → data (base64 `data` plus plain `stringData`).
fn secret_data(doc: &Yaml, what: &str) -> anyhow::Result<BTreeMap<String, Vec<u8>>> {
    let mut out = BTreeMap::new();
    for (k, v) in string_map(doc.get("data"), what)? {
        out.insert(k.clone(), b64(&v, &format!("{what}: data.{k}"))?);
    }
    for (k, v) in string_map(doc.get("stringData"), what)? {
        out.insert(k, v.into_bytes());
    }
    Ok(out)
}

fn load_data(path: &Path, base64: bool) -> anyhow::Result<BTreeMap<String, Vec<u8>>> {
    let doc: Yaml = yaml_serde::from_str(&read(path)?)
        .with_context(|| format!("parsing {}", path.display()))?;
    if is_secret_manifest(&doc) {
        return secret_data(&doc, &path.display().to_string());
    }
    let m = string_map(Some(&doc), &format!("data file {}", path.display()))?;
    m.into_iter()
        .map(|(k, v)| {
            let b = if base64 {
                b64(&v, &format!("value of {k}"))?
            } else {
                v.into_bytes()
            };
            Ok((k, b))
        })
        .collect()
}

fn load_sources(paths: &[PathBuf]) -> anyhow::Result<TemplateSources> {
    let mut sources = TemplateSources::default();
    for path in paths {
        let text = read(path)?;
        for de in yaml_serde::Deserializer::from_str(&text) {
            let doc = <Yaml as serde::Deserialize>::deserialize(de)
                .with_context(|| format!("parsing {}", path.display()))?;
            if matches!(doc, Yaml::Null) {
                continue;
            }
            let name = doc
                .get("metadata")
                .and_then(|m| m.get("name"))
                .and_then(Yaml::as_str)
                .with_context(|| format!("{}: a manifest has no metadata.name", path.display()))?
                .to_string();
            match doc.get("kind").and_then(Yaml::as_str) {
                Some("ConfigMap") => {
                    let data = string_map(doc.get("data"), &format!("ConfigMap {name}"))?;
                    sources.config_maps.insert(name, data);
                }
                Some("Secret") => {
                    let data = secret_data(&doc, &format!("Secret {name}"))?;
                    sources.secrets.insert(name, data);
                }
                other => bail!(
                    "{}: expected a ConfigMap or Secret, found kind {:?}",
                    path.display(),
                    other
                ),
            }
        }
    }
    Ok(sources)
}

/// The Secret manifest printed for a rendered result.
fn secret_yaml(
    name: &str,
    namespace: Option<&str>,
    out: &RenderedSecret,
) -> anyhow::Result<String> {
    let mut meta = serde_json::Map::new();
    meta.insert("name".into(), name.into());
    if let Some(ns) = namespace {
        meta.insert("namespace".into(), ns.into());
    }
    if !out.labels.is_empty() {
        meta.insert("labels".into(), serde_json::to_value(&out.labels)?);
    }
    if !out.annotations.is_empty() {
        meta.insert(
            "annotations".into(),
            serde_json::to_value(&out.annotations)?,
        );
    }
    let data: serde_json::Map<String, serde_json::Value> = out
        .data
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                base64::engine::general_purpose::STANDARD.encode(v).into(),
            )
        })
        .collect();
    let mut secret = serde_json::Map::new();
    secret.insert("apiVersion".into(), "v1".into());
    secret.insert("kind".into(), "Secret".into());
    secret.insert("metadata".into(), meta.into());
    secret.insert(
        "type".into(),
        out.type_
            .clone()
            .unwrap_or_else(|| "Opaque".to_string())
            .into(),
    );
    secret.insert("data".into(), data.into());
    Ok(yaml_serde::to_string(&serde_json::Value::Object(secret))?)
}

/// Renders; returns the Secret YAML.
pub fn render(args: &Args) -> anyhow::Result<String> {
    // the file may hold several documents (e.g. ExternalSecret and SecretStore):
    // use the first ExternalSecret
    let text = read(&args.file)?;
    let mut es = None;
    for de in yaml_serde::Deserializer::from_str(&text) {
        let doc = <Yaml as serde::Deserialize>::deserialize(de)
            .with_context(|| format!("parsing {}", args.file.display()))?;
        if doc.get("kind").and_then(Yaml::as_str) == Some("ExternalSecret") {
            es = Some(doc);
            break;
        }
    }
    let Some(es) = es else {
        bail!("{}: no ExternalSecret found", args.file.display());
    };
    let meta = es.get("metadata");
    let es_name = meta
        .and_then(|m| m.get("name"))
        .and_then(Yaml::as_str)
        .unwrap_or("")
        .to_string();
    let namespace = meta.and_then(|m| m.get("namespace")).and_then(Yaml::as_str);
    let es_labels = string_map(meta.and_then(|m| m.get("labels")), "metadata.labels")?;
    let es_annotations = string_map(
        meta.and_then(|m| m.get("annotations")),
        "metadata.annotations",
    )?;
    let target = es.get("spec").and_then(|s| s.get("target"));
    let name = target
        .and_then(|t| t.get("name"))
        .and_then(Yaml::as_str)
        .unwrap_or(&es_name)
        .to_string();
    let template: Option<ExternalSecretTemplate> = match target.and_then(|t| t.get("template")) {
        Some(t) if !matches!(t, Yaml::Null) => Some(
            yaml_serde::from_value(t.clone())
                .context("spec.target.template is not a valid template")?,
        ),
        _ => None,
    };
    let data = match &args.data {
        Some(p) => load_data(p, args.base64)?,
        None => BTreeMap::new(),
    };
    let sources = load_sources(&args.template_from)?;
    let base = RenderedSecret::default();
    let out = render_secret(&RenderInput {
        template: template.as_ref(),
        data: &data,
        sources: &sources,
        base: &base,
        es_labels: &es_labels,
        es_annotations: &es_annotations,
    })?;
    secret_yaml(&name, namespace, &out)
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let yaml = render(&args)?;
    print!("{yaml}");
    Ok(ExitCode::SUCCESS)
}
