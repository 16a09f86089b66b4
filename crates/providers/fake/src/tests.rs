use super::*;
use esr_provider::{
    ConversionStrategy, ErrorKind, FindName, KubeAccess, MetadataPolicy, StaticKubeAccess,
    StoreKind,
};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use serde_json::json;

fn store(name: &str, fake: serde_json::Value) -> StoreInfo {
    StoreInfo::new(
        StoreKind::ClusterSecretStore,
        name,
        None,
        json!({"provider": {"fake": fake}}),
    )
}

fn demo_store() -> StoreInfo {
    store(
        "demo",
        json!({"data": [
            {"key": "plain", "value": "hello"},
            {"key": "db", "value": r#"{"user":"admin","pass":"s3cr3t","port":5432,"nested":{"a":"b"},"list":["x","y"]}"#},
            {"key": "db", "value": r#"{"user":"v1-admin"}"#, "version": "v1"},
            {"key": "db", "value": r#"{"user":"v2-admin"}"#, "version": "v2"},
            {"key": "app/one", "value": "1"},
            {"key": "app/two", "value": "2-old", "version": "a"},
            {"key": "app/two", "value": "2-new", "version": "b"},
            {"key": "other", "value": "o"}
        ]}),
    )
}

async fn client_for(p: &FakeProvider, s: &StoreInfo) -> Arc<dyn SecretsClient> {
    let kube: Arc<dyn KubeAccess> = Arc::new(StaticKubeAccess::new());
    let ctx = ClientContext::new(s, Some("ns"), kube);
    p.new_client(&ctx).await.unwrap_or_else(|e| panic!("{e}"))
}

async fn client() -> Arc<dyn SecretsClient> {
    client_for(&FakeProvider::isolated(), &demo_store()).await
}

fn text(r: Result<Vec<u8>>) -> std::result::Result<String, (ErrorKind, String)> {
    r.map(|v| String::from_utf8_lossy(&v).into_owned())
        .map_err(|e| (e.kind(), e.to_string()))
}

fn not_found() -> std::result::Result<String, (ErrorKind, String)> {
    Err((ErrorKind::NotFound, "Secret does not exist".to_string()))
}

#[tokio::test]
async fn get_secret_exact_version_match() {
    let c = client().await;
    assert_eq!(
        text(c.get_secret(&SecretRef::new("plain")).await),
        Ok("hello".into())
    );
    assert_eq!(
        text(c.get_secret(&SecretRef::new("db").with_version("v1")).await),
        Ok(r#"{"user":"v1-admin"}"#.into())
    );
    // the unversioned entry is only returned without version
    assert_eq!(
        text(
            c.get_secret(&SecretRef::new("db").with_property("user"))
                .await
        ),
        Ok("admin".into())
    );
    assert_eq!(
        text(c.get_secret(&SecretRef::new("db").with_version("v3")).await),
        not_found()
    );
    assert_eq!(
        text(
            c.get_secret(&SecretRef::new("plain").with_version("v1"))
                .await
        ),
        not_found()
    );
    assert_eq!(
        text(c.get_secret(&SecretRef::new("nope")).await),
        not_found()
    );
    // "app/two" only exists with versions: no unversioned match
    assert_eq!(
        text(c.get_secret(&SecretRef::new("app/two")).await),
        not_found()
    );
}

#[tokio::test]
async fn get_secret_property_is_gjson() {
    let c = client().await;
    let get = |p: &str| SecretRef::new("db").with_property(p);
    assert_eq!(text(c.get_secret(&get("pass")).await), Ok("s3cr3t".into()));
    assert_eq!(text(c.get_secret(&get("port")).await), Ok("5432".into()));
    assert_eq!(text(c.get_secret(&get("nested.a")).await), Ok("b".into()));
    assert_eq!(
        text(c.get_secret(&get("nested")).await),
        Ok(r#"{"a":"b"}"#.into())
    );
    assert_eq!(text(c.get_secret(&get("list.1")).await), Ok("y".into()));
    assert_eq!(text(c.get_secret(&get("list.#")).await), Ok("2".into()));
    assert_eq!(text(c.get_secret(&get("missing")).await), not_found());
    // metadataPolicy is ignored by the fake provider
    let r = get("user").with_metadata_policy(MetadataPolicy::Fetch);
    assert_eq!(text(c.get_secret(&r).await), Ok("admin".into()));
}

#[tokio::test]
async fn get_secret_map_unquotes_strings() {
    let c = client().await;
    let m = c
        .get_secret_map(&SecretRef::new("db"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let s = |k: &str| m.get(k).map(|v| String::from_utf8_lossy(v).into_owned());
    assert_eq!(s("user").as_deref(), Some("admin"));
    assert_eq!(s("port").as_deref(), Some("5432"));
    assert_eq!(s("nested").as_deref(), Some(r#"{"a":"b"}"#));
    assert_eq!(s("list").as_deref(), Some(r#"["x","y"]"#));
    assert_eq!(m.len(), 5);
    let nested = c
        .get_secret_map(&SecretRef::new("db").with_property("nested"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(nested.get("a").map(|v| v.as_slice()), Some(&b"b"[..]));
    let e = c.get_secret_map(&SecretRef::new("plain")).await.err();
    assert!(
        e.map(|e| e.to_string().starts_with("unable to unmarshal secret: "))
            .unwrap_or(false)
    );
    let e = c.get_secret_map(&SecretRef::new("nope")).await.err();
    assert!(e.map(|e| e.is_not_found()).unwrap_or(false));
}

#[tokio::test]
async fn find_by_name_takes_highest_version_and_converts_keys() {
    let c = client().await;
    let find = |re: &str, cs| FindRequest {
        name: Some(FindName { regexp: re.into() }),
        conversion_strategy: cs,
        ..Default::default()
    };
    let m = c
        .get_all_secrets(&find("^app/", ConversionStrategy::Default))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let got: Vec<(String, String)> = m
        .iter()
        .map(|(k, v)| (k.clone(), String::from_utf8_lossy(v).into_owned()))
        .collect();
    assert_eq!(
        got,
        vec![
            ("app_one".to_string(), "1".to_string()),
            ("app_two".to_string(), "2-new".to_string())
        ]
    );
    let m = c
        .get_all_secrets(&find("^app/one$", ConversionStrategy::Unicode))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        m.keys().cloned().collect::<Vec<_>>(),
        vec!["app_U002f_one".to_string()]
    );
    // unversioned "db" and "db" v1/v2: the highest version wins (lexically, "v2" > "")
    let m = c
        .get_all_secrets(&find("^db$", ConversionStrategy::Default))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        m.get("db").map(|v| v.as_slice()),
        Some(&br#"{"user":"v2-admin"}"#[..])
    );
    assert!(
        c.get_all_secrets(&find("(", ConversionStrategy::Default))
            .await
            .is_err()
    );
}

#[tokio::test]
async fn find_by_tags_only_is_an_error() {
    let c = client().await;
    let f = FindRequest {
        tags: Some(BTreeMap::from([("a".to_string(), "b".to_string())])),
        ..Default::default()
    };
    let e = c.get_all_secrets(&f).await.err();
    assert_eq!(e.as_ref().map(|e| e.kind()), Some(ErrorKind::Invalid));
    assert!(
        e.map(|e| e.to_string().contains("unsupported find operator"))
            .unwrap_or(false)
    );
}

fn source(pairs: &[(&str, &str)]) -> Secret {
    Secret {
        data: Some(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                .collect(),
        ),
        ..Default::default()
    }
}

fn push(key: &str, remote: &str, src: &Secret) -> PushRequest {
    let sk = if key.is_empty() {
        None
    } else {
        Some(key.to_string())
    };
    PushRequest::from_secret(src.clone(), PushRemoteRef::new(remote), sk, None)
        .unwrap_or_else(|e| panic!("{e}"))
}

#[tokio::test]
async fn push_read_back_update_delete() {
    let p = FakeProvider::isolated();
    let s = demo_store();
    let c = client_for(&p, &s).await;
    let src = source(&[("token", "t1"), ("other", "o")]);
    c.push_secret(&push("token", "pushed", &src))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        text(c.get_secret(&SecretRef::new("pushed")).await),
        Ok("t1".into())
    );
    assert_eq!(
        c.secret_exists(&PushRemoteRef::new("pushed")).await.ok(),
        Some(true)
    );
    // update
    let src2 = source(&[("token", "t2")]);
    c.push_secret(&push("token", "pushed", &src2))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        text(c.get_secret(&SecretRef::new("pushed")).await),
        Ok("t2".into())
    );
    // whole secret
    c.push_secret(&push("", "whole", &src))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        text(
            c.get_secret(&SecretRef::new("whole").with_property("other"))
                .await
        ),
        Ok("o".into())
    );
    // a key from the spec is refused
    let e = c
        .push_secret(&push("token", "plain", &src))
        .await
        .err()
        .map(|e| e.to_string());
    assert_eq!(e.as_deref(), Some("key already exists"));
    // pushed values survive a new client (store update) of the same store...
    let c2 = client_for(&p, &s).await;
    assert_eq!(
        text(c2.get_secret(&SecretRef::new("pushed")).await),
        Ok("t2".into())
    );
    // ...but are per store
    let c3 = client_for(&p, &store("another", json!({"data": []}))).await;
    assert_eq!(
        text(c3.get_secret(&SecretRef::new("pushed")).await),
        not_found()
    );
    // delete removes pushed values only
    c.delete_secret(&PushRemoteRef::new("pushed"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    c.delete_secret(&PushRemoteRef::new("plain"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        c.secret_exists(&PushRemoteRef::new("pushed")).await.ok(),
        Some(false)
    );
    assert_eq!(
        text(c.get_secret(&SecretRef::new("plain")).await),
        Ok("hello".into())
    );
}

#[tokio::test]
async fn spec_changes_replace_spec_entries() {
    let p = FakeProvider::isolated();
    let c = client_for(
        &p,
        &store("s", json!({"data": [{"key": "a", "value": "1"}]})),
    )
    .await;
    assert_eq!(
        text(c.get_secret(&SecretRef::new("a")).await),
        Ok("1".into())
    );
    let c = client_for(
        &p,
        &store("s", json!({"data": [{"key": "b", "value": "2"}]})),
    )
    .await;
    assert_eq!(text(c.get_secret(&SecretRef::new("a")).await), not_found());
    assert_eq!(
        text(c.get_secret(&SecretRef::new("b")).await),
        Ok("2".into())
    );
}

#[tokio::test]
async fn validation_results() {
    let p = FakeProvider::isolated();
    for (vr, want) in [
        (json!(null), ValidationResult::Ready),
        (json!(0), ValidationResult::Ready),
        (json!(1), ValidationResult::Unknown),
        (
            json!(2),
            ValidationResult::Error("unable to validate".into()),
        ),
    ] {
        let s = store("v", json!({"data": [], "validationResult": vr}));
        let c = client_for(&p, &s).await;
        assert_eq!(c.validate().await, want);
    }
}

#[test]
fn validate_store_and_metadata() {
    let p = FakeProvider::isolated();
    assert_eq!(p.name(), "fake");
    assert_eq!(p.capabilities(&demo_store()), Capabilities::ReadWrite);
    assert_eq!(p.maintenance(), Maintenance::NotMaintained);
    assert!(p.validate_store(&demo_store()).is_ok());
    let e = p
        .validate_store(&store(
            "x",
            json!({"data": [{"key": "a", "value": "1"}, {"key": "", "value": "v"}]}),
        ))
        .err()
        .map(|e| e.to_string());
    assert_eq!(e.as_deref(), Some("key must be set in data 1"));
    let e = p
        .validate_store(&store("x", json!({"data": [{"key": "a", "value": ""}]})))
        .err()
        .map(|e| e.to_string());
    assert_eq!(
        e.as_deref(),
        Some("at least one value must be set in data 0")
    );
}

#[tokio::test]
async fn new_client_without_fake_spec_fails() {
    let p = FakeProvider::isolated();
    let s = StoreInfo::new(
        StoreKind::SecretStore,
        "s",
        Some("ns".into()),
        json!({"provider": {"aws": {}}}),
    );
    let kube: Arc<dyn KubeAccess> = Arc::new(StaticKubeAccess::new());
    let ctx = ClientContext::new(&s, Some("ns"), kube);
    let e = p.new_client(&ctx).await.err().map(|e| e.to_string());
    assert_eq!(e.as_deref(), Some("missing store provider fake"));
}

#[tokio::test]
async fn batch_default_keeps_order() {
    let c = client().await;
    let r = c
        .get_secrets(&[
            SecretRef::new("plain"),
            SecretRef::new("nope"),
            SecretRef::new("other"),
        ])
        .await;
    let r: Vec<_> = r.into_iter().map(text).collect();
    assert_eq!(r, vec![Ok("hello".into()), not_found(), Ok("o".into())]);
}

#[tokio::test]
async fn new_instances_share_pushed_values() {
    let s = store("shared-between-instances", json!({"data": []}));
    let a = client_for(&FakeProvider::new(), &s).await;
    let src = source(&[("k", "v")]);
    a.push_secret(&push("k", "shared-key", &src))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let b = client_for(&FakeProvider::new(), &s).await;
    assert_eq!(
        text(b.get_secret(&SecretRef::new("shared-key")).await),
        Ok("v".into())
    );
    let isolated = client_for(&FakeProvider::isolated(), &s).await;
    assert_eq!(
        text(isolated.get_secret(&SecretRef::new("shared-key")).await),
        not_found()
    );
}
