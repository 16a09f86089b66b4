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
use crate::externalsecret::error::SyncError;
use crate::externalsecret::fetch::{FetchEnv, Fetched, fetch, referenced_stores};
use crate::externalsecret::pipeline::Assembled;
use crate::externalsecret::plan::{
    self, Decision, EsStatus, EsView, EventRec, EventType, LABEL_OWNER, Outcome, PlanInput,
    SecretWrite,
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

async fn reconcile_es_inner(es: &ExternalSecret, ctx: &Context) -> Result<Action, Error> {
    let name = es.name_any();
    let ns = es.namespace().unwrap_or_default();
    let api: Api<ExternalSecret> = Api::namespaced(ctx.client.clone(), &ns);
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
    let start = now_seconds();
    let mut view: EsView = es_view(es, es.status.as_ref().and_then(|s| s.observed_generation));
    view.status = ctx.status_for(es, std::mem::take(&mut view.status));

    // ES deletion: honour deletionPolicy, then drop the finalizer.
    if es.meta().deletion_timestamp.is_some() {
        if es.finalizers().iter().any(|f| f == plan::FINALIZER) {
            let existing = secrets.get_opt(&view.target_name).await?;
            if plan::delete_target_on_es_deletion(&view, existing.as_ref()) {
                match secrets
                    .delete(&view.target_name, &DeleteParams::default())
                    .await
                {
                    Ok(_) => {
                        info!(es = %name, namespace = %ns, secret = %view.target_name, "deleted target secret")
                    }
                    Err(e) if esr_provider::error::kube_status_code(&e) == Some(404) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            let remaining: Vec<String> = es
                .finalizers()
                .iter()
                .filter(|f| *f != plan::FINALIZER)
                .cloned()
                .collect();
            let patch = serde_json::json!({"metadata": {"finalizers": remaining, "resourceVersion": es.resource_version()}});
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        }
        ctx.metrics.forget(&name, &ns);
        ctx.forget_status(es);
        return Ok(Action::await_change());
    }
    // A store of another controller class: that controller's ExternalSecret. Skip before the
    // finalizer and any status write (the refresh decision below may write status).
    if let Ok(true) = esr_provider::store::any_store_unmanaged(
        &ctx.stores,
        &ns,
        &referenced_stores(es),
        &ctx.config.controller_class,
    )
    .await
    {
        debug!(es = %name, "skipping: store of another controller class");
        return Ok(Action::await_change());
    }
    if !es.finalizers().iter().any(|f| f == plan::FINALIZER) {
        let mut f = es.finalizers().to_vec();
        f.push(plan::FINALIZER.to_string());
        let patch = serde_json::json!({"metadata": {"finalizers": f}});
        api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    if !ctx.config.cluster_stores
        && es.spec.secret_store_ref.as_ref().and_then(|r| r.kind)
            == Some(esr_api::v1::SecretStoreKind::ClusterSecretStore)
    {
        debug!(es = %name, "skipping: ClusterSecretStore reconciler disabled");
        return Ok(Action::await_change());
    }

    if let Some(err) =
        plan::generic_target_error(view.manifest.as_ref(), ctx.config.allow_generic_targets)
    {
        let p = plan::generic_target_failed(&view, &err, start);
        for ev in &p.events {
            publish(&ctx.es_recorder, es, ev).await;
        }
        if p.status != view.status {
            write_status(ctx, &api, es, &p.status).await?;
        }
        if let Some(c) = p.status.ready() {
            Metrics::set_condition(&ctx.metrics.es_condition, &name, &ns, "Ready", &c.status);
        }
        warn!(es = %name, namespace = %ns, error = %err, "generic target refused (terminal until the next change)");
        return Ok(Action::await_change());
    }

    let existing = secrets.get_opt(&view.target_name).await?;
    let jitter = jitter_for(view.refresh_interval);
    match plan::decide(&view, existing.as_ref(), start, jitter) {
        Decision::Skip { requeue, status } => {
            if let Some(st) = status {
                write_status(ctx, &api, es, &st).await?;
            }
            debug!(es = %name, namespace = %ns, "skipping refresh");
            return Ok(to_action(requeue));
        }
        Decision::Sync => {}
    }

    let env = FetchEnv {
        lookup: &ctx.stores,
        registry: &ctx.registry,
        kube: ctx.kube.clone(),
        recorder: Arc::new(ctx.metrics.clone()),
        resolve: ResolveOptions {
            controller_class: ctx.config.controller_class.clone(),
            flood_gate: ctx.config.flood_gate,
        },
        transformer: ctx.templates.transformer(),
    };
    let provider: Result<Assembled, SyncError> = match fetch(&env, es).await {
        Fetched::Skip => {
            debug!(es = %name, "skipping: store of another controller class");
            return Ok(Action::await_change());
        }
        Fetched::Data(d) => d,
    };

    let owned: Vec<String> = if view.creation == plan::CreationPolicy::Owner {
        ctx.owned_secret_names(
            &ns,
            &crate::externalsecret::hash::created_by_label(&ns, &name),
        )
        .await?
    } else {
        Vec::new()
    };

    let sources = load_sources(ctx.kube.as_ref(), es).await;
    let renderer = ctx.templates.renderer(es, &sources);
    let p = plan::plan(PlanInput {
        es: &view,
        provider,
        existing: existing.as_ref(),
        owned_secret_names: &owned,
        renderer: renderer.as_ref(),
        start,
        jitter,
    });
    drop(renderer);

    for ev in &p.events {
        publish(&ctx.es_recorder, es, ev).await;
    }
    let mut status = p.status.clone();
    let mut outcome = p.outcome.clone();
    if !matches!(outcome, Outcome::Retry(_)) || !matches!(p.write, SecretWrite::None) {
        for orphan in &p.delete_orphans {
            match secrets.delete(orphan, &DeleteParams::default()).await {
                Ok(_) => publish(&ctx.es_recorder, es, &plan::orphan_deleted_event()).await,
                Err(e) if esr_provider::error::kube_status_code(&e) == Some(404) => {}
                Err(e) => {
                    let kind = plan::WriteKind::DeleteOrphans;
                    let err = plan::write_error(&view, kind, &kube_error_text(&e), None);
                    let (st, ev) = plan::write_failed(&view, &view.status, kind, &err, start);
                    publish(&ctx.es_recorder, es, &ev).await;
                    write_status(ctx, &api, es, &st).await?;
                    return Err(Error::Sync(err));
                }
            }
        }
        let fm = view.field_manager();
        let pp = PostParams {
            field_manager: Some(fm),
            ..Default::default()
        };
        let res = match &p.write {
            SecretWrite::None => Ok(()),
            SecretWrite::Create(s) => secrets.create(&pp, s).await.map(|_| ()),
            SecretWrite::Update(s) => secrets.replace(&view.target_name, &pp, s).await.map(|_| ()),
            SecretWrite::Delete(n) => match secrets.delete(n, &DeleteParams::default()).await {
                Err(e) if esr_provider::error::kube_status_code(&e) == Some(404) => Ok(()),
                other => other.map(|_| ()),
            },
        };
        match res {
            Ok(()) => {
                if let Some(ev) = &p.write_event {
                    publish(&ctx.es_recorder, es, ev).await;
                }
                // Rollout on rotation (opt-in workloads; a no-op when the hash is unchanged).
                if let SecretWrite::Create(s) | SecretWrite::Update(s) = &p.write
                    && let Some(h) = s
                        .metadata
                        .annotations
                        .as_ref()
                        .and_then(|a| a.get("reconcile.external-secrets.io/data-hash"))
                {
                    crate::common::rollout::on_secret_changed(
                        &ctx.client,
                        &ns,
                        &view.target_name,
                        h,
                    )
                    .await;
                }
            }
            Err(e) if is_conflict(&e) => {
                debug!(es = %name, "conflict while writing secret, requeueing");
                return Ok(Action::requeue(Duration::from_millis(10)));
            }
            Err(e) => {
                let (kind, previous) = match (&p.write, &outcome) {
                    (_, Outcome::Terminal(t)) => (plan::WriteKind::Immutable, Some(t)),
                    (SecretWrite::Delete(_), _) => (plan::WriteKind::Delete, None),
                    (SecretWrite::Create(_), _) => (plan::WriteKind::Create, None),
                    _ => (plan::WriteKind::Update, None),
                };
                let err = plan::write_error(&view, kind, &kube_error_text(&e), previous);
                let (st, ev) = plan::write_failed(&view, &view.status, kind, &err, start);
                publish(&ctx.es_recorder, es, &ev).await;
                status = st;
                outcome = Outcome::Retry(err);
            }
        }
    }

    if status != view.status
        && let Err(e) = write_status(ctx, &api, es, &status).await
    {
        if is_conflict(&e) {
            return Ok(Action::requeue(Duration::from_millis(10)));
        }
        return Err(e.into());
    }
    if let Some(c) = status.ready() {
        Metrics::set_condition(&ctx.metrics.es_condition, &name, &ns, "Ready", &c.status);
    }
    match outcome {
        Outcome::Done => {
            if p.write != SecretWrite::None {
                info!(es = %name, namespace = %ns, "reconciled secret");
            }
            Ok(to_action(p.requeue))
        }
        Outcome::Terminal(t) => {
            warn!(es = %name, namespace = %ns, error = %t, "sync failed (terminal until the next change)");
            ctx.metrics.sync_error(&name, &ns, t.metric_label());
            Ok(Action::await_change())
        }
        Outcome::Retry(t) => Err(Error::Sync(t)),
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
