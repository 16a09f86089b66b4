//! Behaviours moto cannot produce (it accepts any credentials and never throttles), against a
//! small fake AWS endpoint: bad credentials, AccessDenied, throttling, an unreachable endpoint,
//! the STS assume-role chain with its parameters, IRSA, and the esr provider contract.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::*;
use esr_provider_aws::{
    AwsErrorKind, CostOptions, Endpoints, RemoteRef, RetrySettings, Validation,
};

const JSON: &str = "application/x-amz-json-1.1";
const XML: &str = "text/xml";

fn sm_error(code: &str, message: &str) -> (u16, String, &'static str) {
    (
        400,
        serde_json::json!({"__type": code, "message": message}).to_string(),
        JSON,
    )
}

fn empty_list() -> (u16, String, &'static str) {
    (200, r#"{"SecretList":[]}"#.to_string(), JSON)
}

fn endpoints(url: &str) -> Endpoints {
    Endpoints {
        all: Some(url.to_string()),
        ..Default::default()
    }
}

fn one_attempt() -> RetrySettings {
    RetrySettings {
        max_retries: Some(1),
        retry_interval: None,
    }
}

#[tokio::test]
async fn bad_credentials_make_validation_fail_with_a_clear_message() {
    let fake = FakeAws::start(Arc::new(|_r| {
        sm_error(
            "UnrecognizedClientException",
            "The security token included in the request is invalid.",
        )
    }))
    .await;
    let (p, calls) = provider(endpoints(&fake.url), CostOptions::default());
    let c = ns_client(&p, &spec_secret_ref("us-east-1"), Some(&one_attempt())).await;
    let Validation::Error(e) = c.validate().await else {
        panic!("expected a validation error")
    };
    assert_eq!(e.kind, AwsErrorKind::Auth);
    assert_eq!(
        e.message,
        "ListSecrets: UnrecognizedClientException: The security token included in the request is invalid."
    );
    assert_eq!(fake.actions(), vec!["secretsmanager.ListSecrets"]);
    assert_eq!(calls.count("ListSecrets"), 1);
    // Reads fail the same way, as Auth errors.
    let e = c.get_secret(&RemoteRef::key("x")).await.unwrap_err();
    assert_eq!(e.kind, AwsErrorKind::Auth);
}

#[tokio::test]
async fn access_denied_on_list_still_validates() {
    let fake = FakeAws::start(Arc::new(|_r| {
        sm_error(
            "AccessDeniedException",
            "not authorized to perform: secretsmanager:ListSecrets",
        )
    }))
    .await;
    let (p, _) = provider(endpoints(&fake.url), CostOptions::default());
    let c = ns_client(&p, &spec_secret_ref("us-east-1"), None).await;
    assert_eq!(c.validate().await, Validation::Ready);
}

#[tokio::test]
async fn unreachable_endpoint_is_a_clear_validation_error() {
    // Bind and drop a listener to get a port nobody listens on.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let (p, _) = provider(
        endpoints(&format!("http://127.0.0.1:{port}")),
        CostOptions::default(),
    );
    let c = ns_client(&p, &spec_secret_ref("eu-west-3"), Some(&one_attempt())).await;
    let Validation::Error(e) = c.validate().await else {
        panic!("expected a validation error")
    };
    assert_eq!(e.kind, AwsErrorKind::Transient);
    assert!(
        e.message.contains("cannot reach the AWS endpoint"),
        "{}",
        e.message
    );
    assert!(e.message.contains("region \"eu-west-3\""), "{}", e.message);
}

#[tokio::test]
async fn throttling_backs_off_instead_of_hammering() {
    let fake = FakeAws::start(Arc::new(|_r| {
        sm_error("ThrottlingException", "Rate exceeded")
    }))
    .await;
    let (p, calls) = provider(endpoints(&fake.url), CostOptions::default());
    let c = ns_client(&p, &spec_secret_ref("us-east-1"), Some(&one_attempt())).await;
    let e = c
        .get_secret(&RemoteRef::key("hot").version("AWSPREVIOUS"))
        .await
        .unwrap_err();
    assert_eq!(e.kind, AwsErrorKind::Throttled);
    assert!(e.message.contains("ThrottlingException"), "{}", e.message);
    assert!(e.retry_after.is_some());
    // Further reads during the back-off fail fast without calling AWS.
    for key in ["a", "b", "c"] {
        let e = c
            .get_secret(&RemoteRef::key(key).version("AWSPREVIOUS"))
            .await
            .unwrap_err();
        assert_eq!(e.kind, AwsErrorKind::Throttled);
        assert!(e.message.contains("backing off"), "{}", e.message);
    }
    assert_eq!(fake.actions().len(), 1);
    assert_eq!(calls.count("GetSecretValue"), 1);
    // Validation reports Unknown rather than flapping the store to not-ready.
    assert_eq!(c.validate().await, Validation::Unknown);
}

