//! Fetching provider data for one ExternalSecret (ESO `getProviderSecretData`), shared by the
//! controller and `esr render`.
//!
//! Within one call every store is resolved and every client built at most once, and every
//! distinct `(store, key, version, property, metadataPolicy)` remote is fetched at most once
//! (`data[]` refs of one store are fetched with one batched `get_secrets` call).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use esr_api::v1::{
    ExternalSecret, ExternalSecretDataRemoteRef, MetadataPolicy as ApiMetadata, SecretStoreRef,
    SourceRef,
};
use esr_provider::store::{StoreLookup, any_store_unmanaged};
use esr_provider::{
    CallRecorder, ClientContext, FindName, FindRequest, KubeAccess, MetadataPolicy, ProviderError,
    ProviderRegistry, ResolveOptions, SecretRef, SecretsClient, StoreRef, StoreResolution,
    resolve_store,
};
use kube::ResourceExt;

use crate::common::generators::{Generated, GeneratorError, Generators, es_consumer};
use crate::common::storegate::StoreGate;
use crate::externalsecret::convert::rewrites;
use crate::externalsecret::error::SyncError;
use crate::externalsecret::pipeline::{
    Assembled, DataFromKind, DataFromOptions, DataFromResult, DataMap, DataResult, EntryResult,
    KeyTransformer, PipelineError, Rewrite, assemble, process_data_from_map, process_data_value,
    rewrite_map, validate_keys,
};
use crate::externalsecret::template::{RenderPool, TemplateEngine};

/// What fetching needs.
pub struct FetchEnv<'a> {
    /// Stores and namespace labels.
    pub lookup: &'a dyn StoreLookup,
    /// Providers.
    pub registry: &'a ProviderRegistry,
    /// Kubernetes IO for providers.
    pub kube: Arc<dyn KubeAccess>,
    /// Provider API-call metrics.
    pub recorder: Arc<dyn CallRecorder>,
    /// Controller class and flood gate.
    pub resolve: ResolveOptions,
    /// Where rewrite `transform` templates render.
    pub transforms: Transforms<'a>,
    /// Per-store bounds of the provider calls (the controller's; `None`: unbounded).
    pub gate: Option<Arc<StoreGate>>,
    /// The generators behind `generatorRef`s (`None`: generators are not available).
    pub generators: Option<&'a Generators>,
}

/// Where rewrite `transform` templates render. A transform is a Go template, as heavy as a
/// `target.template`, so the controller renders it on its [`RenderPool`] like one: a poison
/// transform holds a blocking thread (until its deadline), never an async worker.
#[derive(Clone, Copy)]
pub enum Transforms<'a> {
    /// On the calling task (`esr render`, tests).
    Inline(&'a dyn KeyTransformer),
    /// On `pool`, off the async workers, when a chain has a `transform` (the controller).
    Pool(&'a RenderPool, &'a Arc<dyn TemplateEngine>),
}

impl Transforms<'_> {
    /// Runs `chain` (a rewrite chain and the steps after it) with the transform renderer: on the
    /// pool when the chain has a `transform` (`transforms`, see [`has_transform`]) and there is
    /// one, inline otherwise.
    async fn run<T, F>(self, transforms: bool, chain: F) -> Result<T, SyncError>
    where
        T: Send + 'static,
        F: FnOnce(&dyn KeyTransformer) -> Result<T, SyncError> + Send + 'static,
    {
        match self {
            Transforms::Inline(t) => chain(t),
            Transforms::Pool(_, engine) if !transforms => chain(engine.transformer()),
            Transforms::Pool(pool, engine) => {
                let engine = Arc::clone(engine);
                pool.run(move || chain(engine.transformer()))
                    .await
                    .unwrap_or_else(|e| {
                        Err(SyncError::Rewrite(PipelineError::Transform(e.to_string())))
                    })
            }
        }
    }
}

