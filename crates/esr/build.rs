//! Build metadata for `esr version`: the git commit and the build date, as the compile-time
//! environment variables `ESR_GIT_COMMIT` and `ESR_BUILD_DATE`.
//!
//! - Commit: `git rev-parse HEAD` of the source tree; where that fails (a source tarball, a
//!   container build without `.git`), the `ESR_GIT_COMMIT` environment variable; else `unknown`.
//! - Build date: `SOURCE_DATE_EPOCH` (seconds since the epoch, for reproducible builds) when set,
//!   else the time of the build; printed as RFC 3339 UTC.

use std::path::PathBuf;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

fn main() {
    println!("cargo:rerun-if-env-changed=ESR_GIT_COMMIT");
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    println!("cargo:rerun-if-changed=build.rs");

    // Re-run when HEAD moves: the HEAD file of this work tree and the ref it points to.
    if let Some(git_dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        let git_dir = PathBuf::from(git_dir);
        println!("cargo:rerun-if-changed={}", git_dir.join("HEAD").display());
        if let Some(common) = git(&["rev-parse", "--git-common-dir"]) {
            let common = PathBuf::from(common);
            let common = if common.is_absolute() {
                common
            } else {
                std::env::current_dir().unwrap_or_default().join(common)
            };
            println!(
                "cargo:rerun-if-changed={}",
                common.join("packed-refs").display()
            );
            if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]) {
                println!("cargo:rerun-if-changed={}", common.join(r).display());
            }
        }
    }

    let commit = std::env::var("ESR_GIT_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .map(|c| c.trim().to_string())
        .or_else(|| git(&["rev-parse", "HEAD"]))
        .unwrap_or_else(|| "unknown".to_string());

    let date = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .and_then(|secs| chrono::DateTime::from_timestamp(secs, 0))
        .unwrap_or_else(chrono::Utc::now);

    println!("cargo:rustc-env=ESR_GIT_COMMIT={commit}");
    println!(
        "cargo:rustc-env=ESR_BUILD_DATE={}",
        date.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    );
}
