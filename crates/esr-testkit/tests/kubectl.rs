//! Drives the machine's real `kubectl` against the server (without --validate=false):
//! apply (CRDs, custom resources, a Secret), strict validation, get, describe, explain, patch
//! (also the status subresource), wait --for=condition, get --watch and delete.
//! Skipped with a printed reason when kubectl is not installed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![recursion_limit = "512"]

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use common::*;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

fn kubectl_bin() -> Option<PathBuf> {
    let p = std::env::var_os("KUBECTL")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/kubectl"));
    if p.exists() {
        return Some(p);
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("kubectl"))
            .find(|c| c.exists())
    })
}

struct Kubectl {
    bin: PathBuf,
    kubeconfig: PathBuf,
    home: tempfile::TempDir,
}

impl Kubectl {
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.bin);
        c.args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("HOME", self.home.path())
            .env_remove("KUBECTL_EXTERNAL_DIFF")
            .stdin(Stdio::null())
            .kill_on_drop(true);
        c
    }
    async fn run(&self, args: &[&str]) -> (bool, String, String) {
        let out = tokio::time::timeout(Duration::from_secs(60), self.cmd(args).output())
            .await
            .expect("kubectl finished")
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    }
    async fn ok(&self, args: &[&str]) -> String {
        let (ok, out, err) = self.run(args).await;
        assert!(ok, "kubectl {args:?} failed:\nstdout: {out}\nstderr: {err}");
        out
    }
}

