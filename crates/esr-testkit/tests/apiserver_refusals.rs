//! What a real kube-apiserver (v1.34) refuses and esr-testkit must refuse too, each with the real
//! server's Status: CRD rules (selectableFields, additionalPrinterColumns, hoisted schemas) and
//! object rules (names, labels, annotations, Secret and ConfigMap sizes, typed Secrets, events).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![recursion_limit = "512"]

mod common;

use common::*;
use serde_json::{Value, json};

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const SECRETS: &str = "/api/v1/namespaces/default/secrets";

fn yaml(path: &str) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    yaml_serde::from_str(&text).unwrap()
}

/// What kubectl prints for a 422 Status: `The <kind> "<name>" is invalid: <field>: <message>`
/// (one cause), built from `details` as kubectl does.
fn kubectl_text(status: &Value) -> String {
    let d = &status["details"];
    let causes: Vec<String> = d["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            format!(
                "{}: {}",
                c["field"].as_str().unwrap_or(""),
                c["message"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(causes.len(), 1, "{status}");
    format!(
        "The {} {:?} is invalid: {}",
        d["kind"].as_str().unwrap(),
        d["name"].as_str().unwrap(),
        causes[0]
    )
}

/// Asserts a 422 Invalid Status with exactly these causes (reason, field, message), and the
/// message the apiserver builds from them.
fn assert_invalid(r: &Raw, qualified_kind: &str, name: &str, causes: &[(&str, &str, &str)]) {
    assert_eq!(r.code, 422, "{}", r.text);
    assert_eq!(r.body["kind"], "Status");
    assert_eq!(r.body["status"], "Failure");
    assert_eq!(r.body["reason"], "Invalid", "{}", r.text);
    assert_eq!(r.body["code"], 422);
    let got: Vec<(String, String, String)> = r.body["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["reason"].as_str().unwrap().to_string(),
                c["field"].as_str().unwrap_or("").to_string(),
                c["message"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let want: Vec<(String, String, String)> = causes
        .iter()
        .map(|(r, f, m)| (r.to_string(), f.to_string(), m.to_string()))
        .collect();
    assert_eq!(got, want, "{}", r.text);
    let mut parts: Vec<String> = vec![];
    for (_, f, m) in causes {
        let p = format!("{f}: {m}");
        if !parts.contains(&p) {
            parts.push(p);
        }
    }
    let joined = if parts.len() == 1 {
        parts[0].clone()
    } else {
        format!("[{}]", parts.join(", "))
    };
    assert_eq!(
        r.body["message"],
        format!("{qualified_kind} {name:?} is invalid: {joined}"),
        "{}",
        r.text
    );
    assert_eq!(r.body["details"]["name"], name);
}

// ---------------------------------------------------------------- CRDs

#[tokio::test]
async fn externalsecrets_crd_with_per_version_selectable_fields_is_refused() {
    // The CRD `esr crdgen` wrote before the fix: v1 and v1beta1 share one schema (hoisted to the
    // top level by the apiserver) but only v1 has selectableFields.
    let s = start().await;
    let crd = yaml(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/externalsecrets-crd-per-version-selectable-fields.yaml"
    ));
    let r = post(&s, CRDS, crd).await;
    let msg = "Invalid value: \"\": may only be set when `version.schema.openAPIV3Schema` is not included";
    assert_invalid(
        &r,
        "CustomResourceDefinition.apiextensions.k8s.io",
        "externalsecrets.external-secrets.io",
        &[(
            "FieldValueInvalid",
            "spec.versions[0].selectableFields",
            msg,
        )],
    );
    assert_eq!(r.body["details"]["group"], "apiextensions.k8s.io");
    assert_eq!(r.body["details"]["kind"], "CustomResourceDefinition");
    assert_eq!(
        kubectl_text(&r.body),
        "The CustomResourceDefinition \"externalsecrets.external-secrets.io\" is invalid: spec.versions[0].selectableFields: Invalid value: \"\": may only be set when `version.schema.openAPIV3Schema` is not included"
    );
    assert_eq!(
        get(&s, "/apis/external-secrets.io/v1").await.code,
        404,
        "nothing registered"
    );
}

#[tokio::test]
async fn updating_to_per_version_selectable_fields_is_refused() {
    // `kubectl apply --server-side` of the old CRD over the generated one: the update path.
    let s = start().await;
    let current = yaml(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../crds/external-secrets.io_externalsecrets.yaml"
    ));
    assert_eq!(post(&s, CRDS, current).await.code, 201);
    let old = yaml(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/externalsecrets-crd-per-version-selectable-fields.yaml"
    ));
    let r = patch(
        &s,
        &format!("{CRDS}/externalsecrets.external-secrets.io?fieldManager=kubectl&force=true"),
        "application/apply-patch+yaml",
        old,
    )
    .await;
    assert_invalid(
        &r,
        "CustomResourceDefinition.apiextensions.k8s.io",
        "externalsecrets.external-secrets.io",
        &[(
            "FieldValueInvalid",
            "spec.versions[0].selectableFields",
            "Invalid value: \"\": may only be set when `version.schema.openAPIV3Schema` is not included",
        )],
    );
}

#[tokio::test]
async fn every_generated_crd_is_accepted_and_keeps_field_selection() {
    let s = start().await;
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../crds");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 10, "{files:?}");
    for f in files {
        let crd = yaml(f.to_str().unwrap());
        let r = post(&s, CRDS, crd).await;
        assert_eq!(r.code, 201, "{}: {}", f.display(), r.text);
    }
    ns(&s, "fs").await;
    let r = get(
        &s,
        "/apis/external-secrets.io/v1/namespaces/fs/externalsecrets?fieldSelector=spec.secretStoreRef.name%3Dvault",
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.text);
}

fn widgets_crd(v1: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.test.esr.dev"},
        "spec": {
            "group": "test.esr.dev",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [v1],
        }
    })
}

