//! ESO's execution model: template.data, templateFrom, targets, mergePolicy,
//! metadata templates, rewrite.transform, and secret values kept out of errors.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;

use esr_api::v1::ExternalSecretTemplate;
use esr_template::{
    RenderInput, RenderedSecret, TemplateError, TemplateSources, render_secret, rewrite_transform,
};

fn tpl(yaml: &str) -> ExternalSecretTemplate {
    yaml_serde::from_str(yaml).unwrap()
}

fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, Vec<u8>> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
        .collect()
}

fn render(
    t: Option<&ExternalSecretTemplate>,
    d: &BTreeMap<String, Vec<u8>>,
    s: &TemplateSources,
) -> Result<RenderedSecret, TemplateError> {
    let empty = BTreeMap::new();
    let base = RenderedSecret::default();
    render_secret(&RenderInput {
        template: t,
        data: d,
        sources: s,
        base: &base,
        es_labels: &empty,
        es_annotations: &empty,
    })
}

fn s(v: &[u8]) -> &str {
    std::str::from_utf8(v).unwrap()
}

#[test]
fn no_template_copies_data_and_es_metadata() {
    let d = data(&[("a", "1")]);
    let labels = BTreeMap::from([("team".to_string(), "x".to_string())]);
    let empty = BTreeMap::new();
    let base = RenderedSecret::default();
    let out = render_secret(&RenderInput {
        template: None,
        data: &d,
        sources: &TemplateSources::default(),
        base: &base,
        es_labels: &labels,
        es_annotations: &empty,
    })
    .unwrap();
    assert_eq!(out.data, d);
    assert_eq!(out.labels, labels);
    assert_eq!(out.type_, None);
}

#[test]
fn template_data_per_key_replace_policy() {
    let t = tpl(
        "type: kubernetes.io/basic-auth\ndata:\n  username: '{{ .user | upper }}'\n  url: 'https://{{ .host }}:{{ .port }}'\n",
    );
    let d = data(&[("user", "admin"), ("host", "db"), ("port", "5432")]);
    let out = render(Some(&t), &d, &TemplateSources::default()).unwrap();
    assert_eq!(
        out.data.len(),
        2,
        "Replace keeps only templated keys: {:?}",
        out.data.keys()
    );
    assert_eq!(s(&out.data["username"]), "ADMIN");
    assert_eq!(s(&out.data["url"]), "https://db:5432");
    assert_eq!(out.type_.as_deref(), Some("kubernetes.io/basic-auth"));
}

#[test]
fn merge_policy_keeps_provider_keys() {
    let t = tpl("mergePolicy: Merge\ndata:\n  extra: '{{ .a }}-x'\n");
    let d = data(&[("a", "1"), ("b", "2")]);
    let out = render(Some(&t), &d, &TemplateSources::default()).unwrap();
    assert_eq!(
        out.data.keys().cloned().collect::<Vec<_>>(),
        vec!["a", "b", "extra"]
    );
    assert_eq!(s(&out.data["extra"]), "1-x");
}

#[test]
fn template_without_data_copies_provider_data_and_renders_metadata() {
    let t =
        tpl("metadata:\n  labels:\n    env: '{{ .env }}'\n  annotations:\n    note: 'static'\n");
    let d = data(&[("env", "prod")]);
    let out = render(Some(&t), &d, &TemplateSources::default()).unwrap();
    assert_eq!(out.data, d);
    assert_eq!(out.labels["env"], "prod");
    assert_eq!(out.annotations["note"], "static");
}

#[test]
fn template_from_configmap_values_and_keys_and_values() {
    let t = tpl(
        "templateFrom:\n- configMap:\n    name: cm\n    items:\n    - key: config.yaml\n    - key: multi\n      templateAs: KeysAndValues\n",
    );
    let mut sources = TemplateSources::default();
    sources.config_maps.insert(
        "cm".into(),
        BTreeMap::from([
            ("config.yaml".to_string(), "password: {{ .pw }}".to_string()),
            (
                "multi".to_string(),
                "k1: '{{ .pw }}'\nk2: fixed\n".to_string(),
            ),
        ]),
    );
    let out = render(Some(&t), &data(&[("pw", "s3cret")]), &sources).unwrap();
    assert_eq!(s(&out.data["config.yaml"]), "password: s3cret");
    assert_eq!(s(&out.data["k1"]), "s3cret");
    assert_eq!(s(&out.data["k2"]), "fixed");
}

