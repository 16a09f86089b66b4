//! The PushSecret executor: reads what [`crate::pushsecret::plan`] decides on (stores, sources,
//! template inputs), calls the provider trait for the pushes and deletes it lists, and runs the
//! [`Steps`] it returns, in order.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use chrono::Utc;
use esr_api::v1::ExternalSecretTemplate;
use esr_api::v1alpha1::PushSecret;
use esr_provider::store::{StoreRef, StoreResolution, resolve_store};
use esr_provider::{ClientContext, PushRemoteRef, SecretsClient};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Api, Resource, ResourceExt};
use tracing::{debug, info, warn};

use crate::common::events::{EventSink, EventType, Reporter, kube_error_text};
use crate::externalsecret::reconcile::Context;
use crate::metrics::Observed;
use crate::metrics::controller::watched;
use crate::pushsecret::error::{ClientError, Failures, PushError};
use crate::pushsecret::plan::{
    self, Admission, End, Failure, Missing, OpOutcome, PushOp, REASON_SYNCED, Step, Steps,
    StoreOutcome, StorePush, parse_store_key, status_key,
};
use crate::pushsecret::source::{
    SourceError, load_template_sources, render_template, resolve_sources, resolve_stores,
    select_stores, validate_data_to,
};

/// Errors of a PushSecret reconcile (retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Kubernetes API error.
    #[error("kubernetes API error: {}", kube_error_text(.0))]
    Kube(#[from] kube::Error),
    /// A push failure (recorded in status and events).
    #[error("{0}")]
    Push(#[from] Failure),
}

/// Reconciler state.
pub struct PsContext {
    ctx: Arc<Context>,
    events: EventSink,
    failures: crate::common::refresh::Backoffs<(String, String)>,
}

impl PsContext {
    /// The PushSecret reconciler's state over the controller context (events recorded as the
    /// PushSecret controller).
    pub fn new(ctx: Arc<Context>) -> Self {
        let events = EventSink::new(
            ctx.events_client.clone(),
            Reporter {
                controller: esr_api::consts::EVENT_SOURCE_PUSHSECRET.to_string(),
                instance: ctx.config.instance.clone(),
            },
        );
        PsContext {
            ctx,
            events,
            failures: Default::default(),
        }
    }

    /// Waits until every event published so far was written.
    pub async fn flush_events(&self) {
        self.events.flush().await;
    }
}

/// The PushSecret reconciler. Records `pushsecret_reconcile_duration` and, when the reconcile
/// wrote a Ready condition, `pushsecret_status_condition`.
pub async fn reconcile(ps: Arc<PushSecret>, pctx: Arc<PsContext>) -> Result<Action, Error> {
    let started = Instant::now();
    let name = ps.name_any();
    let ns = ps.namespace().unwrap_or_default();
    let mut ready = None;
    let res = reconcile_inner(&ps, &pctx, &mut ready).await;
    debug!(ps = %name, elapsed = ?started.elapsed(), "reconciled PushSecret");
    if ps.meta().deletion_timestamp.is_some() && res.is_ok() {
        pctx.ctx
            .metrics
            .forget_observed(Observed::PushSecret, &name, &ns);
    } else {
        pctx.ctx
            .metrics
            .observe(Observed::PushSecret, &name, &ns, started.elapsed(), ready);
    }
    if res.is_ok() {
        pctx.failures.reset(&(ns, name));
    }
    res
}

/// One reconcile: each phase reads or calls what the plan needs, then runs the plan's steps.
async fn reconcile_inner(
    ps: &PushSecret,
    pctx: &PsContext,
    ready: &mut Option<bool>,
) -> Result<Action, Error> {
    let mut ex = Executor::new(ps, pctx, ready);
    let (ctx, spec, class) = (&pctx.ctx, &ps.spec, &pctx.ctx.config.controller_class);
    let candidates = resolve_stores(&ctx.client, spec, &ex.ns).await.ok();
    match plan::admit(ps, candidates.as_deref(), class) {
        Admission::Stop(steps) => return ex.run(steps).await,
        Admission::DeleteAll(entries) => {
            let errors = ex.delete_entries(&entries).await;
            return ex.run(plan::deleted(ps, Failures(errors))).await;
        }
        Admission::Proceed(steps) => ex.run_steps(steps).await?,
    }
    let now = Utc::now();
    if let Some(skip) = plan::refresh_skipped(ps, now) {
        return ex.run(skip).await;
    }
    if let Err(e) = validate_data_to(spec) {
        return ex.run(plan::failed(ps, e, now)).await;
    }
    let (client, kube) = (&ctx.client, &*ctx.kube);
    let sources = match resolve_sources(client, kube, &ctx.generators, spec, &ex.ns, &ex.name).await
    {
        Ok(s) => s,
        Err(SourceError::NotFound(n)) => match plan::source_missing(ps, &n, now) {
            Missing::Stop(steps) => return ex.run(steps).await,
            Missing::DeleteAll { entries, message } => {
                let all = ex.delete_entries(&entries).await.is_empty();
                return ex.run(plan::source_deleted(ps, message, all, now)).await;
            }
        },
        Err(SourceError::Failed(e)) => return ex.run(plan::failed(ps, e, now)).await,
    };
    let stores = match resolve_stores(client, spec, &ex.ns).await {
        Ok(c) => select_stores(c, class),
        Err(e) => return ex.run(plan::failed(ps, e, now)).await,
    };
    if let Some(stop) = plan::stores_selected(ps, &stores, now) {
        return ex.run(stop).await;
    }
    let sources = match &spec.template {
        Some(t) => match ex.render(t, sources).await {
            Ok(r) => r,
            Err(e) => return ex.run(plan::failed(ps, e, now)).await,
        },
        None => sources,
    };
    let pushes = plan::push_plan(spec, &stores, &sources);
    let mut outcomes = Vec::with_capacity(pushes.len());
    for p in &pushes {
        outcomes.push(ex.push(p).await);
    }
    let old = plan::synced_of(ps);
    let mut pushed = plan::pushed(&old, pushes, outcomes);
    let stale = plan::stale_after(ps, &old, &pushed);
    let errors = ex.delete_entries(&stale).await;
    plan::stale_deleted(&old, &mut pushed, &stale, errors);
    ex.run(plan::finish(ps, &old, pushed, now)).await
}

/// Runs a PushSecret's IO: provider calls and the plan's steps.
struct Executor<'a> {
    ps: &'a PushSecret,
    pctx: &'a PsContext,
    api: Api<PushSecret>,
    ns: String,
    name: String,
    ready: &'a mut Option<bool>,
}

