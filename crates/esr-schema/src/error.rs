//! Field errors with the apiserver's texts (`k8s.io/apimachinery/pkg/util/validation/field`).

use std::fmt;

use serde_json::Value;

use crate::gofmt;

/// The type of a field error, one to one with the apiserver's `field.ErrorType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FieldErrorKind {
    /// `FieldValueNotFound`
    NotFound,
    /// `FieldValueRequired`
    Required,
    /// `FieldValueDuplicate`
    Duplicate,
    /// `FieldValueInvalid`
    Invalid,
    /// `FieldValueNotSupported`
    NotSupported,
    /// `FieldValueForbidden`
    Forbidden,
    /// `FieldValueTooLong`
    TooLong,
    /// `FieldValueTooMany`
    TooMany,
    /// `InternalError`
    Internal,
    /// `FieldValueTypeInvalid`
    TypeInvalid,
}

impl FieldErrorKind {
    /// The machine-readable reason used in `Status.details.causes[].reason`,
    /// e.g. `FieldValueNotSupported`.
    pub fn reason(self) -> &'static str {
        match self {
            FieldErrorKind::NotFound => "FieldValueNotFound",
            FieldErrorKind::Required => "FieldValueRequired",
            FieldErrorKind::Duplicate => "FieldValueDuplicate",
            FieldErrorKind::Invalid => "FieldValueInvalid",
            FieldErrorKind::NotSupported => "FieldValueNotSupported",
            FieldErrorKind::Forbidden => "FieldValueForbidden",
            FieldErrorKind::TooLong => "FieldValueTooLong",
            FieldErrorKind::TooMany => "FieldValueTooMany",
            FieldErrorKind::Internal => "InternalError",
            FieldErrorKind::TypeInvalid => "FieldValueTypeInvalid",
        }
    }

    /// The human-readable text, e.g. `Unsupported value`.
    pub fn as_str(self) -> &'static str {
        match self {
            FieldErrorKind::NotFound => "Not found",
            FieldErrorKind::Required => "Required value",
            FieldErrorKind::Duplicate => "Duplicate value",
            FieldErrorKind::Invalid | FieldErrorKind::TypeInvalid => "Invalid value",
            FieldErrorKind::NotSupported => "Unsupported value",
            FieldErrorKind::Forbidden => "Forbidden",
            FieldErrorKind::TooLong => "Too long",
            FieldErrorKind::TooMany => "Too many",
            FieldErrorKind::Internal => "Internal error",
        }
    }
}

impl fmt::Display for FieldErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One field-level error.
///
/// `Display` gives exactly the apiserver's text: `<path>: <message>`, e.g.
/// `spec.target.creationPolicy: Unsupported value: "Foo": supported values: "Owner", "Orphan"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The field path as the apiserver prints it, e.g. `spec.data[0].secretKey`
    /// (`Status.details.causes[].field`). Schema errors about an anyOf/oneOf/allOf/not failure
    /// carry the apiserver's `<nil>` path.
    pub path: String,
    /// The error type.
    pub kind: FieldErrorKind,
    /// The error body without the path (`Status.details.causes[].message`), e.g.
    /// `Required value` or `Invalid value: "x": spec.a in body should match '^[a-z]+$'`.
    pub message: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

impl std::error::Error for FieldError {}

/// The value shown after the error type, as `field.Error.ErrorBody` renders `BadValue`.
#[derive(Debug, Clone)]
pub(crate) enum BadValue {
    /// No value is shown (`Required`, `Forbidden`, `TooLong`, ... and omitted values).
    Omit,
    /// A value decoded from JSON.
    Json(Value),
    /// An integer count (`TooMany`, `minItems`).
    Int(i64),
    /// A value already rendered as Go's `%#v` does.
    Raw(String),
}

impl BadValue {
    fn render(&self) -> Option<String> {
        match self {
            BadValue::Omit => None,
            BadValue::Int(i) => Some(i.to_string()),
            BadValue::Raw(s) => Some(s.clone()),
            BadValue::Json(v) => Some(match v {
                Value::Null => gofmt::quote("null"),
                Value::String(s) => gofmt::quote(s),
                Value::Number(n) => gofmt::number_v(n),
                Value::Bool(b) => b.to_string(),
                Value::Array(_) | Value::Object(_) => gofmt::sharp_v(v),
            }),
        }
    }
}

impl FieldError {
    /// Builds an error the way `field.Error.ErrorBody` renders it.
    pub(crate) fn build(
        path: impl Into<String>,
        kind: FieldErrorKind,
        value: BadValue,
        detail: &str,
    ) -> Self {
        let mut message = match kind {
            FieldErrorKind::Required
            | FieldErrorKind::Forbidden
            | FieldErrorKind::TooLong
            | FieldErrorKind::Internal => kind.as_str().to_string(),
            _ => match value.render() {
                Some(v) => format!("{}: {}", kind.as_str(), v),
                None => kind.as_str().to_string(),
            },
        };
        if !detail.is_empty() {
            message.push_str(": ");
            message.push_str(detail);
        }
        FieldError {
            path: path.into(),
            kind,
            message,
        }
    }