#[test]
fn template_from_secret_literal_and_targets() {
    let t = tpl(
        "templateFrom:\n- secret:\n    name: sec\n    items:\n    - key: tpl\n  target: annotations\n- literal: 'lab: \"{{ .v }}\"'\n  target: LABELS\n- literal: 'enc: {{ .v | b64enc }}'\n  valuesDecodingStrategy: Base64\ndata:\n  direct: '{{ .v }}'\n",
    );
    let mut sources = TemplateSources::default();
    sources.secrets.insert(
        "sec".into(),
        BTreeMap::from([("tpl".to_string(), b"[{{ .v }}]".to_vec())]),
    );
    let out = render(Some(&t), &data(&[("v", "val")]), &sources).unwrap();
    assert_eq!(out.annotations["tpl"], "[val]");
    assert_eq!(out.labels["lab"], "val");
    assert_eq!(
        s(&out.data["enc"]),
        "val",
        "Base64 decoding strategy applied to Data values"
    );
    assert_eq!(s(&out.data["direct"]), "val");
    assert!(!out.data.contains_key("tpl"));
}

#[test]
fn template_data_overrides_template_from() {
    let t = tpl("templateFrom:\n- literal: 'k: from-literal'\ndata:\n  k: from-data\n");
    let out = render(Some(&t), &data(&[]), &TemplateSources::default()).unwrap();
    assert_eq!(s(&out.data["k"]), "from-data");
}

#[test]
fn invalid_target_is_rejected() {
    let t = tpl("templateFrom:\n- literal: 'a: b'\n  target: metadata.finalizers\n");
    let err = render(Some(&t), &data(&[]), &TemplateSources::default()).unwrap_err();
    assert!(matches!(err, TemplateError::InvalidTarget(_)), "{err}");
}

#[test]
fn missing_sources_report_eso_errors() {
    let t = tpl("templateFrom:\n- configMap:\n    name: nope\n    items:\n    - key: a\n");
    let err = render(Some(&t), &data(&[]), &TemplateSources::default()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "error fetching templateFrom data: configmaps \"nope\" not found"
    );
    let mut sources = TemplateSources::default();
    sources.config_maps.insert("cm".into(), BTreeMap::new());
    let t = tpl("templateFrom:\n- configMap:\n    name: cm\n    items:\n    - key: a\n");
    let err = render(Some(&t), &data(&[]), &sources).unwrap_err();
    assert_eq!(
        err.to_string(),
        "error fetching templateFrom data: error in configmap cm: missing key a"
    );
}

#[test]
fn execution_error_text_follows_eso() {
    let t = tpl("data:\n  password: '{{ .pasword }}'\n");
    let err = render(
        Some(&t),
        &data(&[("password", "x")]),
        &TemplateSources::default(),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "could not execute template: unable to execute template at key password: unable to execute template at key password: template: password:1:3: executing \"password\" at <.pasword>: map has no entry for key \"pasword\""
    );
    let t = tpl("data:\n  k: '{{ env \"HOME\" }}'\n");
    let err = render(Some(&t), &data(&[]), &TemplateSources::default()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "could not execute template: unable to execute template at key k: unable to parse template at key k: template: k:1: function \"env\" not defined"
    );
}

#[test]
fn errors_never_contain_secret_values() {
    let secret = "Sup3r-S3cret-Value";
    let d = data(&[
        ("pw", secret),
        ("json", "{\"token\":\"Sup3r-S3cret-Value\"}"),
    ]);
    let templates = [
        "{{ fail .pw }}",
        "{{ fail (printf \"bad password %s\" .pw) }}",
        "{{ range $i, $v := .pw }}{{ end }}",
        "{{ .pw.field }}",
        "{{ (.json | fromJson).token.x }}",
        "{{ eq (list .pw) (list .pw) }}",
        "{{ index (list .pw) 5 }}",
        "{{ .pw | mustToDate \"2006\" }}",
        "{{ .pw | mustFromJson }}",
        "{{ .pw | semver }}",
        "{{ mustRegexMatch (printf \"(%s\" .pw) \"x\" }}",
    ];
    for text in templates {
        let t = tpl(&format!("data:\n  k: '{}'\n", text.replace('\'', "''")));
        let err = render(Some(&t), &d, &TemplateSources::default());
        let msg = match err {
            Err(e) => e.to_string(),
            Ok(out) => panic!("{text}: expected an error, got {:?}", out.data),
        };
        assert!(
            !msg.contains(secret),
            "{text}: error leaks the value: {msg}"
        );
        assert!(
            !msg.contains("Sup3r"),
            "{text}: error leaks part of the value: {msg}"
        );
    }
}

