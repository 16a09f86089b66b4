//! Object validation a real kube-apiserver (v1.34) makes on create and update, beyond schemas.
//!
//! - **Names**, by kind: Namespaces are RFC 1123 labels (≤ 63 characters), Services RFC 1035
//!   labels, Role/RoleBinding/ClusterRole/ClusterRoleBinding and core/v1 Event names path
//!   segments (not `.` or `..`, no `/` or `%`); every other kind (Secret, ConfigMap, custom
//!   resources, ...) uses RFC 1123 subdomains (≤ 253 characters, no limit per dot-separated part).
//! - **Labels**: keys are qualified names, values at most 63 characters of the label pattern; all
//!   reported under `metadata.labels`.
//! - **Annotations**: keys are qualified names (case-insensitive); keys and values together at
//!   most 256 KiB (`metadata.annotations: Too long: may not be more than 262144 bytes`).
//! - **Secrets**: data keys are config keys; the decoded data at most 1 MiB
//!   (`data: Too long: may not be more than 1048576 bytes`); the typed Secrets need their keys:
//!   `kubernetes.io/tls` both `tls.crt` and `tls.key`, `kubernetes.io/dockerconfigjson`
//!   `.dockerconfigjson` and `kubernetes.io/dockercfg` `.dockercfg` (each a JSON object, or
//!   `null`, with Go's `encoding/json` error otherwise, the value shown as
//!   `<secret contents redacted>`), `kubernetes.io/basic-auth` `username` or `password`,
//!   `kubernetes.io/ssh-auth` a non-empty `ssh-privatekey`, and
//!   `kubernetes.io/service-account-token` the `kubernetes.io/service-account.name` annotation.
//! - **ConfigMaps**: `data` and `binaryData` keys are config keys, present in only one of the two,
//!   and all values together at most 1 MiB (reported with an empty field path).
//! - **Events** with an `eventTime` (all events.k8s.io/v1 events, and core/v1 events written by
//!   new clients): reporting controller (a qualified name), reporting instance, action and reason
//!   are required, the last three at most 128 characters, and the note (core/v1 `message`) at
//!   most 1,024 characters, reported as `message: Invalid value: "": can have at most 1024
//!   characters`. core/v1 events without `eventTime` have no such limits. events.k8s.io/v1 events
//!   also need `eventTime`, a `type` of `Normal` or `Warning`, unset `deprecated*` fields and a
//!   `series` (if any) with `count` ≥ 2 and a `lastObservedTime`.
//!
//! Type immutability on update and the `immutable` flag are checked in the store.

use std::collections::BTreeMap;

use base64::Engine;
use esr_schema::FieldError;
use esr_schema::names;
use serde_json::Value;

use crate::error::Cause;
use crate::registry::ResourceType;

/// The largest Secret data or ConfigMap content, in bytes (1 MiB).
pub const MAX_SECRET_SIZE: i64 = 1024 * 1024;
/// The largest total size of an object's annotations, in bytes (256 KiB).
pub const MAX_ANNOTATIONS_SIZE: i64 = 256 * 1024;
/// The longest event note (core/v1 `message`, events.k8s.io/v1 `note`), in bytes.
pub const NOTE_LENGTH_LIMIT: usize = 1024;
const EVENT_FIELD_LIMIT: usize = 128;
const REDACTED: &str = "<secret contents redacted>";

fn cause(e: FieldError) -> Cause {
    Cause::new(e.kind.reason(), e.message, e.path)
}

fn invalid(path: impl Into<String>, value: &str, detail: &str) -> Cause {
    cause(FieldError::invalid(
        path,
        &Value::String(value.to_string()),
        detail,
    ))
}

fn required(path: impl Into<String>) -> Cause {
    cause(FieldError::required(path, ""))
}

fn str_map(v: &Value) -> BTreeMap<&str, &str> {
    v.as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.as_str(), v.as_str().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default()
}

