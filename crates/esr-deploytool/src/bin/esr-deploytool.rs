//! `esr-deploytool manifests`: regenerates the chart's CRD templates and `deploy/manifests/`
//! (run by `make manifests`).

use std::process::ExitCode;

fn main() -> ExitCode {
    let root = std::env::args()
        .nth(1)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(esr_deploytool::repo_root);
    match esr_deploytool::write_all(&root) {
        Ok(files) => {
            for f in files {
                println!("wrote {}", f.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("esr-deploytool: {e}");
            ExitCode::FAILURE
        }
    }
}
