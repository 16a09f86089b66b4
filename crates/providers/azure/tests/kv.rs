//! The azurekv provider against the HTTPS Key Vault + Entra fake (`esr_test_azure_server`), through the
//! official SDK's real challenge flow and token acquisition.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::sync::Arc;

use esr_provider::{
    ClientContext, ErrorKind, FindName, FindRequest, KubeAccess, MemoryRecorder, MetadataPolicy,
    Provider, PushRemoteRef, PushRequest, SecretRef, SecretsClient, StaticKubeAccess, StoreInfo,
    StoreKind, ValidationResult,
};
use esr_provider_azure::{AzureKeyVaultProvider, AzureOptions};
use esr_test_azure_server::KvServer;
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use serde_json::{Value, json};

const TENANT: &str = "11111111-2222-3333-4444-555555555555";
const CLIENT_ID: &str = "client-app-id";
const CLIENT_SECRET: &str = "s3cr3t-client-value";

fn provider(server: &KvServer) -> AzureKeyVaultProvider {
    AzureKeyVaultProvider::new(AzureOptions {
        extra_ca_pem: Some(server.ca_pem.clone().into_bytes()),
        authority_host: Some(server.url()),
        skip_challenge_resource_check: true,
    })
}

fn sp_spec(server: &KvServer, secret_ns: Option<&str>) -> Value {
    let sel = |key: &str| {
        let mut s = json!({"name": "azure-creds", "key": key});
        if let Some(ns) = secret_ns {
            s["namespace"] = json!(ns);
        }
        s
    };
    json!({"provider": {"azurekv": {
        "vaultUrl": server.url(),
        "tenantId": TENANT,
        "authSecretRef": {"clientId": sel("client-id"), "clientSecret": sel("client-secret")}
    }}})
}

fn creds(kube: &StaticKubeAccess, ns: &str, secret: &str) {
    let s: Secret = serde_json::from_value(json!({
        "metadata": {"name": "azure-creds", "namespace": ns},
        "stringData": {"client-id": CLIENT_ID, "client-secret": secret}
    }))
    .unwrap();
    kube.add_secret(s);
}

struct Fixture {
    server: KvServer,
    kube: Arc<StaticKubeAccess>,
    store: StoreInfo,
    recorder: Arc<MemoryRecorder>,
}

impl Fixture {
    async fn new() -> Fixture {
        let server = KvServer::start(TENANT, CLIENT_ID).await;
        server.state().client_secret = Some(CLIENT_SECRET.to_string());
        let kube = Arc::new(StaticKubeAccess::new());
        creds(&kube, "app", CLIENT_SECRET);
        let store = StoreInfo::new(
            StoreKind::SecretStore,
            "azure",
            Some("app".into()),
            sp_spec(&server, None),
        );
        Fixture {
            server,
            kube,
            store,
            recorder: Arc::new(MemoryRecorder::new()),
        }
    }

    async fn client(&self) -> Arc<dyn SecretsClient> {
        let kube: Arc<dyn KubeAccess> = self.kube.clone();
        let ctx =
            ClientContext::new(&self.store, Some("app"), kube).with_recorder(self.recorder.clone());
        provider(&self.server)
            .new_client(&ctx)
            .await
            .unwrap_or_else(|e| panic!("new_client: {e}"))
    }
}

fn text(b: Vec<u8>) -> String {
    String::from_utf8(b).unwrap()
}