#[test]
fn keys_and_values_yaml_errors() {
    // Numbers and booleans become strings (sigs.k8s.io/yaml coerces them for a string target)...
    let t = tpl("templateFrom:\n- literal: 'port: 5432'\n");
    let out = render(Some(&t), &data(&[]), &TemplateSources::default()).unwrap();
    assert_eq!(out.data.get("port").map(Vec::as_slice), Some(&b"5432"[..]));
    // ...but a list is no string.
    let t = tpl("templateFrom:\n- literal: 'hosts: [a, b]'\n");
    let err = render(Some(&t), &data(&[]), &TemplateSources::default()).unwrap_err();
    assert!(
        err.to_string()
            .contains("could not unmarshal template to 'map[string][]byte'"),
        "{err}"
    );
}

#[test]
fn rewrite_transform_uses_value() {
    assert_eq!(
        rewrite_transform("{{ .value | upper }}", "db-pass").unwrap(),
        "DB-PASS"
    );
    assert_eq!(
        rewrite_transform("prefix-{{ .value }}", "k").unwrap(),
        "prefix-k"
    );
    // no missingkey=error in transform templates
    assert_eq!(
        rewrite_transform("{{ .other }}", "k").unwrap(),
        "<no value>"
    );
    assert!(rewrite_transform("{{ .value ", "k").is_err());
}

#[test]
fn binary_values_pass_through() {
    let mut d = BTreeMap::new();
    d.insert("bin".to_string(), vec![0xff, 0x00, 0x41]);
    let t =
        tpl("data:\n  copy: '{{ .bin }}'\n  enc: '{{ .bin | b64enc }}'\n  len: '{{ len .bin }}'\n");
    let out = render(Some(&t), &d, &TemplateSources::default()).unwrap();
    assert_eq!(out.data["copy"], vec![0xff, 0x00, 0x41]);
    assert_eq!(s(&out.data["len"]), "3");
    assert_eq!(s(&out.data["enc"]), "/wBB");
}

#[test]
fn secret_sourced_templates_are_not_echoed_in_errors() {
    // ESO names KeysAndValues templates after their text; a template kept in a
    // Secret may embed secrets, so the error names it <secret>/<key> instead.
    let t = tpl(
        "templateFrom:\n- secret:\n    name: tpls\n    items:\n    - key: kv\n      templateAs: KeysAndValues\n",
    );
    let mut sources = TemplateSources::default();
    sources.secrets.insert(
        "tpls".into(),
        BTreeMap::from([(
            "kv".to_string(),
            b"inline: hunter2-inline\nk: '{{ .missing }}'\n".to_vec(),
        )]),
    );
    let err = render(Some(&t), &data(&[]), &sources)
        .unwrap_err()
        .to_string();
    assert!(!err.contains("hunter2-inline"), "{err}");
    assert!(
        err.contains("unable to execute template at key tpls/kv"),
        "{err}"
    );
    assert!(
        err.contains("map has no entry for key \"missing\""),
        "{err}"
    );
}

#[test]
fn literal_fail_messages_are_shown() {
    let t = tpl(
        "data:\n  k: '{{ if not (hasKey (.json | fromJson) \"user\") }}{{ fail \"json must contain user\" }}{{ end }}'\n",
    );
    let err = render(
        Some(&t),
        &data(&[("json", "{}")]),
        &TemplateSources::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.ends_with("error calling fail: json must contain user"),
        "{err}"
    );
    // a message built from data is withheld
    let t = tpl("data:\n  k: '{{ fail (printf \"bad %s\" .v) }}'\n");
    let err = render(Some(&t), &data(&[("v", "x")]), &TemplateSources::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.ends_with("error calling fail: <error text withheld: it may contain secret data>"),
        "{err}"
    );
}
