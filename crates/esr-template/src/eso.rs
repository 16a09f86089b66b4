//! ESO's execution model on top of the engine: how an ExternalSecret's
//! `spec.target.template` turns provider data into the target Secret's data,
//! labels, annotations and type (ESO v2.9.0 `applyTemplate`, `templating.Parser`,
//! `runtime/template/v2.Execute`), and `dataFrom[].rewrite[].transform`.
//!
//! Order, as ESO applies it:
//! 1. metadata: with no template, the ExternalSecret's own labels/annotations are
//!    merged into the Secret's; with a template, `template.metadata` labels and
//!    annotations are merged (raw) and the type is set;
//! 2. no template: the provider data is copied and nothing else happens;
//! 3. `mergePolicy: Merge`: the provider data is copied first;
//! 4. `templateFrom[]` in order (ConfigMap items, Secret items, literal), each to
//!    its target (`Data`, `Annotations`, `Labels`, case-insensitive);
//! 5. `template.data`, one template per key (scope `Values`), highest precedence;
//! 6. `template.metadata.labels` / `.annotations` rendered as templates;
//! 7. without any `data` or `templateFrom`, the provider data is copied.
//!
//! Each template runs as ESO's `execute()`: `text/template` named after the key
//! (the whole text for `KeysAndValues`), `missingkey=error`, over the data map as
//! `map[string]string`. `KeysAndValues` output is YAML-parsed into
//! `map[string]string`. `valuesDecodingStrategy` of a `templateFrom` entry is
//! applied to the values it writes to `Data`.
//!
//! Error texts follow ESO's (`could not execute template: unable to execute
//! template at key k: …`) but never contain secret values: execution runs with
//! [`ExecOptions::redact`] (values embedded by Go's messages become `<redacted>`,
//! function errors that may quote their input are withheld), and every provider
//! value is additionally scrubbed from the final message.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use base64::Engine as _;
use esr_api::v1::{
    DecodingStrategy, ExternalSecretTemplate, TemplateFrom, TemplateScope, TemplateTarget,
};

use crate::engine::Template;
use crate::exec::ExecOptions;
use crate::func::FuncMap;
use crate::limits::{RenderLimits, Stop};

/// The action delimiters of ESO's `--template-left-delimiter` /
/// `--template-right-delimiter` flags (default `{{` `}}`). Set once, at start-up,
/// before the first render; later calls are ignored (returns `false`).
pub fn set_template_delimiters(left: &str, right: &str) -> bool {
    DELIMS.set((left.to_string(), right.to_string())).is_ok()
}

static DELIMS: OnceLock<(String, String)> = OnceLock::new();

fn delims() -> (&'static str, &'static str) {
    match DELIMS.get() {
        Some((l, r)) => (l.as_str(), r.as_str()),
        None => ("", ""),
    }
}

/// ESO's function map, built once.
pub fn eso_funcs() -> &'static FuncMap {
    static FUNCS: OnceLock<FuncMap> = OnceLock::new();
    FUNCS.get_or_init(FuncMap::eso)
}

/// The contents of the ConfigMaps and Secrets that `templateFrom` references, by
/// name (all in the ExternalSecret's namespace; the caller fetches them).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TemplateSources {
    /// ConfigMap name → `data`.
    pub config_maps: BTreeMap<String, BTreeMap<String, String>>,
    /// Secret name → `data`.
    pub secrets: BTreeMap<String, BTreeMap<String, Vec<u8>>>,
}

/// A Secret's templated content: data, labels, annotations and type.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RenderedSecret {
    /// `data`.
    pub data: BTreeMap<String, Vec<u8>>,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `metadata.annotations`.
    pub annotations: BTreeMap<String, String>,
    /// `type`; `None` keeps the existing type (or the API server's default).
    pub type_: Option<String>,
}

