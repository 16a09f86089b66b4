//! Runs the Secret Manager + STS test server as a process, for e2e tests.
//!
//! `esr-gcp-test-server <dir> <project> [seed.json]` writes `<dir>/ca.pem`, one key file
//! `<dir>/sa-<n>.json` per seeded service account, and then `<dir>/url`, and serves until killed.
//! `seed.json`: `{"secrets": {"name": [{"value": "...", "labels": {"k": "v"}}]},
//! "serviceAccounts": ["email"], "sts": {"audience": "...", "subjects": ["system:serviceaccount:ns:sa"],
//! "subjectAudience": "..."}}` (versions oldest first).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use esr_test_gcp_server::{GcpServer, TestCa};

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, dir, project, rest @ ..] = args.as_slice() else {
        eprintln!("usage: esr-gcp-test-server <dir> <project> [seed.json]");
        std::process::exit(2);
    };
    let dir = std::path::Path::new(dir);
    let ca = TestCa::generate();
    let server = GcpServer::start(project, &ca).await;
    let seed: serde_json::Value = match rest.first() {
        Some(f) => serde_json::from_slice(&std::fs::read(f).unwrap()).unwrap(),
        None => serde_json::json!({}),
    };
    {
        let mut s = server.state();
        for (name, versions) in seed["secrets"].as_object().into_iter().flatten() {
            for ver in versions.as_array().into_iter().flatten() {
                let labels: Vec<(String, String)> = ver["labels"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                    .collect();
                let labels: Vec<(&str, &str)> = labels
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect();
                s.put(
                    name,
                    ver["value"].as_str().unwrap_or("").as_bytes(),
                    &labels,
                );
            }
        }
        for (i, email) in seed["serviceAccounts"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let key = s.add_service_account(email.as_str().unwrap());
            std::fs::write(dir.join(format!("sa-{i}.json")), key).unwrap();
        }
        let sts = &seed["sts"];
        s.sts_audience = sts["audience"].as_str().map(str::to_string);
        s.sts_subject_audience = sts["subjectAudience"].as_str().map(str::to_string);
        for sub in sts["subjects"].as_array().into_iter().flatten() {
            s.sts_subjects.insert(sub.as_str().unwrap().to_string());
        }
    }
    std::fs::write(dir.join("ca.pem"), &ca.cert_pem).unwrap();
    std::fs::write(dir.join("url.tmp"), server.url()).unwrap();
    std::fs::rename(dir.join("url.tmp"), dir.join("url")).unwrap();
    println!("listening on {}", server.url());
    loop {
        tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
    }
}
