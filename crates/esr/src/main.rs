//! The `esr` binary: controller, render, validate, migrate, crdgen, template.

use clap::{Parser, Subcommand};

mod cmd;

/// esr: External Secrets, in Rust. A drop-in replacement for the External Secrets Operator.
#[derive(Debug, Parser)]
#[command(name = "esr", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Write the CustomResourceDefinitions generated from the API types.
    Crdgen(cmd::crdgen::Args),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Crdgen(args) => cmd::crdgen::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
