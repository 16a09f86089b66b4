//! Rollout on rotation (beyond ESO): a Deployment, StatefulSet or DaemonSet annotated
//! `esr.external-secrets.io/reload: "true"` (every Secret its pod template references through
//! volumes, projected volumes, `env[].valueFrom.secretKeyRef` or `envFrom[].secretRef`) or
//! `esr.external-secrets.io/reload: "a,b"` (these Secrets, if referenced or not) gets the pod
//! template annotation `esr.external-secrets.io/secret-hash-<secret>: <data-hash>` whenever esr
//! writes that Secret with a new data hash. Kubernetes then rolls the workload. Opt-in only:
//! workloads without the annotation are never patched, and an unchanged hash is never re-written.
//!
//! Workloads are found in memory: [`WorkloadCache`] keeps one metadata-only watch
//! ([`kube::runtime::watcher`] on `Api<PartialObjectMeta<K>>` + reflector) per kind, started once per process (by
//! [`start_shared`], or on the first Secret write), holding only each workload's name, namespace
//! and reload annotation. A Secret write therefore makes no LIST call; only opted-in workloads of
//! the Secret's namespace are read (GET) and, when their recorded hash differs, patched.

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::fmt::Debug;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde::de::DeserializeOwned;
use sha3::{Digest, Sha3_224};
use tracing::{debug, info, warn};

use crate::common::observe::cache_ready;

/// The opt-in annotation on a workload.
pub const RELOAD_ANNOTATION: &str = "esr.external-secrets.io/reload";
/// Prefix of the pod template annotation carrying a Secret's data hash.
pub const HASH_ANNOTATION_PREFIX: &str = "esr.external-secrets.io/secret-hash-";

/// How long the first Secret write waits for the workload caches' first lists (a kind that is not
/// served or not allowed is skipped until its watch works).
const READY_WAIT: Duration = Duration::from_secs(10);

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

/// Reduce a workload's metadata to what the cache needs: name, namespace, resourceVersion and
/// the reload annotation (no managedFields, labels or other annotations such as
/// `kubectl.kubernetes.io/last-applied-configuration`).
fn slim<K>(o: &mut PartialObjectMeta<K>) {
    let reload = o
        .metadata
        .annotations
        .as_mut()
        .and_then(|a| a.remove(RELOAD_ANNOTATION));
    o.metadata = ObjectMeta {
        name: o.metadata.name.take(),
        namespace: o.metadata.namespace.take(),
        resource_version: o.metadata.resource_version.take(),
        annotations: reload.map(|r| BTreeMap::from([(RELOAD_ANNOTATION.to_string(), r)])),
        ..Default::default()
    };
}

/// Could the workload (by its reload annotation alone) want a reload of `secret`? `"true"` needs
/// the pod template to decide; an explicit list is decided here.
fn may_want(meta: &ObjectMeta, secret: &str) -> bool {
    let Some(value) = meta
        .annotations
        .as_ref()
        .and_then(|a| a.get(RELOAD_ANNOTATION))
    else {
        return false;
    };
    let value = value.trim();
    value.eq_ignore_ascii_case("true") || value.split(',').map(str::trim).any(|n| n == secret)
}

fn start_kind<K>(
    client: &Client,
    namespace: Option<&str>,
    label: &'static str,
) -> Store<PartialObjectMeta<K>>
where
    K: kube::Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static,
{
    // An Api of PartialObjectMeta makes metadata-only list/watch requests (kube's replacement
    // for the deprecated `metadata_watcher`).
    let api: Api<PartialObjectMeta<K>> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let (reader, writer) = reflector::store::<PartialObjectMeta<K>>();
    let stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .modify(slim)
        .reflect(writer);
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        let mut failing = false;
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(_) if failing => {
                    info!(kind = label, "rollout workload watch recovered");
                    failing = false;
                }
                Ok(_) => {}
                // The kind may be unserved (404) or not allowed (403): warn once, then retry with
                // back-off quietly.
                Err(e) if !failing => {
                    warn!(kind = label, error = %e, "rollout workload watch failed; workloads of this kind are not rolled until it recovers");
                    failing = true;
                }
                Err(e) => debug!(kind = label, error = %e, "rollout workload watch still failing"),
            }
        }
    });
    reader
}

