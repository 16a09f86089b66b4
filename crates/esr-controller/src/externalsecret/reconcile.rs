//! The thin IO around the pure core: the ExternalSecret reconciler (kube-runtime `Controller`),
//! its watches, and the Kubernetes writes.

use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use esr_api::v1::ExternalSecret;
use esr_provider::ResolveOptions;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::PartialObjectMeta;
use kube::runtime::controller::Action;
use kube::runtime::events::{Event as KubeEvent, EventType as KubeEventType, Recorder};
use kube::{Api, Resource, ResourceExt};
use tracing::{debug, info, warn};

use crate::common::refresh::{self, Requeue};
use crate::externalsecret::convert::{es_view, status_json};
use crate::externalsecret::fetch::{FetchEnv, Fetched, fetch, referenced_stores};
use crate::externalsecret::plan::{
    self, Admission, Decision, End, EsStatus, EsView, EventRec, EventType, LABEL_OWNER, PlanInput,
    SecretWrite, Step, Steps,
};
use crate::externalsecret::template::load_sources;
use crate::metrics::{Metrics, ResourceLabels};
pub use crate::runtime::{Context, Error};

/// The ExternalSecret controller's use of the shared [`Context`].
impl Context {
    fn remember_status(&self, es: &ExternalSecret, st: &EsStatus) {
        if let Some(uid) = es.uid() {
            let mut w = self.written.lock().unwrap_or_else(|p| p.into_inner());
            w.insert(uid, st.clone());
        }
    }

    /// The status to plan with for `es` (see [`effective_status`]); forgets the written status
    /// once the cache has caught up.
    fn status_for(&self, es: &ExternalSecret, cached: EsStatus) -> EsStatus {
        let Some(uid) = es.uid() else {
            return cached;
        };
        let mut w = self.written.lock().unwrap_or_else(|p| p.into_inner());
        match effective_status(&cached, w.get(&uid)) {
            Some(newer) => newer,
            None => {
                w.remove(&uid);
                cached
            }
        }
    }

    fn forget_status(&self, es: &ExternalSecret) {
        if let Some(uid) = es.uid() {
            let mut w = self.written.lock().unwrap_or_else(|p| p.into_inner());
            w.remove(&uid);
        }
    }

    /// Names of the Secrets in `ns` carrying the created-by label `owner`: from the managed-Secret
    /// cache, or (cache not synced within 10 s, e.g. no watch permission) from a label-selected LIST.
    async fn owned_secret_names(&self, ns: &str, owner: &str) -> Result<Vec<String>, kube::Error> {
        let ready = tokio::time::timeout(
            Duration::from_secs(10),
            self.managed_secrets.wait_until_ready(),
        )
        .await
        .is_ok_and(|r| r.is_ok());
        if ready {
            return Ok(owned_names(&self.managed_secrets.state(), ns, owner));
        }
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), ns);
        Ok(secrets
            .list_metadata(&ListParams::default().labels(&format!("{LABEL_OWNER}={owner}")))
            .await?
            .items
            .into_iter()
            .filter_map(|m| m.metadata.name)
            .collect())
    }
}

/// The names of the Secrets of `ns` whose created-by label is `owner`, sorted.
pub fn owned_names(cache: &[Arc<PartialObjectMeta<Secret>>], ns: &str, owner: &str) -> Vec<String> {
    let mut out: Vec<String> = cache
        .iter()
        .filter(|m| m.metadata.namespace.as_deref() == Some(ns))
        .filter(|m| {
            m.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(LABEL_OWNER))
                .is_some_and(|v| v == owner)
        })
        .filter_map(|m| m.metadata.name.clone())
        .collect();
    out.sort();
    out
}

fn now_seconds() -> DateTime<Utc> {
    let n = Utc::now();
    DateTime::from_timestamp(n.timestamp(), 0).unwrap_or(n)
}

fn jitter_for(interval: Duration) -> Duration {
    let max = refresh::max_jitter(interval).as_millis() as u64;
    if max == 0 {
        return Duration::ZERO;
    }
    Duration::from_millis(rand::random_range(0..max))
}

