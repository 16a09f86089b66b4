//! `esr crdgen`: writes `crds/*.yaml` from the API types.

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
    anyhow::bail!(
        "crdgen is not implemented yet (out: {})",
        args.out.display()
    )
}
