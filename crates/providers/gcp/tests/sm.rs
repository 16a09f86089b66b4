//! The gcpsm provider against the HTTPS Secret Manager + STS test server
//! (`esr-test-gcp-server`), through the official client's REST transport and the auth crate's
//! real token flows (self-signed service-account JWTs, STS token exchange).
//!
//! The official client trusts the system roots only, so each test that talks to the server runs
//! in a child process whose `SSL_CERT_FILE` is the test CA (`trusting_process`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use base64::Engine;
use esr_provider::{
    CallStatus, ClientContext, ErrorKind, FindName, FindRequest, KubeAccess, MemoryRecorder,
    MetadataPolicy, Provider, PushRemoteRef, PushRequest, SecretRef, SecretsClient,
    StaticKubeAccess, StoreInfo, StoreKind, ValidationResult,
};
use esr_provider_gcp::{GcpOptions, GcpSecretManagerProvider};
use esr_test_gcp_server::{GcpServer, TestCa, VersionState, trusting_process};
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use serde_json::{Value, json};

const PROJECT: &str = "esr-test-project";
const SA_EMAIL: &str = "esr-reader@esr-test-project.iam.gserviceaccount.com";
const NS: &str = "team";

fn provider(server: &GcpServer) -> GcpSecretManagerProvider {
    GcpSecretManagerProvider::new(GcpOptions {
        secretmanager_endpoint: Some(server.url()),
        sts_url: Some(server.sts_url()),
    })
}

fn key_store(extra: Value) -> StoreInfo {
    let mut gcpsm = json!({
        "projectID": PROJECT,
        "auth": {"secretRef": {"secretAccessKeySecretRef": {"name": "gcp-sa", "key": "sa.json"}}}
    });
    if let (Some(o), Some(e)) = (gcpsm.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            o.insert(k.clone(), v.clone());
        }
    }
    StoreInfo::new(
        StoreKind::SecretStore,
        "gcp",
        Some(NS.into()),
        json!({"provider": {"gcpsm": gcpsm}}),
    )
}

struct Fixture {
    server: GcpServer,
    kube: Arc<StaticKubeAccess>,
    recorder: Arc<MemoryRecorder>,
}

impl Fixture {
    async fn new(ca: &TestCa) -> Fixture {
        let server = GcpServer::start(PROJECT, ca).await;
        let key = server.state().add_service_account(SA_EMAIL);
        let kube = Arc::new(StaticKubeAccess::new());
        let s: Secret = serde_json::from_value(json!({
            "metadata": {"name": "gcp-sa", "namespace": NS},
            "stringData": {"sa.json": key}
        }))
        .unwrap();
        kube.add_secret(s);
        Fixture {
            server,
            kube,
            recorder: Arc::new(MemoryRecorder::default()),
        }
    }

    async fn client(&self, store: &StoreInfo) -> Arc<dyn SecretsClient> {
        let kube: Arc<dyn KubeAccess> = self.kube.clone();
        let ctx = ClientContext::new(store, Some(NS), kube).with_recorder(self.recorder.clone());
        provider(&self.server)
            .new_client(&ctx)
            .await
            .unwrap_or_else(|e| panic!("{}", e.detailed()))
    }

    fn calls(&self, call: &str, status: CallStatus) -> usize {
        self.recorder
            .calls()
            .iter()
            .filter(|c| c.provider == "GCP/SecretManager" && c.call == call && c.status == status)
            .count()
    }
}

fn text(v: Vec<u8>) -> String {
    String::from_utf8(v).unwrap()
}

