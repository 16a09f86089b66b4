//! KV v1/v2 reads, find, push and errors against a real OpenBao dev server.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;

use common::*;
use esr_provider::{
    ConversionStrategy, ErrorKind, FindName, FindRequest, MetadataPolicy, PushRemoteRef,
    PushRequest, SecretRef, ValidationResult,
};
use serde_json::json;

#[tokio::test]
async fn kv2_versions_properties_metadata() {
    let Some(bao) = bao() else { return };
    let mount = unique("kv2");
    bao.mount_kv(&mount, 2).await;
    let nested = json!({"user": "app", "db": {"host": "h1", "port": 5432}, "a.b": "literal", "a": {"b": "nested"}});
    vaultrs::kv2::set(&bao.admin, &mount, "app/config", &nested)
        .await
        .unwrap();
    vaultrs::kv2::set(&bao.admin, &mount, "app/config", &json!({"user": "app2"}))
        .await
        .unwrap();
    bao.api(
        "POST",
        &format!("{mount}/metadata/app/config"),
        Some(json!({"custom_metadata": {"owner": "team-a"}})),
    )
    .await;

    let h = Harness::new();
    let st = store(token_spec(
        &h,
        &bao,
        json!({"path": mount, "version": "v2"}),
    ));
    let c = h.client(&st).await.unwrap();

    // latest version, whole map as JSON
    let v = c.get_secret(&SecretRef::new("app/config")).await.unwrap();
    assert_eq!(s(&v), r#"{"user":"app2"}"#);
    // version 1, nested gjson path, literal dotted key first
    let r1 = |p: &str| {
        SecretRef::new("app/config")
            .with_version("1")
            .with_property(p)
    };
    assert_eq!(s(&c.get_secret(&r1("db.host")).await.unwrap()), "h1");
    assert_eq!(s(&c.get_secret(&r1("db.port")).await.unwrap()), "5432");
    assert_eq!(s(&c.get_secret(&r1("a.b")).await.unwrap()), "literal");
    assert_eq!(
        s(&c.get_secret(&r1("db")).await.unwrap()),
        r#"{"host":"h1","port":5432}"#
    );
    let e = c.get_secret(&r1("nope")).await.unwrap_err();
    assert!(
        e.to_string().contains("cannot find secret data for key"),
        "{e}"
    );
    // absolute key (mount prefix and data/ stripped)
    let abs = c
        .get_secret(&SecretRef::new(format!("{mount}/data/app/config")).with_property("user"))
        .await
        .unwrap();
    assert_eq!(s(&abs), "app2");
    // extract
    let m = c
        .get_secret_map(&SecretRef::new("app/config").with_version("1"))
        .await
        .unwrap();
    assert_eq!(s(&m["user"]), "app");
    assert_eq!(s(&m["db"]), r#"{"host":"h1","port":5432}"#);
    // metadata
    let md = c
        .get_secret(
            &SecretRef::new("app/config")
                .with_metadata_policy(MetadataPolicy::Fetch)
                .with_property("owner"),
        )
        .await
        .unwrap();
    assert_eq!(s(&md), "team-a");
    let cur = c
        .get_secret(
            &SecretRef::new("app/config")
                .with_metadata_policy(MetadataPolicy::Fetch)
                .with_property("current_version"),
        )
        .await
        .unwrap();
    assert_eq!(s(&cur), "2");
    // missing → NotFound (ESO NoSecretErr)
    let e = c.get_secret(&SecretRef::new("missing")).await.unwrap_err();
    assert!(e.is_not_found(), "{e}");
    // deleted latest version → NotFound
    bao.api("DELETE", &format!("{mount}/data/app/config"), None)
        .await;
    let e = c
        .get_secret(&SecretRef::new("app/config"))
        .await
        .unwrap_err();
    assert!(e.is_not_found(), "{e}");
    assert!(h.recorder.count("ReadSecretData") >= 8);
    assert!(
        h.recorder
            .calls()
            .iter()
            .all(|c| c.provider == "HashiCorp/Vault")
    );
}

#[tokio::test]
async fn kv2_without_store_path_uses_key_mount() {
    let Some(bao) = bao() else { return };
    let mount = unique("kv2");
    bao.mount_kv(&mount, 2).await;
    vaultrs::kv2::set(&bao.admin, &mount, "x/y", &json!({"k": "v"}))
        .await
        .unwrap();
    let h = Harness::new();
    let st = store(token_spec(&h, &bao, json!({"version": "v2"})));
    let c = h.client(&st).await.unwrap();
    let v = c
        .get_secret(&SecretRef::new(format!("{mount}/x/y")).with_property("k"))
        .await
        .unwrap();
    assert_eq!(s(&v), "v");
}

#[tokio::test]
async fn kv1_reads_find_and_metadata_error() {
    let Some(bao) = bao() else { return };
    let mount = unique("kv1");
    bao.mount_kv(&mount, 1).await;
    vaultrs::kv1::set(
        &bao.admin,
        &mount,
        "a/one",
        &std::collections::HashMap::from([("k", "1")]),
    )
    .await
    .unwrap();
    vaultrs::kv1::set(
        &bao.admin,
        &mount,
        "a/b/two",
        &std::collections::HashMap::from([("k", "2")]),
    )
    .await
    .unwrap();
    let h = Harness::new();
    let st = store(token_spec(
        &h,
        &bao,
        json!({"path": mount, "version": "v1"}),
    ));
    let c = h.client(&st).await.unwrap();
    assert_eq!(
        s(&c.get_secret(&SecretRef::new("a/one").with_property("k"))
            .await
            .unwrap()),
        "1"
    );
    let e = c
        .get_secret(&SecretRef::new("a/one").with_metadata_policy(MetadataPolicy::Fetch))
        .await
        .unwrap_err();
    assert_eq!(
        e.message(),
        "cannot perform metadata fetch operations with kv version v1"
    );
    let all = c
        .get_all_secrets(&FindRequest {
            path: Some("a".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        all.keys().cloned().collect::<Vec<_>>(),
        vec!["a_b_two".to_string(), "a_one".to_string()]
    );
    assert_eq!(s(&all["a_b_two"]), r#"{"k":"2"}"#);
}

#[tokio::test]
async fn kv2_find_by_regexp_and_path_with_eso_key_naming() {
    let Some(bao) = bao() else { return };
    let mount = unique("kv2");
    bao.mount_kv(&mount, 2).await;
    for (k, v) in [
        ("db/prod/password", "p1"),
        ("db/dev/password", "p2"),
        ("db/prod/user", "u1"),
        ("cache/token", "t1"),
    ] {
        vaultrs::kv2::set(&bao.admin, &mount, k, &json!({"v": v}))
            .await
            .unwrap();
    }
    let h = Harness::new();
    let st = store(token_spec(&h, &bao, json!({"path": mount})));
    let c = h.client(&st).await.unwrap();
    let by_name = c
        .get_all_secrets(&FindRequest {
            name: Some(FindName {
                regexp: "password$".into(),
            }),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        by_name.keys().cloned().collect::<Vec<_>>(),
        vec![
            "db_dev_password".to_string(),
            "db_prod_password".to_string()
        ]
    );
    assert_eq!(s(&by_name["db_prod_password"]), r#"{"v":"p1"}"#);
    let by_path = c
        .get_all_secrets(&FindRequest {
            path: Some("db/prod".into()),
            conversion_strategy: ConversionStrategy::Unicode,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        by_path.keys().cloned().collect::<Vec<_>>(),
        vec![
            "db_U002f_prod_U002f_password".to_string(),
            "db_U002f_prod_U002f_user".to_string()
        ]
    );
    let both = c
        .get_all_secrets(&FindRequest {
            path: Some("db".into()),
            name: Some(FindName {
                regexp: "user".into(),
            }),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        both.keys().cloned().collect::<Vec<_>>(),
        vec!["db_prod_user".to_string()]
    );
    // find by custom metadata tags
    bao.api(
        "POST",
        &format!("{mount}/metadata/cache/token"),
        Some(json!({"custom_metadata": {"tier": "cache"}})),
    )
    .await;
    let tagged = c
        .get_all_secrets(&FindRequest {
            tags: Some(BTreeMap::from([("tier".to_string(), "cache".to_string())])),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        tagged.keys().cloned().collect::<Vec<_>>(),
        vec!["cache_token".to_string()]
    );
    assert!(h.recorder.count("ListSecrets") >= 3);
}

fn push(
    key: &str,
    prop: Option<&str>,
    pairs: &[(&str, &str)],
    secret_key: Option<&str>,
) -> PushRequest {
    let mut sec = secret("ns", "src", &[]);
    sec.string_data = None;
    sec.data = Some(
        pairs
            .iter()
            .map(|(k, v)| {
                (
                    k.to_string(),
                    k8s_openapi::ByteString(v.as_bytes().to_vec()),
                )
            })
            .collect(),
    );
    let mut remote = PushRemoteRef::new(key);
    if let Some(p) = prop {
        remote = remote.with_property(p);
    }
    PushRequest::from_secret(sec, remote, secret_key.map(str::to_string), None).unwrap()
}

#[tokio::test]
async fn kv2_push_with_cas_guard_and_delete() {
    let Some(bao) = bao() else { return };
    let mount = unique("kv2");
    bao.mount_kv(&mount, 2).await;
    let h = Harness::new();
    let st = store(token_spec(
        &h,
        &bao,
        json!({"path": mount, "checkAndSet": {"required": true}}),
    ));
    // the mount itself requires CAS, so writes without the right version fail
    bao.api(
        "POST",
        &format!("{mount}/config"),
        Some(json!({"cas_required": true})),
    )
    .await;
    let c = h.client(&st).await.unwrap();
    c.push_secret(&push("pushed", Some("a"), &[("k", "1")], Some("k")))
        .await
        .unwrap();
    c.push_secret(&push("pushed", Some("b"), &[("k", "2")], Some("k")))
        .await
        .unwrap();
    let got = c.get_secret(&SecretRef::new("pushed")).await.unwrap();
    assert_eq!(s(&got), r#"{"a":"1","b":"2"}"#);
    let md = c
        .get_secret(
            &SecretRef::new("pushed")
                .with_metadata_policy(MetadataPolicy::Fetch)
                .with_property("managed-by"),
        )
        .await
        .unwrap();
    assert_eq!(s(&md), "external-secrets");
    // unchanged push writes nothing new
    c.push_secret(&push("pushed", Some("b"), &[("k", "2")], Some("k")))
        .await
        .unwrap();
    let meta = bao
        .api("GET", &format!("{mount}/metadata/pushed"), None)
        .await;
    assert_eq!(meta["data"]["current_version"], 2);
    assert!(
        c.secret_exists(&PushRemoteRef::new("pushed").with_property("a"))
            .await
            .unwrap()
    );
    assert!(
        !c.secret_exists(&PushRemoteRef::new("pushed").with_property("zz"))
            .await
            .unwrap()
    );

    // a secret esr does not manage is never overwritten, nor deleted
    bao.api(
        "POST",
        &format!("{mount}/data/foreign"),
        Some(json!({"data": {"x": "y"}, "options": {"cas": 0}})),
    )
    .await;
    let e = c
        .push_secret(&push("foreign", Some("x"), &[("k", "z")], Some("k")))
        .await
        .unwrap_err();
    assert_eq!(e.message(), "secret not managed by external-secrets");
    c.delete_secret(&PushRemoteRef::new("foreign"))
        .await
        .unwrap();
    assert_eq!(
        s(&c.get_secret(&SecretRef::new("foreign").with_property("x"))
            .await
            .unwrap()),
        "y"
    );

    // delete one property, then the whole secret (data and metadata)
    c.delete_secret(&PushRemoteRef::new("pushed").with_property("a"))
        .await
        .unwrap();
    assert_eq!(
        s(&c.get_secret(&SecretRef::new("pushed")).await.unwrap()),
        r#"{"b":"2"}"#
    );
    c.delete_secret(&PushRemoteRef::new("pushed"))
        .await
        .unwrap();
    assert!(
        c.get_secret(&SecretRef::new("pushed"))
            .await
            .unwrap_err()
            .is_not_found()
    );
    assert!(
        !c.secret_exists(&PushRemoteRef::new("pushed"))
            .await
            .unwrap()
    );
}

#[tokio::test]
async fn kv1_push_whole_secret_and_delete() {
    let Some(bao) = bao() else { return };
    let mount = unique("kv1");
    bao.mount_kv(&mount, 1).await;
    let h = Harness::new();
    let st = store(token_spec(
        &h,
        &bao,
        json!({"path": mount, "version": "v1"}),
    ));
    let c = h.client(&st).await.unwrap();
    c.push_secret(&push("w", None, &[("a", "1"), ("b", "2")], None))
        .await
        .unwrap();
    let raw = bao.api("GET", &format!("{mount}/w"), None).await;
    assert_eq!(raw["data"]["a"], "1");
    assert_eq!(
        raw["data"]["custom_metadata"]["managed-by"],
        "external-secrets"
    );
    vaultrs::kv1::set(
        &bao.admin,
        &mount,
        "other",
        &std::collections::HashMap::from([("k", "v")]),
    )
    .await
    .unwrap();
    let e = c
        .push_secret(&push("other", None, &[("a", "1")], None))
        .await
        .unwrap_err();
    assert!(
        e.message().contains("not managed by external-secrets"),
        "{e}"
    );
    c.delete_secret(&PushRemoteRef::new("w")).await.unwrap();
    assert!(
        c.get_secret(&SecretRef::new("w"))
            .await
            .unwrap_err()
            .is_not_found()
    );
}

#[tokio::test]
async fn non_kv_path_is_read_with_get() {
    let Some(bao) = bao() else { return };
    let transit = unique("transit");
    bao.api(
        "POST",
        &format!("sys/mounts/{transit}"),
        Some(json!({"type": "transit"})),
    )
    .await;
    bao.api("POST", &format!("{transit}/keys/app"), Some(json!({})))
        .await;
    let h = Harness::new();
    // ESO: a v1 store without path reads `key` as given.
    let st = store(token_spec(&h, &bao, json!({"version": "v1"})));
    let c = h.client(&st).await.unwrap();
    let v = c
        .get_secret(&SecretRef::new(format!("{transit}/keys/app")).with_property("type"))
        .await
        .unwrap();
    assert_eq!(s(&v), "aes256-gcm96");
}

#[tokio::test]
async fn wrong_token_gives_a_clear_error() {
    let Some(bao) = bao() else { return };
    let h = Harness::new();
    h.kube
        .add_secret(secret("ns", "bad", &[("token", "s.not-a-real-token")]));
    let st = store(
        json!({"server": bao.addr, "auth": {"tokenSecretRef": {"name": "bad", "key": "token"}}}),
    );
    let c = h.client(&st).await.unwrap();
    match c.validate().await {
        ValidationResult::Error(m) => {
            assert!(m.contains("cannot validate the vault token"), "{m}");
            assert!(m.contains("permission denied"), "{m}");
            assert!(!m.contains("s.not-a-real-token"), "token leaked: {m}");
        }
        other => panic!("expected an error, got {other:?}"),
    }
    let e = c.get_secret(&SecretRef::new("secret/x")).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Auth);
    // a missing token Secret is an error at client build
    let st = store(
        json!({"server": bao.addr, "auth": {"tokenSecretRef": {"name": "absent", "key": "token"}}}),
    );
    assert!(h.client(&st).await.is_err());
}

#[tokio::test]
async fn validate_ok_with_a_good_token() {
    let Some(bao) = bao() else { return };
    let h = Harness::new();
    let st = store(token_spec(&h, &bao, json!({})));
    let c = h.client(&st).await.unwrap();
    assert_eq!(c.validate().await, ValidationResult::Ready);
    assert_eq!(h.recorder.count("LookupSelf"), 1);
}

#[tokio::test]
async fn stopped_server_is_an_error() {
    // A port nothing listens on.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let h = Harness::new();
    h.kube.add_secret(secret("ns", "t", &[("token", "root")]));
    let st = store(
        json!({"server": format!("http://127.0.0.1:{port}"), "auth": {"tokenSecretRef": {"name": "t", "key": "token"}}}),
    );
    // static tokens need no login, so the client builds; every call fails
    let c = h.client(&st).await.unwrap();
    let e = c.get_secret(&SecretRef::new("secret/x")).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Transient);
    assert!(e.message().contains("cannot reach Vault"), "{e}");
    assert!(matches!(c.validate().await, ValidationResult::Error(_)));
}

#[tokio::test]
async fn sealed_server_is_an_error() {
    let Some(_bao) = bao() else { return };
    let Ok(bin) = std::env::var("ESR_TEST_BAO_BIN") else {
        println!("skipped: ESR_TEST_BAO_BIN not set");
        return;
    };
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let addr = format!("http://127.0.0.1:{port}");
    let mut child = std::process::Command::new(bin)
        .args(["server", "-dev", "-dev-root-token-id=root"])
        .arg(format!("-dev-listen-address=127.0.0.1:{port}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let http = reqwest::Client::new();
    let mut up = false;
    for _ in 0..300 {
        if http
            .get(format!("{addr}/v1/sys/health"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            up = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(up, "second bao dev server did not start");
    let h = Harness::new();
    h.kube.add_secret(secret("ns", "t", &[("token", "root")]));
    let st = store(json!({"server": addr, "path": "secret",
                          "auth": {"tokenSecretRef": {"name": "t", "key": "token"}}}));
    let c = h.client(&st).await.unwrap();
    http.post(format!("{addr}/v1/secret/data/app"))
        .header("x-vault-token", "root")
        .json(&json!({"data": {"k": "v"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        s(&c.get_secret(&SecretRef::new("app").with_property("k"))
            .await
            .unwrap()),
        "v"
    );
    let sealed = http
        .put(format!("{addr}/v1/sys/seal"))
        .header("x-vault-token", "root")
        .send()
        .await
        .unwrap();
    assert!(sealed.status().is_success());
    let e = c.get_secret(&SecretRef::new("app")).await.unwrap_err();
    let v = c.validate().await;
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(e.kind(), ErrorKind::Transient, "{e}");
    assert!(e.message().contains("sealed"), "{e}");
    match v {
        ValidationResult::Error(m) => assert!(m.contains("sealed"), "{m}"),
        other => panic!("expected an error, got {other:?}"),
    }
}
