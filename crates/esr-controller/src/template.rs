//! Template rendering seam: `templateFrom` sources are loaded here (IO), rendering itself is done
//! by a [`TemplateEngine`] (implemented over esr-template).

use std::collections::BTreeMap;

use esr_api::v1::ExternalSecret;
use esr_provider::KubeAccess;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::ResourceExt;

use crate::pipeline::KeyTransformer;
use crate::plan::Renderer;

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

/// ESO's template engine v2: [`esr_template::eso::render_secret`] (templateFrom in order, then
/// `template.data`, then the metadata templates) and `rewrite_transform`. Errors never include
/// values (esr-template redacts and scrubs them).
#[derive(Debug, Default, Clone, Copy)]
pub struct EsoTemplates;

impl EsoTemplates {
    /// The engine.
    pub fn new() -> Self {
        EsoTemplates
    }
}

struct EsoRenderer<'a> {
    es: &'a ExternalSecret,
    sources: &'a TemplateSources,
}

impl crate::plan::Renderer for EsoRenderer<'_> {
    fn render(
        &self,
        data: &crate::pipeline::DataMap,
    ) -> Result<crate::plan::Rendered, crate::plan::RenderError> {
        use crate::plan::{RenderError, Rendered};
        use esr_template::eso::{RenderInput, RenderedSecret, TemplateError, render_secret};
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
        let out = render_secret(&RenderInput {
            template: Some(t),
            data,
            sources: &sources,
            base: &base,
            es_labels: &empty,
            es_annotations: &empty,
        })
        .map_err(|e| match e {
            TemplateError::TemplateFrom(m) => RenderError::Fetch(m),
            TemplateError::Execute(m) => RenderError::Exec(m),
            other => RenderError::Exec(other.to_string()),
        })?;
        Ok(Rendered {
            data: out.data,
            labels: out.labels,
            annotations: out.annotations,
        })
    }
}

impl KeyTransformer for EsoTemplates {
    fn transform_key(&self, template: &str, key: &str) -> Result<String, String> {
        esr_template::eso::rewrite_transform(template, key).map_err(|e| e.to_string())
    }
}

impl TemplateEngine for EsoTemplates {
    fn renderer<'a>(
        &'a self,
        es: &'a ExternalSecret,
        sources: &'a TemplateSources,
    ) -> Box<dyn Renderer + 'a> {
        Box::new(EsoRenderer { es, sources })
    }
    fn transformer(&self) -> &dyn KeyTransformer {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn es(yaml: &str) -> ExternalSecret {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    fn dm(pairs: &[(&str, &str)]) -> crate::pipeline::DataMap {
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
        assert!(
            engine
                .transform_key("{{ .value ", "k")
                .unwrap_err()
                .starts_with("unable to parse transform template")
        );
    }
}