#[tokio::test]
async fn service_account_key_reads_versions_properties_and_finds() {
    let Some(ca) = trusting_process("service_account_key_reads_versions_properties_and_finds")
    else {
        return;
    };
    let f = Fixture::new(&ca).await;
    {
        let mut s = f.server.state();
        s.put(
            "db",
            br#"{"user":"alice","pass":"v1"}"#,
            &[("team", "payments")],
        );
        s.put(
            "db",
            br#"{"user":"alice","pass":"v2","a.b":"dot","nested":{"k":"deep"}}"#,
            &[],
        );
        s.put("db-replica", b"plain", &[("team", "payments")]);
        s.put("db-other", b"x", &[]);
        s.put("cache", b"c", &[("team", "payments")]);
    }
    let c = f.client(&key_store(json!({}))).await;

    // remoteRef: latest, a version, properties (a literal dotted key first, then gjson).
    assert_eq!(
        text(c.get_secret(&SecretRef::new("db")).await.unwrap()),
        r#"{"user":"alice","pass":"v2","a.b":"dot","nested":{"k":"deep"}}"#
    );
    assert_eq!(
        text(
            c.get_secret(&SecretRef::new("db").with_version("1").with_property("pass"))
                .await
                .unwrap()
        ),
        "v1"
    );
    assert_eq!(
        text(
            c.get_secret(&SecretRef::new("db").with_property("a.b"))
                .await
                .unwrap()
        ),
        "dot"
    );
    assert_eq!(
        text(
            c.get_secret(&SecretRef::new("db").with_property("nested.k"))
                .await
                .unwrap()
        ),
        "deep"
    );
    let e = c
        .get_secret(&SecretRef::new("db").with_property("nope"))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid);
    assert_eq!(e.to_string(), "key nope does not exist in secret db");
    let e = c
        .get_secret(&SecretRef::new("db-replica").with_property("x"))
        .await
        .unwrap_err();
    assert_eq!(e.to_string(), "unable to unmarshal secret from JSON");

    // A missing secret or version is ESO's NoSecretErr.
    let e = c.get_secret(&SecretRef::new("missing")).await.unwrap_err();
    assert!(e.is_not_found(), "{}", e.detailed());
    assert_eq!(
        e.to_string(),
        "unable to access Secret from SecretManager Client: Secret does not exist"
    );
    let e = c
        .get_secret(&SecretRef::new("db").with_version("9"))
        .await
        .unwrap_err();
    assert!(e.is_not_found());

    // extract
    let m = c.get_secret_map(&SecretRef::new("db")).await.unwrap();
    assert_eq!(m.get("pass").cloned().map(text).as_deref(), Some("v2"));
    assert_eq!(
        m.get("nested").cloned().map(text).as_deref(),
        Some(r#"{"k":"deep"}"#)
    );

    // find by name (over several list pages: the server pages by 2) and by labels.
    let by_name = c
        .get_all_secrets(&FindRequest {
            name: Some(FindName {
                regexp: "^db-".into(),
            }),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        by_name.keys().cloned().collect::<Vec<_>>(),
        vec!["db-other".to_string(), "db-replica".to_string()]
    );
    assert!(
        f.server
            .state()
            .count("GET /v1/projects/esr-test-project/secrets")
            >= 1
    );
    let list_pages = f.calls("ListSecrets", CallStatus::Success);
    assert_eq!(list_pages, 2, "4 secrets, 2 per page");
    let by_label = c
        .get_all_secrets(&FindRequest {
            tags: Some([("team".to_string(), "payments".to_string())].into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        by_label.keys().cloned().collect::<Vec<_>>(),
        vec![
            "cache".to_string(),
            "db".to_string(),
            "db-replica".to_string()
        ]
    );
    assert_eq!(text(by_label["db-replica"].clone()), "plain");

    // metadataPolicy: Fetch reads labels.
    let label = c
        .get_secret(
            &SecretRef::new("cache")
                .with_property("labels.team")
                .with_metadata_policy(MetadataPolicy::Fetch),
        )
        .await
        .unwrap();
    assert_eq!(text(label), "payments");

    // Every Secret Manager call authenticated as the service account (self-signed JWT).
    let principals = f.server.state().principals.clone();
    assert!(!principals.is_empty());
    assert!(principals.iter().all(|p| p == SA_EMAIL), "{principals:?}");
    assert!(f.calls("AccessSecretVersion", CallStatus::Success) >= 5);
    assert_eq!(
        f.calls(
            "AccessSecretVersion",
            CallStatus::Error(ErrorKind::NotFound)
        ),
        2
    );
    assert_eq!(c.validate().await, ValidationResult::Ready);
}

#[tokio::test]
async fn push_secret_creates_labels_and_guards_unmanaged_secrets() {
    let Some(ca) = trusting_process("push_secret_creates_labels_and_guards_unmanaged_secrets")
    else {
        return;
    };
    let f = Fixture::new(&ca).await;
    f.server
        .state()
        .put("theirs", b"keep", &[("owner", "someone")]);
    let c = f.client(&key_store(json!({}))).await;
    let push = |key: &str, value: &str, metadata: Option<Value>| PushRequest {
        remote: PushRemoteRef::new(key),
        secret_key: Some("k".into()),
        value: value.as_bytes().to_vec(),
        metadata,
        source: Secret::default(),
    };

    c.push_secret(&push("pushed", "one", None)).await.unwrap();
    {
        let s = f.server.state();
        let e = s.secret("pushed").unwrap();
        assert_eq!(
            e.labels.get("managed-by").map(String::as_str),
            Some("external-secrets")
        );
        assert_eq!(e.replication, json!({"automatic": {}}));
        assert_eq!(s.latest("pushed").as_deref(), Some(&b"one"[..]));
        assert_eq!(e.versions.len(), 1);
    }
    // Same value: no new version. New value: a new version.
    c.push_secret(&push("pushed", "one", None)).await.unwrap();
    assert_eq!(f.server.state().secret("pushed").unwrap().versions.len(), 1);
    c.push_secret(&push("pushed", "two", None)).await.unwrap();
    assert_eq!(f.server.state().secret("pushed").unwrap().versions.len(), 2);
    assert_eq!(
        text(c.get_secret(&SecretRef::new("pushed")).await.unwrap()),
        "two"
    );

    // Labels from the metadata (Replace), managed-by kept.
    let meta = json!({"apiVersion": "kubernetes.external-secrets.io/v1alpha1", "kind": "PushSecretMetadata",
                      "spec": {"labels": {"env": "prod"}, "annotations": {"note": "hi"}}});
    c.push_secret(&push("pushed", "two", Some(meta)))
        .await
        .unwrap();
    {
        let s = f.server.state();
        let e = s.secret("pushed").unwrap();
        assert_eq!(e.labels.get("env").map(String::as_str), Some("prod"));
        assert_eq!(
            e.labels.get("managed-by").map(String::as_str),
            Some("external-secrets")
        );
        assert_eq!(e.annotations.get("note").map(String::as_str), Some("hi"));
        assert_eq!(e.versions.len(), 2, "metadata only: no new version");
    }

    // The managed-by guard.
    let e = c
        .push_secret(&push("theirs", "mine", None))
        .await
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "secret theirs is not managed by external secrets"
    );
    assert_eq!(
        f.server.state().latest("theirs").as_deref(),
        Some(&b"keep"[..])
    );
    c.delete_secret(&PushRemoteRef::new("theirs"))
        .await
        .unwrap();
    assert!(
        f.server.state().secret("theirs").is_some(),
        "unmanaged: never deleted"
    );

    assert!(
        c.secret_exists(&PushRemoteRef::new("pushed"))
            .await
            .unwrap()
    );
    assert!(!c.secret_exists(&PushRemoteRef::new("nope")).await.unwrap());
    c.delete_secret(&PushRemoteRef::new("pushed"))
        .await
        .unwrap();
    assert!(f.server.state().secret("pushed").is_none());
    c.delete_secret(&PushRemoteRef::new("pushed"))
        .await
        .unwrap();

    for call in [
        "CreateSecret",
        "AddSecretVersion",
        "UpdateSecret",
        "DeleteSecret",
        "GetSecret",
    ] {
        assert!(f.calls(call, CallStatus::Success) >= 1, "{call}");
    }
}

fn fake_sa_jwt(sub: &str, aud: &str) -> String {
    let e = |v: Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    format!(
        "{}.{}.c2ln",
        e(json!({"alg": "RS256", "kid": "k"})),
        e(
            json!({"sub": sub, "aud": [aud], "iss": "https://kubernetes.default.svc", "exp": 4_000_000_000u64})
        )
    )
}

#[tokio::test]
async fn workload_identity_exchanges_a_service_account_token_at_sts() {
    let Some(ca) = trusting_process("workload_identity_exchanges_a_service_account_token_at_sts")
    else {
        return;
    };
    let f = Fixture::new(&ca).await;
    let pool = "cluster-proj.svc.id.goog";
    let audience = format!(
        "identitynamespace:{pool}:https://container.googleapis.com/v1/projects/cluster-proj/locations/europe-west1/clusters/prod"
    );
    let subject = format!("system:serviceaccount:{NS}:app");
    {
        let mut s = f.server.state();
        s.put("db", b"wi-secret", &[]);
        s.sts_audience = Some(audience.clone());
        s.sts_subjects.insert(subject.clone());
        s.sts_subject_audience = Some(pool.to_string());
    }
    let sa: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "app", "namespace": NS}})).unwrap();
    f.kube.add_service_account(sa);
    f.kube.add_token(NS, "app", &fake_sa_jwt(&subject, pool));
    let store = StoreInfo::new(
        StoreKind::SecretStore,
        "gcp-wi",
        Some(NS.into()),
        json!({"provider": {"gcpsm": {"projectID": PROJECT, "auth": {"workloadIdentity": {
            "serviceAccountRef": {"name": "app"},
            "clusterProjectID": "cluster-proj", "clusterLocation": "europe-west1", "clusterName": "prod"
        }}}}}),
    );
    let c = f.client(&store).await;
    assert_eq!(
        text(c.get_secret(&SecretRef::new("db")).await.unwrap()),
        "wi-secret"
    );
    let (principals, req) = {
        let s = f.server.state();
        (
            s.principals.clone(),
            s.sts_requests.last().cloned().unwrap(),
        )
    };
    assert!(principals.iter().all(|p| *p == subject), "{principals:?}");
    assert_eq!(req.get("audience"), Some(&audience));
    assert_eq!(
        req.get("requested_token_type").map(String::as_str),
        Some("urn:ietf:params:oauth:token-type:access_token")
    );
    assert!(
        req.get("scope")
            .is_some_and(|sc| sc.contains("https://www.googleapis.com/auth/cloud-platform")),
        "{req:?}"
    );
    assert!(f.calls("GenerateServiceAccountToken", CallStatus::Success) >= 1);

    // A ServiceAccount STS does not accept: a clear auth error when the client is built.
    f.kube.add_token(
        NS,
        "app",
        &fake_sa_jwt("system:serviceaccount:team:other", pool),
    );
    let kube: Arc<dyn KubeAccess> = f.kube.clone();
    let store2 = StoreInfo::new(
        StoreKind::SecretStore,
        "gcp-wi2",
        Some(NS.into()),
        (*store.spec).clone(),
    );
    let ctx = ClientContext::new(&store2, Some(NS), kube);
    let e = provider(&f.server).new_client(&ctx).await.err().unwrap();
    assert_eq!(e.kind(), ErrorKind::Auth, "{}", e.detailed());
    assert!(e.to_string().contains("unable to get credentials"), "{e}");
}