/// STS answers AssumeRole with credentials named after the role; Secrets Manager lists nothing.
fn sts_and_sm(deny_role: Option<&'static str>) -> Arc<Responder> {
    Arc::new(move |r: &SeenRequest| match r.action.as_str() {
        "AssumeRole" => {
            let arn = r.params.get("RoleArn").cloned().unwrap_or_default();
            if Some(arn.as_str()) == deny_role {
                return (
                    403,
                    sts_error_xml(
                        "AccessDenied",
                        "User is not authorized to perform: sts:AssumeRole",
                    ),
                    XML,
                );
            }
            let name = arn.rsplit('/').next().unwrap_or("x").to_string();
            (200, sts_credentials_xml("AssumeRole", &name), XML)
        }
        "AssumeRoleWithWebIdentity" => (
            200,
            sts_credentials_xml("AssumeRoleWithWebIdentity", "irsa"),
            XML,
        ),
        _ => empty_list(),
    })
}

fn role_spec() -> serde_json::Value {
    let mut spec = spec_secret_ref("us-east-1");
    spec["additionalRoles"] = serde_json::json!([
        "arn:aws:iam::111111111111:role/first",
        "arn:aws:iam::222222222222:role/second"
    ]);
    spec["role"] = serde_json::json!("arn:aws:iam::333333333333:role/final");
    spec["externalID"] = serde_json::json!("ext-1");
    spec["sessionTags"] = serde_json::json!([{"key": "team", "value": "payments"}]);
    spec["transitiveTagKeys"] = serde_json::json!(["team"]);
    spec
}

#[tokio::test]
async fn assume_role_chain_with_external_id_and_session_tags() {
    let fake = FakeAws::start(sts_and_sm(None)).await;
    let (p, calls) = provider(endpoints(&fake.url), CostOptions::default());
    let kube = FakeKube::with_aws_keys("ns");
    let c = p
        .client(
            &role_spec(),
            None,
            &store("st", "ns"),
            Some("ns"),
            kube.clone(),
        )
        .await
        .unwrap();
    assert_eq!(c.validate().await, Validation::Ready);

    let seen = fake.seen.lock().unwrap().clone();
    let sts: Vec<_> = seen.iter().filter(|r| r.action == "AssumeRole").collect();
    let roles: Vec<&str> = sts.iter().map(|r| r.params["RoleArn"].as_str()).collect();
    assert_eq!(
        roles,
        vec![
            "arn:aws:iam::111111111111:role/first",
            "arn:aws:iam::222222222222:role/second",
            "arn:aws:iam::333333333333:role/final"
        ]
    );
    // Static keys sign the first hop, each hop's credentials sign the next.
    assert!(
        sts[0].authorization.contains("Credential=testing/"),
        "{}",
        sts[0].authorization
    );
    assert!(sts[1].authorization.contains("Credential=first/"));
    assert!(sts[2].authorization.contains("Credential=second/"));
    // Only the final role gets the external id and the session tags.
    assert!(!sts[0].params.contains_key("ExternalId"));
    assert_eq!(sts[2].params["ExternalId"], "ext-1");
    assert_eq!(sts[2].params["Tags.member.1.Key"], "team");
    assert_eq!(sts[2].params["Tags.member.1.Value"], "payments");
    assert_eq!(sts[2].params["TransitiveTagKeys.member.1"], "team");
    let list = seen
        .iter()
        .find(|r| r.action == "secretsmanager.ListSecrets")
        .unwrap();
    assert!(
        list.authorization.contains("Credential=final/"),
        "{}",
        list.authorization
    );
    assert_eq!(calls.count("AssumeRole"), 3);

    // The same store again: the client and its credentials are reused, STS is not called.
    let again = p
        .client(&role_spec(), None, &store("st", "ns"), Some("ns"), kube)
        .await
        .unwrap();
    assert!(Arc::ptr_eq(&c, &again));
    assert_eq!(again.validate().await, Validation::Ready);
    assert_eq!(calls.count("AssumeRole"), 3);
}