/// Input of [`render_secret`].
#[derive(Clone, Copy, Debug)]
pub struct RenderInput<'a> {
    /// `spec.target.template`; `None` when the ExternalSecret has no template.
    pub template: Option<&'a ExternalSecretTemplate>,
    /// The provider data (after `data`/`dataFrom` processing).
    pub data: &'a BTreeMap<String, Vec<u8>>,
    /// The ConfigMaps/Secrets referenced by `templateFrom`.
    pub sources: &'a TemplateSources,
    /// The Secret content to start from: for a new Secret empty; for an existing
    /// one its labels and annotations (without the keys this ExternalSecret managed
    /// before) and its data when `creationPolicy` keeps existing keys (`Merge`,
    /// `CreateOrMerge`), else empty data.
    pub base: &'a RenderedSecret,
    /// The ExternalSecret's own labels (copied when there is no template).
    pub es_labels: &'a BTreeMap<String, String>,
    /// The ExternalSecret's own annotations (copied when there is no template).
    pub es_annotations: &'a BTreeMap<String, String>,
}

/// An error of the ESO execution model. Messages never contain secret values.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// `templateFrom[].target` is not `Data`, `Annotations` or `Labels`.
    #[error("invalid templateFrom target {0:?}: expected one of Data, Annotations, Labels")]
    InvalidTarget(String),
    /// A referenced ConfigMap/Secret or one of its keys is missing, or a
    /// `templateFrom` template failed (ESO's `error fetching templateFrom data: …`).
    #[error("error fetching templateFrom data: {0}")]
    TemplateFrom(String),
    /// A `template.data` or metadata template failed.
    #[error("could not execute template: {0}")]
    Execute(String),
    /// A `rewrite.transform` template failed.
    #[error("{0}")]
    Transform(String),
    /// The render built more than its memory budget allows
    /// ([`RenderLimits::max_bytes`]).
    #[error("could not execute template: the render exceeded its memory budget of {0} bytes")]
    Budget(usize),
    /// The render ran past its deadline ([`RenderLimits::deadline`]).
    #[error("could not execute template: the render exceeded its deadline")]
    Deadline,
    /// The render was cancelled ([`RenderLimits::cancel`]).
    #[error("could not execute template: the render was cancelled")]
    Cancelled,
}

/// Replaces every occurrence of a provider value in `msg` by `<redacted>`.
fn scrub(msg: String, data: &BTreeMap<String, Vec<u8>>) -> String {
    let mut values: Vec<&str> = data
        .values()
        .filter_map(|v| std::str::from_utf8(v).ok())
        .filter(|s| s.trim().len() >= 3)
        .collect();
    // longest first, so that a value containing another is replaced whole
    values.sort_by_key(|s| std::cmp::Reverse(s.len()));
    let mut out = msg;
    for v in values {
        if out.contains(v) {
            out = out.replace(v, "<redacted>");
        }
    }
    out
}

fn redacting() -> ExecOptions {
    ExecOptions {
        redact: true,
        ..ExecOptions::default()
    }
}

/// ESO's `execute(k, text, data)`: the template is named `name`. The error text is
/// ESO's `unable to parse/execute template at key …`.
fn execute(name: &str, text: &str, data: &BTreeMap<String, Vec<u8>>) -> Result<Vec<u8>, String> {
    let funcs = eso_funcs();
    let t = parse_cached(name, text)
        .map_err(|e| format!("unable to parse template at key {name}: {e}"))?;
    t.execute_data(funcs, data, &redacting())
        .map_err(|e| format!("unable to execute template at key {name}: {e}"))
}

/// Parsed templates by (name, text): the controller renders the same templates
/// on every refresh. Bounded (at most 1024 templates of up to 8 KiB each are
/// kept; the cache is cleared when full).
fn parse_cached(name: &str, text: &str) -> Result<Arc<Template>, crate::parse::ParseError> {
    type Cache = Mutex<HashMap<(String, String), Arc<Template>>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    const MAX_ENTRIES: usize = 1024;
    const MAX_TEXT: usize = 8 * 1024;
    let cache = CACHE.get_or_init(Cache::default);
    let key = (name.to_string(), text.to_string());
    if let Some(t) = cache
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&key)
    {
        return Ok(t.clone());
    }
    let (left, right) = delims();
    let t = Arc::new(Template::parse_with_delims(
        name,
        text,
        eso_funcs(),
        left,
        right,
    )?);
    if text.len() <= MAX_TEXT {
        let mut c = cache.lock().unwrap_or_else(PoisonError::into_inner);
        if c.len() >= MAX_ENTRIES {
            c.clear();
        }
        c.insert(key, t.clone());
    }
    Ok(t)
}