fn to_action(r: Requeue) -> Action {
    match r {
        Requeue::Never => Action::await_change(),
        // refreshTime has second precision: an immediate requeue could spin within that second.
        Requeue::Now => Action::requeue(Duration::from_secs(1)),
        Requeue::After(d) => Action::requeue(d),
    }
}

async fn publish(recorder: &Recorder, es: &ExternalSecret, ev: &EventRec) {
    let reference = es.object_ref(&());
    let e = KubeEvent {
        type_: match ev.type_ {
            EventType::Normal => KubeEventType::Normal,
            EventType::Warning => KubeEventType::Warning,
        },
        reason: ev.reason.clone(),
        note: Some(ev.message.clone()),
        action: event_action(ev),
        secondary: None,
    };
    if let Err(err) = recorder.publish(&e, &reference).await {
        warn!(error = %err, "failed to publish event");
    }
}

/// The Event `action`. kube's Recorder aggregates events into a series by (type, reason, action,
/// object) and keeps the first note; client-go (ESO) aggregates by message. Deriving the action
/// from the message keeps one series per distinct message, so a new error text is never hidden.
pub fn event_action(ev: &EventRec) -> String {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    ev.message.hash(&mut h);
    format!("{}-{:08x}", ev.reason, h.finish() as u32)
}

async fn write_status(
    ctx: &Context,
    api: &Api<ExternalSecret>,
    es: &ExternalSecret,
    st: &EsStatus,
) -> Result<(), kube::Error> {
    let patch = serde_json::json!({ "status": status_json(st) });
    api.patch_status(
        &es.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await?;
    ctx.remember_status(es, st);
    Ok(())
}

/// The status to plan with: the cached object's, unless this controller wrote a newer one that
/// the watch cache has not delivered yet (a reconcile queued during the previous one, e.g. by the
/// finalizer patch or the Secret's create event, would otherwise sync, and call the provider,
/// a second time).
pub fn effective_status(cached: &EsStatus, written: Option<&EsStatus>) -> Option<EsStatus> {
    let w = written?;
    if w == cached {
        return None;
    }
    match (cached.refresh_time, w.refresh_time) {
        (None, Some(_)) => Some(w.clone()),
        (Some(c), Some(n)) if n > c => Some(w.clone()),
        _ => None,
    }
}

/// A Kubernetes API error as client-go prints it: the API server's message (`secrets "x" is
/// forbidden: ...`), not kube's `Debug` rendering of the whole response.
pub fn kube_error_text(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) if !s.message.is_empty() => s.message.clone(),
        other => other.to_string(),
    }
}

fn is_conflict(e: &kube::Error) -> bool {
    esr_provider::error::kube_status_code(e) == Some(409)
}

/// The ExternalSecret reconciler.
pub async fn reconcile_es(es: Arc<ExternalSecret>, ctx: Arc<Context>) -> Result<Action, Error> {
    let started = Instant::now();
    let name = es.name_any();
    let ns = es.namespace().unwrap_or_default();
    let labels = ResourceLabels {
        name: name.clone(),
        namespace: ns.clone(),
    };
    ctx.metrics.sync_calls.get_or_create(&labels).inc();
    let result = reconcile_es_inner(&es, &ctx).await;
    ctx.metrics
        .es_duration
        .get_or_create(&labels)
        .set(started.elapsed().as_nanos() as f64);
    match &result {
        Ok(_) => ctx.failures.reset(&(ns, name)),
        Err(e) => ctx.metrics.sync_error(&name, &ns, e.metric_label()),
    }
    result
}

