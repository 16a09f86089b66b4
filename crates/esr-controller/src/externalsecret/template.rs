//! Template rendering seam: `templateFrom` sources are loaded here (IO), rendering itself is done
//! by a [`TemplateEngine`] (implemented over esr-template).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use esr_api::v1::ExternalSecret;
use esr_provider::KubeAccess;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::ResourceExt;

use esr_template::RenderLimits;

use crate::externalsecret::pipeline::{KeyTransformer, PipelineError};
use crate::externalsecret::plan::Renderer;

/// The ConfigMaps and Secrets an ExternalSecret's `templateFrom` references (same namespace).
#[derive(Debug, Clone, Default)]
pub struct TemplateSources {
    /// ConfigMaps by name.
    pub config_maps: BTreeMap<String, ConfigMap>,
    /// Secrets by name.
    pub secrets: BTreeMap<String, Secret>,
    /// The first error met while loading (ESO: `error fetching templateFrom data: ...`).
    pub error: Option<String>,
}

/// Loads the `templateFrom` sources of an ExternalSecret.
pub async fn load_sources(kube: &dyn KubeAccess, es: &ExternalSecret) -> TemplateSources {
    let mut out = TemplateSources::default();
    let ns = es.namespace().unwrap_or_default();
    let Some(t) = es.spec.target.as_ref().and_then(|t| t.template.as_ref()) else {
        return out;
    };
    for tf in t.template_from.iter().flatten() {
        if let Some(cm) = &tf.config_map
            && !out.config_maps.contains_key(&cm.name)
        {
            match kube.get_config_map(&ns, &cm.name).await {
                Ok(Some(c)) => {
                    out.config_maps.insert(cm.name.clone(), c);
                }
                Ok(None) => {
                    out.error
                        .get_or_insert_with(|| format!("configmaps {:?} not found", cm.name));
                }
                Err(e) => {
                    out.error.get_or_insert_with(|| e.to_string());
                }
            }
        }
        if let Some(s) = &tf.secret
            && !out.secrets.contains_key(&s.name)
        {
            match kube.get_secret(&ns, &s.name).await {
                Ok(Some(c)) => {
                    out.secrets.insert(s.name.clone(), c);
                }
                Ok(None) => {
                    out.error
                        .get_or_insert_with(|| format!("secrets {:?} not found", s.name));
                }
                Err(e) => {
                    out.error.get_or_insert_with(|| e.to_string());
                }
            }
        }
    }
    out
}

/// Renders templates for the controller and `esr render`.
pub trait TemplateEngine: Send + Sync {
    /// A renderer for this ExternalSecret's `target.template` with its loaded sources.
    fn renderer<'a>(
        &'a self,
        es: &'a ExternalSecret,
        sources: &'a TemplateSources,
    ) -> Box<dyn Renderer + 'a>;
    /// The rewrite `transform` renderer.
    fn transformer(&self) -> &dyn KeyTransformer;
}

/// The default wall-clock limit of one render (`--template-timeout`).
pub const DEFAULT_RENDER_TIMEOUT: Duration = Duration::from_secs(5);

/// The bounds of every render: a wall-clock limit, a memory budget (every value the render
/// builds counts; see [`esr_template::RenderLimits`]) and a cancel flag set on shutdown. A render
/// past either limit fails that ExternalSecret with a value-free message
/// (`could not execute template: the render exceeded its deadline of 5s`), and the controller's
/// usual error backoff applies.
#[derive(Debug, Clone)]
pub struct RenderBounds {
    /// Wall-clock limit of one render (the templates of one Secret, or one rewrite transform).
    pub timeout: Duration,
    /// Memory budget of one render, in bytes.
    pub max_bytes: usize,
    /// Set it to stop every running render at its next step (shutdown).
    pub cancel: Arc<AtomicBool>,
}

impl Default for RenderBounds {
    fn default() -> Self {
        RenderBounds {
            timeout: DEFAULT_RENDER_TIMEOUT,
            max_bytes: esr_template::limits::MAX_RENDER_BYTES,
            cancel: Arc::new(AtomicBool::new(false)),
        }
    }
}

impl RenderBounds {
    /// The limits of a render starting now.
    fn limits(&self) -> RenderLimits {
        RenderLimits {
            max_bytes: self.max_bytes,
            deadline: Instant::now().checked_add(self.timeout),
            cancel: Some(self.cancel.clone()),
        }
    }