/// Where rendered values go.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Target {
    Data,
    Annotations,
    Labels,
}

fn parse_target(t: Option<&str>) -> Result<Target, TemplateError> {
    let s = t.unwrap_or("");
    match TemplateTarget::parse(s) {
        Some(TemplateTarget::Data) => Ok(Target::Data),
        Some(TemplateTarget::Annotations) => Ok(Target::Annotations),
        Some(TemplateTarget::Labels) => Ok(Target::Labels),
        None => Err(TemplateError::InvalidTarget(s.to_string())),
    }
}

/// Applies a `valuesDecodingStrategy`. The error names the strategy only: the
/// decoder's own text (`Invalid symbol 33, offset 7.`) would reveal a byte of
/// the value.
fn decode(strategy: Option<DecodingStrategy>, v: Vec<u8>) -> Result<Vec<u8>, String> {
    use base64::engine::general_purpose::{STANDARD, URL_SAFE};
    match strategy.unwrap_or_default() {
        DecodingStrategy::None => Ok(v),
        DecodingStrategy::Base64 => STANDARD
            .decode(&v)
            .map_err(|_| "value is not valid Base64".to_string()),
        DecodingStrategy::Base64Url => URL_SAFE
            .decode(&v)
            .map_err(|_| "value is not valid Base64URL".to_string()),
        DecodingStrategy::Auto => Ok(STANDARD
            .decode(&v)
            .or_else(|_| URL_SAFE.decode(&v))
            .unwrap_or(v)),
    }
}

fn apply(out: &mut RenderedSecret, target: Target, key: String, val: Vec<u8>) {
    match target {
        Target::Data => {
            out.data.insert(key, val);
        }
        Target::Labels => {
            out.labels
                .insert(key, String::from_utf8_lossy(&val).into_owned());
        }
        Target::Annotations => {
            out.annotations
                .insert(key, String::from_utf8_lossy(&val).into_owned());
        }
    }
}

/// Scope `Values`: each entry is the template of the key of the same name.
fn value_scope_apply(
    out: &mut RenderedSecret,
    tpls: &BTreeMap<String, Vec<u8>>,
    data: &BTreeMap<String, Vec<u8>>,
    target: Target,
    decoding: Option<DecodingStrategy>,
) -> Result<(), String> {
    for (k, v) in tpls {
        let text = String::from_utf8_lossy(v);
        let val = execute(k, &text, data)
            .map_err(|e| format!("unable to execute template at key {k}: {e}"))?;
        let val = if target == Target::Data {
            decode(decoding, val).map_err(|e| format!("unable to decode value of key {k}: {e}"))?
        } else {
            val
        };
        apply(out, target, k.clone(), val);
    }
    Ok(())
}

/// The YAML step of `KeysAndValues`: `yaml.Unmarshal(out, &map[string]string{})`
/// (sigs.k8s.io/yaml: YAML 1.1 → JSON → `encoding/json`).
fn yaml_string_map(b: &[u8]) -> Result<BTreeMap<String, String>, String> {
    crate::funcs::yaml::string_map(&String::from_utf8_lossy(b))
}

/// Scope `KeysAndValues`: the whole text is one template whose output is a YAML
/// map of keys to values.
///
/// ESO names the template after its whole text; for templates stored in a Secret
/// `name` is `<secret>/<key>` instead, so that errors do not repeat Secret contents.
fn map_scope_apply(
    out: &mut RenderedSecret,
    name: &str,
    text: &str,
    data: &BTreeMap<String, Vec<u8>>,
    target: Target,
    decoding: Option<DecodingStrategy>,
) -> Result<(), String> {
    let val = execute(name, text, data)
        .map_err(|e| format!("unable to execute template at key {name}: {e}"))?;
    let src = yaml_string_map(&val)
        .map_err(|e| format!("could not unmarshal template to 'map[string][]byte': {e}"))?;
    for (k, v) in src {
        let v = if target == Target::Data {
            decode(decoding, v.into_bytes())
                .map_err(|e| format!("unable to decode value of key {k}: {e}"))?
        } else {
            v.into_bytes()
        };
        apply(out, target, k, v);
    }
    Ok(())
}