/// One reconcile: gathers the inputs [`plan`] decides on (the target Secret, the provider data,
/// the orphan candidates, the template sources) and executes the [`plan::Steps`] it returns.
async fn reconcile_es_inner(es: &ExternalSecret, ctx: &Context) -> Result<Action, Error> {
    let ex = Executor::new(es, ctx);
    let view = &ex.view;
    if view.deleting {
        let existing = if plan::deletion_reads_target(view) {
            ex.target().await?
        } else {
            None
        };
        return ex.run(plan::deletion(view, existing.as_ref())).await;
    }
    let gates = plan::Gates {
        foreign_class: ex.foreign_class().await,
        cluster_stores: ctx.config.cluster_stores,
        allow_generic_targets: ctx.config.allow_generic_targets,
    };
    match plan::admit(view, &gates, ex.start) {
        Admission::Stop(steps) => return ex.run(steps).await,
        Admission::Proceed(steps) => {
            if let Some(early) = ex.run_steps(&steps, &End::Await("")).await? {
                return Ok(early);
            }
        }
    }
    let existing = ex.target().await?;
    let jitter = jitter_for(view.refresh_interval);
    if let Decision::Skip { requeue, status } =
        plan::decide(view, existing.as_ref(), ex.start, jitter)
    {
        return ex.run(plan::refresh_skipped(requeue, status)).await;
    }
    let provider = match fetch(&ex.fetch_env(), es).await {
        Fetched::Skip => return ex.run(plan::foreign_store()).await,
        Fetched::Data(d) => d,
    };
    let owned = match plan::owner_label(view) {
        Some(label) => ctx.owned_secret_names(&view.namespace, &label).await?,
        None => Vec::new(),
    };
    let sources = load_sources(ctx.kube.as_ref(), es).await;
    let renderer = ctx.templates.renderer(es, &sources);
    let p = plan::plan(PlanInput {
        es: view,
        provider,
        existing: existing.as_ref(),
        owned_secret_names: &owned,
        renderer: renderer.as_ref(),
        start: ex.start,
        jitter,
    });
    drop(renderer);
    ex.run(p.steps(view)).await
}

/// Executes [`plan::Steps`] for one ExternalSecret.
struct Executor<'a> {
    es: &'a ExternalSecret,
    ctx: &'a Context,
    api: Api<ExternalSecret>,
    secrets: Api<Secret>,
    view: EsView,
    start: DateTime<Utc>,
}

impl<'a> Executor<'a> {
    fn new(es: &'a ExternalSecret, ctx: &'a Context) -> Self {
        let ns = es.namespace().unwrap_or_default();
        let mut view = es_view(es, es.status.as_ref().and_then(|s| s.observed_generation));
        view.status = ctx.status_for(es, std::mem::take(&mut view.status));
        Executor {
            es,
            ctx,
            api: Api::namespaced(ctx.client.clone(), &ns),
            secrets: Api::namespaced(ctx.client.clone(), &ns),
            view,
            start: now_seconds(),
        }
    }

    async fn target(&self) -> Result<Option<Secret>, kube::Error> {
        self.secrets.get_opt(&self.view.target_name).await
    }

    /// Whether a referenced store belongs to another controller class (a failed lookup is not).
    async fn foreign_class(&self) -> bool {
        matches!(
            esr_provider::store::any_store_unmanaged(
                &self.ctx.stores,
                &self.view.namespace,
                &referenced_stores(self.es),
                &self.ctx.config.controller_class,
            )
            .await,
            Ok(true)
        )
    }

