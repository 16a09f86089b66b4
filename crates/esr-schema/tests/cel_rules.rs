//! `x-kubernetes-validations`: evaluation on create and update, and the CRD-time compile and cost
//! checks, with the apiserver's texts.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use esr_schema::{FieldErrorKind, Schema, cel_rule_costs, check_cel_rules};
use serde_json::{Value, json};

fn schema(spec: Value) -> Schema {
    Schema::new(&json!({
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec,
        }
    }))
    .unwrap()
}

fn obj(spec: Value) -> Value {
    json!({"apiVersion": "g/v1", "kind": "K", "metadata": {"name": "n"}, "spec": spec})
}

fn errs(s: &Schema, spec: Value) -> Vec<String> {
    s.validate(&obj(spec))
        .iter()
        .map(|e| e.to_string())
        .collect()
}

fn update_errs(s: &Schema, old: Value, new: Value) -> Vec<String> {
    s.validate_update(&obj(new), Some(&obj(old)))
        .iter()
        .map(|e| e.to_string())
        .collect()
}

fn store_ref_schema() -> Schema {
    schema(json!({
        "type": "object",
        "properties": {
            "dataTo": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "storeRef": {
                            "type": "object",
                            "properties": {
                                "name": {"type": "string"},
                                "labelSelector": {"type": "object"}
                            }
                        }
                    },
                    "x-kubernetes-validations": [{
                        "message": "storeRef must specify either name or labelSelector",
                        "rule": "has(self.storeRef) && (has(self.storeRef.name) || has(self.storeRef.labelSelector))"
                    }]
                }
            }
        }
    }))
}

#[test]
fn object_rule_failure_omits_the_value() {
    let s = store_ref_schema();
    assert_eq!(
        errs(
            &s,
            json!({"dataTo": [{"storeRef": {"name": "a"}}, {"storeRef": {}}]})
        ),
        ["spec.dataTo[1]: Invalid value: storeRef must specify either name or labelSelector"]
    );
    assert!(errs(&s, json!({"dataTo": [{"storeRef": {"labelSelector": {}}}]})).is_empty());
    let e = s.validate(&obj(json!({"dataTo": [{}]})));
    assert_eq!(e[0].kind, FieldErrorKind::Invalid);
    assert_eq!(e[0].path, "spec.dataTo[0]");
}

#[test]
fn scalar_rule_failure_shows_the_value_and_default_message() {
    let s = schema(json!({
        "type": "object",
        "properties": {"name": {"type": "string", "x-kubernetes-validations": [
            {"rule": "self.size() <= 3"}
        ]}}
    }));
    assert_eq!(
        errs(&s, json!({"name": "abcd"})),
        ["spec.name: Invalid value: \"abcd\": failed rule: self.size() <= 3"]
    );
}

#[test]
fn message_expression_reason_and_field_path() {
    let s = schema(json!({
        "type": "object",
        "properties": {"name": {"type": "string"}, "count": {"type": "integer"}},
        "x-kubernetes-validations": [
            {
                "rule": "self.name.startsWith('esr-')",
                "messageExpression": "'name ' + self.name + ' must start with esr-'",
                "message": "static message",
                "reason": "FieldValueForbidden",
                "fieldPath": ".name"
            },
            {
                "rule": "has(self.count)",
                "message": "count is needed",
                "reason": "FieldValueRequired",
                "fieldPath": ".count"
            },
            {
                "rule": "self.name != 'dup'",
                "message": "taken",
                "reason": "FieldValueDuplicate"
            }
        ]
    }));
    assert_eq!(
        errs(&s, json!({"name": "dup"})),
        [
            "spec.name: Forbidden: name dup must start with esr-",
            "spec.count: Required value: count is needed",
            "spec: Duplicate value: taken",
        ]
    );
    let e = s.validate(&obj(json!({"name": "x", "count": 1})));
    assert_eq!(e.len(), 1);
    assert_eq!(e[0].kind.reason(), "FieldValueForbidden");
}

