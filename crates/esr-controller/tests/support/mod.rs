//! Shared setup of the in-process reconcile tests: an esr-testkit API server with esr's CRDs, the
//! requests a reconcile made (verb and resource, in order), reflector caches filled from the
//! server, and a controller context whose only provider is [`StaticProvider`], a test double of
//! the `fake` store kind (the controller never links a provider crate, not even in its tests).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use esr_api::providers::fake::FakeProvider as FakeSpec;

use esr_controller::common::generators::Generators;
use esr_controller::externalsecret::reconcile::Context;
use esr_controller::externalsecret::template::EsoTemplates;
use esr_controller::metrics::Metrics;
use esr_controller::runtime::{Clients, Config, Runtime};
use esr_provider::{
    Capabilities, ClientContext, FindRequest, KubeClientAccess, Maintenance, Provider,
    ProviderError, ProviderRegistry, PushRequest, SecretRef, SecretsClient, StoreInfo,
    ValidationResult,
};
use esr_testkit::TestServer;
use kube::api::ListParams;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::Event;
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;

/// A server with the CRDs of `crds/` applied.
pub async fn server() -> TestServer {
    let server = TestServer::start().await.expect("testkit starts");
    let crds = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../crds");
    server.apply_crds_from_dir(&crds).expect("CRDs apply");
    server
}

/// Creates an object directly in the server's store (not a request of the code under test).
pub fn apply(server: &TestServer, doc: serde_json::Value) -> serde_json::Value {
    server.apply_object(doc).expect("object applies")
}

/// The requests made since the last [`clear`], as `verb resource[/subresource] [namespace/]name`.
/// Event writes come last (see [`events_last`]).
pub fn requests(server: &TestServer) -> Vec<String> {
    let all = server
        .audit()
        .entries()
        .into_iter()
        .map(|e| {
            let res = if e.subresource.is_empty() {
                e.resource
            } else {
                format!("{}/{}", e.resource, e.subresource)
            };
            let at = if e.namespace.is_empty() {
                e.name
            } else {
                format!("{}/{}", e.namespace, e.name)
            };
            format!("{} {res} {at}", e.verb)
        })
        .collect();
    events_last(all)
}

/// Requests with the Event writes moved to the end, in their own order. Events are written in
/// the background (`common::events::EventSink`), so where they fall among a reconcile's own
/// requests is not fixed; a test flushes the sink before it looks.
pub fn events_last(requests: Vec<String>) -> Vec<String> {
    let (mut rest, events): (Vec<_>, Vec<_>) = requests
        .into_iter()
        .partition(|r| r.split(' ').nth(1).is_none_or(|res| res != "events"));
    rest.extend(events);
    rest
}

/// Forgets the requests made so far.
pub fn clear(server: &TestServer) {
    server.audit().clear();
}

/// A reflector cache holding every object of kind `K` the server has now.
pub async fn cache<K>(client: &Client) -> Store<K>
where
    K: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let (reader, mut writer) = reflector::store();
    let list = Api::<K>::all(client.clone())
        .list(&ListParams::default())
        .await
        .expect("list");
    writer.apply_watcher_event(&Event::Init);
    for o in list.items {
        writer.apply_watcher_event(&Event::InitApply(o));
    }
    writer.apply_watcher_event(&Event::InitDone);
    reader
}

/// The provider double of the tests: stores with `spec.provider.fake` serve the `key`/`value`
/// pairs of their `data` (versions and properties are not looked at), and take pushed values into
/// memory. It reports itself read-write and not maintained, as the `fake` provider does, so the
/// store controller's capability status and maintenance warning are exercised. What the
/// reconcile tests do not call answers `Unsupported`.
#[derive(Debug, Default)]
pub struct StaticProvider {
    pushed: Arc<Mutex<BTreeMap<String, Vec<u8>>>>,
}

impl StaticProvider {
    /// The values pushed so far, by remote key.
    pub fn pushed(&self) -> BTreeMap<String, Vec<u8>> {
        self.pushed.lock().unwrap().clone()
    }
}

