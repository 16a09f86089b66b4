//! Semantic validation of external-secrets.io objects: the rules ESO's admission webhook enforces on
//! top of the CRD schema. Each function returns one message per violated rule (empty means valid);
//! the messages follow ESO's webhook texts where ESO has one.
//!
//! - [`validate_external_secret`] (`externalsecret_validator.go`, plus the template rules the
//!   controller re-checks in `ValidateSecretTemplate`):
//!   - `deletionPolicy=Delete` is rejected with creationPolicy `Merge`, `None` or `CreateOrMerge`,
//!     and `deletionPolicy=Merge` with creationPolicy `None`;
//!   - at least one of `data` or `dataFrom` is required;
//!   - each `dataFrom` entry needs exactly one of `extract`, `find` or `sourceRef.generatorRef`, and
//!     a `sourceRef` needs a `storeRef` or a `generatorRef`;
//!   - for a Secret target (no `manifest`): template type `bootstrap.kubernetes.io/token` is always
//!     rejected, `templateFrom[].target` must be `Data`, `Annotations` or `Labels`, and type
//!     `kubernetes.io/service-account-token` is rejected together with the
//!     `kubernetes.io/service-account.name` annotation or a templateFrom target of `Annotations`;
//!   - with `deletionPolicy=Retain`, duplicate `data[].secretKey` values are rejected;
//! - [`validate_secret_store`] / [`validate_cluster_secret_store`] (`secretstore_validator.go`:
//!   `conditions[].namespaceRegexes` must compile as Go regexps; plus the `refreshInterval` rule:
//!   an int-or-string that must be a non-negative number of seconds or Go duration). The caller
//!   passes the regexp compiler (`esr_schema::compile_go_regex` gives Go RE2 semantics), so this
//!   crate needs no regex engine.
//!
//! The `x-kubernetes-validations` (CEL) rules of the CRDs are not here: `esr-schema` evaluates
//! the CRDs' own rules.
//!
//! Provider-specific `ValidateStore` checks of ESO's providers are not part of these rules.