#[tokio::test]
async fn assume_role_failure_is_a_clear_validation_error() {
    let fake = FakeAws::start(sts_and_sm(Some("arn:aws:iam::333333333333:role/final"))).await;
    let (p, _) = provider(endpoints(&fake.url), CostOptions::default());
    let c = ns_client(&p, &role_spec(), Some(&one_attempt())).await;
    let Validation::Error(e) = c.validate().await else {
        panic!("expected a validation error")
    };
    assert_eq!(e.kind, AwsErrorKind::Auth);
    assert!(
        e.message.contains(
            "assuming role arn:aws:iam::333333333333:role/final failed: AssumeRole: AccessDenied"
        ),
        "{}",
        e.message
    );
    assert!(
        !fake
            .actions()
            .contains(&"secretsmanager.ListSecrets".to_string())
    );
}

#[tokio::test]
async fn irsa_uses_token_request_and_web_identity() {
    let fake = FakeAws::start(sts_and_sm(None)).await;
    let (p, calls) = provider(endpoints(&fake.url), CostOptions::default());
    let kube = Arc::new(FakeKube::default());
    let mut ann = BTreeMap::new();
    ann.insert(
        "eks.amazonaws.com/role-arn".to_string(),
        "arn:aws:iam::123456789012:role/irsa".to_string(),
    );
    kube.annotations
        .lock()
        .unwrap()
        .insert(("ns".into(), "esr-sa".into()), ann);
    let spec = serde_json::json!({
        "service": "SecretsManager", "region": "us-east-1",
        "auth": {"jwt": {"serviceAccountRef": {"name": "esr-sa", "audiences": ["extra"]}}}
    });
    let c = p
        .client(&spec, None, &store("st", "ns"), Some("ns"), kube.clone())
        .await
        .unwrap();
    assert_eq!(c.validate().await, Validation::Ready);
    let seen = fake.seen.lock().unwrap().clone();
    let wi = seen
        .iter()
        .find(|r| r.action == "AssumeRoleWithWebIdentity")
        .unwrap();
    assert_eq!(wi.params["RoleArn"], "arn:aws:iam::123456789012:role/irsa");
    assert_eq!(wi.params["WebIdentityToken"], "token-for-ns-esr-sa");
    assert_eq!(
        wi.params["RoleSessionName"],
        "external-secrets-provider-aws"
    );
    let tokens = kube.tokens.lock().unwrap().clone();
    assert_eq!(
        tokens,
        vec![(
            "ns".to_string(),
            "esr-sa".to_string(),
            vec!["sts.amazonaws.com".to_string(), "extra".to_string()]
        )]
    );
    let list = seen
        .iter()
        .find(|r| r.action == "secretsmanager.ListSecrets")
        .unwrap();
    assert!(list.authorization.contains("Credential=irsa/"));
    assert_eq!(calls.count("AssumeRoleWithWebIdentity"), 1);

    // No role annotation: ESO's error.
    kube.annotations.lock().unwrap().clear();
    kube.annotations
        .lock()
        .unwrap()
        .insert(("ns".into(), "esr-sa".into()), BTreeMap::new());
    let e = p
        .client(&spec, None, &store("st2", "ns"), Some("ns"), kube)
        .await
        .unwrap_err();
    assert_eq!(
        e.message,
        "an IAM role must be associated with service account esr-sa (namespace: ns)"
    );
}