/// The result of fetching.
#[derive(Debug)]
pub enum Fetched {
    /// A referenced store belongs to another controller class: skip the ExternalSecret silently.
    Skip,
    /// Assembled data, or why fetching failed.
    Data(Result<Assembled, SyncError>),
}

/// Whether a rewrite chain renders templates.
fn has_transform(rewrite: &[Rewrite]) -> bool {
    rewrite
        .iter()
        .any(|r| matches!(r, Rewrite::Transform { .. }))
}

/// [`process_data_from_map`] where `transforms` says, as an entry result.
async fn process_off_workers(
    transforms: Transforms<'_>,
    opts: DataFromOptions,
    m: DataMap,
) -> EntryResult<DataMap> {
    transforms
        .run(has_transform(&opts.rewrite), move |t| {
            process_data_from_map(&opts, t, m)
        })
        .await
        .map_or_else(EntryResult::Err, EntryResult::Ok)
}

fn store_ref_of(default: Option<&SecretStoreRef>, source: Option<&SourceRef>) -> StoreRef {
    let r = source.and_then(|s| s.store_ref.as_ref()).or(default);
    let kind = r.and_then(|r| r.kind).map(|k| match k {
        esr_api::v1::SecretStoreKind::SecretStore => "SecretStore",
        esr_api::v1::SecretStoreKind::ClusterSecretStore => "ClusterSecretStore",
    });
    StoreRef::new(kind, r.and_then(|r| r.name.clone()).unwrap_or_default())
}

/// Every store an ExternalSecret references (for the class check and the store → ES mapping).
pub fn referenced_stores(es: &ExternalSecret) -> Vec<StoreRef> {
    let mut out = Vec::new();
    let default = es.spec.secret_store_ref.as_ref();
    if default
        .and_then(|d| d.name.as_deref())
        .is_some_and(|n| !n.is_empty())
    {
        out.push(store_ref_of(default, None));
    }
    for d in es.spec.data.iter().flatten() {
        if d.source_ref
            .as_ref()
            .and_then(|s| s.store_ref.as_ref())
            .is_some()
        {
            out.push(store_ref_of(default, d.source_ref.as_deref()));
        }
    }
    for d in es.spec.data_from.iter().flatten() {
        if d.source_ref
            .as_ref()
            .and_then(|s| s.store_ref.as_ref())
            .is_some()
        {
            out.push(store_ref_of(default, d.source_ref.as_ref()));
        }
    }
    out.sort();
    out.dedup();
    out
}

fn secret_ref(r: &ExternalSecretDataRemoteRef) -> SecretRef {
    let mut s = SecretRef::new(r.key.clone());
    if let Some(p) = r.property.as_deref().filter(|p| !p.is_empty()) {
        s = s.with_property(p);
    }
    if let Some(v) = r.version.as_deref().filter(|v| !v.is_empty()) {
        s = s.with_version(v);
    }
    if r.metadata_policy == Some(ApiMetadata::Fetch) {
        s = s.with_metadata_policy(MetadataPolicy::Fetch);
    }
    s
}

type ClientResult = Result<(String, Arc<dyn SecretsClient>), SyncError>;

struct Clients<'a> {
    env: &'a FetchEnv<'a>,
    namespace: String,
    clients: HashMap<StoreRef, ClientResult>,
}

impl Clients<'_> {
    async fn get(&mut self, r: &StoreRef) -> ClientResult {
        if let Some(c) = self.clients.get(r) {
            return c.clone();
        }
        let res = self.build(r).await;
        self.clients.insert(r.clone(), res.clone());
        res
    }

    async fn build(&self, r: &StoreRef) -> ClientResult {
        let store =
            match resolve_store(self.env.lookup, &self.namespace, r, &self.env.resolve).await {
                Ok(StoreResolution::Use(s)) => s,
                Ok(StoreResolution::Skip) => {
                    return Err(SyncError::ForeignStore {
                        kind: r.kind,
                        name: r.name.clone(),
                    });
                }
                Err(e) => return Err(e.into()),
            };
        let provider = self.env.registry.for_store(&store)?;
        let ctx = ClientContext::new(&store, Some(&self.namespace), self.env.kube.clone())
            .with_recorder(self.env.recorder.clone());
        let id = store.identity();
        let client = match &self.env.gate {
            Some(gate) => gate.connect(id.clone(), provider.new_client(&ctx)).await?,
            None => provider.new_client(&ctx).await?,
        };
        Ok((id, client))
    }
}

