//! Namespaces for the fan-out controllers: which namespaces a parent selects ([`Selection`],
//! [`select`]), what the plan knows of one ([`NsView`]), and the one Namespace watch and cache
//! both cluster controllers share ([`NamespaceFeed`]).

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use esr_api::v1::ClusterExternalSecretSpec;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::runtime::reflector::{self, ReflectHandle, Store};

use crate::common::observe::Seen;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use regex::Regex;
use tracing::debug;

/// Why a namespace selection cannot be evaluated.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SelectionError {
    /// A `namespaceRegexes` entry is not a valid regular expression.
    #[error("invalid namespaceRegexes entry {entry:?}: {source}")]
    InvalidRegex {
        /// The entry.
        entry: String,
        /// The parse error.
        source: regex::Error,
    },
    /// A label selector is invalid (the selector's own message).
    #[error("{0}")]
    InvalidSelector(String),
}

/// The namespace selection of a ClusterExternalSecret: `namespaceSelectors`, the deprecated
/// `namespaceSelector` and `namespaces`, and the esr-only `namespaceRegexes`, all ORed.
#[derive(Debug, Clone)]
pub struct Selection {
    selectors: Vec<LabelSelector>,
    names: BTreeSet<String>,
    regexes: Vec<Regex>,
}

impl Selection {
    /// A selection made of label selectors only (ORed), as ClusterPushSecret's
    /// `namespaceSelectors`.
    pub fn from_selectors(selectors: Vec<LabelSelector>) -> Selection {
        Selection {
            selectors,
            names: BTreeSet::new(),
            regexes: Vec::new(),
        }
    }

    /// Builds the selection; an invalid regex is an error.
    pub fn from_spec(spec: &ClusterExternalSecretSpec) -> Result<Selection, SelectionError> {
        let mut selectors: Vec<LabelSelector> =
            spec.namespace_selectors.clone().unwrap_or_default();
        if let Some(s) = &spec.namespace_selector {
            selectors.push(s.clone());
        }
        let names = spec.namespaces.iter().flatten().cloned().collect();
        let regexes = spec
            .namespace_regexes
            .iter()
            .flatten()
            .map(|r| {
                Regex::new(r).map_err(|source| SelectionError::InvalidRegex {
                    entry: r.clone(),
                    source,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Selection {
            selectors,
            names,
            regexes,
        })
    }

    /// Whether a namespace (name and labels) is selected; an invalid label selector is an error.
    pub fn matches(
        &self,
        name: &str,
        labels: &BTreeMap<String, String>,
    ) -> Result<bool, SelectionError> {
        if self.names.contains(name) || self.regexes.iter().any(|r| r.is_match(name)) {
            return Ok(true);
        }
        for s in &self.selectors {
            if esr_provider::store::label_selector_matches(s, labels)
                .map_err(SelectionError::InvalidSelector)?
            {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

/// What the plan needs to know about a namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NsView {
    /// Name.
    pub name: String,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Being deleted.
    pub terminating: bool,
    /// Carries this CES's namespace finalizer.
    pub has_finalizer: bool,
}

impl NsView {
    /// The view of a namespace; `finalizer` is the parent's namespace finalizer, if it puts one
    /// (ClusterExternalSecret does, ClusterPushSecret does not).
    pub fn of(ns: &Namespace, finalizer: Option<&str>) -> NsView {
        NsView {
            name: ns.name_any(),
            labels: ns.labels().clone(),
            terminating: ns.metadata.deletion_timestamp.is_some()
                || ns.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Terminating"),
            has_finalizer: finalizer.is_some_and(|f| ns.finalizers().iter().any(|x| x == f)),
        }
    }

    /// A live namespace without finalizer (the plan tests' namespaces).
    #[cfg(test)]
    pub(crate) fn live(name: &str, labels: &[(&str, &str)]) -> NsView {
        NsView {
            name: name.to_string(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            terminating: false,
            has_finalizer: false,
        }
    }
}

/// Which namespaces are selected (sorted); terminating namespaces are left out.
pub fn select(sel: &Selection, namespaces: &[NsView]) -> Result<Vec<String>, SelectionError> {
    let mut out = Vec::new();
    for ns in namespaces {
        if !ns.terminating && sel.matches(&ns.name, &ns.labels)? {
            out.push(ns.name.clone());
        }
    }
    out.sort();
    Ok(out)
}

pub(crate) fn ns_hash(ns: &Namespace) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    ns.labels().hash(&mut h);
    ns.metadata.deletion_timestamp.is_some().hash(&mut h);
    ns.status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .hash(&mut h);
    h.finish()
}

/// Events each subscriber of the shared Namespace watch may lag behind before the watch waits.
const NS_FEED_BUFFER: usize = 1024;

/// One Namespace watch and reflector cache shared by the ClusterExternalSecret and
/// ClusterPushSecret controllers. Subscribe (once per controller) before [`NamespaceFeed::run`];
/// every subscription must be polled, since the watch waits for the slowest subscriber.
pub struct NamespaceFeed {
    reader: Store<Namespace>,
    writer: reflector::store::Writer<Namespace>,
}

impl Default for NamespaceFeed {
    fn default() -> Self {
        Self::new()
    }
}

impl NamespaceFeed {
    /// An empty cache; nothing is watched until [`NamespaceFeed::run`].
    pub fn new() -> Self {
        let (reader, writer) = reflector::store_shared(NS_FEED_BUFFER);
        NamespaceFeed { reader, writer }
    }

    /// The namespace cache.
    pub fn store(&self) -> Store<Namespace> {
        self.reader.clone()
    }

    /// A stream of namespaces as they are listed, created or changed (deletions are not
    /// reported: a namespace is seen terminating first), with the cache as its reader.
    pub fn subscribe(&self) -> Option<ReflectHandle<Namespace>> {
        self.writer.subscribe()
    }

    /// Watches Namespaces into the cache and the subscriptions until `shutdown` resolves.
    pub async fn run(
        self,
        client: Client,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) {
        let api: Api<Namespace> = Api::all(client);
        let feed = reflector::reflector(self.writer, watcher(api, watcher::Config::default()))
            .default_backoff()
            .for_each(|ev| async move {
                if let Err(e) = ev {
                    debug!(error = %e, "Namespace watch");
                }
            });
        tokio::select! {
            _ = feed => {}
            _ = shutdown => {}
        }
    }
}

/// Namespaces from a shared subscription, with unchanged ones (same labels, same terminating
/// state) dropped.
pub(crate) fn namespace_changes(
    handle: ReflectHandle<Namespace>,
) -> impl futures::Stream<Item = Arc<Namespace>> + Send {
    let mut seen = Seen::default();
    handle.filter_map(move |ns| {
        let changed = seen.changed(&ns.metadata, ns_hash(&ns));
        async move { changed.then_some(ns) }
    })
}