#[tokio::test]
async fn only_a_well_formed_not_found_is_not_found() {
    let Some(ca) = trusting_process("only_a_well_formed_not_found_is_not_found") else {
        return;
    };
    let f = Fixture::new(&ca).await;
    f.server.state().put("db", b"v1", &[]);
    f.server.state().put("db", b"v2", &[]);
    let c = f.client(&key_store(json!({}))).await;

    f.server.state().garbage_200 = Some("<html>proxy</html>".into());
    let e = c.get_secret(&SecretRef::new("db")).await.unwrap_err();
    assert!(!e.is_not_found(), "{}", e.detailed());
    assert_eq!(e.kind(), ErrorKind::Transient);
    f.server.state().garbage_200 = Some("{}".into());
    let e = c.get_secret(&SecretRef::new("db")).await.unwrap_err();
    assert!(!e.is_not_found(), "a 200 without payload: {}", e.detailed());
    f.server.state().garbage_200 = None;

    f.server.state().bare_404 = true;
    let e = c.get_secret(&SecretRef::new("db")).await.unwrap_err();
    assert!(!e.is_not_found(), "a bare 404: {}", e.detailed());
    f.server.state().bare_404 = false;

    f.server.state().denied.insert(SA_EMAIL.to_string());
    let e = c.get_secret(&SecretRef::new("db")).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Auth);
    assert!(e.to_string().contains("PermissionDenied"), "{e}");
    f.server.state().denied.clear();

    // latest disabled: LatestOrFail fails, LatestOrFetch reads the newest enabled version.
    f.server.state().set_state("db", 2, VersionState::Disabled);
    let e = c.get_secret(&SecretRef::new("db")).await.unwrap_err();
    assert!(!e.is_not_found());
    assert!(e.to_string().contains("DISABLED state"), "{e}");
    let fetch = f
        .client(&key_store(
            json!({"secretVersionSelectionPolicy": "LatestOrFetch"}),
        ))
        .await;
    assert_eq!(
        text(fetch.get_secret(&SecretRef::new("db")).await.unwrap()),
        "v1"
    );
}

