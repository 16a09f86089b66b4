//! Planning off the async workers: [`plan_on_pool`] runs [`plan::plan`] (which renders the
//! ExternalSecret's templates, the CPU-heavy part of a reconcile) on the [`RenderPool`], with
//! owned inputs, so a poison template never holds a tokio worker: the other reconcilers, the
//! probes and `/metrics` keep being served while it runs, and shutdown does not wait for it.
//! ExternalSecrets without a template are planned inline (nothing heavy runs).

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use esr_api::v1::ExternalSecret;
use k8s_openapi::api::core::v1::Secret;

use crate::externalsecret::error::SyncError;
use crate::externalsecret::managed::CachedSecret;
use crate::externalsecret::pipeline::Assembled;
use crate::externalsecret::pipeline::DataMap;
use crate::externalsecret::plan::{
    self, EsView, PlanInput, RenderError, Rendered, Renderer, Steps,
};
use crate::externalsecret::target::{VerifiedTarget, unchanged_target};
use crate::externalsecret::template::{
    RenderPool, RenderPoolError, TemplateEngine, TemplateSources,
};

/// Everything [`plan::plan`] needs, owned (it moves to a blocking thread).
pub struct PlanJob {
    /// The ExternalSecret (its template).
    pub es: Arc<ExternalSecret>,
    /// Its reduced view.
    pub view: EsView,
    /// Provider data, or why fetching it failed.
    pub provider: Result<Assembled, SyncError>,
    /// The existing target Secret.
    pub existing: Option<Secret>,
    /// Names of Secrets in the namespace carrying our created-by label.
    pub owned_secret_names: Vec<String>,
    /// The loaded `templateFrom` sources.
    pub sources: TemplateSources,
    /// Reconcile start.
    pub start: DateTime<Utc>,
    /// Jitter added to the periodic requeue.
    pub jitter: Duration,
}

impl PlanJob {
    /// Plans (rendering with `templates`) and returns the steps to execute.
    fn steps(self, templates: &dyn TemplateEngine) -> Steps {
        let renderer = templates.renderer(&self.es, &self.sources);
        let p = plan::plan(PlanInput {
            es: &self.view,
            provider: self.provider,
            existing: self.existing.as_ref(),
            owned_secret_names: &self.owned_secret_names,
            renderer: renderer.as_ref(),
            start: self.start,
            jitter: self.jitter,
        });
        p.steps(&self.view)
    }

    /// For a target verified unchanged (its cached metadata `meta`, and `known`): the steps
    /// planned against the target as it is, when the Secret this ExternalSecret wants (planned as
    /// if absent) matches it; otherwise the job back (the target may differ: read it and plan
    /// with it). Both plans use one render.
    fn steps_if_unchanged(
        self,
        templates: &dyn TemplateEngine,
        meta: &CachedSecret,
        known: &VerifiedTarget,
    ) -> Result<Steps, Box<PlanJob>> {
        let steps = self.provider.as_ref().ok().and_then(|data| {
            let renderer = templates.renderer(&self.es, &self.sources);
            let once = RenderOnce::new(renderer.as_ref());
            let input = |provider, existing| PlanInput {
                es: &self.view,
                provider,
                existing,
                owned_secret_names: &self.owned_secret_names,
                renderer: &once,
                start: self.start,
                jitter: self.jitter,
            };
            let desired = match plan::plan(input(Ok(data.clone()), None)).write {
                plan::SecretWrite::Create(s) => *s,
                _ => return None,
            };
            let existing = unchanged_target(desired, meta, known)?;
            let p = plan::plan(input(Ok(data.clone()), Some(&existing)));
            Some(p.steps(&self.view))
        });
        steps.ok_or_else(|| Box::new(self))
    }

    fn has_template(&self) -> bool {
        self.es
            .spec
            .target
            .as_ref()
            .is_some_and(|t| t.template.is_some())
    }
}

/// Plans `job` on `pool` when the ExternalSecret has a template (inline otherwise).
pub async fn plan_on_pool(
    pool: &RenderPool,
    templates: Arc<dyn TemplateEngine>,
    job: PlanJob,
) -> Result<Steps, RenderPoolError> {
    if !job.has_template() {
        return Ok(job.steps(templates.as_ref()));
    }
    pool.run(move || job.steps(templates.as_ref())).await
}

/// [`PlanJob::steps_if_unchanged`] on `pool` when the ExternalSecret has a template (inline
/// otherwise).
pub async fn unchanged_steps_on_pool(
    pool: &RenderPool,
    templates: Arc<dyn TemplateEngine>,
    job: PlanJob,
    meta: CachedSecret,
    known: VerifiedTarget,
) -> Result<Result<Steps, Box<PlanJob>>, RenderPoolError> {
    if !job.has_template() {
        return Ok(job.steps_if_unchanged(templates.as_ref(), &meta, &known));
    }
    pool.run(move || job.steps_if_unchanged(templates.as_ref(), &meta, &known))
        .await
}

/// A renderer that renders once: the same data again gets the first result (the two plans of
/// [`PlanJob::steps_if_unchanged`] render the same data).
struct RenderOnce<'a> {
    inner: &'a dyn Renderer,
    first: std::sync::Mutex<Option<(DataMap, Result<Rendered, RenderError>)>>,
}

impl<'a> RenderOnce<'a> {
    fn new(inner: &'a dyn Renderer) -> Self {
        RenderOnce {
            inner,
            first: std::sync::Mutex::new(None),
        }
    }
}

