//! Helper for `make demo` and `make bench-memory` (so they do not need kubectl):
//!
//! - `demo_tool apply --kubeconfig K [--fix-crd-metadata] FILE|DIR...`: server-side apply every
//!   document (discovery resolves the kinds; CRDs first, then Namespaces, then the rest).
//! - `demo_tool wait-ready --kubeconfig K --timeout SECS`: wait until every ExternalSecret is Ready.
//! - `demo_tool show --kubeconfig K`: print the managed Secrets (decoded) and a
//!   `kubectl get externalsecrets`-style table.
//! - `demo_tool bulk --kubeconfig K --namespace NS --externalsecrets N --secrets M --store NAME`:
//!   create N ExternalSecrets (fake ClusterSecretStore NAME) and M unrelated Secrets.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_literal
)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::discovery::{Discovery, Scope};
use kube::{Client, ResourceExt};

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

async fn client(kubeconfig: &Path) -> Res<Client> {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig)?;
    let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await?;
    Ok(Client::try_from(cfg)?)
}

fn files(inputs: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for i in inputs {
        if i.is_dir() {
            let mut v: Vec<PathBuf> = std::fs::read_dir(i)
                .unwrap()
                .filter_map(|e| e.ok().map(|e| e.path()))
                .collect();
            v.sort();
            out.extend(v.into_iter().filter(|p| {
                matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml"))
            }));
        } else {
            out.push(i.clone());
        }
    }
    out
}

fn docs(path: &Path) -> Res<Vec<serde_json::Value>> {
    let text = std::fs::read_to_string(path)?;
    let mut out = Vec::new();
    for d in yaml_serde::Deserializer::from_str(&text) {
        let v: serde_json::Value = serde::Deserialize::deserialize(d)?;
        if !v.is_null() {
            out.push(v);
        }
    }
    Ok(out)
}

fn fix_crd(v: &mut serde_json::Value) {
    if let Some(versions) = v
        .pointer_mut("/spec/versions")
        .and_then(|x| x.as_array_mut())
    {
        for ver in versions {
            if let Some(props) = ver
                .pointer_mut("/schema/openAPIV3Schema/properties")
                .and_then(|p| p.as_object_mut())
                && props.contains_key("metadata")
            {
                props.insert("metadata".into(), serde_json::json!({"type": "object"}));
            }
        }
    }
}

async fn apply(kubeconfig: &Path, fix: bool, inputs: &[PathBuf]) -> Res<()> {
    let client = client(kubeconfig).await?;
    let mut all = Vec::new();
    for f in files(inputs) {
        all.extend(docs(&f)?);
    }
    let rank = |v: &serde_json::Value| match v.get("kind").and_then(|k| k.as_str()) {
        Some("CustomResourceDefinition") => 0,
        Some("Namespace") => 1,
        _ => 2,
    };
    all.sort_by_key(rank);
    let mut discovery = Discovery::new(client.clone()).run().await?;
    let mut crds_done = false;
    for mut obj in all {
        if rank(&obj) > 0 && !crds_done {
            crds_done = true;
            tokio::time::sleep(Duration::from_millis(300)).await;
            discovery = Discovery::new(client.clone()).run().await?;
        }
        if fix && rank(&obj) == 0 {
            fix_crd(&mut obj);
        }
        let api_version = obj["apiVersion"].as_str().unwrap_or("").to_string();
        let kind = obj["kind"].as_str().unwrap_or("").to_string();
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", &api_version));
        let gvk = kube::api::GroupVersionKind::gvk(group, version, &kind);
        let (ar, caps) = discovery
            .resolve_gvk(&gvk)
            .ok_or_else(|| format!("unknown kind {api_version} {kind}"))?;
        let name = obj["metadata"]["name"].as_str().unwrap_or("").to_string();
        let api: Api<DynamicObject> = if caps.scope == Scope::Namespaced {
            let ns = obj["metadata"]["namespace"]
                .as_str()
                .unwrap_or("default")
                .to_string();
            Api::namespaced_with(client.clone(), &ns, &ar)
        } else {
            Api::all_with(client.clone(), &ar)
        };
        api.patch(
            &name,
            &PatchParams::apply("esr-demo").force(),
            &Patch::Apply(&obj),
        )
        .await?;
        println!("applied {kind}/{name}");
    }
    Ok(())
}

fn ready_of(es: &DynamicObject) -> (String, String, String) {
    let conds = es
        .data
        .pointer("/status/conditions")
        .and_then(|c| c.as_array())
        .cloned()
        .unwrap_or_default();
    let ready = conds.iter().find(|c| c["type"] == "Ready");
    let s = |k: &str| ready.and_then(|r| r[k].as_str()).unwrap_or("").to_string();
    (s("status"), s("reason"), s("message"))
}

fn es_api(client: &Client) -> Api<DynamicObject> {
    let ar = kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
        "external-secrets.io",
        "v1",
        "ExternalSecret",
    ));
    Api::all_with(client.clone(), &ar)
}

