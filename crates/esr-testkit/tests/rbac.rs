//! RBAC authorization (`Options::rbac`): ServiceAccount tokens, Roles, ClusterRoles, bindings and
//! the real server's 401/403 Status bodies.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![recursion_limit = "512"]

mod common;

use common::*;
use esr_testkit::{Options, TestServer};
use http_body_util::BodyExt;
use serde_json::{Value, json};

async fn start_rbac() -> TestServer {
    let s = TestServer::start_with(Options {
        rbac: true,
        ..Default::default()
    })
    .await
    .unwrap();
    let r = post(
        &s,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        widget_crd(),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.text);
    for n in ["team", "other"] {
        ns(&s, n).await;
    }
    s
}

/// Create ServiceAccount `team/<name>` and a client authenticating with its token.
async fn sa_client(s: &TestServer, name: &str) -> kube::Client {
    let r = post(
        s,
        "/api/v1/namespaces/team/serviceaccounts",
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}}),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.text);
    let r = post(
        s,
        &format!("/api/v1/namespaces/team/serviceaccounts/{name}/token"),
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.text);
    token_client(s, r.body["status"]["token"].as_str().unwrap()).await
}

async fn token_client(s: &TestServer, token: &str) -> kube::Client {
    let yaml = esr_testkit::kubeconfig_yaml_for_token(&s.url(), "default", token);
    let kc = kube::config::Kubeconfig::from_yaml(&yaml).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .unwrap();
    kube::Client::try_from(cfg).unwrap()
}

/// A raw request as `client`: (code, body).
async fn call(
    client: &kube::Client,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(kube::client::Body::from(
            body.map(|b| serde_json::to_vec(&b).unwrap())
                .unwrap_or_default(),
        ))
        .unwrap();
    let resp = client.send(req).await.unwrap();
    let code = resp.status().as_u16();
    let b = resp.into_body().collect().await.unwrap().to_bytes();
    (code, serde_json::from_slice(&b).unwrap_or(Value::Null))
}

fn forbidden(message: &str, details: Value) -> Value {
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": "Forbidden",
        "details": details,
        "code": 403
    })
}

const SA: &str = "system:serviceaccount:team:sa";

async fn create(s: &TestServer, path: &str, obj: Value) {
    let r = post(s, path, obj).await;
    assert_eq!(r.code, 201, "{path}: {}", r.text);
}

async fn role(s: &TestServer, ns: &str, name: &str, rules: Value) {
    create(
        s,
        &format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles"),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
               "metadata": {"name": name}, "rules": rules}),
    )
    .await;
}

async fn cluster_role(s: &TestServer, name: &str, rules: Value) {
    create(
        s,
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": name}, "rules": rules}),
    )
    .await;
}

/// Bind `team/sa` to a Role or ClusterRole with a RoleBinding in `ns`.
async fn role_binding(s: &TestServer, ns: &str, name: &str, kind: &str, role: &str) {
    create(
        s,
        &format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings"),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": name},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
               "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "team"}]}),
    )
    .await;
}

