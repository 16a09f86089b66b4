//! Kubernetes name and key formats, with the apiserver's messages.
//!
//! Each function returns the apiserver's error messages for a value (empty when the value is
//! valid), exactly as apimachinery's `IsDNS1123Subdomain`, `IsDNS1123Label`, `IsDNS1035Label`,
//! `IsQualifiedName`, `IsValidLabelValue`, `IsConfigMapKey` and `IsValidPathSegmentName` word
//! them, e.g. `must be no more than 253 characters`. Callers wrap them in a field error
//! (`metadata.name: Invalid value: "x": <message>`).
//!
//! - RFC 1123 subdomain (most object names, Secret and ConfigMap included): at most 253
//!   characters, lower-case alphanumerics, `-` and `.`, starting and ending with an alphanumeric.
//!   The dot-separated parts have no length limit of their own.
//! - RFC 1123 label (Namespace names): at most 63 characters, lower-case alphanumerics and `-`.
//! - RFC 1035 label (Service names, CRD version names and resource names): like an RFC 1123 label
//!   but starting with a letter.
//! - path segment (RBAC object names, core/v1 Event names): anything but `.` and `..`, without
//!   `/` or `%`.
//! - qualified name (label keys, annotation keys lower-cased): an optional RFC 1123 subdomain
//!   prefix and `/`, then at most 63 alphanumerics, `-`, `_` and `.`, starting and ending with an
//!   alphanumeric.
//! - label value: empty, or at most 63 characters of the qualified-name form.
//! - config key (Secret and ConfigMap data keys): at most 253 alphanumerics, `-`, `_` and `.`,
//!   neither `.` nor `..` nor starting with `..`.

use std::sync::LazyLock;

use regex::Regex;

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const CONFIG_KEY_FMT: &str = "[-._a-zA-Z0-9]+";

const QUALIFIED_NAME_ERR: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

fn anchored(fmt: &str) -> Option<Regex> {
    Regex::new(&format!("^(?:{fmt})$")).ok()
}

static DNS1123_LABEL: LazyLock<Option<Regex>> = LazyLock::new(|| anchored(DNS1123_LABEL_FMT));
static DNS1123_SUBDOMAIN: LazyLock<Option<Regex>> =
    LazyLock::new(|| anchored(DNS1123_SUBDOMAIN_FMT));
static DNS1035_LABEL: LazyLock<Option<Regex>> = LazyLock::new(|| anchored(DNS1035_LABEL_FMT));
static QUALIFIED_NAME: LazyLock<Option<Regex>> = LazyLock::new(|| anchored(QUALIFIED_NAME_FMT));
static LABEL_VALUE: LazyLock<Option<Regex>> = LazyLock::new(|| anchored(LABEL_VALUE_FMT));
static CONFIG_KEY: LazyLock<Option<Regex>> = LazyLock::new(|| anchored(CONFIG_KEY_FMT));

fn matches(re: &LazyLock<Option<Regex>>, value: &str) -> bool {
    re.as_ref().is_some_and(|r| r.is_match(value))
}

/// apimachinery's `RegexError`: the message, examples and the regex.
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{fmt}')");
    }
    let mut out = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        out.push_str(&format!("'{e}', "));
    }
    out.push_str(&format!("regex used for validation is '{fmt}')"));
    out
}

fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

