//! `esr validate`: offline validation of manifests, the way a kube-apiserver with esr's CRDs plus
//! ESO's admission webhook would judge them.
//!
//! For every YAML/JSON document (multi-document files; directories are recursed for `.yaml`,
//! `.yml` and `.json`):
//! - an `external-secrets.io` or `generators.external-secrets.io` object is checked against the CRD
//!   of its kind: the version must be served, unknown fields are errors (like kubectl's strict field
//!   validation), then schema defaults are applied and the object is validated against the schema
//!   (types, enums, required fields, patterns, ...), `metadata.name` is checked, and finally ESO's
//!   semantic admission rules run (`esr_api::validation`). Schema validation includes the CRD's
//!   own `x-kubernetes-validations` (CEL) rules, evaluated as the API server does on create, so a
//!   manifest the API server would refuse is an ERROR with its message, e.g.
//!   `spec.dataTo[0]: Invalid value: storeRef must specify either name or labelSelector`;
//! - generator kinds esr does not implement are skipped with the reason;
//! - every other object is skipped.
//!
//! One line per document: `OK <file>:<index> <kind>/<name>`, `SKIPPED ...: <reason>` or
//! `ERROR ...: <reasons>`; `--output json` prints a JSON array of
//! `{file, index, kind, name, result, reasons}`. The exit code is 1 if any document has an error.
//! `<index>` is the 0-based position of the document in its file; empty documents are ignored.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::LazyLock;