fn widget_version() -> Value {
    json!({"name": "v1", "served": true, "storage": true,
    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "properties": {
            "color": {"type": "string"},
            "size": {"type": "number"},
            "on": {"type": "boolean"},
        }},
    }}}})
}

#[tokio::test]
async fn selectable_fields_must_name_scalar_fields_once() {
    let s = start().await;
    let mut v = widget_version();
    v["selectableFields"] = json!([
        {"jsonPath": ".spec.color"},
        {"jsonPath": ".spec.size"},
        {"jsonPath": ".spec.nope"},
        {"jsonPath": ".spec['color']"},
    ]);
    let r = post(&s, CRDS, widgets_crd(v)).await;
    assert_invalid(
        &r,
        "CustomResourceDefinition.apiextensions.k8s.io",
        "widgets.test.esr.dev",
        &[
            (
                "FieldValueInvalid",
                "spec.selectableFields[1].jsonPath",
                "Invalid value: \".spec.size\": must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed.",
            ),
            (
                "FieldValueInvalid",
                "spec.selectableFields[2].jsonPath",
                "Invalid value: \".spec.nope\": is an invalid path: does not refer to a valid field",
            ),
            (
                "FieldValueDuplicate",
                "spec.selectableFields[3].jsonPath",
                "Duplicate value: \".spec['color']\"",
            ),
        ],
    );
    let mut v = widget_version();
    v["selectableFields"] = json!([{"jsonPath": ".spec.color"}, {"jsonPath": ".spec.on"}]);
    assert_eq!(post(&s, CRDS, widgets_crd(v)).await.code, 201);
}

#[tokio::test]
async fn printer_columns_are_validated() {
    let s = start().await;
    let mut v = widget_version();
    v["additionalPrinterColumns"] = json!([
        {"name": "Color", "type": "string", "jsonPath": ".spec.color"},
        {"name": "Size", "type": "float", "jsonPath": "spec.size", "priority": 1},
        {"name": "On", "type": "boolean", "format": "bool", "jsonPath": ".spec.on"},
    ]);
    let r = post(&s, CRDS, widgets_crd(v)).await;
    assert_invalid(
        &r,
        "CustomResourceDefinition.apiextensions.k8s.io",
        "widgets.test.esr.dev",
        &[
            (
                "FieldValueInvalid",
                "spec.additionalPrinterColumns[1].type",
                "Invalid value: \"float\": must be one of boolean,date,integer,number,string",
            ),
            (
                "FieldValueInvalid",
                "spec.additionalPrinterColumns[1].JSONPath",
                "Invalid value: \"spec.size\": must be a simple json path starting with .",
            ),
            (
                "FieldValueInvalid",
                "spec.additionalPrinterColumns[2].format",
                "Invalid value: \"bool\": must be one of byte,date,date-time,double,float,int32,int64,password",
            ),
        ],
    );
}

