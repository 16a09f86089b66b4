//! The AWS Secrets Manager provider end to end, against a real Secrets Manager API (moto), with
//! the standard `AWS_ENDPOINT_URL` variable pointing esr at moto:
//! * `esr controller` on esr-testkit: a ClusterSecretStore with `auth.secretRef`, an
//!   ExternalSecret using data, extract and find, and a value rotated in moto picked up on refresh;
//! * `esr render` with the store from a manifest.
//!
//! Run with `scripts/test-servers.sh cargo nextest run -p esr-e2e`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod es_support;

use std::io::{Read, Write};
use std::net::TcpStream;

/// One Secrets Manager call to moto (which accepts any signature).
fn sm_call(endpoint: &str, target: &str, body: &str) {
    let hostport = endpoint.trim_start_matches("http://").trim_end_matches('/');
    let mut s = TcpStream::connect(hostport).unwrap();
    let req = format!(
        "POST / HTTP/1.1\r\nHost: {hostport}\r\nX-Amz-Target: secretsmanager.{target}\r\n\
         Content-Type: application/x-amz-json-1.1\r\n\
         Authorization: AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/secretsmanager/aws4_request, SignedHeaders=host, Signature=00\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    assert!(
        resp.starts_with("HTTP/1.1 200") || resp.starts_with("HTTP/1.0 200"),
        "{target}: {resp}"
    );
}

fn http_get(addr: &str, path: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    resp
}

fn b64(data: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(data)
}

