//! `x-kubernetes-validations` (CEL) on the HTTP path: a CRD's own rules refuse objects with the
//! apiserver's 422, transition rules run on update, and a CRD with an over-budget rule is refused.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![recursion_limit = "512"]

mod common;

use common::*;
use serde_json::{Value, json};

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const W: &str = "/apis/test.esr.dev/v1/namespaces/default/widgets";

/// The widget CRD with `rules` added to `spec`.
fn widget_crd_with_rules(rules: Value) -> Value {
    let mut crd = widget_crd();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-validations"] =
        rules;
    crd
}

#[tokio::test]
async fn a_rule_added_to_a_crd_is_enforced_with_no_other_code() {
    let s = start().await;
    let crd = widget_crd_with_rules(json!([
        {"rule": "self.color != 'green' || self.size >= 5", "message": "green widgets need size 5 or more"},
        {"rule": "!has(self.name) || self.name.size() <= 5",
         "messageExpression": "'name ' + self.name + ' is longer than 5'",
         "reason": "FieldValueForbidden", "fieldPath": ".name"}
    ]));
    let r = post(&s, CRDS, crd).await;
    assert_eq!(r.code, 201, "{}", r.text);

    let r = post(
        &s,
        W,
        json!({"apiVersion": "test.esr.dev/v1", "kind": "Widget",
        "metadata": {"name": "w1"}, "spec": {"color": "green"}}),
    )
    .await;
    assert_eq!(r.code, 422, "{}", r.text);
    assert_eq!(
        r.body["message"],
        "Widget.test.esr.dev \"w1\" is invalid: spec: Invalid value: green widgets need size 5 or more"
    );
    assert_eq!(r.body["reason"], "Invalid");
    assert_eq!(
        r.body["details"]["causes"][0]["reason"],
        "FieldValueInvalid"
    );
    assert_eq!(r.body["details"]["causes"][0]["field"], "spec");

    let r = post(
        &s,
        W,
        json!({"apiVersion": "test.esr.dev/v1", "kind": "Widget",
        "metadata": {"name": "w2"}, "spec": {"color": "red", "name": "toolong"}}),
    )
    .await;
    assert_eq!(r.code, 422, "{}", r.text);
    assert_eq!(
        r.body["message"],
        "Widget.test.esr.dev \"w2\" is invalid: spec.name: Forbidden: name toolong is longer than 5"
    );
    assert_eq!(
        r.body["details"]["causes"][0]["reason"],
        "FieldValueForbidden"
    );

    let r = post(
        &s,
        W,
        json!({"apiVersion": "test.esr.dev/v1", "kind": "Widget",
        "metadata": {"name": "w3"}, "spec": {"color": "green", "size": 5}}),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.text);
}

#[tokio::test]
async fn transition_rule_with_old_self_runs_on_update() {
    let s = start().await;
    let crd = widget_crd_with_rules(json!([
        {"rule": "self.color == oldSelf.color", "message": "color is immutable"}
    ]));
    assert_eq!(post(&s, CRDS, crd).await.code, 201);
    let r = post(&s, W, widget("w", "red")).await;
    assert_eq!(r.code, 201, "{}", r.text);
    let r = patch(
        &s,
        &format!("{W}/w"),
        "application/merge-patch+json",
        json!({"spec": {"size": 4}}),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.text);
    let r = patch(
        &s,
        &format!("{W}/w"),
        "application/merge-patch+json",
        json!({"spec": {"color": "blue"}}),
    )
    .await;
    assert_eq!(r.code, 422, "{}", r.text);
    assert_eq!(
        r.body["message"],
        "Widget.test.esr.dev \"w\" is invalid: spec: Invalid value: color is immutable"
    );
}

#[tokio::test]
async fn over_budget_rule_refuses_the_crd() {
    let s = start().await;
    let mut crd = widget_crd();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["tags"]
        ["x-kubernetes-validations"] =
        json!([{"rule": "self.all(x, self.all(y, x == y))", "message": "all equal"}]);
    let r = post(&s, CRDS, crd).await;
    assert_eq!(r.code, 422, "{}", r.text);
    let msg = r.body["message"].as_str().unwrap();
    assert!(
        msg.starts_with("CustomResourceDefinition.apiextensions.k8s.io \"widgets.test.esr.dev\" is invalid: [spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[tags].x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"),
        "{msg}"
    );
}

fn eso_crd(file: &str) -> Value {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/compat/eso-crds")
        .join(file);
    yaml_serde::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

#[tokio::test]
async fn objects_violating_esos_rules_are_refused() {
    let s = start().await;
    for f in [
        "external-secrets.io_pushsecrets.yaml",
        "external-secrets.io_secretstores.yaml",
    ] {
        let r = post(&s, CRDS, eso_crd(f)).await;
        assert_eq!(r.code, 201, "{f}: {}", r.text);
    }
    let r = post(&s, "/apis/external-secrets.io/v1alpha1/namespaces/default/pushsecrets", json!({
        "apiVersion": "external-secrets.io/v1alpha1", "kind": "PushSecret",
        "metadata": {"name": "no-store-name"},
        "spec": {"selector": {"secret": {"name": "s"}}, "secretStoreRefs": [{"name": "store"}], "dataTo": [{"storeRef": {"kind": "SecretStore"}}]}
    })).await;
    assert_eq!(r.code, 422, "{}", r.text);
    assert_eq!(
        r.body["message"],
        "PushSecret.external-secrets.io \"no-store-name\" is invalid: spec.dataTo[0]: Invalid value: storeRef must specify either name or labelSelector"
    );

    let r = post(
        &s,
        "/apis/external-secrets.io/v1/namespaces/default/secretstores",
        json!({
            "apiVersion": "external-secrets.io/v1", "kind": "SecretStore",
            "metadata": {"name": "aws"},
            "spec": {"provider": {"aws": {"service": "SecretsManager", "region": "eu-west-1",
                "customSessionTags": {"esoNamespace": "x"}}}}
        }),
    )
    .await;
    assert_eq!(r.code, 422, "{}", r.text);
    assert_eq!(
        r.body["message"],
        "SecretStore.external-secrets.io \"aws\" is invalid: spec.provider.aws.customSessionTags: Invalid value: customSessionTags cannot contain automatically injected reserved keys: esoNamespace, esoStoreName, esoStoreKind"
    );
}