/// The esr provider contract: registry-facing provider, KubeAccess for credentials, the
/// controller's recorder for `externalsecret_provider_api_calls_count`.
#[tokio::test]
async fn esr_provider_contract() {
    use esr_provider::metrics::MemoryRecorder;
    use esr_provider::{
        ClientContext, Provider, SecretRef, StaticKubeAccess, StoreInfo, StoreKind,
    };
    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::Secret;

    let fake = FakeAws::start(Arc::new(|r: &SeenRequest| match r.action.as_str() {
        "secretsmanager.GetSecretValue" if r.body.contains("\"missing\"") => sm_error(
            "ResourceNotFoundException",
            "Secrets Manager can't find the specified secret.",
        ),
        "secretsmanager.GetSecretValue" => (
            200,
            serde_json::json!({
                "ARN": "arn:aws:secretsmanager:us-east-1:123456789012:secret:app-AbCdEf",
                "Name": "app", "VersionId": "v1", "VersionStages": ["AWSCURRENT"],
                "SecretString": "{\"user\":\"u\",\"pass\":\"p\"}", "CreatedDate": 1.7e9
            })
            .to_string(),
            JSON,
        ),
        _ => empty_list(),
    }))
    .await;
    let provider =
        esr_provider_aws::AwsSecretsManagerProvider::new(esr_provider_aws::AwsProviderOptions {
            endpoints: endpoints(&fake.url),
            cost: CostOptions {
                batch_window: std::time::Duration::ZERO,
                ..CostOptions::default()
            },
            ..Default::default()
        });
    assert_eq!(provider.name(), "aws");
    assert_eq!(provider.metric_provider(), "AWS/SecretsManager");

    let kube = Arc::new(StaticKubeAccess::new());
    let mut s = Secret::default();
    s.metadata.name = Some("aws".into());
    s.metadata.namespace = Some("ns".into());
    s.data = Some(
        [
            ("id".to_string(), ByteString(b"testing".to_vec())),
            ("secret".to_string(), ByteString(b"testing".to_vec())),
        ]
        .into_iter()
        .collect(),
    );
    kube.add_secret(s);
    let store = StoreInfo::new(
        StoreKind::SecretStore,
        "st",
        Some("ns".into()),
        serde_json::json!({"provider": {"aws": spec_secret_ref("us-east-1")}}),
    );
    assert!(provider.validate_store(&store).unwrap().is_empty());
    let recorder = Arc::new(MemoryRecorder::new());
    let ctx = ClientContext::new(&store, Some("ns"), kube).with_recorder(recorder.clone());
    let client = provider.new_client(&ctx).await.unwrap();
    let refs = [
        SecretRef::new("app").with_property("user"),
        SecretRef::new("app").with_property("pass"),
        SecretRef::new("missing"),
    ];
    let res = client.get_secrets(&refs).await;
    assert_eq!(res[0].as_ref().unwrap(), b"u");
    assert_eq!(res[1].as_ref().unwrap(), b"p");
    let e = res[2].as_ref().unwrap_err();
    assert!(e.is_not_found());
    assert_eq!(e.to_string(), "Secret does not exist");
    // One call per distinct secret, recorded with ESO's labels.
    assert_eq!(recorder.count("GetSecretValue"), 2);
    assert!(
        recorder
            .calls()
            .iter()
            .all(|c| c.provider == "AWS/SecretsManager")
    );

    // A namespaced store may not point at another namespace (ESO's webhook rule).
    let mut bad = spec_secret_ref("us-east-1");
    bad["auth"]["secretRef"]["accessKeyIDSecretRef"]["namespace"] = serde_json::json!("other");
    let store = StoreInfo::new(
        StoreKind::SecretStore,
        "st",
        Some("ns".into()),
        serde_json::json!({"provider": {"aws": bad}}),
    );
    let e = provider.validate_store(&store).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("invalid Auth.SecretRef.AccessKeyID"),
        "{e}"
    );
}

/// Principals whose IAM policy predates BatchGetSecretValue (ESO-era policies) keep working:
/// the batch call is denied once, then esr reads with GetSecretValue only.
#[tokio::test]
async fn batch_denied_falls_back_to_get_secret_value() {
    let fake = FakeAws::start(Arc::new(|r: &SeenRequest| match r.action.as_str() {
        "secretsmanager.BatchGetSecretValue" => sm_error(
            "AccessDeniedException",
            "not authorized to perform: secretsmanager:BatchGetSecretValue",
        ),
        "secretsmanager.GetSecretValue" => {
            let id: serde_json::Value = serde_json::from_str(&r.body).unwrap();
            let id = id["SecretId"].as_str().unwrap().to_string();
            (
                200,
                serde_json::json!({"ARN": format!("arn:aws:secretsmanager:us-east-1:1:secret:{id}-x"),
                    "Name": id, "VersionId": "v1", "SecretString": format!("value-{id}")})
                .to_string(),
                JSON,
            )
        }
        _ => empty_list(),
    }))
    .await;
    let cost = CostOptions {
        batch_window: std::time::Duration::from_millis(200),
        ..CostOptions::default()
    };
    let (p, calls) = provider(endpoints(&fake.url), cost);
    let c = ns_client(&p, &spec_secret_ref("us-east-1"), Some(&one_attempt())).await;
    let res = c
        .get_secrets(&[
            RemoteRef::key("a"),
            RemoteRef::key("b"),
            RemoteRef::key("c"),
        ])
        .await;
    let values: Vec<Vec<u8>> = res.into_iter().map(Result::unwrap).collect();
    assert_eq!(
        values,
        vec![
            b"value-a".to_vec(),
            b"value-b".to_vec(),
            b"value-c".to_vec()
        ]
    );
    assert_eq!(calls.count("BatchGetSecretValue"), 1);
    assert_eq!(calls.count("GetSecretValue"), 3);
    // Batching stays off for this client afterwards.
    let res = c
        .get_secrets(&[RemoteRef::key("d"), RemoteRef::key("e")])
        .await;
    assert!(res.iter().all(Result::is_ok));
    assert_eq!(calls.count("BatchGetSecretValue"), 1);
    assert_eq!(calls.count("GetSecretValue"), 5);
}