fn write(dir: &Path, name: &str, v: &Value) -> String {
    let p = dir.join(name);
    std::fs::write(&p, serde_yaml_ng::to_string(v).unwrap()).unwrap();
    p.to_string_lossy().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_kubectl_works_against_the_server() {
    let Some(bin) = kubectl_bin() else {
        println!(
            "skipped: kubectl is not installed (looked at $KUBECTL, /usr/bin/kubectl and PATH)"
        );
        return;
    };
    let s = start().await;
    let k = Kubectl {
        bin,
        kubeconfig: s.kubeconfig_path().to_path_buf(),
        home: tempfile::tempdir().unwrap(),
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();

    // apply a CRD, then a custom resource (kubectl validates through the server: fieldValidation=Strict)
    let out = k
        .ok(&["apply", "-f", &write(d, "crd.yaml", &widget_crd())])
        .await;
    assert!(
        out.contains("customresourcedefinition.apiextensions.k8s.io/widgets.test.esr.dev created"),
        "{out}"
    );
    let w1 = json!({"apiVersion": "test.esr.dev/v1", "kind": "Widget", "metadata": {"name": "w1", "labels": {"app": "demo"}}, "spec": {"color": "red"}});
    let out = k.ok(&["apply", "-f", &write(d, "w1.yaml", &w1)]).await;
    assert!(out.contains("widget.test.esr.dev/w1 created"), "{out}");
    // re-apply is unchanged
    let out = k.ok(&["apply", "-f", &write(d, "w1.yaml", &w1)]).await;
    assert!(out.contains("widget.test.esr.dev/w1 unchanged"), "{out}");
    // unknown field: refused by strict validation (no --validate=false anywhere)
    let mut bad = w1.clone();
    bad["metadata"]["name"] = json!("bad");
    bad["spec"]["bogus"] = json!(1);
    let (ok, _, err) = k.run(&["apply", "-f", &write(d, "bad.yaml", &bad)]).await;
    assert!(!ok);
    assert!(
        err.contains("strict decoding error: unknown field \"spec.bogus\""),
        "{err}"
    );
    // invalid enum → 422 from the schema
    let mut bad = w1.clone();
    bad["metadata"]["name"] = json!("bad2");
    bad["spec"]["color"] = json!("purple");
    let (ok, _, err) = k.run(&["apply", "-f", &write(d, "bad2.yaml", &bad)]).await;
    assert!(!ok);
    assert!(err.contains("Unsupported value: \"purple\""), "{err}");

    // get (short name, json), describe, explain
    let out = k.ok(&["get", "wd", "w1", "-o", "json"]).await;
    let obj: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(obj["spec"]["size"], 3, "server-side default");
    let out = k
        .ok(&["get", "widgets", "-l", "app=demo", "-o", "name"])
        .await;
    assert_eq!(out.trim(), "widget.test.esr.dev/w1");
    let out = k.ok(&["describe", "widget", "w1"]).await;
    assert!(
        out.contains("Name:") && out.contains("w1") && out.contains("Color:"),
        "{out}"
    );
    let out = k.ok(&["explain", "widgets.spec"]).await;
    assert!(
        out.contains("color") && out.contains("KIND:") && out.contains("Widget"),
        "{out}"
    );

    // patch spec and status; wait for a condition
    k.ok(&[
        "patch",
        "widget",
        "w1",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"color":"blue"}}"#,
    ])
    .await;
    let out = k
        .ok(&[
            "get",
            "widget",
            "w1",
            "-o",
            "jsonpath={.spec.color} {.metadata.generation}",
        ])
        .await;
    assert_eq!(out, "blue 2");
    let waiter = k
        .cmd(&[
            "wait",
            "--for=condition=Ready",
            "widget/w1",
            "--timeout=30s",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    k.ok(&["patch", "widget", "w1", "--subresource=status", "--type", "merge", "-p",
        r#"{"status":{"conditions":[{"type":"Ready","status":"True","reason":"Synced","message":"ok","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}"#]).await;
    let out = tokio::time::timeout(Duration::from_secs(60), waiter.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("condition met"));

    // get --watch sees a new object (bounded by a timeout)
    let mut watch = k
        .cmd(&[
            "get",
            "widgets",
            "--watch",
            "-o",
            "name",
            "--request-timeout=60s",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(watch.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(first, "widget.test.esr.dev/w1");
    let w2 = json!({"apiVersion": "test.esr.dev/v1", "kind": "Widget", "metadata": {"name": "w2"}, "spec": {"color": "green"}});
    k.ok(&["apply", "-f", &write(d, "w2.yaml", &w2)]).await;
    let seen = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(l) = lines.next_line().await.unwrap() {
            if l == "widget.test.esr.dev/w2" {
                return true;
            }
        }
        false
    })
    .await
    .unwrap();
    assert!(seen);
    watch.kill().await.unwrap();

    // built-in kinds through apply (strategic merge on re-apply)
    let sec = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"}, "stringData": {"user": "admin"}});
    k.ok(&["apply", "-f", &write(d, "sec.yaml", &sec)]).await;
    let out = k
        .ok(&["get", "secret", "creds", "-o", "jsonpath={.data.user}"])
        .await;
    assert_eq!(out, "YWRtaW4=");
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"a": "1"}});
    k.ok(&["apply", "-f", &write(d, "cm.yaml", &cm)]).await;
    let cm2 = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "labels": {"x": "z"}}, "data": {"b": "2"}});
    k.ok(&["apply", "-f", &write(d, "cm.yaml", &cm2)]).await;
    let out = k.ok(&["get", "cm", "cfg", "-o", "json"]).await;
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v["data"],
        json!({"b": "2"}),
        "client-side apply removed a, added b"
    );
    let out = k
        .ok(&["apply", "--server-side", "-f", &write(d, "cm.yaml", &cm2)])
        .await;
    assert!(out.contains("serverside-applied"), "{out}");
    let out = k.ok(&["get", "ns", "-o", "name"]).await;
    assert!(out.contains("namespace/default"));

    // delete waits until the object is gone
    let out = k.ok(&["delete", "widget", "w1"]).await;
    assert!(out.contains("widget.test.esr.dev \"w1\" deleted"), "{out}");
    let (ok, _, err) = k.run(&["get", "widget", "w1"]).await;
    assert!(!ok);
    assert!(
        err.contains("NotFound") || err.contains("not found"),
        "{err}"
    );
    k.ok(&["delete", "secret", "creds"]).await;
}
