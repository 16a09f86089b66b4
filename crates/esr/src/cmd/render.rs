//! `esr render`.

use std::process::ExitCode;

/// Arguments of `esr render`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs the command.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("esr render is not implemented yet")
}
