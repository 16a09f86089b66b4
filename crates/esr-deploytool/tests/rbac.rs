//! The ClusterRole and the leader election Role in deploy/manifests/esr.yaml against the API
//! calls esr made in the e2e suite (deploy/rbac-observed.txt, written by
//! e2e/tests/deploy_manifests.rs `rbac_observed_calls` with ESR_WRITE_RBAC_OBSERVED=1):
//! every observed call is allowed, and every allowed (group, resource, verb) was observed or is
//! in ALLOWLIST with its reason.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;

use esr_deploytool::repo_root;
use serde_json::Value;

/// Allowed although the e2e run did not observe it: (group, resource, verb, why).
const ALLOWLIST: &[(&str, &str, &str, &str)] = &[
    (
        "external-secrets.io",
        "secretstores",
        "get",
        "store lookup on a cache miss (controller.rs)",
    ),
    (
        "external-secrets.io",
        "clustersecretstores",
        "get",
        "store lookup on a cache miss (controller.rs)",
    ),
    (
        "external-secrets.io",
        "externalsecrets",
        "update",
        "ClusterExternalSecret replaces an existing ExternalSecret (ces.rs)",
    ),
    (
        "external-secrets.io",
        "externalsecrets",
        "delete",
        "ClusterExternalSecret deletes ExternalSecrets of namespaces that no longer match (ces.rs)",
    ),
    (
        "external-secrets.io",
        "externalsecrets",
        "create",
        "ClusterExternalSecret creates ExternalSecrets (ces.rs)",
    ),
    (
        "external-secrets.io",
        "clusterexternalsecrets",
        "patch",
        "ClusterExternalSecret finalizer (ces.rs)",
    ),
    (
        "external-secrets.io",
        "clusterexternalsecrets/status",
        "patch",
        "ClusterExternalSecret status (ces.rs)",
    ),
    (
        "external-secrets.io",
        "clusterexternalsecrets",
        "list",
        "ClusterExternalSecret reflector",
    ),
    (
        "external-secrets.io",
        "clusterexternalsecrets",
        "watch",
        "ClusterExternalSecret reflector",
    ),
    (
        "external-secrets.io",
        "pushsecrets",
        "patch",
        "PushSecret finalizer (pushsecret.rs)",
    ),
    (
        "generators.external-secrets.io",
        "clustergenerators",
        "get",
        "generatorRef to a ClusterGenerator (generators.rs)",
    ),
    (
        "generators.external-secrets.io",
        "fakes",
        "get",
        "generatorRef to a Fake generator (generators.rs)",
    ),
    (
        "generators.external-secrets.io",
        "vaultdynamicsecrets",
        "get",
        "generatorRef to a VaultDynamicSecret (generators.rs)",
    ),
    (
        "generators.external-secrets.io",
        "ecrauthorizationtokens",
        "get",
        "generatorRef to an ECRAuthorizationToken (generators.rs)",
    ),
    (
        "generators.external-secrets.io",
        "stssessiontokens",
        "get",
        "generatorRef to an STSSessionToken (generators.rs)",
    ),
    (
        "generators.external-secrets.io",
        "webhooks",
        "get",
        "generatorRef to a Webhook generator (generators.rs)",
    ),
    (
        "",
        "namespaces",
        "get",
        "namespace lookup for ClusterSecretStore conditions (controller.rs)",
    ),
    (
        "",
        "namespaces",
        "patch",
        "ClusterExternalSecret namespace finalizer (ces.rs)",
    ),
    (
        "",
        "namespaces",
        "list",
        "ClusterExternalSecret namespace selection (ces.rs)",
    ),
    (
        "",
        "namespaces",
        "watch",
        "ClusterExternalSecret namespace selection (ces.rs)",
    ),
    (
        "",
        "configmaps",
        "get",
        "caProvider of type ConfigMap (esr-provider kube_access.rs)",
    ),
    (
        "",
        "serviceaccounts",
        "get",
        "serviceAccountRef of provider auth (esr-provider kube_access.rs)",
    ),
    (
        "",
        "serviceaccounts/token",
        "create",
        "TokenRequest for serviceAccountRef auth (AWS JWT, Azure workload identity, Vault kubernetes)",
    ),
    (
        "events.k8s.io",
        "events",
        "patch",
        "kube's event Recorder patches a repeated event's series",
    ),
    (
        "external-secrets.io",
        "externalsecrets",
        "patch",
        "ExternalSecret finalizer (controller.rs)",
    ),
    (
        "external-secrets.io",
        "externalsecrets/finalizers",
        "update",
        "OwnerReferencesPermissionEnforcement: a Secret's blockOwnerDeletion ownerRef to its ExternalSecret (checked by the admission plugin, not a call of esr's)",
    ),
    (
        "external-secrets.io",
        "clusterpushsecrets/finalizers",
        "update",
        "OwnerReferencesPermissionEnforcement: a PushSecret's blockOwnerDeletion ownerRef to its ClusterPushSecret",
    ),
    (
        "external-secrets.io",
        "clustersecretstores",
        "patch",
        "store finalizer while a PushSecret with deletionPolicy Delete pushes to a ClusterSecretStore (stores.rs)",
    ),
    (
        "external-secrets.io",
        "pushsecrets",
        "update",
        "ClusterPushSecret replaces an owned PushSecret whose spec drifted (clusterpushsecret.rs)",
    ),
    (
        "external-secrets.io",
        "pushsecrets",
        "delete",
        "ClusterPushSecret deletes PushSecrets of namespaces that no longer match (clusterpushsecret.rs)",
    ),
    (
        "external-secrets.io",
        "pushsecrets",
        "get",
        "ClusterPushSecret reads an existing PushSecret after a create conflict (clusterpushsecret.rs)",
    ),
    (
        "external-secrets.io",
        "clusterexternalsecrets/finalizers",
        "update",
        "OwnerReferencesPermissionEnforcement: an ExternalSecret's blockOwnerDeletion ownerRef to its ClusterExternalSecret",
    ),
];