/// The name rule of a kind: `metadata.name` errors for `name`.
pub fn name(rt: &ResourceType, name: &str) -> Vec<Cause> {
    if rt.create_only {
        return vec![];
    }
    let msgs = match (rt.group.as_str(), rt.kind.as_str()) {
        ("", "Namespace") => names::dns1123_label(name),
        ("", "Service") => names::dns1035_label(name),
        ("", "Event") | ("rbac.authorization.k8s.io", _) => names::path_segment(name),
        _ => names::dns1123_subdomain(name),
    };
    msgs.iter()
        .map(|m| invalid("metadata.name", name, m))
        .collect()
}

/// Label, annotation and kind-specific rules; empty when the object is valid.
pub fn validate(rt: &ResourceType, obj: &Value) -> Vec<Cause> {
    if rt.create_only {
        return vec![];
    }
    let mut out = vec![];
    let meta = &obj["metadata"];
    for (k, v) in str_map(&meta["labels"]) {
        for m in names::qualified_name(k) {
            out.push(invalid("metadata.labels", k, &m));
        }
        for m in names::label_value(v) {
            out.push(invalid("metadata.labels", v, &m));
        }
    }
    let annotations = str_map(&meta["annotations"]);
    for k in annotations.keys() {
        for m in names::qualified_name(&k.to_lowercase()) {
            out.push(invalid("metadata.annotations", k, &m));
        }
    }
    let size: usize = annotations.iter().map(|(k, v)| k.len() + v.len()).sum();
    if i64::try_from(size).unwrap_or(i64::MAX) > MAX_ANNOTATIONS_SIZE {
        out.push(cause(FieldError::too_long(
            "metadata.annotations",
            MAX_ANNOTATIONS_SIZE,
        )));
    }
    match (rt.group.as_str(), rt.kind.as_str()) {
        ("", "Secret") => out.extend(secret(obj)),
        ("", "ConfigMap") => out.extend(config_map(obj)),
        ("", "Event") => out.extend(event(obj, false)),
        ("events.k8s.io", "Event") => out.extend(event(obj, true)),
        _ => {}
    }
    out
}

fn decoded(v: &Value) -> Vec<u8> {
    v.as_str()
        .and_then(|s| base64::engine::general_purpose::STANDARD.decode(s).ok())
        .unwrap_or_default()
}

/// `ValidateSecret` (after `stringData` was folded into `data`).
fn secret(obj: &Value) -> Vec<Cause> {
    let mut out = vec![];
    let data: BTreeMap<&str, Vec<u8>> = obj["data"]
        .as_object()
        .map(|m| m.iter().map(|(k, v)| (k.as_str(), decoded(v))).collect())
        .unwrap_or_default();
    let mut total = 0usize;
    for (k, v) in &data {
        for m in names::config_key(k) {
            out.push(invalid(format!("data[{k}]"), k, &m));
        }
        total += v.len();
    }
    if i64::try_from(total).unwrap_or(i64::MAX) > MAX_SECRET_SIZE {
        out.push(cause(FieldError::too_long("data", MAX_SECRET_SIZE)));
    }
    let json_key = |key: &str| -> Vec<Cause> {
        match data.get(key) {
            None => vec![required(format!("data[{key}]"))],
            Some(bytes) => go_json_object_error(bytes)
                .map(|e| vec![invalid(format!("data[{key}]"), REDACTED, &e)])
                .unwrap_or_default(),
        }
    };
    match obj["type"].as_str().unwrap_or_default() {
        "kubernetes.io/service-account-token" => {
            let sa = obj["metadata"]["annotations"]["kubernetes.io/service-account.name"]
                .as_str()
                .unwrap_or_default();
            if sa.is_empty() {
                out.push(required(
                    "metadata.annotations[kubernetes.io/service-account.name]",
                ));
            }
        }
        "kubernetes.io/dockercfg" => out.extend(json_key(".dockercfg")),
        "kubernetes.io/dockerconfigjson" => out.extend(json_key(".dockerconfigjson")),
        "kubernetes.io/basic-auth"
            if !data.contains_key("username") && !data.contains_key("password") =>
        {
            out.push(required("data[username]"));
            out.push(required("data[password]"));
        }
        "kubernetes.io/ssh-auth" if data.get("ssh-privatekey").is_none_or(Vec::is_empty) => {
            out.push(required("data[ssh-privatekey]"));
        }
        "kubernetes.io/tls" => {
            for key in ["tls.crt", "tls.key"] {
                if !data.contains_key(key) {
                    out.push(required(format!("data[{key}]")));
                }
            }
        }
        _ => {}
    }
    out
}