    /// The controller's text for a render stopped by its bounds (never a value).
    fn stop_text(&self, e: &esr_template::TemplateError) -> Option<String> {
        use esr_template::TemplateError;
        match e {
            TemplateError::Budget(n) => Some(format!(
                "the render exceeded its memory budget of {n} bytes"
            )),
            TemplateError::Deadline => Some(format!(
                "the render exceeded its deadline of {}",
                esr_api::duration::GoDuration::from_std(self.timeout)
            )),
            TemplateError::Cancelled => {
                Some("the render was cancelled (the controller is stopping)".to_string())
            }
            _ => None,
        }
    }
}

/// ESO's template engine v2: [`esr_template::eso::render_secret`] (templateFrom in order, then
/// `template.data`, then the metadata templates) and `rewrite_transform`, within
/// [`RenderBounds`]. Errors never include values (esr-template redacts and scrubs them).
#[derive(Debug, Default, Clone)]
pub struct EsoTemplates {
    bounds: RenderBounds,
}

impl EsoTemplates {
    /// The engine, with the default bounds.
    pub fn new() -> Self {
        EsoTemplates::default()
    }

    /// The engine with `bounds`.
    pub fn with_bounds(bounds: RenderBounds) -> Self {
        EsoTemplates { bounds }
    }

    /// Stops every running render at its next step, and every later one at its first (shutdown).
    pub fn cancel_all(&self) {
        self.bounds.cancel.store(true, Ordering::Relaxed);
    }
}

struct EsoRenderer<'a> {
    es: &'a ExternalSecret,
    sources: &'a TemplateSources,
    bounds: &'a RenderBounds,
}

impl crate::externalsecret::plan::Renderer for EsoRenderer<'_> {
    fn render(
        &self,
        data: &crate::externalsecret::pipeline::DataMap,
    ) -> Result<crate::externalsecret::plan::Rendered, crate::externalsecret::plan::RenderError>
    {
        use crate::externalsecret::plan::{RenderError, Rendered};
        use esr_template::eso::{RenderInput, RenderedSecret, TemplateError, render_secret_with};
        let Some(t) = self
            .es
            .spec
            .target
            .as_ref()
            .and_then(|t| t.template.as_ref())
        else {
            return Ok(Rendered::default());
        };
        if let Some(e) = &self.sources.error {
            return Err(RenderError::Fetch(e.clone()));
        }
        let sources = esr_template::eso::TemplateSources {
            config_maps: self
                .sources
                .config_maps
                .iter()
                .map(|(k, c)| (k.clone(), c.data.clone().unwrap_or_default()))
                .collect(),
            secrets: self
                .sources
                .secrets
                .iter()
                .map(|(k, s)| {
                    (
                        k.clone(),
                        s.data
                            .iter()
                            .flatten()
                            .map(|(dk, dv)| (dk.clone(), dv.0.clone()))
                            .collect(),
                    )
                })
                .collect(),
        };
        let empty = BTreeMap::new();
        let base = RenderedSecret::default();
        let input = RenderInput {
            template: Some(t),
            data,
            sources: &sources,
            base: &base,
            es_labels: &empty,
            es_annotations: &empty,
        };
        let out = render_secret_with(&input, &self.bounds.limits()).map_err(|e| {
            if let Some(text) = self.bounds.stop_text(&e) {
                return RenderError::Exec(text);
            }
            match e {
                TemplateError::TemplateFrom(m) => RenderError::Fetch(m),
                TemplateError::Execute(m) => RenderError::Exec(m),
                other => RenderError::Exec(other.to_string()),
            }
        })?;
        Ok(Rendered {
            data: out.data,
            labels: out.labels,
            annotations: out.annotations,
        })
    }
}

impl KeyTransformer for EsoTemplates {
    fn transform_key(&self, template: &str, key: &str) -> Result<String, PipelineError> {
        esr_template::eso::rewrite_transform_with(template, key, &self.bounds.limits()).map_err(
            |e| {
                PipelineError::Transform(match self.bounds.stop_text(&e) {
                    Some(text) => format!("unable to execute transform template: {text}"),
                    None => e.to_string(),
                })
            },
        )
    }
}

impl TemplateEngine for EsoTemplates {
    fn renderer<'a>(
        &'a self,
        es: &'a ExternalSecret,
        sources: &'a TemplateSources,
    ) -> Box<dyn Renderer + 'a> {
        Box::new(EsoRenderer {
            es,
            sources,
            bounds: &self.bounds,
        })
    }
    fn transformer(&self) -> &dyn KeyTransformer {
        self
    }
}

