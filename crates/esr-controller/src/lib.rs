//! esr's reconcilers: one folder per kind, each a pure planning core and a thin IO shell.
//!
//! One ExternalSecret, from watch to Secret and status (`docs/architecture.md` has the longer tour):
//!
//! ```text
//! runtime            watches ExternalSecrets, managed Secrets and stores; calls reconcile_es
//!   │
//! externalsecret/
//!   reconcile        the executor: reads the target Secret, then runs plan's steps in order
//!   ├─ plan::admit / plan::decide_on  finalizer, class and generic-target gates; refresh due?
//!   ├─ fetch         resolves stores, builds provider clients, fetches every remote once
//!   │   └─ pipeline  converts, validates, decodes and rewrites keys; assembles data[]/dataFrom[]
//!   ├─ template      loads templateFrom sources; renders the template (esr-template)
//!   └─ plan::plan    desired Secret, write, status, events, requeue → plan::Steps
//!        └─ reconcile executes: events → orphan deletes → Secret write → event → rollout → status
//! ```
//!
//! Failures are [`externalsecret::error::SyncError`]s carrying the provider's error kind: it
//! picks the `reason` label of `externalsecret_sync_calls_error` ([`metrics`]) and, for a
//! throttled backend, the requeue delay. The other kinds (`pushsecret/`,
//! `clusterexternalsecret/`, `clusterpushsecret/`, `secretstore/`) follow the same split; shared
//! pieces (refresh timing, generators, rollout, rate limits, the fan-out runner, the Namespace
//! feed, metric hooks) live in `common/`.
pub mod clusterexternalsecret;
pub mod clusterpushsecret;
pub mod common;
pub mod externalsecret;
pub mod leader;
pub mod metrics;
pub mod pushsecret;
pub mod runtime;
pub mod secretstore;
pub mod server;
