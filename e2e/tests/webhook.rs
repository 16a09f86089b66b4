//! The webhook provider and the Webhook generator through `esr controller`, against an HTTPS
//! secret service started in this test (`esr_test_http_server::SecretService`, trusted through the
//! store's `caBundle`):
//! * a SecretStore with a bearer token from a labelled Secret becomes Ready; an ExternalSecret
//!   syncs `data` (a templated JSONPath) and `dataFrom.extract`; a missing key fails the sync;
//! * a namespaced `Webhook` generator and a `ClusterGenerator` wrapping one feed ExternalSecrets;
//! * the requests are counted as `Webhook`/`HTTPRequest`, and no value reaches the logs.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod es_support;

use base64::Engine;
use es_support::*;
use esr_test_http_server::SecretService;
use serde_json::json;

const TOKEN: &str = "e2e-token-5b1c";

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_store_and_generator_through_the_controller() {
    let svc = SecretService::new(Some(TOKEN));
    svc.put(
        "db",
        json!({"user": "alice", "password": "pw-7f3e", "port": 5432}),
    );
    let srv = svc.start_https().await;
    let ca = b64(srv.ca_pem().unwrap());

    let env = esr_e2e::Env::start().await.unwrap();
    let ns = env.namespace("webhook").await.unwrap();
    let mut esr = env.start_esr(&[]).unwrap();
    apply(
        &env,
        &ns,
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "api-creds", "labels": {"external-secrets.io/type": "webhook"}},
               "stringData": {"token": TOKEN}}),
    )
    .await;
    let store = json!({
        "url": format!("{}/secrets/{{{{ .remoteRef.key }}}}", srv.url()),
        "headers": {"Authorization": "Bearer {{ .auth.token }}"},
        "result": {"jsonPath": "{{ if .remoteRef.property }}$.data.{{ .remoteRef.property }}{{ else }}$.data{{ end }}"},
        "secrets": [{"name": "auth", "secretRef": {"name": "api-creds"}}],
        "caBundle": ca,
        "timeout": "5s"
    });
    apply(
        &env,
        &ns,
        json!({"apiVersion": "external-secrets.io/v1", "kind": "SecretStore",
               "metadata": {"name": "api"},
               "spec": {"provider": {"webhook": store}}}),
    )
    .await;
    wait_read_write_store(&env, "SecretStore", &ns, "api").await;
    apply(
        &env,
        &ns,
        es(
            "app",
            json!({
                "refreshInterval": "1h",
                "secretStoreRef": {"kind": "SecretStore", "name": "api"},
                "target": {"name": "app"},
                "data": [{"secretKey": "db-password", "remoteRef": {"key": "db", "property": "password"}}],
                "dataFrom": [{"extract": {"key": "db"}}]
            }),
        ),
    )
    .await;
    wait_secret_data(
        &env,
        &ns,
        "app",
        &[
            ("db-password", "pw-7f3e"),
            ("user", "alice"),
            ("password", "pw-7f3e"),
            ("port", "5432"),
        ],
    )
    .await;
    wait_condition(&env, "ExternalSecret", &ns, "app", "True", "SecretSynced").await;
    let reqs = svc.requests();
    assert!(
        reqs.iter()
            .all(|r| r.headers.get("authorization").map(String::as_str)
                == Some(&*format!("Bearer {TOKEN}"))),
        "every request carries the templated credential"
    );

    // A missing remote key: the sync fails (and the store stays usable).
    apply(
        &env,
        &ns,
        es(
            "missing",
            json!({
                "secretStoreRef": {"kind": "SecretStore", "name": "api"},
                "target": {"name": "missing"},
                "data": [{"secretKey": "x", "remoteRef": {"key": "nope", "property": "x"}}]
            }),
        ),
    )
    .await;
    wait_condition(
        &env,
        "ExternalSecret",
        &ns,
        "missing",
        "False",
        "SecretSyncedError",
    )
    .await;

    // The Webhook generator: one POST per sync, its answer's object is the data.
    let generator = json!({
        "url": format!("{}/generate", srv.url()),
        "method": "POST",
        "headers": {"Authorization": "Bearer {{ .auth.token }}"},
        "result": {"jsonPath": "$.credentials"},
        "secrets": [{"name": "auth", "secretRef": {"name": "api-creds"}}],
        "caBundle": ca
    });
    apply(
        &env,
        &ns,
        json!({"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "Webhook",
               "metadata": {"name": "issuer", "namespace": ns}, "spec": generator}),
    )
    .await;
    apply(
        &env,
        &ns,
        es(
            "generated",
            json!({
                "refreshInterval": "1h",
                "target": {"name": "generated"},
                "dataFrom": [{"sourceRef": {"generatorRef": {
                    "apiVersion": "generators.external-secrets.io/v1alpha1",
                    "kind": "Webhook", "name": "issuer"}}}]
            }),
        ),
    )
    .await;
    wait_condition(
        &env,
        "ExternalSecret",
        &ns,
        "generated",
        "True",
        "SecretSynced",
    )
    .await;
    let data = decoded(&secret(&env, &ns, "generated").await.unwrap());
    assert_eq!(data["username"], "gen-user");
    assert!(data["password"].starts_with("gen-"), "{data:?}");

    // The same request as a ClusterGenerator: the Secret is read in the ExternalSecret's
    // namespace.
    let cg = format!("issuer-{}", env.id());
    apply(
        &env,
        "",
        json!({"apiVersion": "generators.external-secrets.io/v1alpha1", "kind": "ClusterGenerator",
               "metadata": {"name": cg},
               "spec": {"kind": "Webhook", "generator": {"webhookSpec": generator}}}),
    )
    .await;
    apply(
        &env,
        &ns,
        es(
            "cluster-generated",
            json!({
                "refreshInterval": "1h",
                "target": {"name": "cluster-generated"},
                "dataFrom": [{"sourceRef": {"generatorRef": {
                    "apiVersion": "generators.external-secrets.io/v1alpha1",
                    "kind": "ClusterGenerator", "name": cg}}}]
            }),
        ),
    )
    .await;
    wait_condition(
        &env,
        "ExternalSecret",
        &ns,
        "cluster-generated",
        "True",
        "SecretSynced",
    )
    .await;
    let data = decoded(&secret(&env, &ns, "cluster-generated").await.unwrap());
    assert_eq!(data["username"], "gen-user");
    assert!(
        svc.requests()
            .iter()
            .filter(|r| r.path_and_query == "/generate")
            .all(|r| r.method == "POST")
    );

    // Every request is counted as provider Webhook, call HTTPRequest.
    let metrics = esr_e2e::metrics_text(esr.metrics_addr.as_deref().unwrap()).unwrap();
    let counted = esr_e2e::metric_sum(
        &metrics,
        "externalsecret_provider_api_calls_count",
        &[
            r#"provider="Webhook""#,
            r#"call="HTTPRequest""#,
            r#"status="success""#,
        ],
    );
    assert!(counted >= 4.0, "{counted}: {metrics}");

    let logs = esr.logs();
    for needle in [TOKEN, "pw-7f3e", "alice"] {
        assert!(!logs.contains(needle), "{needle} in the logs:\n{logs}");
    }
    esr.stop();
}
