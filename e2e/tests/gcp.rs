//! The GCP Secret Manager (`gcpsm`) provider end to end, against the HTTPS Secret Manager + STS
//! test server (`esr-gcp-test-server`, from the test-only crate esr-test-gcp-server). The esr
//! binary trusts the server's CA through `SSL_CERT_FILE` and is pointed at it with the test-only
//! env vars `ESR_GCP_SECRETMANAGER_ENDPOINT` and `ESR_GCP_STS_URL`:
//! * `esr render` with a service-account key store: data, property, version, extract, find;
//! * `esr controller` on esr-testkit: a service-account key SecretStore becomes Ready, an
//!   ExternalSecret syncs, a PushSecret writes a secret (labelled `managed-by`) that another
//!   ExternalSecret reads back, and a GKE workload identity SecretStore exchanges the
//!   ServiceAccount's TokenRequest token at STS.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod es_support;

use std::process::Command;

use esr_e2e::ServerProcess;

const PROJECT: &str = "esr-e2e-project";
const SA_EMAIL: &str = "esr-e2e@esr-e2e-project.iam.gserviceaccount.com";
const CLUSTER: &str = "e2e-cluster";
const LOCATION: &str = "europe-west1";
const WI_SA: &str = "gcp-app";

fn pool() -> String {
    format!("{PROJECT}.svc.id.goog")
}

fn sts_audience() -> String {
    format!(
        "identitynamespace:{}:https://container.googleapis.com/v1/projects/{PROJECT}/locations/{LOCATION}/clusters/{CLUSTER}",
        pool()
    )
}

/// The Secret Manager + STS test server.
fn start_gcp(tag: &str) -> ServerProcess {
    let seed = serde_json::json!({
        "secrets": {
            "db": [
                {"value": "{\"user\":\"alice\",\"pass\":\"v1\"}"},
                {"value": "{\"user\":\"alice\",\"pass\":\"v2\"}", "labels": {"team": "payments"}}
            ],
            "app-token": [{"value": "tok-123", "labels": {"team": "payments"}}],
            "other": [{"value": "nope", "labels": {"team": "other"}}]
        },
        "serviceAccounts": [SA_EMAIL],
        "sts": {
            "audience": sts_audience(),
            "subjects": [format!("system:serviceaccount:*:{WI_SA}")],
            "subjectAudience": pool()
        }
    });
    ServerProcess::start(
        "esr-gcp-test-server",
        "esr-test-gcp-server",
        tag,
        &[PROJECT],
        &seed,
    )
    .unwrap()
}

fn sa_key(gcp: &ServerProcess) -> String {
    std::fs::read_to_string(gcp.dir.join("sa-0.json")).unwrap()
}

/// Points esr at the test server.
fn gcp_env(gcp: &ServerProcess, cmd: &mut Command) {
    cmd.env("SSL_CERT_FILE", gcp.ca_file())
        .env("ESR_GCP_SECRETMANAGER_ENDPOINT", &gcp.url)
        .env("ESR_GCP_STS_URL", format!("{}/v1/token", gcp.url));
}

fn b64(data: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(data)
}

fn manifest(key: &str) -> String {
    // A JSON string is a valid YAML double-quoted scalar.
    let key = serde_json::to_string(key).unwrap();
    format!(
        r#"apiVersion: v1
kind: Secret
metadata: {{name: gcp-sa, namespace: esr-system}}
stringData:
  sa.json: {key}
---
apiVersion: external-secrets.io/v1
kind: ClusterSecretStore
metadata: {{name: gcp}}
spec:
  provider:
    gcpsm:
      projectID: {PROJECT}
      auth:
        secretRef:
          secretAccessKeySecretRef: {{name: gcp-sa, key: sa.json, namespace: esr-system}}
---
apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {{name: app, namespace: default}}
spec:
  secretStoreRef: {{kind: ClusterSecretStore, name: gcp}}
  target: {{name: app}}
  data:
    - secretKey: username
      remoteRef: {{key: db, property: user}}
    - secretKey: first
      remoteRef: {{key: db, version: "1", property: pass}}
  dataFrom:
    - extract: {{key: db}}
    - find: {{tags: {{team: payments}}}}
"#
    )
}

