//! Runs the Key Vault + Entra test server as a process, for e2e tests.
//!
//! `esr-azure-kv-test-server <dir> <tenant> <client-id> <client-secret> [seed.json]` writes
//! `<dir>/ca.pem` and then `<dir>/url` and serves until killed. `seed.json`:
//! `{"secrets": {"name": [{"value": "...", "tags": {"k": "v"}}]}}` (versions oldest first).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use esr_test_azure_server::KvServer;

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, dir, tenant, client_id, client_secret, rest @ ..] = args.as_slice() else {
        eprintln!(
            "usage: esr-azure-kv-test-server <dir> <tenant> <client-id> <client-secret> [seed.json]"
        );
        std::process::exit(2);
    };
    let server = KvServer::start(tenant, client_id).await;
    {
        let mut s = server.state();
        s.client_secret = Some(client_secret.clone());
        if let Some(seed) = rest.first() {
            let v: serde_json::Value =
                serde_json::from_slice(&std::fs::read(seed).unwrap()).unwrap();
            if let Some(secrets) = v["secrets"].as_object() {
                for (name, versions) in secrets {
                    for ver in versions.as_array().into_iter().flatten() {
                        let tags: Vec<(String, String)> = ver["tags"]
                            .as_object()
                            .into_iter()
                            .flatten()
                            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                            .collect();
                        let tags: Vec<(&str, &str)> =
                            tags.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                        s.put_secret(name, ver["value"].as_str().unwrap_or(""), &tags);
                    }
                }
            }
        }
    }
    let dir = std::path::Path::new(dir);
    std::fs::write(dir.join("ca.pem"), &server.ca_pem).unwrap();
    std::fs::write(dir.join("url.tmp"), server.url()).unwrap();
    std::fs::rename(dir.join("url.tmp"), dir.join("url")).unwrap();
    println!("listening on {}", server.url());
    loop {
        tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
    }
}