fn render(endpoint: &str, manifest: &str) -> String {
    let dir = std::env::temp_dir().join(format!("esr-e2e-aws-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("manifest.yaml");
    std::fs::write(&file, manifest).unwrap();
    esr_e2e::esr_render(&file, |cmd| {
        cmd.env("AWS_ENDPOINT_URL", endpoint)
            .env_remove("AWS_PROFILE");
    })
    .unwrap()
}

#[test]
fn render_against_moto_with_data_extract_and_find() {
    let Some(moto) = esr_e2e::moto_endpoint() else {
        return;
    };
    let run = format!("e2e{}", std::process::id());
    let db = format!("{run}/db");
    sm_call(
        &moto,
        "CreateSecret",
        &format!(r#"{{"Name":"{db}","SecretString":"{{\"user\":\"alice\",\"pass\":\"v1\"}}"}}"#),
    );
    sm_call(
        &moto,
        "CreateSecret",
        &format!(r#"{{"Name":"{run}/plain","SecretString":"just-text"}}"#),
    );
    let manifest = format!(
        r#"apiVersion: v1
kind: Secret
metadata: {{name: aws-creds, namespace: esr-system}}
stringData: {{id: testing, secret: testing}}
---
apiVersion: external-secrets.io/v1
kind: ClusterSecretStore
metadata: {{name: aws}}
spec:
  provider:
    aws:
      service: SecretsManager
      region: us-east-1
      auth:
        secretRef:
          accessKeyIDSecretRef: {{name: aws-creds, key: id, namespace: esr-system}}
          secretAccessKeySecretRef: {{name: aws-creds, key: secret, namespace: esr-system}}
---
apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {{name: app, namespace: default}}
spec:
  secretStoreRef: {{kind: ClusterSecretStore, name: aws}}
  target: {{name: app}}
  data:
    - secretKey: username
      remoteRef: {{key: {db}, property: user}}
  dataFrom:
    - extract: {{key: {db}}}
    - find: {{name: {{regexp: "^{run}/"}}}}
"#
    );
    let out = render(&moto, &manifest);
    assert!(out.contains("name: app"), "{out}");
    assert!(
        out.contains(&format!("username: {}", b64(b"alice"))),
        "{out}"
    );
    assert!(out.contains(&format!("pass: {}", b64(b"v1"))), "{out}");
    // find: keys are the secret names with `/` converted to `_`.
    assert!(
        out.contains(&format!("{run}_plain: {}", b64(b"just-text"))),
        "{out}"
    );
    assert!(out.contains(&format!("{run}_db: ")), "{out}");

    // Rotate the value in AWS: the next render picks it up.
    sm_call(
        &moto,
        "PutSecretValue",
        &format!(
            r#"{{"SecretId":"{db}","SecretString":"{{\"user\":\"alice\",\"pass\":\"v2\"}}"}}"#
        ),
    );
    let out = render(&moto, &manifest);
    assert!(out.contains(&format!("pass: {}", b64(b"v2"))), "{out}");
}

/// The controller inherits its environment from this process, and tests cannot set environment
/// variables in-process: the scenario runs in a child process of this test binary with
/// `AWS_ENDPOINT_URL` set.
#[test]
fn controller_syncs_and_rotates_against_moto() {
    let Some(moto) = esr_e2e::moto_endpoint() else {
        return;
    };
    esr_e2e::run_ignored_in_child(
        "controller_scenario",
        "aws-controller-scenario: ok",
        |cmd| {
            cmd.env("AWS_ENDPOINT_URL", &moto);
        },
    )
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by controller_syncs_and_rotates_against_moto with AWS_ENDPOINT_URL set"]
async fn controller_scenario() {
    use es_support::*;
    use serde_json::json;

    let (Some(moto), Ok(endpoint)) = (esr_e2e::moto_endpoint(), std::env::var("AWS_ENDPOINT_URL"))
    else {
        println!("skipped: needs ESR_TEST_MOTO_ENDPOINT and AWS_ENDPOINT_URL");
        return;
    };
    assert_eq!(moto, endpoint);
    let run = format!("ctl{}", std::process::id());
    let db = format!("{run}/db");
    sm_call(
        &moto,
        "CreateSecret",
        &format!(r#"{{"Name":"{db}","SecretString":"{{\"user\":\"alice\",\"pass\":\"v1\"}}"}}"#),
    );
    sm_call(
        &moto,
        "CreateSecret",
        &format!(r#"{{"Name":"{run}/plain","SecretString":"just-text"}}"#),
    );

    let env = esr_e2e::Env::start().await.unwrap();
    let ns = env.namespace("aws").await.unwrap();
    let esr = env.start_esr(&[]).unwrap();
    apply(
        &env,
        &ns,
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "aws-creds", "namespace": ns},
               "stringData": {"id": "testing", "secret": "testing"}}),
    )
    .await;
    let store = format!("aws-{run}");
    apply(
        &env,
        "",
        json!({"apiVersion": "external-secrets.io/v1", "kind": "ClusterSecretStore",
               "metadata": {"name": store},
               "spec": {"provider": {"aws": {
                   "service": "SecretsManager", "region": "us-east-1",
                   "auth": {"secretRef": {
                       "accessKeyIDSecretRef": {"name": "aws-creds", "key": "id", "namespace": ns},
                       "secretAccessKeySecretRef": {"name": "aws-creds", "key": "secret", "namespace": ns}}}}}}}),
    )
    .await;
    wait_read_write_store(&env, "ClusterSecretStore", "", &store).await;
    apply(
        &env,
        &ns,
        es(
            "app",
            json!({
                "refreshInterval": "1s",
                "secretStoreRef": {"kind": "ClusterSecretStore", "name": store},
                "target": {"name": "app"},
                "data": [{"secretKey": "username", "remoteRef": {"key": db, "property": "user"}}],
                "dataFrom": [
                    {"extract": {"key": db}},
                    {"find": {"name": {"regexp": format!("^{run}/")}}}
                ]
            }),
        ),
    )
    .await;
    let db_key = format!("{run}_db");
    let plain_key = format!("{run}_plain");
    wait_secret_data(
        &env,
        &ns,
        "app",
        &[
            ("username", "alice"),
            ("user", "alice"),
            ("pass", "v1"),
            (&db_key, r#"{"user":"alice","pass":"v1"}"#),
            (&plain_key, "just-text"),
        ],
    )
    .await;
    wait_condition(&env, "ExternalSecret", &ns, "app", "True", "SecretSynced").await;

    // Rotate in AWS: the next refresh picks the new value up.
    sm_call(
        &moto,
        "PutSecretValue",
        &format!(
            r#"{{"SecretId":"{db}","SecretString":"{{\"user\":\"alice\",\"pass\":\"v2\"}}"}}"#
        ),
    );
    wait_secret_data(
        &env,
        &ns,
        "app",
        &[
            ("username", "alice"),
            ("user", "alice"),
            ("pass", "v2"),
            (&db_key, r#"{"user":"alice","pass":"v2"}"#),
            (&plain_key, "just-text"),
        ],
    )
    .await;
    // Every AWS call is counted with ESO's metric and labels.
    let metrics = http_get(esr.metrics_addr.as_deref().unwrap(), "/metrics");
    let sm_lines: Vec<&str> = metrics
        .lines()
        .filter(|l| {
            l.starts_with("externalsecret_provider_api_calls_count")
                && l.contains(r#"provider="AWS/SecretsManager""#)
        })
        .collect();
    assert!(
        sm_lines.iter().any(|l| l.contains(r#"status="success""#)),
        "{metrics}"
    );
    assert!(
        sm_lines.iter().any(|l| l.contains(r#"call="ListSecrets""#)),
        "{metrics}"
    );
    // Values never reach the controller's logs.
    let logs = esr.logs();
    assert!(!logs.contains("just-text"), "{logs}");
    println!("aws-controller-scenario: ok");
}

#[test]
fn base64_helper() {
    assert_eq!(b64(b"alice"), "YWxpY2U=");
    assert_eq!(b64(b"pw"), "cHc=");
    assert_eq!(b64(b"abc"), "YWJj");
}