use crate::duration;
use crate::v1::{
    ClusterSecretStore, CreationPolicy, DeletionPolicy, ExternalSecret,
    ExternalSecretDataFromRemoteRef, ExternalSecretSpec, SecretStore, SecretStoreSpec,
    TemplateTarget,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// Annotation naming the ServiceAccount of a `kubernetes.io/service-account-token` Secret.
const SERVICE_ACCOUNT_NAME_ANNOTATION: &str = "kubernetes.io/service-account.name";
const SERVICE_ACCOUNT_TOKEN_TYPE: &str = "kubernetes.io/service-account-token";
const BOOTSTRAP_TOKEN_TYPE: &str = "bootstrap.kubernetes.io/token";

/// The admission rules for an ExternalSecret.
pub fn validate_external_secret(es: &ExternalSecret) -> Vec<String> {
    validate_external_secret_spec(&es.spec)
}

/// The admission rules for an ExternalSecret spec (also used for the spec a ClusterExternalSecret
/// stamps out).
pub fn validate_external_secret_spec(spec: &ExternalSecretSpec) -> Vec<String> {
    let mut errs = Vec::new();
    let target = spec.target.as_ref();
    let creation = target.and_then(|t| t.creation_policy).unwrap_or_default();
    let deletion = target.and_then(|t| t.deletion_policy).unwrap_or_default();

    if deletion == DeletionPolicy::Delete
        && matches!(
            creation,
            CreationPolicy::Merge | CreationPolicy::None | CreationPolicy::CreateOrMerge
        )
    {
        errs.push(
            "deletionPolicy=Delete must not be used when the controller doesn't own the secret. Please set creationPolicy=Owner"
                .to_string(),
        );
    }
    if deletion == DeletionPolicy::Merge && creation == CreationPolicy::None {
        errs.push(
            "deletionPolicy=Merge must not be used with creationPolicy=None. There is no Secret to merge with".to_string(),
        );
    }

    let data_len = spec.data.as_ref().map_or(0, Vec::len);
    let data_from_len = spec.data_from.as_ref().map_or(0, Vec::len);
    if data_len == 0 && data_from_len == 0 {
        errs.push("either data or dataFrom should be specified".to_string());
    }

    for r in spec.data_from.iter().flatten() {
        validate_data_from(r, &mut errs);
    }

    if let Some(template) = target.and_then(|t| t.template.as_ref())
        && target.and_then(|t| t.manifest.as_ref()).is_none()
    {
        let ty = template.type_.as_deref().unwrap_or("");
        if ty == BOOTSTRAP_TOKEN_TYPE {
            errs.push(format!(
                "template type {BOOTSTRAP_TOKEN_TYPE} is not supported"
            ));
        }
        let mut targets = Vec::new();
        for (i, tf) in template.template_from.iter().flatten().enumerate() {
            let raw = tf.target.as_deref().unwrap_or("");
            match TemplateTarget::parse(raw) {
                Some(t) => targets.push(t),
                None => errs.push(format!(
                    "templateFrom[{i}].target {raw:?} is not supported for a Secret target: must be one of Data, Annotations, Labels"
                )),
            }
        }
        if ty == SERVICE_ACCOUNT_TOKEN_TYPE {
            let annotated = template
                .metadata
                .as_ref()
                .and_then(|m| m.annotations.as_ref())
                .is_some_and(|a| a.contains_key(SERVICE_ACCOUNT_NAME_ANNOTATION));
            if annotated {
                errs.push(format!(
                    "template type {SERVICE_ACCOUNT_TOKEN_TYPE} must not be used with the {SERVICE_ACCOUNT_NAME_ANNOTATION} annotation"
                ));
            }
            if targets.contains(&TemplateTarget::Annotations) {
                errs.push(format!(
                    "template type {SERVICE_ACCOUNT_TOKEN_TYPE} must not be used with a templateFrom target of Annotations"
                ));
            }
        }
    }

    if deletion == DeletionPolicy::Retain {
        let mut seen = std::collections::HashSet::new();
        for d in spec.data.iter().flatten() {
            if !seen.insert(d.secret_key.as_str()) {
                errs.push(format!("duplicate secretKey found: {}", d.secret_key));
            }
        }
    }
    errs
}

fn validate_data_from(r: &ExternalSecretDataFromRemoteRef, errs: &mut Vec<String>) {
    let generator = r
        .source_ref
        .as_ref()
        .is_some_and(|s| s.generator_ref.is_some());
    let sources =
        usize::from(r.extract.is_some()) + usize::from(r.find.is_some()) + usize::from(generator);
    if sources > 1 {
        errs.push("extract, find, or generatorRef cannot be set at the same time".to_string());
    }
    if r.find.is_none() && r.extract.is_none() && r.source_ref.is_none() {
        errs.push("either extract, find, or sourceRef must be set to dataFrom".to_string());
    }
    if let Some(s) = &r.source_ref
        && s.generator_ref.is_none()
        && s.store_ref.is_none()
    {
        errs.push(
            "generatorRef or storeRef must be set when using sourceRef in dataFrom".to_string(),
        );
    }
}

/// Compiles a regular expression, returning the compile error text.
pub type RegexCompiler<'a> = &'a dyn Fn(&str) -> Result<(), String>;

/// The admission rules for a SecretStore.
pub fn validate_secret_store(store: &SecretStore, compile_regex: RegexCompiler<'_>) -> Vec<String> {
    validate_store_spec(&store.spec, compile_regex)
}

/// The admission rules for a ClusterSecretStore.
pub fn validate_cluster_secret_store(
    store: &ClusterSecretStore,
    compile_regex: RegexCompiler<'_>,
) -> Vec<String> {
    validate_store_spec(&store.spec, compile_regex)
}

/// The rules shared by SecretStore and ClusterSecretStore.
pub fn validate_store_spec(
    spec: &SecretStoreSpec,
    compile_regex: RegexCompiler<'_>,
) -> Vec<String> {
    let mut errs = Vec::new();
    for (ci, condition) in spec.conditions.iter().flatten().enumerate() {
        for (ri, r) in condition.namespace_regexes.iter().flatten().enumerate() {
            if let Err(e) = compile_regex(r) {
                errs.push(format!(
                    "failed to compile {ri}th namespace regex in {ci}th condition: {e}"
                ));
            }
        }
    }
    match &spec.refresh_interval {
        Some(IntOrString::Int(i)) if *i < 0 => {
            errs.push(format!("refreshInterval must not be negative: {i}"));
        }
        Some(IntOrString::String(s)) if !s.is_empty() => match duration::parse(s) {
            Ok(d) if d.is_negative() => {
                errs.push(format!("refreshInterval must not be negative: {s:?}"))
            }
            Ok(_) => {}
            Err(e) => errs.push(format!("refreshInterval is not a valid duration: {e}")),
        },
        _ => {}
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn es(spec: serde_json::Value) -> ExternalSecret {
        serde_json::from_value(json!({
            "apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
            "metadata": {"name": "e"}, "spec": spec
        }))
        .unwrap()
    }

    fn store(spec: serde_json::Value) -> SecretStore {
        serde_json::from_value(json!({
            "apiVersion": "external-secrets.io/v1", "kind": "SecretStore",
            "metadata": {"name": "s"}, "spec": spec
        }))
        .unwrap()
    }

    const DATA: &str = r#"[{"secretKey": "a", "remoteRef": {"key": "k"}}]"#;

    fn data() -> serde_json::Value {
        serde_json::from_str(DATA).unwrap()
    }

    #[test]
    fn valid_external_secret() {
        assert!(validate_external_secret(&es(json!({"data": data()}))).is_empty());
    }

    #[test]
    fn policies() {
        for c in ["Merge", "None", "CreateOrMerge"] {
            let e = validate_external_secret(&es(
                json!({"data": data(), "target": {"creationPolicy": c, "deletionPolicy": "Delete"}}),
            ));
            assert_eq!(
                e,
                vec![
                    "deletionPolicy=Delete must not be used when the controller doesn't own the secret. Please set creationPolicy=Owner"
                ],
                "{c}"
            );
        }
        assert!(validate_external_secret(&es(json!({"data": data(), "target": {"creationPolicy": "Orphan", "deletionPolicy": "Delete"}}))).is_empty());
        let e = validate_external_secret(&es(
            json!({"data": data(), "target": {"creationPolicy": "None", "deletionPolicy": "Merge"}}),
        ));
        assert_eq!(
            e,
            vec![
                "deletionPolicy=Merge must not be used with creationPolicy=None. There is no Secret to merge with"
            ]
        );
    }

    #[test]
    fn data_or_data_from() {
        assert_eq!(
            validate_external_secret(&es(json!({}))),
            vec!["either data or dataFrom should be specified"]
        );
    }

    #[test]
    fn data_from_sources() {
        let e = validate_external_secret(&es(
            json!({"dataFrom": [{"extract": {"key": "a"}, "find": {"name": {"regexp": "x"}}}]}),
        ));
        assert_eq!(
            e,
            vec!["extract, find, or generatorRef cannot be set at the same time"]
        );
        let e = validate_external_secret(&es(json!({"dataFrom": [{"rewrite": []}]})));
        assert_eq!(
            e,
            vec!["either extract, find, or sourceRef must be set to dataFrom"]
        );
        let e = validate_external_secret(&es(json!({"dataFrom": [{"sourceRef": {}}]})));
        assert_eq!(
            e,
            vec!["generatorRef or storeRef must be set when using sourceRef in dataFrom"]
        );
        let e = validate_external_secret(&es(json!({"dataFrom": [{"extract": {"key": "a"},
            "sourceRef": {"generatorRef": {"kind": "Password", "name": "p"}}}]})));
        assert_eq!(
            e,
            vec!["extract, find, or generatorRef cannot be set at the same time"]
        );
        assert!(validate_external_secret(&es(json!({"dataFrom": [{"sourceRef": {"generatorRef": {"kind": "Password", "name": "p"}}}]}))).is_empty());
    }

    #[test]
    fn template_rules() {
        let e = validate_external_secret(&es(
            json!({"data": data(), "target": {"template": {"type": "bootstrap.kubernetes.io/token"}}}),
        ));
        assert_eq!(
            e,
            vec!["template type bootstrap.kubernetes.io/token is not supported"]
        );
        let e = validate_external_secret(&es(json!({"data": data(), "target": {"template": {
            "type": "kubernetes.io/service-account-token",
            "metadata": {"annotations": {"kubernetes.io/service-account.name": "sa"}},
            "templateFrom": [{"target": "annotations", "literal": "a: b"}]
        }}})));
        assert_eq!(
            e,
            vec![
                "template type kubernetes.io/service-account-token must not be used with the kubernetes.io/service-account.name annotation",
                "template type kubernetes.io/service-account-token must not be used with a templateFrom target of Annotations",
            ]
        );
        let e = validate_external_secret(&es(
            json!({"data": data(), "target": {"template": {"templateFrom": [{"target": "Spec", "literal": "x"}]}}}),
        ));
        assert_eq!(
            e,
            vec![
                "templateFrom[0].target \"Spec\" is not supported for a Secret target: must be one of Data, Annotations, Labels"
            ]
        );
        assert!(validate_external_secret(&es(json!({"data": data(), "target": {"template": {"templateFrom": [{"target": "labels", "literal": "x"}]}}}))).is_empty());
    }

    #[test]
    fn duplicate_keys_only_with_retain() {
        let dup = json!([{"secretKey": "a", "remoteRef": {"key": "k"}}, {"secretKey": "a", "remoteRef": {"key": "j"}}]);
        assert_eq!(
            validate_external_secret(&es(json!({"data": dup.clone()}))),
            vec!["duplicate secretKey found: a"]
        );
        assert!(
            validate_external_secret(&es(
                json!({"data": dup, "target": {"deletionPolicy": "Merge"}})
            ))
            .is_empty()
        );
    }

    /// A stand-in compiler for tests: rejects unbalanced parentheses.
    fn parens(r: &str) -> Result<(), String> {
        let open = r.matches('(').count();
        let close = r.matches(')').count();
        if open == close {
            Ok(())
        } else {
            Err("missing closing )".to_string())
        }
    }

    #[test]
    fn store_rules() {
        let fake = json!({"fake": {"data": []}});
        assert!(
            validate_secret_store(
                &store(json!({"provider": fake, "refreshInterval": "5m"})),
                &parens
            )
            .is_empty()
        );
        assert!(
            validate_secret_store(
                &store(json!({"provider": fake, "refreshInterval": 30})),
                &parens
            )
            .is_empty()
        );
        assert_eq!(
            validate_secret_store(
                &store(json!({"provider": fake, "refreshInterval": -1})),
                &parens
            ),
            vec!["refreshInterval must not be negative: -1"]
        );
        let e = validate_secret_store(
            &store(json!({"provider": fake, "refreshInterval": "soon"})),
            &parens,
        );
        assert_eq!(e.len(), 1);
        assert!(
            e[0].starts_with("refreshInterval is not a valid duration: "),
            "{e:?}"
        );
        let e = validate_cluster_secret_store(
            &serde_json::from_value(json!({"metadata": {"name": "c"}, "spec": {"provider": fake,
                "conditions": [{"namespaceRegexes": ["ok-.*", "("]}]}}))
            .unwrap(),
            &parens,
        );
        assert_eq!(
            e,
            vec!["failed to compile 1th namespace regex in 0th condition: missing closing )"]
        );
    }
}
