//! `esr migrate`: converts manifests of other tools to external-secrets.io objects.
//!
//! `esr migrate kes -f <files/dirs>` converts kubernetes-external-secrets (`kubernetes-client.io/v1`)
//! ExternalSecrets with `esr_migrate::convert`, then checks every output manifest in-process with
//! `esr validate`'s own checks (`cmd::validate::validate_document` over esr's CRDs); an output that
//! fails makes its object "not converted". Without `--out`, the manifests (stores first) go to
//! stdout and the report to stderr; with `--out DIR`, each input file `F` is written to
//! `DIR/F` (converted and pass-through documents, in input order), the stores to
//! `DIR/stores.yaml` and the report to `DIR/report.txt`. Exit code 1 only on input errors
//! (a missing or unreadable file, invalid YAML, an invalid option).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use esr_migrate::{Conversion, Document, Options, OutputKind, StoreKind, Takeover};

use crate::cmd::validate::{Outcome, Registry, validate_document};

/// Arguments of `esr migrate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: MigrateCommand,
}

#[derive(Debug, clap::Subcommand)]
enum MigrateCommand {
    /// Convert kubernetes-external-secrets (kubernetes-client.io/v1) ExternalSecrets to
    /// external-secrets.io/v1 ExternalSecrets and the stores they need.
    Kes(KesArgs),
}

/// Store kinds on the command line.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum StoreKindArg {
    #[value(name = "ClusterSecretStore")]
    ClusterSecretStore,
    #[value(name = "SecretStore")]
    SecretStore,
}

/// Takeover modes on the command line.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum TakeoverArg {
    /// creationPolicy Owner: adopt or create the Secret.
    Owner,
    /// creationPolicy Merge: merge into the existing Secret, never create it.
    Merge,
}

/// Arguments of `esr migrate kes`.
#[derive(Debug, clap::Args)]
struct KesArgs {
    /// KES manifests: files or directories (searched recursively for .yaml, .yml and .json).
    #[arg(short = 'f', long = "filename", value_name = "FILE_OR_DIR", num_args = 1.., required = true)]
    filenames: Vec<PathBuf>,
    /// Write the output files, stores.yaml and report.txt into this directory instead of stdout.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Kind of the generated stores.
    #[arg(long, value_enum, default_value = "ClusterSecretStore")]
    store_kind: StoreKindArg,
    /// ServiceAccount the stores authenticate as (never the `external-secrets` default).
    #[arg(long, value_name = "NAME", default_value = esr_migrate::DEFAULT_SERVICE_ACCOUNT)]
    service_account: String,
    /// Namespace of that ServiceAccount (ClusterSecretStores; a SecretStore uses its own namespace).
    #[arg(long, value_name = "NS", default_value = esr_migrate::DEFAULT_SERVICE_ACCOUNT_NAMESPACE)]
    service_account_namespace: String,
    /// How the ExternalSecrets take over the Secrets KES wrote.
    #[arg(long, value_enum, default_value = "owner")]
    takeover: TakeoverArg,
    /// Vault address (KES's VAULT_ADDR); needed for backendType vault.
    #[arg(long, value_name = "URL")]
    vault_addr: Option<String>,
    /// Vault role for objects without vaultRole (KES's DEFAULT_VAULT_ROLE).
    #[arg(long, value_name = "ROLE")]
    vault_default_role: Option<String>,
    /// Vault Kubernetes auth mount for objects without vaultMountPoint (KES's
    /// DEFAULT_VAULT_MOUNT_POINT; default `kubernetes`).
    #[arg(long, value_name = "MOUNT")]
    vault_default_mount_point: Option<String>,
    /// AWS region for objects without spec.region (KES's AWS_REGION).
    #[arg(long, value_name = "REGION")]
    aws_region: Option<String>,
    /// spec.refreshInterval of the ExternalSecrets (a Go duration; ESO's default 1h when unset,
    /// KES polled every 10s by default).
    #[arg(long, value_name = "DURATION")]
    refresh_interval: Option<String>,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        MigrateCommand::Kes(a) => run_kes(a),
    }
}