/// A bounded pool for renders, off the async workers: at most `size` renders run at once, each
/// on a blocking thread (`spawn_blocking`), so a heavy template never stalls the reconcilers of
/// other objects, the probes or `/metrics`. The render itself enforces its [`RenderBounds`]
/// (deadline, memory budget, cancellation), so a blocking thread is never held longer than the
/// timeout plus one non-interruptible function call. Closing the pool (shutdown) refuses later
/// renders and stops waiting for the running ones: their callers get
/// [`RenderPoolError::Closed`] at once, and the renders themselves stop at their next step once
/// their cancel flag is set.
#[derive(Debug, Clone)]
pub struct RenderPool {
    permits: Arc<tokio::sync::Semaphore>,
    closed: Arc<tokio::sync::watch::Sender<bool>>,
}

/// The default size of the [`RenderPool`] (`--template-workers`): the number of CPUs.
pub fn default_render_workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// A render could not run on the pool.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderPoolError {
    /// The render panicked (a bug; the message never carries a value).
    #[error("could not execute template: the render failed unexpectedly")]
    Panicked,
    /// The pool was closed.
    #[error("could not execute template: the controller is stopping")]
    Closed,
}

impl RenderPool {
    /// A pool running at most `size` renders at once (at least one).
    pub fn new(size: usize) -> Self {
        RenderPool {
            permits: Arc::new(tokio::sync::Semaphore::new(size.max(1))),
            closed: Arc::new(tokio::sync::watch::Sender::new(false)),
        }
    }

