//! The request templates: their data ([`TemplateData`]), Go's `url.QueryEscape`
//! ([`query_escape`]) and rendering ([`render`]) with esr-template.
//!
//! ESO executes each template as `text/template` with its function map and without
//! `missingkey=error`; an empty template renders to nothing. esr renders the templates of one
//! request together on a blocking thread, bounded by [`RENDER_TIMEOUT`], and with values redacted
//! from error texts.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use esr_provider::{ProviderError, Result};
use esr_template::{ExecOptions, RenderLimits, Template, Value, eso_funcs};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

/// How long the templates of one request may take to render.
pub const RENDER_TIMEOUT: Duration = Duration::from_secs(5);

/// The name Go's template engine reports in errors (ESO's `webhooktemplate`).
const TEMPLATE_NAME: &str = "webhooktemplate";

/// The data of the templates: `.<name>.<key>`, e.g. `.remoteRef.key` or `.auth.token`. Values are
/// bytes (Secret data need not be UTF-8). `Debug` prints the names only.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct TemplateData(BTreeMap<String, BTreeMap<String, Vec<u8>>>);

impl std::fmt::Debug for TemplateData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.keys()).finish()
    }
}

impl TemplateData {
    /// Empty data.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `.<name>.<key>`.
    pub fn set(&mut self, name: &str, key: &str, value: impl Into<Vec<u8>>) {
        self.0
            .entry(name.to_string())
            .or_default()
            .insert(key.to_string(), value.into());
    }

    /// Adds every entry of `map` under `.<name>` (keeping entries already there).
    pub fn extend(&mut self, name: &str, map: &BTreeMap<String, Vec<u8>>) {
        let entry = self.0.entry(name.to_string()).or_default();
        for (k, v) in map {
            entry.insert(k.clone(), v.clone());
        }
    }

    /// Every name with its entries.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &BTreeMap<String, Vec<u8>>)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// `.<name>.<key>`, if set.
    pub fn get(&self, name: &str, key: &str) -> Option<&[u8]> {
        self.0.get(name)?.get(key).map(Vec::as_slice)
    }

    /// The Go value the templates see: `map[string]map[string]string`.
    fn to_value(&self) -> Value {
        Value::map(
            self.0
                .iter()
                .map(|(name, m)| {
                    let inner = m
                        .iter()
                        .map(|(k, v)| (k.clone(), Value::from_go_bytes(v.clone())))
                        .collect();
                    (name.clone(), Value::map(inner))
                })
                .collect(),
        )
    }
}

/// The bytes Go's `url.QueryEscape` leaves as they are: letters, digits and `-_.~`.
const QUERY_KEEP: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// Go's `url.QueryEscape`: percent-encodes every byte but letters, digits and `-_.~`, and a space
/// as `+`.
pub fn query_escape(s: &str) -> String {
    utf8_percent_encode(s, QUERY_KEEP)
        .to_string()
        .replace("%20", "+")
}

/// One template to render.
#[derive(Clone, Debug)]
pub struct Job {
    /// The prefix of its error, e.g. `failed to parse url` (ESO's texts).
    pub what: String,
    /// The template text.
    pub text: String,
    /// Its data.
    pub data: Arc<TemplateData>,
}

impl Job {
    /// A job.
    pub fn new(what: impl Into<String>, text: &str, data: &Arc<TemplateData>) -> Self {
        Job {
            what: what.into(),
            text: text.to_string(),
            data: data.clone(),
        }
    }
}

/// Renders one template (pure). An empty template renders to nothing.
pub fn render_one(text: &str, data: &TemplateData, deadline: Instant) -> Result<Vec<u8>> {
    if text.is_empty() {
        return Ok(Vec::new());
    }
    let funcs = eso_funcs();
    let t = Template::parse(TEMPLATE_NAME, text, funcs)
        .map_err(|e| ProviderError::invalid(e.to_string()))?;
    let opts = ExecOptions {
        missingkey_error: false,
        redact: true,
        bounds: RenderLimits {
            deadline: Some(deadline),
            ..RenderLimits::default()
        },
        ..ExecOptions::default()
    };
    t.execute(funcs, &data.to_value(), &opts)
        .map_err(|e| ProviderError::invalid(e.to_string()))
}