/// `IsDNS1123Subdomain`.
pub fn dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errs = vec![];
    if value.len() > 253 {
        errs.push(max_len_error(253));
    }
    if !matches(&DNS1123_SUBDOMAIN, value) {
        errs.push(regex_error(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

/// `IsDNS1123Label`.
pub fn dns1123_label(value: &str) -> Vec<String> {
    let mut errs = vec![];
    if value.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !matches(&DNS1123_LABEL, value) {
        errs.push(regex_error(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
            DNS1123_LABEL_FMT,
            &["my-name", "123-abc"],
        ));
    }
    errs
}

/// `IsDNS1035Label`.
pub fn dns1035_label(value: &str) -> Vec<String> {
    let mut errs = vec![];
    if value.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !matches(&DNS1035_LABEL, value) {
        errs.push(regex_error(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character",
            DNS1035_LABEL_FMT,
            &["my-name", "abc-123"],
        ));
    }
    errs
}

/// `IsValidPathSegmentName`.
pub fn path_segment(value: &str) -> Vec<String> {
    if value == "." || value == ".." {
        return vec![format!("may not be '{value}'")];
    }
    ["/", "%"]
        .iter()
        .filter(|c| value.contains(**c))
        .map(|c| format!("may not contain '{c}'"))
        .collect()
}

/// `IsQualifiedName` (label keys; annotation keys after lower-casing).
pub fn qualified_name(value: &str) -> Vec<String> {
    let mut errs = vec![];
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                errs.extend(
                    dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            return vec![format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(
                    QUALIFIED_NAME_ERR,
                    QUALIFIED_NAME_FMT,
                    &["MyName", "my.name", "123-abc"]
                )
            )];
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push(format!("name part {}", max_len_error(63)));
    }
    if !matches(&QUALIFIED_NAME, name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                QUALIFIED_NAME_ERR,
                QUALIFIED_NAME_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// `IsValidLabelValue`.
pub fn label_value(value: &str) -> Vec<String> {
    let mut errs = vec![];
    if value.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !matches(&LABEL_VALUE, value) {
        errs.push(regex_error(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// `IsConfigMapKey` (Secret and ConfigMap data keys).
pub fn config_key(value: &str) -> Vec<String> {
    let mut errs = vec![];
    if value.len() > 253 {
        errs.push(max_len_error(253));
    }
    if !matches(&CONFIG_KEY, value) {
        errs.push(regex_error(
            "a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
            CONFIG_KEY_FMT,
            &["key.name", "KEY_NAME", "key-name"],
        ));
    }
    if value == "." {
        errs.push("must not be '.'".to_string());
    } else if value == ".." {
        errs.push("must not be '..'".to_string());
    } else if value.starts_with("..") {
        errs.push("must not start with '..'".to_string());
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subdomain_parts_have_no_label_limit() {
        let long = "this-is-a-very-big-secret-name-that-wouldnt-be-generated-due-to-label-limits";
        assert_eq!(long.len(), 76);
        assert!(dns1123_subdomain(long).is_empty());
        assert_eq!(
            dns1123_subdomain(&"a".repeat(254)),
            ["must be no more than 253 characters"]
        );
        assert_eq!(
            dns1123_subdomain("Eso"),
            [
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
            ]
        );
    }

    #[test]
    fn labels_and_keys() {
        assert_eq!(
            dns1123_label(&"a".repeat(64)),
            ["must be no more than 63 characters"]
        );
        assert!(label_value("").is_empty());
        assert!(label_value("My_value.1").is_empty());
        assert_eq!(
            label_value(&"a".repeat(64)),
            ["must be no more than 63 characters"]
        );
        assert_eq!(
            label_value("-x"),
            [
                "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
            ]
        );
        assert!(qualified_name("app.kubernetes.io/name").is_empty());
        assert_eq!(qualified_name("/x"), ["prefix part must be non-empty"]);
        assert_eq!(
            qualified_name("a/b/c"),
            [
                "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            ]
        );
        assert_eq!(qualified_name("").len(), 2);
    }

    #[test]
    fn path_segments_and_config_keys() {
        assert!(path_segment("eso-rb-").is_empty());
        assert_eq!(path_segment(".."), ["may not be '..'"]);
        assert_eq!(
            path_segment("a/b%c"),
            ["may not contain '/'", "may not contain '%'"]
        );
        assert!(config_key(".dockerconfigjson").is_empty());
        assert_eq!(config_key("..a"), ["must not start with '..'"]);
        assert_eq!(config_key("a b").len(), 1);
    }
}
