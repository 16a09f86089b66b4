//! `esr migrate`.

use std::process::ExitCode;

/// Arguments of `esr migrate`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs the command.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("esr migrate is not implemented yet")
}
