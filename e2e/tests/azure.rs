//! The Azure Key Vault (`azurekv`) provider end to end, against the HTTPS Key Vault + Entra test
//! server (`esr-azure-kv-test-server`, from the test-support crate
//! `crates/testsupport/azure-server`). The esr binary is pointed at it with the test-only env vars
//! `ESR_AZURE_EXTRA_CA_FILE`, `ESR_AZURE_AUTHORITY_HOST` and
//! `ESR_AZURE_SKIP_CHALLENGE_RESOURCE_CHECK`:
//! * `esr render` with a ClusterSecretStore (service principal) and data/extract/find/tags;
//! * `esr controller` on esr-testkit: the store becomes Ready, an ExternalSecret syncs.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod es_support;

use std::process::Command;

use esr_e2e::ServerProcess;

const TENANT: &str = "11111111-2222-3333-4444-555555555555";
const CLIENT_ID: &str = "esr-e2e-client";
const CLIENT_SECRET: &str = "esr-e2e-client-secret";

/// The Key Vault + Entra test server.
fn start_kv(tag: &str) -> ServerProcess {
    ServerProcess::start(
        "esr-azure-kv-test-server",
        "esr-test-azure-server",
        tag,
        &[TENANT, CLIENT_ID, CLIENT_SECRET],
        &seed(),
    )
    .unwrap()
}

/// Points esr at the test server.
fn kv_env(kv: &ServerProcess, cmd: &mut Command) {
    cmd.env("ESR_AZURE_EXTRA_CA_FILE", kv.ca_file())
        .env("ESR_AZURE_AUTHORITY_HOST", &kv.url)
        .env("ESR_AZURE_SKIP_CHALLENGE_RESOURCE_CHECK", "1");
}

fn seed() -> serde_json::Value {
    serde_json::json!({"secrets": {
        "db": [
            {"value": "{\"user\":\"alice\",\"pass\":\"v1\"}"},
            {"value": "{\"user\":\"alice\",\"pass\":\"v2\"}", "tags": {"team": "payments"}}
        ],
        "app-token": [{"value": "tok-123", "tags": {"team": "payments"}}],
        "other": [{"value": "nope", "tags": {"team": "other"}}]
    }})
}

fn b64(data: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(data)
}

fn manifest(url: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Secret
metadata: {{name: azure-creds, namespace: esr-system}}
stringData: {{client-id: {CLIENT_ID}, client-secret: {CLIENT_SECRET}}}
---
apiVersion: external-secrets.io/v1
kind: ClusterSecretStore
metadata: {{name: azure}}
spec:
  provider:
    azurekv:
      vaultUrl: {url}
      tenantId: {TENANT}
      authSecretRef:
        clientId: {{name: azure-creds, key: client-id, namespace: esr-system}}
        clientSecret: {{name: azure-creds, key: client-secret, namespace: esr-system}}
---
apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {{name: app, namespace: default}}
spec:
  secretStoreRef: {{kind: ClusterSecretStore, name: azure}}
  target: {{name: app}}
  data:
    - secretKey: username
      remoteRef: {{key: secret/db, property: user}}
    - secretKey: team
      remoteRef: {{key: db, property: team, metadataPolicy: Fetch}}
  dataFrom:
    - extract: {{key: db}}
    - find: {{tags: {{team: payments}}}}
"#
    )
}

#[test]
fn render_against_the_key_vault_test_server() {
    let kv = start_kv("render");
    let file = kv.dir.join("manifest.yaml");
    std::fs::write(&file, manifest(&kv.url)).unwrap();
    let stdout = esr_e2e::esr_render(&file, |cmd| kv_env(&kv, cmd)).unwrap();
    assert!(stdout.contains("name: app"), "{stdout}");
    assert!(
        stdout.contains(&format!("username: {}", b64(b"alice"))),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("team: {}", b64(b"payments"))),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("pass: {}", b64(b"v2"))),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("app-token: {}", b64(b"tok-123"))),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("db: {}", b64(br#"{"user":"alice","pass":"v2"}"#))),
        "{stdout}"
    );
    assert!(!stdout.contains(&b64(b"nope")), "find by tags: {stdout}");

    // Without trusting the test CA, the TLS handshake fails: the override is what makes it work.
    let out = esr_e2e::esr_render_output(&file, |cmd| {
        cmd.env("ESR_AZURE_AUTHORITY_HOST", &kv.url)
            .env("ESR_AZURE_SKIP_CHALLENGE_RESOURCE_CHECK", "1")
            .env_remove("ESR_AZURE_EXTRA_CA_FILE");
    })
    .unwrap();
    assert!(!out.status.success(), "render must fail without the CA");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("invalid peer certificate"), "{stderr}");
}

/// The controller inherits its environment from this process; tests cannot set env vars
/// in-process, so the scenario runs in a child process of this test binary.
#[test]
fn controller_syncs_from_the_key_vault_test_server() {
    let kv = start_kv("ctl");
    esr_e2e::run_ignored_in_child(
        "azure_controller_scenario",
        "azure-controller-scenario: ok",
        |cmd| {
            cmd.env("ESR_E2E_AZURE_VAULT_URL", &kv.url);
            kv_env(&kv, cmd);
        },
    )
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by controller_syncs_from_the_key_vault_test_server with the env vars set"]
async fn azure_controller_scenario() {
    use es_support::*;
    use serde_json::json;

    let Ok(url) = std::env::var("ESR_E2E_AZURE_VAULT_URL") else {
        println!("skipped: ESR_E2E_AZURE_VAULT_URL is not set");
        return;
    };
    let env = esr_e2e::Env::start().await.unwrap();
    let ns = env.namespace("azure").await.unwrap();
    let mut esr = env.start_esr(&[]).unwrap();
    apply(
        &env,
        &ns,
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "azure-creds", "namespace": ns},
               "stringData": {"client-id": CLIENT_ID, "client-secret": CLIENT_SECRET}}),
    )
    .await;
    let store = format!("azure-{}", std::process::id());
    apply(
        &env,
        "",
        json!({"apiVersion": "external-secrets.io/v1", "kind": "ClusterSecretStore",
               "metadata": {"name": store},
               "spec": {"provider": {"azurekv": {
                   "vaultUrl": url, "tenantId": TENANT,
                   "authSecretRef": {
                       "clientId": {"name": "azure-creds", "key": "client-id", "namespace": ns},
                       "clientSecret": {"name": "azure-creds", "key": "client-secret", "namespace": ns}}}}}}),
    )
    .await;
    wait_read_write_store(&env, "ClusterSecretStore", "", &store).await;
    sync_seeded_app(&env, &ns, "ClusterSecretStore", &store).await;

    // A missing remote secret: the ExternalSecret reports the error, values never hit the logs.
    wait_missing_key_fails(&env, &ns, "ClusterSecretStore", &store).await;
    let logs = esr.logs();
    assert!(!logs.contains("tok-123"), "{logs}");
    assert!(!logs.contains(CLIENT_SECRET), "{logs}");
    esr.stop();
    println!("azure-controller-scenario: ok");
}

#[test]
fn base64_helper() {
    assert_eq!(b64(b"alice"), "YWxpY2U=");
    assert_eq!(b64(b"abc"), "YWJj");
}
