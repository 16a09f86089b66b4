//! Fault injection and the audit log of API calls.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::store::Store;

/// A rule: fail the next `count` requests matching verb/resource with `status`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FailRule {
    /// Verb (`get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`); None = any.
    #[serde(default)]
    pub verb: Option<String>,
    /// Resource (plural, e.g. `secrets`, or `secrets/status`); None = any.
    #[serde(default)]
    pub resource: Option<String>,
    /// How many requests to fail.
    pub count: u32,
    /// HTTP status code.
    pub status: u16,
    /// Optional message.
    #[serde(default)]
    pub message: Option<String>,
}

#[derive(Default)]
struct FaultState {
    latency: Duration,
    rules: Vec<FailRule>,
    watch_close: CancellationToken,
}

/// Fault injection handle (cheap to clone).
#[derive(Clone)]
pub struct Faults {
    state: Arc<Mutex<FaultState>>,
    store: Arc<Store>,
}

impl std::fmt::Debug for Faults {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Faults").finish_non_exhaustive()
    }
}

impl Faults {
    pub(crate) fn new(store: Arc<Store>) -> Self {
        Self {
            state: Arc::new(Mutex::new(FaultState::default())),
            store,
        }
    }

    fn lock(&self) -> MutexGuard<'_, FaultState> {
        match self.state.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Add latency to every API request (not to /testkit endpoints).
    pub fn set_latency(&self, d: Duration) {
        self.lock().latency = d;
    }

    /// Fail the next `count` requests matching `verb` and `resource` (None = any) with `status`.
    pub fn fail_next(&self, verb: Option<&str>, resource: Option<&str>, count: u32, status: u16) {
        self.add_rule(FailRule {
            verb: verb.map(str::to_string),
            resource: resource.map(str::to_string),
            count,
            status,
            message: None,
        });
    }

    /// Add a rule.
    pub fn add_rule(&self, rule: FailRule) {
        self.lock().rules.push(rule);
    }

    /// Close all open watch streams (clients see the stream end and re-watch).
    pub fn close_watches(&self) {
        let mut g = self.lock();
        g.watch_close.cancel();
        g.watch_close = CancellationToken::new();
    }

    /// Forget the event history: watches resuming from any earlier resourceVersion get 410 Gone.
    pub fn expire_resource_versions(&self) {
        self.store.expire_history();
    }

    /// Remove all rules and latency.
    pub fn clear(&self) {
        let mut g = self.lock();
        g.latency = Duration::ZERO;
        g.rules.clear();
    }

    /// Pending rules.
    pub fn rules(&self) -> Vec<FailRule> {
        self.lock().rules.clone()
    }

    pub(crate) fn latency(&self) -> Duration {
        self.lock().latency
    }

    pub(crate) fn watch_token(&self) -> CancellationToken {
        self.lock().watch_close.clone()
    }

    /// Consume a matching rule; returns (status, message).
    pub(crate) fn take(&self, verb: &str, resource: &str) -> Option<(u16, Option<String>)> {
        let mut g = self.lock();
        let pos = g.rules.iter().position(|r| {
            r.count > 0
                && r.verb.as_deref().is_none_or(|v| v == verb)
                && r.resource
                    .as_deref()
                    .is_none_or(|x| x == resource || resource.split('/').next() == Some(x))
        })?;
        let r = &mut g.rules[pos];
        r.count -= 1;
        let out = (r.status, r.message.clone());
        if r.count == 0 {
            g.rules.remove(pos);
        }
        Some(out)
    }
}

/// One recorded API call.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct AuditEntry {
    /// Verb (get, list, watch, create, update, patch, delete, deletecollection).
    pub verb: String,
    /// API group ("" for core).
    pub group: String,
    /// Version.
    pub version: String,
    /// Resource (plural).
    pub resource: String,
    /// Subresource ("" if none).
    pub subresource: String,
    /// Namespace ("" if cluster scoped or all namespaces).
    pub namespace: String,
    /// Object name ("" for collections).
    pub name: String,
    /// HTTP status code answered.
    pub code: u16,
    /// The client's User-Agent.
    pub user_agent: String,
    /// The authenticated user (only with RBAC on; "" otherwise).
    #[serde(default)]
    pub user: String,
}

/// The audit log (bounded).
#[derive(Clone, Default)]
pub struct Audit {
    entries: Arc<Mutex<VecDeque<AuditEntry>>>,
}

impl std::fmt::Debug for Audit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Audit").finish_non_exhaustive()
    }
}

const AUDIT_LIMIT: usize = 200_000;

impl Audit {
    fn lock(&self) -> MutexGuard<'_, VecDeque<AuditEntry>> {
        match self.entries.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }
    pub(crate) fn record(&self, e: AuditEntry) {
        let mut g = self.lock();
        if g.len() >= AUDIT_LIMIT {
            g.pop_front();
        }
        g.push_back(e);
    }
    /// All entries so far.
    pub fn entries(&self) -> Vec<AuditEntry> {
        self.lock().iter().cloned().collect()
    }
    /// Forget all entries.
    pub fn clear(&self) {
        self.lock().clear();
    }
}
