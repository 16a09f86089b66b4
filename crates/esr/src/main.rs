//! The `esr` binary: controller, render, validate, migrate, crdgen, template, version.

use clap::{Parser, Subcommand};

mod cmd;
mod generators;
mod providers;

/// esr: External Secrets, in Rust. A drop-in replacement for the External Secrets Operator.
#[derive(Debug, Parser)]
#[command(name = "esr", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the operator: reconcile ExternalSecrets, stores, ClusterExternalSecrets and PushSecrets.
    Controller(cmd::controller::Args),
    /// Run the sync pipeline offline for the ExternalSecrets in manifests and print the Secrets.
    Render(cmd::render::Args),
    /// Validate external-secrets.io manifests offline, as the apiserver and ESO's webhook would.
    Validate(cmd::validate::Args),
    /// Convert manifests from other tools to external-secrets.io objects.
    Migrate(cmd::migrate::Args),
    /// Write the CustomResourceDefinitions generated from the API types.
    Crdgen(cmd::crdgen::Args),
    /// Render an ExternalSecret's template from a data file, like ESO's `esoctl template`.
    Template(cmd::template::Args),
    /// Print the version, the git commit and the build date.
    Version(cmd::version::Args),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Controller(args) => cmd::controller::run(args),
        Command::Render(args) => cmd::render::run(args),
        Command::Validate(args) => cmd::validate::run(args),
        Command::Migrate(args) => cmd::migrate::run(args),
        Command::Crdgen(args) => cmd::crdgen::run(args),
        Command::Template(args) => cmd::template::run(args),
        Command::Version(args) => cmd::version::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