#[test]
fn message_expression_that_fails_falls_back_to_message() {
    let s = schema(json!({
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "x-kubernetes-validations": [{
            "rule": "has(self.name)",
            "messageExpression": "self.name + ' is missing'",
            "message": "name is missing"
        }, {
            "rule": "false",
            "messageExpression": "'   '"
        }]
    }));
    assert_eq!(
        errs(&s, json!({})),
        [
            "spec: Invalid value: name is missing",
            "spec: Invalid value: failed rule: false"
        ]
    );
}

#[test]
fn transition_rule_runs_only_on_update() {
    let s = schema(json!({
        "type": "object",
        "properties": {"mode": {"type": "string", "x-kubernetes-validations": [
            {"rule": "self == oldSelf", "message": "mode is immutable"}
        ]}}
    }));
    assert!(errs(&s, json!({"mode": "a"})).is_empty());
    assert!(update_errs(&s, json!({"mode": "a"}), json!({"mode": "a"})).is_empty());
    assert_eq!(
        update_errs(&s, json!({"mode": "a"}), json!({"mode": "b"})),
        ["spec.mode: Invalid value: \"b\": mode is immutable"]
    );
    // no old value to correlate: not evaluated
    assert!(update_errs(&s, json!({}), json!({"mode": "b"})).is_empty());
}

#[test]
fn transition_rule_correlates_list_map_items_by_key() {
    let s = schema(json!({
        "type": "object",
        "properties": {"items": {
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
            "items": {
                "type": "object",
                "required": ["name"],
                "properties": {"name": {"type": "string"}, "v": {"type": "integer"}},
                "x-kubernetes-validations": [
                    {"rule": "self.v >= oldSelf.v", "message": "v may not decrease"}
                ]
            }
        }}
    }));
    let old = json!({"items": [{"name": "a", "v": 2}, {"name": "b", "v": 5}]});
    assert_eq!(
        update_errs(
            &s,
            old.clone(),
            json!({"items": [{"name": "b", "v": 4}, {"name": "a", "v": 3}, {"name": "c", "v": 0}]})
        ),
        ["spec.items[0]: Invalid value: v may not decrease"]
    );
}

#[test]
fn unchanged_invalid_values_ratchet_on_update() {
    let s = store_ref_schema();
    let bad = json!({"dataTo": [{"storeRef": {}}]});
    assert!(update_errs(&s, bad.clone(), bad.clone()).is_empty());
    assert_eq!(
        update_errs(&s, json!({"dataTo": []}), bad),
        ["spec.dataTo[0]: Invalid value: storeRef must specify either name or labelSelector"]
    );
}

#[test]
fn evaluation_errors() {
    let s = schema(json!({
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "x-kubernetes-validations": [{"rule": "self.b == 1"}]
    }));
    assert_eq!(
        errs(&s, json!({"a": 1})),
        ["spec: Invalid value: \"object\": no such key: b evaluating rule: self.b == 1"]
    );
}

#[test]
fn blocking_schema_errors_skip_the_rules() {
    let s = schema(json!({
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "x-kubernetes-validations": [{"rule": "false", "message": "never"}]
    }));
    assert_eq!(
        errs(&s, json!({"a": "x"})),
        [
            "spec.a: Invalid value: \"string\": spec.a in body must be of type integer: \"string\"",
            "<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"
        ]
    );
}

#[test]
fn root_rules_see_name_but_not_other_metadata() {
    let s = Schema::new(&json!({
        "type": "object",
        "x-kubernetes-validations": [
            {"rule": "self.metadata.name.startsWith('ok')", "message": "bad name"},
            {"rule": "!has(self.metadata.labels)", "message": "labels visible"}
        ],
        "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"}}
    }))
    .unwrap();
    let o = json!({"apiVersion": "g/v1", "kind": "K", "metadata": {"name": "nope", "labels": {"a": "b"}}});
    let e: Vec<String> = s.validate(&o).iter().map(|e| e.to_string()).collect();
    assert_eq!(e, ["<nil>: Invalid value: bad name"]);
}

