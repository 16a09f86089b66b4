//! The thin IO around the pure core: the ExternalSecret reconciler (kube-runtime `Controller`),
//! its watches, and the Kubernetes writes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use esr_api::v1::ExternalSecret;
use esr_provider::ResolveOptions;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{DeleteParams, ListParams, Patch, PostParams};
use kube::runtime::controller::Action;
use kube::{Api, Resource, ResourceExt};
use tracing::{debug, info, warn};

use crate::common::events::kube_error_text;
use crate::common::refresh::{self, Requeue};
use crate::common::writes;
use crate::externalsecret::convert::{es_view, status_json, status_view};
use crate::externalsecret::fetch::{FetchEnv, Fetched, Transforms, fetch, referenced_stores};
use crate::externalsecret::offload::{PlanJob, plan_on_pool, unchanged_steps_on_pool};
use crate::externalsecret::plan::{
    self, Admission, CreationPolicy, Decision, End, EsStatus, EsView, EventRec, LABEL_OWNER,
    SecretWrite, Step, Steps,
};
use crate::externalsecret::target::{self, Source, Target, VerifiedTarget};
use crate::externalsecret::template::load_sources;
pub use crate::runtime::{Context, Error};

/// The key of a target Secret (namespace, name) in `Context::verified`.
fn target_key(key: &(String, String)) -> u64 {
    crate::common::observe::digest(key)
}

/// The ExternalSecrets (by uid) this controller added its finalizer to, with the
/// resourceVersion of the object it patched, until the watch cache holds another version of
/// them: a reconcile of that very version (queued while the first one ran, e.g. by the Secret's
/// create event) knows the finalizer is there and does not patch it again. Only the patches in
/// flight are kept.
#[derive(Debug, Default)]
pub struct AddedFinalizers(Mutex<HashMap<String, String>>);

impl AddedFinalizers {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The finalizer was added to version `rv` of the object `uid`.
    pub fn added(&self, uid: Option<String>, rv: Option<String>) {
        if let (Some(uid), Some(rv)) = (uid, rv) {
            self.lock().insert(uid, rv);
        }
    }

    /// Whether the finalizer was added to version `rv` of `uid`.
    pub fn is_added(&self, uid: Option<&str>, rv: Option<&str>) -> bool {
        let (Some(uid), Some(rv)) = (uid, rv) else {
            return false;
        };
        self.lock().get(uid).is_some_and(|added| added == rv)
    }

    /// The watch delivered version `rv` of `uid`: another version than the one patched is
    /// the patched object or a later one, and settles the question.
    pub fn delivered(&self, uid: &str, rv: Option<&str>) {
        let mut f = self.lock();
        if f.get(uid).is_some_and(|added| Some(added.as_str()) != rv) {
            f.remove(uid);
        }
    }
}

/// The ExternalSecret controller's use of the shared [`Context`].
impl Context {
    fn remember_status(&self, es: &ExternalSecret, st: &EsStatus) {
        if let Some(uid) = es.uid() {
            let mut w = self.written.lock().unwrap_or_else(|p| p.into_inner());
            w.insert(uid, st.clone());
        }
    }

