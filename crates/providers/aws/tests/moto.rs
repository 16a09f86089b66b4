//! The AWS Secrets Manager provider against a real Secrets Manager API (moto).
//! Run with `scripts/test-servers.sh cargo nextest run -p esr-provider-aws`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use esr_provider_aws::{AwsErrorKind, CostOptions, FindRef, RemoteRef, SmClient, Validation};

/// A client for a namespaced store with `auth.secretRef`, talking to moto.
async fn client_with(
    moto: &str,
    spec: serde_json::Value,
    cost: CostOptions,
) -> (Arc<SmClient>, esr_provider_aws::CallLog) {
    let (p, calls) = provider(moto_endpoints(moto), cost);
    let kube = FakeKube::with_aws_keys("ns");
    let c = p
        .client(&spec, None, &store("st", "ns"), Some("ns"), kube)
        .await
        .unwrap();
    (c, calls)
}

async fn client(moto: &str) -> (Arc<SmClient>, esr_provider_aws::CallLog) {
    client_with(moto, spec_secret_ref("us-east-1"), CostOptions::default()).await
}

#[tokio::test]
async fn remote_ref_forms() {
    let Some(moto) = moto() else { return };
    let sm = seeder(&moto);
    let p = unique("forms");
    let json = r#"{"user":"alice","pass":"s3cr3t","db":{"host":"h","port":5432},"a.b":"literal","list":["x","y"]}"#;
    let arn = create(&sm, &format!("{p}db"), json).await;
    create(&sm, &format!("{p}plain"), "just text").await;
    create_binary(&sm, &format!("{p}bin"), &[0, 159, 146, 150, 255]).await;

    let (c, _) = client(&moto).await;
    let get = |r: RemoteRef| {
        let c = c.clone();
        async move { c.get_secret(&r).await }
    };
    let db = || RemoteRef::key(format!("{p}db"));
    let cases: Vec<(RemoteRef, &[u8])> = vec![
        (db(), json.as_bytes()),
        (RemoteRef::key(format!("{p}plain")), b"just text"),
        (RemoteRef::key(&arn).property("user"), b"alice"),
        (db().property("db.host"), b"h"),
        (db().property("db.port"), b"5432"),
        (db().property("db"), br#"{"host":"h","port":5432}"#),
        (db().property("a.b"), b"literal"),
        (db().property("list.1"), b"y"),
        (RemoteRef::key(format!("{p}bin")), &[0, 159, 146, 150, 255]),
    ];
    for (r, want) in cases {
        let what = format!("{r:?}");
        assert_eq!(get(r).await.unwrap(), want, "{what}");
    }
    let e = get(RemoteRef::key(format!("{p}db")).property("nope"))
        .await
        .unwrap_err();
    assert_eq!(e.kind, AwsErrorKind::Invalid);
    assert!(
        e.message.contains("key nope does not exist"),
        "{}",
        e.message
    );
}

#[tokio::test]
async fn versions_by_stage_and_id() {
    let Some(moto) = moto() else { return };
    let sm = seeder(&moto);
    let p = unique("versions");
    let name = format!("{p}rotating");
    create(&sm, &name, "v1").await;
    let v2 = sm
        .put_secret_value()
        .secret_id(&name)
        .secret_string("v2")
        .send()
        .await
        .unwrap();
    let v2_id = v2.version_id().unwrap().to_string();
    sm.put_secret_value()
        .secret_id(&name)
        .secret_string("v3")
        .send()
        .await
        .unwrap();
    sm.put_secret_value()
        .secret_id(&name)
        .secret_string("staged")
        .version_stages("STAGING")
        .send()
        .await
        .unwrap();

    let (c, calls) = client(&moto).await;
    assert_eq!(c.get_secret(&RemoteRef::key(&name)).await.unwrap(), b"v3");
    assert_eq!(
        c.get_secret(&RemoteRef::key(&name).version("AWSCURRENT"))
            .await
            .unwrap(),
        b"v3"
    );
    assert_eq!(
        c.get_secret(&RemoteRef::key(&name).version("AWSPREVIOUS"))
            .await
            .unwrap(),
        b"v2"
    );
    assert_eq!(
        c.get_secret(&RemoteRef::key(&name).version(format!("uuid/{v2_id}")))
            .await
            .unwrap(),
        b"v2"
    );
    assert_eq!(
        c.get_secret(&RemoteRef::key(&name).version("STAGING"))
            .await
            .unwrap(),
        b"staged"
    );
    let e = c
        .get_secret(&RemoteRef::key(&name).version("uuid/00000000-0000-0000-0000-00000000dead"))
        .await
        .unwrap_err();
    assert_eq!(e.kind, AwsErrorKind::NotFound, "{}", e.message);
    // Version-pinned reads cannot be batched: they used GetSecretValue.
    assert!(calls.count("GetSecretValue") >= 4);
}

#[tokio::test]
async fn missing_and_deleted_secrets_are_not_found() {
    let Some(moto) = moto() else { return };
    let sm = seeder(&moto);
    let p = unique("missing");
    let gone = format!("{p}gone");
    create(&sm, &gone, "x").await;
    sm.delete_secret()
        .secret_id(&gone)
        .recovery_window_in_days(7)
        .send()
        .await
        .unwrap();
    create(&sm, &format!("{p}here"), "present").await;

    let (c, _) = client(&moto).await;
    let e = c
        .get_secret(&RemoteRef::key(format!("{p}nothing")))
        .await
        .unwrap_err();
    assert_eq!(e.kind, AwsErrorKind::NotFound, "{}", e.message);
    assert!(e.message.contains("Secret does not exist"), "{}", e.message);
    let e = c.get_secret(&RemoteRef::key(&gone)).await.unwrap_err();
    assert_eq!(e.kind, AwsErrorKind::NotFound, "{}", e.message);
    // Same through the batch path: a mix of present and missing ids in one reconcile.
    let res = c
        .get_secrets(&[
            RemoteRef::key(format!("{p}here")),
            RemoteRef::key(format!("{p}nothing2")),
        ])
        .await;
    assert_eq!(res[0].as_ref().unwrap(), b"present");
    assert_eq!(res[1].as_ref().unwrap_err().kind, AwsErrorKind::NotFound);
    assert!(!c.secret_exists(&format!("{p}nothing")).await.unwrap());
    assert!(c.secret_exists(&format!("{p}here")).await.unwrap());
}

#[tokio::test]
async fn metadata_policy_fetch_returns_tags() {
    let Some(moto) = moto() else { return };
    let sm = seeder(&moto);
    let p = unique("meta");
    let name = format!("{p}tagged");
    create_tagged(
        &sm,
        &name,
        "value",
        &[("team", "payments"), ("env", "prod")],
    )
    .await;
    let (c, _) = client(&moto).await;
    let tags = c
        .get_secret(&RemoteRef::key(&name).metadata())
        .await
        .unwrap();
    assert_eq!(tags, br#"{"env":"prod","team":"payments"}"#);
    let team = c
        .get_secret(&RemoteRef::key(&name).metadata().property("team"))
        .await
        .unwrap();
    assert_eq!(team, b"payments");
}

#[tokio::test]
async fn extract_decodes_json_objects() {
    let Some(moto) = moto() else { return };
    let sm = seeder(&moto);
    let p = unique("extract");
    create(
        &sm,
        &format!("{p}obj"),
        r#"{"user":"bob","n":1.0,"nested":{"k": "v"},"flag":true}"#,
    )
    .await;
    create(&sm, &format!("{p}text"), "not json").await;
    let (c, _) = client(&moto).await;
    let m = c
        .get_secret_map(&RemoteRef::key(format!("{p}obj")))
        .await
        .unwrap();
    assert_eq!(m["user"], b"bob");
    assert_eq!(m["n"], b"1.0");
    assert_eq!(m["nested"], br#"{"k": "v"}"#);
    assert_eq!(m["flag"], b"true");
    assert_eq!(m.len(), 4);
    let e = c
        .get_secret_map(&RemoteRef::key(format!("{p}text")))
        .await
        .unwrap_err();
    assert!(
        e.message.contains("unable to unmarshal secret"),
        "{}",
        e.message
    );
    // extract with a property: the sub-object is decoded.
    let m = c
        .get_secret_map(&RemoteRef::key(format!("{p}obj")).property("nested"))
        .await
        .unwrap();
    assert_eq!(m["k"], b"v");
}

#[tokio::test]
async fn prefix_is_prepended() {
    let Some(moto) = moto() else { return };
    let sm = seeder(&moto);
    let p = unique("prefix");
    create(&sm, &format!("{p}app/key"), "prefixed").await;
    let mut spec = spec_secret_ref("us-east-1");
    spec["prefix"] = serde_json::json!(format!("{p}app/"));
    let (c, _) = client_with(&moto, spec, CostOptions::default()).await;
    assert_eq!(
        c.get_secret(&RemoteRef::key("key")).await.unwrap(),
        b"prefixed"
    );
}

#[tokio::test]
async fn find_by_name_tags_and_path() {
    let Some(moto) = moto() else { return };
    let sm = seeder(&moto);
    let p = unique("find");
    let tag_value = p.trim_end_matches('/').to_string();
    create_tagged(
        &sm,
        &format!("{p}svc/alpha"),
        "a",
        &[("suite", &tag_value), ("tier", "db")],
    )
    .await;
    create_tagged(&sm, &format!("{p}svc/beta"), "b", &[("suite", &tag_value)]).await;
    create_tagged(
        &sm,
        &format!("{p}other/gamma"),
        "g",
        &[("suite", &tag_value), ("tier", "db")],
    )
    .await;

    let (c, calls) = client(&moto).await;
    let escaped = regex::escape(&p);

    // name.regexp only: ListSecrets + batched reads.
    let got = c
        .get_all_secrets(&FindRef {
            name_regexp: Some(format!("^{escaped}svc/")),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(got.len(), 2);
    assert_eq!(got[&format!("{p}svc/alpha")], b"a");
    assert_eq!(got[&format!("{p}svc/beta")], b"b");
    assert!(calls.count("ListSecrets") >= 1);

    // tags only: BatchGetSecretValue with tag filters.
    let mut tags = std::collections::BTreeMap::new();
    tags.insert("suite".to_string(), tag_value.clone());
    tags.insert("tier".to_string(), "db".to_string());
    let got = c
        .get_all_secrets(&FindRef {
            tags: tags.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        got.keys().cloned().collect::<Vec<_>>(),
        vec![format!("{p}other/gamma"), format!("{p}svc/alpha")]
    );

    // path (+ name): a name-prefix filter.
    let got = c
        .get_all_secrets(&FindRef {
            name_regexp: Some("beta".into()),
            path: Some(format!("{p}svc/")),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        got.keys().cloned().collect::<Vec<_>>(),
        vec![format!("{p}svc/beta")]
    );

    // name + tags.
    let got = c
        .get_all_secrets(&FindRef {
            name_regexp: Some("gamma$".into()),
            tags,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        got.keys().cloned().collect::<Vec<_>>(),
        vec![format!("{p}other/gamma")]
    );

    let e = c.get_all_secrets(&FindRef::default()).await.unwrap_err();
    assert_eq!(e.message, "unexpected find operator");
}

#[tokio::test]
async fn push_create_update_merge_and_guard() {
    let Some(moto) = moto() else { return };
    let sm = seeder(&moto);
    let p = unique("push");
    let (c, calls) = client(&moto).await;

    // Create: binary by default, tagged managed-by.
    let name = format!("{p}pushed");
    c.push_secret(&name, None, b"first", None).await.unwrap();
    let got = sm.get_secret_value().secret_id(&name).send().await.unwrap();
    assert_eq!(got.secret_binary().unwrap().as_ref(), b"first");
    let d = sm.describe_secret().secret_id(&name).send().await.unwrap();
    assert!(
        d.tags()
            .iter()
            .any(|t| t.key() == Some("managed-by") && t.value() == Some("external-secrets"))
    );

    // Update; an unchanged value makes no new version.
    c.push_secret(&name, None, b"second", None).await.unwrap();
    let puts = calls.count("PutSecretValue");
    c.push_secret(&name, None, b"second", None).await.unwrap();
    assert_eq!(calls.count("PutSecretValue"), puts);
    assert_eq!(
        c.get_secret(&RemoteRef::key(&name)).await.unwrap(),
        b"second"
    );

    // Property pushes merge into one JSON object (string format).
    let meta = serde_json::json!({"apiVersion": "kubernetes.external-secrets.io/v1alpha1",
        "kind": "PushSecretMetadata", "spec": {"secretPushFormat": "string", "tags": {"team": "a"}}});
    let obj = format!("{p}object");
    c.push_secret(&obj, Some("user"), b"alice", Some(&meta))
        .await
        .unwrap();
    c.push_secret(&obj, Some("pass"), b"pw", Some(&meta))
        .await
        .unwrap();
    let got = sm.get_secret_value().secret_id(&obj).send().await.unwrap();
    assert_eq!(
        got.secret_string().unwrap(),
        r#"{"user":"alice","pass":"pw"}"#
    );
    assert_eq!(
        c.get_secret(&RemoteRef::key(&obj).property("pass"))
            .await
            .unwrap(),
        b"pw"
    );

    // Never overwrite a secret esr does not manage.
    let foreign = format!("{p}foreign");
    create(&sm, &foreign, "precious").await;
    let e = c
        .push_secret(&foreign, None, b"overwrite", None)
        .await
        .unwrap_err();
    assert!(
        e.message.contains("not managed by external-secrets"),
        "{}",
        e.message
    );
    let got = sm
        .get_secret_value()
        .secret_id(&foreign)
        .send()
        .await
        .unwrap();
    assert_eq!(got.secret_string().unwrap(), "precious");

    // Delete: property-level first, then the whole secret; unmanaged and missing are no-ops.
    c.delete_secret(&obj, Some("user")).await.unwrap();
    let got = sm.get_secret_value().secret_id(&obj).send().await.unwrap();
    assert_eq!(got.secret_string().unwrap(), r#"{"pass":"pw"}"#);
    c.delete_secret(&obj, Some("pass")).await.unwrap();
    assert!(!c.secret_exists(&obj).await.unwrap());
    c.delete_secret(&foreign, None).await.unwrap();
    assert!(c.secret_exists(&foreign).await.unwrap());
    c.delete_secret(&format!("{p}never-existed"), None)
        .await
        .unwrap();
    c.delete_secret(&name, None).await.unwrap();
    assert!(!c.secret_exists(&name).await.unwrap());
    let e = c.get_secret(&RemoteRef::key(&name)).await.unwrap_err();
    assert_eq!(e.kind, AwsErrorKind::NotFound);
}

#[tokio::test]
async fn delete_honours_force_setting() {
    let Some(moto) = moto() else { return };
    let sm = seeder(&moto);
    let p = unique("force");
    let mut spec = spec_secret_ref("us-east-1");
    spec["secretsManager"] = serde_json::json!({"forceDeleteWithoutRecovery": true});
    let (c, _) = client_with(&moto, spec, CostOptions::default()).await;
    let name = format!("{p}forced");
    c.push_secret(&name, None, b"v", None).await.unwrap();
    c.delete_secret(&name, None).await.unwrap();
    // Forced deletion removes the secret at once: DescribeSecret no longer finds it.
    let e = sm
        .describe_secret()
        .secret_id(&name)
        .send()
        .await
        .unwrap_err();
    assert!(e.into_service_error().is_resource_not_found_exception());

    // With a recovery window the secret is only scheduled for deletion.
    let mut spec = spec_secret_ref("us-east-1");
    spec["secretsManager"] = serde_json::json!({"recoveryWindowInDays": 7});
    let (c, _) = client_with(&moto, spec, CostOptions::default()).await;
    let name = format!("{p}windowed");
    c.push_secret(&name, None, b"v", None).await.unwrap();
    c.delete_secret(&name, None).await.unwrap();
    let d = sm.describe_secret().secret_id(&name).send().await.unwrap();
    assert!(d.deleted_date().is_some());
}

#[tokio::test]
async fn one_reconcile_fetches_each_secret_once() {
    let Some(moto) = moto() else { return };
    let sm = seeder(&moto);
    let p = unique("once");
    create(&sm, &format!("{p}a"), r#"{"u":"1","p":"2","h":"3"}"#).await;
    create(&sm, &format!("{p}b"), r#"{"x":"9"}"#).await;
    let (c, calls) = client(&moto).await;
    let refs = vec![
        RemoteRef::key(format!("{p}a")).property("u"),
        RemoteRef::key(format!("{p}a")).property("p"),
        RemoteRef::key(format!("{p}a")).property("h"),
        RemoteRef::key(format!("{p}b")).property("x"),
        RemoteRef::key(format!("{p}b")),
    ];
    let res: Vec<Vec<u8>> = c
        .get_secrets(&refs)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        res,
        vec![
            b"1".to_vec(),
            b"2".to_vec(),
            b"3".to_vec(),
            b"9".to_vec(),
            br#"{"x":"9"}"#.to_vec()
        ]
    );
    // Two distinct secrets, one BatchGetSecretValue call, nothing else.
    assert_eq!(calls.count("BatchGetSecretValue"), 1, "{calls:?}");
    assert_eq!(calls.total_sm(), 1, "{calls:?}");
}

#[tokio::test]
async fn concurrent_reads_are_coalesced() {
    let Some(moto) = moto() else { return };
    let sm = seeder(&moto);
    let p = unique("coalesce");
    let name = format!("{p}shared");
    create(&sm, &name, r#"{"k":"v"}"#).await;
    let (c, calls) = client(&moto).await;
    let tasks: Vec<_> = (0..50)
        .map(|_| {
            let c = c.clone();
            let name = name.clone();
            tokio::spawn(async move { c.get_secret(&RemoteRef::key(name).property("k")).await })
        })
        .collect();
    for t in tasks {
        assert_eq!(t.await.unwrap().unwrap(), b"v");
    }
    assert_eq!(calls.total_sm(), 1, "{calls:?}");

    // Without the cache every read is a call.
    let (c, calls) = client_with(
        &moto,
        spec_secret_ref("us-east-1"),
        CostOptions {
            cache_ttl: Duration::ZERO,
            batch_window: Duration::ZERO,
            ..CostOptions::default()
        },
    )
    .await;
    for _ in 0..3 {
        c.get_secret(&RemoteRef::key(&name)).await.unwrap();
    }
    assert_eq!(calls.count("GetSecretValue"), 3);
}

#[tokio::test]
async fn distinct_keys_are_batched_by_twenty() {
    let Some(moto) = moto() else { return };
    let sm = seeder(&moto);
    let p = unique("batch");
    for i in 0..45 {
        create(&sm, &format!("{p}s{i:02}"), &format!(r#"{{"i":"{i}"}}"#)).await;
    }
    // A generous window so that a loaded CI machine still groups the burst.
    let cost = CostOptions {
        batch_window: Duration::from_millis(500),
        ..CostOptions::default()
    };
    let (c, calls) = client_with(&moto, spec_secret_ref("us-east-1"), cost).await;
    let tasks: Vec<_> = (0..45)
        .map(|i| {
            let c = c.clone();
            let key = format!("{p}s{i:02}");
            tokio::spawn(async move { (i, c.get_secret(&RemoteRef::key(key).property("i")).await) })
        })
        .collect();
    for t in tasks {
        let (i, v) = t.await.unwrap();
        assert_eq!(v.unwrap(), i.to_string().as_bytes());
    }
    assert_eq!(calls.count("BatchGetSecretValue"), 3, "{calls:?}");
    assert_eq!(calls.count("GetSecretValue"), 0, "{calls:?}");
}

#[tokio::test]
async fn clients_are_reused_per_store_and_credentials() {
    let Some(moto) = moto() else { return };
    let (p, _) = provider(moto_endpoints(&moto), CostOptions::default());
    let kube = FakeKube::with_aws_keys("ns");
    let spec = spec_secret_ref("us-east-1");
    let st = store("st", "ns");
    let a = p
        .client(&spec, None, &st, Some("ns"), kube.clone())
        .await
        .unwrap();
    let b = p
        .client(&spec, None, &st, Some("ns"), kube.clone())
        .await
        .unwrap();
    assert!(Arc::ptr_eq(&a, &b));
    // Rotated credentials → a new client.
    kube.put("ns", "aws", "secret", "rotated");
    let c = p
        .client(&spec, None, &st, Some("ns"), kube.clone())
        .await
        .unwrap();
    assert!(!Arc::ptr_eq(&a, &c));
    // A new store generation → a new client.
    let mut st2 = st.clone();
    st2.generation = 2;
    let d = p
        .client(&spec, None, &st2, Some("ns"), kube.clone())
        .await
        .unwrap();
    assert!(!Arc::ptr_eq(&c, &d));
    // The secretRef was read in the store namespace.
    assert!(
        kube.reads
            .lock()
            .unwrap()
            .iter()
            .all(|(ns, name, _)| ns == "ns" && name == "aws")
    );
}

#[tokio::test]
async fn validate_ready_against_moto_and_unknown_for_referent() {
    let Some(moto) = moto() else { return };
    let (c, calls) = client(&moto).await;
    assert_eq!(c.validate().await, Validation::Ready);
    assert_eq!(calls.count("ListSecrets"), 1);

    // A ClusterSecretStore whose refs have no namespace resolves them in the ExternalSecret's
    // namespace: without one it cannot be validated.
    let (p, _) = provider(moto_endpoints(&moto), CostOptions::default());
    let kube = FakeKube::with_aws_keys("team-a");
    let cs = cluster_store("cs");
    let spec = spec_secret_ref("us-east-1");
    let v = p
        .client(&spec, None, &cs, None, kube.clone())
        .await
        .unwrap();
    assert_eq!(v.validate().await, Validation::Unknown);
    let used = p
        .client(&spec, None, &cs, Some("team-a"), kube.clone())
        .await
        .unwrap();
    assert_eq!(used.validate().await, Validation::Ready);
    assert!(
        kube.reads
            .lock()
            .unwrap()
            .iter()
            .all(|(ns, _, _)| ns == "team-a")
    );
}

#[tokio::test]
async fn bad_region_is_a_clear_error() {
    let Some(moto) = moto() else { return };
    let (p, _) = provider(moto_endpoints(&moto), CostOptions::default());
    let kube = FakeKube::with_aws_keys("ns");
    let e = p
        .client(
            &spec_secret_ref("Not A Region"),
            None,
            &store("st", "ns"),
            Some("ns"),
            kube,
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind, AwsErrorKind::Invalid);
    assert!(e.message.contains("region not found"), "{}", e.message);
}

#[tokio::test]
async fn missing_credentials_secret_is_a_clear_error() {
    let Some(moto) = moto() else { return };
    let (p, _) = provider(moto_endpoints(&moto), CostOptions::default());
    let kube = Arc::new(FakeKube::default());
    let e = p
        .client(
            &spec_secret_ref("us-east-1"),
            None,
            &store("st", "ns"),
            Some("ns"),
            kube,
        )
        .await
        .unwrap_err();
    assert!(
        e.message.contains("could not fetch SecretAccessKey secret"),
        "{}",
        e.message
    );
}

/// The standard `AWS_ENDPOINT_URL` variable reaches moto with no explicit endpoint settings.
/// The variable is set for a child process running the ignored test below.
#[tokio::test]
async fn standard_endpoint_env_vars_work() {
    let Some(moto) = moto() else { return };
    let sm = seeder(&moto);
    let p = unique("envvar");
    create(&sm, &format!("{p}x"), "from-env").await;
    for var in ["AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SECRETS_MANAGER"] {
        let exe = std::env::current_exe().unwrap();
        let out = std::process::Command::new(exe)
            .args(["--exact", "env_child", "--ignored", "--nocapture"])
            .env(var, &moto)
            .env("ESR_CHILD_SECRET", format!("{p}x"))
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{var}: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains("child-read:from-env"), "{var}: {stdout}");
    }
    // No `auth`: the SDK default chain, here the standard AWS_ACCESS_KEY_ID variables.
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .args(["--exact", "env_child", "--ignored", "--nocapture"])
        .env("AWS_ENDPOINT_URL", &moto)
        .env("AWS_ACCESS_KEY_ID", "from-env-chain")
        .env("AWS_SECRET_ACCESS_KEY", "from-env-chain")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("ESR_CHILD_NO_AUTH", "1")
        .env("ESR_CHILD_SECRET", format!("{p}x"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "default chain: {stdout}");
    assert!(
        stdout.contains("child-read:from-env"),
        "default chain: {stdout}"
    );
}

#[tokio::test]
#[ignore = "run by standard_endpoint_env_vars_work in a child process"]
async fn env_child() {
    let Ok(name) = std::env::var("ESR_CHILD_SECRET") else {
        println!("skipped: only run as a child of standard_endpoint_env_vars_work");
        return;
    };
    let (p, _) = provider(Default::default(), CostOptions::default());
    let kube = FakeKube::with_aws_keys("ns");
    // The default chain is the controller's identity: only a ClusterSecretStore may use it.
    let (spec, st) = if std::env::var("ESR_CHILD_NO_AUTH").is_ok() {
        (
            serde_json::json!({"service": "SecretsManager", "region": "us-east-1"}),
            cluster_store("st"),
        )
    } else {
        (spec_secret_ref("us-east-1"), store("st", "ns"))
    };
    let c = p.client(&spec, None, &st, Some("ns"), kube).await.unwrap();
    let v = c.get_secret(&RemoteRef::key(name)).await.unwrap();
    println!("child-read:{}", String::from_utf8_lossy(&v));
}

/// Reconciles one after the other (`--concurrent 1`): after the first refresh cycle, batches are
/// filled with the other secrets read recently whose cached value expired (refresh-ahead), so
/// the next cycle costs about one call per 20 secrets instead of one per secret.
#[tokio::test]
async fn sequential_refresh_cycles_share_batches() {
    let Some(moto) = moto() else { return };
    let sm = seeder(&moto);
    let p = unique("ahead");
    for i in 0..25 {
        create(&sm, &format!("{p}s{i:02}"), &format!("v{i}")).await;
    }
    let cost = CostOptions {
        cache_ttl: Duration::from_secs(2),
        ..CostOptions::default()
    };
    let (c, calls) = client_with(&moto, spec_secret_ref("us-east-1"), cost).await;
    let cycle = || async {
        for i in 0..25 {
            let v = c
                .get_secret(&RemoteRef::key(format!("{p}s{i:02}")))
                .await
                .unwrap();
            assert_eq!(v, format!("v{i}").as_bytes());
        }
    };
    // Cold: one call per secret (nothing else is known yet).
    cycle().await;
    let cold = calls.total_sm();
    assert_eq!(cold, 25, "{calls:?}");
    // Let the cached values expire, then refresh everything again.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    cycle().await;
    let warm = calls.total_sm() - cold;
    assert_eq!(warm, 2, "{calls:?}");
    assert_eq!(calls.count("BatchGetSecretValue"), 2, "{calls:?}");
}