#[test]
fn library_functions() {
    let rules = [
        "self.l.isSorted()",
        "self.l.sum() == 6",
        "self.l.max() == 3 && self.l.min() == 1",
        "self.l.indexOf(2) == 1",
        "self.s.find('[0-9]+') == '42'",
        "self.s.findAll('[A-Z]') == ['A', 'B']",
        "isURL('https://example.com') && !isURL('example com')",
        "self.s.lowerAscii() == 'a42b'",
        "self.s.split('4') == ['A', '2B']",
        "self.m.all(k, k.matches('^[a-z]+$'))",
        "self.l.exists_one(x, x == 2)",
        "'x' in self.m",
        "self.l.filter(x, x > 1).size() == 2",
        "self.l.map(x, x * 2) == [2, 4, 6]",
        "size(self.s) == 4",
        "self.s.contains('42') && self.s.endsWith('B')",
    ];
    let validations: Vec<Value> = rules
        .iter()
        .map(|r| json!({"rule": r, "message": r}))
        .collect();
    let s = schema(json!({
        "type": "object",
        "properties": {
            "l": {"type": "array", "items": {"type": "integer"}},
            "s": {"type": "string"},
            "m": {"type": "object", "additionalProperties": {"type": "string"}}
        },
        "x-kubernetes-validations": validations
    }));
    let e = errs(
        &s,
        json!({"l": [1, 2, 3], "s": "A42B", "m": {"x": "1", "y": "2"}}),
    );
    assert!(e.is_empty(), "{e:?}");
    let e = errs(
        &s,
        json!({"l": [3, 1, 2], "s": "A42B", "m": {"x": "1", "Y": "2"}}),
    );
    assert_eq!(
        e,
        [
            "spec: Invalid value: self.l.isSorted()",
            "spec: Invalid value: self.l.indexOf(2) == 1",
            "spec: Invalid value: self.m.all(k, k.matches('^[a-z]+$'))",
            "spec: Invalid value: self.l.map(x, x * 2) == [2, 4, 6]",
        ]
    );
}

// ---------------------------------------------------------------- CRD-time checks

fn item_rule_schema(rule: &str, max_items: Option<i64>) -> Value {
    let mut list = json!({
        "type": "array",
        "items": {
            "type": "object",
            "properties": {
                "a": {"type": "string"}, "b": {"type": "string"}, "c": {"type": "string"},
                "d": {"type": "string"}, "e": {"type": "string"}
            },
            "x-kubernetes-validations": [{"rule": rule, "message": "m"}]
        }
    });
    if let Some(m) = max_items {
        list["maxItems"] = json!(m);
    }
    json!({
        "type": "object",
        "properties": {"spec": {"type": "object", "properties": {"list": list}}}
    })
}

#[test]
fn over_budget_rule_is_refused() {
    // 10 presence tests on an item of an unbounded list: 10 × (3 MiB / 3) = 10,485,760.
    let rule = "has(self.a) && has(self.b) && has(self.c) && has(self.d) && has(self.e) && \
                has(self.a) && has(self.b) && has(self.c) && has(self.d) && has(self.e)";
    let e: Vec<String> = check_cel_rules(
        &item_rule_schema(rule, None),
        "spec.validation.openAPIV3Schema",
    )
    .iter()
    .map(ToString::to_string)
    .collect();
    assert_eq!(
        e,
        [
            "spec.validation.openAPIV3Schema.properties[spec].properties[list].items.x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of 1.048576x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
        ]
    );
    // bounding the list brings it within budget
    assert!(check_cel_rules(&item_rule_schema(rule, Some(100)), "openAPIV3Schema").is_empty());
    // six presence tests fit unbounded
    let six =
        "has(self.a) && has(self.b) && has(self.c) && has(self.d) && has(self.e) && has(self.a)";
    assert!(check_cel_rules(&item_rule_schema(six, None), "openAPIV3Schema").is_empty());
}

#[test]
fn quadratic_rule_is_far_over_budget() {
    let s = json!({
        "type": "object",
        "properties": {"l": {
            "type": "array",
            "items": {"type": "string"},
            "x-kubernetes-validations": [{"rule": "self.all(x, self.all(y, x == y))"}]
        }}
    });
    let e: Vec<String> = check_cel_rules(&s, "openAPIV3Schema")
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(e.len(), 3, "{e:?}");
    assert!(e[0].starts_with("openAPIV3Schema.properties[l].x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of more than 100x"), "{e:?}");
    assert_eq!(
        e[1],
        "openAPIV3Schema.properties[l].x-kubernetes-validations[0].rule: Forbidden: contributed to estimated rule & messageExpression cost total exceeding cost limit for entire OpenAPIv3 schema"
    );
    assert!(e[2].starts_with("openAPIV3Schema: Forbidden: x-kubernetes-validations estimated rule & messageExpression cost total for entire OpenAPIv3 schema exceeds budget by factor of more than 100x"), "{e:?}");
}