#[tokio::test]
async fn service_principal_challenge_flow_and_secret_refs() {
    let f = Fixture::new().await;
    let v1 = f.server.state().put_secret(
        "db",
        r#"{"user":"admin","pass":"p1","a.b":"dotted","nested":{"x":1}}"#,
        &[],
    );
    f.server.state().put_secret(
        "db",
        r#"{"user":"admin","pass":"p2"}"#,
        &[("env", "prod"), ("owner", r#"{"team":"core"}"#)],
    );
    let c = f.client().await;

    // Latest value; the first vault call was challenged (401), then a token was fetched with
    // the client secret for the vault scope, then the call was retried with the bearer token.
    let latest = c.get_secret(&SecretRef::new("db")).await.unwrap();
    assert_eq!(text(latest), r#"{"user":"admin","pass":"p2"}"#);
    {
        let s = f.server.state();
        let log: Vec<&str> = s.log.iter().map(String::as_str).collect();
        assert_eq!(
            log,
            vec![
                "GET /secrets/db/",
                &*format!("POST /{TENANT}/oauth2/v2.0/token"),
                "GET /secrets/db/"
            ]
        );
        assert_eq!(s.grants, vec!["secret"]);
        assert_eq!(s.scopes, vec!["https://vault.azure.net/.default"]);
    }
    // secret/ prefix, version, property (gjson and literal dotted key).
    let by_version = c
        .get_secret(&SecretRef::new("secret/db").with_version(v1.clone()))
        .await
        .unwrap();
    assert!(text(by_version).contains(r#""pass":"p1""#));
    let prop = |p: &str| {
        SecretRef::new("db")
            .with_version(v1.clone())
            .with_property(p)
    };
    assert_eq!(text(c.get_secret(&prop("pass")).await.unwrap()), "p1");
    assert_eq!(text(c.get_secret(&prop("a.b")).await.unwrap()), "dotted");
    assert_eq!(text(c.get_secret(&prop("nested.x")).await.unwrap()), "1");
    let e = c.get_secret(&prop("nope")).await.unwrap_err();
    assert_eq!(e.to_string(), "property nope does not exist in key db");

    // metadataPolicy: Fetch → tags.
    let fetch = SecretRef::new("db").with_metadata_policy(MetadataPolicy::Fetch);
    assert_eq!(
        text(c.get_secret(&fetch).await.unwrap()),
        r#"{"env":"prod","owner":"{\"team\":\"core\"}"}"#
    );
    assert_eq!(
        text(
            c.get_secret(&fetch.clone().with_property("env"))
                .await
                .unwrap()
        ),
        "prod"
    );
    assert_eq!(
        text(
            c.get_secret(&fetch.clone().with_property("owner.team"))
                .await
                .unwrap()
        ),
        "core"
    );

    // Missing secret / version → NotFound (ESO NoSecretErr).
    let e = c.get_secret(&SecretRef::new("missing")).await.unwrap_err();
    assert!(e.is_not_found(), "{e}");
    let e = c
        .get_secret(&SecretRef::new("db").with_version("0000"))
        .await
        .unwrap_err();
    assert!(e.is_not_found(), "{e}");
    // Unknown object type.
    let e = c.get_secret(&SecretRef::new("blob/db")).await.unwrap_err();
    assert_eq!(e.to_string(), "unknown Azure Keyvault object Type for db");

    // One token for the whole session; calls were counted under Azure/KeyVault.
    assert_eq!(f.server.state().grants.len(), 1);
    assert!(f.recorder.count("GetSecret") >= 8);
    assert!(
        f.recorder
            .calls()
            .iter()
            .all(|c| c.provider == "Azure/KeyVault")
    );
}

#[tokio::test]
async fn certificates_and_keys() {
    let f = Fixture::new().await;
    let v1 = f
        .server
        .state()
        .put_cert("web", vec![0x30, 0x03, 1, 2, 3], &[]);
    f.server
        .state()
        .put_cert("web", vec![0x30, 0x03, 4, 5, 6], &[]);
    f.server.state().put_key(
        "signing",
        json!({"kty": "EC", "crv": "P-256", "x": "AQID", "y": "BAUG", "d": "private"}),
        &[],
    );
    let c = f.client().await;
    assert_eq!(
        c.get_secret(&SecretRef::new("cert/web")).await.unwrap(),
        vec![0x30, 0x03, 4, 5, 6]
    );
    assert_eq!(
        c.get_secret(&SecretRef::new("cert/web").with_version(v1))
            .await
            .unwrap(),
        vec![0x30, 0x03, 1, 2, 3]
    );
    let jwk: Value =
        serde_json::from_slice(&c.get_secret(&SecretRef::new("key/signing")).await.unwrap())
            .unwrap();
    assert_eq!(jwk["kty"], "EC");
    assert_eq!(jwk["crv"], "P-256");
    assert_eq!(jwk["x"], "AQID");
    assert!(jwk.get("d").is_none(), "{jwk}");
    assert!(jwk["kid"].as_str().unwrap().contains("/keys/signing/"));
    assert!(
        c.get_secret(&SecretRef::new("cert/none"))
            .await
            .unwrap_err()
            .is_not_found()
    );
    assert!(
        c.get_secret(&SecretRef::new("key/none"))
            .await
            .unwrap_err()
            .is_not_found()
    );
    // dataFrom.extract of a cert or key is an error, as in ESO.
    let e = c
        .get_secret_map(&SecretRef::new("cert/web"))
        .await
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "cannot get use dataFrom to get certificate secret"
    );
    let e = c
        .get_secret_map(&SecretRef::new("key/signing"))
        .await
        .unwrap_err();
    assert_eq!(e.to_string(), "cannot get use dataFrom to get key secret");
}

#[tokio::test]
async fn extract_json_and_tags() {
    let f = Fixture::new().await;
    f.server.state().put_secret(
        "app-config",
        r#"{"host":"db.local","port":5432,"opts":{"ssl":true}}"#,
        &[("env", "prod"), ("meta", r#"{"owner":"team-a"}"#)],
    );
    f.server.state().put_secret("plain", "not json", &[]);
    let c = f.client().await;
    let m = c
        .get_secret_map(&SecretRef::new("app-config"))
        .await
        .unwrap();
    let m: BTreeMap<String, String> = m.into_iter().map(|(k, v)| (k, text(v))).collect();
    assert_eq!(
        m,
        BTreeMap::from([
            ("host".to_string(), "db.local".to_string()),
            ("port".to_string(), "5432".to_string()),
            ("opts".to_string(), r#"{"ssl":true}"#.to_string()),
        ])
    );
    let e = c
        .get_secret_map(&SecretRef::new("plain"))
        .await
        .unwrap_err();
    assert!(
        e.to_string().starts_with("error unmarshalling json data"),
        "{e}"
    );
    assert!(!e.to_string().contains("not json"));
    let tags = c
        .get_secret_map(&SecretRef::new("app-config").with_metadata_policy(MetadataPolicy::Fetch))
        .await
        .unwrap();
    let tags: BTreeMap<String, String> = tags.into_iter().map(|(k, v)| (k, text(v))).collect();
    assert_eq!(
        tags,
        BTreeMap::from([
            ("app-config_env".to_string(), "prod".to_string()),
            ("app-config_meta_owner".to_string(), "team-a".to_string()),
        ])
    );
    assert!(
        c.get_secret_map(&SecretRef::new("missing"))
            .await
            .unwrap_err()
            .is_not_found()
    );
}

#[tokio::test]
async fn find_by_name_and_tags_with_paging() {
    let f = Fixture::new().await;
    {
        let mut s = f.server.state();
        s.page_size = 7;
        for i in 0..40 {
            let tags: &[(&str, &str)] = if i % 4 == 0 {
                &[("team", "payments")]
            } else {
                &[("team", "other")]
            };
            s.put_secret(&format!("svc-{i:02}"), &format!("value-{i}"), tags);
        }
        s.put_secret("db-main", "dbv", &[("team", "payments")]);
        s.put_secret("db-off", "off", &[("team", "payments")]);
        s.secrets.get_mut("db-off").unwrap()[0].enabled = false;
    }
    let c = f.client().await;
    let all = c.get_all_secrets(&FindRequest::default()).await.unwrap();
    assert_eq!(all.len(), 41, "disabled secrets are skipped");
    // 42 secrets listed, 7 per page: 6 pages through nextLink, plus the challenged first
    // request, plus one GET per enabled secret.
    assert_eq!(f.server.state().count("GET /secrets"), 6 + 1 + 41);
    assert_eq!(f.server.state().count("GET /secrets/"), 41);
    assert_eq!(f.recorder.count("GetSecrets"), 6);

    let by_name = c
        .get_all_secrets(&FindRequest {
            name: Some(FindName {
                regexp: "^svc-0[0-3]$".into(),
            }),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        by_name.keys().cloned().collect::<Vec<_>>(),
        vec!["svc-00", "svc-01", "svc-02", "svc-03"]
    );
    assert_eq!(
        by_name.get("svc-02").map(|v| text(v.clone())).as_deref(),
        Some("value-2")
    );

    let by_tags = c
        .get_all_secrets(&FindRequest {
            tags: Some(BTreeMap::from([(
                "team".to_string(),
                "payments".to_string(),
            )])),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(by_tags.len(), 11, "{:?}", by_tags.keys());
    assert!(by_tags.contains_key("db-main"));
    assert!(!by_tags.contains_key("db-off"));

    let both = c
        .get_all_secrets(&FindRequest {
            name: Some(FindName {
                regexp: "^db".into(),
            }),
            tags: Some(BTreeMap::from([(
                "team".to_string(),
                "payments".to_string(),
            )])),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(both.keys().cloned().collect::<Vec<_>>(), vec!["db-main"]);

    let e = c
        .get_all_secrets(&FindRequest {
            name: Some(FindName { regexp: "(".into() }),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid);
}

#[tokio::test]
async fn forbidden_is_a_clear_store_condition() {
    let f = Fixture::new().await;
    f.server.state().put_secret("x", "v", &[]);
    let c = f.client().await;
    assert_eq!(c.validate().await, ValidationResult::Ready);
    f.server.state().forbid_all = true;
    match c.validate().await {
        ValidationResult::Error(m) => {
            assert!(m.contains("403 Forbidden"), "{m}");
            assert!(m.contains("Key Vault Secrets User"), "{m}");
            assert!(m.contains(&f.server.url()), "{m}");
        }
        other => panic!("expected an error, got {other:?}"),
    }
    let e = c.get_secret(&SecretRef::new("x")).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Auth);
    assert!(
        e.to_string().starts_with("GetSecret \"x\": 403 Forbidden"),
        "{e}"
    );
}

#[tokio::test]
async fn wrong_client_secret_is_an_auth_error() {
    let f = Fixture::new().await;
    f.server.state().put_secret("x", "v", &[]);
    creds(&f.kube, "app", "wrong-secret");
    let c = f.client().await;
    let e = c.get_secret(&SecretRef::new("x")).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Auth, "{e}");
    assert!(e.to_string().contains("AADSTS7000215"), "{e}");
    assert!(!e.to_string().contains("wrong-secret"), "{e}");
    match c.validate().await {
        ValidationResult::Error(m) => assert!(m.contains("AADSTS7000215"), "{m}"),
        other => panic!("expected an error, got {other:?}"),
    }
}

#[tokio::test]
async fn referent_cluster_store_validation_is_unknown() {
    let server = KvServer::start(TENANT, CLIENT_ID).await;
    let store = StoreInfo::new(
        StoreKind::ClusterSecretStore,
        "azure",
        None,
        sp_spec(&server, None),
    );
    let p = provider(&server);
    assert_eq!(p.validate_store(&store).unwrap(), Vec::<String>::new());
    let kube: Arc<dyn KubeAccess> = Arc::new(StaticKubeAccess::new());
    let c = p
        .new_client(&ClientContext::new(&store, None, kube.clone()))
        .await
        .unwrap();
    assert_eq!(c.validate().await, ValidationResult::Unknown);
    // A namespaced store may not point at another namespace.
    let other = StoreInfo::new(
        StoreKind::SecretStore,
        "azure",
        Some("app".into()),
        sp_spec(&server, Some("elsewhere")),
    );
    assert!(p.validate_store(&other).is_err());
    let stack = StoreInfo::new(
        StoreKind::SecretStore,
        "azure",
        Some("app".into()),
        json!({"provider": {"azurekv": {"vaultUrl": server.url(), "environmentType": "AzureStackCloud"}}}),
    );
    assert_eq!(
        p.validate_store(&stack).unwrap_err().to_string(),
        "CustomCloudConfig is required when EnvironmentType is AzureStackCloud"
    );
}

fn push_req(remote: &str, value: &[u8], metadata: Option<Value>) -> PushRequest {
    let source: Secret = serde_json::from_value(json!({
        "metadata": {"name": "src", "namespace": "app"},
        "data": {"v": base64_std(value)}
    }))
    .unwrap();
    PushRequest::from_secret(
        source,
        PushRemoteRef::new(remote),
        Some("v".into()),
        metadata,
    )
    .unwrap()
}

fn base64_std(b: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(b)
}

#[tokio::test]
async fn push_secret_guarded_by_managed_by_tag() {
    let f = Fixture::new().await;
    f.server
        .state()
        .put_secret("foreign", "theirs", &[("owner", "someone")]);
    let c = f.client().await;

    let meta = json!({"apiVersion": "kubernetes.external-secrets.io/v1alpha1", "kind": "PushSecretMetadata",
                      "spec": {"tags": {"team": "a"}, "expirationDate": "2030-01-02T03:04:05Z"}});
    c.push_secret(&push_req("pushed", b"value-1", Some(meta.clone())))
        .await
        .unwrap();
    {
        let s = f.server.state();
        let v = &s.secrets["pushed"];
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].value, "value-1");
        assert_eq!(
            v[0].tags.get("managed-by").map(String::as_str),
            Some("external-secrets")
        );
        assert_eq!(v[0].tags.get("team").map(String::as_str), Some("a"));
        assert_eq!(v[0].exp, Some(1_893_553_445));
    }
    // Same value, tags and expiry: no new version.
    c.push_secret(&push_req("pushed", b"value-1", Some(meta.clone())))
        .await
        .unwrap();
    assert_eq!(f.server.state().secrets["pushed"].len(), 1);
    c.push_secret(&push_req("secret/pushed", b"value-2", Some(meta)))
        .await
        .unwrap();
    assert_eq!(f.server.state().secrets["pushed"].len(), 2);
    assert!(
        c.secret_exists(&PushRemoteRef::new("pushed"))
            .await
            .unwrap()
    );
    assert!(
        !c.secret_exists(&PushRemoteRef::new("nothing"))
            .await
            .unwrap()
    );

    // Never overwrite or delete what esr does not manage.
    let e = c
        .push_secret(&push_req("foreign", b"mine", None))
        .await
        .unwrap_err();
    assert!(
        e.to_string().contains("not managed by external-secrets"),
        "{e}"
    );
    assert_eq!(f.server.state().secrets["foreign"].len(), 1);
    let e = c
        .delete_secret(&PushRemoteRef::new("foreign"))
        .await
        .unwrap_err();
    assert!(
        e.to_string().contains("not managed by external-secrets"),
        "{e}"
    );
    assert!(f.server.state().secrets.contains_key("foreign"));
    // A managed-by tag in metadata is refused.
    let bad = json!({"apiVersion": "kubernetes.external-secrets.io/v1alpha1", "kind": "PushSecretMetadata",
                     "spec": {"tags": {"managed-by": "me"}}});
    assert!(
        c.push_secret(&push_req("other", b"x", Some(bad)))
            .await
            .is_err()
    );

    c.delete_secret(&PushRemoteRef::new("pushed"))
        .await
        .unwrap();
    assert!(!f.server.state().secrets.contains_key("pushed"));
    // Deleting something already gone is fine.
    c.delete_secret(&PushRemoteRef::new("pushed"))
        .await
        .unwrap();
}

#[tokio::test]
async fn push_keys_and_certificates() {
    let f = Fixture::new().await;
    let c = f.client().await;
    let sk = p256::SecretKey::from_slice(&[9u8; 32]).unwrap();
    let pem = sk.to_sec1_pem(Default::default()).unwrap();
    c.push_secret(&push_req("key/signing", pem.as_bytes(), None))
        .await
        .unwrap();
    {
        let s = f.server.state();
        let k = &s.keys["signing"];
        assert_eq!(k.len(), 1);
        assert_eq!(k[0].jwk["kty"], "EC");
        assert_eq!(k[0].jwk["crv"], "P-256");
        assert_eq!(k[0].tags["managed-by"], "external-secrets");
    }
    // Same public key: not imported again.
    c.push_secret(&push_req("key/signing", pem.as_bytes(), None))
        .await
        .unwrap();
    assert_eq!(f.server.state().keys["signing"].len(), 1);

    let cert = rcgen::generate_simple_self_signed(vec!["example.com".to_string()]).unwrap();
    let cert_pem = format!("{}{}", cert.cert.pem(), cert.signing_key.serialize_pem());
    c.push_secret(&push_req("cert/web", cert_pem.as_bytes(), None))
        .await
        .unwrap();
    assert_eq!(
        f.server.state().certs["web"][0].cer,
        cert.cert.der().to_vec()
    );
    c.push_secret(&push_req("cert/web", cert_pem.as_bytes(), None))
        .await
        .unwrap();
    assert_eq!(f.server.state().certs["web"].len(), 1, "unchanged cert");
    assert_eq!(
        c.get_secret(&SecretRef::new("cert/web")).await.unwrap(),
        cert.cert.der().to_vec()
    );
    let e = c
        .push_secret(&push_req("cert/bad", b"hello", None))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("not a valid certificate"), "{e}");

    // A foreign key is not overwritten.
    f.server.state().put_key(
        "foreign",
        json!({"kty": "RSA", "n": "AQ", "e": "AQAB"}),
        &[],
    );
    let e = c
        .push_secret(&push_req("key/foreign", pem.as_bytes(), None))
        .await
        .unwrap_err();
    assert!(
        e.to_string().contains("not managed by external-secrets"),
        "{e}"
    );

    c.delete_secret(&PushRemoteRef::new("key/signing"))
        .await
        .unwrap();
    c.delete_secret(&PushRemoteRef::new("cert/web"))
        .await
        .unwrap();
    assert!(!f.server.state().keys.contains_key("signing"));
    assert!(!f.server.state().certs.contains_key("web"));
    assert!(
        c.delete_secret(&PushRemoteRef::new("key/foreign"))
            .await
            .is_err()
    );
}

#[tokio::test]
async fn workload_identity_with_testkit_token_request() {
    let testkit = esr_testkit::TestServer::start().await.unwrap();
    testkit
        .apply_object(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "app"}}))
        .unwrap();
    testkit
        .apply_object(json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "wi-sa", "namespace": "app", "annotations": {
                "azure.workload.identity/client-id": CLIENT_ID,
                "azure.workload.identity/tenant-id": TENANT}}}))
        .unwrap();
    testkit
        .apply_object(json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "bare-sa", "namespace": "app"}}))
        .unwrap();
    let server = KvServer::start(TENANT, CLIENT_ID).await;
    server.state().assertion_subject = Some("system:serviceaccount:app:wi-sa".into());
    server.state().put_secret("wi-secret", "from-wi", &[]);
    let kube: Arc<dyn KubeAccess> = Arc::new(esr_provider::KubeClientAccess::new(testkit.client()));
    let store = |sa: &str| {
        StoreInfo::new(
            StoreKind::SecretStore,
            "azure-wi",
            Some("app".into()),
            json!({"provider": {"azurekv": {"vaultUrl": server.url(), "authType": "WorkloadIdentity",
                   "serviceAccountRef": {"name": sa}}}}),
        )
    };
    let p = provider(&server);
    let s = store("wi-sa");
    let c = p
        .new_client(&ClientContext::new(&s, Some("app"), kube.clone()))
        .await
        .unwrap();
    assert_eq!(
        text(c.get_secret(&SecretRef::new("wi-secret")).await.unwrap()),
        "from-wi"
    );
    assert_eq!(server.state().grants, vec!["assertion"]);

    // Without the client-id annotation: ESO's error.
    let s = store("bare-sa");
    let e = p
        .new_client(&ClientContext::new(&s, Some("app"), kube.clone()))
        .await
        .err()
        .unwrap();
    assert_eq!(
        e.to_string(),
        "missing clientID: either serviceAccountRef or service account annotation 'azure.workload.identity/client-id' is missing"
    );
}

