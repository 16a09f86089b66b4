//! `esr controller`.

use std::process::ExitCode;

/// Arguments of `esr controller`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs the command.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("esr controller is not implemented yet")
}