/// `ValidateConfigMap`.
fn config_map(obj: &Value) -> Vec<Cause> {
    let mut out = vec![];
    let data = str_map(&obj["data"]);
    let binary: BTreeMap<&str, Vec<u8>> = obj["binaryData"]
        .as_object()
        .map(|m| m.iter().map(|(k, v)| (k.as_str(), decoded(v))).collect())
        .unwrap_or_default();
    let mut total = 0usize;
    for (k, v) in &data {
        for m in names::config_key(k) {
            out.push(invalid(format!("data[{k}]"), k, &m));
        }
        if binary.contains_key(k) {
            out.push(invalid(
                format!("data[{k}]"),
                k,
                "duplicate of key present in binaryData",
            ));
        }
        total += v.len();
    }
    for (k, v) in &binary {
        for m in names::config_key(k) {
            out.push(invalid(format!("binaryData[{k}]"), k, &m));
        }
        if data.contains_key(k) {
            out.push(invalid(
                format!("binaryData[{k}]"),
                k,
                "duplicate of key present in data",
            ));
        }
        total += v.len();
    }
    if i64::try_from(total).unwrap_or(i64::MAX) > MAX_SECRET_SIZE {
        out.push(cause(FieldError::too_long("", MAX_SECRET_SIZE)));
    }
    out
}

fn unset(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Number(n) => n.as_i64() == Some(0),
        Value::Object(m) => m.values().all(unset),
        _ => false,
    }
}

/// `ValidateEventCreate`/`ValidateEventUpdate` (without the update-only immutability rules).
/// `strict` for events.k8s.io/v1, which reads `note`, `regarding`, `deprecated*` fields.
fn event(obj: &Value, strict: bool) -> Vec<Cause> {
    let text = |k: &str| obj[k].as_str().unwrap_or_default();
    let (message, involved, controller_field, controller) = if strict {
        (
            text("note"),
            &obj["regarding"],
            "reportingController",
            text("reportingController"),
        )
    } else {
        (
            text("message"),
            &obj["involvedObject"],
            "reportingComponent",
            text("reportingComponent"),
        )
    };
    let namespace = obj["metadata"]["namespace"].as_str().unwrap_or_default();
    let involved_ns = involved["namespace"].as_str().unwrap_or_default();
    let has_event_time = !unset(&obj["eventTime"]);
    let mut out = vec![];
    if !has_event_time {
        let mismatch = if involved_ns.is_empty() {
            !namespace.is_empty() && namespace != "default"
        } else {
            namespace != involved_ns
        };
        if mismatch {
            out.push(invalid(
                "involvedObject.namespace",
                involved_ns,
                "does not match event.namespace",
            ));
        }
    } else {
        if involved_ns.is_empty() && namespace != "default" && namespace != "kube-system" {
            out.push(invalid(
                "involvedObject.namespace",
                involved_ns,
                "does not match event.namespace",
            ));
        }
        if controller.is_empty() {
            out.push(required(controller_field));
        }
        for m in names::qualified_name(controller) {
            out.push(invalid(controller_field, controller, &m));
        }
        for (field, value, limit) in [
            (
                "reportingInstance",
                text("reportingInstance"),
                EVENT_FIELD_LIMIT,
            ),
            ("action", text("action"), EVENT_FIELD_LIMIT),
            ("reason", text("reason"), EVENT_FIELD_LIMIT),
        ] {
            if value.is_empty() {
                out.push(required(field));
            }
            if value.len() > limit {
                out.push(invalid(
                    field,
                    "",
                    &format!("can have at most {limit} characters"),
                ));
            }
        }
        if message.len() > NOTE_LENGTH_LIMIT {
            out.push(invalid(
                "message",
                "",
                &format!("can have at most {NOTE_LENGTH_LIMIT} characters"),
            ));
        }
    }
    for m in names::dns1123_subdomain(namespace) {
        out.push(invalid("namespace", namespace, &m));
    }
    if !strict {
        return out;
    }
    let series = &obj["series"];
    if series.is_object() {
        if series["count"].as_i64().unwrap_or(0) < 2 {
            out.push(invalid("series.count", "", "should be at least 2"));
        }
        if unset(&series["lastObservedTime"]) {
            out.push(required("series.lastObservedTime"));
        }
    }
    if !has_event_time {
        out.push(required("eventTime"));
    }
    let ty = text("type");
    if ty != "Normal" && ty != "Warning" {
        out.push(invalid("type", "", &format!("has invalid value: {ty}")));
    }
    for (field, internal) in [
        ("deprecatedFirstTimestamp", "firstTimestamp"),
        ("deprecatedLastTimestamp", "lastTimestamp"),
        ("deprecatedCount", "count"),
        ("deprecatedSource", "source"),
    ] {
        if !unset(&obj[field]) {
            out.push(invalid(internal, "", "needs to be unset"));
        }
    }
    out
}

