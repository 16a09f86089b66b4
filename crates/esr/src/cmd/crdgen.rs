//! `esr crdgen`: writes `crds/*.yaml` from the API types.
//!
//! One file per CRD, named `<group>_<plural>.yaml` (for example
//! `external-secrets.io_externalsecrets.yaml`). Files for CRDs that are no longer generated are
//! left alone; the `crds_up_to_date` test in esr-api reports them.

use anyhow::Context;
use std::process::ExitCode;

/// Arguments of `esr crdgen`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Directory to write the CRD YAML files into.
    #[arg(long, default_value = "crds")]
    pub out: std::path::PathBuf,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let crds = esr_api::crds().context("generating the CRDs")?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    for crd in &crds {
        let path = args.out.join(esr_api::crd_file_name(crd));
        let content = esr_api::crd_file_content(crd)?;
        std::fs::write(&path, content).with_context(|| format!("writing {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}