#[test]
fn render_against_the_gcp_test_server() {
    let gcp = start_gcp("render");
    let file = gcp.dir.join("manifest.yaml");
    std::fs::write(&file, manifest(&sa_key(&gcp))).unwrap();
    let stdout = esr_e2e::esr_render(&file, |cmd| gcp_env(&gcp, cmd)).unwrap();
    assert!(stdout.contains("name: app"), "{stdout}");
    for (k, v) in [
        ("username", &b"alice"[..]),
        ("first", b"v1"),
        ("pass", b"v2"),
        ("app-token", b"tok-123"),
        ("db", br#"{"user":"alice","pass":"v2"}"#),
    ] {
        assert!(
            stdout.contains(&format!("{k}: {}", b64(v))),
            "{k}: {stdout}"
        );
    }
    assert!(!stdout.contains(&b64(b"nope")), "find by labels: {stdout}");

    // Without trusting the test CA, the TLS handshake fails.
    let out = esr_e2e::esr_render_output(&file, |cmd| {
        cmd.env("ESR_GCP_SECRETMANAGER_ENDPOINT", &gcp.url)
            .env_remove("SSL_CERT_FILE");
    })
    .unwrap();
    assert!(!out.status.success(), "render must fail without the CA");
}

/// The controller inherits its environment from this process; tests cannot set env vars
/// in-process, so the scenario runs in a child process of this test binary.
#[test]
fn controller_syncs_and_pushes_through_the_gcp_test_server() {
    let gcp = start_gcp("ctl");
    esr_e2e::run_ignored_in_child(
        "gcp_controller_scenario",
        "gcp-controller-scenario: ok",
        |cmd| {
            cmd.env("ESR_E2E_GCP_SA_KEY_FILE", gcp.dir.join("sa-0.json"));
            gcp_env(&gcp, cmd);
        },
    )
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by controller_syncs_and_pushes_through_the_gcp_test_server with the env vars set"]
async fn gcp_controller_scenario() {
    use es_support::*;
    use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
    use serde_json::json;

    let Ok(key_file) = std::env::var("ESR_E2E_GCP_SA_KEY_FILE") else {
        println!("skipped: ESR_E2E_GCP_SA_KEY_FILE is not set");
        return;
    };
    let key = std::fs::read_to_string(key_file).unwrap();
    let env = esr_e2e::Env::start().await.unwrap();
    let ns = env.namespace("gcp").await.unwrap();
    let mut esr = env.start_esr(&[]).unwrap();
    apply(
        &env,
        &ns,
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "gcp-sa"},
               "stringData": {"sa.json": key}}),
    )
    .await;
    apply(
        &env,
        &ns,
        json!({"apiVersion": "external-secrets.io/v1", "kind": "SecretStore",
               "metadata": {"name": "gcp"},
               "spec": {"provider": {"gcpsm": {"projectID": PROJECT, "auth": {"secretRef": {
                   "secretAccessKeySecretRef": {"name": "gcp-sa", "key": "sa.json"}}}}}}}),
    )
    .await;
    wait_read_write_store(&env, "SecretStore", &ns, "gcp").await;
    sync_seeded_app(&env, &ns, "SecretStore", "gcp").await;

    // PushSecret: a local Secret's key becomes a Secret Manager secret, read back by an
    // ExternalSecret.
    apply(
        &env,
        &ns,
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "src"},
               "stringData": {"token": "pushed-value-1"}}),
    )
    .await;
    let gvk = GroupVersionKind::gvk("external-secrets.io", "v1alpha1", "PushSecret");
    let ps_api: Api<DynamicObject> = Api::namespaced_with(
        env.client(),
        &ns,
        &ApiResource::from_gvk_with_plural(&gvk, "pushsecrets"),
    );
    let ps = json!({"apiVersion": "external-secrets.io/v1alpha1", "kind": "PushSecret",
        "metadata": {"name": "push"},
        "spec": {"refreshInterval": "1h",
                 "secretStoreRefs": [{"name": "gcp", "kind": "SecretStore"}],
                 "selector": {"secret": {"name": "src"}},
                 "data": [{"match": {"secretKey": "token", "remoteRef": {"remoteKey": "pushed"}},
                           "metadata": {"apiVersion": "kubernetes.external-secrets.io/v1alpha1",
                                        "kind": "PushSecretMetadata",
                                        "spec": {"labels": {"origin": "e2e"}}}}]}});
    ps_api
        .patch(
            "push",
            &PatchParams::apply("e2e").force(),
            &Patch::Apply(&ps),
        )
        .await
        .unwrap();
    apply(
        &env,
        &ns,
        es(
            "readback",
            json!({
                "refreshInterval": "1s",
                "secretStoreRef": {"kind": "SecretStore", "name": "gcp"},
                "target": {"name": "readback"},
                "data": [
                    {"secretKey": "value", "remoteRef": {"key": "pushed"}},
                    {"secretKey": "managed", "remoteRef": {"key": "pushed", "property": "labels.managed-by", "metadataPolicy": "Fetch"}},
                    {"secretKey": "origin", "remoteRef": {"key": "pushed", "property": "labels.origin", "metadataPolicy": "Fetch"}}
                ]
            }),
        ),
    )
    .await;
    wait_secret_data(
        &env,
        &ns,
        "readback",
        &[
            ("value", "pushed-value-1"),
            ("managed", "external-secrets"),
            ("origin", "e2e"),
        ],
    )
    .await;

    // GKE workload identity: the ServiceAccount's TokenRequest token is exchanged at STS.
    apply(
        &env,
        &ns,
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": WI_SA}}),
    )
    .await;
    apply(
        &env,
        &ns,
        json!({"apiVersion": "external-secrets.io/v1", "kind": "SecretStore",
               "metadata": {"name": "gcp-wi"},
               "spec": {"provider": {"gcpsm": {"projectID": PROJECT, "auth": {"workloadIdentity": {
                   "serviceAccountRef": {"name": WI_SA},
                   "clusterLocation": LOCATION, "clusterName": CLUSTER}}}}}}),
    )
    .await;
    wait_condition(&env, "SecretStore", &ns, "gcp-wi", "True", "Valid").await;
    apply(
        &env,
        &ns,
        es(
            "wi",
            json!({
                "refreshInterval": "1h",
                "secretStoreRef": {"kind": "SecretStore", "name": "gcp-wi"},
                "target": {"name": "wi"},
                "data": [{"secretKey": "token", "remoteRef": {"key": "app-token"}}]
            }),
        ),
    )
    .await;
    wait_secret_data(&env, &ns, "wi", &[("token", "tok-123")]).await;

    // A missing remote secret: the ExternalSecret reports the error; values never hit the logs.
    wait_missing_key_fails(&env, &ns, "SecretStore", "gcp").await;
    let logs = esr.logs();
    assert!(!logs.contains("tok-123"), "{logs}");
    assert!(!logs.contains("pushed-value-1"), "{logs}");
    assert!(!logs.contains("PRIVATE KEY"), "{logs}");
    esr.stop();
    println!("gcp-controller-scenario: ok");
}
