use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use esr_provider::{
    ConversionStrategy, ErrorKind, FindName, FindRequest, KubeCredentials, MemoryRecorder,
    MetadataPolicy, PushRemoteRef, PushRequest, SecretRef, StaticKubeAccess, ValidationResult,
};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::json;

use super::*;

fn secret(ns: &str, name: &str, pairs: &[(&str, &str)]) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(ns.into()),
            ..Default::default()
        },
        data: Some(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                .collect(),
        ),
        ..Default::default()
    }
}

fn labelled(mut s: Secret, labels: &[(&str, &str)], annotations: &[(&str, &str)]) -> Secret {
    let m = |p: &[(&str, &str)]| {
        p.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>()
    };
    if !labels.is_empty() {
        s.metadata.labels = Some(m(labels));
    }
    if !annotations.is_empty() {
        s.metadata.annotations = Some(m(annotations));
    }
    s
}

fn world() -> Arc<StaticKubeAccess> {
    let k = StaticKubeAccess::new();
    k.add_secret(labelled(
        secret(
            "remote",
            "app",
            &[
                ("user", "admin"),
                ("file.png", "PNG"),
                ("json", r#"{"a":{"b":"deep"},"n":1.50,"list":["x","y"]}"#),
            ],
        ),
        &[("team", "a"), ("env", "prod")],
        &[("note", r#"{"x":{"y":"z"}}"#)],
    ));
    k.add_secret(labelled(
        secret("remote", "db-one", &[("p", "1")]),
        &[("team", "b")],
        &[],
    ));
    k.add_secret(labelled(
        secret("remote", "db/two", &[("p", "2")]),
        &[("team", "b")],
        &[],
    ));
    k.add_secret(secret(
        "remote",
        "nested",
        &[("cfg", r#"{"k":"v","n":2,"o":{"z":true}}"#)],
    ));
    k.add_secret(secret("store-ns", "token", &[("token", "bearer-123")]));
    k.add_secret(secret("shared", "token", &[("token", "shared-bearer")]));
    k.add_secret(secret(
        "store-ns",
        "tls",
        &[("crt", "CERT"), ("key", "KEY")],
    ));
    Arc::new(k)
}

fn store(kind: StoreKind, provider: serde_json::Value) -> StoreInfo {
    let ns = match kind {
        StoreKind::SecretStore => Some("store-ns".to_string()),
        StoreKind::ClusterSecretStore => None,
    };
    StoreInfo::new(
        kind,
        "k8s",
        ns,
        json!({"provider": {"kubernetes": provider}}),
    )
}

fn token_store(kind: StoreKind) -> StoreInfo {
    let ns = if kind.is_cluster() {
        json!("store-ns")
    } else {
        json!(null)
    };
    store(
        kind,
        json!({"remoteNamespace": "remote",
               "auth": {"token": {"bearerToken": {"name": "token", "key": "token", "namespace": ns}}}}),
    )
}

async fn client_with(
    s: &StoreInfo,
    kube: Arc<dyn KubeAccess>,
    ns: Option<&str>,
    rec: Arc<MemoryRecorder>,
) -> Result<Arc<dyn SecretsClient>> {
    let ctx = ClientContext::new(s, ns, kube).with_recorder(rec);
    KubernetesProvider::new().new_client(&ctx).await
}

async fn client(
    kind: StoreKind,
) -> (
    Arc<dyn SecretsClient>,
    Arc<StaticKubeAccess>,
    Arc<MemoryRecorder>,
) {
    let kube = world();
    let rec = Arc::new(MemoryRecorder::new());
    let s = token_store(kind);
    let c = client_with(&s, kube.clone(), Some("store-ns"), rec.clone())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    (c, kube, rec)
}

fn text(r: Result<Vec<u8>>) -> std::result::Result<String, (ErrorKind, String)> {
    r.map(|v| String::from_utf8_lossy(&v).into_owned())
        .map_err(|e| (e.kind(), e.to_string()))
}

fn map_text(m: &BTreeMap<String, Vec<u8>>) -> BTreeMap<String, String> {
    m.iter()
        .map(|(k, v)| (k.clone(), String::from_utf8_lossy(v).into_owned()))
        .collect()
}

#[tokio::test]
async fn get_secret_without_property_is_json_of_all_keys() {
    let (c, _, rec) = client(StoreKind::SecretStore).await;
    assert_eq!(
        text(c.get_secret(&SecretRef::new("db-one")).await),
        Ok(r#"{"p":"1"}"#.into())
    );
    assert_eq!(
        text(c.get_secret(&SecretRef::new("app").with_metadata_policy(MetadataPolicy::Fetch)).await),
        Ok(r#"{"annotations":{"note":"{\"x\":{\"y\":\"z\"}}"},"labels":{"env":"prod","team":"a"}}"#.into())
    );
    assert_eq!(
        text(
            c.get_secret(&SecretRef::new("nested").with_metadata_policy(MetadataPolicy::Fetch))
                .await
        ),
        Ok(r#"{"annotations":null,"labels":null}"#.into())
    );
    assert_eq!(rec.count("GetSecret"), 3);
    assert!(rec.calls().iter().all(|c| c.provider == "Kubernetes"));
}

#[tokio::test]
async fn get_secret_properties_literal_first_then_gjson() {
    let (c, _, _) = client(StoreKind::SecretStore).await;
    let get = |p: &str| SecretRef::new("app").with_property(p);
    assert_eq!(text(c.get_secret(&get("user")).await), Ok("admin".into()));
    assert_eq!(text(c.get_secret(&get("file.png")).await), Ok("PNG".into()));
    assert_eq!(
        text(c.get_secret(&get("json.a.b")).await),
        Ok("deep".into())
    );
    assert_eq!(text(c.get_secret(&get("json.n")).await), Ok("1.5".into()));
    assert_eq!(
        text(c.get_secret(&get("json.list.1")).await),
        Ok("y".into())
    );
    assert_eq!(
        text(c.get_secret(&get("json.a")).await),
        Ok(r#"{"b":"deep"}"#.into())
    );
    // a missing property is a plain error, not NoSecretErr (as ESO)
    assert_eq!(
        text(c.get_secret(&get("json.zz")).await),
        Err((
            ErrorKind::Invalid,
            r#"property json.zz does not exist in data of secret "app""#.into()
        ))
    );
    assert!(text(c.get_secret(&get(".x")).await).is_err());
    assert!(text(c.get_secret(&get("json.")).await).is_err());
}

#[tokio::test]
async fn get_secret_metadata_properties() {
    let (c, _, _) = client(StoreKind::SecretStore).await;
    let get = |p: &str| {
        SecretRef::new("app")
            .with_property(p)
            .with_metadata_policy(MetadataPolicy::Fetch)
    };
    assert_eq!(
        text(c.get_secret(&get("labels")).await),
        Ok(r#"{"env":"prod","team":"a"}"#.into())
    );
    assert_eq!(
        text(c.get_secret(&get("labels.team")).await),
        Ok("a".into())
    );
    assert_eq!(
        text(c.get_secret(&get("annotations.note.x")).await),
        Ok(r#"{"y":"z"}"#.into())
    );
    assert_eq!(
        text(c.get_secret(&get("spec")).await),
        Err((
            ErrorKind::Invalid,
            r#"property spec does not exist in metadata of secret "app""#.into()
        ))
    );
    assert!(text(c.get_secret(&get("labels.nope")).await).is_err());
}

#[tokio::test]
async fn missing_secret_get_is_raw_api_error_but_map_is_no_secret_err() {
    let (c, _, _) = client(StoreKind::SecretStore).await;
    assert_eq!(
        text(c.get_secret(&SecretRef::new("ghost")).await),
        Err((ErrorKind::Invalid, r#"secrets "ghost" not found"#.into()))
    );
    let e = c.get_secret_map(&SecretRef::new("ghost")).await.err();
    assert_eq!(
        e.map(|e| (e.is_not_found(), e.to_string())),
        Some((true, "Secret does not exist".to_string()))
    );
}

#[tokio::test]
async fn get_secret_map_forms() {
    let (c, _, _) = client(StoreKind::SecretStore).await;
    let m = c
        .get_secret_map(&SecretRef::new("db-one"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        map_text(&m),
        BTreeMap::from([("p".to_string(), "1".to_string())])
    );
    // a property selects one JSON key; values are re-marshalled as ESO does (strings quoted)
    let m = c
        .get_secret_map(&SecretRef::new("nested").with_property("cfg"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        map_text(&m),
        BTreeMap::from([
            ("k".to_string(), "\"v\"".to_string()),
            ("n".to_string(), "2".to_string()),
            ("o".to_string(), r#"{"z":true}"#.to_string()),
        ])
    );
    let e = c
        .get_secret_map(&SecretRef::new("nested").with_property("nope"))
        .await
        .err()
        .map(|e| e.to_string());
    assert_eq!(
        e.as_deref(),
        Some("property nope does not exist in key nested")
    );
    let e = c
        .get_secret_map(&SecretRef::new("app").with_property("user"))
        .await
        .err()
        .map(|e| e.to_string());
    assert_eq!(
        e.as_deref(),
        Some("failed to unmarshal secret: invalid JSON format")
    );
    // a dotted literal key is found through the escaped path
    let e = c
        .get_secret_map(&SecretRef::new("app").with_property("file.png"))
        .await
        .err();
    assert_eq!(
        e.map(|e| e.to_string()).as_deref(),
        Some("failed to unmarshal secret: invalid JSON format")
    );
    let m = c
        .get_secret_map(&SecretRef::new("app").with_metadata_policy(MetadataPolicy::Fetch))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        map_text(&m),
        BTreeMap::from([
            (
                "annotations".to_string(),
                r#"{"note":"{\"x\":{\"y\":\"z\"}}"}"#.to_string()
            ),
            (
                "labels".to_string(),
                r#"{"env":"prod","team":"a"}"#.to_string()
            ),
        ])
    );
    let m = c
        .get_secret_map(
            &SecretRef::new("app")
                .with_metadata_policy(MetadataPolicy::Fetch)
                .with_property("labels"),
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        map_text(&m),
        BTreeMap::from([
            ("env".to_string(), "\"prod\"".to_string()),
            ("team".to_string(), "\"a\"".to_string()),
        ])
    );
}

#[tokio::test]
async fn find_by_name_and_tags() {
    let (c, _, rec) = client(StoreKind::SecretStore).await;
    let by_name = FindRequest {
        name: Some(FindName {
            regexp: "^db".into(),
        }),
        ..Default::default()
    };
    let m = c
        .get_all_secrets(&by_name)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        map_text(&m),
        BTreeMap::from([
            ("db-one".to_string(), r#"{"p":"1"}"#.to_string()),
            ("db_two".to_string(), r#"{"p":"2"}"#.to_string()),
        ])
    );
    let unicode = FindRequest {
        conversion_strategy: ConversionStrategy::Unicode,
        ..by_name
    };
    let m = c
        .get_all_secrets(&unicode)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(m.contains_key("db_U002f_two"));
    let by_tags = FindRequest {
        tags: Some(BTreeMap::from([("team".to_string(), "a".to_string())])),
        ..Default::default()
    };
    let m = c
        .get_all_secrets(&by_tags)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        m.keys().cloned().collect::<Vec<_>>(),
        vec!["app".to_string()]
    );
    // empty tags: everything in the remote namespace
    let all = FindRequest {
        tags: Some(BTreeMap::new()),
        ..Default::default()
    };
    assert_eq!(c.get_all_secrets(&all).await.map(|m| m.len()).ok(), Some(4));
    let bad = FindRequest {
        tags: Some(BTreeMap::from([(
            "team".to_string(),
            "bad value!".to_string(),
        )])),
        ..Default::default()
    };
    let e = c
        .get_all_secrets(&bad)
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.starts_with("unable to validate selector tags: "), "{e}");
    assert!(c.get_all_secrets(&FindRequest::default()).await.is_err());
    assert_eq!(rec.count("ListSecrets"), 4);
}

fn push_req(
    src: &Secret,
    remote: &str,
    property: &str,
    key: &str,
    meta: Option<serde_json::Value>,
) -> PushRequest {
    let sk = if key.is_empty() {
        None
    } else {
        Some(key.to_string())
    };
    PushRequest::from_secret(
        src.clone(),
        PushRemoteRef::new(remote).with_property(property),
        sk,
        meta,
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

fn stored(k: &StaticKubeAccess, ns: &str, name: &str) -> Option<Secret> {
    k.secrets().into_iter().find(|s| {
        s.metadata.namespace.as_deref() == Some(ns) && s.metadata.name.as_deref() == Some(name)
    })
}

fn data_text(s: &Secret) -> BTreeMap<String, String> {
    s.data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), String::from_utf8_lossy(&v.0).into_owned()))
        .collect()
}

fn meta(spec: serde_json::Value) -> Option<serde_json::Value> {
    Some(
        json!({"apiVersion": "kubernetes.external-secrets.io/v1alpha1", "kind": "PushSecretMetadata", "spec": spec}),
    )
}

#[tokio::test]
async fn push_whole_secret_key_and_property() {
    let (c, kube, rec) = client(StoreKind::SecretStore).await;
    let src = labelled(
        secret("app-ns", "local", &[("a", "1"), ("b", "2")]),
        &[("l", "v")],
        &[],
    );
    c.push_secret(&push_req(&src, "pushed", "", "", None))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let s = stored(&kube, "remote", "pushed").unwrap_or_else(|| panic!("not created"));
    assert_eq!(
        data_text(&s),
        BTreeMap::from([("a".into(), "1".into()), ("b".into(), "2".into())])
    );
    assert_eq!(s.type_.as_deref(), Some("Opaque"));
    assert_eq!(
        s.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("l"))
            .map(String::as_str),
        Some("v")
    );
    // one key into a property
    c.push_secret(&push_req(&src, "pushed", "single", "a", None))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // the whole secret as JSON into a property
    c.push_secret(&push_req(&src, "pushed", "all", "", None))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let s = stored(&kube, "remote", "pushed").unwrap_or_else(|| panic!("missing"));
    let d = data_text(&s);
    assert_eq!(d.get("single").map(String::as_str), Some("1"));
    assert_eq!(
        d.get("all").map(String::as_str),
        Some(r#"{"a":"1","b":"2"}"#)
    );
    assert_eq!(d.get("a").map(String::as_str), Some("1"));
    // pushing the same again changes nothing: no update call
    let updates = rec.count("UpdateSecret");
    c.push_secret(&push_req(&src, "pushed", "single", "a", None))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(rec.count("UpdateSecret"), updates);
    assert_eq!(rec.count("CreateSecret"), 1);
    // secret key without property is refused
    let e = c
        .push_secret(&push_req(&src, "pushed", "", "a", None))
        .await
        .err()
        .map(|e| e.to_string());
    assert_eq!(
        e.as_deref(),
        Some("requires property in RemoteRef to push secret value if secret key is defined")
    );
    assert_eq!(
        c.secret_exists(&PushRemoteRef::new("pushed")).await.ok(),
        Some(true)
    );
    assert_eq!(
        c.secret_exists(&PushRemoteRef::new("pushed").with_property("single"))
            .await
            .ok(),
        Some(true)
    );
    assert_eq!(
        c.secret_exists(&PushRemoteRef::new("pushed").with_property("zz"))
            .await
            .ok(),
        Some(false)
    );
    assert_eq!(
        c.secret_exists(&PushRemoteRef::new("ghost")).await.ok(),
        Some(false)
    );
}

#[tokio::test]
async fn push_metadata_policies_and_remote_namespace() {
    let (c, kube, _) = client(StoreKind::SecretStore).await;
    let src = labelled(
        secret("x", "local", &[("a", "1")]),
        &[("src", "1")],
        &[("keep", "me")],
    );
    let e = c
        .push_secret(&push_req(
            &src,
            "p",
            "",
            "",
            meta(json!({"remoteNamespace": "other"})),
        ))
        .await
        .err()
        .map(|e| e.to_string());
    assert_eq!(
        e.as_deref(),
        Some("remoteNamespace override is only supported with ClusterSecretStore")
    );
    let e = c
        .push_secret(&push_req(&src, "p", "", "", meta(json!({"bogus": 1}))))
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        e.starts_with("unable to parse metadata parameters: failed to parse"),
        "{e}"
    );
    // Replace the source labels with the metadata's, merge into the target
    c.push_secret(&push_req(
        &src,
        "p",
        "",
        "",
        meta(json!({"sourceMergePolicy": "Replace", "labels": {"only": "this"}})),
    ))
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let s = stored(&kube, "remote", "p").unwrap_or_else(|| panic!("missing"));
    assert_eq!(
        s.metadata.labels,
        Some(BTreeMap::from([("only".to_string(), "this".to_string())]))
    );
    // the source annotations were replaced by none; the target had none
    assert!(s.metadata.annotations.unwrap_or_default().is_empty());
    let e = c
        .push_secret(&push_req(
            &src,
            "p",
            "",
            "",
            meta(json!({"targetMergePolicy": "Nope"})),
        ))
        .await
        .err()
        .map(|e| e.to_string());
    assert_eq!(
        e.as_deref(),
        Some("failed to merge target metadata: unexpected target merge policy \"Nope\"")
    );

    let (cc, kube, _) = client(StoreKind::ClusterSecretStore).await;
    cc.push_secret(&push_req(
        &src,
        "p",
        "",
        "",
        meta(json!({"remoteNamespace": "elsewhere"})),
    ))
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(stored(&kube, "elsewhere", "p").is_some());
    assert!(stored(&kube, "remote", "p").is_none());
}

#[tokio::test]
async fn delete_property_then_secret() {
    let (c, kube, _) = client(StoreKind::SecretStore).await;
    let src = secret("x", "local", &[("a", "1"), ("b", "2")]);
    c.push_secret(&push_req(&src, "d", "", "", None))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    c.delete_secret(&PushRemoteRef::new("d").with_property("a"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let s = stored(&kube, "remote", "d").unwrap_or_else(|| panic!("deleted too early"));
    assert_eq!(data_text(&s), BTreeMap::from([("b".into(), "2".into())]));
    // missing property: nothing
    c.delete_secret(&PushRemoteRef::new("d").with_property("zz"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(stored(&kube, "remote", "d").is_some());
    // last key: the Secret goes
    c.delete_secret(&PushRemoteRef::new("d").with_property("b"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(stored(&kube, "remote", "d").is_none());
    // missing Secret: fine
    c.delete_secret(&PushRemoteRef::new("d"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test]
async fn validate_with_access_review() {
    let (c, kube, rec) = client(StoreKind::SecretStore).await;
    assert_eq!(c.validate().await, ValidationResult::Ready);
    kube.deny_namespace("remote");
    assert_eq!(
        c.validate().await,
        ValidationResult::Error("client is not allowed to get secrets".into())
    );
    assert_eq!(rec.count("CreateSelfSubjectRulesReview"), 2);
}

#[tokio::test]
async fn referent_cluster_store_validates_unknown() {
    let s = store(
        StoreKind::ClusterSecretStore,
        json!({"remoteNamespace": "remote", "auth": {"token": {"bearerToken": {"name": "token", "key": "token"}}}}),
    );
    let rec = Arc::new(MemoryRecorder::new());
    let c = client_with(&s, world(), None, rec.clone())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.validate().await, ValidationResult::Unknown);
    assert!(c.get_secret(&SecretRef::new("app")).await.is_err());
    // with the ExternalSecret namespace, the token is read there
    let online = Arc::new(OnlineKube::new(world()));
    let c = client_with(&s, online.clone(), Some("shared"), rec)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        online.last(),
        Some(KubeCredentials::Token("shared-bearer".into()))
    );
    assert_eq!(
        text(
            c.get_secret(&SecretRef::new("app").with_property("user"))
                .await
        ),
        Ok("admin".into())
    );
}

/// A KubeAccess that behaves like an online one (identities are switched), backed by a static one.
struct OnlineKube {
    inner: Arc<StaticKubeAccess>,
    creds: Mutex<Vec<KubeCredentials>>,
}

impl OnlineKube {
    fn new(inner: Arc<StaticKubeAccess>) -> Self {
        OnlineKube {
            inner,
            creds: Mutex::new(Vec::new()),
        }
    }
    fn last(&self) -> Option<KubeCredentials> {
        self.creds.lock().ok().and_then(|c| c.last().cloned())
    }
}

#[async_trait]
impl KubeAccess for OnlineKube {
    async fn get_secret(&self, ns: &str, name: &str) -> Result<Option<Secret>> {
        self.inner.get_secret(ns, name).await
    }
    async fn list_secrets(&self, ns: &str, sel: Option<&str>) -> Result<Vec<Secret>> {
        self.inner.list_secrets(ns, sel).await
    }
    async fn get_config_map(&self, ns: &str, name: &str) -> Result<Option<ConfigMap>> {
        self.inner.get_config_map(ns, name).await
    }
    async fn get_service_account(&self, ns: &str, name: &str) -> Result<Option<ServiceAccount>> {
        self.inner.get_service_account(ns, name).await
    }
    async fn create_service_account_token(
        &self,
        ns: &str,
        name: &str,
        aud: &[String],
        exp: Option<i64>,
    ) -> Result<String> {
        assert_eq!(exp, Some(3600));
        self.inner
            .create_service_account_token(ns, name, aud, exp)
            .await
    }
    async fn create_secret(&self, s: &Secret) -> Result<Secret> {
        self.inner.create_secret(s).await
    }
    async fn update_secret(&self, s: &Secret) -> Result<Secret> {
        self.inner.update_secret(s).await
    }
    async fn delete_secret(&self, ns: &str, name: &str) -> Result<bool> {
        self.inner.delete_secret(ns, name).await
    }
    async fn can_get_secrets(&self, ns: &str) -> Result<bool> {
        self.inner.can_get_secrets(ns).await
    }
    async fn with_credentials(&self, c: &KubeCredentials) -> Result<Arc<dyn KubeAccess>> {
        if let Ok(mut v) = self.creds.lock() {
            v.push(c.clone());
        }
        Ok(Arc::new(OnlineKube::new(self.inner.clone())))
    }
}

async fn online_client(
    s: &StoreInfo,
    ns: Option<&str>,
) -> (Result<Arc<dyn SecretsClient>>, Arc<OnlineKube>) {
    let w = world();
    w.add_token("store-ns", "reader", "sa-token");
    let online = Arc::new(OnlineKube::new(w));
    let r = client_with(s, online.clone(), ns, Arc::new(MemoryRecorder::new())).await;
    (r, online)
}

#[tokio::test]
async fn same_cluster_uses_store_credentials() {
    // bearer token
    let (r, online) = online_client(&token_store(StoreKind::SecretStore), Some("store-ns")).await;
    assert!(r.is_ok());
    assert_eq!(
        online.last(),
        Some(KubeCredentials::Token("bearer-123".into()))
    );
    // service account token (TokenRequest)
    let s = store(
        StoreKind::SecretStore,
        json!({"remoteNamespace": "remote", "server": {"url": "https://kubernetes.default.svc:443"},
               "auth": {"serviceAccount": {"name": "reader"}}}),
    );
    let (r, online) = online_client(&s, Some("store-ns")).await;
    assert!(r.is_ok());
    assert_eq!(
        online.last(),
        Some(KubeCredentials::Token("sa-token".into()))
    );
    // client certificate
    let s = store(
        StoreKind::SecretStore,
        json!({"auth": {"cert": {"clientCert": {"name": "tls", "key": "crt"}, "clientKey": {"name": "tls", "key": "key"}}}}),
    );
    let (r, online) = online_client(&s, Some("store-ns")).await;
    assert!(r.is_ok());
    assert_eq!(
        online.last(),
        Some(KubeCredentials::ClientCert {
            cert_pem: b"CERT".to_vec(),
            key_pem: b"KEY".to_vec()
        })
    );
}

#[tokio::test]
async fn connection_errors_have_eso_texts() {
    let err = |s: StoreInfo| async move {
        let (r, _) = online_client(&s, Some("store-ns")).await;
        r.err().map(|e| e.to_string()).unwrap_or_default()
    };
    assert_eq!(
        err(store(StoreKind::SecretStore, json!({}))).await,
        "failed to prepare auth: no auth provider given"
    );
    assert_eq!(
        err(store(
            StoreKind::SecretStore,
            json!({"auth": {"token": {"bearerToken": {"name": "token", "key": "token"}}, "serviceAccount": {"name": "x"}}})
        ))
        .await,
        format!("failed to prepare auth: {ERR_MULTIPLE_AUTH}")
    );
    assert_eq!(
        err(store(
            StoreKind::SecretStore,
            json!({"authRef": {"name": "k", "key": "c"}, "auth": {"serviceAccount": {"name": "x"}}})
        ))
        .await,
        format!("failed to prepare auth: {ERR_AUTHREF_WITH_INLINE}")
    );
    assert_eq!(
        err(store(
            StoreKind::SecretStore,
            json!({"auth": {"token": {"bearerToken": {"name": "missing", "key": "token"}}}})
        ))
        .await,
        r#"failed to prepare auth: could not fetch Auth.Token.BearerToken: cannot get Kubernetes secret "missing" from namespace "store-ns": secrets "missing" not found"#
    );
    let e = err(store(
        StoreKind::SecretStore,
        json!({"auth": {"serviceAccount": {"name": "nobody"}}}),
    ))
    .await;
    assert!(
        e.starts_with("failed to prepare auth: could not fetch Auth.ServiceAccount: cannot create service account token: \""),
        "{e}"
    );
    let e = err(store(
        StoreKind::SecretStore,
        json!({"auth": {"cert": {"clientCert": {"name": "tls", "key": "nope"}, "clientKey": {"name": "tls", "key": "key"}}}}),
    ))
    .await;
    assert_eq!(
        e,
        r#"failed to prepare auth: could not fetch client key and cert: unable to fetch client certificate: cannot find secret data for key: "nope""#
    );
    let e = err(store(
        StoreKind::SecretStore,
        json!({"authRef": {"name": "token", "key": "token"}}),
    ))
    .await;
    assert_eq!(
        e,
        "failed to prepare auth: invalid kubeconfig: cannot parse the YAML document"
    );
    assert!(!e.contains("bearer-123"));
}

#[tokio::test]
async fn remote_cluster_needs_valid_ca() {
    let s = store(
        StoreKind::SecretStore,
        json!({"server": {"url": "https://10.9.8.7:6443", "caBundle": "bm90IGEgY2VydA=="},
               "auth": {"token": {"bearerToken": {"name": "token", "key": "token"}}}}),
    );
    let (r, _) = online_client(&s, Some("store-ns")).await;
    assert_eq!(
        r.err().map(|e| e.to_string()).as_deref(),
        Some(
            "failed to prepare auth: failed to decode ca bundle: failed to parse the new certificate, not valid pem data"
        )
    );
}

#[tokio::test]
async fn offline_same_cluster_needs_no_credentials() {
    let s = store(
        StoreKind::SecretStore,
        json!({"remoteNamespace": "remote", "auth": {"serviceAccount": {"name": "nobody"}}}),
    );
    let c = client_with(
        &s,
        world(),
        Some("store-ns"),
        Arc::new(MemoryRecorder::new()),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        text(
            c.get_secret(&SecretRef::new("app").with_property("user"))
                .await
        ),
        Ok("admin".into())
    );
}

#[test]
fn same_cluster_urls() {
    for u in [
        None,
        Some(""),
        Some("kubernetes.default"),
        Some("https://kubernetes.default"),
        Some("https://kubernetes.default.svc:443/"),
        Some("kubernetes.default.svc.cluster.local"),
    ] {
        assert!(is_same_cluster_url(u), "{u:?}");
    }
    for u in [
        "https://10.0.0.1:6443",
        "my-cluster.example.com",
        "https://kubernetes.default:6443",
    ] {
        assert!(!is_same_cluster_url(Some(u)), "{u}");
    }
}

#[test]
fn validate_store_rules() {
    let p = KubernetesProvider::new();
    let w = p
        .validate_store(&token_store(StoreKind::SecretStore))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(w, vec![WARN_NO_CA_CONFIGURED.to_string()]);
    let e = |kind, spec| {
        p.validate_store(&store(kind, spec))
            .err()
            .map(|e| e.to_string())
    };
    assert_eq!(
        e(
            StoreKind::ClusterSecretStore,
            json!({"server": {"caProvider": {"type": "Secret", "name": "ca", "key": "k"}}})
        )
        .as_deref(),
        Some("CAProvider.namespace must not be empty with ClusterSecretStore")
    );
    assert_eq!(
        e(StoreKind::SecretStore, json!({"server": {"caProvider": {"type": "Secret", "name": "ca", "key": "k", "namespace": "x"}}})).as_deref(),
        Some("CAProvider.namespace must be empty with SecretStore")
    );
    assert_eq!(
        e(
            StoreKind::SecretStore,
            json!({"auth": {"token": {"bearerToken": {"key": "k"}}}})
        )
        .as_deref(),
        Some("BearerToken.Name cannot be empty")
    );
    assert_eq!(
        e(
            StoreKind::SecretStore,
            json!({"auth": {"token": {"bearerToken": {"name": "n"}}}})
        )
        .as_deref(),
        Some("BearerToken.Key cannot be empty")
    );
    assert_eq!(
        e(
            StoreKind::ClusterSecretStore,
            json!({"auth": {"token": {"bearerToken": {"name": "n", "key": "k"}}}})
        )
        .as_deref(),
        Some("cluster scope requires namespace")
    );
    assert_eq!(
        e(StoreKind::SecretStore, json!({"auth": {"cert": {"clientCert": {"name": "n"}, "clientKey": {"name": "n", "key": "k"}}}})).as_deref(),
        Some("ClientCert.Key cannot be empty")
    );
    assert_eq!(
        e(
            StoreKind::SecretStore,
            json!({"auth": {"serviceAccount": {"name": "sa", "namespace": "other"}}})
        )
        .as_deref(),
        Some(esr_provider::refs::ERR_NAMESPACE_NOT_ALLOWED)
    );
    assert!(
        e(
            StoreKind::ClusterSecretStore,
            json!({"auth": {"serviceAccount": {"name": "sa"}}})
        )
        .is_none()
    );
    let w = p
        .validate_store(&store(
            StoreKind::SecretStore,
            json!({"server": {"caBundle": "eA=="}}),
        ))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(w.is_empty());
    assert_eq!(
        p.capabilities(&token_store(StoreKind::SecretStore)),
        Capabilities::ReadWrite
    );
    assert_eq!(p.name(), "kubernetes");
    assert_eq!(p.metric_provider(), "Kubernetes");
}

#[test]
fn referent_detection() {
    let auth = |v: serde_json::Value| serde_json::from_value::<KubernetesAuth>(v).ok();
    assert!(is_referent_auth(
        auth(json!({"serviceAccount": {"name": "a"}})).as_ref()
    ));
    assert!(!is_referent_auth(
        auth(json!({"serviceAccount": {"name": "a", "namespace": "b"}})).as_ref()
    ));
    assert!(is_referent_auth(
        auth(json!({"token": {"bearerToken": {"name": "a", "key": "k"}}})).as_ref()
    ));
    assert!(is_referent_auth(
        auth(json!({"cert": {"clientCert": {"name": "a", "namespace": "x"}, "clientKey": {"name": "b"}}})).as_ref()
    ));
    assert!(!is_referent_auth(None));
}

#[tokio::test]
async fn batch_reads_each_secret_once() {
    let (c, _, rec) = client(StoreKind::SecretStore).await;
    let refs = [
        SecretRef::new("app").with_property("user"),
        SecretRef::new("app").with_property("json.a.b"),
        SecretRef::new("ghost"),
        SecretRef::new("app").with_property("nope"),
        SecretRef::new("db-one"),
    ];
    let got: Vec<_> = c.get_secrets(&refs).await.into_iter().map(text).collect();
    assert_eq!(got[0], Ok("admin".to_string()));
    assert_eq!(got[1], Ok("deep".to_string()));
    assert_eq!(
        got[2],
        Err((
            ErrorKind::Invalid,
            r#"secrets "ghost" not found"#.to_string()
        ))
    );
    assert!(got[3].is_err());
    assert_eq!(got[4], Ok(r#"{"p":"1"}"#.to_string()));
    assert_eq!(
        rec.count("GetSecret"),
        3,
        "app, ghost and db-one are read once each"
    );
}