    /// Forgets the status written for `es` once the watch cache shows it (or a newer one), and
    /// the finalizer added to it once the cache holds another version of it, so both maps hold
    /// the writes in flight, not one entry per ExternalSecret until its next reconcile. Called
    /// for every ExternalSecret the watch delivers.
    pub(crate) fn delivered(&self, es: &ExternalSecret) {
        let Some(uid) = es.metadata.uid.as_deref() else {
            return;
        };
        let mut w = self.written.lock().unwrap_or_else(|p| p.into_inner());
        if w.get(uid).is_some_and(|written| shows(es, written)) {
            w.remove(uid);
        }
        drop(w);
        self.finalized
            .delivered(uid, es.metadata.resource_version.as_deref());
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

    /// What this controller last knew of the target Secret `key` (namespace, name).
    fn verified_target(&self, key: &(String, String)) -> Option<VerifiedTarget> {
        let v = self.verified.lock().unwrap_or_else(|p| p.into_inner());
        v.get(&target_key(key)).cloned()
    }

    /// Forgets every target Secret (the managed-Secret watch lists them all again: deletions
    /// while it was away come without an event).
    pub(crate) fn forget_targets(&self) {
        self.verified
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }

    /// Remembers (`Some`) or forgets (`None`) what this controller knows of a target Secret.
    pub(crate) fn remember_target(&self, key: (String, String), known: Option<VerifiedTarget>) {
        let mut v = self.verified.lock().unwrap_or_else(|p| p.into_inner());
        match known {
            Some(k) => v.insert(target_key(&key), k),
            None => v.remove(&target_key(&key)),
        };
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
        .is_ok();
        if ready {
            return Ok(self.managed_secrets.owned(ns, owner));
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

fn publish(ctx: &Context, es: &ExternalSecret, ev: &EventRec) {
    ctx.es_events
        .publish(es.object_ref(&()), ev.type_, &ev.reason, &ev.message);
}

async fn write_status(
    ctx: &Context,
    es: &ExternalSecret,
    st: &EsStatus,
) -> Result<(), kube::Error> {
    let patch = serde_json::json!({ "status": status_json(st) });
    let ns = es.namespace();
    writes::patch::<ExternalSecret, _>(
        &ctx.client,
        ns.as_deref(),
        &es.name_any(),
        Some("status"),
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

/// Whether the cached `es` shows the `written` status, or a newer one.
pub fn shows(es: &ExternalSecret, written: &EsStatus) -> bool {
    let cached = status_view(es, es.status.as_ref().and_then(|s| s.observed_generation));
    effective_status(&cached, Some(written)).is_none()
}

fn is_conflict(e: &kube::Error) -> bool {
    esr_provider::error::kube_status_code(e) == Some(409)
}

/// The ExternalSecret reconciler.
pub async fn reconcile_es(es: Arc<ExternalSecret>, ctx: Arc<Context>) -> Result<Action, Error> {
    if let Some(wait) = ctx.first_syncs.defer(&es) {
        debug!(es = %es.name_any(), ?wait, "refresh deferred: first syncs are waiting");
        return Ok(Action::requeue(wait));
    }
    let started = Instant::now();
    let name = es.name_any();
    let ns = es.namespace().unwrap_or_default();
    ctx.metrics.es.sync_call(&name, &ns);
    let result = reconcile_es_inner(&es, &ctx).await;
    ctx.metrics.es.reconciled(&name, &ns, started.elapsed());
    match &result {
        Ok(_) => ctx.failures.reset(&(ns, name)),
        Err(e) => ctx.metrics.sync_error(&name, &ns, e.metric_label()),
    }
    result
}

/// One reconcile: gathers the inputs [`plan`] decides on (the target Secret, the provider data,
/// the orphan candidates, the template sources) and executes the [`plan::Steps`] it returns.
async fn reconcile_es_inner(es: &Arc<ExternalSecret>, ctx: &Context) -> Result<Action, Error> {
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
    let Some(target) = ex.target_view().await? else {
        // The Secret this controller just wrote is on its way through the watch, whose event
        // brings this ExternalSecret back (`target::Source::Lagging`).
        return Ok(Action::requeue(target::LAG_RECHECK));
    };
    let jitter = jitter_for(view.refresh_interval);
    if let Decision::Skip { requeue, status } =
        plan::decide_on(view, &target.validity(), ex.start, jitter)
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
    let mut job = PlanJob {
        es: es.clone(),
        view: view.clone(),
        provider,
        existing: None,
        owned_secret_names: owned,
        sources,
        start: ex.start,
        jitter,
    };
    match target {
        Target::Read(s) => job.existing = s.map(|s| *s),
        Target::Verified(meta, known) => {
            // The desired Secret (planned as if absent) against what the cache shows: when they
            // agree, the Secret as it is equals the desired one and no write (nor GET) is needed.
            let pool = &ctx.render_pool;
            match unchanged_steps_on_pool(pool, ctx.templates.clone(), job, meta, known).await? {
                Ok(steps) => return ex.run(steps).await,
                Err(back) => {
                    job = *back;
                    job.existing = ex.read_target().await?;
                }
            }
        }
    }
    let steps = plan_on_pool(&ctx.render_pool, ctx.templates.clone(), job).await?;
    ex.run(steps).await
}

/// Executes [`plan::Steps`] for one ExternalSecret.
struct Executor<'a> {
    es: &'a ExternalSecret,
    ctx: &'a Context,
    secrets: Api<Secret>,
    view: EsView,
    start: DateTime<Utc>,
}

impl<'a> Executor<'a> {
    fn new(es: &'a ExternalSecret, ctx: &'a Context) -> Self {
        let ns = es.namespace().unwrap_or_default();
        let mut view = es_view(es, es.status.as_ref().and_then(|s| s.observed_generation));
        view.status = ctx.status_for(es, std::mem::take(&mut view.status));
        view.has_finalizer |= ctx
            .finalized
            .is_added(es.uid().as_deref(), es.resource_version().as_deref());
        Executor {
            es,
            ctx,
            secrets: Api::namespaced(ctx.client.clone(), &ns),
            view,
            start: now_seconds(),
        }
    }

    async fn target(&self) -> Result<Option<Secret>, kube::Error> {
        self.secrets.get_opt(&self.view.target_name).await
    }

    /// The target as far as the reconcile needs it before planning: from the managed-Secret
    /// cache when that settles it (see [`Target`]), otherwise read. Creation policies that adopt
    /// Secrets this controller did not create (Merge, None, CreateOrMerge) always read. `None`:
    /// wait for the watch to deliver the Secret this controller wrote ([`Source::Lagging`]).
    async fn target_view(&self) -> Result<Option<Target>, kube::Error> {
        let view = &self.view;
        if !self.ctx.managed_secrets.is_ready()
            || !matches!(
                view.creation,
                CreationPolicy::Owner | CreationPolicy::Orphan
            )
        {
            return self
                .read_target()
                .await
                .map(|s| Some(Target::Read(s.map(Box::new))));
        }
        let key = (view.namespace.clone(), view.target_name.clone());
        let known = self.ctx.verified_target(&key);
        let cached = self
            .ctx
            .managed_secrets
            .get(&view.namespace, &view.target_name);
        let cached_version = cached.as_ref().map(|m| &*m.resource_version);
        match (
            target::source(cached_version, known.as_ref()),
            cached,
            known,
        ) {
            (Source::Absent, _, _) => Ok(Some(Target::Read(None))),
            (Source::Verified, Some(meta), Some(known)) => Ok(Some(Target::Verified(meta, known))),
            (Source::Lagging, _, Some(known)) => {
                let waited = VerifiedTarget {
                    waited: true,
                    ..known
                };
                self.ctx.remember_target(key, Some(waited));
                Ok(None)
            }
            _ => self
                .read_target()
                .await
                .map(|s| Some(Target::Read(s.map(Box::new)))),
        }
    }

    /// GETs the target and remembers it when its data matches its data-hash annotation.
    async fn read_target(&self) -> Result<Option<Secret>, kube::Error> {
        let s = self.target().await?;
        let key = (self.view.namespace.clone(), self.view.target_name.clone());
        self.ctx
            .remember_target(key, s.as_ref().and_then(VerifiedTarget::of));
        Ok(s)
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
            transforms: Transforms::Pool(&self.ctx.render_pool, &self.ctx.templates),
            gate: Some(self.ctx.store_gate.clone()),
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
                self.patch(&patch).await?;
                ctx.finalized
                    .added(self.es.uid(), self.es.resource_version());
                Ok(())
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
                ctx.remember_target((view.namespace.clone(), view.target_name.clone()), None);
                Ok(())
            }
            Step::Event(ev) => {
                publish(ctx, self.es, ev);
                Ok(())
            }
            Step::DeleteOrphan(name) => {
                if self.delete(name).await? {
                    publish(ctx, self.es, &plan::orphan_deleted_event());
                }
                Ok(())
            }
            Step::Write(w) => {
                let pp = PostParams {
                    field_manager: Some(view.field_manager()),
                    ..Default::default()
                };
                let key = (view.namespace.clone(), view.target_name.clone());
                let (client, ns) = (&ctx.client, Some(view.namespace.as_str()));
                let written = match w {
                    SecretWrite::None => return Ok(()),
                    SecretWrite::Create(s) => writes::put(client, ns, None, &pp, &**s).await,
                    SecretWrite::Update(s) => {
                        writes::put(client, ns, Some(&view.target_name), &pp, &**s).await
                    }
                    SecretWrite::Delete(n) => {
                        ctx.remember_target(key, None);
                        return self.delete(n).await.map(|_| ());
                    }
                };
                // A failed write (e.g. a Secret this controller has not seen already exists)
                // makes the next reconcile read the target (a remembered but unverified target).
                let (known, result) = match written {
                    Ok(w) => (VerifiedTarget::of(&w.into_secret()), Ok(())),
                    Err(e) => {
                        let unverified = VerifiedTarget {
                            resource_version: String::new(),
                            type_: String::new(),
                            immutable: false,
                            waited: false,
                        };
                        (Some(unverified), Err(e))
                    }
                };
                ctx.remember_target(key, known);
                result
            }
            Step::Rollout(hash) => {
                ctx.rollouts
                    .on_secret_changed(&ctx.client, &view.namespace, &view.target_name, hash)
                    .await;
                Ok(())
            }
            Step::Status(st) => write_status(ctx, self.es, st).await,
            Step::ReadyMetric(status) => {
                ctx.metrics.es.ready(&view.name, &view.namespace, status);
                Ok(())
            }
        }
    }

    async fn patch(&self, patch: &serde_json::Value) -> Result<(), kube::Error> {
        let ns = Some(self.view.namespace.as_str());
        let patch = Patch::Merge(patch);
        writes::patch::<ExternalSecret, _>(&self.ctx.client, ns, &self.view.name, None, &patch)
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

    #[test]
    fn an_added_finalizer_is_known_until_the_watch_delivers_another_version() {
        let f = AddedFinalizers::default();
        assert!(!f.is_added(Some("u1"), Some("10")));
        f.added(Some("u1".into()), Some("10".into()));
        assert!(
            f.is_added(Some("u1"), Some("10")),
            "the version that was patched"
        );
        assert!(
            !f.is_added(Some("u1"), Some("11")),
            "any other version answers for itself"
        );
        assert!(!f.is_added(Some("u2"), Some("10")));
        f.delivered("u1", Some("10"));
        assert!(
            f.is_added(Some("u1"), Some("10")),
            "a late copy of the patched version"
        );
        f.delivered("u1", Some("11"));
        assert!(
            !f.is_added(Some("u1"), Some("10")),
            "forgotten once the cache moved on"
        );
        assert!(f.lock().is_empty());
    }

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

    /// The written status is forgotten once the watch delivers an object that shows it.
    #[test]
    fn a_written_status_is_shown_once_the_cache_has_it() {
        let es = |status: serde_json::Value| -> ExternalSecret {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
                "metadata": {"name": "a", "namespace": "app", "uid": "u", "generation": 1},
                "spec": {}, "status": status
            }))
            .unwrap()
        };
        let synced = es(serde_json::json!({
            "refreshTime": "2026-01-01T00:00:05Z", "syncedResourceVersion": "1-a",
            "observedGeneration": 1
        }));
        let written = status_view(&synced, Some(1));
        // Not yet delivered (no status, or the previous sync's): still in flight.
        assert!(!shows(&es(serde_json::json!({})), &written));
        let older = es(serde_json::json!({
            "refreshTime": "2026-01-01T00:00:00Z", "syncedResourceVersion": "1-a",
            "observedGeneration": 1
        }));
        assert!(!shows(&older, &written));
        // Delivered, or overtaken by a newer sync.
        assert!(shows(&synced, &written));
        let newer = es(serde_json::json!({
            "refreshTime": "2026-01-01T00:01:00Z", "syncedResourceVersion": "1-a",
            "observedGeneration": 1
        }));
        assert!(shows(&newer, &written));
    }
}