fn entry<T>(r: Result<T, ProviderError>) -> EntryResult<T> {
    match r {
        Ok(v) => EntryResult::Ok(v),
        Err(e) if e.is_not_found() => EntryResult::NotFound(e.into()),
        Err(e) => EntryResult::Err(e.into()),
    }
}

async fn generate(
    generators: Option<&Generators>,
    r: &esr_api::v1::GeneratorRef,
    namespace: &str,
    consumer: &str,
) -> Result<Generated, GeneratorError> {
    match generators {
        Some(g) => g.generate(r, namespace, consumer).await,
        None => Err(GeneratorError::NotInstalled),
    }
}

/// Fetches and assembles the provider data of an ExternalSecret.
pub async fn fetch(env: &FetchEnv<'_>, es: &ExternalSecret) -> Fetched {
    let namespace = es.namespace().unwrap_or_default();
    let refs = referenced_stores(es);
    match any_store_unmanaged(env.lookup, &namespace, &refs, &env.resolve.controller_class).await {
        Ok(true) => return Fetched::Skip,
        Ok(false) => {}
        Err(e) => return Fetched::Data(Err(e.into())),
    }
    let retain = es
        .spec
        .target
        .as_ref()
        .and_then(|t| t.deletion_policy)
        .is_none_or(|d| d == esr_api::v1::DeletionPolicy::Retain);
    let default = es.spec.secret_store_ref.as_ref();
    let mut clients = Clients {
        env,
        namespace: namespace.clone(),
        clients: HashMap::new(),
    };

    // dataFrom[]
    let mut data_from = Vec::new();
    for (index, df) in es.spec.data_from.iter().flatten().enumerate() {
        let sref = store_ref_of(default, df.source_ref.as_ref());
        if df
            .source_ref
            .as_ref()
            .and_then(|s| s.generator_ref.as_ref())
            .is_some()
            && df.extract.is_none()
            && df.find.is_none()
        {
            // Generator: Generate → rewrite → ValidateKeys (no conversion, no decoding).
            let result = match df
                .source_ref
                .as_ref()
                .and_then(|s| s.generator_ref.as_ref())
            {
                Some(g) => match generate(
                    env.generators,
                    g,
                    &namespace,
                    &es_consumer(&namespace, &es.name_any(), index),
                )
                .await
                {
                    Ok(m) => {
                        let ops = rewrites(df.rewrite.as_ref());
                        env.transforms
                            .run(has_transform(&ops), move |t| {
                                rewrite_map(&ops, t, m)
                                    .map_err(SyncError::Rewrite)
                                    .and_then(|m| validate_keys(m).map_err(SyncError::InvalidKeys))
                            })
                            .await
                            .map_or_else(EntryResult::Err, EntryResult::Ok)
                    }
                    Err(e) => EntryResult::Err(e.into()),
                },
                None => EntryResult::Err(SyncError::MissingGeneratorRef),
            };
            data_from.push(DataFromResult {
                kind: DataFromKind::Generator,
                result,
            });
            continue;
        }
        let (kind, res) = if let Some(ex) = &df.extract {
            let opts = DataFromOptions {
                rewrite: rewrites(df.rewrite.as_ref()),
                conversion: ex.conversion_strategy.unwrap_or_default(),
                decoding: ex.decoding_strategy.unwrap_or_default(),
                null_bytes: ex.null_byte_policy.unwrap_or_default(),
            };
            let r = match clients.get(&sref).await {
                Err(e) => EntryResult::Err(e),
                Ok((_, c)) => match entry(c.get_secret_map(&secret_ref(ex)).await) {
                    EntryResult::Ok(m) => process_off_workers(env.transforms, opts, m).await,
                    other => other,
                },
            };
            (DataFromKind::Extract, r)
        } else if let Some(find) = &df.find {
            let opts = DataFromOptions {
                rewrite: rewrites(df.rewrite.as_ref()),
                conversion: find.conversion_strategy.unwrap_or_default(),
                decoding: find.decoding_strategy.unwrap_or_default(),
                null_bytes: find.null_byte_policy.unwrap_or_default(),
            };
            let req = FindRequest {
                path: find.path.clone().filter(|p| !p.is_empty()),
                name: find
                    .name
                    .as_ref()
                    .and_then(|n| n.regexp.clone())
                    .map(|regexp| FindName { regexp }),
                tags: find.tags.clone(),
                conversion_strategy: find.conversion_strategy.unwrap_or_default(),
            };
            let r = match clients.get(&sref).await {
                Err(e) => EntryResult::Err(e),
                Ok((_, c)) => match c.get_all_secrets(&req).await {
                    Ok(m) => process_off_workers(env.transforms, opts, m).await,
                    Err(e) if e.is_not_found() => EntryResult::NotFound(SyncError::FindAll(e)),
                    Err(e) => EntryResult::Err(SyncError::FindAll(e)),
                },
            };
            (DataFromKind::Find, r)
        } else {
            continue;
        };
        data_from.push(DataFromResult { kind, result: res });
    }

    // data[]: resolve clients, then one batched fetch of the distinct refs per store.
    let entries: Vec<_> = es.spec.data.iter().flatten().collect();
    let mut per_entry: Vec<Result<(String, SecretRef), SyncError>> =
        Vec::with_capacity(entries.len());
    let mut batches: BTreeMap<String, (Arc<dyn SecretsClient>, Vec<SecretRef>)> = BTreeMap::new();
    for d in &entries {
        let sref = store_ref_of(default, d.source_ref.as_deref());
        match clients.get(&sref).await {
            Err(e) => per_entry.push(Err(e)),
            Ok((id, client)) => {
                let r = secret_ref(&d.remote_ref);
                let batch = batches
                    .entry(id.clone())
                    .or_insert_with(|| (client, Vec::new()));
                if !batch.1.contains(&r) {
                    batch.1.push(r.clone());
                }
                per_entry.push(Ok((id, r)));
            }
        }
    }
    let mut results: HashMap<(String, SecretRef), Result<Vec<u8>, ProviderError>> = HashMap::new();
    for (id, (client, refs)) in batches {
        let values = client.get_secrets(&refs).await;
        for (r, v) in refs.into_iter().zip(values) {
            results.insert((id.clone(), r), v);
        }
    }
    let mut data = Vec::with_capacity(entries.len());
    for (d, pe) in entries.iter().zip(per_entry) {
        let result = match pe {
            Err(e) => EntryResult::Err(e),
            Ok(k) => match results.get(&k).cloned() {
                None => EntryResult::Err(SyncError::MissingResult),
                Some(r) => match entry(r) {
                    EntryResult::Ok(v) => match process_data_value(
                        &d.secret_key,
                        d.remote_ref.decoding_strategy.unwrap_or_default(),
                        d.remote_ref.null_byte_policy.unwrap_or_default(),
                        v,
                    ) {
                        Ok(v) => EntryResult::Ok(v),
                        Err(e) => EntryResult::Err(e),
                    },
                    other => other,
                },
            },
        };
        data.push(DataResult {
            secret_key: d.secret_key.clone(),
            remote_key: d.remote_ref.key.clone(),
            result,
        });
    }
    Fetched::Data(assemble(data_from, data, retain))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::externalsecret::template::{EsoTemplates, RenderBounds};
    use async_trait::async_trait;
    use esr_provider::{
        Capabilities, Provider, StaticKubeAccess, StaticStoreLookup, StoreInfo, StoreKind,
        ValidationResult,
    };
    use std::sync::Mutex;
    use std::time::Duration;

    #[derive(Default)]
    struct Counting {
        calls: Mutex<Vec<String>>,
    }

    struct P(Arc<Counting>);
    struct C(Arc<Counting>);

    #[async_trait]
    impl Provider for P {
        fn name(&self) -> &'static str {
            "test"
        }
        fn metric_provider(&self) -> &'static str {
            "Test"
        }
        fn capabilities(&self, _s: &StoreInfo) -> Capabilities {
            Capabilities::ReadOnly
        }
        fn validate_store(&self, _s: &StoreInfo) -> esr_provider::Result<Vec<String>> {
            Ok(vec![])
        }
        async fn new_client(
            &self,
            _ctx: &ClientContext<'_>,
        ) -> esr_provider::Result<Arc<dyn SecretsClient>> {
            self.0.calls.lock().unwrap().push("new_client".into());
            Ok(Arc::new(C(self.0.clone())))
        }
    }

    #[async_trait]
    impl SecretsClient for C {
        async fn get_secret(&self, r: &SecretRef) -> esr_provider::Result<Vec<u8>> {
            self.0.calls.lock().unwrap().push(format!("get:{}", r.key));
            match r.key.as_str() {
                "missing" => Err(ProviderError::not_found()),
                "boom" => Err(ProviderError::transient("backend unavailable")),
                k => Ok(format!("v-{k}").into_bytes()),
            }
        }
        async fn get_secret_map(
            &self,
            r: &SecretRef,
        ) -> esr_provider::Result<BTreeMap<String, Vec<u8>>> {
            self.0.calls.lock().unwrap().push(format!("map:{}", r.key));
            Ok(BTreeMap::from([
                ("a/b".to_string(), b"1".to_vec()),
                ("shared".to_string(), b"map".to_vec()),
            ]))
        }
        async fn get_all_secrets(
            &self,
            _f: &FindRequest,
        ) -> esr_provider::Result<BTreeMap<String, Vec<u8>>> {
            Ok(BTreeMap::from([("found".to_string(), b"f".to_vec())]))
        }
        async fn validate(&self) -> ValidationResult {
            ValidationResult::Ready
        }
    }

    struct Ident;
    impl KeyTransformer for Ident {
        fn transform_key(
            &self,
            _t: &str,
            key: &str,
        ) -> Result<String, crate::externalsecret::pipeline::PipelineError> {
            Ok(key.to_string())
        }
    }

    fn es(yaml: &str) -> ExternalSecret {
        yaml_serde::from_str(yaml).unwrap()
    }

    async fn run(e: &ExternalSecret, ready: bool) -> (Fetched, Vec<String>) {
        run_with(e, ready, Transforms::Inline(&Ident)).await
    }

    async fn run_with(
        e: &ExternalSecret,
        ready: bool,
        transforms: Transforms<'_>,
    ) -> (Fetched, Vec<String>) {
        let counting = Arc::new(Counting::default());
        let registry = ProviderRegistry::new().with(Arc::new(P(counting.clone())));
        let mut lookup = StaticStoreLookup::new();
        lookup.add_store(
            StoreInfo::new(
                StoreKind::SecretStore,
                "s",
                Some("app".into()),
                serde_json::json!({"provider": {"test": {}}}),
            )
            .with_ready(ready),
        );
        lookup.add_store(
            StoreInfo::new(
                StoreKind::SecretStore,
                "other-class",
                Some("app".into()),
                serde_json::json!({"controller": "dev", "provider": {"test": {}}}),
            )
            .with_ready(true),
        );
        let env = FetchEnv {
            lookup: &lookup,
            registry: &registry,
            kube: Arc::new(StaticKubeAccess::new()),
            recorder: esr_provider::metrics::noop_recorder(),
            resolve: ResolveOptions::default(),
            transforms,
            gate: None,
            generators: None,
        };
        let out = fetch(&env, e).await;
        let calls = counting.calls.lock().unwrap().clone();
        (out, calls)
    }

    #[tokio::test]
    async fn distinct_remotes_fetched_once_and_merged_in_order() {
        let e = es(r#"
apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {name: x, namespace: app}
spec:
  secretStoreRef: {name: s, kind: SecretStore}
  dataFrom:
    - extract: {key: cfg}
    - find: {name: {regexp: ".*"}}
  data:
    - {secretKey: shared, remoteRef: {key: db}}
    - {secretKey: again, remoteRef: {key: db}}
    - {secretKey: other, remoteRef: {key: api}}
"#);
        let (out, calls) = run(&e, true).await;
        let Fetched::Data(Ok(a)) = out else {
            panic!("{out:?}")
        };
        assert_eq!(
            calls.iter().filter(|c| *c == "new_client").count(),
            1,
            "{calls:?}"
        );
        assert_eq!(
            calls.iter().filter(|c| *c == "get:db").count(),
            1,
            "{calls:?}"
        );
        assert_eq!(a.data["a_b"], b"1", "ConvertKeys applied without rewrite");
        assert_eq!(a.data["found"], b"f");
        assert_eq!(a.data["shared"], b"v-db", "data[] overrides dataFrom");
        assert_eq!(a.data["again"], b"v-db");
        assert_eq!(a.data["other"], b"v-api");
    }

    #[tokio::test]
    async fn errors_are_wrapped_and_not_found_follows_deletion_policy() {
        let retain = es(r#"
apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {name: x, namespace: app}
spec:
  secretStoreRef: {name: s}
  data: [{secretKey: k, remoteRef: {key: missing}}]
"#);
        let (out, _) = run(&retain, true).await;
        let Fetched::Data(Err(e)) = out else {
            panic!("{out:?}")
        };
        assert_eq!(
            e.to_string(),
            "error processing spec.data[0] (key: missing), err: Secret does not exist"
        );
        assert_eq!(e.metric_label(), "not_found");
        let delete = es(r#"
apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {name: x, namespace: app}
spec:
  secretStoreRef: {name: s}
  target: {deletionPolicy: Delete}
  data: [{secretKey: k, remoteRef: {key: missing}}, {secretKey: j, remoteRef: {key: ok}}]
"#);
        let (out, _) = run(&delete, true).await;
        let Fetched::Data(Ok(a)) = out else {
            panic!("{out:?}")
        };
        assert_eq!(a.data.len(), 1);
        assert_eq!(
            a.missing[0].message,
            "secret does not exist at provider using spec.dataFrom[0] (key=missing)"
        );
        let boom = es(r#"
apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {name: x, namespace: app}
spec:
  secretStoreRef: {name: s}
  data: [{secretKey: k, remoteRef: {key: boom}}]
"#);
        let (out, _) = run(&boom, true).await;
        let Fetched::Data(Err(e)) = out else {
            panic!("{out:?}")
        };
        assert_eq!(
            e.to_string(),
            "error processing spec.data[0] (key: boom), err: backend unavailable"
        );
        assert_eq!(e.metric_label(), "transient");
    }

    #[tokio::test]
    async fn store_problems() {
        let e = es(r#"
apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {name: x, namespace: app}
spec:
  secretStoreRef: {name: s}
  data: [{secretKey: k, remoteRef: {key: a}}]
"#);
        let (out, _) = run(&e, false).await;
        let Fetched::Data(Err(msg)) = out else {
            panic!("{out:?}")
        };
        assert_eq!(
            msg.to_string(),
            "error processing spec.data[0] (key: a), err: SecretStore \"s\" is not ready"
        );
        let missing = es(r#"
apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {name: x, namespace: app}
spec:
  secretStoreRef: {name: nope}
  dataFrom: [{extract: {key: a}}]
"#);
        let (out, _) = run(&missing, true).await;
        let Fetched::Data(Err(msg)) = out else {
            panic!("{out:?}")
        };
        assert_eq!(
            msg.to_string(),
            "error processing spec.dataFrom[0].extract, err: could not get SecretStore \"nope\", secretstores.external-secrets.io \"nope\" not found"
        );
        let other = es(r#"
apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {name: x, namespace: app}
spec:
  secretStoreRef: {name: other-class}
  data: [{secretKey: k, remoteRef: {key: a}}]
"#);
        let (out, calls) = run(&other, true).await;
        assert!(matches!(out, Fetched::Skip));
        assert!(calls.is_empty());
    }

    fn transformed(template: &str) -> ExternalSecret {
        let mut e = es(r#"
apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {name: x, namespace: app}
spec:
  secretStoreRef: {name: s, kind: SecretStore}
  dataFrom:
    - extract: {key: cfg}
      rewrite: [{transform: {template: "placeholder"}}]
"#);
        if let Some(t) = e
            .spec
            .data_from
            .as_mut()
            .and_then(|d| d[0].rewrite.as_mut())
            .and_then(|r| r[0].transform.as_mut())
        {
            t.template = template.to_string();
        }
        e
    }

    /// A rewrite `transform` renders on the render pool in the controller.
    #[tokio::test(flavor = "current_thread")]
    async fn a_transform_renders_on_the_pool() {
        let pool = RenderPool::new(1);
        let engine: Arc<dyn TemplateEngine> = Arc::new(EsoTemplates::new());
        let e = transformed(r#"{{ .value | upper | replace "/" "_" }}"#);
        let (out, _) = run_with(&e, true, Transforms::Pool(&pool, &engine)).await;
        let Fetched::Data(Ok(a)) = out else {
            panic!("{out:?}")
        };
        assert_eq!(
            a.data.keys().map(String::as_str).collect::<Vec<_>>(),
            ["A_B", "SHARED"]
        );
    }

    /// A poison transform holds a blocking thread of the pool, not the async worker: on a
    /// single-threaded runtime (like one tokio worker) other tasks keep running, and closing the
    /// pool ends the fetch with a value-free error.
    #[tokio::test(flavor = "current_thread")]
    async fn a_poison_transform_holds_no_worker() {
        let pool = RenderPool::new(1);
        // No deadline and a cancel flag nobody sets: only closing the pool ends the wait.
        let engine = Arc::new(EsoTemplates::with_bounds(RenderBounds {
            timeout: Duration::from_secs(24 * 3600),
            ..RenderBounds::default()
        }));
        let fetching = tokio::spawn({
            let pool = pool.clone();
            let engine: Arc<dyn TemplateEngine> = engine.clone();
            async move {
                let e = transformed(
                    "{{ range until 1000000 }}{{ $x := until 1000000 }}{{ end }}{{ .value }}",
                );
                run_with(&e, true, Transforms::Pool(&pool, &engine)).await.0
            }
        });
        for _ in 0..50 {
            tokio::task::yield_now().await;
        }
        let canary = tokio::spawn(async { (0..1000u32).sum::<u32>() });
        assert_eq!(canary.await.unwrap(), 499_500);
        assert!(!fetching.is_finished());
        pool.close();
        let out = fetching.await.unwrap();
        let Fetched::Data(Err(err)) = out else {
            panic!("{out:?}")
        };
        assert_eq!(
            err.to_string(),
            "error processing spec.dataFrom[0].extract, err: error applying rewrite to keys: transform \
             failed with could not execute template: the controller is stopping"
        );
        engine.cancel_all();
    }
}