fn observed() -> BTreeSet<(String, String, String)> {
    let text = std::fs::read_to_string(repo_root().join("deploy/rbac-observed.txt")).unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let parts: Vec<&str> = l.split('|').collect();
            assert_eq!(parts.len(), 3, "bad line {l:?}");
            let group = if parts[0] == "core" { "" } else { parts[0] };
            (
                group.to_string(),
                parts[1].to_string(),
                parts[2].to_string(),
            )
        })
        .collect()
}

/// (group, resource, verb) triples granted by the ClusterRole and the Roles of esr.yaml.
fn granted() -> BTreeSet<(String, String, String)> {
    let text = std::fs::read_to_string(repo_root().join("deploy/manifests/esr.yaml")).unwrap();
    let mut out = BTreeSet::new();
    let mut kinds = 0;
    for doc in yaml_serde::Deserializer::from_str(&text) {
        let v: Value = serde::Deserialize::deserialize(doc).unwrap();
        if v["kind"] != "ClusterRole" && v["kind"] != "Role" {
            continue;
        }
        // The aggregated view/edit roles are for people (bound through Kubernetes' view, edit
        // and admin ClusterRoles), not for esr's ServiceAccount.
        if v["metadata"]["labels"].as_object().is_some_and(|l| {
            l.keys()
                .any(|k| k.starts_with("rbac.authorization.k8s.io/aggregate-to-"))
        }) {
            continue;
        }
        kinds += 1;
        for rule in v["rules"].as_array().unwrap() {
            let list = |k: &str| -> Vec<String> {
                rule[k]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_str().unwrap().to_string())
                    .collect()
            };
            for g in list("apiGroups") {
                for r in list("resources") {
                    assert_ne!(r, "*", "wildcard resource in {rule}");
                    for verb in list("verbs") {
                        assert_ne!(verb, "*", "wildcard verb in {rule}");
                        out.insert((g.clone(), r.clone(), verb));
                    }
                }
            }
        }
    }
    assert_eq!(kinds, 2, "one ClusterRole and one leader election Role");
    out
}

#[test]
fn every_observed_call_is_allowed() {
    let granted = granted();
    let obs = observed();
    assert!(obs.len() > 10, "too few observed calls: {obs:?}");
    let denied: Vec<_> = obs.iter().filter(|o| !granted.contains(*o)).collect();
    assert!(denied.is_empty(), "observed but not granted: {denied:?}");
}

#[test]
fn every_grant_was_observed_or_is_justified() {
    let obs = observed();
    let unjustified: Vec<_> = granted()
        .into_iter()
        .filter(|g| !obs.contains(g))
        .filter(|(g, r, v)| {
            !ALLOWLIST
                .iter()
                .any(|(ag, ar, av, _)| ag == g && ar == r && av == v)
        })
        .collect();
    assert!(
        unjustified.is_empty(),
        "granted, never observed, not in ALLOWLIST: {unjustified:?}"
    );
    // The allowlist stays honest: every entry is actually granted.
    let granted = granted();
    for (g, r, v, why) in ALLOWLIST {
        assert!(
            granted.contains(&(g.to_string(), r.to_string(), v.to_string())),
            "ALLOWLIST entry {g}/{r} {v} ({why}) is not granted"
        );
    }
}
