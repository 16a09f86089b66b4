//! Shared setup of the in-process reconcile tests: an esr-testkit API server with esr's CRDs, the
//! requests a reconcile made (verb and resource, in order), reflector caches filled from the
//! server, and a controller context whose only provider is `fake`.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::sync::Arc;

use esr_controller::common::generators::Generators;
use esr_controller::externalsecret::reconcile::Context;
use esr_controller::externalsecret::template::EsoTemplates;
use esr_controller::metrics::Metrics;
use esr_controller::runtime::{Config, Runtime};
use esr_provider::{KubeClientAccess, ProviderRegistry};
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

/// A controller context over the server, with the `fake` provider only.
pub fn context(client: &Client) -> Arc<Context> {
    let registry =
        ProviderRegistry::new().with(Arc::new(esr_provider_fake::FakeProvider::isolated()));
    Runtime::new(
        client.clone(),
        Config::default(),
        registry,
        Arc::new(KubeClientAccess::new(client.clone())),
        Metrics::new(),
        Arc::new(EsoTemplates::new()),
        Generators::new(client.clone()),
    )
    .ctx
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
