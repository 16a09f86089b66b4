//! The JSON log line of `--log-format json`, with the field names of ESO's zap logger that log
//! pipelines key on: `level` (`debug`, `info`, `warn`, `error`), `ts` (per
//! `--zap-time-encoding`), `logger` (the emitting module, dotted), `msg`, then the fields of
//! every enclosing span (outermost first) and of the event itself.
//!
//! A reconcile runs in a `reconcile` span (see `esr_controller::metrics::controller`) with
//! `controller`, `namespace`, `name` and `reconcileID`; its lines also get the object under the
//! controller's name (`"externalsecret": "<name>"`), as controller-runtime names the object by its
//! kind.

use std::fmt;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

use super::flags::TimeEncoding;

/// The event formatter (used with `JsonFields` as the span field formatter, so span fields are
/// stored as JSON objects).
#[derive(Debug, Clone, Copy)]
pub struct ZapJson {
    /// Timestamp format.
    pub time: TimeEncoding,
}

/// zap's level names.
fn level(l: &Level) -> &'static str {
    match *l {
        Level::ERROR => "error",
        Level::WARN => "warn",
        Level::INFO => "info",
        Level::DEBUG => "debug",
        Level::TRACE => "trace",
    }
}

/// Collects an event's fields; `message` becomes `msg`.
struct Fields<'a>(&'a mut Map<String, Value>);

impl Fields<'_> {
    fn put(&mut self, f: &Field, v: Value) {
        let name = match f.name() {
            "message" => "msg",
            n => n,
        };
        self.0.insert(name.to_string(), v);
    }
}

impl Visit for Fields<'_> {
    fn record_debug(&mut self, f: &Field, v: &dyn fmt::Debug) {
        self.put(f, Value::String(format!("{v:?}")));
    }
    fn record_str(&mut self, f: &Field, v: &str) {
        self.put(f, Value::String(v.to_string()));
    }
    fn record_i64(&mut self, f: &Field, v: i64) {
        self.put(f, Value::from(v));
    }
    fn record_u64(&mut self, f: &Field, v: u64) {
        self.put(f, Value::from(v));
    }
    fn record_f64(&mut self, f: &Field, v: f64) {
        self.put(f, Value::from(v));
    }
    fn record_bool(&mut self, f: &Field, v: bool) {
        self.put(f, Value::from(v));
    }
    fn record_error(&mut self, f: &Field, v: &(dyn std::error::Error + 'static)) {
        self.put(f, Value::String(v.to_string()));
    }
}

/// A timestamp as JSON: the numeric encodings (epoch, millis, nanos) as numbers, written as
/// formatted (no float rounding), the others as strings.
fn ts_json(text: &str) -> String {
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        text.to_string()
    } else {
        Value::String(text.to_string()).to_string()
    }
}

impl<S, N> FormatEvent<S, N> for ZapJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        let mut rest = Map::new();
        rest.insert(
            "logger".into(),
            Value::String(meta.target().replace("::", ".")),
        );
        let mut fields = Map::new();
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                let ext = span.extensions();
                if let Some(f) = ext.get::<FormattedFields<N>>()
                    && let Ok(Value::Object(m)) = serde_json::from_str::<Value>(f)
                {
                    fields.extend(m);
                }
            }
        }
        event.record(&mut Fields(&mut fields));
        rest.insert(
            "msg".into(),
            fields.remove("msg").unwrap_or(Value::String(String::new())),
        );
        if let (Some(Value::String(c)), Some(name)) = (fields.get("controller"), fields.get("name"))
        {
            let (c, name) = (c.clone(), name.clone());
            fields.entry(c).or_insert(name);
        }
        rest.extend(fields);
        let body = Value::Object(rest).to_string();
        writeln!(
            writer,
            "{{\"level\":\"{}\",\"ts\":{},{}",
            level(meta.level()),
            ts_json(&self.time.format(chrono::Utc::now())),
            &body[1..]
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use tracing_subscriber::fmt::MakeWriter;

    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    impl<'a> MakeWriter<'a> for Buf {
        type Writer = Buf;
        fn make_writer(&'a self) -> Buf {
            self.clone()
        }
    }

    #[test]
    fn lines_carry_zap_names_and_span_fields() {
        let buf = Buf::default();
        let sub = tracing_subscriber::fmt()
            .with_writer(buf.clone())
            .fmt_fields(tracing_subscriber::fmt::format::JsonFields::new())
            .event_format(ZapJson {
                time: TimeEncoding::Epoch,
            })
            .finish();
        tracing::subscriber::with_default(sub, || {
            let span = tracing::info_span!(
                "reconcile",
                controller = "externalsecret",
                namespace = "app",
                name = "db",
                reconcileID = "0b5a",
            );
            span.in_scope(|| tracing::warn!(retry_in = 5, "reconcile failed"));
            tracing::info!("outside");
        });
        let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2, "{text}");
        let l = &lines[0];
        assert_eq!(l["level"], "warn");
        assert_eq!(l["msg"], "reconcile failed");
        assert_eq!(l["logger"], "esr.cmd.controller.logfmt.tests");
        assert_eq!(l["controller"], "externalsecret");
        assert_eq!(l["externalsecret"], "db");
        assert_eq!(l["namespace"], "app");
        assert_eq!(l["reconcileID"], "0b5a");
        assert_eq!(l["retry_in"], 5);
        assert!(l["ts"].is_f64() || l["ts"].is_u64(), "{l}");
        assert!(text.starts_with("{\"level\":\"warn\",\"ts\":"), "{text}");
        assert_eq!(lines[1]["msg"], "outside");
        assert!(lines[1].get("reconcileID").is_none());
        let iso: Value = serde_json::from_str(&format!(
            "{{\"ts\":{}}}",
            ts_json(&TimeEncoding::Iso8601.format(chrono::Utc::now()))
        ))
        .unwrap();
        assert!(iso["ts"].is_string());
    }
}
