//! Rollout on rotation (beyond ESO): a Deployment, StatefulSet or DaemonSet annotated
//! `esr.external-secrets.io/reload: "true"` (every Secret its pod template references through
//! volumes, projected volumes, `env[].valueFrom.secretKeyRef` or `envFrom[].secretRef`) or
//! `esr.external-secrets.io/reload: "a,b"` (these Secrets, if referenced or not) gets the pod
//! template annotation `esr.external-secrets.io/secret-hash-<secret>: <data-hash>` whenever esr
//! writes that Secret with a new data hash. Kubernetes then rolls the workload. Opt-in only:
//! workloads without the annotation are never patched, and an unchanged hash is never re-written.

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams};
use sha3::{Digest, Sha3_224};
use tracing::{info, warn};

/// The opt-in annotation on a workload.
pub const RELOAD_ANNOTATION: &str = "esr.external-secrets.io/reload";
/// Prefix of the pod template annotation carrying a Secret's data hash.
pub const HASH_ANNOTATION_PREFIX: &str = "esr.external-secrets.io/secret-hash-";

/// Secret names a pod spec references (volumes, projected volumes, env, envFrom; containers and
/// init containers).
pub fn referenced_secrets(spec: &PodSpec) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for v in spec.volumes.iter().flatten() {
        if let Some(n) = v.secret.as_ref().and_then(|s| s.secret_name.clone()) {
            out.insert(n);
        }
        for src in v.projected.iter().flat_map(|p| p.sources.iter().flatten()) {
            if let Some(s) = &src.secret {
                out.insert(s.name.clone());
            }
        }
    }
    let containers = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten());
    for c in containers {
        for e in c.env.iter().flatten() {
            if let Some(r) = e
                .value_from
                .as_ref()
                .and_then(|f| f.secret_key_ref.as_ref())
            {
                out.insert(r.name.clone());
            }
        }
        for e in c.env_from.iter().flatten() {
            if let Some(r) = &e.secret_ref {
                out.insert(r.name.clone());
            }
        }
    }
    out.retain(|n| !n.is_empty());
    out
}

/// Whether a workload (its metadata and pod template) opted in to reloads of `secret`.
pub fn wants_reload(meta: &ObjectMeta, template: &PodTemplateSpec, secret: &str) -> bool {
    let Some(value) = meta
        .annotations
        .as_ref()
        .and_then(|a| a.get(RELOAD_ANNOTATION))
    else {
        return false;
    };
    let value = value.trim();
    if value.eq_ignore_ascii_case("true") {
        return template
            .spec
            .as_ref()
            .is_some_and(|s| referenced_secrets(s).contains(secret));
    }
    value.split(',').map(str::trim).any(|n| n == secret)
}

/// The pod template annotation key for `secret` (an annotation name is at most 63 characters;
/// longer Secret names are shortened with a hash of the name).
pub fn hash_annotation_key(secret: &str) -> String {
    let short = HASH_ANNOTATION_PREFIX
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .len();
    if short + secret.len() <= 63 {
        return format!("{HASH_ANNOTATION_PREFIX}{secret}");
    }
    let digest = hex::encode(Sha3_224::digest(secret.as_bytes()));
    let keep = 63 - short - 17;
    let head: String = secret.chars().take(keep).collect();
    format!(
        "{HASH_ANNOTATION_PREFIX}{}-{}",
        head.trim_end_matches(['-', '.']),
        &digest[..16]
    )
}

/// The merge patch for a workload, or `None` when it did not opt in or already has this hash.
pub fn patch_for(
    meta: &ObjectMeta,
    template: &PodTemplateSpec,
    secret: &str,
    data_hash: &str,
) -> Option<serde_json::Value> {
    if !wants_reload(meta, template, secret) {
        return None;
    }
    let key = hash_annotation_key(secret);
    let current = template
        .metadata
        .as_ref()
        .and_then(|m| m.annotations.as_ref())
        .and_then(|a| a.get(&key));
    if current.map(String::as_str) == Some(data_hash) {
        return None;
    }
    Some(serde_json::json!({
        "spec": {"template": {"metadata": {"annotations": {key: data_hash}}}}
    }))
}

macro_rules! roll_kind {
    ($fn_name:ident, $kind:ty, $label:literal) => {
        async fn $fn_name(
            client: &Client,
            ns: &str,
            secret: &str,
            data_hash: &str,
        ) -> Result<usize, kube::Error> {
            let api: Api<$kind> = Api::namespaced(client.clone(), ns);
            let list = match api.list_metadata(&ListParams::default()).await {
                Ok(l) => l,
                Err(e) if ignorable(&e) => return Ok(0),
                Err(e) => return Err(e),
            };
            let mut n = 0;
            for item in list.items {
                let opted = item
                    .metadata
                    .annotations
                    .as_ref()
                    .is_some_and(|a| a.contains_key(RELOAD_ANNOTATION));
                let Some(name) = item.metadata.name.clone().filter(|_| opted) else {
                    continue;
                };
                let obj = api.get(&name).await?;
                let Some(spec) = &obj.spec else { continue };
                if let Some(patch) = patch_for(&obj.metadata, &spec.template, secret, data_hash) {
                    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await?;
                    info!(kind = $label, namespace = ns, name = %name, secret, "rolled out after secret rotation");
                    n += 1;
                }
            }
            Ok(n)
        }
    };
}