async fn wait_ready(kubeconfig: &Path, timeout: Duration) -> Res<()> {
    let client = client(kubeconfig).await?;
    let api = es_api(&client);
    let start = Instant::now();
    loop {
        let list = api.list(&ListParams::default()).await?;
        let total = list.items.len();
        let ready = list
            .items
            .iter()
            .filter(|e| ready_of(e).0 == "True")
            .count();
        if total > 0 && ready == total {
            println!(
                "all {total} ExternalSecrets are Ready after {:.1}s",
                start.elapsed().as_secs_f64()
            );
            return Ok(());
        }
        if start.elapsed() > timeout {
            for e in &list.items {
                let (s, r, m) = ready_of(e);
                eprintln!(
                    "{}/{}: {s} {r} {m}",
                    e.namespace().unwrap_or_default(),
                    e.name_any()
                );
            }
            return Err(format!("timeout: {ready}/{total} ExternalSecrets Ready").into());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

async fn show(kubeconfig: &Path) -> Res<()> {
    let client = client(kubeconfig).await?;
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::all(client.clone());
    let list = secrets
        .list(&ListParams::default().labels("reconcile.external-secrets.io/managed=true"))
        .await?;
    println!("== Secrets managed by esr (decoded)");
    for s in &list.items {
        println!(
            "-- {}/{} (type {})",
            s.namespace().unwrap_or_default(),
            s.name_any(),
            s.type_.clone().unwrap_or_default()
        );
        for (k, v) in s.data.iter().flatten() {
            println!("   {k}: {}", String::from_utf8_lossy(&v.0));
        }
    }
    println!();
    println!("== ExternalSecrets");
    let api = es_api(&client);
    let items = api.list(&ListParams::default()).await?.items;
    println!(
        "{:<10} {:<16} {:<20} {:<18} {:<10} {:<16} {:<6} {}",
        "NAMESPACE", "NAME", "STORETYPE", "STORE", "REFRESH", "STATUS", "READY", "LAST SYNC"
    );
    for e in &items {
        let (s, r, _) = ready_of(e);
        let d = &e.data;
        let g = |p: &str| {
            d.pointer(p)
                .and_then(|x| x.as_str())
                .unwrap_or("")
                .to_string()
        };
        println!(
            "{:<10} {:<16} {:<20} {:<18} {:<10} {:<16} {:<6} {}",
            e.namespace().unwrap_or_default(),
            e.name_any(),
            g("/spec/secretStoreRef/kind"),
            g("/spec/secretStoreRef/name"),
            g("/spec/refreshInterval"),
            r,
            s,
            g("/status/refreshTime"),
        );
    }
    Ok(())
}

async fn bulk(
    kubeconfig: &Path,
    ns: &str,
    n_es: usize,
    n_secrets: usize,
    store: &str,
    offset: usize,
) -> Res<()> {
    let client = client(kubeconfig).await?;
    let nss: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let _ = nss
        .create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({"metadata": {"name": ns}}))?,
        )
        .await;
    let ar = kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
        "external-secrets.io",
        "v1",
        "ExternalSecret",
    ));
    let es_api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), ns);
    let start = Instant::now();
    for i in 0..n_es {
        let obj: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
            "metadata": {"name": format!("es-{i}"), "namespace": ns},
            "spec": {"refreshInterval": "1h", "secretStoreRef": {"kind": "ClusterSecretStore", "name": store},
                     "data": [{"secretKey": "value", "remoteRef": {"key": format!("/bench/{}", i % 10)}}]}
        }))?;
        let _ = es_api.create(&PostParams::default(), &obj).await;
    }
    let payload = "x".repeat(1024);
    for i in offset..offset + n_secrets {
        let s: k8s_openapi::api::core::v1::Secret = serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("unrelated-{i}"), "namespace": ns},
            "stringData": {"payload": payload}
        }))?;
        let _ = secrets.create(&PostParams::default(), &s).await;
    }
    println!(
        "created {n_es} ExternalSecrets and {n_secrets} Secrets in {:.1}s",
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let kubeconfig = PathBuf::from(
        arg(&args, "--kubeconfig").unwrap_or_else(|| "target/demo/kubeconfig".into()),
    );
    let res = match args.first().map(String::as_str) {
        Some("apply") => {
            let fix = args.iter().any(|a| a == "--fix-crd-metadata");
            let mut inputs = Vec::new();
            let mut skip = false;
            for a in &args[1..] {
                if skip {
                    skip = false;
                    continue;
                }
                match a.as_str() {
                    "--kubeconfig" => skip = true,
                    "--fix-crd-metadata" => {}
                    other => inputs.push(PathBuf::from(other)),
                }
            }
            apply(&kubeconfig, fix, &inputs).await
        }
        Some("wait-ready") => {
            let t = arg(&args, "--timeout")
                .and_then(|t| t.parse().ok())
                .unwrap_or(60);
            wait_ready(&kubeconfig, Duration::from_secs(t)).await
        }
        Some("show") => show(&kubeconfig).await,
        Some("bulk") => {
            let n: usize = arg(&args, "--externalsecrets")
                .and_then(|t| t.parse().ok())
                .unwrap_or(0);
            let m: usize = arg(&args, "--secrets")
                .and_then(|t| t.parse().ok())
                .unwrap_or(0);
            let off: usize = arg(&args, "--offset")
                .and_then(|t| t.parse().ok())
                .unwrap_or(0);
            let ns = arg(&args, "--namespace").unwrap_or_else(|| "bench".into());
            let store = arg(&args, "--store").unwrap_or_else(|| "bench".into());
            bulk(&kubeconfig, &ns, n, m, &store, off).await
        }
        _ => Err("usage: demo_tool apply|wait-ready|show|bulk --kubeconfig PATH ...".into()),
    };
    if let Err(e) = res {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