/// The error Go's `json.Unmarshal` gives for `bytes` into a `map[string]interface{}`, if any:
/// a syntax error (`invalid character 'x' looking for beginning of value`,
/// `unexpected end of JSON input`, ...) or a type error for a JSON value that is not an object
/// (`null` is accepted).
pub fn go_json_object_error(bytes: &[u8]) -> Option<String> {
    let mut p = GoJson { b: bytes, i: 0 };
    if let Err(e) = p.document() {
        return Some(e);
    }
    let first = bytes
        .iter()
        .copied()
        .find(|c| !matches!(c, b' ' | b'\t' | b'\r' | b'\n'))?;
    let kind = match first {
        b'{' | b'n' => return None,
        b'"' => "string",
        b'[' => "array",
        b't' | b'f' => "bool",
        _ => "number",
    };
    Some(format!(
        "json: cannot unmarshal {kind} into Go value of type map[string]interface {{}}"
    ))
}

/// A syntax checker with the messages of Go's `encoding/json` scanner.
struct GoJson<'a> {
    b: &'a [u8],
    i: usize,
}

const EOF: &str = "unexpected end of JSON input";

fn quote_char(c: u8) -> String {
    match c {
        b'\'' => "'\\''".to_string(),
        b'"' => "'\"'".to_string(),
        b'\n' => "'\\n'".to_string(),
        b'\r' => "'\\r'".to_string(),
        b'\t' => "'\\t'".to_string(),
        0x07 => "'\\a'".to_string(),
        0x08 => "'\\b'".to_string(),
        0x0c => "'\\f'".to_string(),
        0x0b => "'\\v'".to_string(),
        0..=0x1f | 0x7f => format!("'\\x{c:02x}'"),
        0x80..=0xa0 | 0xad => format!("'\\u{:04x}'", u32::from(c)),
        _ => format!("'{}'", char::from(c)),
    }
}