fn ignorable(e: &kube::Error) -> bool {
    // The kind is not served (404) or esr may not list it (403): nothing to roll.
    matches!(e, kube::Error::Api(s) if s.code == 404 || s.code == 403)
}

roll_kind!(roll_deployments, Deployment, "Deployment");
roll_kind!(roll_statefulsets, StatefulSet, "StatefulSet");
roll_kind!(roll_daemonsets, DaemonSet, "DaemonSet");

/// Called after esr wrote `secret` in `ns` with this data hash: patches the pod template of every
/// opted-in workload whose recorded hash differs. Returns how many workloads were patched.
/// Errors are logged, never fail the ExternalSecret.
pub async fn on_secret_changed(client: &Client, ns: &str, secret: &str, data_hash: &str) -> usize {
    let mut total = 0;
    for r in [
        roll_deployments(client, ns, secret, data_hash).await,
        roll_statefulsets(client, ns, secret, data_hash).await,
        roll_daemonsets(client, ns, secret, data_hash).await,
    ] {
        match r {
            Ok(n) => total += n,
            Err(e) => warn!(namespace = ns, secret, error = %e, "rollout on rotation failed"),
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn template(v: serde_json::Value) -> PodTemplateSpec {
        serde_json::from_value(v).unwrap()
    }

    fn meta(reload: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            annotations: reload
                .map(|r| BTreeMap::from([(RELOAD_ANNOTATION.to_string(), r.to_string())])),
            ..Default::default()
        }
    }

    fn pod() -> PodTemplateSpec {
        template(serde_json::json!({"spec": {
            "volumes": [
                {"name": "v", "secret": {"secretName": "vol"}},
                {"name": "p", "projected": {"sources": [{"secret": {"name": "proj"}}]}}
            ],
            "initContainers": [{"name": "i", "envFrom": [{"secretRef": {"name": "initfrom"}}]}],
            "containers": [{"name": "c",
                "env": [{"name": "E", "valueFrom": {"secretKeyRef": {"name": "envref", "key": "k"}}}],
                "envFrom": [{"secretRef": {"name": "from"}}]}]
        }}))
    }

    #[test]
    fn references_from_every_place() {
        let refs = referenced_secrets(pod().spec.as_ref().unwrap());
        let want: BTreeSet<String> = ["vol", "proj", "initfrom", "envref", "from"]
            .map(String::from)
            .into();
        assert_eq!(refs, want);
    }

    #[test]
    fn opt_in_only() {
        assert!(!wants_reload(&meta(None), &pod(), "vol"));
        assert!(wants_reload(&meta(Some("true")), &pod(), "vol"));
        assert!(!wants_reload(&meta(Some("true")), &pod(), "other"));
        assert!(wants_reload(&meta(Some("a, other")), &pod(), "other"));
        assert!(!wants_reload(&meta(Some("a,b")), &pod(), "vol"));
        assert!(!wants_reload(&meta(Some("false")), &pod(), "vol"));
    }

    #[test]
    fn patch_only_when_hash_changes() {
        let p = patch_for(&meta(Some("true")), &pod(), "vol", "h1").unwrap();
        assert_eq!(
            p["spec"]["template"]["metadata"]["annotations"]["esr.external-secrets.io/secret-hash-vol"],
            "h1"
        );
        let mut t = pod();
        t.metadata = Some(ObjectMeta {
            annotations: Some(BTreeMap::from([(
                "esr.external-secrets.io/secret-hash-vol".to_string(),
                "h1".to_string(),
            )])),
            ..Default::default()
        });
        assert!(patch_for(&meta(Some("true")), &t, "vol", "h1").is_none());
        assert!(patch_for(&meta(Some("true")), &t, "vol", "h2").is_some());
        assert!(patch_for(&meta(None), &t, "vol", "h2").is_none());
    }

    #[test]
    fn long_names_fit_an_annotation_name() {
        let long = "s".repeat(200);
        let key = hash_annotation_key(&long);
        let name = key.rsplit('/').next().unwrap();
        assert!(name.len() <= 63, "{key}");
        assert_ne!(
            hash_annotation_key(&long),
            hash_annotation_key(&"t".repeat(200))
        );
        assert_eq!(
            hash_annotation_key("db"),
            "esr.external-secrets.io/secret-hash-db"
        );
    }
}
