//! Kubernetes `Status` error bodies, with the reasons and codes a real kube-apiserver uses.

use serde_json::{Value, json};

/// One `details.causes[]` entry of a Status.
#[derive(Debug, Clone, PartialEq)]
pub struct Cause {
    /// e.g. `FieldValueInvalid`, `FieldValueRequired`, `FieldValueForbidden`.
    pub reason: String,
    /// Message of the cause, without the field prefix.
    pub message: String,
    /// Field path, e.g. `spec.refreshInterval`.
    pub field: String,
}

impl Cause {
    /// A cause.
    pub fn new(reason: &str, message: impl Into<String>, field: impl Into<String>) -> Self {
        Self {
            reason: reason.to_string(),
            message: message.into(),
            field: field.into(),
        }
    }
}

/// An API error answered as a `Status` object.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// `reason` of the Status (`NotFound`, `Conflict`, ...).
    pub reason: String,
    /// Human readable message.
    pub message: String,
    /// `details`, if any.
    pub details: Option<Value>,
}

/// Identifies the kind of object an error is about, for messages and details.
#[derive(Debug, Clone)]
pub struct Subject<'a> {
    /// API group ("" for core).
    pub group: &'a str,
    /// Plural resource name.
    pub plural: &'a str,
    /// Kind.
    pub kind: &'a str,
}

impl Subject<'_> {
    /// `secrets` or `externalsecrets.external-secrets.io`.
    pub fn qualified_resource(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }
    /// `Secret` or `ExternalSecret.external-secrets.io`.
    pub fn qualified_kind(&self) -> String {
        if self.group.is_empty() {
            self.kind.to_string()
        } else {
            format!("{}.{}", self.kind, self.group)
        }
    }
    fn resource_details(&self, name: &str) -> Value {
        let mut d = json!({"name": name});
        if !self.group.is_empty() {
            d["group"] = json!(self.group);
        }
        d["kind"] = json!(self.plural);
        d
    }
}

impl ApiError {
    /// A bare error.
    pub fn new(code: u16, reason: &str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason: reason.to_string(),
            message: message.into(),
            details: None,
        }
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 404 for a missing object.
    pub fn not_found(s: &Subject<'_>, name: &str) -> Self {
        Self {
            code: 404,
            reason: "NotFound".into(),
            message: format!("{} \"{}\" not found", s.qualified_resource(), name),
            details: Some(s.resource_details(name)),
        }
    }

    /// 404 for a path the server does not serve.
    pub fn path_not_found() -> Self {
        Self {
            code: 404,
            reason: "NotFound".into(),
            message: "the server could not find the requested resource".into(),
            details: Some(json!({})),
        }
    }

    /// 409 AlreadyExists.
    pub fn already_exists(s: &Subject<'_>, name: &str) -> Self {
        Self {
            code: 409,
            reason: "AlreadyExists".into(),
            message: format!("{} \"{}\" already exists", s.qualified_resource(), name),
            details: Some(s.resource_details(name)),
        }
    }

    /// 409 Conflict for a stale resourceVersion or failed precondition.
    pub fn conflict_modified(s: &Subject<'_>, name: &str) -> Self {
        Self {
            code: 409,
            reason: "Conflict".into(),
            message: format!(
                "Operation cannot be fulfilled on {} \"{}\": the object has been modified; please apply your changes to the latest version and try again",
                s.qualified_resource(),
                name
            ),
            details: Some(s.resource_details(name)),
        }
    }

    /// 409 Conflict with a custom message.
    pub fn conflict(s: &Subject<'_>, name: &str, why: &str) -> Self {
        Self {
            code: 409,
            reason: "Conflict".into(),
            message: format!(
                "Operation cannot be fulfilled on {} \"{}\": {}",
                s.qualified_resource(),
                name,
                why
            ),
            details: Some(s.resource_details(name)),
        }
    }

