//! Scoped mode: esr installed with the chart's `scopedNamespace` + `scopedRBAC` runs with only the
//! chart's namespace Role (and the leader election Role of its release namespace), against
//! esr-testkit with RBAC enforced (or a real cluster via ESR_E2E_KUBECONFIG). It syncs an
//! ExternalSecret of its namespace and the API server refuses none of its calls.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod es_support;

use std::collections::BTreeSet;
use std::time::Duration;

use es_support::*;
use esr_deploytool::{Release, render_chart};
use esr_e2e::{Env, EnvOptions, repo_root, wait_for};
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};

/// The chart rendered for a scoped install: release `esr` in `release_ns`, scoped to `ns`.
fn scoped_chart(ns: &str, release_ns: &str) -> Vec<Value> {
    render_chart(
        &repo_root().join("deploy/charts/esr"),
        &json!({"scopedNamespace": ns, "scopedRBAC": true, "installCRDs": false}),
        &Release {
            name: "esr".into(),
            namespace: release_ns.into(),
        },
    )
    .unwrap()
    .into_iter()
    .flat_map(|r| r.documents)
    .map(|d| yaml_serde::from_str::<Value>(&d).unwrap())
    .collect()
}

/// The esr container's arguments of the rendered Deployment, without the subcommand and the
/// in-pod listen addresses (the harness picks free local ports).
fn deployment_args(objs: &[Value]) -> Vec<String> {
    let dep = objs.iter().find(|o| o["kind"] == "Deployment").unwrap();
    dep["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .filter(|a| {
            a != "controller" && !a.starts_with("--metrics-addr") && !a.starts_with("--live-addr")
        })
        .collect()
}

