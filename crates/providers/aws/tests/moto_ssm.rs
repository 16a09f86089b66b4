//! The Parameter Store provider and the ECR / STS generators against a real AWS API (moto).
//! Run with `scripts/test-servers.sh cargo nextest run -p esr-provider-aws`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use aws_sdk_ssm::types::{ParameterTier, ParameterType, Tag};
use common::*;
use esr_provider_aws::{
    AwsErrorKind, AwsGenerators, CostOptions, FindRef, GenerateInput, PROVIDER_ECR, PROVIDER_PS,
    PsClient, PushValue, RemoteRef, Validation,
};

fn ps_spec() -> serde_json::Value {
    let mut s = spec_secret_ref("us-east-1");
    s["service"] = "ParameterStore".into();
    s
}

async fn ps_client_with(
    moto: &str,
    cost: CostOptions,
) -> (Arc<PsClient>, esr_provider_aws::CallLog) {
    let (p, calls) = provider(moto_endpoints(moto), cost);
    let c = p
        .ps_client(
            &ps_spec(),
            None,
            &store("st", "ns"),
            Some("ns"),
            FakeKube::with_aws_keys("ns"),
        )
        .await
        .unwrap();
    (c, calls)
}

async fn ps_client(moto: &str) -> (Arc<PsClient>, esr_provider_aws::CallLog) {
    ps_client_with(moto, CostOptions::default()).await
}

/// A direct SSM client for seeding moto (its calls are not counted).
fn ssm(moto: &str) -> aws_sdk_ssm::Client {
    use aws_sdk_ssm::config::{BehaviorVersion, Credentials, Region};
    let conf = aws_sdk_ssm::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("testing", "testing", None, None, "static"))
        .endpoint_url(moto)
        .build();
    aws_sdk_ssm::Client::from_conf(conf)
}

async fn put(ssm: &aws_sdk_ssm::Client, name: &str, value: &str, tags: &[(&str, &str)]) {
    let mut req = ssm
        .put_parameter()
        .name(name)
        .value(value)
        .r#type(ParameterType::SecureString);
    for (k, v) in tags {
        req = req.tags(Tag::builder().key(*k).value(*v).build().unwrap());
    }
    req.send().await.unwrap();
}

async fn tags_of(ssm: &aws_sdk_ssm::Client, name: &str) -> BTreeMap<String, String> {
    ssm.list_tags_for_resource()
        .resource_type(aws_sdk_ssm::types::ResourceTypeForTagging::Parameter)
        .resource_id(name)
        .send()
        .await
        .unwrap()
        .tag_list()
        .iter()
        .map(|t| (t.key().to_string(), t.value().to_string()))
        .collect()
}

/// A unique parameter path (`/esr-<test>-<id>/`).
fn path(test: &str) -> String {
    format!("/{}", unique(test))
}