use anyhow::Context as _;
use esr_api::validation;
use esr_schema::{FieldError, Schema};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Arguments of `esr validate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Files or directories to validate (directories are searched recursively for .yaml, .yml
    /// and .json files).
    #[arg(short = 'f', long = "filename", value_name = "FILE_OR_DIR", num_args = 1..)]
    pub filenames: Vec<PathBuf>,
    /// More files or directories, given without `-f`.
    #[arg(value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
    /// Validate against the CRDs in this file or directory (e.g. ESO's own) instead of the CRDs
    /// esr generates from its API types.
    #[arg(long, value_name = "FILE_OR_DIR")]
    pub crds: Option<PathBuf>,
}

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// One line per document.
    Text,
    /// A JSON array of results.
    Json,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    // Whether a namespaced SecretStore may use the controller's own identity is the running
    // controller's policy (`--allow-namespaced-store-controller-identity`, docs/security.md), not
    // a property of the manifest: ESO's webhook accepts such stores, and so does `esr validate`.
    // The controller reports the refusal on the store's status.
    esr_provider::identity::set_allow_namespaced_controller_identity(true);
    let mut inputs = args.filenames;
    inputs.extend(args.paths);
    if inputs.is_empty() {
        anyhow::bail!("no input: give one or more files or directories with -f");
    }
    let registry = match &args.crds {
        Some(path) => Registry::from_crd_values(read_crd_files(path)?)?,
        None => Registry::builtin()?,
    };
    let files = collect_files(&inputs)?;
    let mut results = Vec::new();
    for file in &files {
        let name = file.display().to_string();
        match super::input::read_input(file) {
            Ok(text) => results.extend(validate_text(&name, &text, &registry)),
            // An unreadable file (e.g. not UTF-8) is an error for that file, not for the run.
            Err(e) => results.push(DocResult {
                file: name,
                index: 0,
                kind: String::new(),
                name: String::new(),
                result: Outcome::Error,
                reasons: vec![format!("cannot read file: {e}")],
            }),
        }
    }
    match args.output {
        OutputFormat::Text => {
            for r in &results {
                println!("{}", r.line());
            }
        }
        OutputFormat::Json => println!("{}", serde_json::to_string_pretty(&results)?),
    }
    let failed = results.iter().any(|r| r.result == Outcome::Error);
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// The verdict for one document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Outcome {
    /// Valid.
    Ok,
    /// Not checked (not an external-secrets.io object, or a kind esr does not implement).
    Skipped,
    /// Invalid.
    Error,
}

/// The result for one document.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DocResult {
    /// The file, as given or found.
    pub file: String,
    /// 0-based position of the document in the file.
    pub index: usize,
    /// `kind` of the object (empty if missing).
    pub kind: String,
    /// `metadata.name` (or `generateName`) of the object (empty if missing).
    pub name: String,
    /// The verdict.
    pub result: Outcome,
    /// Why it was skipped or rejected.
    pub reasons: Vec<String>,
}

impl DocResult {
    /// The text output line.
    pub fn line(&self) -> String {
        let word = match self.result {
            Outcome::Ok => "OK",
            Outcome::Skipped => "SKIPPED",
            Outcome::Error => "ERROR",
        };
        let head = format!(
            "{word} {}:{} {}/{}",
            self.file, self.index, self.kind, self.name
        );
        if self.reasons.is_empty() {
            head
        } else {
            format!("{head}: {}", self.reasons.join("; "))
        }
    }
}

const ESO_GROUP: &str = "external-secrets.io";
const GENERATORS_GROUP: &str = "generators.external-secrets.io";

/// Every kind of ESO v2.9.0's `generators.external-secrets.io` group.
const ESO_GENERATOR_KINDS: &[&str] = &[
    "ACRAccessToken",
    "BeyondtrustWorkloadCredentialsDynamicSecret",
    "CloudsmithAccessToken",
    "ClusterGenerator",
    "ECRAuthorizationToken",
    "Fake",
    "GCRAccessToken",
    "GeneratorState",
    "GithubAccessToken",
    "GitlabDeployToken",
    "Grafana",
    "MFA",
    "Password",
    "QuayAccessToken",
    "SSHKey",
    "STSSessionToken",
    "UUID",
    "VaultDynamicSecret",
    "Webhook",
];

/// One version of a CRD.
struct CrdVersion {
    name: String,
    served: bool,
    schema: Option<Schema>,
    /// With the status subresource, the apiserver drops `status` on create.
    status_subresource: bool,
}

/// One CRD: its group, kind and versions.
struct Crd {
    group: String,
    kind: String,
    versions: Vec<CrdVersion>,
}

/// The CRDs to validate against, by (group, kind).
pub struct Registry {
    crds: BTreeMap<(String, String), Crd>,
}

impl Registry {
    /// esr's own CRDs (`esr_api::crds()`).
    pub fn builtin() -> anyhow::Result<Registry> {
        let crds = esr_api::crds().context("building esr's CRDs")?;
        let values = crds
            .iter()
            .map(serde_json::to_value)
            .collect::<Result<Vec<_>, _>>()?;
        Registry::from_crd_values(values)
    }

    /// CRDs given as JSON values.
    pub fn from_crd_values(values: Vec<Value>) -> anyhow::Result<Registry> {
        let mut crds = BTreeMap::new();
        for v in values {
            if v.get("kind").and_then(Value::as_str) != Some("CustomResourceDefinition") {
                continue;
            }
            let name = v
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let group = v
                .pointer("/spec/group")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let kind = v
                .pointer("/spec/names/kind")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let mut versions = Vec::new();
            for ver in v
                .pointer("/spec/versions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let vname = ver
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                let served = ver.get("served").and_then(Value::as_bool).unwrap_or(false);
                let schema = match ver.pointer("/schema/openAPIV3Schema") {
                    Some(s) => Some(
                        Schema::new(s).with_context(|| format!("CRD {name} version {vname}"))?,
                    ),
                    None => None,
                };
                let status_subresource = ver
                    .pointer("/subresources/status")
                    .is_some_and(|s| !s.is_null());
                versions.push(CrdVersion {
                    name: vname,
                    served,
                    schema,
                    status_subresource,
                });
            }
            crds.insert(
                (group.clone(), kind.clone()),
                Crd {
                    group,
                    kind,
                    versions,
                },
            );
        }
        Ok(Registry { crds })
    }
}

fn read_crd_files(path: &Path) -> anyhow::Result<Vec<Value>> {
    let mut out = Vec::new();
    for file in collect_files(&[path.to_path_buf()])? {
        let text = super::input::read_input(&file)
            .with_context(|| format!("reading {}", file.display()))?;
        for doc in parse_documents(&text) {
            match doc {
                Ok(Some(v)) => out.push(v),
                Ok(None) => {}
                Err(e) => anyhow::bail!("{}: {e}", file.display()),
            }
        }
    }
    Ok(out)
}

/// The files to read: plain files as given, directories recursed (sorted) for YAML and JSON.
fn collect_files(inputs: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for input in inputs {
        let meta = std::fs::metadata(input).with_context(|| format!("{}", input.display()))?;
        if meta.is_dir() {
            let mut found = Vec::new();
            for entry in walkdir::WalkDir::new(input).sort_by_file_name() {
                let entry = entry.with_context(|| format!("walking {}", input.display()))?;
                let p = entry.path();
                let wanted = p
                    .extension()
                    .and_then(|e| e.to_str())
                    .is_some_and(|e| matches!(e, "yaml" | "yml" | "json"));
                if entry.file_type().is_file() && wanted {
                    found.push(p.to_path_buf());
                }
            }
            out.extend(found);
        } else {
            out.push(input.clone());
        }
    }
    Ok(out)
}

/// Splits a YAML (or JSON) text into documents. `Ok(None)` is an empty document. A syntax error
/// ends the stream.
fn parse_documents(text: &str) -> Vec<Result<Option<Value>, String>> {
    let mut out = Vec::new();
    for de in yaml_serde::Deserializer::from_str(text) {
        match Value::deserialize(de) {
            Ok(Value::Null) => out.push(Ok(None)),
            Ok(v) => out.push(Ok(Some(v))),
            Err(e) => {
                out.push(Err(e.to_string()));
                break;
            }
        }
    }
    out
}

/// Validates every document of one file.
pub fn validate_text(file: &str, text: &str, registry: &Registry) -> Vec<DocResult> {
    parse_documents(text)
        .into_iter()
        .enumerate()
        .filter_map(|(index, doc)| match doc {
            Ok(None) => None,
            Ok(Some(v)) => Some(validate_document(file, index, &v, registry)),
            Err(e) => Some(DocResult {
                file: file.to_string(),
                index,
                kind: String::new(),
                name: String::new(),
                result: Outcome::Error,
                reasons: vec![format!("cannot parse document: {e}")],
            }),
        })
        .collect()
}

/// Validates one document.
pub fn validate_document(file: &str, index: usize, doc: &Value, registry: &Registry) -> DocResult {
    let kind = doc
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let name = doc
        .pointer("/metadata/name")
        .or_else(|| doc.pointer("/metadata/generateName"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let mut result = DocResult {
        file: file.to_string(),
        index,
        kind: kind.clone(),
        name,
        result: Outcome::Ok,
        reasons: Vec::new(),
    };
    let (outcome, reasons) = judge(doc, &kind, registry);
    result.result = outcome;
    result.reasons = reasons;
    result
}

fn judge(doc: &Value, kind: &str, registry: &Registry) -> (Outcome, Vec<String>) {
    let Some(obj) = doc.as_object() else {
        return (
            Outcome::Error,
            vec!["document is not an object".to_string()],
        );
    };
    let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let (group, version) = match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    };
    if group != ESO_GROUP && group != GENERATORS_GROUP {
        return (
            Outcome::Skipped,
            vec!["not an external-secrets.io object".to_string()],
        );
    }
    if kind.is_empty() {
        return (Outcome::Error, vec!["Object 'Kind' is missing".to_string()]);
    }
    let Some(crd) = registry.crds.get(&(group.to_string(), kind.to_string())) else {
        if group == GENERATORS_GROUP && ESO_GENERATOR_KINDS.contains(&kind) {
            return (
                Outcome::Skipped,
                vec![format!("generator kind {kind} is not implemented by esr")],
            );
        }
        return (
            Outcome::Error,
            vec![format!(
                "no matches for kind {kind:?} in version {api_version:?}"
            )],
        );
    };
    let served: Vec<&CrdVersion> = crd.versions.iter().filter(|v| v.served).collect();
    let Some(ver) = served.iter().find(|v| v.name == version) else {
        let use_versions: Vec<&str> = served.iter().map(|v| v.name.as_str()).collect();
        return (
            Outcome::Error,
            vec![format!(
                "version {version:?} of {} {} is not served; use {}",
                crd.group,
                crd.kind,
                use_versions.join(", ")
            )],
        );
    };

    let mut reasons = Vec::new();
    let mut obj_value = doc.clone();
    if ver.status_subresource
        && let Some(m) = obj_value.as_object_mut()
    {
        // Like the apiserver's create: status is ignored when the status subresource is enabled.
        m.remove("status");
    }
    if let Some(schema) = &ver.schema {
        let unknown = schema.prune(&mut obj_value);
        if !unknown.is_empty() {
            reasons.push(esr_schema::strict_decoding_message(&unknown));
        }
        schema.apply_defaults(&mut obj_value);
        reasons.extend(
            schema
                .validate(&obj_value)
                .iter()
                .map(FieldError::to_string),
        );
    }
    reasons.extend(validate_object_meta(&obj_value));
    if reasons.is_empty() {
        reasons.extend(semantic_rules(group, kind, &obj_value));
    }
    if reasons.is_empty() {
        reasons.extend(provider_rules(group, kind, &obj_value));
    }
    if reasons.is_empty() {
        reasons.extend(generic_target_rules(group, kind, &obj_value));
    }
    if reasons.is_empty() {
        (Outcome::Ok, reasons)
    } else {
        (Outcome::Error, reasons)
    }
}

/// Go's JSON name of a value's type, as in `json: cannot unmarshal number into ...`.
fn go_json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Decoding errors the apiserver reports for a malformed `metadata` (it decodes ObjectMeta into
/// Go types: labels and annotations are `map[string]string`, names are strings).
fn object_meta_decode_errors(obj: &Value) -> Vec<String> {
    let Some(meta) = obj.get("metadata") else {
        return Vec::new();
    };
    let Some(m) = meta.as_object() else {
        return vec![format!(
            "json: cannot unmarshal {} into Go struct field .metadata of type v1.ObjectMeta",
            go_json_type(meta)
        )];
    };
    let mut errs = Vec::new();
    for field in ["labels", "annotations"] {
        match m.get(field) {
            None | Some(Value::Null) => {}
            Some(Value::Object(entries)) => {
                if let Some(bad) = entries.values().find(|v| !v.is_string()) {
                    errs.push(format!(
                        "json: cannot unmarshal {} into Go struct field ObjectMeta.metadata.{field} of type string",
                        go_json_type(bad)
                    ));
                }
            }
            Some(other) => errs.push(format!(
                "json: cannot unmarshal {} into Go struct field ObjectMeta.metadata.{field} of type map[string]string",
                go_json_type(other)
            )),
        }
    }
    for field in ["name", "generateName", "namespace"] {
        if let Some(v) = m.get(field)
            && !v.is_string()
            && !v.is_null()
        {
            errs.push(format!(
                "json: cannot unmarshal {} into Go struct field ObjectMeta.metadata.{field} of type string",
                go_json_type(v)
            ));
        }
    }
    errs
}

/// The apiserver's checks on `metadata.name` of a custom resource (a DNS-1123 subdomain).
fn validate_object_meta(obj: &Value) -> Vec<String> {
    let decode = object_meta_decode_errors(obj);
    if !decode.is_empty() {
        return decode;
    }
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let generate_name = obj
        .pointer("/metadata/generateName")
        .and_then(Value::as_str)
        .unwrap_or("");
    if name.is_empty() {
        if generate_name.is_empty() {
            return vec![
                "metadata.name: Required value: name or generateName is required".to_string(),
            ];
        }
        return Vec::new();
    }
    let quoted = esr_schema::gofmt::quote(name);
    esr_schema::names::dns1123_subdomain(name)
        .into_iter()
        .map(|msg| format!("metadata.name: Invalid value: {quoted}: {msg}"))
        .collect()
}

fn go_regex_check(pattern: &str) -> Result<(), String> {
    esr_schema::compile_go_regex(pattern).map(|_| ())
}

/// The provider-specific part of ESO's store webhook (`provider.ValidateStore`), for the providers
/// esr implements. Stores of other providers pass here: esr cannot judge them (the CRD schema
/// still applies).
fn provider_rules(group: &str, kind: &str, obj: &Value) -> Vec<String> {
    static PROVIDERS: LazyLock<esr_provider::ProviderRegistry> =
        LazyLock::new(crate::providers::registry);
    if group != ESO_GROUP || !matches!(kind, "SecretStore" | "ClusterSecretStore") {
        return Vec::new();
    }
    let store = match esr_provider::StoreInfo::from_object(obj) {
        Ok(s) => s,
        Err(e) => return vec![e.to_string()],
    };
    let Ok(provider) = PROVIDERS.for_store(&store) else {
        return Vec::new();
    };
    match provider.validate_store(&store) {
        Ok(_warnings) => Vec::new(),
        // Valid for ESO, only not implemented by esr (e.g. AWS ParameterStore).
        Err(e) if e.kind() == esr_provider::ErrorKind::Unsupported => Vec::new(),
        // Without metadata.namespace the namespace comes from `kubectl -n` or kustomize, so a
        // reference's namespace cannot be compared with the store's here.
        Err(e)
            if store.namespace.is_none()
                && e.to_string()
                    .contains(esr_provider::refs::ERR_NAMESPACE_NOT_ALLOWED) =>
        {
            Vec::new()
        }
        Err(e) => vec![e.to_string()],
    }
}

/// Generic targets (`target.manifest` of an ExternalSecret or of a ClusterExternalSecret's
/// `externalSecretSpec`): the condition the controller reports (ESO's, without
/// `--unsafe-allow-generic-targets`), and esr writes no generic target even with the flag.
fn generic_target_rules(group: &str, kind: &str, obj: &Value) -> Vec<String> {
    use esr_controller::externalsecret::plan::{ManifestView, detailed, generic_target_error, msg};
    if group != ESO_GROUP {
        return Vec::new();
    }
    let (path, target) = match kind {
        "ExternalSecret" => ("spec.target.manifest", obj.pointer("/spec/target")),
        "ClusterExternalSecret" => (
            "spec.externalSecretSpec.target.manifest",
            obj.pointer("/spec/externalSecretSpec/target"),
        ),
        _ => return Vec::new(),
    };
    let Some(m) = target
        .and_then(|t| t.get("manifest"))
        .filter(|m| !m.is_null())
    else {
        return Vec::new();
    };
    let field = |k: &str| m.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let view = ManifestView {
        api_version: field("apiVersion"),
        kind: field("kind"),
    };
    match generic_target_error(Some(&view), false) {
        Some(e) => vec![format!(
            "{path}: {} (esr does not write generic targets even with that flag)",
            detailed(msg::ERR_GENERIC_TARGET, &e.to_string())
        )],
        None => Vec::new(),
    }
}

/// ESO's admission-webhook rules, on the typed object.
fn semantic_rules(group: &str, kind: &str, obj: &Value) -> Vec<String> {
    if group != ESO_GROUP {
        return Vec::new();
    }
    let decode_err = |e: serde_json::Error| vec![format!("cannot decode {kind}: {e}")];
    match kind {
        "ExternalSecret" => {
            match serde_json::from_value::<esr_api::v1::ExternalSecret>(obj.clone()) {
                Ok(es) => validation::validate_external_secret(&es),
                Err(e) => decode_err(e),
            }
        }
        "SecretStore" => match serde_json::from_value::<esr_api::v1::SecretStore>(obj.clone()) {
            Ok(s) => validation::validate_secret_store(&s, &go_regex_check),
            Err(e) => decode_err(e),
        },
        "ClusterSecretStore" => {
            match serde_json::from_value::<esr_api::v1::ClusterSecretStore>(obj.clone()) {
                Ok(s) => validation::validate_cluster_secret_store(&s, &go_regex_check),
                Err(e) => decode_err(e),
            }
        }
        _ => Vec::new(),
    }
}