#[async_trait]
impl Provider for StaticProvider {
    fn name(&self) -> &'static str {
        "fake"
    }

    fn metric_provider(&self) -> &'static str {
        "Fake"
    }

    fn capabilities(&self, _store: &StoreInfo) -> Capabilities {
        Capabilities::ReadWrite
    }

    fn maintenance(&self) -> Maintenance {
        Maintenance::NotMaintained
    }

    fn validate_store(&self, _store: &StoreInfo) -> esr_provider::Result<Vec<String>> {
        Ok(Vec::new())
    }

    async fn new_client(
        &self,
        ctx: &ClientContext<'_>,
    ) -> esr_provider::Result<Arc<dyn SecretsClient>> {
        let spec: FakeSpec = ctx.store.provider_spec("fake")?;
        let data = spec
            .data
            .into_iter()
            .map(|d| (d.key, d.value.into_bytes()))
            .collect();
        Ok(Arc::new(StaticClient {
            data,
            pushed: self.pushed.clone(),
        }))
    }
}

/// A client of [`StaticProvider`] over one store's `data`.
struct StaticClient {
    data: BTreeMap<String, Vec<u8>>,
    pushed: Arc<Mutex<BTreeMap<String, Vec<u8>>>>,
}

#[async_trait]
impl SecretsClient for StaticClient {
    async fn get_secret(&self, r: &SecretRef) -> esr_provider::Result<Vec<u8>> {
        self.data
            .get(&r.key)
            .cloned()
            .ok_or_else(|| ProviderError::not_found().with_key(r.key.clone()))
    }

    async fn get_secret_map(
        &self,
        _r: &SecretRef,
    ) -> esr_provider::Result<BTreeMap<String, Vec<u8>>> {
        Err(ProviderError::unsupported("not in the test double"))
    }

    async fn get_all_secrets(
        &self,
        _f: &FindRequest,
    ) -> esr_provider::Result<BTreeMap<String, Vec<u8>>> {
        Err(ProviderError::unsupported("not in the test double"))
    }

    async fn push_secret(&self, req: &PushRequest) -> esr_provider::Result<()> {
        self.pushed
            .lock()
            .unwrap()
            .insert(req.remote_key().to_string(), req.value.clone());
        Ok(())
    }

    async fn validate(&self) -> ValidationResult {
        ValidationResult::Ready
    }
}

/// A controller context over the server, with `provider` as its only provider.
pub fn context_with(
    client: &Client,
    config: Config,
    provider: Arc<StaticProvider>,
) -> Arc<Context> {
    let registry = ProviderRegistry::new().with(provider);
    Runtime::new(
        Clients::shared(client.clone()),
        config,
        registry,
        Arc::new(KubeClientAccess::new(client.clone())),
        Metrics::new(),
        Arc::new(EsoTemplates::new()),
        Generators::new(client.clone()),
    )
    .ctx
}

/// A controller context over the server, with a fresh [`StaticProvider`] only.
pub fn context(client: &Client) -> Arc<Context> {
    context_with(client, Config::default(), Arc::default())
}

/// Fetches an object as the reconciler gets it from its watch (`namespace` `None`: cluster-scoped).
pub async fn get<K>(client: &Client, namespace: Option<&str>, name: &str) -> Arc<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    let list = Api::<K>::all(client.clone())
        .list(&ListParams::default())
        .await
        .expect("list");
    let found = list
        .items
        .into_iter()
        .find(|o| {
            o.meta().namespace.as_deref() == namespace && o.meta().name.as_deref() == Some(name)
        })
        .expect("object exists");
    Arc::new(found)
}

/// The events recorded in `namespace`, as `type reason: note`, oldest first.
pub async fn events(client: &Client, namespace: &str) -> Vec<String> {
    let list = Api::<k8s_openapi::api::events::v1::Event>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await
        .expect("list events");
    let mut evs: Vec<_> = list.items;
    // Creation order: the server's resourceVersions increase.
    evs.sort_by_key(|e| {
        e.metadata
            .resource_version
            .as_deref()
            .and_then(|v| v.parse::<u64>().ok())
    });
    evs.into_iter()
        .map(|e| {
            format!(
                "{} {}: {}",
                e.type_.unwrap_or_default(),
                e.reason.unwrap_or_default(),
                e.note.unwrap_or_default()
            )
        })
        .collect()
}