#[tokio::test]
async fn namespaced_role_grants_only_its_namespace() {
    let s = start_rbac().await;
    let sa = sa_client(&s, "sa").await;
    role(
        &s,
        "team",
        "secrets",
        json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch", "create"]}]),
    )
    .await;
    role_binding(&s, "team", "secrets", "Role", "secrets").await;

    let (code, body) = call(&sa, "GET", "/api/v1/namespaces/team/secrets", None).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["kind"], "SecretList");
    let (code, _) = call(
        &sa,
        "POST",
        "/api/v1/namespaces/team/secrets",
        Some(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s1"}})),
    )
    .await;
    assert_eq!(code, 201);

    let (code, body) = call(&sa, "GET", "/api/v1/namespaces/other/secrets", None).await;
    assert_eq!(code, 403);
    assert_eq!(
        body,
        forbidden(
            &format!(
                "secrets is forbidden: User \"{SA}\" cannot list resource \"secrets\" in API group \"\" in the namespace \"other\""
            ),
            json!({"kind": "secrets"})
        )
    );
    let (code, body) = call(&sa, "GET", "/api/v1/secrets", None).await;
    assert_eq!(code, 403);
    assert_eq!(
        body["message"],
        format!(
            "secrets is forbidden: User \"{SA}\" cannot list resource \"secrets\" in API group \"\" at the cluster scope"
        )
    );
    let (code, body) = call(&sa, "GET", "/api/v1/namespaces", None).await;
    assert_eq!(code, 403);
    assert_eq!(
        body["message"],
        format!(
            "namespaces is forbidden: User \"{SA}\" cannot list resource \"namespaces\" in API group \"\" at the cluster scope"
        )
    );
    // Custom resources: the group is part of the qualified resource and of details.
    let (code, body) = call(
        &sa,
        "DELETE",
        "/apis/test.esr.dev/v1/namespaces/team/widgets/w1",
        None,
    )
    .await;
    assert_eq!(code, 403);
    assert_eq!(
        body,
        forbidden(
            &format!(
                "widgets.test.esr.dev \"w1\" is forbidden: User \"{SA}\" cannot delete resource \"widgets\" in API group \"test.esr.dev\" in the namespace \"team\""
            ),
            json!({"name": "w1", "group": "test.esr.dev", "kind": "widgets"})
        )
    );
    // A refusal is in the audit log with the user.
    let denied: Vec<_> = s
        .audit()
        .entries()
        .into_iter()
        .filter(|e| e.user == SA && e.code == 403)
        .map(|e| (e.verb, e.resource, e.namespace))
        .collect();
    assert!(
        denied.contains(&("list".into(), "secrets".into(), "other".into())),
        "{denied:?}"
    );

    // Without a token, or with the kubeconfig's token: cluster-admin.
    assert_eq!(get(&s, "/api/v1/namespaces/other/secrets").await.code, 200);
    let admin = token_client(&s, esr_testkit::authz::ADMIN_TOKEN).await;
    assert_eq!(call(&admin, "GET", "/api/v1/namespaces", None).await.0, 200);
    // Any other token: 401.
    let stranger = token_client(&s, "not-a-token").await;
    assert_eq!(
        call(&stranger, "GET", "/api/v1/namespaces/team/secrets", None).await,
        (
            401,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                   "message": "Unauthorized", "reason": "Unauthorized", "code": 401})
        )
    );
    // Discovery is open to every authenticated user; other paths are not.
    assert_eq!(call(&sa, "GET", "/apis", None).await.0, 200);
    assert_eq!(call(&sa, "GET", "/version", None).await.0, 200);
    let (code, body) = call(&sa, "GET", "/testkit-nothing", None).await;
    assert_eq!(code, 403);
    assert_eq!(
        body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": format!("forbidden: User \"{SA}\" cannot get path \"/testkit-nothing\""),
               "reason": "Forbidden", "details": {}, "code": 403})
    );
}

#[tokio::test]
async fn deleted_service_account_token_is_unauthorized() {
    let s = start_rbac().await;
    let sa = sa_client(&s, "gone").await;
    assert_eq!(call(&sa, "GET", "/apis", None).await.0, 200);
    let r = raw(
        &s,
        "DELETE",
        "/api/v1/namespaces/team/serviceaccounts/gone",
        "application/json",
        None,
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.text);
    assert_eq!(call(&sa, "GET", "/apis", None).await.0, 401);
}

