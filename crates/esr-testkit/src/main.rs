//! `esr-testkit serve --port 0 --kubeconfig PATH`: run the local API server until Ctrl-C.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "esr-testkit",
    about = "A local Kubernetes API server for tests and demos (never production)"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Serve plain HTTP on 127.0.0.1 and write a kubeconfig.
    Serve {
        /// Port (0 = pick a free one).
        #[arg(long, default_value_t = 0)]
        port: u16,
        /// Where to write the kubeconfig.
        #[arg(long)]
        kubeconfig: PathBuf,
        /// Apply the CRDs of this directory at start.
        #[arg(long)]
        crds: Option<PathBuf>,
        /// Enforce RBAC for ServiceAccount tokens (requests without a token or with the
        /// kubeconfig's token stay cluster-admin).
        #[arg(long)]
        rbac: bool,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Serve {
            port,
            kubeconfig,
            crds,
            rbac,
        } => {
            let opts = esr_testkit::Options {
                port,
                rbac,
                ..Default::default()
            };
            let server = esr_testkit::TestServer::start_with(opts).await?;
            server.write_kubeconfig(&kubeconfig)?;
            if let Some(dir) = crds {
                let n = server.apply_crds_from_dir(&dir)?;
                println!("applied {n} CRDs from {}", dir.display());
            }
            println!(
                "esr-testkit listening on {} (kubeconfig {})",
                server.url(),
                kubeconfig.display()
            );
            tokio::signal::ctrl_c().await?;
            server.shutdown();
        }
    }
    Ok(())
}
