//! The container image: `scripts/image.sh` (what `make image` runs) builds an OCI image with
//! buildah from the esr binary of this build (the debug one, to spare the test suite a release
//! build; `make image` builds a release binary). The test reads the OCI layout itself (index →
//! manifest → config and layers), unpacks the layers into a root filesystem and runs
//! `esr version` from it with chroot, as user 65532, with nothing of the host (no shell, no
//! libraries other than those in the image).
//!
//! Skipped, with a printed `skipped:` line, only where no builder can be had: not root, or
//! buildah neither installed nor installable with apt-get (scripts/image.sh exits 3).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;

use esr_deploytool::repo_root;
use serde_json::Value;

/// chroot(8) of coreutils (by path: the commands run with an empty environment).
const CHROOT: &str = "/usr/sbin/chroot";

/// `<target>/debug/esr` (`make test` builds it before the tests); built here only when missing.
fn esr_binary() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap().to_path_buf(); // target/debug
    if dir.join("esr").exists() {
        return dir.join("esr");
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let st = Command::new(cargo)
        .args(["build", "-q", "-p", "esr", "--bin", "esr"])
        .current_dir(repo_root())
        .status()
        .unwrap();
    assert!(st.success(), "cargo build -p esr failed");
    dir.join("esr")
}

fn blob(layout: &Path, digest: &str) -> PathBuf {
    let (alg, hex) = digest.split_once(':').unwrap();
    layout.join("blobs").join(alg).join(hex)
}

fn json_blob(layout: &Path, digest: &str) -> Value {
    serde_json::from_slice(&std::fs::read(blob(layout, digest)).unwrap()).unwrap()
}

#[test]
fn image_runs_esr_version_as_nonroot() {
    let is_root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if !is_root {
        println!(
            "skipped: building and running the image needs root (buildah vfs storage, chroot)"
        );
        return;
    }
    let esr = esr_binary();
    let out = tempfile::tempdir().unwrap();
    let run = Command::new(repo_root().join("scripts/image.sh"))
        .arg("--binary")
        .arg(&esr)
        .arg("--out")
        .arg(out.path())
        .args(["--tag", "test", "--no-archive"])
        .output()
        .unwrap();
    if run.status.code() == Some(3) {
        println!(
            "skipped: no image builder: {}",
            String::from_utf8_lossy(&run.stderr).trim()
        );
        return;
    }
    assert!(
        run.status.success(),
        "scripts/image.sh failed:\n{}\n{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );

    // The OCI layout: index.json names the tag; its manifest gives the config and the layers.
    let layout = out.path().join("oci");
    let index: Value =
        serde_json::from_slice(&std::fs::read(layout.join("index.json")).unwrap()).unwrap();
    let entry = index["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["annotations"]["org.opencontainers.image.ref.name"] == "test")
        .expect("tag test in index.json");
    let manifest = json_blob(&layout, entry["digest"].as_str().unwrap());
    let config = json_blob(&layout, manifest["config"]["digest"].as_str().unwrap());
    assert_eq!(config["os"], "linux");
    let c = &config["config"];
    assert_eq!(c["User"], "65532:65532");
    assert_eq!(c["Entrypoint"], serde_json::json!(["/esr"]));
    let labels = &c["Labels"];
    assert_eq!(
        labels["org.opencontainers.image.version"],
        env!("CARGO_PKG_VERSION")
    );
    assert_eq!(
        labels["org.opencontainers.image.source"],
        "https://github.com/esr-project/esr"
    );
    assert_eq!(labels["org.opencontainers.image.licenses"], "Apache-2.0");
    let created = labels["org.opencontainers.image.created"].as_str().unwrap();
    assert!(
        created.len() == 20 && created.ends_with('Z') && created.as_bytes()[10] == b'T',
        "created label {created:?} is not RFC 3339 UTC"
    );

    // Unpack the layers in order.
    let rootfs = out.path().join("rootfs");
    std::fs::create_dir_all(&rootfs).unwrap();
    let layers = manifest["layers"].as_array().unwrap();
    assert!(!layers.is_empty());
    for layer in layers {
        let media = layer["mediaType"].as_str().unwrap();
        let flag = if media.ends_with("+gzip") {
            "-xzf"
        } else if media.ends_with(".tar") {
            "-xf"
        } else {
            panic!("unexpected layer media type {media}")
        };
        let st = Command::new("tar")
            .arg(flag)
            .arg(blob(&layout, layer["digest"].as_str().unwrap()))
            .arg("-C")
            .arg(&rootfs)
            .status()
            .unwrap();
        assert!(st.success());
    }
    // No shell, no package manager: the image is esr, its libraries and a few files of /etc.
    for shell in [
        "bin/sh",
        "usr/bin/sh",
        "bin/bash",
        "bin/busybox",
        "usr/bin/apt",
    ] {
        assert!(!rootfs.join(shell).exists(), "{shell} in the image");
    }
    let passwd = std::fs::read_to_string(rootfs.join("etc/passwd")).unwrap();
    assert!(passwd.contains(":65532:65532:"), "{passwd}");
    assert!(rootfs.join("etc/ssl/certs/ca-certificates.crt").exists());

    // esr version from the image's root filesystem, as the image's user.
    let out = Command::new(CHROOT)
        .arg("--userspec=65532:65532")
        .arg(&rootfs)
        .args(["/esr", "version", "-o", "json"])
        .env_clear()
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "esr version in the image failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(v["commit"], labels["org.opencontainers.image.revision"]);
    assert_ne!(v["commit"], "");
    // The text form too, as a user would run it.
    let out = Command::new(CHROOT)
        .arg("--userspec=65532:65532")
        .arg(&rootfs)
        .args(["/esr", "version"])
        .env_clear()
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with(&format!("version: {}\ncommit: ", env!("CARGO_PKG_VERSION"))),
        "{text}"
    );
}
