//! The PushSecret executor: resolves sources and stores, pushes through the provider trait and
//! writes status and events, in the order the module doc of [`crate::pushsecret::plan`] gives.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use esr_api::consts::FINALIZER_PUSHSECRET;
use esr_api::v1alpha1::{PushSecret, PushSecretDeletionPolicy, PushSecretUpdatePolicy};
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

use crate::common::events::{EventSink, EventType, Reporter};
use crate::externalsecret::reconcile::Context;
use crate::metrics::Observed;
use crate::metrics::controller::watched;
use crate::pushsecret::plan::*;
use crate::pushsecret::source::{
    SelectedStore, SourceError, check_data_to_selectors, load_template_sources, render_template,
    resolve_sources, resolve_stores, select_stores, validate_data_to,
};

/// Errors of a PushSecret reconcile (retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Kubernetes API error.
    #[error("kubernetes API error: {0}")]
    Kube(#[from] kube::Error),
    /// A push failure (recorded in status and events).
    #[error("{0}")]
    Push(String),
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
            ctx.client.clone(),
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

fn time_string(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn refresh_time_of(ps: &PushSecret) -> Option<DateTime<Utc>> {
    let t = ps.status.as_ref()?.refresh_time.as_ref()?;
    let s = serde_json::to_value(t).ok()?;
    DateTime::parse_from_rfc3339(s.as_str()?)
        .ok()
        .map(|d| d.with_timezone(&Utc))
}

fn current_rv(ps: &PushSecret) -> String {
    crate::externalsecret::hash::synced_resource_version(
        ps.meta().generation.unwrap_or_default(),
        ps.labels(),
        ps.annotations(),
    )
}

async fn client_for(
    pctx: &PsContext,
    ns: &str,
    r: &StoreRef,
) -> Result<Option<Arc<dyn SecretsClient>>, String> {
    let ctx = &pctx.ctx;
    let opts = esr_provider::ResolveOptions {
        controller_class: ctx.config.controller_class.clone(),
        flood_gate: ctx.config.flood_gate,
    };
    let store = match resolve_store(&ctx.stores, ns, r, &opts).await {
        Ok(StoreResolution::Use(s)) => s,
        Ok(StoreResolution::Skip) => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let provider = ctx.registry.for_store(&store).map_err(|e| e.to_string())?;
    let cctx = ClientContext::new(&store, Some(ns), ctx.kube.clone())
        .with_recorder(Arc::new(ctx.metrics.clone()));
    provider
        .new_client(&cctx)
        .await
        .map(Some)
        .map_err(|e| e.to_string())
}

fn publish(pctx: &PsContext, ps: &PushSecret, warning: bool, reason: &str, note: &str) {
    let type_ = if warning {
        EventType::Warning
    } else {
        EventType::Normal
    };
    pctx.events.publish(ps.object_ref(&()), type_, reason, note);
}

async fn set_finalizers(
    api: &Api<PushSecret>,
    ps: &PushSecret,
    f: Vec<String>,
) -> Result<(), kube::Error> {
    let patch = serde_json::json!({"metadata": {"finalizers": f, "resourceVersion": ps.resource_version()}});
    api.patch(
        &ps.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .map(|_| ())
}

/// Deletes synced entries; returns what could not be deleted.
async fn delete_entries(
    pctx: &PsContext,
    ns: &str,
    entries: &[(String, PushRemoteRef)],
) -> Vec<String> {
    let mut errors = Vec::new();
    let mut clients: HashMap<String, Option<Arc<dyn SecretsClient>>> = HashMap::new();
    for (store, remote) in entries {
        let Some(sr) = parse_store_key(store) else {
            continue;
        };
        if !clients.contains_key(store) {
            let c = match client_for(pctx, ns, &sr).await {
                Ok(c) => c,
                Err(e) => {
                    errors.push(format!("{store}: {e}"));
                    None
                }
            };
            clients.insert(store.clone(), c);
        }
        if let Some(Some(c)) = clients.get(store)
            && let Err(e) = c.delete_secret(remote).await
            && !e.is_not_found()
        {
            errors.push(format!("{store} {}: {e}", status_key(remote)));
        }
    }
    errors
}

fn synced_of(ps: &PushSecret) -> Synced {
    ps.status
        .as_ref()
        .and_then(|s| s.synced_push_secrets.clone())
        .unwrap_or_default()
}

fn flat(s: &Synced) -> Vec<(String, PushRemoteRef)> {
    stale_entries(s, &Synced::new())
}

async fn write_status(
    api: &Api<PushSecret>,
    ps: &PushSecret,
    cond: (&str, &str, String),
    synced: Option<(&Synced, &Synced)>,
    refreshed: Option<(DateTime<Utc>, String)>,
) -> Result<(), kube::Error> {
    let old_cond = ps
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"));
    let ltt = match old_cond {
        Some(c) if c.status == cond.0 => c
            .last_transition_time
            .as_ref()
            .and_then(|t| serde_json::to_value(t).ok()),
        _ => None,
    }
    .unwrap_or_else(|| serde_json::Value::String(time_string(Utc::now())));
    let mut st = serde_json::json!({
        "conditions": [{"type": "Ready", "status": cond.0, "reason": cond.1, "message": cond.2,
                        "lastTransitionTime": ltt}]
    });
    if let Some((old, new)) = synced {
        st["syncedPushSecrets"] = synced_patch(old, new);
    }
    if let Some((t, rv)) = refreshed {
        st["refreshTime"] = serde_json::Value::String(time_string(t));
        st["syncedResourceVersion"] = serde_json::Value::String(rv);
    }
    api.patch_status(
        &ps.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&serde_json::json!({ "status": st })),
    )
    .await
    .map(|_| ())
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

/// One push pass over all sources and stores.
struct Pushed {
    synced: Synced,
    errors: Vec<String>,
}

async fn push_all(
    pctx: &PsContext,
    ps: &PushSecret,
    ns: &str,
    stores: &[SelectedStore],
    sources: &[Secret],
    old: &Synced,
) -> Pushed {
    let if_not_exists = ps.spec.update_policy == Some(PushSecretUpdatePolicy::IfNotExists);
    let mut new = Synced::new();
    let mut errors = Vec::new();
    for sel in stores {
        let sr = &sel.store;
        let skey = store_key(sr);
        let client = match client_for(pctx, ns, sr).await {
            Ok(Some(c)) => c,
            Ok(None) => continue,
            Err(e) => {
                errors.push(format!(
                    "could not get secrets client for store {}: {e}",
                    sr.name
                ));
                // Keep what was synced so it is not considered stale.
                if let Some(o) = old.get(&skey) {
                    new.insert(skey.clone(), o.clone());
                }
                continue;
            }
        };
        let slot = new.entry(skey.clone()).or_default();
        // Several sources (label selector): each is pushed with the same entries, in name order,
        // and the status keys are merged (ESO).
        for source in sources {
            let entries = match entries_for_selected(&ps.spec, sel, source) {
                Ok(e) => e,
                Err(e) => {
                    errors.push(e);
                    continue;
                }
            };
            for e in entries {
                let key = status_key(&e.remote);
                // The source key is checked before the provider is called (ESO).
                let req = match request(&e, source) {
                    Ok(r) => r,
                    Err(err) => {
                        errors.push(format!("set secret failed: {err}"));
                        continue;
                    }
                };
                if if_not_exists {
                    match client.secret_exists(&e.remote).await {
                        Ok(true) => {
                            // Existing remote secret: left unchanged (and only tracked if esr
                            // pushed it before).
                            if let Some(d) = old.get(&skey).and_then(|m| m.get(&key)) {
                                slot.insert(key, d.clone());
                            }
                            continue;
                        }
                        Ok(false) => {}
                        Err(err) => {
                            errors
                                .push(format!("could not verify if secret exists in store: {err}"));
                            continue;
                        }
                    }
                }
                match client.push_secret(&req).await {
                    Ok(()) => {
                        slot.insert(key, e.data.clone());
                    }
                    Err(err) => {
                        if let Some(d) = old.get(&skey).and_then(|m| m.get(&key)) {
                            slot.insert(key, d.clone());
                        }
                        errors.push(format!("set secret failed: could not write remote ref {} to target secretstore {}: {err}", status_key(&e.remote), sr.name));
                    }
                }
            }
        }
        if slot.is_empty() {
            new.remove(&skey);
        }
    }
    Pushed {
        synced: new,
        errors,
    }
}

async fn reconcile_inner(
    ps: &PushSecret,
    pctx: &PsContext,
    ready_out: &mut Option<bool>,
) -> Result<Action, Error> {
    let name = ps.name_any();
    let ns = ps.namespace().unwrap_or_default();
    let api: Api<PushSecret> = Api::namespaced(pctx.ctx.client.clone(), &ns);
    // Every store this PushSecret names belongs to another controller class: it is that
    // controller's PushSecret, so touch nothing (no finalizer, no remote deletion, no status).
    if let Ok(candidates) = resolve_stores(&pctx.ctx.client, &ps.spec, &ns).await
        && !candidates.is_empty()
        && candidates.iter().all(|c| {
            c.controller
                .as_deref()
                .is_some_and(|k| !k.is_empty() && k != pctx.ctx.config.controller_class)
        })
    {
        debug!(ps = %name, namespace = %ns, "skipping: stores of another controller class");
        return Ok(Action::await_change());
    }
    let delete_policy = ps.spec.deletion_policy == Some(PushSecretDeletionPolicy::Delete);
    let has_fin = ps.finalizers().iter().any(|f| f == FINALIZER_PUSHSECRET);
    let old = synced_of(ps);

    if ps.meta().deletion_timestamp.is_some() {
        if has_fin {
            if delete_policy {
                let errors = delete_entries(pctx, &ns, &flat(&old)).await;
                if !errors.is_empty() {
                    let msg = format!("error deleting secrets: {}", errors.join("; "));
                    publish(pctx, ps, true, REASON_ERRORED, &msg);
                    return Err(Error::Push(msg));
                }
            }
            let rest = ps
                .finalizers()
                .iter()
                .filter(|f| *f != FINALIZER_PUSHSECRET)
                .cloned()
                .collect();
            set_finalizers(&api, ps, rest).await?;
        }
        return Ok(Action::await_change());
    }
    if delete_policy && !has_fin {
        let mut f = ps.finalizers().to_vec();
        f.push(FINALIZER_PUSHSECRET.to_string());
        set_finalizers(&api, ps, f).await?;
    } else if !delete_policy && has_fin {
        let rest = ps
            .finalizers()
            .iter()
            .filter(|f| *f != FINALIZER_PUSHSECRET)
            .cloned()
            .collect();
        set_finalizers(&api, ps, rest).await?;
    }

    let rv = current_rv(ps);
    let interval = refresh_interval(&ps.spec);
    let now = Utc::now();
    let synced_rv = ps
        .status
        .as_ref()
        .and_then(|s| s.synced_resource_version.as_deref());

    // Skip unless a refresh is due (or the last attempt did not succeed). As in ESO this comes
    // before the sources are read, so a generator runs only when a push is due.
    let ready = ps
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True");
    if ready && let Err(wait) = refresh_due(synced_rv, &rv, refresh_time_of(ps), interval, now) {
        *ready_out = Some(true);
        return Ok(wait
            .map(Action::requeue)
            .unwrap_or_else(Action::await_change));
    }

    let fail_api = api.clone();
    let fail = |msg: String, ready_out: &mut Option<bool>| {
        *ready_out = Some(false);
        async move {
            publish(pctx, ps, true, REASON_ERRORED, &msg);
            write_status(
                &fail_api,
                ps,
                ("False", REASON_ERRORED, msg.clone()),
                None,
                None,
            )
            .await?;
            Err::<Action, Error>(Error::Push(msg))
        }
    };

    if let Err(e) = validate_data_to(&ps.spec) {
        return fail(e, ready_out).await;
    }
    let sources = match resolve_sources(
        &pctx.ctx.client,
        &*pctx.ctx.kube,
        &pctx.ctx.generators,
        &ps.spec,
        &ns,
        &name,
    )
    .await
    {
        Ok(s) => s,
        Err(SourceError::NotFound(src_name)) => {
            let msg = match missing_source(&ps.spec, &src_name, &old) {
                MissingSource::Errored => {
                    return fail(MSG_NO_SOURCE.to_string(), ready_out).await;
                }
                MissingSource::SourceDeleted(msg) => msg,
            };
            let mut remaining = old.clone();
            let errors = delete_entries(pctx, &ns, &flat(&old)).await;
            if errors.is_empty() {
                remaining = Synced::new();
            }
            publish(pctx, ps, true, REASON_SOURCE_DELETED, &msg);
            write_status(
                &api,
                ps,
                ("False", REASON_SOURCE_DELETED, msg),
                Some((&old, &remaining)),
                None,
            )
            .await?;
            *ready_out = Some(false);
            return Ok(Action::requeue(interval.max(Duration::from_secs(1))));
        }
        Err(SourceError::Other(e)) => return fail(e, ready_out).await,
    };
    let candidates = match resolve_stores(&pctx.ctx.client, &ps.spec, &ns).await {
        Ok(c) => c,
        Err(e) => return fail(e, ready_out).await,
    };
    let stores = select_stores(candidates, &pctx.ctx.config.controller_class);
    if stores.is_empty() {
        // ESO: no store is managed by this controller (or all are being deleted): nothing to do.
        debug!(ps = %name, namespace = %ns, "no managed store to push to");
        return Ok(Action::requeue(interval.max(Duration::from_secs(1))));
    }
    if let Err(e) = check_data_to_selectors(&ps.spec, &stores) {
        return fail(e, ready_out).await;
    }
    let mut rendered = Vec::with_capacity(sources.len());
    if let Some(t) = &ps.spec.template {
        let tsources = match load_template_sources(&*pctx.ctx.kube, &ns, t).await {
            Ok(s) => s,
            Err(e) => {
                return fail(format!("error fetching templateFrom data: {e}"), ready_out).await;
            }
        };
        for s in &sources {
            match render_template(t, s, &tsources) {
                Ok(r) => rendered.push(r),
                Err(e) => return fail(e, ready_out).await,
            }
        }
    } else {
        rendered = sources;
    }

    let Pushed {
        synced: mut new,
        mut errors,
    } = push_all(pctx, ps, &ns, &stores, &rendered, &old).await;

    if delete_policy && errors.is_empty() {
        let stale = stale_entries(&old, &new);
        let del_errors = delete_entries(pctx, &ns, &stale).await;
        if !del_errors.is_empty() {
            // Keep the entries that could not be deleted.
            for (store, r) in &stale {
                if let Some(d) = old.get(store).and_then(|m| m.get(&status_key(r))) {
                    new.entry(store.clone())
                        .or_default()
                        .insert(status_key(r), d.clone());
                }
            }
            errors.extend(del_errors);
        }
    }
    // deletionPolicy None: entries removed from the spec are forgotten, never deleted.

    if !errors.is_empty() {
        let msg = errors.join("; ");
        *ready_out = Some(false);
        publish(pctx, ps, true, REASON_ERRORED, &msg);
        write_status(
            &api,
            ps,
            ("False", REASON_ERRORED, msg.clone()),
            Some((&old, &new)),
            None,
        )
        .await?;
        return Err(Error::Push(msg));
    }
    let policy = ps.spec.update_policy.unwrap_or_default();
    let cond = ready_condition(policy);
    let was_ready = ps
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True" && c.message.as_deref() == Some(cond.2.as_str()));
    write_status(&api, ps, cond.clone(), Some((&old, &new)), Some((now, rv))).await?;
    *ready_out = Some(true);
    if !was_ready || old != new {
        publish(pctx, ps, false, REASON_SYNCED, &cond.2);
        info!(ps = %name, namespace = %ns, "pushed secret");
    }
    Ok(if interval.is_zero() {
        Action::await_change()
    } else {
        Action::requeue(interval)
    })
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
