//! AWS Parameter Store and the AWS generators end to end, against moto, with the standard
//! `AWS_ENDPOINT_URL` variable pointing `esr controller` at moto:
//! * a SecretStore with `service: ParameterStore`: an ExternalSecret with a property, a pinned
//!   version, `metadataPolicy: Fetch` and `find` by path and name; a rotated value picked up on
//!   refresh; a PushSecret creating a managed parameter and deleting it with the PushSecret; the
//!   calls counted under `AWS/ParameterStore`;
//! * `ECRAuthorizationToken` rendered into a `kubernetes.io/dockerconfigjson` Secret, and
//!   `STSSessionToken` through a `ClusterGenerator`;
//! * `esr migrate kes` output for KES `systemManager` objects (IRSA through the ServiceAccount
//!   annotation, a role to assume, a path read) syncing as KES would have.
//!
//! Run with `scripts/test-servers.sh cargo nextest run -p esr-e2e --test aws_ssm`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod es_support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;

use serde_json::{Value, json};

/// One SSM call to moto (which accepts any signature) in `region`: (HTTP status, body).
fn ssm_call(endpoint: &str, region: &str, target: &str, body: &Value) -> (u16, Value) {
    let hostport = endpoint.trim_start_matches("http://").trim_end_matches('/');
    let body = body.to_string();
    let mut s = TcpStream::connect(hostport).unwrap();
    let req = format!(
        "POST / HTTP/1.1\r\nHost: {hostport}\r\nX-Amz-Target: AmazonSSM.{target}\r\n\
         Content-Type: application/x-amz-json-1.1\r\n\
         Authorization: AWS4-HMAC-SHA256 Credential=testing/20260101/{region}/ssm/aws4_request, SignedHeaders=host, Signature=00\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    let status: u16 = resp
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let payload = resp.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    (status, serde_json::from_str(payload).unwrap_or(Value::Null))
}

fn put_parameter(endpoint: &str, region: &str, name: &str, value: &str, tags: Value) {
    let mut body = json!({"Name": name, "Value": value, "Type": "SecureString", "Overwrite": true});
    if tags.as_object().is_some_and(|t| !t.is_empty()) {
        body["Overwrite"] = json!(false);
        body["Tags"] = Value::Array(
            tags.as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| json!({"Key": k, "Value": v}))
                .collect(),
        );
    }
    let (status, out) = ssm_call(endpoint, region, "PutParameter", &body);
    assert_eq!(status, 200, "PutParameter {name}: {out}");
}

/// The decrypted value of a parameter, or None when it does not exist.
fn get_parameter(endpoint: &str, region: &str, name: &str) -> Option<String> {
    let (status, out) = ssm_call(
        endpoint,
        region,
        "GetParameter",
        &json!({"Name": name, "WithDecryption": true}),
    );
    if status == 400
        && out["__type"]
            .as_str()
            .unwrap_or_default()
            .contains("ParameterNotFound")
    {
        return None;
    }
    assert_eq!(status, 200, "GetParameter {name}: {out}");
    out["Parameter"]["Value"].as_str().map(str::to_string)
}

fn http_get(addr: &str, path: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    resp
}

/// Runs `scenario` (an ignored test of this binary) in a child process with `AWS_ENDPOINT_URL`
/// set: the controller inherits its environment from the test process, and tests cannot set
/// environment variables in-process.
fn run_with_moto_env(scenario: &str) {
    let Some(moto) = esr_e2e::moto_endpoint() else {
        return;
    };
    esr_e2e::run_ignored_in_child(scenario, &format!("{scenario}: ok"), |cmd| {
        cmd.env("AWS_ENDPOINT_URL", &moto).env_remove("AWS_PROFILE");
    })
    .unwrap();
}

