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

/// ESO's template engine v2 over esr-template: `templateFrom` (in order; Values and
/// KeysAndValues scopes, literals; targets Data/Labels/Annotations), then `template.data`, then the
/// metadata label/annotation templates. Errors never include values (`redact`).
pub struct EsoTemplates {
    funcs: esr_template::FuncMap,
    opts: esr_template::ExecOptions,
}

impl Default for EsoTemplates {
    fn default() -> Self {
        Self::new()
    }
}

impl EsoTemplates {
    /// The engine with ESO's function map.
    pub fn new() -> Self {
        EsoTemplates {
            funcs: esr_template::FuncMap::eso(),
            opts: esr_template::ExecOptions {
                redact: true,
                ..Default::default()
            },
        }
    }

    fn exec(
        &self,
        key: &str,
        text: &str,
        data: &crate::pipeline::DataMap,
    ) -> Result<Vec<u8>, String> {
        esr_template::execute_eso(text, data, &self.funcs, &self.opts).map_err(|e| match e {
            esr_template::EngineError::Parse(p) => {
                format!("unable to parse template at key {key}: {p}")
            }
            esr_template::EngineError::Exec(x) => {
                format!("unable to execute template at key {key}: {x}")
            }
        })
    }
}

fn parse_kv_yaml(key: &str, bytes: &[u8]) -> Result<BTreeMap<String, String>, String> {
    if bytes.iter().all(|b| b.is_ascii_whitespace()) {
        return Ok(BTreeMap::new());
    }
    let v: serde_yaml_ng::Value = serde_yaml_ng::from_slice(bytes)
        .map_err(|_| format!("unable to unmarshal template at key {key}: invalid YAML"))?;
    let serde_yaml_ng::Value::Mapping(m) = v else {
        return Err(format!(
            "unable to unmarshal template at key {key}: not a map"
        ));
    };
    let mut out = BTreeMap::new();
    for (k, v) in m {
        let k = match k {
            serde_yaml_ng::Value::String(s) => s,
            other => serde_yaml_ng::to_string(&other)
                .unwrap_or_default()
                .trim_end()
                .to_string(),
        };
        let v = match v {
            serde_yaml_ng::Value::String(s) => s,
            serde_yaml_ng::Value::Null => String::new(),
            other => serde_yaml_ng::to_string(&other)
                .unwrap_or_default()
                .trim_end()
                .to_string(),
        };
        out.insert(k, v);
    }
    Ok(out)
}

struct EsoRenderer<'a> {
    engine: &'a EsoTemplates,
    es: &'a ExternalSecret,
    sources: &'a TemplateSources,
}

