//! `esr template`.

use std::process::ExitCode;

/// Arguments of `esr template`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs the command.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("esr template is not implemented yet")
}