#[tokio::test]
async fn structural_errors_of_a_shared_schema_are_reported_at_the_top_level() {
    let s = start().await;
    let mut v1 = widget_version();
    v1["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["color"] =
        json!({"enum": ["red"]});
    let mut v2 = v1.clone();
    v2["name"] = json!("v2");
    v2["storage"] = json!(false);
    let mut crd = widgets_crd(v1);
    crd["spec"]["versions"].as_array_mut().unwrap().push(v2);
    let r = post(&s, CRDS, crd).await;
    assert_eq!(r.code, 422, "{}", r.text);
    let causes = r.body["details"]["causes"].as_array().unwrap();
    assert!(!causes.is_empty());
    for c in causes {
        assert!(
            c["field"]
                .as_str()
                .unwrap()
                .starts_with("spec.validation.openAPIV3Schema.properties[spec].properties[color]"),
            "{}",
            r.text
        );
    }
}

// ---------------------------------------------------------------- names

#[tokio::test]
async fn secret_names_are_subdomains_not_labels() {
    let s = start().await;
    let long = "this-is-a-very-big-secret-name-that-wouldnt-be-generated-due-to-label-limits";
    let r = post(&s, SECRETS, json!({"metadata": {"name": long}})).await;
    assert_eq!(r.code, 201, "{}", r.text);
    let dotted = format!("{}.{}", "a".repeat(70), "b".repeat(70));
    let r = post(&s, SECRETS, json!({"metadata": {"name": dotted}})).await;
    assert_eq!(r.code, 201, "{}", r.text);
    let too_long = "a".repeat(254);
    let r = post(&s, SECRETS, json!({"metadata": {"name": too_long}})).await;
    assert_invalid(
        &r,
        "Secret",
        &too_long,
        &[(
            "FieldValueInvalid",
            "metadata.name",
            &format!("Invalid value: {too_long:?}: must be no more than 253 characters"),
        )],
    );
    let r = post(&s, SECRETS, json!({"metadata": {"name": "Bad_Name"}})).await;
    assert_invalid(
        &r,
        "Secret",
        "Bad_Name",
        &[(
            "FieldValueInvalid",
            "metadata.name",
            "Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        )],
    );
}

#[tokio::test]
async fn rbac_names_are_path_segments() {
    let s = start().await;
    let roles = "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles";
    let bindings = "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings";
    let r = post(
        &s,
        roles,
        json!({"metadata": {"name": "eso-rb-"}, "rules": []}),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.text);
    let r = post(
        &s,
        bindings,
        json!({"metadata": {"name": "Eso:Binding-"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "eso-rb-"},
               "subjects": []}),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.text);
    let r = post(
        &s,
        roles,
        json!({"metadata": {"name": "a/b%"}, "rules": []}),
    )
    .await;
    assert_invalid(
        &r,
        "Role.rbac.authorization.k8s.io",
        "a/b%",
        &[
            (
                "FieldValueInvalid",
                "metadata.name",
                "Invalid value: \"a/b%\": may not contain '/'",
            ),
            (
                "FieldValueInvalid",
                "metadata.name",
                "Invalid value: \"a/b%\": may not contain '%'",
            ),
        ],
    );
    let r = post(
        &s,
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        json!({"metadata": {"name": ".."}, "rules": []}),
    )
    .await;
    assert_invalid(
        &r,
        "ClusterRole.rbac.authorization.k8s.io",
        "..",
        &[(
            "FieldValueInvalid",
            "metadata.name",
            "Invalid value: \"..\": may not be '..'",
        )],
    );
}

#[tokio::test]
async fn namespace_names_are_labels() {
    let s = start().await;
    let name = "a".repeat(64);
    let r = post(
        &s,
        "/api/v1/namespaces",
        json!({"metadata": {"name": name}}),
    )
    .await;
    assert_invalid(
        &r,
        "Namespace",
        &name,
        &[(
            "FieldValueInvalid",
            "metadata.name",
            &format!("Invalid value: {name:?}: must be no more than 63 characters"),
        )],
    );
}

// ---------------------------------------------------------------- labels and annotations

#[tokio::test]
async fn label_values_and_keys() {
    let s = start().await;
    let value = "v".repeat(64);
    let r = post(
        &s,
        SECRETS,
        json!({"metadata": {"name": "l1", "labels": {"ok": value}}}),
    )
    .await;
    assert_invalid(
        &r,
        "Secret",
        "l1",
        &[(
            "FieldValueInvalid",
            "metadata.labels",
            &format!("Invalid value: {value:?}: must be no more than 63 characters"),
        )],
    );
    let r = post(
        &s,
        SECRETS,
        json!({"metadata": {"name": "l2", "labels": {"a/b/c": "x-"}}}),
    )
    .await;
    assert_invalid(
        &r,
        "Secret",
        "l2",
        &[
            (
                "FieldValueInvalid",
                "metadata.labels",
                "Invalid value: \"a/b/c\": a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
            ),
            (
                "FieldValueInvalid",
                "metadata.labels",
                "Invalid value: \"x-\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
            ),
        ],
    );
    let r = post(&s, SECRETS, json!({"metadata": {"name": "l3", "labels": {"app.kubernetes.io/name": "", "x": "My_value.1"}}})).await;
    assert_eq!(r.code, 201, "{}", r.text);
}

#[tokio::test]
async fn annotations_total_at_most_256_kib() {
    let s = start().await;
    let big = "x".repeat(256 * 1024);
    let r = post(
        &s,
        SECRETS,
        json!({"metadata": {"name": "a1", "annotations": {"k": big}}}),
    )
    .await;
    assert_invalid(
        &r,
        "Secret",
        "a1",
        &[(
            "FieldValueTooLong",
            "metadata.annotations",
            "Too long: may not be more than 262144 bytes",
        )],
    );
    let fits = "x".repeat(256 * 1024 - 1);
    let r = post(
        &s,
        SECRETS,
        json!({"metadata": {"name": "a2", "annotations": {"k": fits}}}),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.text);
}

// ---------------------------------------------------------------- Secrets and ConfigMaps

fn b64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[tokio::test]
async fn secret_data_at_most_1_mib() {
    let s = start().await;
    let half = b64(&vec![b'a'; 512 * 1024 + 1]);
    let r = post(
        &s,
        SECRETS,
        json!({"metadata": {"name": "big"}, "data": {"a": half, "b": half}}),
    )
    .await;
    assert_invalid(
        &r,
        "Secret",
        "big",
        &[(
            "FieldValueTooLong",
            "data",
            "Too long: may not be more than 1048576 bytes",
        )],
    );
    let exact = b64(&vec![b'a'; 1024 * 1024]);
    let r = post(
        &s,
        SECRETS,
        json!({"metadata": {"name": "fits"}, "data": {"a": exact}}),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.text);
}

#[tokio::test]
async fn secret_data_keys_are_config_keys() {
    let s = start().await;
    let r = post(
        &s,
        SECRETS,
        json!({"metadata": {"name": "k"}, "stringData": {"a b": "x", "..x": "y"}}),
    )
    .await;
    assert_invalid(
        &r,
        "Secret",
        "k",
        &[
            (
                "FieldValueInvalid",
                "data[..x]",
                "Invalid value: \"..x\": must not start with '..'",
            ),
            (
                "FieldValueInvalid",
                "data[a b]",
                "Invalid value: \"a b\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
            ),
        ],
    );
}

#[tokio::test]
async fn typed_secrets_need_their_keys() {
    let s = start().await;
    let typed = |name: &str, ty: &str, data: Value| json!({"metadata": {"name": name}, "type": ty, "stringData": data});
    let r = post(
        &s,
        SECRETS,
        typed("tls", "kubernetes.io/tls", json!({"tls.crt": "c"})),
    )
    .await;
    assert_invalid(
        &r,
        "Secret",
        "tls",
        &[("FieldValueRequired", "data[tls.key]", "Required value")],
    );
    let r = post(&s, SECRETS, typed("tls2", "kubernetes.io/tls", json!({}))).await;
    assert_invalid(
        &r,
        "Secret",
        "tls2",
        &[
            ("FieldValueRequired", "data[tls.crt]", "Required value"),
            ("FieldValueRequired", "data[tls.key]", "Required value"),
        ],
    );
    let r = post(
        &s,
        SECRETS,
        typed(
            "tls3",
            "kubernetes.io/tls",
            json!({"tls.crt": "", "tls.key": ""}),
        ),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.text);

    let r = post(
        &s,
        SECRETS,
        typed("dc", "kubernetes.io/dockerconfigjson", json!({})),
    )
    .await;
    assert_invalid(
        &r,
        "Secret",
        "dc",
        &[(
            "FieldValueRequired",
            "data[.dockerconfigjson]",
            "Required value",
        )],
    );
    let r = post(
        &s,
        SECRETS,
        typed(
            "dc2",
            "kubernetes.io/dockerconfigjson",
            json!({".dockerconfigjson": "{\"auths\": "}),
        ),
    )
    .await;
    assert_invalid(
        &r,
        "Secret",
        "dc2",
        &[(
            "FieldValueInvalid",
            "data[.dockerconfigjson]",
            "Invalid value: \"<secret contents redacted>\": unexpected end of JSON input",
        )],
    );
    let r = post(
        &s,
        SECRETS,
        typed(
            "dc3",
            "kubernetes.io/dockercfg",
            json!({".dockercfg": "[]"}),
        ),
    )
    .await;
    assert_invalid(
        &r,
        "Secret",
        "dc3",
        &[(
            "FieldValueInvalid",
            "data[.dockercfg]",
            "Invalid value: \"<secret contents redacted>\": json: cannot unmarshal array into Go value of type map[string]interface {}",
        )],
    );
    let r = post(
        &s,
        SECRETS,
        typed(
            "dc4",
            "kubernetes.io/dockerconfigjson",
            json!({".dockerconfigjson": "{\"auths\":{}}"}),
        ),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.text);

    let r = post(
        &s,
        SECRETS,
        typed("ba", "kubernetes.io/basic-auth", json!({})),
    )
    .await;
    assert_invalid(
        &r,
        "Secret",
        "ba",
        &[
            ("FieldValueRequired", "data[username]", "Required value"),
            ("FieldValueRequired", "data[password]", "Required value"),
        ],
    );
    let r = post(
        &s,
        SECRETS,
        typed("ba2", "kubernetes.io/basic-auth", json!({"password": ""})),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.text);

    let r = post(
        &s,
        SECRETS,
        typed(
            "ssh",
            "kubernetes.io/ssh-auth",
            json!({"ssh-privatekey": ""}),
        ),
    )
    .await;
    assert_invalid(
        &r,
        "Secret",
        "ssh",
        &[(
            "FieldValueRequired",
            "data[ssh-privatekey]",
            "Required value",
        )],
    );

    let r = post(
        &s,
        SECRETS,
        typed("sat", "kubernetes.io/service-account-token", json!({})),
    )
    .await;
    assert_invalid(
        &r,
        "Secret",
        "sat",
        &[(
            "FieldValueRequired",
            "metadata.annotations[kubernetes.io/service-account.name]",
            "Required value",
        )],
    );
}

#[tokio::test]
async fn secret_type_is_immutable() {
    let s = start().await;
    let r = post(&s, SECRETS, json!({"metadata": {"name": "t"}, "type": "Opaque", "stringData": {"tls.crt": "c", "tls.key": "k"}})).await;
    assert_eq!(r.code, 201, "{}", r.text);
    let r = patch(
        &s,
        &format!("{SECRETS}/t"),
        "application/merge-patch+json",
        json!({"type": "kubernetes.io/tls"}),
    )
    .await;
    assert_invalid(
        &r,
        "Secret",
        "t",
        &[(
            "FieldValueInvalid",
            "type",
            "Invalid value: \"kubernetes.io/tls\": field is immutable",
        )],
    );
}

#[tokio::test]
async fn config_maps_at_most_1_mib_and_keys_in_one_map() {
    let s = start().await;
    let cms = "/api/v1/namespaces/default/configmaps";
    let half = "a".repeat(512 * 1024 + 1);
    let r = post(&s, cms, json!({"metadata": {"name": "big"}, "data": {"a": half}, "binaryData": {"b": b64(half.as_bytes())}})).await;
    assert_invalid(
        &r,
        "ConfigMap",
        "big",
        &[(
            "FieldValueTooLong",
            "",
            "Too long: may not be more than 1048576 bytes",
        )],
    );
    assert!(
        r.body["details"]["causes"][0].get("field").is_none(),
        "{}",
        r.text
    );
    let r = post(
        &s,
        cms,
        json!({"metadata": {"name": "dup"}, "data": {"k": "v"}, "binaryData": {"k": b64(b"v")}}),
    )
    .await;
    assert_invalid(
        &r,
        "ConfigMap",
        "dup",
        &[
            (
                "FieldValueInvalid",
                "data[k]",
                "Invalid value: \"k\": duplicate of key present in binaryData",
            ),
            (
                "FieldValueInvalid",
                "binaryData[k]",
                "Invalid value: \"k\": duplicate of key present in data",
            ),
        ],
    );
}

// ---------------------------------------------------------------- events

fn v1_event(name: &str, note: &str) -> Value {
    json!({
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": "default"},
        "eventTime": "2026-11-25T10:00:00.000000Z",
        "reportingController": "external-secrets.io/esr",
        "reportingInstance": "esr-0",
        "action": "Reconcile",
        "reason": "Updated",
        "type": "Normal",
        "note": note,
        "regarding": {"apiVersion": "v1", "kind": "Secret", "name": "s", "namespace": "default"},
    })
}

#[tokio::test]
async fn event_notes_at_most_1024_characters() {
    let s = start().await;
    let events = "/apis/events.k8s.io/v1/namespaces/default/events";
    let r = post(&s, events, v1_event("e1", &"n".repeat(1024))).await;
    assert_eq!(r.code, 201, "{}", r.text);
    let r = post(&s, events, v1_event("e2", &"n".repeat(1025))).await;
    assert_invalid(
        &r,
        "Event.events.k8s.io",
        "e2",
        &[(
            "FieldValueInvalid",
            "message",
            "Invalid value: \"\": can have at most 1024 characters",
        )],
    );
    let mut e = v1_event("e3", "ok");
    e["type"] = json!("Info");
    e["action"] = json!("");
    let r = post(&s, events, e).await;
    assert_invalid(
        &r,
        "Event.events.k8s.io",
        "e3",
        &[
            ("FieldValueRequired", "action", "Required value"),
            (
                "FieldValueInvalid",
                "type",
                "Invalid value: \"\": has invalid value: Info",
            ),
        ],
    );
}

#[tokio::test]
async fn core_events_without_event_time_have_no_message_limit() {
    let s = start().await;
    let events = "/api/v1/namespaces/default/events";
    let legacy = json!({
        "metadata": {"name": "legacy.1"},
        "involvedObject": {"kind": "Secret", "name": "s", "namespace": "default"},
        "reason": "Updated",
        "message": "m".repeat(5000),
        "type": "Normal",
    });
    let r = post(&s, events, legacy).await;
    assert_eq!(r.code, 201, "{}", r.text);
    let new_style = json!({
        "metadata": {"name": "new.1"},
        "involvedObject": {"kind": "Secret", "name": "s", "namespace": "default"},
        "eventTime": "2026-11-25T10:00:00.000000Z",
        "reportingComponent": "esr",
        "reportingInstance": "esr-0",
        "action": "Reconcile",
        "reason": "Updated",
        "message": "m".repeat(1025),
        "type": "Normal",
    });
    let r = post(&s, events, new_style).await;
    assert_invalid(
        &r,
        "Event",
        "new.1",
        &[(
            "FieldValueInvalid",
            "message",
            "Invalid value: \"\": can have at most 1024 characters",
        )],
    );
}