#[tokio::test]
async fn cluster_role_binding_grants_cluster_wide() {
    let s = start_rbac().await;
    let sa = sa_client(&s, "sa").await;
    cluster_role(
        &s,
        "read-secrets",
        json!([{"apiGroups": [""], "resources": ["secrets", "namespaces"], "verbs": ["get", "list", "watch"]}]),
    )
    .await;
    create(
        &s,
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "read-secrets"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "read-secrets"},
               "subjects": [{"kind": "Group", "name": "system:serviceaccounts:team"}]}),
    )
    .await;
    for p in [
        "/api/v1/namespaces/team/secrets",
        "/api/v1/namespaces/other/secrets",
        "/api/v1/secrets",
        "/api/v1/namespaces",
        "/api/v1/namespaces/other",
    ] {
        assert_eq!(call(&sa, "GET", p, None).await.0, 200, "{p}");
    }
    let (code, body) = call(&sa, "DELETE", "/api/v1/namespaces/other", None).await;
    assert_eq!(code, 403);
    assert_eq!(
        body["message"],
        format!(
            "namespaces \"other\" is forbidden: User \"{SA}\" cannot delete resource \"namespaces\" in API group \"\" in the namespace \"other\""
        )
    );
}

#[tokio::test]
async fn role_binding_to_a_cluster_role_grants_only_in_its_namespace() {
    let s = start_rbac().await;
    let sa = sa_client(&s, "sa").await;
    cluster_role(
        &s,
        "widget-editor",
        json!([{"apiGroups": ["test.esr.dev"], "resources": ["widgets"], "verbs": ["*"]}]),
    )
    .await;
    role_binding(&s, "team", "widgets", "ClusterRole", "widget-editor").await;
    let w = json!({"apiVersion": "test.esr.dev/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"color": "red"}});
    let (code, body) = call(
        &sa,
        "POST",
        "/apis/test.esr.dev/v1/namespaces/team/widgets",
        Some(w.clone()),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let (code, body) = call(
        &sa,
        "POST",
        "/apis/test.esr.dev/v1/namespaces/other/widgets",
        Some(w),
    )
    .await;
    assert_eq!(code, 403);
    assert_eq!(
        body["message"],
        format!(
            "widgets.test.esr.dev is forbidden: User \"{SA}\" cannot create resource \"widgets\" in API group \"test.esr.dev\" in the namespace \"other\""
        )
    );
    let (code, _) = call(&sa, "GET", "/apis/test.esr.dev/v1/widgets", None).await;
    assert_eq!(code, 403);
}

#[tokio::test]
async fn resource_names_restrict_to_named_objects() {
    let s = start_rbac().await;
    let sa = sa_client(&s, "sa").await;
    for n in ["one", "two"] {
        create(
            &s,
            "/api/v1/namespaces/team/secrets",
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": n}}),
        )
        .await;
    }
    role(
        &s,
        "team",
        "one",
        json!([{"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["one"], "verbs": ["get", "watch"]}]),
    )
    .await;
    role_binding(&s, "team", "one", "Role", "one").await;
    assert_eq!(
        call(&sa, "GET", "/api/v1/namespaces/team/secrets/one", None)
            .await
            .0,
        200
    );
    let (code, body) = call(&sa, "GET", "/api/v1/namespaces/team/secrets/two", None).await;
    assert_eq!(code, 403);
    assert_eq!(
        body,
        forbidden(
            &format!(
                "secrets \"two\" is forbidden: User \"{SA}\" cannot get resource \"secrets\" in API group \"\" in the namespace \"team\""
            ),
            json!({"name": "two", "kind": "secrets"})
        )
    );
    // A list has no name, so resourceNames never allow it ...
    let (code, _) = call(&sa, "GET", "/api/v1/namespaces/team/secrets", None).await;
    assert_eq!(code, 403);
    // ... but a watch of one object by field selector names it.
    let (code, _) = call(
        &sa,
        "GET",
        "/api/v1/namespaces/team/secrets?watch=true&timeoutSeconds=1&fieldSelector=metadata.name%3Done",
        None,
    )
    .await;
    assert_eq!(code, 200);
    let (code, body) = call(
        &sa,
        "GET",
        "/api/v1/namespaces/team/secrets?watch=true&timeoutSeconds=1&fieldSelector=metadata.name%3Dtwo",
        None,
    )
    .await;
    assert_eq!(code, 403);
    assert_eq!(
        body["message"],
        format!(
            "secrets \"two\" is forbidden: User \"{SA}\" cannot watch resource \"secrets\" in API group \"\" in the namespace \"team\""
        )
    );
}

#[tokio::test]
async fn subresources_are_authorized_separately() {
    let s = start_rbac().await;
    let sa = sa_client(&s, "sa").await;
    create(
        &s,
        "/apis/test.esr.dev/v1/namespaces/team/widgets",
        json!({"apiVersion": "test.esr.dev/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"color": "red"}}),
    )
    .await;
    role(
        &s,
        "team",
        "status-writer",
        json!([
            {"apiGroups": ["test.esr.dev"], "resources": ["widgets/status"], "verbs": ["patch"]},
            {"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"]}
        ]),
    )
    .await;
    role_binding(&s, "team", "status-writer", "Role", "status-writer").await;
    let merge = "application/merge-patch+json";
    let patch_as = |path: &'static str| {
        let sa = sa.clone();
        async move {
            let req = http::Request::builder()
                .method("PATCH")
                .uri(path)
                .header("content-type", merge)
                .body(kube::client::Body::from(
                    serde_json::to_vec(
                        &json!({"status": {"phase": "Ok"}, "spec": {"color": "blue"}}),
                    )
                    .unwrap(),
                ))
                .unwrap();
            let resp = sa.send(req).await.unwrap();
            let code = resp.status().as_u16();
            let b = resp.into_body().collect().await.unwrap().to_bytes();
            (
                code,
                serde_json::from_slice::<Value>(&b).unwrap_or(Value::Null),
            )
        }
    };
    let (code, body) = patch_as("/apis/test.esr.dev/v1/namespaces/team/widgets/w1/status").await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["status"]["phase"], "Ok");
    let (code, body) = patch_as("/apis/test.esr.dev/v1/namespaces/team/widgets/w1").await;
    assert_eq!(code, 403);
    assert_eq!(
        body["message"],
        format!(
            "widgets.test.esr.dev \"w1\" is forbidden: User \"{SA}\" cannot patch resource \"widgets\" in API group \"test.esr.dev\" in the namespace \"team\""
        )
    );
    let (code, body) = call(
        &sa,
        "GET",
        "/apis/test.esr.dev/v1/namespaces/team/widgets/w1/status",
        None,
    )
    .await;
    assert_eq!(code, 403);
    assert_eq!(
        body,
        forbidden(
            &format!(
                "widgets.test.esr.dev \"w1\" is forbidden: User \"{SA}\" cannot get resource \"widgets/status\" in API group \"test.esr.dev\" in the namespace \"team\""
            ),
            json!({"name": "w1", "group": "test.esr.dev", "kind": "widgets"})
        )
    );
    // serviceaccounts/token without serviceaccounts.
    let (code, body) = call(
        &sa,
        "POST",
        "/api/v1/namespaces/team/serviceaccounts/sa/token",
        Some(json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}})),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let (code, _) = call(
        &sa,
        "GET",
        "/api/v1/namespaces/team/serviceaccounts/sa",
        None,
    )
    .await;
    assert_eq!(code, 403);
}

#[tokio::test]
async fn watch_and_list_are_distinct_verbs() {
    let s = start_rbac().await;
    let sa = sa_client(&s, "sa").await;
    role(
        &s,
        "team",
        "list-only",
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]),
    )
    .await;
    role_binding(&s, "team", "list-only", "Role", "list-only").await;
    assert_eq!(
        call(&sa, "GET", "/api/v1/namespaces/team/configmaps", None)
            .await
            .0,
        200
    );
    let (code, body) = call(
        &sa,
        "GET",
        "/api/v1/namespaces/team/configmaps?watch=1&timeoutSeconds=1",
        None,
    )
    .await;
    assert_eq!(code, 403);
    assert_eq!(
        body["message"],
        format!(
            "configmaps is forbidden: User \"{SA}\" cannot watch resource \"configmaps\" in API group \"\" in the namespace \"team\""
        )
    );
    // deletecollection is not delete.
    role(
        &s,
        "team",
        "delete-one",
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["delete"]}]),
    )
    .await;
    role_binding(&s, "team", "delete-one", "Role", "delete-one").await;
    let (code, body) = call(&sa, "DELETE", "/api/v1/namespaces/team/configmaps", None).await;
    assert_eq!(code, 403);
    assert_eq!(
        body["message"],
        format!(
            "configmaps is forbidden: User \"{SA}\" cannot deletecollection resource \"configmaps\" in API group \"\" in the namespace \"team\""
        )
    );
}