/// `sessionTagsPolicy: Simple` adds esoNamespace / esoStoreName / esoStoreKind to the AssumeRole
/// session tags; ExternalSecrets of different namespaces therefore get different sessions.
#[tokio::test]
async fn session_tags_policy_simple_tags_each_namespace() {
    let fake = FakeAws::start(sts_and_sm(None)).await;
    let (p, calls) = provider(endpoints(&fake.url), CostOptions::default());
    let kube = FakeKube::with_aws_keys("esr-system");
    let mut spec = spec_secret_ref("us-east-1");
    spec["auth"]["secretRef"]["accessKeyIDSecretRef"]["namespace"] =
        serde_json::json!("esr-system");
    spec["auth"]["secretRef"]["secretAccessKeySecretRef"]["namespace"] =
        serde_json::json!("esr-system");
    spec["role"] = serde_json::json!("arn:aws:iam::333333333333:role/abac");
    spec["sessionTagsPolicy"] = serde_json::json!("Simple");
    let cs = cluster_store("shared");
    let a = p
        .client(&spec, None, &cs, Some("team-a"), kube.clone())
        .await
        .unwrap();
    let b = p
        .client(&spec, None, &cs, Some("team-b"), kube.clone())
        .await
        .unwrap();
    assert!(!Arc::ptr_eq(&a, &b));
    assert_eq!(a.validate().await, Validation::Ready);
    assert_eq!(b.validate().await, Validation::Ready);
    let seen = fake.seen.lock().unwrap().clone();
    let tags_of = |r: &SeenRequest| -> BTreeMap<String, String> {
        (1..=10)
            .filter_map(|i| {
                Some((
                    r.params.get(&format!("Tags.member.{i}.Key"))?.clone(),
                    r.params.get(&format!("Tags.member.{i}.Value"))?.clone(),
                ))
            })
            .collect()
    };
    let sts: Vec<BTreeMap<String, String>> = seen
        .iter()
        .filter(|r| r.action == "AssumeRole")
        .map(tags_of)
        .collect();
    assert_eq!(sts.len(), 2);
    for (tags, ns) in sts.iter().zip(["team-a", "team-b"]) {
        assert_eq!(tags["esoNamespace"], ns);
        assert_eq!(tags["esoStoreName"], "shared");
        assert_eq!(tags["esoStoreKind"], "ClusterSecretStore");
    }
    assert_eq!(calls.count("AssumeRole"), 2);
}

/// `spec.retrySettings` drives the SDK retries: maxRetries is the number of attempts,
/// retryInterval the delay between them.
#[tokio::test]
async fn retry_settings_bound_attempts() {
    let fake = FakeAws::start(Arc::new(|_r| {
        (
            500,
            serde_json::json!({"__type": "InternalServiceError", "message": "boom"}).to_string(),
            JSON,
        )
    }))
    .await;
    let (p, calls) = provider(endpoints(&fake.url), CostOptions::default());
    let retry = RetrySettings {
        max_retries: Some(2),
        retry_interval: Some("10ms".into()),
    };
    let c = ns_client(&p, &spec_secret_ref("us-east-1"), Some(&retry)).await;
    let e = c
        .get_secret(&RemoteRef::key("x").version("AWSPREVIOUS"))
        .await
        .unwrap_err();
    assert_eq!(e.kind, AwsErrorKind::Transient);
    assert!(
        e.message.contains("InternalServiceError: boom"),
        "{}",
        e.message
    );
    // Two attempts on the wire, one call as far as the metric is concerned.
    assert_eq!(fake.actions().len(), 2);
    assert_eq!(calls.count("GetSecretValue"), 1);

    // An invalid retryInterval is a clear store error.
    let bad = RetrySettings {
        max_retries: None,
        retry_interval: Some("soon".into()),
    };
    let e = p
        .client(
            &spec_secret_ref("us-east-1"),
            Some(&bad),
            &store("st2", "ns"),
            Some("ns"),
            FakeKube::with_aws_keys("ns"),
        )
        .await
        .unwrap_err();
    assert!(e.message.contains("invalid duration"), "{}", e.message);
}
