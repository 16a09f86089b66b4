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