/// In-memory index of the workloads that can opt in to rollout on rotation: one metadata-only
/// watch per kind (Deployment, StatefulSet, DaemonSet), cluster-wide or in one namespace.
#[derive(Clone)]
pub struct WorkloadCache {
    client: Client,
    /// Set once a Secret write waited for the first lists; later writes never wait.
    waited: Arc<AtomicBool>,
    deployments: Store<PartialObjectMeta<Deployment>>,
    statefulsets: Store<PartialObjectMeta<StatefulSet>>,
    daemonsets: Store<PartialObjectMeta<DaemonSet>>,
}

impl Debug for WorkloadCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkloadCache")
            .field("deployments", &self.deployments.len())
            .field("statefulsets", &self.statefulsets.len())
            .field("daemonsets", &self.daemonsets.len())
            .finish()
    }
}

impl WorkloadCache {
    /// Start the three watches (tasks on the current tokio runtime). `namespace`: watch only this
    /// namespace (esr's `--namespace`), else the whole cluster.
    pub fn start(client: Client, namespace: Option<&str>) -> Self {
        WorkloadCache {
            deployments: start_kind::<Deployment>(&client, namespace, "Deployment"),
            statefulsets: start_kind::<StatefulSet>(&client, namespace, "StatefulSet"),
            daemonsets: start_kind::<DaemonSet>(&client, namespace, "DaemonSet"),
            client,
            waited: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Wait (bounded) until every kind was listed once; true when all are ready.
    pub async fn wait_ready(&self, timeout: Duration) -> bool {
        let all = async {
            let (a, b, c) = tokio::join!(
                cache_ready(&self.deployments),
                cache_ready(&self.statefulsets),
                cache_ready(&self.daemonsets)
            );
            a.is_ok() && b.is_ok() && c.is_ok()
        };
        tokio::time::timeout(timeout, all).await.unwrap_or(false)
    }

    /// Names of the workloads of `ns` whose reload annotation may select `secret`, per kind
    /// (Deployment, StatefulSet, DaemonSet).
    pub fn candidates(&self, ns: &str, secret: &str) -> [Vec<String>; 3] {
        fn pick<K: kube::Resource<DynamicType = ()> + Clone>(
            s: &Store<PartialObjectMeta<K>>,
            ns: &str,
            secret: &str,
        ) -> Vec<String> {
            let mut v: Vec<String> = s
                .state_filter(|o| {
                    o.metadata.namespace.as_deref() == Some(ns) && may_want(&o.metadata, secret)
                })
                .iter()
                .filter_map(|o| o.metadata.name.clone())
                .collect();
            v.sort();
            v
        }
        [
            pick(&self.deployments, ns, secret),
            pick(&self.statefulsets, ns, secret),
            pick(&self.daemonsets, ns, secret),
        ]
    }

    /// Patch the pod template of every opted-in workload of `ns` using `secret` whose recorded
    /// hash differs from `data_hash`. Returns how many were patched. Errors are logged.
    pub async fn on_secret_changed(&self, ns: &str, secret: &str, data_hash: &str) -> usize {
        // Only the first write(s) after start wait for the initial lists; a kind that cannot be
        // listed (not served, not allowed) must not delay every later Secret write.
        if !self.waited.load(Ordering::Relaxed) {
            if !self.wait_ready(READY_WAIT).await {
                debug!(
                    namespace = ns,
                    secret,
                    "rollout: some workload kinds are not listed (yet); rolling the listed ones"
                );
            }
            self.waited.store(true, Ordering::Relaxed);
        }
        let [deps, stss, dss] = self.candidates(ns, secret);
        let (c, h) = (&self.client, data_hash);
        roll::<Deployment>(c, ns, &deps, secret, h, "Deployment", |d| {
            d.spec.as_ref().map(|s| &s.template)
        })
        .await
            + roll::<StatefulSet>(c, ns, &stss, secret, h, "StatefulSet", |d| {
                d.spec.as_ref().map(|s| &s.template)
            })
            .await
            + roll::<DaemonSet>(c, ns, &dss, secret, h, "DaemonSet", |d| {
                d.spec.as_ref().map(|s| &s.template)
            })
            .await
    }
}

async fn roll<K>(
    client: &Client,
    ns: &str,
    names: &[String],
    secret: &str,
    data_hash: &str,
    label: &'static str,
    template: impl Fn(&K) -> Option<&PodTemplateSpec>,
) -> usize
where
    K: kube::Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + serde::Serialize
        + Debug,
{
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    let mut n = 0;
    for name in names {
        let obj = match api.get_opt(name).await {
            Ok(Some(o)) => o,
            Ok(None) => continue,
            Err(e) => {
                warn!(kind = label, namespace = ns, name = %name, secret, error = %e, "rollout on rotation failed");
                continue;
            }
        };
        let Some(t) = template(&obj) else { continue };
        let Some(patch) = patch_for(obj.meta(), t, secret, data_hash) else {
            continue;
        };
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                info!(kind = label, namespace = ns, name = %name, secret, "rolled out after secret rotation");
                n += 1;
            }
            Err(e) => {
                warn!(kind = label, namespace = ns, name = %name, secret, error = %e, "rollout on rotation failed")
            }
        }
    }
    n
}

