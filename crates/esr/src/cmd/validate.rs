//! `esr validate`.

use std::process::ExitCode;

/// Arguments of `esr validate`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs the command.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("esr validate is not implemented yet")
}