    fn fetch_env(&self) -> FetchEnv<'_> {
        FetchEnv {
            lookup: &self.ctx.stores,
            registry: &self.ctx.registry,
            kube: self.ctx.kube.clone(),
            recorder: Arc::new(self.ctx.metrics.clone()),
            resolve: ResolveOptions {
                controller_class: self.ctx.config.controller_class.clone(),
                flood_gate: self.ctx.config.flood_gate,
            },
            transformer: self.ctx.templates.transformer(),
            generators: Some(&self.ctx.generators),
        }
    }

    /// Runs the steps, then ends as `steps.end` says.
    async fn run(&self, steps: Steps) -> Result<Action, Error> {
        if let Some(early) = self.run_steps(&steps.steps, &steps.end).await? {
            return Ok(early);
        }
        self.finish(steps.end)
    }

    /// Runs `steps` in order (`end` is how they would end, for [`plan::write_failure`]).
    /// `Some` when the reconcile ended early: a conflict, or a failed write and its consequences.
    async fn run_steps(&self, steps: &[Step], end: &End) -> Result<Option<Action>, Error> {
        for step in steps {
            let Err(e) = self.step(step).await else {
                continue;
            };
            if is_conflict(&e) && step.requeue_on_conflict() {
                debug!(es = %self.view.name, "conflict, requeueing");
                return Ok(Some(Action::requeue(Duration::from_millis(10))));
            }
            let text = kube_error_text(&e);
            return match plan::write_failure(&self.view, step, end, &text, self.start) {
                Some(failed) => Box::pin(self.run(failed)).await.map(Some),
                None => Err(e.into()),
            };
        }
        Ok(None)
    }

    async fn step(&self, step: &Step) -> Result<(), kube::Error> {
        let (ctx, view) = (self.ctx, &self.view);
        match step {
            Step::AddFinalizer => {
                let mut f = self.es.finalizers().to_vec();
                f.push(plan::FINALIZER.to_string());
                let patch = serde_json::json!({"metadata": {"finalizers": f}});
                self.patch(&patch).await
            }
            Step::RemoveFinalizer => {
                let remaining: Vec<&String> = self
                    .es
                    .finalizers()
                    .iter()
                    .filter(|f| *f != plan::FINALIZER)
                    .collect();
                let patch = serde_json::json!({"metadata": {"finalizers": remaining, "resourceVersion": self.es.resource_version()}});
                self.patch(&patch).await
            }
            Step::DeleteTarget => {
                if self.delete(&view.target_name).await? {
                    info!(es = %view.name, namespace = %view.namespace, secret = %view.target_name, "deleted target secret");
                }
                Ok(())
            }
            Step::Forget => {
                ctx.metrics.forget(&view.name, &view.namespace);
                ctx.forget_status(self.es);
                Ok(())
            }
            Step::Event(ev) => {
                publish(&ctx.es_recorder, self.es, ev).await;
                Ok(())
            }
            Step::DeleteOrphan(name) => {
                if self.delete(name).await? {
                    publish(&ctx.es_recorder, self.es, &plan::orphan_deleted_event()).await;
                }
                Ok(())
            }
            Step::Write(w) => {
                let pp = PostParams {
                    field_manager: Some(view.field_manager()),
                    ..Default::default()
                };
                match w {
                    SecretWrite::None => Ok(()),
                    SecretWrite::Create(s) => self.secrets.create(&pp, s).await.map(|_| ()),
                    SecretWrite::Update(s) => self
                        .secrets
                        .replace(&view.target_name, &pp, s)
                        .await
                        .map(|_| ()),
                    SecretWrite::Delete(n) => self.delete(n).await.map(|_| ()),
                }
            }
            Step::Rollout(hash) => {
                ctx.rollouts
                    .on_secret_changed(&ctx.client, &view.namespace, &view.target_name, hash)
                    .await;
                Ok(())
            }
            Step::Status(st) => write_status(ctx, &self.api, self.es, st).await,
            Step::ReadyMetric(status) => {
                let m = &ctx.metrics.es_condition;
                Metrics::set_condition(m, &view.name, &view.namespace, "Ready", status);
                Ok(())
            }
        }
    }

    async fn patch(&self, patch: &serde_json::Value) -> Result<(), kube::Error> {
        let pp = PatchParams::default();
        self.api
            .patch(&self.view.name, &pp, &Patch::Merge(patch))
            .await
            .map(|_| ())
    }

    /// Deletes a Secret; `false` when it was already gone.
    async fn delete(&self, name: &str) -> Result<bool, kube::Error> {
        match self.secrets.delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(true),
            Err(e) if esr_provider::error::kube_status_code(&e) == Some(404) => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn finish(&self, end: End) -> Result<Action, Error> {
        let (name, ns) = (&self.view.name, &self.view.namespace);
        Ok(match end {
            End::Done { requeue, wrote } => {
                if wrote {
                    info!(es = %name, namespace = %ns, "reconciled secret");
                }
                to_action(requeue)
            }
            End::Await(why) => {
                debug!(es = %name, namespace = %ns, "{why}");
                Action::await_change()
            }
            End::Terminal(t) => {
                warn!(es = %name, namespace = %ns, error = %t, "sync failed (terminal until the next change)");
                self.ctx.metrics.sync_error(name, ns, t.metric_label());
                Action::await_change()
            }
            End::Refused(t) => {
                warn!(es = %name, namespace = %ns, error = %t, "generic target refused (terminal until the next change)");
                Action::await_change()
            }
            // The reconcile's error: counted in `reconcile_es` and retried with backoff.
            End::Retry(t) => return Err(Error::Sync(t)),
        })
    }
}