impl GoJson<'_> {
    fn err(&self, c: u8, context: &str) -> String {
        format!("invalid character {} {context}", quote_char(c))
    }

    fn ws(&mut self) {
        while self
            .b
            .get(self.i)
            .is_some_and(|c| matches!(c, b' ' | b'\t' | b'\r' | b'\n'))
        {
            self.i += 1;
        }
    }

    fn next(&mut self) -> Result<u8, String> {
        let c = *self.b.get(self.i).ok_or_else(|| EOF.to_string())?;
        self.i += 1;
        Ok(c)
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn document(&mut self) -> Result<(), String> {
        self.value()?;
        self.ws();
        match self.peek() {
            None => Ok(()),
            Some(c) => Err(self.err(c, "after top-level value")),
        }
    }

    fn value(&mut self) -> Result<(), String> {
        self.ws();
        let c = self.next()?;
        match c {
            b'{' => self.object(),
            b'[' => self.array(),
            b'"' => self.string(),
            b'-' | b'0'..=b'9' => self.number(c),
            b't' => self.literal("true"),
            b'f' => self.literal("false"),
            b'n' => self.literal("null"),
            _ => Err(self.err(c, "looking for beginning of value")),
        }
    }

    fn object(&mut self) -> Result<(), String> {
        self.ws();
        if self.peek() == Some(b'}') {
            self.i += 1;
            return Ok(());
        }
        loop {
            self.ws();
            let c = self.next()?;
            if c != b'"' {
                return Err(self.err(c, "looking for beginning of object key string"));
            }
            self.string()?;
            self.ws();
            let c = self.next()?;
            if c != b':' {
                return Err(self.err(c, "after object key"));
            }
            self.value()?;
            self.ws();
            match self.next()? {
                b',' => continue,
                b'}' => return Ok(()),
                c => return Err(self.err(c, "after object key:value pair")),
            }
        }
    }

    fn array(&mut self) -> Result<(), String> {
        self.ws();
        if self.peek() == Some(b']') {
            self.i += 1;
            return Ok(());
        }
        loop {
            self.value()?;
            self.ws();
            match self.next()? {
                b',' => continue,
                b']' => return Ok(()),
                c => return Err(self.err(c, "after array element")),
            }
        }
    }

    fn string(&mut self) -> Result<(), String> {
        loop {
            match self.next()? {
                b'"' => return Ok(()),
                b'\\' => match self.next()? {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                    b'u' => {
                        for _ in 0..4 {
                            let h = self.next()?;
                            if !h.is_ascii_hexdigit() {
                                return Err(self.err(h, "in \\u hexadecimal character escape"));
                            }
                        }
                    }
                    c => return Err(self.err(c, "in string escape code")),
                },
                c if c < 0x20 => return Err(self.err(c, "in string literal")),
                _ => {}
            }
        }
    }

    fn digits(&mut self) {
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
        }
    }

    fn number(&mut self, first: u8) -> Result<(), String> {
        let lead = if first == b'-' {
            let c = self.next()?;
            if !c.is_ascii_digit() {
                return Err(self.err(c, "in numeric literal"));
            }
            c
        } else {
            first
        };
        if lead != b'0' {
            self.digits();
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            let c = self.next()?;
            if !c.is_ascii_digit() {
                return Err(self.err(c, "after decimal point in numeric literal"));
            }
            self.digits();
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.i += 1;
            let mut c = self.next()?;
            if c == b'+' || c == b'-' {
                c = self.next()?;
            }
            if !c.is_ascii_digit() {
                return Err(self.err(c, "in exponent of numeric literal"));
            }
            self.digits();
        }
        Ok(())
    }

    fn literal(&mut self, word: &str) -> Result<(), String> {
        for expected in word.bytes().skip(1) {
            let c = self.next()?;
            if c != expected {
                return Err(self.err(
                    c,
                    &format!("in literal {word} (expecting {})", quote_char(expected)),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_json_messages() {
        assert_eq!(go_json_object_error(b"{\"auths\":{}}"), None);
        assert_eq!(go_json_object_error(b" null "), None);
        assert_eq!(go_json_object_error(b""), Some(EOF.to_string()));
        assert_eq!(go_json_object_error(b"{\"a\":"), Some(EOF.to_string()));
        assert_eq!(
            go_json_object_error(b"not json"),
            Some("invalid character 'o' in literal null (expecting 'u')".to_string())
        );
        assert_eq!(
            go_json_object_error(b"x"),
            Some("invalid character 'x' looking for beginning of value".to_string())
        );
        assert_eq!(
            go_json_object_error(b"{a}"),
            Some("invalid character 'a' looking for beginning of object key string".to_string())
        );
        assert_eq!(
            go_json_object_error(b"{\"a\" 1}"),
            Some("invalid character '1' after object key".to_string())
        );
        assert_eq!(
            go_json_object_error(b"{\"a\":1 \"b\"}"),
            Some("invalid character '\"' after object key:value pair".to_string())
        );
        assert_eq!(
            go_json_object_error(b"{} x"),
            Some("invalid character 'x' after top-level value".to_string())
        );
        assert_eq!(
            go_json_object_error(b"[1]"),
            Some(
                "json: cannot unmarshal array into Go value of type map[string]interface {}"
                    .to_string()
            )
        );
        assert_eq!(
            go_json_object_error(b"-x"),
            Some("invalid character 'x' in numeric literal".to_string())
        );
        assert_eq!(
            go_json_object_error(b"{\"a\":\"\n\"}"),
            Some("invalid character '\\n' in string literal".to_string())
        );
    }
}