fn template_from(
    out: &mut RenderedSecret,
    tf: &TemplateFrom,
    data: &BTreeMap<String, Vec<u8>>,
    sources: &TemplateSources,
) -> Result<(), String> {
    let target = parse_target(tf.target.as_deref()).map_err(|e| e.to_string())?;
    let decoding = tf.values_decoding_strategy;
    if let Some(cm) = &tf.config_map {
        let Some(cm_data) = sources.config_maps.get(&cm.name) else {
            return Err(format!(
                "configmaps {} not found",
                crate::fmt::quote(&cm.name)
            ));
        };
        for item in &cm.items {
            let Some(val) = cm_data.get(&item.key) else {
                return Err(format!(
                    "error in configmap {}: missing key {}",
                    cm.name, item.key
                ));
            };
            match item.template_as.unwrap_or_default() {
                TemplateScope::Values => {
                    let m = BTreeMap::from([(item.key.clone(), val.as_bytes().to_vec())]);
                    value_scope_apply(out, &m, data, target, decoding)?;
                }
                TemplateScope::KeysAndValues => {
                    map_scope_apply(out, val, val, data, target, decoding)?
                }
            }
        }
    }
    if let Some(sec) = &tf.secret {
        let Some(sec_data) = sources.secrets.get(&sec.name) else {
            return Err(format!(
                "secrets {} not found",
                crate::fmt::quote(&sec.name)
            ));
        };
        for item in &sec.items {
            let Some(val) = sec_data.get(&item.key) else {
                return Err(format!(
                    "error in secret {}: missing key {}",
                    sec.name, item.key
                ));
            };
            match item.template_as.unwrap_or_default() {
                TemplateScope::Values => {
                    let m = BTreeMap::from([(item.key.clone(), val.clone())]);
                    value_scope_apply(out, &m, data, target, decoding)?;
                }
                TemplateScope::KeysAndValues => map_scope_apply(
                    out,
                    &format!("{}/{}", sec.name, item.key),
                    &String::from_utf8_lossy(val),
                    data,
                    target,
                    decoding,
                )?,
            }
        }
    }
    if let Some(lit) = &tf.literal {
        map_scope_apply(out, lit, lit, data, target, decoding)?;
    }
    Ok(())
}

fn merge_map(
    out: &mut RenderedSecret,
    m: &BTreeMap<String, String>,
    data: &BTreeMap<String, Vec<u8>>,
    target: Target,
) -> Result<(), String> {
    let tpls: BTreeMap<String, Vec<u8>> = m
        .iter()
        .map(|(k, v)| (k.clone(), v.as_bytes().to_vec()))
        .collect();
    value_scope_apply(out, &tpls, data, target, None)
}

/// Renders the target Secret of an ExternalSecret: ESO's `applyTemplate` for a
/// Secret target. See the module documentation for the order of the steps.
///
/// Runs with the default [`RenderLimits`] (memory budget, no deadline); see
/// [`render_secret_with`].
pub fn render_secret(input: &RenderInput<'_>) -> Result<RenderedSecret, TemplateError> {
    render_secret_with(input, &RenderLimits::default())
}

/// [`render_secret`] within `limits`: every template of the Secret shares one
/// memory budget, deadline and cancel flag. A render stopped by them fails with
/// [`TemplateError::Budget`], [`TemplateError::Deadline`] or
/// [`TemplateError::Cancelled`] (value-free texts).
pub fn render_secret_with(
    input: &RenderInput<'_>,
    limits: &RenderLimits,
) -> Result<RenderedSecret, TemplateError> {
    let _meter = crate::limits::enter(limits.clone());
    let r = render_inner(input);
    if let Some(stop) = crate::limits::stopped() {
        return Err(stop_error(stop, limits));
    }
    r.map_err(|e| match e {
        TemplateError::TemplateFrom(m) => TemplateError::TemplateFrom(scrub(m, input.data)),
        TemplateError::Execute(m) => TemplateError::Execute(scrub(m, input.data)),
        TemplateError::Transform(m) => TemplateError::Transform(scrub(m, input.data)),
        other => other,
    })
}