/// Backoff policy of the ExternalSecret controller: 1s × 2^n up to 7 minutes, or longer when
/// the backend throttled us with a retry-after hint ([`error_delay`]).
pub fn es_error_policy(es: Arc<ExternalSecret>, err: &Error, ctx: Arc<Context>) -> Action {
    let backoff = ctx
        .failures
        .failed((es.namespace().unwrap_or_default(), es.name_any()));
    let delay = error_delay(err, backoff);
    warn!(es = %es.name_any(), namespace = %es.namespace().unwrap_or_default(), error = %err, retry_in = ?delay, "reconcile failed");
    Action::requeue(delay)
}

/// The wait before retrying after `err`: the `backoff`, lengthened to the retry-after hint of a
/// throttling provider.
pub fn error_delay(err: &Error, backoff: Duration) -> Duration {
    refresh::retry_delay(backoff, err.retry_after())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn throttling_drives_the_requeue() {
        use crate::externalsecret::error::SyncError;
        use esr_provider::ProviderError;
        let s = Duration::from_secs;
        let throttled = Error::Sync(
            SyncError::Provider(ProviderError::throttled("slow down", Some(s(30)))).at_data(0, "k"),
        );
        assert_eq!(error_delay(&throttled, s(1)), s(30));
        assert_eq!(throttled.metric_label(), "throttled");
        let without_hint = Error::Sync(ProviderError::throttled("slow down", None).into());
        assert_eq!(error_delay(&without_hint, s(2)), s(2));
        let other = Error::Sync(ProviderError::transient("down").into());
        assert_eq!(error_delay(&other, s(4)), s(4));
        assert_eq!(other.metric_label(), "transient");
    }

    #[test]
    fn a_status_written_but_not_yet_cached_wins() {
        let at = |s: i64| DateTime::from_timestamp(1_700_000_000 + s, 0);
        let st = |t: Option<DateTime<Utc>>, rv: &str| EsStatus {
            refresh_time: t,
            synced_resource_version: rv.into(),
            ..Default::default()
        };
        let never = st(None, "");
        let first = st(at(0), "1-a");
        let later = st(at(5), "1-a");
        // The cache has no status yet, or an older one: the written status is used.
        assert_eq!(effective_status(&never, Some(&first)), Some(first.clone()));
        assert_eq!(effective_status(&first, Some(&later)), Some(later.clone()));
        // The cache caught up, or holds a newer status (another writer): the cache wins.
        assert_eq!(effective_status(&first, Some(&first)), None);
        assert_eq!(effective_status(&later, Some(&first)), None);
        assert_eq!(effective_status(&first, None), None);
        // A written status without refreshTime never overrides the cache.
        assert_eq!(effective_status(&first, Some(&never)), None);
    }

    #[test]
    fn owned_names_come_from_the_cache_by_namespace_and_label() {
        let meta = |ns: &str, name: &str, owner: Option<&str>| {
            let mut m: PartialObjectMeta<Secret> = PartialObjectMeta::default();
            m.metadata.namespace = Some(ns.into());
            m.metadata.name = Some(name.into());
            m.metadata.labels =
                owner.map(|o| BTreeMap::from([(LABEL_OWNER.to_string(), o.to_string())]));
            Arc::new(m)
        };
        let cache = vec![
            meta("app", "new", Some("h1")),
            meta("app", "old", Some("h1")),
            meta("app", "other", Some("h2")),
            meta("app", "plain", None),
            meta("team", "same-label", Some("h1")),
        ];
        assert_eq!(owned_names(&cache, "app", "h1"), vec!["new", "old"]);
        assert!(owned_names(&cache, "app", "h3").is_empty());
        assert_eq!(owned_names(&cache, "team", "h1"), vec!["same-label"]);
    }
}