/// Renders `jobs` in order on a blocking thread; the first failure is returned as
/// `<what>: <error>`.
pub async fn render(jobs: Vec<Job>) -> Result<Vec<Vec<u8>>> {
    tokio::task::spawn_blocking(move || {
        let deadline = Instant::now() + RENDER_TIMEOUT;
        jobs.iter()
            .map(|j| render_one(&j.text, &j.data, deadline).map_err(|e| e.wrap(&j.what)))
            .collect()
    })
    .await
    .map_err(|e| ProviderError::transient(format!("template rendering did not finish: {e}")))?
}

/// [`render`] for one template, as a UTF-8 string (lossy, as Go's `string(bytes)` prints).
pub async fn render_string(job: Job) -> Result<String> {
    let mut out = render(vec![job]).await?;
    Ok(String::from_utf8_lossy(&out.pop().unwrap_or_default()).into_owned())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    fn data() -> TemplateData {
        let mut d = TemplateData::new();
        d.set("remoteRef", "key", "a b/c?d&e=f~g*h");
        d.set("auth", "user", "alice");
        d.set("auth", "pass", "s3cr3t");
        d.set("auth", "bin", vec![0xff, 0x00, 0x41]);
        d
    }

    fn far() -> Instant {
        Instant::now() + Duration::from_secs(10)
    }

    #[test]
    fn query_escape_is_gos() {
        // Go: url.QueryEscape("a b/c?d&e=f~g*h") == "a+b%2Fc%3Fd%26e%3Df~g%2Ah"
        assert_eq!(query_escape("a b/c?d&e=f~g*h"), "a+b%2Fc%3Fd%26e%3Df~g%2Ah");
        assert_eq!(query_escape("é"), "%C3%A9");
        assert_eq!(query_escape(""), "");
    }

    #[test]
    fn renders_with_esos_functions_and_missing_keys() {
        let d = data();
        let out = render_one(
            "Basic {{ print .auth.user \":\" .auth.pass | b64enc }}",
            &d,
            far(),
        )
        .unwrap();
        assert_eq!(out, b"Basic YWxpY2U6czNjcjN0");
        // No missingkey=error: a missing key prints <no value>, as in ESO.
        let out = render_one("{{ .auth.nope }}|{{ .other.x }}", &d, far()).unwrap();
        assert_eq!(out, b"<no value>|<no value>");
        // Binary Secret data reaches the functions as bytes.
        let out = render_one("{{ .auth.bin | b64enc }}", &d, far()).unwrap();
        assert_eq!(out, b"/wBB");
        assert_eq!(render_one("", &d, far()).unwrap(), b"");
    }

    #[test]
    fn errors_do_not_carry_values() {
        let d = data();
        let e = render_one("{{ .auth.pass | fail }}", &d, far())
            .unwrap_err()
            .to_string();
        assert!(!e.contains("s3cr3t"), "{e}");
        let e = render_one("{{ .auth.user", &d, far()).unwrap_err();
        assert_eq!(e.kind(), esr_provider::ErrorKind::Invalid);
    }

    #[tokio::test]
    async fn render_prefixes_errors_with_what() {
        let d = Arc::new(data());
        let out = render(vec![
            Job::new("failed to parse url", "http://x/{{ .remoteRef.key }}", &d),
            Job::new("failed to parse body", "", &d),
        ])
        .await
        .unwrap();
        assert_eq!(out[0], b"http://x/a b/c?d&e=f~g*h");
        assert!(out[1].is_empty());
        let e = render(vec![Job::new("failed to parse body", "{{ nofunc }}", &d)])
            .await
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("failed to parse body: "), "{e}");
    }

    #[test]
    fn a_render_past_its_deadline_stops() {
        let d = data();
        let e = render_one(
            "{{ range $i := until 100000000 }}x{{ end }}",
            &d,
            Instant::now(),
        )
        .unwrap_err();
        assert_eq!(e.kind(), esr_provider::ErrorKind::Invalid);
    }
}