#[tokio::test]
async fn workload_identity_rejected_assertion() {
    // Static kube access hands out a token the token endpoint does not accept.
    let server = KvServer::start(TENANT, CLIENT_ID).await;
    server.state().client_assertion = Some("expected-token".into());
    server.state().put_secret("s", "v", &[]);
    let kube = Arc::new(StaticKubeAccess::new());
    let sa: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "wi", "namespace": "app",
        "annotations": {"azure.workload.identity/client-id": CLIENT_ID}}}))
        .unwrap();
    kube.add_service_account(sa);
    kube.add_token("app", "wi", "other-token");
    let store = StoreInfo::new(
        StoreKind::SecretStore,
        "azure-wi",
        Some("app".into()),
        json!({"provider": {"azurekv": {"vaultUrl": server.url(), "authType": "WorkloadIdentity",
               "tenantId": TENANT, "serviceAccountRef": {"name": "wi"}}}}),
    );
    let kube: Arc<dyn KubeAccess> = kube;
    let c = provider(&server)
        .new_client(&ClientContext::new(&store, Some("app"), kube))
        .await
        .unwrap();
    let e = c.get_secret(&SecretRef::new("s")).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Auth, "{e}");
    assert!(e.to_string().contains("AADSTS700024"), "{e}");
    // And the accepted token works.
    server.state().client_assertion = Some("other-token".into());
    assert_eq!(text(c.get_secret(&SecretRef::new("s")).await.unwrap()), "v");
}