fn moto_env() -> Option<String> {
    match (esr_e2e::moto_endpoint(), std::env::var("AWS_ENDPOINT_URL")) {
        (Some(m), Ok(e)) if m == e => Some(m),
        _ => {
            println!("skipped: needs ESR_TEST_MOTO_ENDPOINT and the same AWS_ENDPOINT_URL");
            None
        }
    }
}

async fn creds_secret(env: &esr_e2e::Env, ns: &str) {
    es_support::apply(
        env,
        ns,
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "aws-creds", "namespace": ns},
               "stringData": {"id": "testing", "secret": "testing"}}),
    )
    .await;
}

fn secret_ref_auth() -> Value {
    json!({"secretRef": {
        "accessKeyIDSecretRef": {"name": "aws-creds", "key": "id"},
        "secretAccessKeySecretRef": {"name": "aws-creds", "key": "secret"}}})
}

#[test]
fn parameter_store_sync_push_and_metrics() {
    run_with_moto_env("parameter_store_scenario");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by parameter_store_sync_push_and_metrics with AWS_ENDPOINT_URL set"]
async fn parameter_store_scenario() {
    use es_support::*;
    let Some(moto) = moto_env() else { return };
    let run = format!("/ps{}", std::process::id());
    let r = "us-east-1";
    put_parameter(
        &moto,
        r,
        &format!("{run}/db"),
        r#"{"user":"alice","pass":"v1"}"#,
        json!({}),
    );
    put_parameter(
        &moto,
        r,
        &format!("{run}/plain"),
        "text-v1",
        json!({"team": "a"}),
    );
    put_parameter(&moto, r, &format!("{run}/plain"), "text-v2", json!({}));

    let env = esr_e2e::Env::start().await.unwrap();
    let ns = env.namespace("ssm").await.unwrap();
    let esr = env.start_esr(&[]).unwrap();
    creds_secret(&env, &ns).await;
    apply(
        &env,
        &ns,
        json!({"apiVersion": "external-secrets.io/v1", "kind": "SecretStore",
               "metadata": {"name": "ssm", "namespace": ns},
               "spec": {"provider": {"aws": {
                   "service": "ParameterStore", "region": r, "auth": secret_ref_auth()}}}}),
    )
    .await;
    wait_read_write_store(&env, "SecretStore", &ns, "ssm").await;
    apply(
        &env,
        &ns,
        es(
            "app",
            json!({
                "refreshInterval": "1s",
                "secretStoreRef": {"kind": "SecretStore", "name": "ssm"},
                "target": {"name": "app"},
                "data": [
                    {"secretKey": "username", "remoteRef": {"key": format!("{run}/db"), "property": "user"}},
                    {"secretKey": "latest", "remoteRef": {"key": format!("{run}/plain")}},
                    {"secretKey": "first", "remoteRef": {"key": format!("{run}/plain"), "version": "1"}},
                    {"secretKey": "team", "remoteRef": {"key": format!("{run}/plain"),
                        "metadataPolicy": "Fetch", "property": "team"}}
                ],
                "dataFrom": [
                    {"find": {"path": run, "name": {"regexp": "db$"}},
                     "rewrite": [{"regexp": {"source": ".*/", "target": ""}}]}
                ]
            }),
        ),
    )
    .await;
    wait_secret_data(
        &env,
        &ns,
        "app",
        &[
            ("username", "alice"),
            ("latest", "text-v2"),
            ("first", "text-v1"),
            ("team", "a"),
            ("db", r#"{"user":"alice","pass":"v1"}"#),
        ],
    )
    .await;
    wait_condition(&env, "ExternalSecret", &ns, "app", "True", "SecretSynced").await;

    // Rotate in Parameter Store: the next refresh picks the new value up.
    put_parameter(
        &moto,
        r,
        &format!("{run}/db"),
        r#"{"user":"bob","pass":"v2"}"#,
        json!({}),
    );
    wait_secret_data(
        &env,
        &ns,
        "app",
        &[
            ("username", "bob"),
            ("latest", "text-v2"),
            ("first", "text-v1"),
            ("team", "a"),
            ("db", r#"{"user":"bob","pass":"v2"}"#),
        ],
    )
    .await;

    // PushSecret: creates a managed parameter; deleting the PushSecret deletes it.
    apply(
        &env,
        &ns,
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "src", "namespace": ns},
               "stringData": {"token": "pushed-value"}}),
    )
    .await;
    let pushed = format!("{run}/pushed");
    apply(
        &env,
        &ns,
        json!({"apiVersion": "external-secrets.io/v1alpha1", "kind": "PushSecret",
               "metadata": {"name": "push", "namespace": ns},
               "spec": {
                   "refreshInterval": "1s",
                   "deletionPolicy": "Delete",
                   "secretStoreRefs": [{"kind": "SecretStore", "name": "ssm"}],
                   "selector": {"secret": {"name": "src"}},
                   "data": [{"match": {"secretKey": "token", "remoteRef": {"remoteKey": pushed}},
                             "metadata": {"apiVersion": "kubernetes.external-secrets.io/v1alpha1",
                                          "kind": "PushSecretMetadata",
                                          "spec": {"secretType": "SecureString",
                                                   "tags": {"team": "a"}}}}]}}),
    )
    .await;
    wait_condition(&env, "PushSecret", &ns, "push", "True", "Synced").await;
    assert_eq!(
        get_parameter(&moto, r, &pushed).as_deref(),
        Some("pushed-value")
    );
    delete(&env, "PushSecret", &ns, "push").await;
    esr_e2e::wait_for("pushed parameter deleted", TIMEOUT, || async {
        get_parameter(&moto, r, &pushed).is_none().then_some(())
    })
    .await
    .unwrap();
    // A parameter esr does not manage is left alone: the PushSecret fails.
    let foreign = format!("{run}/foreign");
    put_parameter(&moto, r, &foreign, "theirs", json!({"owner": "someone"}));
    apply(
        &env,
        &ns,
        json!({"apiVersion": "external-secrets.io/v1alpha1", "kind": "PushSecret",
               "metadata": {"name": "push-foreign", "namespace": ns},
               "spec": {
                   "refreshInterval": "1h",
                   "secretStoreRefs": [{"kind": "SecretStore", "name": "ssm"}],
                   "selector": {"secret": {"name": "src"}},
                   "data": [{"match": {"secretKey": "token", "remoteRef": {"remoteKey": foreign}}}]}}),
    )
    .await;
    let ps = wait_condition(&env, "PushSecret", &ns, "push-foreign", "False", "Errored").await;
    assert!(
        ready(&ps)
            .2
            .contains("secret not managed by external-secrets"),
        "{ps}"
    );
    assert_eq!(get_parameter(&moto, r, &foreign).as_deref(), Some("theirs"));

    // Calls are counted with ESO's metric and labels.
    let metrics = http_get(esr.metrics_addr.as_deref().unwrap(), "/metrics");
    let ps_lines: Vec<&str> = metrics
        .lines()
        .filter(|l| {
            l.starts_with("externalsecret_provider_api_calls_count")
                && l.contains(r#"provider="AWS/ParameterStore""#)
        })
        .collect();
    // Which reads go through `GetParameters` depends on what the find already cached; the
    // batching itself is pinned by the moto tests of esr-provider-aws (tests/moto_ssm.rs).
    for call in [
        "GetParameter",
        "GetParametersByPath",
        "ListTagsForResource",
        "PutParameter",
    ] {
        assert!(
            ps_lines
                .iter()
                .any(|l| l.contains(&format!(r#"call="{call}""#))
                    && l.contains(r#"status="success""#)),
            "{call}: {ps_lines:?}"
        );
    }
    let logs = esr.logs();
    assert!(
        !logs.contains("pushed-value") && !logs.contains("text-v1"),
        "{logs}"
    );
    println!("parameter_store_scenario: ok");
}

#[test]
fn ecr_and_sts_generators() {
    run_with_moto_env("generators_scenario");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by ecr_and_sts_generators with AWS_ENDPOINT_URL set"]
async fn generators_scenario() {
    use es_support::*;
    if moto_env().is_none() {
        return;
    }
    let env = esr_e2e::Env::start().await.unwrap();
    let ns = env.namespace("awsgen").await.unwrap();
    let _esr = env.start_esr(&[]).unwrap();
    creds_secret(&env, &ns).await;
    apply(
        &env,
        &ns,
        json!({"apiVersion": "generators.external-secrets.io/v1alpha1",
               "kind": "ECRAuthorizationToken",
               "metadata": {"name": "ecr", "namespace": ns},
               "spec": {"region": "eu-west-1", "auth": secret_ref_auth()}}),
    )
    .await;
    // The ESO documentation's pull-secret template.
    apply(
        &env,
        &ns,
        es(
            "ecr",
            json!({
                "refreshInterval": "1h",
                "target": {"name": "ecr", "template": {
                    "type": "kubernetes.io/dockerconfigjson",
                    "data": {".dockerconfigjson": "{\"auths\":{\"{{ .proxy_endpoint | replace \"https://\" \"\" }}\":{\"username\":\"{{ .username }}\",\"password\":\"{{ .password }}\",\"auth\":\"{{ printf \"%s:%s\" .username .password | b64enc }}\"}}}"}
                }},
                "dataFrom": [{"sourceRef": {"generatorRef": {
                    "apiVersion": "generators.external-secrets.io/v1alpha1",
                    "kind": "ECRAuthorizationToken", "name": "ecr"}}}]
            }),
        ),
    )
    .await;
    wait_condition(&env, "ExternalSecret", &ns, "ecr", "True", "SecretSynced").await;
    let s = secret(&env, &ns, "ecr").await.unwrap();
    assert_eq!(s.type_.as_deref(), Some("kubernetes.io/dockerconfigjson"));
    let cfg: Value = serde_json::from_str(&decoded(&s)[".dockerconfigjson"]).unwrap();
    let (registry, entry) = cfg["auths"].as_object().unwrap().iter().next().unwrap();
    assert!(registry.contains(".dkr.ecr.eu-west-1."), "{registry}");
    assert!(!registry.starts_with("https://"), "{registry}");
    assert_eq!(entry["username"], "AWS");
    let auth = {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD
            .decode(entry["auth"].as_str().unwrap())
            .unwrap()
    };
    assert_eq!(
        String::from_utf8(auth).unwrap(),
        format!("AWS:{}", entry["password"].as_str().unwrap())
    );

    // STSSessionToken through a ClusterGenerator: the credentials Secret is read in the
    // ExternalSecret's namespace.
    let cg = format!("sts-{}", env.id());
    apply(
        &env,
        "",
        json!({"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "ClusterGenerator",
               "metadata": {"name": cg},
               "spec": {"kind": "STSSessionToken", "generator": {"stsSessionTokenSpec": {
                   "region": "eu-west-1", "auth": secret_ref_auth(),
                   "requestParameters": {"sessionDuration": 900}}}}}),
    )
    .await;
    apply(
        &env,
        &ns,
        es(
            "sts",
            json!({
                "refreshInterval": "1h",
                "target": {"name": "sts"},
                "dataFrom": [{"sourceRef": {"generatorRef": {
                    "apiVersion": "generators.external-secrets.io/v1alpha1",
                    "kind": "ClusterGenerator", "name": cg}}}]
            }),
        ),
    )
    .await;
    wait_condition(&env, "ExternalSecret", &ns, "sts", "True", "SecretSynced").await;
    let s = decoded(&secret(&env, &ns, "sts").await.unwrap());
    let keys: Vec<&str> = s.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "access_key_id",
            "expiration",
            "secret_access_key",
            "session_token"
        ]
    );
    assert!(s["expiration"].parse::<i64>().unwrap() > 0);
    println!("generators_scenario: ok");
}

#[test]
fn kes_system_manager_migration_syncs() {
    run_with_moto_env("kes_system_manager_scenario");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by kes_system_manager_migration_syncs with AWS_ENDPOINT_URL set"]
async fn kes_system_manager_scenario() {
    use es_support::*;
    let Some(moto) = moto_env() else { return };
    let env = esr_e2e::Env::start().await.unwrap();
    let ns = env.namespace("kesssm").await.unwrap();
    let base = format!("/kes{}", std::process::id());
    // The KES README's systemManager objects, in this scenario's namespace and parameter tree.
    let kes = format!(
        r#"apiVersion: kubernetes-client.io/v1
kind: ExternalSecret
metadata: {{name: hello-service, namespace: {ns}}}
spec:
  backendType: systemManager
  data:
    - key: {base}/hello-service/password
      name: password
---
apiVersion: kubernetes-client.io/v1
kind: ExternalSecret
metadata: {{name: by-path, namespace: {ns}}}
spec:
  backendType: systemManager
  region: eu-central-1
  roleArn: arn:aws:iam::123456789012:role/ssm-reader
  data:
    - path: {base}/dev/hello-service
      recursive: true
    - key: {base}/dev/hello-service/json
      name: api-key
      property: apiKey
"#
    );
    put_parameter(
        &moto,
        "us-east-1",
        &format!("{base}/hello-service/password"),
        "s3cr3t",
        json!({}),
    );
    put_parameter(
        &moto,
        "eu-central-1",
        &format!("{base}/dev/hello-service/json"),
        r#"{"apiKey":"k-1"}"#,
        json!({}),
    );
    put_parameter(
        &moto,
        "eu-central-1",
        &format!("{base}/dev/hello-service/token"),
        "tok",
        json!({}),
    );

    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("kes.yaml");
    std::fs::write(&input, kes).unwrap();
    let out_dir = dir.path().join("out");
    let out = Command::new(esr_e2e::esr_binary().unwrap())
        .args([
            "migrate",
            "kes",
            "--store-kind",
            "SecretStore",
            "--aws-region",
            "us-east-1",
            "-f",
        ])
        .arg(&input)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = std::fs::read_to_string(out_dir.join("report.txt")).unwrap();
    assert!(
        !report.contains("does not implement Parameter Store"),
        "{report}"
    );

    // The ServiceAccount the converted stores authenticate as, with its IRSA role.
    apply(
        &env,
        &ns,
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": "esr-kes", "namespace": ns, "annotations": {
                   "eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/kes"}}}),
    )
    .await;
    let _esr = env.start_esr(&[]).unwrap();
    for file in ["stores.yaml", "kes.yaml"] {
        let text = std::fs::read_to_string(out_dir.join(file)).unwrap();
        for doc in yaml_serde::Deserializer::from_str(&text) {
            use serde::Deserialize as _;
            let v = Value::deserialize(doc).unwrap();
            if v.is_null() {
                continue;
            }
            if v["kind"] == "SecretStore" {
                assert_eq!(
                    v["spec"]["provider"]["aws"]["service"], "ParameterStore",
                    "{v}"
                );
            }
            apply(&env, &ns, v).await;
        }
    }
    wait_secret_data(&env, &ns, "hello-service", &[("password", "s3cr3t")]).await;
    wait_secret_data(
        &env,
        &ns,
        "by-path",
        &[
            ("api-key", "k-1"),
            ("json", r#"{"apiKey":"k-1"}"#),
            ("token", "tok"),
        ],
    )
    .await;
    wait_condition(
        &env,
        "ExternalSecret",
        &ns,
        "by-path",
        "True",
        "SecretSynced",
    )
    .await;
    println!("kes_system_manager_scenario: ok");
}
