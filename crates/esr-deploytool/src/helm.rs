//! Real Helm, the Helm v4 Go library through its Python bindings (`helm-sdkpy` from PyPI),
//! driven by `helm/esr_helm.py` of this crate.
//!
//! The bindings are installed on first use into the repository's `target/test-venv` (the virtual
//! environment `scripts/test-servers.sh` also uses) with `pip install helm-sdkpy==<HELM_SDKPY>`;
//! concurrent test processes wait on a lock file while one of them installs. The wheel is
//! platform-independent Python plus a bundled Go shared library; its metadata asks for Python
//! 3.12, but the code runs on 3.11 (Debian 12's Python), so it is installed with
//! `--ignore-requires-python`.
//!
//! The bindings can lint, install and uninstall; they have no offline `template`. Rendering is
//! therefore an install into an API server ([`crate::render_chart`] uses an in-process
//! esr-testkit): the release's manifest is exactly what `helm template` prints for the same
//! values and cluster capabilities.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value as Json;

use crate::DeployError;

/// The helm-sdkpy version installed (Helm v4).
pub const HELM_SDKPY: &str = "0.1.32";

/// A ready-to-use Helm: the virtual environment's Python and the driver script.
#[derive(Debug, Clone)]
pub struct Helm {
    python: PathBuf,
    driver: PathBuf,
}

/// One message of `helm lint`.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
pub struct LintMessage {
    /// 1 = info, 2 = warning, 3 = error (Helm's `support.Severity`).
    pub severity: i64,
    /// The chart file the message is about.
    pub path: String,
    /// The message (the bindings may pass an empty `{}` for some messages).
    pub err: String,
}

/// The result of `helm lint`.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
pub struct LintReport {
    /// Every message, informational ones included.
    pub messages: Vec<LintMessage>,
    /// Errors of the lint run itself.
    pub errors: Vec<String>,
}

impl LintReport {
    /// Warnings and errors (severity 2 and above), and errors of the run.
    pub fn problems(&self) -> Vec<String> {
        self.messages
            .iter()
            .filter(|m| m.severity >= 2)
            .map(|m| format!("{}: {}", m.path, m.err))
            .chain(self.errors.iter().cloned())
            .collect()
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> DeployError + '_ {
    move |source| DeployError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn helm_error(action: &str, message: impl Into<String>) -> DeployError {
    DeployError::Helm {
        action: action.to_string(),
        message: message.into(),
    }
}

impl Helm {
    /// The Helm of this repository: installs helm-sdkpy into `target/test-venv` when missing.
    pub fn ensure() -> Result<Helm, DeployError> {
        let root = crate::repo_root();
        let venv = std::env::var_os("ESR_HELM_VENV")
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join("target/test-venv"));
        let helm = Helm {
            python: venv.join("bin/python"),
            driver: Path::new(env!("CARGO_MANIFEST_DIR")).join("helm/esr_helm.py"),
        };
        if helm.installed() {
            return Ok(helm);
        }
        std::fs::create_dir_all(root.join("target")).map_err(io(&root))?;
        let lock_path = root.join("target/.helm-sdkpy.lock");
        let lock = std::fs::File::create(&lock_path).map_err(io(&lock_path))?;
        lock.lock().map_err(io(&lock_path))?;
        if !helm.installed() {
            if !helm.python.exists() {
                run_ok(
                    "venv",
                    Command::new("python3").arg("-m").arg("venv").arg(&venv),
                )?;
            }
            eprintln!("installing helm-sdkpy {HELM_SDKPY} into {}", venv.display());
            run_ok(
                "pip install",
                Command::new(venv.join("bin/pip")).args([
                    "install",
                    "-q",
                    "--disable-pip-version-check",
                    "--ignore-requires-python",
                    &format!("helm-sdkpy=={HELM_SDKPY}"),
                ]),
            )?;
        }
        drop(lock);
        Ok(helm)
    }

    fn installed(&self) -> bool {
        Command::new(&self.python)
            .args(["-c", "import helm_sdkpy"])
            .output()
            .is_ok_and(|o| o.status.success())
    }

    fn call(&self, action: &str, args: &[&std::ffi::OsStr]) -> Result<Json, DeployError> {
        let out = Command::new(&self.python)
            .arg(&self.driver)
            .args(args)
            .output()
            .map_err(io(&self.python))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let parsed: Option<Json> = stdout
            .lines()
            .rev()
            .find(|l| l.starts_with('{'))
            .and_then(|l| serde_json::from_str(l).ok());
        match parsed {
            Some(v) if out.status.success() => Ok(v),
            Some(v) if v["error"].is_string() => Err(helm_error(
                action,
                v["error"].as_str().unwrap_or_default().to_string(),
            )),
            _ => Err(helm_error(
                action,
                format!(
                    "exit {:?}: {}{}",
                    out.status.code(),
                    stdout,
                    String::from_utf8_lossy(&out.stderr)
                ),
            )),
        }
    }

    /// `helm lint <chart>`.
    pub fn lint(&self, chart: &Path) -> Result<LintReport, DeployError> {
        let v = self.call("lint", &["lint".as_ref(), chart.as_os_str()])?;
        serde_json::from_value(v).map_err(|e| helm_error("lint", e.to_string()))
    }

    /// `helm install <release> <chart> -n <namespace> --create-namespace` with `values`, without
    /// waiting for readiness. Returns the release's manifest (the rendered templates, each
    /// document headed by `# Source: <chart>/templates/<file>`).
    pub fn install(
        &self,
        kubeconfig: &Path,
        release: &crate::Release,
        chart: &Path,
        values: &Json,
    ) -> Result<String, DeployError> {
        let values = values.to_string();
        let v = self.call(
            "install",
            &[
                "install".as_ref(),
                "--kubeconfig".as_ref(),
                kubeconfig.as_os_str(),
                "--namespace".as_ref(),
                release.namespace.as_ref(),
                "--release".as_ref(),
                release.name.as_ref(),
                "--values".as_ref(),
                values.as_ref(),
                chart.as_os_str(),
            ],
        )?;
        v["manifest"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| helm_error("install", format!("no manifest in the result: {v}")))
    }

    /// `helm uninstall <release> -n <namespace>`.
    pub fn uninstall(
        &self,
        kubeconfig: &Path,
        release: &crate::Release,
    ) -> Result<(), DeployError> {
        self.call(
            "uninstall",
            &[
                "uninstall".as_ref(),
                "--kubeconfig".as_ref(),
                kubeconfig.as_os_str(),
                "--namespace".as_ref(),
                release.namespace.as_ref(),
                "--release".as_ref(),
                release.name.as_ref(),
            ],
        )
        .map(|_| ())
    }
}

fn run_ok(action: &str, cmd: &mut Command) -> Result<(), DeployError> {
    let out = cmd
        .output()
        .map_err(|e| helm_error(action, e.to_string()))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(helm_error(
            action,
            format!(
                "exit {:?}: {}{}",
                out.status.code(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        ))
    }
}