    /// 422 Invalid with field causes.
    pub fn invalid(s: &Subject<'_>, name: &str, causes: Vec<Cause>) -> Self {
        // Like apimachinery's aggregate: identical messages are shown once (the causes keep all).
        let mut parts: Vec<String> = vec![];
        for c in &causes {
            let part = format!("{}: {}", c.field, c.message);
            if !parts.contains(&part) {
                parts.push(part);
            }
        }
        let joined = if parts.len() == 1 {
            parts[0].clone()
        } else {
            format!("[{}]", parts.join(", "))
        };
        let mut details = json!({"name": name});
        if !s.group.is_empty() {
            details["group"] = json!(s.group);
        }
        details["kind"] = json!(s.kind);
        details["causes"] = Value::Array(
            causes
                .iter()
                .map(|c| {
                    let mut cause = json!({"reason": c.reason, "message": c.message});
                    // `field` is omitted when empty, as in a real Status.
                    if !c.field.is_empty() {
                        cause["field"] = json!(c.field);
                    }
                    cause
                })
                .collect(),
        );
        Self {
            code: 422,
            reason: "Invalid".into(),
            message: format!("{} \"{}\" is invalid: {}", s.qualified_kind(), name, joined),
            details: Some(details),
        }
    }

    /// 403 for creating in a terminating namespace.
    pub fn namespace_terminating(plural: &str, name: &str, ns: &str) -> Self {
        Self {
            code: 403,
            reason: "Forbidden".into(),
            message: format!(
                "{plural} \"{name}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated"
            ),
            details: Some(json!({
                "name": name,
                "kind": plural,
                "causes": [{
                    "reason": "NamespaceTerminating",
                    "message": format!("namespace {ns} is being terminated"),
                    "field": "metadata.namespace"
                }]
            })),
        }
    }

    /// 405 MethodNotAllowed.
    pub fn method_not_allowed(method: &str, what: &str) -> Self {
        Self {
            code: 405,
            reason: "MethodNotAllowed".into(),
            message: format!("{method} on {what} is not supported"),
            details: Some(json!({})),
        }
    }

    /// 410 Gone / Expired for a compacted resourceVersion.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 415 for an unsupported patch type.
    pub fn unsupported_media_type(ct: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml (got {ct})"
            ),
        )
    }

    /// 500 InternalError.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// The reason a real server uses for a bare status code (fault injection).
    pub fn from_code(code: u16, message: Option<String>) -> Self {
        let (reason, default_msg) = match code {
            400 => ("BadRequest", "bad request"),
            401 => ("Unauthorized", "Unauthorized"),
            403 => ("Forbidden", "forbidden"),
            404 => (
                "NotFound",
                "the server could not find the requested resource",
            ),
            405 => (
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource",
            ),
            409 => (
                "Conflict",
                "the object has been modified; please apply your changes to the latest version and try again",
            ),
            410 => ("Expired", "the resource version is too old"),
            422 => ("Invalid", "the object is invalid"),
            429 => (
                "TooManyRequests",
                "the server has received too many requests and has asked us to try again later",
            ),
            500 => (
                "InternalError",
                "an error on the server has prevented the request from succeeding",
            ),
            503 => (
                "ServiceUnavailable",
                "the server is currently unable to handle the request",
            ),
            504 => (
                "Timeout",
                "the server was unable to return a response in the time allotted",
            ),
            _ => ("Unknown", "injected failure"),
        };
        let mut e = Self::new(
            code,
            reason,
            message.unwrap_or_else(|| default_msg.to_string()),
        );
        if code == 429 || code == 503 || code == 504 {
            e.details = Some(json!({"retryAfterSeconds": 1}));
        }
        e
    }

    /// The Status body.
    pub fn status(&self) -> Value {
        let mut v = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
        });
        if let Some(d) = &self.details {
            v["details"] = d.clone();
        }
        v["code"] = json!(self.code);
        v
    }
}

/// Result alias.
pub type ApiResult<T> = Result<T, ApiError>;