async fn create<K>(api: &Api<K>, obj: &Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let o: K = serde_json::from_value(obj.clone()).unwrap();
    api.create(&PostParams::default(), &o)
        .await
        .unwrap_or_else(|e| panic!("creating {}: {e}", obj["metadata"]["name"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scoped_install_syncs_with_only_its_namespace_role() {
    let env = Env::start_with(EnvOptions { rbac: true }).await.unwrap();
    let ns = env.namespace("scoped").await.unwrap();
    let release_ns = env.namespace("scoped-rel").await.unwrap();
    // render_chart installs the chart with Helm into its own esr-testkit on its own runtime,
    // so it runs on a blocking thread.
    let objs = {
        let (ns, release_ns) = (ns.clone(), release_ns.clone());
        tokio::task::spawn_blocking(move || scoped_chart(&ns, &release_ns))
            .await
            .unwrap()
    };
    for kind in ["ClusterRole", "ClusterRoleBinding"] {
        assert!(
            objs.iter().all(|o| o["kind"] != kind),
            "a scoped install renders no {kind}"
        );
    }
    let client = env.client();
    let mut sa_name = String::new();
    for o in &objs {
        let ons = o["metadata"]["namespace"].as_str().unwrap_or_default();
        match o["kind"].as_str().unwrap() {
            "ServiceAccount" => {
                sa_name = o["metadata"]["name"].as_str().unwrap().to_string();
                create(&Api::<ServiceAccount>::namespaced(client.clone(), ons), o).await;
            }
            "Role" => create(&Api::<Role>::namespaced(client.clone(), ons), o).await,
            "RoleBinding" => create(&Api::<RoleBinding>::namespaced(client.clone(), ons), o).await,
            _ => {}
        }
    }
    assert_eq!(sa_name, "esr");
    let tr: TokenRequest = serde_json::from_value(json!({"spec": {"audiences": []}})).unwrap();
    let token = Api::<ServiceAccount>::namespaced(client.clone(), &release_ns)
        .create_token_request(&sa_name, &PostParams::default(), &tr)
        .await
        .unwrap()
        .status
        .unwrap()
        .token;
    let kubeconfig = env.kubeconfig_for_token(&token).unwrap();

    // The API server does enforce RBAC for this token: the namespace Role grants nothing
    // cluster-wide and nothing in another namespace.
    let sa_client = kube::Client::try_from(
        kube::Config::from_custom_kubeconfig(
            kube::config::Kubeconfig::read_from(&kubeconfig).unwrap(),
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .unwrap(),
    )
    .unwrap();
    match Api::<Namespace>::all(sa_client.clone())
        .list(&ListParams::default())
        .await
    {
        Err(kube::Error::Api(e)) => assert_eq!(e.code, 403, "{e:?}"),
        other => panic!("listing namespaces as the scoped ServiceAccount: {other:?}"),
    }
    let user = format!("system:serviceaccount:{release_ns}:{sa_name}");
    match Api::<k8s_openapi::api::core::v1::Secret>::namespaced(sa_client, &release_ns)
        .list(&ListParams::default())
        .await
    {
        Err(kube::Error::Api(e)) => {
            assert_eq!(e.code, 403);
            assert_eq!(
                e.message,
                format!(
                    "secrets is forbidden: User \"{user}\" cannot list resource \"secrets\" in API group \"\" in the namespace \"{release_ns}\""
                )
            );
        }
        other => panic!("listing Secrets outside the scope: {other:?}"),
    }

    let args = deployment_args(&objs);
    assert!(args.contains(&format!("--namespace={ns}")), "{args:?}");
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let esr = env.start_esr_with_kubeconfig(&kubeconfig, &refs).unwrap();

    apply(
        &env,
        &ns,
        fake_ss("fake", json!([{"key": "/app/foo", "value": "value1"}])),
    )
    .await;
    apply(
        &env,
        &ns,
        es(
            "app",
            json!({
                "refreshInterval": "1h",
                "secretStoreRef": {"kind": "SecretStore", "name": "fake"},
                "target": {"name": "app-secret"},
                "data": [{"secretKey": "foo", "remoteRef": {"key": "/app/foo"}}]
            }),
        ),
    )
    .await;
    wait_condition(&env, "SecretStore", &ns, "fake", "True", "Valid").await;
    wait_condition(&env, "ExternalSecret", &ns, "app", "True", "SecretSynced").await;
    wait_secret_data(&env, &ns, "app-secret", &[("foo", "value1")]).await;

    // Every controller's watches have started (their first lists happened) before the check.
    if let Some(audit) = env.audit() {
        let want: BTreeSet<&str> = [
            "externalsecrets",
            "secretstores",
            "pushsecrets",
            "secrets",
            "deployments",
        ]
        .into();
        wait_for(
            "esr's namespace watches",
            Duration::from_secs(30),
            || async {
                let seen: BTreeSet<String> = audit
                    .entries()
                    .into_iter()
                    .filter(|e| {
                        e.user == user
                            && e.user_agent.starts_with("esr/")
                            && e.verb == "list"
                            && e.namespace == ns
                    })
                    .map(|e| e.resource)
                    .collect();
                want.iter().all(|w| seen.contains(*w)).then_some(())
            },
        )
        .await
        .unwrap();
        // esr's calls (the probes above were made with another User-Agent).
        let calls: Vec<_> = audit
            .entries()
            .into_iter()
            .filter(|e| e.user == user && e.user_agent.starts_with("esr/"))
            .collect();
        assert!(
            calls.iter().any(|e| e.resource == "leases"),
            "leader election ran as the ServiceAccount: {calls:?}"
        );
        let refused: Vec<_> = calls.iter().filter(|e| e.code == 403).collect();
        assert!(refused.is_empty(), "esr got 403s: {refused:#?}");
        assert!(
            calls.iter().all(|e| !e.namespace.is_empty()),
            "cluster-wide calls in scoped mode: {:#?}",
            calls
                .iter()
                .filter(|e| e.namespace.is_empty())
                .collect::<Vec<_>>()
        );
    }
    let logs = esr.logs();
    assert!(!logs.contains("forbidden"), "esr logged a refusal:\n{logs}");
}