#[tokio::test]
async fn service_principal_with_client_certificate() {
    let server = KvServer::start(TENANT, CLIENT_ID).await;
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_RSA_SHA256).unwrap();
    let cert = rcgen::CertificateParams::new(vec!["esr-sp".to_string()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    server.state().cert_public_pem = Some(key.public_key_pem());
    server.state().put_secret("s", "cert-auth", &[]);
    let kube = Arc::new(StaticKubeAccess::new());
    let pem = format!("{}{}", cert.pem(), key.serialize_pem());
    let s: Secret = serde_json::from_value(json!({
        "metadata": {"name": "sp-cert", "namespace": "app"},
        "stringData": {"client-id": CLIENT_ID, "cert": pem}
    }))
    .unwrap();
    kube.add_secret(s);
    let store = StoreInfo::new(
        StoreKind::SecretStore,
        "azure-cert",
        Some("app".into()),
        json!({"provider": {"azurekv": {"vaultUrl": server.url(), "tenantId": TENANT,
               "authSecretRef": {"clientId": {"name": "sp-cert", "key": "client-id"},
                                 "clientCertificate": {"name": "sp-cert", "key": "cert"}}}}}),
    );
    let kube: Arc<dyn KubeAccess> = kube;
    let c = provider(&server)
        .new_client(&ClientContext::new(&store, Some("app"), kube.clone()))
        .await
        .unwrap();
    assert_eq!(
        text(c.get_secret(&SecretRef::new("s")).await.unwrap()),
        "cert-auth"
    );
    assert_eq!(server.state().grants, vec!["assertion"]);

    // A different key is rejected by the token endpoint.
    let other = rcgen::KeyPair::generate_for(&rcgen::PKCS_RSA_SHA256).unwrap();
    server.state().cert_public_pem = Some(other.public_key_pem());
    let c = provider(&server)
        .new_client(&ClientContext::new(&store, Some("app"), kube))
        .await
        .unwrap();
    let e = c.get_secret(&SecretRef::new("s")).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Auth, "{e}");
}