#[tokio::test]
async fn default_credentials_are_refused_to_a_secret_store() {
    let store = StoreInfo::new(
        StoreKind::SecretStore,
        "ambient",
        Some(NS.into()),
        json!({"provider": {"gcpsm": {"projectID": PROJECT}}}),
    );
    let p = GcpSecretManagerProvider::default();
    let e = p.validate_store(&store).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Auth);
    let kube: Arc<dyn KubeAccess> = Arc::new(StaticKubeAccess::new());
    let ctx = ClientContext::new(&store, Some(NS), kube.clone());
    let e = p.new_client(&ctx).await.err().unwrap();
    assert_eq!(e.kind(), ErrorKind::Auth);
    assert!(e.to_string().contains("may not do"), "{e}");

    // A ClusterSecretStore with referent credentials validates as Unknown without a namespace.
    let css = StoreInfo::new(
        StoreKind::ClusterSecretStore,
        "referent",
        None,
        json!({"provider": {"gcpsm": {"projectID": PROJECT, "auth": {"secretRef": {"secretAccessKeySecretRef": {"name": "k", "key": "sa.json"}}}}}}),
    );
    let ctx = ClientContext::new(&css, None, kube);
    let c = p.new_client(&ctx).await.unwrap();
    assert_eq!(c.validate().await, ValidationResult::Unknown);
}