    /// `field.Required(path, detail)`.
    pub fn required(path: impl Into<String>, detail: &str) -> Self {
        Self::build(path, FieldErrorKind::Required, BadValue::Omit, detail)
    }

    /// `field.Forbidden(path, detail)`.
    pub fn forbidden(path: impl Into<String>, detail: &str) -> Self {
        Self::build(path, FieldErrorKind::Forbidden, BadValue::Omit, detail)
    }

    /// `field.Invalid(path, value, detail)`.
    pub fn invalid(path: impl Into<String>, value: &Value, detail: &str) -> Self {
        Self::build(
            path,
            FieldErrorKind::Invalid,
            BadValue::Json(value.clone()),
            detail,
        )
    }

    /// `field.Duplicate(path, value)`.
    pub fn duplicate(path: impl Into<String>, value: &Value) -> Self {
        Self::build(
            path,
            FieldErrorKind::Duplicate,
            BadValue::Json(value.clone()),
            "",
        )
    }

    /// `field.NotSupported(path, value, supported)`.
    pub fn not_supported(path: impl Into<String>, value: &Value, supported: &[String]) -> Self {
        let detail = if supported.is_empty() {
            String::new()
        } else {
            let quoted: Vec<String> = supported.iter().map(|s| gofmt::quote(s)).collect();
            format!("supported values: {}", quoted.join(", "))
        };
        Self::build(
            path,
            FieldErrorKind::NotSupported,
            BadValue::Json(value.clone()),
            &detail,
        )
    }

    /// `field.TooLong(path, _, max)`.
    pub fn too_long(path: impl Into<String>, max: i64) -> Self {
        let detail = if max >= 0 {
            format!(
                "may not be more than {max} {}",
                if max == 1 { "byte" } else { "bytes" }
            )
        } else {
            "value is too long".to_string()
        };
        Self::build(path, FieldErrorKind::TooLong, BadValue::Omit, &detail)
    }

    /// `field.TooMany(path, actual, max)`.
    pub fn too_many(path: impl Into<String>, actual: i64, max: i64) -> Self {
        let detail = if max >= 0 {
            format!(
                "must have at most {max} {}",
                if max == 1 { "item" } else { "items" }
            )
        } else {
            "has too many items".to_string()
        };
        let value = if actual >= 0 {
            BadValue::Int(actual)
        } else {
            BadValue::Omit
        };
        Self::build(path, FieldErrorKind::TooMany, value, &detail)
    }
}

/// An error in the schema itself: it cannot be read as an OpenAPI v3 schema.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    /// A schema node is not a JSON object.
    #[error("{path}: schema must be an object")]
    NotAnObject {
        /// Where in the schema.
        path: String,
    },
    /// A keyword has a value of the wrong JSON type.
    #[error("{path}.{keyword}: must be {expected}")]
    BadKeyword {
        /// Where in the schema.
        path: String,
        /// The keyword, e.g. `maxLength`.
        keyword: String,
        /// What was expected, e.g. `an integer`.
        expected: &'static str,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_like_apiserver() {
        let e = FieldError::not_supported(
            "spec.target.creationPolicy",
            &json!("Foo"),
            &["Owner".to_string(), "Orphan".to_string()],
        );
        assert_eq!(
            e.to_string(),
            "spec.target.creationPolicy: Unsupported value: \"Foo\": supported values: \"Owner\", \"Orphan\""
        );
        assert_eq!(
            FieldError::required("spec.secretStoreRef.name", "").to_string(),
            "spec.secretStoreRef.name: Required value"
        );
        assert_eq!(
            FieldError::too_long("spec.a", 253).to_string(),
            "spec.a: Too long: may not be more than 253 bytes"
        );
        assert_eq!(
            FieldError::too_long("spec.a", 1).message,
            "Too long: may not be more than 1 byte"
        );
        assert_eq!(
            FieldError::too_many("spec.l", 3, 2).to_string(),
            "spec.l: Too many: 3: must have at most 2 items"
        );
        assert_eq!(
            FieldError::too_many("spec.l", 3, 1).message,
            "Too many: 3: must have at most 1 item"
        );
        assert_eq!(
            FieldError::duplicate("spec.l[1]", &json!({"name": "a"})).to_string(),
            "spec.l[1]: Duplicate value: map[string]interface {}{\"name\":\"a\"}"
        );
        assert_eq!(
            FieldError::invalid("spec.n", &json!(null), "x").message,
            "Invalid value: \"null\": x"
        );
        assert_eq!(
            FieldError::invalid("spec.n", &json!(1.5), "x").message,
            "Invalid value: 1.5: x"
        );
        assert_eq!(
            FieldErrorKind::NotSupported.reason(),
            "FieldValueNotSupported"
        );
    }
}