impl Renderer for RenderOnce<'_> {
    fn render(&self, data: &DataMap) -> Result<Rendered, RenderError> {
        let mut first = self.first.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((d, r)) = first.as_ref()
            && d == data
        {
            return r.clone();
        }
        let r = self.inner.render(data);
        *first = Some((data.clone(), r.clone()));
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::externalsecret::convert::es_view;
    use crate::externalsecret::plan::{End, Step};
    use crate::externalsecret::template::{EsoTemplates, RenderBounds};

    fn es(template: &str) -> Arc<ExternalSecret> {
        let mut e: ExternalSecret = yaml_serde::from_str(
            r#"
apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {name: x, namespace: app, uid: u1, generation: 1}
spec:
  refreshInterval: 1h
  target:
    template:
      data: {k: "placeholder"}
"#,
        )
        .unwrap();
        if let Some(d) = e
            .spec
            .target
            .as_mut()
            .and_then(|t| t.template.as_mut())
            .and_then(|t| t.data.as_mut())
        {
            d.insert("k".into(), template.into());
        }
        Arc::new(e)
    }

    fn job(es: Arc<ExternalSecret>) -> PlanJob {
        let view = es_view(&es, None);
        PlanJob {
            es,
            view,
            provider: Ok(Assembled {
                data: [("user".to_string(), b"bob".to_vec())].into(),
                ..Default::default()
            }),
            existing: None,
            owned_secret_names: Vec::new(),
            sources: TemplateSources::default(),
            start: DateTime::from_timestamp(1_700_000_000, 0).unwrap(),
            jitter: Duration::ZERO,
        }
    }

    fn written(steps: &Steps) -> Option<&Secret> {
        steps.steps.iter().find_map(|s| match s {
            Step::Write(plan::SecretWrite::Create(s)) => Some(&**s),
            _ => None,
        })
    }

    /// The same data renders once; other data renders again.
    #[test]
    fn render_once_renders_the_same_data_once() {
        struct Counting(std::sync::atomic::AtomicUsize);
        impl Renderer for Counting {
            fn render(&self, _d: &DataMap) -> Result<Rendered, RenderError> {
                self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Ok(Rendered::default())
            }
        }
        let counting = Counting(Default::default());
        let once = RenderOnce::new(&counting);
        let a: DataMap = [("k".to_string(), b"a".to_vec())].into();
        let b: DataMap = [("k".to_string(), b"b".to_vec())].into();
        for d in [&a, &a, &b, &b] {
            once.render(d).unwrap();
        }
        assert_eq!(counting.0.load(std::sync::atomic::Ordering::Relaxed), 2);
    }

    /// A verified target whose metadata matches the desired Secret is planned as it is: no
    /// write; one whose cached metadata differs must be read.
    #[tokio::test(flavor = "current_thread")]
    async fn an_unchanged_target_is_planned_without_a_read() {
        let pool = RenderPool::new(1);
        let templates: Arc<dyn TemplateEngine> = Arc::new(EsoTemplates::new());
        let e = es("{{ .user | upper }}");
        let first = plan_on_pool(&pool, templates.clone(), job(e.clone()))
            .await
            .unwrap();
        let mut created = written(&first).expect("a create").clone();
        created.metadata.resource_version = Some("7".into());
        let known = VerifiedTarget::of(&created).expect("data matches its hash");
        let meta = CachedSecret::of(&created.metadata);
        let steps = unchanged_steps_on_pool(
            &pool,
            templates.clone(),
            job(e.clone()),
            meta.clone(),
            known.clone(),
        )
        .await
        .unwrap()
        .ok()
        .expect("unchanged");
        assert!(
            !steps.steps.iter().any(|s| matches!(s, Step::Write(_))),
            "{:?}",
            steps.steps
        );
        // Another template output: the Secret must be read.
        let changed = es("{{ .user }}");
        assert!(
            unchanged_steps_on_pool(&pool, templates, job(changed), meta, known)
                .await
                .unwrap()
                .is_err()
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_template_is_rendered_on_the_pool() {
        let pool = RenderPool::new(1);
        let steps = plan_on_pool(
            &pool,
            Arc::new(EsoTemplates::new()),
            job(es("{{ .user | upper }}")),
        )
        .await
        .unwrap();
        let s = written(&steps).expect("a create");
        assert_eq!(s.data.as_ref().unwrap()["k"].0, b"BOB".to_vec());
        assert!(matches!(steps.end, End::Done { .. }));
    }

    /// The poison render runs on the pool: the single-threaded runtime (like one tokio worker)
    /// keeps serving other tasks, and closing the pool returns at once, before the render stops.
    #[tokio::test(flavor = "current_thread")]
    async fn a_poison_template_holds_no_worker_and_close_does_not_wait() {
        let pool = RenderPool::new(1);
        // No deadline and a cancel flag nobody sets: only closing the pool ends the wait.
        let templates = Arc::new(EsoTemplates::with_bounds(RenderBounds {
            timeout: Duration::from_secs(24 * 3600),
            ..RenderBounds::default()
        }));
        let poison = job(es(
            "{{ range until 1000000 }}{{ $x := until 1000000 }}{{ end }}",
        ));
        let planning = tokio::spawn({
            let pool = pool.clone();
            let templates = templates.clone();
            async move { plan_on_pool(&pool, templates, poison).await }
        });
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
        let canary = tokio::spawn(async { (0..1000u32).sum::<u32>() });
        assert_eq!(canary.await.unwrap(), 499_500);
        assert!(!planning.is_finished());
        pool.close();
        assert_eq!(
            planning.await.unwrap().unwrap_err(),
            RenderPoolError::Closed
        );
        templates.cancel_all();
    }
}