#[tokio::test]
async fn values_properties_versions_and_not_found() {
    let Some(moto) = moto() else { return };
    let s = ssm(&moto);
    let p = path("ps-forms");
    let json = r#"{"user":"alice","db":{"port":5432},"a.b":"literal"}"#;
    put(&s, &format!("{p}db"), json, &[]).await;
    put(&s, &format!("{p}plain"), "v1", &[]).await;
    s.put_parameter()
        .name(format!("{p}plain"))
        .value("v2")
        .overwrite(true)
        .send()
        .await
        .unwrap();

    let (c, calls) = ps_client(&moto).await;
    let db = || RemoteRef::key(format!("{p}db"));
    let cases: Vec<(RemoteRef, &[u8])> = vec![
        (db(), json.as_bytes()),
        (db().property("user"), b"alice"),
        (db().property("db.port"), b"5432"),
        (db().property("a.b"), b"literal"),
        (RemoteRef::key(format!("{p}plain")), b"v2"),
        (RemoteRef::key(format!("{p}plain")).version("1"), b"v1"),
        (RemoteRef::key(format!("{p}plain")).version("2"), b"v2"),
    ];
    for (r, want) in cases {
        let what = format!("{r:?}");
        assert_eq!(c.get_secret(&r).await.unwrap(), want, "{what}");
    }
    let e = c.get_secret(&db().property("nope")).await.unwrap_err();
    assert_eq!(e.kind, AwsErrorKind::Invalid);
    assert_eq!(
        e.message,
        format!("key nope does not exist in secret {p}db")
    );
    let e = c
        .get_secret(&RemoteRef::key(format!("{p}missing")))
        .await
        .unwrap_err();
    assert_eq!(e.kind, AwsErrorKind::NotFound, "{}", e.message);
    let e = c
        .get_secret(&RemoteRef::key(format!("{p}plain")).version("9"))
        .await
        .unwrap_err();
    assert_eq!(e.kind, AwsErrorKind::NotFound, "{}", e.message);
    let m = c.get_secret_map(&db()).await.unwrap();
    assert_eq!(m["user"], b"alice");
    assert_eq!(m["db"], br#"{"port":5432}"#);
    // Every call is labelled as ESO labels Parameter Store calls.
    let snap = calls.snapshot();
    assert!(
        snap.keys().all(|(provider, _, _)| provider == PROVIDER_PS),
        "{snap:?}"
    );
    assert!(calls.count("GetParameter") >= 3, "{snap:?}");
}

#[tokio::test]
async fn reads_of_one_reconcile_and_of_concurrent_reconciles_are_batched() {
    let Some(moto) = moto() else { return };
    let s = ssm(&moto);
    let p = path("ps-batch");
    for i in 0..25 {
        put(
            &s,
            &format!("{p}k{i}"),
            &format!(r#"{{"a":"{i}","b":"b{i}"}}"#),
            &[],
        )
        .await;
    }
    let (c, calls) = ps_client(&moto).await;
    // One reconcile: 3 properties of one parameter and 1 of another → one GetParameters.
    let refs = vec![
        RemoteRef::key(format!("{p}k0")).property("a"),
        RemoteRef::key(format!("{p}k0")).property("b"),
        RemoteRef::key(format!("{p}k1")),
        RemoteRef::key(format!("{p}missing")),
    ];
    let out = c.get_secrets(&refs).await;
    assert_eq!(out[0].as_ref().unwrap(), b"0");
    assert_eq!(out[1].as_ref().unwrap(), b"b0");
    assert_eq!(out[2].as_ref().unwrap(), br#"{"a":"1","b":"b1"}"#);
    assert_eq!(out[3].as_ref().unwrap_err().kind, AwsErrorKind::NotFound);
    assert_eq!(calls.count("GetParameters"), 1, "{calls:?}");
    assert_eq!(calls.count("GetParameter"), 0, "{calls:?}");

    // 25 concurrent reads of different parameters: ⌈25 / 10⌉ GetParameters calls.
    let (c, calls) = ps_client_with(
        &moto,
        CostOptions {
            prefetch: false,
            ..CostOptions::default()
        },
    )
    .await;
    let reads = (0..25).map(|i| {
        let c = c.clone();
        let key = format!("{p}k{i}");
        async move { c.get_secret(&RemoteRef::key(key).property("a")).await }
    });
    let got = futures::future::join_all(reads).await;
    for (i, r) in got.into_iter().enumerate() {
        assert_eq!(r.unwrap(), i.to_string().as_bytes());
    }
    assert_eq!(calls.count("GetParameters"), 3, "{calls:?}");
    assert_eq!(calls.count("GetParameter"), 0, "{calls:?}");
    // Within the cache TTL the same reads make no call.
    c.get_secret(&RemoteRef::key(format!("{p}k3")))
        .await
        .unwrap();
    assert_eq!(calls.total(), 3, "{calls:?}");
}

#[tokio::test]
async fn metadata_policy_fetch_returns_tags() {
    let Some(moto) = moto() else { return };
    let s = ssm(&moto);
    let p = path("ps-meta");
    put(&s, &format!("{p}x"), "v", &[("team", "a"), ("env", "dev")]).await;
    let (c, calls) = ps_client(&moto).await;
    let tags = c
        .get_secret(&RemoteRef::key(format!("{p}x")).metadata())
        .await
        .unwrap();
    assert_eq!(tags, br#"{"env":"dev","team":"a"}"#);
    let team = c
        .get_secret(&RemoteRef::key(format!("{p}x")).metadata().property("team"))
        .await
        .unwrap();
    assert_eq!(team, b"a");
    assert_eq!(calls.count("ListTagsForResource"), 1, "{calls:?}");
}

#[tokio::test]
async fn find_by_name_path_and_tags() {
    let Some(moto) = moto() else { return };
    let s = ssm(&moto);
    let p = path("ps-find");
    put(&s, &format!("{p}app/db-user"), "u", &[("team", "a")]).await;
    put(&s, &format!("{p}app/db-pass"), "pw", &[("team", "a")]).await;
    put(&s, &format!("{p}app/nested/db-host"), "h", &[("team", "b")]).await;
    put(&s, &format!("{p}other/cache"), "c", &[("team", "a")]).await;
    let (c, calls) = ps_client(&moto).await;

    let by_name = c
        .get_all_secrets(&FindRef {
            name_regexp: Some("db-".into()),
            path: Some(format!("{p}app")),
            ..Default::default()
        })
        .await
        .unwrap();
    let keys: Vec<&str> = by_name.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            format!("{p}app/db-pass"),
            format!("{p}app/db-user"),
            format!("{p}app/nested/db-host")
        ]
    );
    assert_eq!(by_name[&format!("{p}app/db-pass")], b"pw");
    assert!(calls.count("GetParametersByPath") >= 1);

    let by_tags = c
        .get_all_secrets(&FindRef {
            tags: BTreeMap::from([("team".to_string(), "a".to_string())]),
            path: Some(p.trim_end_matches('/').to_string()),
            ..Default::default()
        })
        .await
        .unwrap();
    let keys: Vec<&str> = by_tags.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            format!("{p}app/db-pass"),
            format!("{p}app/db-user"),
            format!("{p}other/cache")
        ]
    );
    assert_eq!(by_tags[&format!("{p}other/cache")], b"c");
    assert!(calls.count("DescribeParameter") >= 1, "{calls:?}");

    let e = c
        .get_all_secrets(&FindRef {
            path: Some(p.clone()),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(e.message, "unexpected find operator");
}

#[tokio::test]
async fn push_create_update_guard_and_delete() {
    let Some(moto) = moto() else { return };
    let s = ssm(&moto);
    let p = path("ps-push");
    let (c, calls) = ps_client(&moto).await;
    let name = format!("{p}pushed");
    let meta = serde_json::json!({
        "apiVersion": "kubernetes.external-secrets.io/v1alpha1",
        "kind": "PushSecretMetadata",
        "spec": {"secretType": "SecureString", "description": "d", "tags": {"team": "a"},
                 "tier": {"type": "Advanced"}}
    });
    c.push_secret(&name, PushValue::Key(b"v1"), Some(&meta))
        .await
        .unwrap();
    let got = s
        .get_parameter()
        .name(&name)
        .with_decryption(true)
        .send()
        .await
        .unwrap();
    let param = got.parameter().unwrap();
    assert_eq!(param.value(), Some("v1"));
    assert_eq!(param.r#type(), Some(&ParameterType::SecureString));
    assert_eq!(
        tags_of(&s, &name).await,
        BTreeMap::from([
            ("managed-by".to_string(), "external-secrets".to_string()),
            ("team".to_string(), "a".to_string())
        ])
    );
    let described = s
        .describe_parameters()
        .parameter_filters(
            aws_sdk_ssm::types::ParameterStringFilter::builder()
                .key("Name")
                .values(&name)
                .build()
                .unwrap(),
        )
        .send()
        .await
        .unwrap();
    let md = &described.parameters()[0];
    assert_eq!(md.description(), Some("d"));
    assert_eq!(md.tier(), Some(&ParameterTier::Advanced));
    assert_eq!(calls.count("PutParameter"), 1);

    // Same value: nothing written.
    c.push_secret(&name, PushValue::Key(b"v1"), Some(&meta))
        .await
        .unwrap();
    assert_eq!(calls.count("PutParameter"), 1);
    // New value and tags: overwritten, tags reconciled (team removed, env added).
    let meta2 = serde_json::json!({
        "apiVersion": "kubernetes.external-secrets.io/v1alpha1",
        "kind": "PushSecretMetadata",
        "spec": {"secretType": "SecureString", "tags": {"env": "prod"}}
    });
    c.push_secret(&name, PushValue::Key(b"v2"), Some(&meta2))
        .await
        .unwrap();
    assert_eq!(calls.count("PutParameter"), 2);
    assert_eq!(c.get_secret(&RemoteRef::key(&name)).await.unwrap(), b"v2");
    assert_eq!(
        tags_of(&s, &name).await,
        BTreeMap::from([
            ("env".to_string(), "prod".to_string()),
            ("managed-by".to_string(), "external-secrets".to_string())
        ])
    );
    assert_eq!(calls.count("RemoveTagsFromResource"), 1, "{calls:?}");
    assert_eq!(calls.count("AddTagsToResource"), 1, "{calls:?}");

    // A parameter esr does not manage is neither overwritten nor deleted.
    let foreign = format!("{p}foreign");
    put(&s, &foreign, "theirs", &[("owner", "someone")]).await;
    let e = c
        .push_secret(&foreign, PushValue::Key(b"mine"), None)
        .await
        .unwrap_err();
    assert_eq!(e.message, "secret not managed by external-secrets");
    c.delete_secret(&foreign).await.unwrap();
    assert!(c.secret_exists(&foreign).await.unwrap());

    // The whole Secret: a JSON object of base64 values (plain with encodeAsDecoded).
    let whole = format!("{p}whole");
    let data = BTreeMap::from([("a".to_string(), b"1".to_vec())]);
    c.push_secret(&whole, PushValue::Whole(&data), None)
        .await
        .unwrap();
    assert_eq!(
        c.get_secret(&RemoteRef::key(&whole)).await.unwrap(),
        br#"{"a":"MQ=="}"#
    );

    // Guarded tags.
    let bad = serde_json::json!({
        "apiVersion": "kubernetes.external-secrets.io/v1alpha1",
        "kind": "PushSecretMetadata",
        "spec": {"tags": {"managed-by": "me"}}
    });
    let e = c
        .push_secret(&format!("{p}x"), PushValue::Key(b"v"), Some(&bad))
        .await
        .unwrap_err();
    assert_eq!(
        e.message,
        "error parsing tags in metadata: Cannot specify a 'managed-by' tag"
    );

    // Delete: managed → gone; missing → fine.
    c.delete_secret(&name).await.unwrap();
    assert!(!c.secret_exists(&name).await.unwrap());
    c.delete_secret(&name).await.unwrap();
    assert_eq!(calls.count("DeleteParameter"), 1);
    let e = c.get_secret(&RemoteRef::key(&name)).await.unwrap_err();
    assert_eq!(e.kind, AwsErrorKind::NotFound);
}

#[tokio::test]
async fn validation_resolves_credentials() {
    let Some(moto) = moto() else { return };
    let (c, calls) = ps_client(&moto).await;
    assert_eq!(c.validate().await, Validation::Ready);
    assert_eq!(calls.total(), 0);
    // A role to assume: validation calls STS.
    let (p, calls) = provider(moto_endpoints(&moto), CostOptions::default());
    let mut spec = ps_spec();
    spec["role"] = "arn:aws:iam::123456789012:role/esr".into();
    let c = p
        .ps_client(
            &spec,
            None,
            &store("st", "ns"),
            Some("ns"),
            FakeKube::with_aws_keys("ns"),
        )
        .await
        .unwrap();
    assert_eq!(c.validate().await, Validation::Ready);
    assert_eq!(calls.count("AssumeRole"), 1);
}

fn generate_input(kube: Arc<FakeKube>) -> GenerateInput<'static> {
    GenerateInput {
        name: "gen",
        namespace: "ns",
        kube,
    }
}

fn secret_ref_auth() -> esr_api::providers::aws::AwsAuth {
    serde_json::from_value(serde_json::json!({"secretRef": {
        "accessKeyIDSecretRef": {"name": "aws", "key": "id"},
        "secretAccessKeySecretRef": {"name": "aws", "key": "secret"}
    }}))
    .unwrap()
}

/// eu-west-1 with the static keys of [`secret_ref_auth`], no role.
fn session() -> esr_api::generators::AwsGeneratorSession {
    esr_api::generators::AwsGeneratorSession {
        region: "eu-west-1".into(),
        auth: Some(secret_ref_auth()),
        role: None,
    }
}

#[tokio::test]
async fn ecr_authorization_token_is_a_docker_login() {
    let Some(moto) = moto() else { return };
    let calls = esr_provider_aws::CallLog::new();
    let g = AwsGenerators::new(moto_endpoints(&moto), calls.clone());
    let kube = FakeKube::with_aws_keys("ns");
    let spec = esr_api::generators::ECRAuthorizationTokenSpec {
        session: session(),
        ..Default::default()
    };
    let out = g
        .ecr_authorization_token(&spec, &generate_input(kube.clone()))
        .await
        .unwrap();
    let keys: Vec<&str> = out.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        ["expires_at", "password", "proxy_endpoint", "username"]
    );
    assert_eq!(out["username"], b"AWS");
    assert!(!out["password"].is_empty());
    let endpoint = String::from_utf8(out["proxy_endpoint"].clone()).unwrap();
    assert!(
        endpoint.starts_with("https://") && endpoint.contains(".dkr.ecr.eu-west-1."),
        "{endpoint}"
    );
    let exp = String::from_utf8(out["expires_at"].clone()).unwrap();
    assert!(exp.parse::<i64>().unwrap() > 0, "{exp}");
    // The credentials came from the referrer's namespace.
    assert!(
        kube.reads
            .lock()
            .unwrap()
            .iter()
            .all(|(ns, name, _)| ns == "ns" && name == "aws")
    );
    assert_eq!(
        calls.snapshot().get(&(
            PROVIDER_ECR.into(),
            "GetAuthorizationToken".into(),
            "success".into()
        )),
        Some(&1)
    );
    // ECR Public is not implemented.
    let public = esr_api::generators::ECRAuthorizationTokenSpec {
        scope: Some("public".into()),
        ..spec
    };
    assert!(
        g.ecr_authorization_token(&public, &generate_input(kube))
            .await
            .is_err()
    );
}

#[tokio::test]
async fn sts_session_token_returns_temporary_credentials() {
    let Some(moto) = moto() else { return };
    let calls = esr_provider_aws::CallLog::new();
    let g = AwsGenerators::new(moto_endpoints(&moto), calls.clone());
    let kube = FakeKube::with_aws_keys("ns");
    let spec = esr_api::generators::STSSessionTokenSpec {
        session: session(),
        request_parameters: Some(esr_api::generators::STSRequestParameters {
            session_duration: Some(900),
            ..Default::default()
        }),
    };
    let out = g
        .sts_session_token(&spec, &generate_input(kube.clone()))
        .await
        .unwrap();
    let keys: Vec<&str> = out.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "access_key_id",
            "expiration",
            "secret_access_key",
            "session_token"
        ]
    );
    assert!(out.values().all(|v| !v.is_empty()));
    assert!(
        String::from_utf8(out["expiration"].clone())
            .unwrap()
            .parse::<i64>()
            .unwrap()
            > 0
    );
    assert_eq!(calls.count("GetSessionToken"), 1);
    // jwt auth is refused before any call.
    let jwt = esr_api::generators::STSSessionTokenSpec {
        session: esr_api::generators::AwsGeneratorSession {
            auth: Some(
                serde_json::from_value(
                    serde_json::json!({"jwt": {"serviceAccountRef": {"name": "sa"}}}),
                )
                .unwrap(),
            ),
            ..spec.session.clone()
        },
        ..spec
    };
    let e = g
        .sts_session_token(&jwt, &generate_input(kube))
        .await
        .unwrap_err();
    assert_eq!(
        e.message,
        "jwt auth cannot be used for STS Session Token generation"
    );
    assert_eq!(calls.count("GetSessionToken"), 1);
}