/// One input file and its documents.
struct Input {
    /// The path as found.
    path: PathBuf,
    /// The output path relative to `--out`.
    rel: PathBuf,
}

fn run_kes(args: KesArgs) -> anyhow::Result<ExitCode> {
    let opts = Options {
        store_kind: match args.store_kind {
            StoreKindArg::ClusterSecretStore => StoreKind::ClusterSecretStore,
            StoreKindArg::SecretStore => StoreKind::SecretStore,
        },
        service_account: args.service_account,
        service_account_namespace: args.service_account_namespace,
        takeover: match args.takeover {
            TakeoverArg::Owner => Takeover::Owner,
            TakeoverArg::Merge => Takeover::Merge,
        },
        vault_addr: args.vault_addr,
        vault_default_role: args.vault_default_role,
        vault_default_mount_point: args.vault_default_mount_point,
        aws_region: args.aws_region,
        refresh_interval: args.refresh_interval,
    };
    opts.check()?;

    let mut input_errors = Vec::new();
    let inputs = collect_inputs(&args.filenames, &mut input_errors);
    let mut docs = Vec::new();
    for input in &inputs {
        let name = input.path.display().to_string();
        let text = match super::input::read_input(&input.path) {
            Ok(t) => t,
            Err(e) => {
                input_errors.push(format!("{name}: cannot read: {e}"));
                continue;
            }
        };
        match esr_migrate::parse_yaml_stream(&text) {
            Ok(values) => {
                docs.extend(
                    values
                        .into_iter()
                        .enumerate()
                        .map(|(index, value)| Document {
                            source: name.clone(),
                            index,
                            value,
                        }),
                )
            }
            Err(e) => input_errors.push(format!("{name}: {e}")),
        }
    }

    let mut conv = esr_migrate::convert(&docs, &opts);
    check_outputs(&mut conv)?;

    let report = conv.report_text();
    match &args.out {
        Some(dir) => {
            write_out(dir, &inputs, &conv)?;
            std::fs::write(dir.join("report.txt"), &report)
                .with_context(|| format!("writing {}", dir.join("report.txt").display()))?;
            if let Some(summary) = report.lines().last() {
                eprintln!("{summary} (report: {})", dir.join("report.txt").display());
            }
        }
        None => {
            print!("{}", esr_migrate::to_yaml_stream(conv.all_manifests())?);
            eprint!("{report}");
        }
    }
    for e in &input_errors {
        eprintln!("error: {e}");
    }
    Ok(if input_errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Validates every output like `esr validate` does; an object whose ExternalSecret or store fails
/// is marked not converted.
fn check_outputs(conv: &mut Conversion) -> anyhow::Result<()> {
    let registry = Registry::builtin()?;
    let mut rejected: Vec<(usize, Vec<String>)> = Vec::new();
    for (si, store) in conv.stores.iter().enumerate() {
        let r = validate_document("<generated store>", si, &store.manifest, &registry);
        if r.result == Outcome::Error {
            for u in &store.used_by {
                rejected.push((
                    *u,
                    vec![format!(
                        "the generated store {} fails esr validate: {}",
                        store.name(),
                        r.reasons.join("; ")
                    )],
                ));
            }
        }
    }
    for d in &conv.documents {
        if let OutputKind::Converted { report } = d.kind {
            let r = validate_document(&d.source, d.index, &d.manifest, &registry);
            if r.result != Outcome::Ok {
                rejected.push((
                    report,
                    vec![format!(
                        "the converted ExternalSecret fails esr validate: {}",
                        r.reasons.join("; ")
                    )],
                ));
            }
        }
    }
    for (report, reasons) in rejected {
        conv.reject(report, reasons);
    }
    Ok(())
}

/// Files to read: plain files as given, directories recursed (sorted) for YAML and JSON. A
/// missing path is an input error.
fn collect_inputs(paths: &[PathBuf], errors: &mut Vec<String>) -> Vec<Input> {
    let mut out: Vec<Input> = Vec::new();
    let mut used = BTreeSet::new();
    let mut push = |path: PathBuf, rel: PathBuf, out: &mut Vec<Input>| {
        let mut rel = rel;
        let mut n = 1;
        while !used.insert(rel.clone()) {
            n += 1;
            let stem = rel.file_stem().and_then(|s| s.to_str()).unwrap_or("out");
            let ext = rel.extension().and_then(|s| s.to_str()).unwrap_or("yaml");
            rel = rel.with_file_name(format!("{stem}-{n}.{ext}"));
        }
        out.push(Input { path, rel });
    };
    for p in paths {
        match std::fs::metadata(p) {
            Err(e) => errors.push(format!("{}: {e}", p.display())),
            Ok(m) if m.is_dir() => {
                for entry in walkdir::WalkDir::new(p).sort_by_file_name() {
                    let entry = match entry {
                        Ok(e) => e,
                        Err(e) => {
                            errors.push(format!("{}: {e}", p.display()));
                            continue;
                        }
                    };
                    let wanted = entry
                        .path()
                        .extension()
                        .and_then(|e| e.to_str())
                        .is_some_and(|e| matches!(e, "yaml" | "yml" | "json"));
                    if entry.file_type().is_file() && wanted {
                        let rel = entry
                            .path()
                            .strip_prefix(p)
                            .map(Path::to_path_buf)
                            .unwrap_or_else(|_| entry.path().to_path_buf());
                        push(entry.path().to_path_buf(), rel, &mut out);
                    }
                }
            }
            Ok(_) => {
                let rel = p
                    .file_name()
                    .map(PathBuf::from)
                    .unwrap_or_else(|| PathBuf::from("input.yaml"));
                push(p.clone(), rel, &mut out);
            }
        }
    }
    out
}

fn write_out(dir: &Path, inputs: &[Input], conv: &Conversion) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for input in inputs {
        let name = input.path.display().to_string();
        let docs: Vec<&serde_json::Value> = conv
            .documents
            .iter()
            .filter(|d| d.source == name)
            .map(|d| &d.manifest)
            .collect();
        if docs.is_empty() {
            continue;
        }
        let target = dir.join(&input.rel);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&target, esr_migrate::to_yaml_stream(docs)?)
            .with_context(|| format!("writing {}", target.display()))?;
    }
    let stores: Vec<&serde_json::Value> = conv.stores.iter().map(|s| &s.manifest).collect();
    if !stores.is_empty() {
        let target = dir.join("stores.yaml");
        std::fs::write(&target, esr_migrate::to_yaml_stream(stores)?)
            .with_context(|| format!("writing {}", target.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kes_es(name: &str) -> serde_json::Value {
        serde_json::json!({
            "apiVersion": "kubernetes-client.io/v1",
            "kind": "ExternalSecret",
            "metadata": {"name": name, "namespace": "app"},
            "spec": {"backendType": "secretsManager", "region": "eu-west-1",
                     "data": [{"key": "k", "name": "password"}]}
        })
    }

    #[test]
    fn outputs_pass_validation_and_invalid_ones_are_rejected() {
        let docs = vec![Document {
            source: "a.yaml".into(),
            index: 0,
            value: kes_es("ok"),
        }];
        let mut conv = esr_migrate::convert(&docs, &Options::default());
        check_outputs(&mut conv).unwrap();
        assert_eq!(conv.reports[0].status, esr_migrate::Status::Converted);
        assert_eq!(conv.stores.len(), 1);

        // Corrupt the ExternalSecret: the in-process check must reject it and drop its store.
        let mut conv = esr_migrate::convert(&docs, &Options::default());
        conv.documents[0].manifest["spec"]["target"]["creationPolicy"] = "Sometimes".into();
        check_outputs(&mut conv).unwrap();
        assert_eq!(conv.reports[0].status, esr_migrate::Status::NotConverted);
        assert!(
            conv.reports[0].errors[0].contains("fails esr validate"),
            "{:?}",
            conv.reports[0]
        );
        assert!(conv.documents.is_empty());
        assert!(conv.stores.is_empty());
    }
}