impl<'a> Executor<'a> {
    fn new(ps: &'a PushSecret, pctx: &'a PsContext, ready: &'a mut Option<bool>) -> Self {
        let ns = ps.namespace().unwrap_or_default();
        Executor {
            ps,
            pctx,
            api: Api::namespaced(pctx.ctx.client.clone(), &ns),
            ns,
            name: ps.name_any(),
            ready,
        }
    }

    /// Runs the steps, then ends as `steps.end` says.
    async fn run(&mut self, steps: Steps) -> Result<Action, Error> {
        self.run_steps(steps.steps).await?;
        Ok(match steps.end {
            End::Await(why) => {
                if !why.is_empty() {
                    debug!(ps = %self.name, namespace = %self.ns, "{why}");
                }
                Action::await_change()
            }
            End::Requeue(after) => Action::requeue(after),
            End::Fail(f) => return Err(Error::Push(f)),
        })
    }

    async fn run_steps(&mut self, steps: Vec<Step>) -> Result<(), kube::Error> {
        for step in steps {
            match step {
                Step::SetFinalizers(f) => {
                    let patch = serde_json::json!({"metadata": {"finalizers": f, "resourceVersion": self.ps.resource_version()}});
                    self.api
                        .patch(&self.name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await?;
                }
                Step::Event {
                    warning,
                    reason,
                    note,
                } => {
                    self.publish(warning, reason, &note);
                    if reason == REASON_SYNCED {
                        info!(ps = %self.name, namespace = %self.ns, "pushed secret");
                    }
                }
                Step::Status(patch) => {
                    self.api
                        .patch_status(&self.name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await?;
                }
                Step::Ready(r) => *self.ready = Some(r),
            }
        }
        Ok(())
    }

    fn publish(&self, warning: bool, reason: &str, note: &str) {
        let type_ = if warning {
            EventType::Warning
        } else {
            EventType::Normal
        };
        self.pctx
            .events
            .publish(self.ps.object_ref(&()), type_, reason, note);
    }

    /// A secrets client for the store `r`; `None` when the store is not this controller's.
    async fn client(&self, r: &StoreRef) -> Result<Option<Arc<dyn SecretsClient>>, ClientError> {
        let ctx = &self.pctx.ctx;
        let opts = esr_provider::ResolveOptions {
            controller_class: ctx.config.controller_class.clone(),
            flood_gate: ctx.config.flood_gate,
        };
        let store = match resolve_store(&ctx.stores, &self.ns, r, &opts).await {
            Ok(StoreResolution::Use(s)) => s,
            Ok(StoreResolution::Skip) => return Ok(None),
            Err(e) => return Err(ClientError::Store(e)),
        };
        let provider = ctx
            .registry
            .for_store(&store)
            .map_err(ClientError::Provider)?;
        let cctx = ClientContext::new(&store, Some(&self.ns), ctx.kube.clone())
            .with_recorder(Arc::new(ctx.metrics.clone()));
        provider
            .new_client(&cctx)
            .await
            .map(Some)
            .map_err(ClientError::Provider)
    }

    /// Loads the `templateFrom` inputs and renders the template over every source.
    async fn render(
        &self,
        t: &ExternalSecretTemplate,
        sources: Vec<Secret>,
    ) -> Result<Vec<Secret>, PushError> {
        let inputs = load_template_sources(&*self.pctx.ctx.kube, &self.ns, t)
            .await
            .map_err(PushError::TemplateFrom)?;
        sources
            .iter()
            .map(|s| render_template(t, s, &inputs).map_err(PushError::Template))
            .collect()
    }

    /// Runs the pushes to one store.
    async fn push(&self, p: &StorePush) -> StoreOutcome {
        let client = match self.client(&p.store).await {
            Ok(Some(c)) => c,
            Ok(None) => return StoreOutcome::Skipped,
            Err(e) => return StoreOutcome::NoClient(e),
        };
        let mut out = Vec::with_capacity(p.ops.len());
        for op in &p.ops {
            let PushOp::Push {
                request,
                only_if_absent,
                ..
            } = op
            else {
                out.push(OpOutcome::Invalid);
                continue;
            };
            if *only_if_absent {
                match client.secret_exists(&request.remote).await {
                    Ok(true) => {
                        out.push(OpOutcome::Existing);
                        continue;
                    }
                    Ok(false) => {}
                    Err(e) => {
                        out.push(OpOutcome::ExistsFailed(e));
                        continue;
                    }
                }
            }
            out.push(match client.push_secret(request).await {
                Ok(()) => OpOutcome::Pushed,
                Err(e) => OpOutcome::Failed(e),
            });
        }
        StoreOutcome::Ran(out)
    }

    /// Deletes pushed entries from their stores (an entry already gone counts as deleted);
    /// returns what could not be deleted.
    async fn delete_entries(&self, entries: &[(String, PushRemoteRef)]) -> Vec<PushError> {
        let mut errors = Vec::new();
        let mut clients: HashMap<&str, Option<Arc<dyn SecretsClient>>> = HashMap::new();
        for (store, remote) in entries {
            let Some(sr) = parse_store_key(store) else {
                continue;
            };
            if !clients.contains_key(store.as_str()) {
                let c = match self.client(&sr).await {
                    Ok(c) => c,
                    Err(cause) => {
                        errors.push(PushError::DeleteClient {
                            store: store.clone(),
                            cause,
                        });
                        None
                    }
                };
                clients.insert(store, c);
            }
            if let Some(Some(c)) = clients.get(store.as_str())
                && let Err(cause) = c.delete_secret(remote).await
                && !cause.is_not_found()
            {
                errors.push(PushError::Delete {
                    store: store.clone(),
                    remote: status_key(remote),
                    cause,
                });
            }
        }
        errors
    }
}

fn error_policy(ps: Arc<PushSecret>, err: &Error, pctx: Arc<PsContext>) -> Action {
    let delay = pctx
        .failures
        .failed((ps.namespace().unwrap_or_default(), ps.name_any()));
    warn!(ps = %ps.name_any(), error = %err, retry_in = ?delay, "PushSecret reconcile failed");
    Action::requeue(delay)
}

/// PushSecrets (from the cache) whose source is the Secret `namespace/name`.
pub fn ps_for_secret(
    store: &Store<PushSecret>,
    namespace: &str,
    name: &str,
) -> Vec<ObjectRef<PushSecret>> {
    store
        .state()
        .iter()
        .filter(|p| p.namespace().as_deref() == Some(namespace))
        .filter(|p| {
            p.spec
                .selector
                .secret
                .as_ref()
                .and_then(|s| s.name.as_deref())
                == Some(name)
        })
        .map(|p| ObjectRef::from_obj(&**p))
        .collect()
}

/// Runs the PushSecret controller until `shutdown` resolves.
///
/// Like ESO, a change of the source Secret is pushed on the next refresh (`refreshInterval`);
/// Secrets are deliberately not watched, so memory does not grow with the Secrets in the cluster.
pub async fn run(
    ctx: Arc<Context>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let client = ctx.client.clone();
    let ns = ctx.config.namespace.clone();
    let ps_api: Api<PushSecret> = match &ns {
        Some(n) => Api::namespaced(client.clone(), n),
        None => Api::all(client.clone()),
    };
    let concurrency = ctx.config.concurrency;
    let metrics = ctx.metrics.clone();
    let pctx = Arc::new(PsContext::new(ctx));
    let workqueue = metrics.runtime.for_kind::<PushSecret>(concurrency);
    let controller = watched(ps_api, watcher::Config::default(), &workqueue)
        .with_config(kube::runtime::controller::Config::default().concurrency(concurrency))
        .graceful_shutdown_on(shutdown)
        .run(
            workqueue.reconciler(reconcile),
            workqueue.error_policy(error_policy),
            pctx,
        );
    workqueue
        .results(controller)
        .for_each(|res| {
            let metrics = metrics.clone();
            async move {
                match res {
                    // A deleted PushSecret (without finalizer) is never reconciled again: drop
                    // its metric series.
                    Err(kube::runtime::controller::Error::ObjectNotFound(r)) => {
                        metrics.forget_observed(
                            Observed::PushSecret,
                            &r.name,
                            r.namespace.as_deref().unwrap_or_default(),
                        );
                    }
                    Err(e) => debug!(error = %e, "PushSecret controller event"),
                    Ok(_) => {}
                }
            }
        })
        .await;
}