/// The controller's [`WorkloadCache`], started once: by [`Rollouts::start`] at startup with esr's
/// `--namespace` scope, or cluster-wide by the first Secret write. It lives in the
/// [`Context`](crate::runtime::Context).
#[derive(Default)]
pub struct Rollouts(OnceLock<WorkloadCache>);

impl Rollouts {
    /// Starts the cache (idempotent: the first call wins) with esr's `--namespace` scope
    /// (`None` = cluster-wide).
    pub fn start(&self, client: &Client, namespace: Option<&str>) -> &WorkloadCache {
        self.0
            .get_or_init(|| WorkloadCache::start(client.clone(), namespace))
    }

    /// Called after esr wrote `secret` in `ns` with this data hash: patches the pod template of
    /// every opted-in workload whose recorded hash differs (the cache is started cluster-wide on
    /// first use unless [`Rollouts::start`] was called). Returns how many workloads were
    /// patched. Errors are logged, never fail the ExternalSecret.
    pub async fn on_secret_changed(
        &self,
        client: &Client,
        ns: &str,
        secret: &str,
        data_hash: &str,
    ) -> usize {
        self.start(client, None)
            .on_secret_changed(ns, secret, data_hash)
            .await
    }
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

    #[test]
    fn cache_keeps_only_name_namespace_and_reload_annotation() {
        let mut o: PartialObjectMeta<Deployment> = serde_json::from_value(serde_json::json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "a", "resourceVersion": "7",
                "labels": {"x": "y"},
                "annotations": {RELOAD_ANNOTATION: "db", "kubectl.kubernetes.io/last-applied-configuration": "{}"},
                "managedFields": [{"manager": "kubectl", "operation": "Update"}]}
        }))
        .unwrap();
        slim(&mut o);
        assert_eq!(o.metadata.name.as_deref(), Some("web"));
        assert_eq!(o.metadata.namespace.as_deref(), Some("a"));
        assert_eq!(o.metadata.resource_version.as_deref(), Some("7"));
        assert_eq!(
            o.metadata.annotations,
            Some(BTreeMap::from([(
                RELOAD_ANNOTATION.to_string(),
                "db".to_string()
            )]))
        );
        assert!(o.metadata.labels.is_none());
        assert!(o.metadata.managed_fields.is_none());
        let mut bare: PartialObjectMeta<Deployment> = serde_json::from_value(serde_json::json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "b", "namespace": "a", "annotations": {"other": "1"}}
        }))
        .unwrap();
        slim(&mut bare);
        assert!(bare.metadata.annotations.is_none());
    }

    #[test]
    fn candidates_by_annotation_alone() {
        assert!(may_want(&meta(Some("true")), "any"));
        assert!(may_want(&meta(Some(" TRUE ")), "any"));
        assert!(may_want(&meta(Some("a, db")), "db"));
        assert!(!may_want(&meta(Some("a,b")), "db"));
        assert!(!may_want(&meta(Some("false")), "db"));
        assert!(!may_want(&meta(None), "db"));
    }
}