    /// Runs `render` on a blocking thread once a slot is free; [`RenderPoolError::Closed`] as
    /// soon as the pool is closed, even while `render` is still running.
    pub async fn run<T, F>(&self, render: F) -> Result<T, RenderPoolError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let mut closed = self.closed.subscribe();
        let work = async {
            let permit = self
                .permits
                .clone()
                .acquire_owned()
                .await
                .map_err(|_| RenderPoolError::Closed)?;
            tokio::task::spawn_blocking(move || {
                let _permit = permit;
                render()
            })
            .await
            .map_err(|_| RenderPoolError::Panicked)
        };
        tokio::select! {
            out = work => out,
            _ = closed.wait_for(|c| *c) => Err(RenderPoolError::Closed),
        }
    }

    /// Refuses every later render and stops waiting for the running ones (shutdown); set the
    /// renders' [`RenderBounds::cancel`] flag too, so that they stop.
    pub fn close(&self) {
        self.permits.close();
        self.closed.send_replace(true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn es(yaml: &str) -> ExternalSecret {
        yaml_serde::from_str(yaml).unwrap()
    }

    fn dm(pairs: &[(&str, &str)]) -> crate::externalsecret::pipeline::DataMap {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn renders_data_metadata_and_template_from() {
        let e = es(r#"
apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {name: x, namespace: app}
spec:
  target:
    template:
      metadata: {labels: {user: "{{ .user | upper }}"}}
      data: {dsn: "postgres://{{ .user }}:{{ .pass }}@db"}
      templateFrom:
        - configMap: {name: tpl, items: [{key: cfg}, {key: kv, templateAs: KeysAndValues}]}
        - literal: "lit: {{ .user }}"
          target: Annotations
"#);
        let mut sources = TemplateSources::default();
        let cm: ConfigMap = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "tpl", "namespace": "app"},
            "data": {"cfg": "user={{ .user }}", "kv": "a: '{{ .pass }}'\nb: x"}
        }))
        .unwrap();
        sources.config_maps.insert("tpl".into(), cm);
        let engine = EsoTemplates::new();
        let r = engine
            .renderer(&e, &sources)
            .render(&dm(&[("user", "bob"), ("pass", "pw")]))
            .unwrap();
        assert_eq!(r.data["dsn"], b"postgres://bob:pw@db");
        assert_eq!(r.data["cfg"], b"user=bob");
        assert_eq!(r.data["a"], b"pw");
        assert_eq!(r.data["b"], b"x");
        assert_eq!(r.labels["user"], "BOB");
        assert_eq!(r.annotations["lit"], "bob");
    }

    #[test]
    fn errors_do_not_leak_values_and_missing_sources_are_fetch_errors() {
        let e = es(r#"
apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {name: x, namespace: app}
spec:
  target:
    template:
      data: {k: "{{ .missing }}"}
"#);
        let engine = EsoTemplates::new();
        let err = engine
            .renderer(&e, &TemplateSources::default())
            .render(&dm(&[("user", "s3cr3t-value")]))
            .unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with("could not execute template: unable to execute template at key k"),
            "{text}"
        );
        assert!(!text.contains("s3cr3t-value"));
        let e2 = es(r#"
apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {name: x, namespace: app}
spec:
  target:
    template:
      templateFrom: [{configMap: {name: nope, items: [{key: a}]}}]
"#);
        let sources = TemplateSources {
            error: Some("configmaps \"nope\" not found".into()),
            ..Default::default()
        };
        let err = engine.renderer(&e2, &sources).render(&dm(&[])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "error fetching templateFrom data: configmaps \"nope\" not found"
        );
    }

    #[test]
    fn transform_rewrites_keys() {
        let engine = EsoTemplates::new();
        assert_eq!(
            engine
                .transform_key("{{ .value | upper }}", "db_pass")
                .unwrap(),
            "DB_PASS"
        );
        let PipelineError::Transform(text) = engine.transform_key("{{ .value ", "k").unwrap_err()
        else {
            panic!("not a transform error")
        };
        assert!(
            text.starts_with("unable to parse transform template"),
            "{text}"
        );
    }

    fn poison(text: &str) -> ExternalSecret {
        let mut e = es(r#"
apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {name: x, namespace: app}
spec:
  target:
    template:
      data: {k: "placeholder"}
"#);
        if let Some(d) = e
            .spec
            .target
            .as_mut()
            .and_then(|t| t.template.as_mut())
            .and_then(|t| t.data.as_mut())
        {
            d.insert("k".into(), text.into());
        }
        e
    }

    #[test]
    fn poison_templates_fail_with_value_free_bound_errors() {
        let memory = poison(
            r#"{{ $l := list (repeat 16000000 "a") }}{{ range until 20 }}{{ $l = concat $l $l }}{{ end }}"#,
        );
        let engine = EsoTemplates::new();
        let err = engine
            .renderer(&memory, &TemplateSources::default())
            .render(&dm(&[("pw", "s3cr3t-value")]))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "could not execute template: the render exceeded its memory budget of {} bytes",
                esr_template::limits::MAX_RENDER_BYTES
            )
        );
        let cpu = poison(r#"{{ range until 300000 }}{{ $h := bcrypt "x" }}{{ end }}"#);
        let engine = EsoTemplates::with_bounds(RenderBounds {
            timeout: Duration::ZERO,
            ..RenderBounds::default()
        });
        let err = engine
            .renderer(&cpu, &TemplateSources::default())
            .render(&dm(&[]))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "could not execute template: the render exceeded its deadline of 0s"
        );
        let err = engine
            .transform_key(r#"{{ range until 300000 }}{{ bcrypt "x" }}{{ end }}"#, "k")
            .unwrap_err();
        assert_eq!(
            err,
            PipelineError::Transform(
                "unable to execute transform template: the render exceeded its deadline of 0s"
                    .into()
            )
        );
    }

    /// A render that would run for hours runs on the pool: the async runtime (one worker thread
    /// here, like `--concurrent 1`) keeps serving other work meanwhile, and cancelling stops it.
    #[tokio::test(flavor = "current_thread")]
    async fn pool_keeps_the_runtime_responsive_and_cancel_stops_the_render() {
        let engine = EsoTemplates::with_bounds(RenderBounds {
            timeout: Duration::from_secs(3600),
            ..RenderBounds::default()
        });
        let pool = RenderPool::new(1);
        let cpu = poison(r#"{{ range until 300000 }}{{ $h := bcrypt "x" }}{{ end }}"#);
        let e2 = engine.clone();
        let (started_tx, started_rx) = tokio::sync::oneshot::channel();
        let render = tokio::spawn({
            let pool = pool.clone();
            async move {
                pool.run(move || {
                    let _ = started_tx.send(());
                    let sources = TemplateSources::default();
                    e2.renderer(&cpu, &sources)
                        .render(&dm(&[]))
                        .map_err(|e| e.to_string())
                })
                .await
            }
        });
        started_rx.await.unwrap();
        // the runtime's only worker is free: other tasks run while the render is in progress
        let canary = tokio::spawn(async { (0..1000u32).sum::<u32>() });
        assert_eq!(canary.await.unwrap(), 499_500);
        assert!(!render.is_finished(), "the poison render is still running");
        engine.cancel_all();
        let out = render.await.unwrap().unwrap();
        assert_eq!(
            out.unwrap_err(),
            "could not execute template: the render was cancelled (the controller is stopping)"
        );
        pool.close();
        assert_eq!(pool.run(|| ()).await.unwrap_err(), RenderPoolError::Closed);
    }
}