#[test]
fn rule_that_does_not_compile_is_refused() {
    let s = json!({
        "type": "object",
        "x-kubernetes-validations": [{"rule": "self.a ==", "message": "m"}]
    });
    let e = check_cel_rules(&s, "openAPIV3Schema");
    assert_eq!(e.len(), 1);
    assert_eq!(
        e[0].path,
        "openAPIV3Schema.x-kubernetes-validations[0].rule"
    );
    assert!(
        e[0].message.starts_with("Invalid value: apiextensions.ValidationRule{Rule:\"self.a ==\", Message:\"m\", MessageExpression:\"\", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:\"\", OptionalOldSelf:(*bool)(nil)}: compilation failed: "),
        "{}",
        e[0].message
    );
}

fn crd_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    v.sort();
    v
}

fn check_all(dir: &Path) -> usize {
    let mut rules = 0;
    for f in crd_files(dir) {
        let crd: Value = yaml_serde::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
        for (i, v) in crd["spec"]["versions"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
        {
            let s = &v["schema"]["openAPIV3Schema"];
            rules += s.to_string().matches("\"rule\"").count();
            let e = check_cel_rules(s, &format!("spec.versions[{i}].schema.openAPIV3Schema"));
            assert!(e.is_empty(), "{}: {e:?}", f.display());
        }
    }
    rules
}

#[test]
fn esr_and_eso_crds_compile_and_fit_the_budget() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    assert!(check_all(&root.join("crds")) >= 10);
    assert!(check_all(&root.join("../shared/compat/eso-crds")) > 10);
}

#[test]
fn eso_push_secret_rule_refuses_with_the_api_server_text() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/compat/eso-crds");
    let crd: Value = yaml_serde::from_str(
        &std::fs::read_to_string(root.join("external-secrets.io_pushsecrets.yaml")).unwrap(),
    )
    .unwrap();
    let s = Schema::from_crd(&crd, "v1alpha1").unwrap().unwrap();
    let o = json!({
        "apiVersion": "external-secrets.io/v1alpha1",
        "kind": "PushSecret",
        "metadata": {"name": "no-store-name"},
        "spec": {
            "selector": {"secret": {"name": "s"}},
            "secretStoreRefs": [{"name": "store"}],
            "dataTo": [{"storeRef": {"kind": "SecretStore"}}]
        }
    });
    let mut o = o;
    let (unknown, e) = s.admit(&mut o);
    assert!(unknown.is_empty());
    let e: Vec<String> = e.iter().map(ToString::to_string).collect();
    assert_eq!(
        e,
        ["spec.dataTo[0]: Invalid value: storeRef must specify either name or labelSelector"]
    );
}

#[test]
fn push_secret_rule_costs_have_room_in_the_budget() {
    // The rules run once per item of unbounded lists of objects with no required field:
    // 3 MiB / 3 = 1,048,576 times. `has()` costs nothing but its operand, as on v1.29+ servers.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../crds");
    let crd: Value = yaml_serde::from_str(
        &std::fs::read_to_string(root.join("external-secrets.io_pushsecrets.yaml")).unwrap(),
    )
    .unwrap();
    let costs = cel_rule_costs(
        &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"],
        "s",
    );
    let p = "s.properties[spec].properties[dataTo].items";
    assert_eq!(
        costs,
        [
            (
                format!("{p}.x-kubernetes-validations[0].rule"),
                5 * 1_048_576
            ),
            (
                format!("{p}.x-kubernetes-validations[1].rule"),
                8 * 1_048_576
            ),
            (
                format!("{p}.properties[rewrite].items.x-kubernetes-validations[0].rule"),
                6 * 1_048_576
            ),
        ]
    );
}