impl crate::plan::Renderer for EsoRenderer<'_> {
    fn render(
        &self,
        data: &crate::pipeline::DataMap,
    ) -> Result<crate::plan::Rendered, crate::plan::RenderError> {
        use crate::plan::{RenderError, Rendered};
        use esr_api::v1::{TemplateScope, TemplateTarget};
        let mut out = Rendered::default();
        let Some(t) = self
            .es
            .spec
            .target
            .as_ref()
            .and_then(|t| t.template.as_ref())
        else {
            return Ok(out);
        };
        if let Some(e) = &self.sources.error {
            return Err(RenderError::Fetch(e.clone()));
        }
        let put = |out: &mut Rendered, target: TemplateTarget, k: String, v: Vec<u8>| match target {
            TemplateTarget::Data => {
                out.data.insert(k, v);
            }
            TemplateTarget::Labels => {
                out.labels
                    .insert(k, String::from_utf8_lossy(&v).into_owned());
            }
            TemplateTarget::Annotations => {
                out.annotations
                    .insert(k, String::from_utf8_lossy(&v).into_owned());
            }
        };
        for tf in t.template_from.iter().flatten() {
            let target =
                TemplateTarget::parse(tf.target.as_deref().unwrap_or("")).ok_or_else(|| {
                    RenderError::Exec(format!("unsupported template target {:?}", tf.target))
                })?;
            let mut items: Vec<(String, Vec<u8>, TemplateScope)> = Vec::new();
            if let Some(cm) = &tf.config_map {
                let src = self.sources.config_maps.get(&cm.name);
                for it in &cm.items {
                    let v = src
                        .and_then(|c| c.data.as_ref())
                        .and_then(|d| d.get(&it.key))
                        .ok_or_else(|| {
                            RenderError::Fetch(format!(
                                "error in configmap {}: missing key {}",
                                cm.name, it.key
                            ))
                        })?;
                    items.push((
                        it.key.clone(),
                        v.clone().into_bytes(),
                        it.template_as.unwrap_or_default(),
                    ));
                }
            }
            if let Some(s) = &tf.secret {
                let src = self.sources.secrets.get(&s.name);
                for it in &s.items {
                    let v = src
                        .and_then(|c| c.data.as_ref())
                        .and_then(|d| d.get(&it.key))
                        .ok_or_else(|| {
                            RenderError::Fetch(format!(
                                "error in secret {}: missing key {}",
                                s.name, it.key
                            ))
                        })?;
                    let raw = crate::pipeline::decode_value(
                        crate::convert::decoding(tf.values_decoding_strategy),
                        &it.key,
                        v.0.clone(),
                    )
                    .map_err(|e| RenderError::Exec(e.to_string()))?;
                    items.push((it.key.clone(), raw, it.template_as.unwrap_or_default()));
                }
            }
            for (key, text, scope) in items {
                let text = String::from_utf8_lossy(&text).into_owned();
                let rendered = self
                    .engine
                    .exec(&key, &text, data)
                    .map_err(RenderError::Exec)?;
                match scope {
                    TemplateScope::Values => put(&mut out, target, key, rendered),
                    TemplateScope::KeysAndValues => {
                        for (k, v) in parse_kv_yaml(&key, &rendered).map_err(RenderError::Exec)? {
                            put(&mut out, target, k, v.into_bytes());
                        }
                    }
                }
            }
            if let Some(lit) = &tf.literal {
                let rendered = self
                    .engine
                    .exec("literal", lit, data)
                    .map_err(RenderError::Exec)?;
                for (k, v) in parse_kv_yaml("literal", &rendered).map_err(RenderError::Exec)? {
                    put(&mut out, target, k, v.into_bytes());
                }
            }
        }
        for (k, v) in t.data.iter().flatten() {
            let rendered = self.engine.exec(k, v, data).map_err(RenderError::Exec)?;
            out.data.insert(k.clone(), rendered);
        }
        if let Some(md) = &t.metadata {
            for (k, v) in md.labels.iter().flatten() {
                let r = self.engine.exec(k, v, data).map_err(RenderError::Exec)?;
                out.labels
                    .insert(k.clone(), String::from_utf8_lossy(&r).into_owned());
            }
            for (k, v) in md.annotations.iter().flatten() {
                let r = self.engine.exec(k, v, data).map_err(RenderError::Exec)?;
                out.annotations
                    .insert(k.clone(), String::from_utf8_lossy(&r).into_owned());
            }
        }
        Ok(out)
    }
}

impl KeyTransformer for EsoTemplates {
    fn transform_key(&self, template: &str, key: &str) -> Result<String, String> {
        let t = esr_template::Template::parse("transform", template, &self.funcs)
            .map_err(|e| format!("failed to parse template: {e}"))?;
        let mut m = BTreeMap::new();
        m.insert("value".to_string(), key.to_string());
        let opts = esr_template::ExecOptions {
            missingkey_error: false,
            ..self.opts.clone()
        };
        let out = t
            .execute(&self.funcs, &esr_template::Value::string_map(m), &opts)
            .map_err(|e| format!("failed to execute template for key {key:?}: {e}"))?;
        Ok(String::from_utf8_lossy(&out).into_owned())
    }
}

impl TemplateEngine for EsoTemplates {
    fn renderer<'a>(
        &'a self,
        es: &'a ExternalSecret,
        sources: &'a TemplateSources,
    ) -> Box<dyn Renderer + 'a> {
        Box::new(EsoRenderer {
            engine: self,
            es,
            sources,
        })
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
                .starts_with("failed to parse template")
        );
    }
}