fn stop_error(stop: Stop, limits: &RenderLimits) -> TemplateError {
    match stop {
        Stop::Budget => TemplateError::Budget(limits.max_bytes),
        Stop::Deadline => TemplateError::Deadline,
        Stop::Cancelled => TemplateError::Cancelled,
    }
}

fn render_inner(input: &RenderInput<'_>) -> Result<RenderedSecret, TemplateError> {
    let mut out = input.base.clone();
    let Some(tpl) = input.template else {
        out.labels
            .extend(input.es_labels.iter().map(|(k, v)| (k.clone(), v.clone())));
        out.annotations.extend(
            input
                .es_annotations
                .iter()
                .map(|(k, v)| (k.clone(), v.clone())),
        );
        out.data
            .extend(input.data.iter().map(|(k, v)| (k.clone(), v.clone())));
        return Ok(out);
    };
    // validate templateFrom targets up front (ESO's ValidateSecretTemplate)
    for tf in tpl.template_from.iter().flatten() {
        parse_target(tf.target.as_deref())?;
    }
    out.type_ = tpl.type_.clone().filter(|t| !t.is_empty()).or(out.type_);
    let meta = tpl.metadata.as_ref();
    let labels = meta.and_then(|m| m.labels.clone()).unwrap_or_default();
    let annotations = meta.and_then(|m| m.annotations.clone()).unwrap_or_default();
    out.labels
        .extend(labels.iter().map(|(k, v)| (k.clone(), v.clone())));
    out.annotations
        .extend(annotations.iter().map(|(k, v)| (k.clone(), v.clone())));

    let data_tpls = tpl.data.clone().unwrap_or_default();
    let from = tpl.template_from.clone().unwrap_or_default();
    if tpl.merge_policy == Some(esr_api::v1::TemplateMergePolicy::Merge) {
        out.data
            .extend(input.data.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    for tf in &from {
        template_from(&mut out, tf, input.data, input.sources)
            .map_err(TemplateError::TemplateFrom)?;
    }
    merge_map(&mut out, &data_tpls, input.data, Target::Data).map_err(TemplateError::Execute)?;
    merge_map(&mut out, &labels, input.data, Target::Labels).map_err(TemplateError::Execute)?;
    merge_map(&mut out, &annotations, input.data, Target::Annotations)
        .map_err(TemplateError::Execute)?;
    if data_tpls.is_empty() && from.is_empty() {
        out.data
            .extend(input.data.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    Ok(out)
}

/// `dataFrom[].rewrite[].transform`: executes `template` with `.value` = `key`
/// (template named `transform`, ESO's function map, default `missingkey`) and
/// returns the new key.
pub fn rewrite_transform(template: &str, key: &str) -> Result<String, TemplateError> {
    rewrite_transform_with(template, key, &RenderLimits::default())
}

/// [`rewrite_transform`] within `limits` (see [`render_secret_with`]).
pub fn rewrite_transform_with(
    template: &str,
    key: &str,
    limits: &RenderLimits,
) -> Result<String, TemplateError> {
    let _meter = crate::limits::enter(limits.clone());
    let funcs = eso_funcs();
    let t = Template::parse("transform", template, funcs).map_err(|e| {
        TemplateError::Transform(format!("unable to parse transform template: {e}"))
    })?;
    let data = BTreeMap::from([("value".to_string(), key.as_bytes().to_vec())]);
    let opts = ExecOptions {
        missingkey_error: false,
        ..ExecOptions::default()
    };
    let out = t
        .execute_data(funcs, &data, &opts)
        .map_err(|e| match e.stop {
            Some(stop) => stop_error(stop, limits),
            None => TemplateError::Transform(format!("unable to execute transform template: {e}")),
        })?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_step() {
        let m = yaml_string_map(b"a: x\nb: \"1\"\nc:\n").unwrap_or_default();
        assert_eq!(m.get("a").map(String::as_str), Some("x"));
        assert_eq!(m.get("b").map(String::as_str), Some("1"));
        assert_eq!(m.get("c").map(String::as_str), Some(""));
        assert!(yaml_string_map(b"- a").is_err());
        assert_eq!(yaml_string_map(b"  \n").unwrap_or_default().len(), 0);
        let m = yaml_string_map(b"a: x\n---\nb: y\n").unwrap_or_default();
        assert_eq!(m.keys().collect::<Vec<_>>(), vec!["a"]);
        let m = yaml_string_map(b"base: &b {x: \"1\"}\nm:\n  <<: *b\n").map(|m| m.len());
        assert!(m.is_err(), "a nested map is not a string value");
        let m = yaml_string_map(b"base: &b {x: \"1\"}\n<<: *b\ny: z\n");
        assert!(m.is_err(), "base is a map");
        let m = yaml_string_map(b"<<: {x: \"1\"}\ny: z\n").unwrap_or_default();
        assert_eq!(
            m.get("x").map(String::as_str),
            Some("1"),
            "merge keys apply"
        );
        // YAML 1.1 typing, then sigs.k8s.io/yaml's coercion to the string target.
        let m = yaml_string_map(
            b"a: yes\nb: on\nc: 0777\nd: 1_000\ne: 1.5\nf: 3.14159265358979\ng: 0o17\nh: \"yes\"\ni: 1.2.3\nyes: k\nj: ~\n",
        )
        .unwrap();
        let want = [
            ("a", "true"),
            ("b", "true"),
            ("c", "511"),
            ("d", "1000"),
            ("e", "1.5"),
            ("f", "3.1415927"),
            ("g", "15"),
            ("h", "yes"),
            ("i", "1.2.3"),
            ("true", "k"),
            ("j", ""),
        ];
        for (k, v) in want {
            assert_eq!(m.get(k).map(String::as_str), Some(v), "{k}");
        }
        assert_eq!(m.len(), want.len());
        for (doc, kind, target) in [
            ("a: [x]", "array", "string"),
            ("a: {b: c}", "object", "string"),
            ("just text", "string", "map[string]string"),
            ("true", "bool", "map[string]string"),
            ("- a", "array", "map[string]string"),
        ] {
            assert_eq!(
                yaml_string_map(doc.as_bytes()),
                Err(format!(
                    "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {kind} into Go value of type {target}"
                )),
                "{doc}"
            );
        }
        // A parse error names the line, never the text.
        let e = yaml_string_map(b"ok: v\nsecret-value: [unclosed\n").unwrap_err();
        assert!(
            e.starts_with("error converting YAML to JSON: yaml: line "),
            "{e}"
        );
        assert!(
            !e.contains("unclosed") && !e.contains("secret-value"),
            "{e}"
        );
    }

    #[test]
    fn decoding() {
        assert_eq!(
            decode(Some(DecodingStrategy::Base64), b"aGk=".to_vec()).unwrap_or_default(),
            b"hi"
        );
        assert_eq!(
            decode(Some(DecodingStrategy::Auto), b"not base64!".to_vec()).unwrap_or_default(),
            b"not base64!"
        );
        assert!(decode(Some(DecodingStrategy::Base64), b"%%".to_vec()).is_err());
        // the error names the strategy, never a byte or offset of the value
        for (strategy, name) in [
            (DecodingStrategy::Base64, "Base64"),
            (DecodingStrategy::Base64Url, "Base64URL"),
        ] {
            assert_eq!(
                decode(Some(strategy), b"aGVsbG8!".to_vec()),
                Err(format!("value is not valid {name}"))
            );
        }
        assert_eq!(decode(None, b"aGk=".to_vec()).unwrap_or_default(), b"aGk=");
    }

    #[test]
    fn scrubbing() {
        let data = BTreeMap::from([
            ("p".to_string(), b"hunter2".to_vec()),
            ("x".to_string(), b"ab".to_vec()),
        ]);
        assert_eq!(scrub("bad hunter2 ab".into(), &data), "bad <redacted> ab");
    }
}