#[tokio::test]
async fn clients_are_reused_across_reconciles_until_the_credential_changes() {
    let f = Fixture::new().await;
    f.server.state().put_secret("db", "v1", &[]);
    let p = provider(&f.server);
    let new_client = || async {
        let kube: Arc<dyn KubeAccess> = f.kube.clone();
        let ctx = ClientContext::new(&f.store, Some("app"), kube).with_recorder(f.recorder.clone());
        p.new_client(&ctx).await.unwrap()
    };
    let token_calls = || {
        f.server
            .state()
            .count(&format!("POST /{TENANT}/oauth2/v2.0/token"))
    };
    // Three reconciles: one challenge and one token request in all.
    for _ in 0..3 {
        let c = new_client().await;
        assert_eq!(
            text(c.get_secret(&SecretRef::new("db")).await.unwrap()),
            "v1"
        );
    }
    assert_eq!(token_calls(), 1);
    assert_eq!(
        f.server.state().count("GET /secrets/db/"),
        4,
        "one 401 challenge, then 3 reads"
    );
    assert_eq!(p.client_cache().len(), 1);

    // A rotated client secret builds new clients (new challenge + token) at once.
    f.server.state().client_secret = Some("rotated".to_string());
    creds(&f.kube, "app", "rotated");
    let c = new_client().await;
    assert_eq!(
        text(c.get_secret(&SecretRef::new("db")).await.unwrap()),
        "v1"
    );
    assert_eq!(token_calls(), 2);
    assert_eq!(p.client_cache().len(), 2);

    // Another store with the same spec gets its own clients.
    let other = StoreInfo::new(
        StoreKind::SecretStore,
        "azure-2",
        Some("app".into()),
        (*f.store.spec).clone(),
    );
    let kube: Arc<dyn KubeAccess> = f.kube.clone();
    let ctx = ClientContext::new(&other, Some("app"), kube);
    let c = p.new_client(&ctx).await.unwrap();
    assert_eq!(
        text(c.get_secret(&SecretRef::new("db")).await.unwrap()),
        "v1"
    );
    assert_eq!(token_calls(), 3);
}