#[tokio::test]
async fn aggregated_cluster_roles_and_missing_roles() {
    let s = start_rbac().await;
    let sa = sa_client(&s, "sa").await;
    create(
        &s,
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "aggregate"},
               "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"esr.dev/aggregate-to": "aggregate"}}]},
               "rules": []}),
    )
    .await;
    create(
        &s,
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "part", "labels": {"esr.dev/aggregate-to": "aggregate"}},
               "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]}),
    )
    .await;
    role_binding(&s, "team", "agg", "ClusterRole", "aggregate").await;
    assert_eq!(
        call(&sa, "GET", "/api/v1/namespaces/team/configmaps", None)
            .await
            .0,
        200
    );
    // A binding to a role that does not exist: the denial says so.
    role_binding(&s, "team", "dangling", "Role", "missing").await;
    let (code, body) = call(&sa, "GET", "/api/v1/namespaces/team/secrets", None).await;
    assert_eq!(code, 403);
    assert_eq!(
        body["message"],
        format!(
            "secrets is forbidden: User \"{SA}\" cannot list resource \"secrets\" in API group \"\" in the namespace \"team\": RBAC: role.rbac.authorization.k8s.io \"missing\" not found"
        )
    );
}

#[tokio::test]
async fn access_reviews_follow_rbac() {
    let s = start_rbac().await;
    let sa = sa_client(&s, "sa").await;
    role(
        &s,
        "team",
        "secrets",
        json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]),
    )
    .await;
    role_binding(&s, "team", "secrets", "Role", "secrets").await;
    let ssar = |ns: &str| {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
               "spec": {"resourceAttributes": {"namespace": ns, "verb": "get", "resource": "secrets"}}})
    };
    let path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
    let (code, body) = call(&sa, "POST", path, Some(ssar("team"))).await;
    assert_eq!((code, &body["status"]["allowed"]), (201, &json!(true)));
    let (code, body) = call(&sa, "POST", path, Some(ssar("other"))).await;
    assert_eq!((code, &body["status"]["allowed"]), (201, &json!(false)));
    // SubjectAccessReview (by the admin) about the ServiceAccount.
    let r = post(
        &s,
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
               "spec": {"user": SA, "groups": ["system:serviceaccounts", "system:serviceaccounts:team", "system:authenticated"],
                        "resourceAttributes": {"namespace": "team", "verb": "list", "resource": "secrets"}}}),
    )
    .await;
    assert_eq!(r.body["status"]["allowed"], json!(false), "{}", r.text);
    let (code, body) = call(
        &sa,
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
        Some(
            json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
                    "spec": {"namespace": "team"}}),
        ),
    )
    .await;
    assert_eq!(code, 201);
    let rules = body["status"]["resourceRules"].as_array().unwrap();
    assert!(
        rules.contains(&json!({"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"]})),
        "{body}"
    );
    assert!(!rules.iter().any(|r| r["verbs"] == json!(["*"])), "{body}");
}