/// Only Key Vault's 404 is "not found": a 200 with an empty body, JSON without a value, or a
/// foreign page is an error that keeps the target Secret.
#[tokio::test]
async fn garbage_200_answers_are_errors_not_not_found() {
    let f = Fixture::new().await;
    f.server.state().put_secret("db", "v", &[]);
    let c = f.client().await;
    assert_eq!(
        text(c.get_secret(&SecretRef::new("db")).await.unwrap()),
        "v"
    );
    let e = c.get_secret(&SecretRef::new("nope")).await.unwrap_err();
    assert!(e.is_not_found(), "a 404 is not found: {e}");
    for body in ["{}", "", r#"{"id": "x"}"#, "<html>proxy</html>"] {
        f.server.state().garbage_200 = Some(body.to_string());
        let e = c.get_secret(&SecretRef::new("db")).await.unwrap_err();
        assert!(!e.is_not_found(), "200 {body:?} must not be NotFound: {e}");
        let m = c.get_secret_map(&SecretRef::new("db")).await;
        assert!(
            m.as_ref().is_err_and(|e| !e.is_not_found()),
            "200 {body:?}: {m:?}"
        );
    }
}

/// Managed identity and workload identity without `serviceAccountRef` are the controller's
/// identity: refused on a SecretStore, allowed on a ClusterSecretStore.
#[tokio::test]
async fn namespaced_store_never_uses_the_controller_identity() {
    let server = KvServer::start(TENANT, CLIENT_ID).await;
    let p = provider(&server);
    for spec in [
        json!({"vaultUrl": server.url(), "authType": "ManagedIdentity"}),
        json!({"vaultUrl": server.url(), "authType": "WorkloadIdentity", "tenantId": TENANT}),
    ] {
        let ss = StoreInfo::new(
            StoreKind::SecretStore,
            "azure",
            Some("app".into()),
            json!({"provider": {"azurekv": spec.clone()}}),
        );
        let e = p.validate_store(&ss).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Auth, "{e}");
        assert!(e.to_string().contains("a SecretStore may not do"), "{e}");
        let kube: Arc<dyn KubeAccess> = Arc::new(StaticKubeAccess::new());
        let ctx = ClientContext::new(&ss, Some("app"), kube);
        let e = p.new_client(&ctx).await.err().unwrap();
        assert_eq!(e.kind(), ErrorKind::Auth, "{e}");
        let css = StoreInfo::new(
            StoreKind::ClusterSecretStore,
            "azure",
            None,
            json!({"provider": {"azurekv": spec}}),
        );
        assert!(p.validate_store(&css).is_ok());
    }
    assert!(
        server.state().log.is_empty(),
        "nothing was sent: {:?}",
        server.state().log
    );
    // with serviceAccountRef, workload identity uses the tenant's own ServiceAccount
    let ss = StoreInfo::new(
        StoreKind::SecretStore,
        "azure",
        Some("app".into()),
        json!({"provider": {"azurekv": {"vaultUrl": server.url(), "authType": "WorkloadIdentity",
               "serviceAccountRef": {"name": "sa"}}}}),
    );
    assert!(p.validate_store(&ss).is_ok());
}
