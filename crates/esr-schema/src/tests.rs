//! Unit tests: one or more per rule, asserting the apiserver's error texts.

use serde_json::{Value, json};

use crate::{FieldErrorKind, Schema, check_structural, strict_decoding_message};

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

fn errs(s: &Schema, spec: Value) -> Vec<String> {
    s.validate(&json!({"apiVersion": "g/v1", "kind": "K", "spec": spec}))
        .iter()
        .map(|e| e.to_string())
        .collect()
}

fn one(s: &Schema, spec: Value) -> String {
    let e = errs(s, spec);
    assert_eq!(e.len(), 1, "expected exactly one error, got {e:?}");
    e[0].clone()
}

// ---------------------------------------------------------------- types

#[test]
fn type_mismatch_message() {
    let s =
        schema(json!({"type": "object", "properties": {"refreshInterval": {"type": "string"}}}));
    assert_eq!(
        one(&s, json!({"refreshInterval": 5})),
        "spec.refreshInterval: Invalid value: \"integer\": spec.refreshInterval in body must be of type string: \"integer\""
    );
    assert_eq!(
        one(&s, json!({"refreshInterval": true})),
        "spec.refreshInterval: Invalid value: \"boolean\": spec.refreshInterval in body must be of type string: \"boolean\""
    );
    let e = &s.validate(&json!({"spec": {"refreshInterval": []}}))[0];
    assert_eq!(e.kind, FieldErrorKind::TypeInvalid);
    assert_eq!(e.path, "spec.refreshInterval");
}

#[test]
fn every_type() {
    let s = schema(json!({"type": "object", "properties": {
        "s": {"type": "string"}, "i": {"type": "integer"}, "n": {"type": "number"},
        "b": {"type": "boolean"}, "o": {"type": "object"}, "a": {"type": "array", "items": {"type": "string"}}
    }}));
    assert!(
        errs(
            &s,
            json!({"s": "x", "i": 1, "n": 1.5, "b": false, "o": {}, "a": []})
        )
        .is_empty()
    );
    // an integer is a valid number; an integral float is a valid integer
    assert!(errs(&s, json!({"n": 2, "i": 3.0})).is_empty());
    assert_eq!(
        one(&s, json!({"i": 1.5})),
        "spec.i: Invalid value: \"number\": spec.i in body must be of type integer: \"number\""
    );
    assert_eq!(
        one(&s, json!({"o": "x"})),
        "spec.o: Invalid value: \"string\": spec.o in body must be of type object: \"string\""
    );
    assert_eq!(
        one(&s, json!({"a": {}})),
        "spec.a: Invalid value: \"object\": spec.a in body must be of type array: \"object\""
    );
    assert_eq!(
        one(&s, json!({"b": "true"})),
        "spec.b: Invalid value: \"string\": spec.b in body must be of type boolean: \"string\""
    );
}

#[test]
fn nullable_and_null() {
    let s = schema(json!({"type": "object", "properties": {
        "x": {"type": "string", "nullable": true},
        "y": {"type": "string"},
        "l": {"type": "array", "items": {"type": "string"}}
    }}));
    assert!(errs(&s, json!({"x": null})).is_empty());
    // a null for a non-nullable field fails validation (the apiserver prunes it before, see defaults)
    assert_eq!(
        one(&s, json!({"y": null})),
        "spec.y: Invalid value: \"null\": spec.y in body must be of type string: \"null\""
    );
    assert_eq!(
        one(&s, json!({"l": ["a", null]})),
        "spec.l[1]: Invalid value: \"null\": spec.l[1] in body must be of type string: \"null\""
    );
}

#[test]
fn int_or_string() {
    let s = schema(
        json!({"type": "object", "properties": {"v": {"x-kubernetes-int-or-string": true}}}),
    );
    assert!(errs(&s, json!({"v": 5})).is_empty());
    assert!(errs(&s, json!({"v": "5m"})).is_empty());
    assert_eq!(
        one(&s, json!({"v": true})),
        "spec.v: Invalid value: \"boolean\": spec.v in body must be of type integer,string: \"boolean\""
    );
    let s2 = schema(json!({"type": "object", "properties": {"v": {
        "x-kubernetes-int-or-string": true,
        "anyOf": [{"type": "integer"}, {"type": "string"}]
    }}}));
    assert!(errs(&s2, json!({"v": 5})).is_empty());
    assert!(errs(&s2, json!({"v": "x"})).is_empty());
}

// ---------------------------------------------------------------- enum / required

#[test]
fn enum_unsupported_value() {
    let s = schema(
        json!({"type": "object", "properties": {"target": {"type": "object", "properties": {
            "creationPolicy": {"type": "string", "enum": ["Owner", "Orphan", "Merge", "None", "CreateOrMerge"]}
        }}}}),
    );
    assert_eq!(
        one(&s, json!({"target": {"creationPolicy": "Foo"}})),
        "spec.target.creationPolicy: Unsupported value: \"Foo\": supported values: \"Owner\", \"Orphan\", \"Merge\", \"None\", \"CreateOrMerge\""
    );
    assert!(errs(&s, json!({"target": {"creationPolicy": "Merge"}})).is_empty());
    let e = &s.validate(&json!({"spec": {"target": {"creationPolicy": "x"}}}))[0];
    assert_eq!(e.kind, FieldErrorKind::NotSupported);
    assert_eq!(e.kind.reason(), "FieldValueNotSupported");
}

#[test]
fn enum_numbers_are_json_quoted() {
    let s =
        schema(json!({"type": "object", "properties": {"n": {"type": "integer", "enum": [1, 2]}}}));
    assert!(errs(&s, json!({"n": 2})).is_empty());
    assert_eq!(
        one(&s, json!({"n": 3})),
        "spec.n: Unsupported value: 3: supported values: \"1\", \"2\""
    );
}

#[test]
fn required_value() {
    let s = schema(json!({"type": "object", "properties": {"secretStoreRef": {
        "type": "object", "required": ["name"], "properties": {"name": {"type": "string"}, "kind": {"type": "string"}}
    }}}));
    assert_eq!(
        one(&s, json!({"secretStoreRef": {"kind": "SecretStore"}})),
        "spec.secretStoreRef.name: Required value"
    );
    let root = Schema::new(&json!({"type": "object", "required": ["spec"], "properties": {"spec": {"type": "object"}}})).unwrap();
    let e = root.validate(&json!({"apiVersion": "a/v1", "kind": "K"}));
    assert_eq!(e.len(), 1);
    assert_eq!(e[0].to_string(), "spec: Required value");
    assert_eq!(e[0].kind.reason(), "FieldValueRequired");
}

// ---------------------------------------------------------------- strings

#[test]
fn string_lengths_and_pattern() {
    let s = schema(json!({"type": "object", "properties": {
        "key": {"type": "string", "minLength": 1, "maxLength": 5, "pattern": "^[-._a-zA-Z0-9]+$"}
    }}));
    assert!(errs(&s, json!({"key": "a.b-c"})).is_empty());
    assert_eq!(
        one(&s, json!({"key": "abcdef"})),
        "spec.key: Too long: may not be more than 5 bytes"
    );
    assert_eq!(
        one(&s, json!({"key": ""})),
        "spec.key: Invalid value: \"\": spec.key in body should be at least 1 chars long"
    );
    assert_eq!(
        one(&s, json!({"key": "a b"})),
        "spec.key: Invalid value: \"a b\": spec.key in body should match '^[-._a-zA-Z0-9]+$'"
    );
    // length counts characters (runes), not bytes
    assert!(errs(&s, json!({"key": "ééééé"})).len() == 1); // fails the pattern only
    let l =
        schema(json!({"type": "object", "properties": {"k": {"type": "string", "maxLength": 2}}}));
    assert!(errs(&l, json!({"k": "éé"})).is_empty());
}

#[test]
fn pattern_uses_go_ascii_classes() {
    let s = schema(
        json!({"type": "object", "properties": {"d": {"type": "string", "pattern": "^\\d+$"}}}),
    );
    assert!(errs(&s, json!({"d": "123"})).is_empty());
    assert_eq!(errs(&s, json!({"d": "١٢٣"})).len(), 1);
}

#[test]
fn invalid_pattern_reported() {
    let s =
        schema(json!({"type": "object", "properties": {"d": {"type": "string", "pattern": "("}}}));
    let e = one(&s, json!({"d": "x"}));
    assert!(
        e.starts_with(
            "spec.d: Invalid value: \"x\": spec.d in body should match '(, but pattern is invalid: "
        ),
        "{e}"
    );
}

#[test]
fn formats() {
    let s = schema(json!({"type": "object", "properties": {
        "b": {"type": "string", "format": "byte"},
        "t": {"type": "string", "format": "date-time"},
        "i": {"type": "integer", "format": "int32"},
        "u": {"type": "string", "format": "not-a-format"}
    }}));
    assert!(
        errs(
            &s,
            json!({"b": "aGk=", "t": "2024-01-01T00:00:00Z", "i": 3, "u": "anything"})
        )
        .is_empty()
    );
    assert_eq!(
        one(&s, json!({"b": "%%%"})),
        "spec.b: Invalid value: \"%%%\": spec.b in body must be of type byte: \"%%%\""
    );
    assert_eq!(
        one(&s, json!({"t": "tomorrow"})),
        "spec.t: Invalid value: \"tomorrow\": spec.t in body must be of type date-time: \"tomorrow\""
    );
    // int32 is not range checked by the apiserver
    assert!(errs(&s, json!({"i": 9_999_999_999_i64})).is_empty());
    assert_eq!(
        one(&s, json!({"i": "3"})),
        "spec.i: Invalid value: \"string\": spec.i in body must be of type integer: \"string\""
    );
}

// ---------------------------------------------------------------- numbers

#[test]
fn number_bounds() {
    let s = schema(json!({"type": "object", "properties": {
        "n": {"type": "integer", "minimum": 0, "maximum": 10},
        "x": {"type": "integer", "minimum": 0, "exclusiveMinimum": true, "maximum": 10, "exclusiveMaximum": true},
        "f": {"type": "number", "maximum": 2.5},
        "m": {"type": "integer", "multipleOf": 3}
    }}));
    assert!(errs(&s, json!({"n": 0, "x": 5, "f": 2.5, "m": 9})).is_empty());
    assert_eq!(
        one(&s, json!({"n": 11})),
        "spec.n: Invalid value: 11: spec.n in body should be less than or equal to 10"
    );
    assert_eq!(
        one(&s, json!({"n": -1})),
        "spec.n: Invalid value: -1: spec.n in body should be greater than or equal to 0"
    );
    assert_eq!(
        one(&s, json!({"x": 0})),
        "spec.x: Invalid value: 0: spec.x in body should be greater than 0"
    );
    assert_eq!(
        one(&s, json!({"x": 10})),
        "spec.x: Invalid value: 10: spec.x in body should be less than 10"
    );
    assert_eq!(
        one(&s, json!({"f": 3.5})),
        "spec.f: Invalid value: 3.5: spec.f in body should be less than or equal to 2.5"
    );
    assert_eq!(
        one(&s, json!({"m": 4})),
        "spec.m: Invalid value: 4: spec.m in body should be a multiple of 3"
    );
}

// ---------------------------------------------------------------- arrays

#[test]
fn array_bounds_and_items() {
    let s = schema(json!({"type": "object", "properties": {
        "data": {"type": "array", "minItems": 1, "maxItems": 2, "items": {
            "type": "object", "required": ["secretKey"], "properties": {"secretKey": {"type": "string", "pattern": "^[a-z]+$"}}
        }}
    }}));
    assert!(errs(&s, json!({"data": [{"secretKey": "a"}]})).is_empty());
    assert_eq!(
        one(&s, json!({"data": []})),
        "spec.data: Invalid value: 0: spec.data in body should have at least 1 items"
    );
    assert_eq!(
        one(
            &s,
            json!({"data": [{"secretKey": "a"}, {"secretKey": "b"}, {"secretKey": "c"}]})
        ),
        "spec.data: Too many: 3: must have at most 2 items"
    );
    assert_eq!(
        one(&s, json!({"data": [{"x": 1}]})),
        "spec.data[0].secretKey: Required value"
    );
    assert_eq!(
        one(
            &s,
            json!({"data": [{"secretKey": "a"}, {"secretKey": "B"}]})
        ),
        "spec.data[1].secretKey: Invalid value: \"B\": spec.data[1].secretKey in body should match '^[a-z]+$'"
    );
}

#[test]
fn unique_items() {
    let s = schema(
        json!({"type": "object", "properties": {"l": {"type": "array", "uniqueItems": true, "items": {"type": "string"}}}}),
    );
    assert_eq!(
        one(&s, json!({"l": ["a", "a"]})),
        "spec.l: Invalid value: \"\": spec.l in body shouldn't contain duplicates"
    );
}

#[test]
fn list_type_set_and_map() {
    let s = schema(json!({"type": "object", "properties": {
        "set": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        "map": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}, "v": {"type": "string"}}}},
        "map2": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["a", "b"],
                "items": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}}
    }}));
    assert!(
        errs(
            &s,
            json!({"set": ["a", "b"], "map": [{"name": "x"}, {"name": "y"}]})
        )
        .is_empty()
    );
    assert_eq!(
        one(&s, json!({"set": ["a", "b", "a", "a"]})),
        "spec.set[2]: Duplicate value: \"a\""
    );
    assert_eq!(
        one(
            &s,
            json!({"map": [{"name": "x", "v": "1"}, {"name": "x", "v": "2"}]})
        ),
        "spec.map[1]: Duplicate value: map[string]interface {}{\"name\":\"x\"}"
    );
    assert_eq!(
        one(
            &s,
            json!({"map2": [{"a": "1", "b": "2"}, {"b": "2", "a": "1"}]})
        ),
        "spec.map2[1]: Duplicate value: map[string]interface {}{\"a\":\"1\", \"b\":\"2\"}"
    );
    assert!(
        errs(
            &s,
            json!({"map2": [{"a": "1", "b": "2"}, {"a": "1", "b": "3"}]})
        )
        .is_empty()
    );
}

// ---------------------------------------------------------------- objects

#[test]
fn object_properties_bounds_and_additional_properties() {
    let s = schema(json!({"type": "object", "properties": {
        "p": {"type": "object", "minProperties": 1, "maxProperties": 1, "properties": {"a": {"type": "string"}, "b": {"type": "string"}}},
        "labels": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 3}}
    }}));
    assert!(errs(&s, json!({"p": {"a": "x"}, "labels": {"k": "v"}})).is_empty());
    assert_eq!(
        one(&s, json!({"p": {}})),
        "spec.p: Invalid value: 0: spec.p in body should have at least 1 properties"
    );
    assert_eq!(
        one(&s, json!({"p": {"a": "x", "b": "y"}})),
        "spec.p: Too many: 2: must have at most 1 item"
    );
    assert_eq!(
        one(&s, json!({"labels": {"k": "long"}})),
        "spec.labels.k: Too long: may not be more than 3 bytes"
    );
    assert_eq!(
        one(&s, json!({"labels": {"k": 1}})),
        "spec.labels.k: Invalid value: \"integer\": spec.labels.k in body must be of type string: \"integer\""
    );
}

#[test]
fn additional_properties_false() {
    let s = schema(
        json!({"type": "object", "properties": {"o": {"type": "object", "additionalProperties": false}}}),
    );
    assert_eq!(
        one(&s, json!({"o": {"x": 1}})),
        "spec.o: Invalid value: \"x\": spec.o.x in body is a forbidden property"
    );
}

// ---------------------------------------------------------------- anyOf / oneOf / allOf / not

#[test]
fn junctors() {
    let s = schema(json!({"type": "object", "properties": {
        "one": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                 "oneOf": [{"required": ["a"]}, {"required": ["b"]}]},
        "any": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                 "anyOf": [{"required": ["a"]}, {"required": ["b"]}]},
        "all": {"type": "string", "allOf": [{"minLength": 2}, {"maxLength": 3}]},
        "not": {"type": "string", "not": {"enum": ["bad"]}}
    }}));
    assert!(
        errs(
            &s,
            json!({"one": {"a": "x"}, "any": {"b": "y"}, "all": "ab", "not": "ok"})
        )
        .is_empty()
    );
    assert_eq!(
        errs(&s, json!({"one": {"a": "x", "b": "y"}})),
        vec![
            "<nil>: Invalid value: \"\": \"spec.one\" must validate one and only one schema (oneOf). Found 2 valid alternatives"
        ]
    );
    assert_eq!(
        errs(&s, json!({"one": {}})),
        vec![
            "<nil>: Invalid value: \"\": \"spec.one\" must validate one and only one schema (oneOf). Found none valid",
            "spec.one.a: Required value"
        ]
    );
    assert_eq!(
        errs(&s, json!({"any": {}})),
        vec![
            "<nil>: Invalid value: \"\": \"spec.any\" must validate at least one schema (anyOf)",
            "spec.any.a: Required value"
        ]
    );
    assert_eq!(
        errs(&s, json!({"all": "a"})),
        vec![
            "spec.all: Invalid value: \"a\": spec.all in body should be at least 2 chars long",
            "<nil>: Invalid value: \"\": \"spec.all\" must validate all the schemas (allOf)"
        ]
    );
    assert_eq!(
        one(&s, json!({"not": "bad"})),
        "<nil>: Invalid value: \"\": \"spec.not\" must not validate the schema (not)"
    );
}

// ---------------------------------------------------------------- embedded resources

#[test]
fn embedded_resource_requires_type_meta_and_keeps_it() {
    let s = schema(json!({"type": "object", "properties": {"manifest": {
        "type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true
    }}}));
    let mut obj = json!({"spec": {"manifest": {"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "x", "bogus": 1}, "data": {"a": "b"}}}});
    let unknown = s.prune(&mut obj);
    assert_eq!(unknown, vec!["spec.manifest.metadata.bogus"]);
    assert_eq!(obj["spec"]["manifest"]["data"]["a"], "b");
    assert_eq!(obj["spec"]["manifest"]["metadata"], json!({"name": "x"}));
    assert!(s.validate(&obj).is_empty());
    let e: Vec<String> = s
        .validate(&json!({"spec": {"manifest": {"data": {}}}}))
        .iter()
        .map(|e| e.to_string())
        .collect();
    assert_eq!(
        e,
        vec![
            "spec.manifest.apiVersion: Required value: must not be empty",
            "spec.manifest.kind: Required value: must not be empty"
        ]
    );
}

// ---------------------------------------------------------------- pruning

#[test]
fn prune_unknown_fields_with_paths() {
    let s = schema(json!({"type": "object", "properties": {
        "data": {"type": "array", "items": {"type": "object", "properties": {"secretKey": {"type": "string"}}}},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "raw": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {"known": {"type": "object", "properties": {"a": {"type": "string"}}}}}
    }}));
    let mut obj = json!({
        "apiVersion": "g/v1", "kind": "K", "metadata": {"name": "n", "whatever": 1},
        "status": {"x": 1},
        "spec": {
            "x": 1,
            "data": [{"secretKey": "a", "extra": true}],
            "labels": {"any": "thing"},
            "raw": {"free": {"deep": 1}, "known": {"a": "1", "b": "2"}}
        }
    });
    let unknown = s.prune(&mut obj);
    assert_eq!(
        unknown,
        vec!["spec.data[0].extra", "spec.raw.known.b", "spec.x", "status"]
    );
    assert_eq!(
        obj["metadata"]["whatever"], 1,
        "root metadata is left to the apiserver"
    );
    assert_eq!(obj["spec"]["raw"]["free"]["deep"], 1);
    assert_eq!(obj["spec"]["labels"]["any"], "thing");
    assert!(obj["spec"].get("x").is_none());
    assert!(obj["spec"]["data"][0].get("extra").is_none());
    assert_eq!(
        strict_decoding_message(&unknown[2..3]),
        "strict decoding error: unknown field \"spec.x\""
    );
}

#[test]
fn prune_object_without_properties_drops_everything() {
    let s = schema(json!({"type": "object", "properties": {"o": {"type": "object"}}}));
    let mut obj = json!({"spec": {"o": {"a": 1, "b": {"c": 2}}}});
    assert_eq!(s.prune(&mut obj), vec!["spec.o.a", "spec.o.b"]);
    assert_eq!(obj["spec"]["o"], json!({}));
}

// ---------------------------------------------------------------- defaulting

#[test]
fn defaults_applied_recursively() {
    let s = schema(json!({"type": "object", "properties": {
        "refreshInterval": {"type": "string", "default": "1h0m0s"},
        "target": {"type": "object", "default": {}, "properties": {
            "creationPolicy": {"type": "string", "default": "Owner"},
            "deletionPolicy": {"type": "string", "default": "Retain"}
        }},
        "data": {"type": "array", "items": {"type": "object", "properties": {"p": {"type": "string", "default": "d"}}}},
        "m": {"type": "object", "additionalProperties": {"type": "object", "properties": {"q": {"type": "integer", "default": 7}}}}
    }}));
    let mut obj = json!({"spec": {"data": [{}, {"p": "set"}], "m": {"a": {}}}});
    s.apply_defaults(&mut obj);
    assert_eq!(
        obj["spec"],
        json!({
            "data": [{"p": "d"}, {"p": "set"}],
            "m": {"a": {"q": 7}},
            "refreshInterval": "1h0m0s",
            "target": {"creationPolicy": "Owner", "deletionPolicy": "Retain"}
        })
    );
    // an explicit value is kept
    let mut obj = json!({"spec": {"target": {"creationPolicy": "Merge"}}});
    s.apply_defaults(&mut obj);
    assert_eq!(
        obj["spec"]["target"],
        json!({"creationPolicy": "Merge", "deletionPolicy": "Retain"})
    );
}

#[test]
fn defaults_and_nulls() {
    let s = schema(json!({"type": "object", "properties": {
        "withDefault": {"type": "string", "default": "d"},
        "noDefault": {"type": "string"},
        "nullable": {"type": "string", "nullable": true, "default": "d"},
        "list": {"type": "array", "items": {"type": "string", "default": "x"}},
        "list2": {"type": "array", "items": {"type": "string"}}
    }}));
    let mut obj = json!({"spec": {"withDefault": null, "noDefault": null, "nullable": null, "list": [null, "a"], "list2": [null]}});
    s.apply_defaults(&mut obj);
    assert_eq!(
        obj["spec"],
        json!({"withDefault": "d", "nullable": null, "list": ["x", "a"], "list2": [null]})
    );
}

#[test]
fn admit_runs_in_apiserver_order() {
    let s = schema(
        json!({"type": "object", "required": ["a"], "properties": {"a": {"type": "string", "default": "x", "enum": ["x"]}}}),
    );
    let mut obj = json!({"spec": {"zz": 1}});
    let (unknown, errors) = s.admit(&mut obj);
    assert_eq!(unknown, vec!["spec.zz"]);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(obj["spec"], json!({"a": "x"}));
}

// ---------------------------------------------------------------- structural checks

fn root(props: Value) -> Value {
    json!({"type": "object", "properties": props})
}

#[test]
fn structural_ok() {
    let s = root(json!({"spec": {"type": "object", "properties": {
        "a": {"type": "string", "default": "x", "enum": ["x", "y"]},
        "v": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
        "l": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
              "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}},
        "one": {"type": "object", "properties": {"a": {"type": "string"}}, "oneOf": [{"required": ["a"]}]}
    }}, "metadata": {"type": "object"}}));
    assert_eq!(check_structural(&s), Vec::<String>::new());
}

#[test]
fn structural_missing_types() {
    let e = check_structural(&root(
        json!({"spec": {"properties": {"a": {}}}, "l": {"type": "array", "items": {}}}),
    ));
    assert_eq!(
        e,
        vec![
            "openAPIV3Schema.properties[l].items.type: Required value: must not be empty for specified array items",
            "openAPIV3Schema.properties[spec].properties[a].type: Required value: must not be empty for specified object fields",
            "openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields",
        ]
    );
    assert_eq!(
        check_structural(&json!({})),
        vec!["openAPIV3Schema.type: Required value: must not be empty at the root"]
    );
    assert_eq!(
        check_structural(&root(json!({"l": {"type": "array"}}))),
        vec!["openAPIV3Schema.properties[l].items: Required value: must be specified"]
    );
}

#[test]
fn structural_preserve_unknown_fields_false() {
    assert_eq!(
        check_structural(&root(
            json!({"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": false}})
        )),
        vec![
            "openAPIV3Schema.properties[spec].x-kubernetes-preserve-unknown-fields: Invalid value: false: must be true or undefined"
        ]
    );
}

#[test]
fn structural_junctor_restrictions() {
    let e = check_structural(&root(
        json!({"spec": {"type": "object", "properties": {"a": {"type": "string"}},
        "anyOf": [{"type": "object", "description": "d", "nullable": true, "default": {}, "additionalProperties": {"type": "string"},
                   "required": ["a"]}]}}),
    ));
    assert_eq!(
        e,
        vec![
            "openAPIV3Schema.properties[spec].anyOf[0].additionalProperties: Forbidden: must be undefined to be structural",
            "openAPIV3Schema.properties[spec].anyOf[0].default: Forbidden: must be undefined to be structural",
            "openAPIV3Schema.properties[spec].anyOf[0].description: Forbidden: must be empty to be structural",
            "openAPIV3Schema.properties[spec].anyOf[0].nullable: Forbidden: must be false to be structural",
            "openAPIV3Schema.properties[spec].anyOf[0].type: Forbidden: must be empty to be structural",
        ]
    );
}

#[test]
fn structural_properties_and_additional_properties() {
    let e = check_structural(&root(
        json!({"spec": {"type": "object", "properties": {"a": {"type": "string"}},
        "additionalProperties": {"type": "string"}}}),
    ));
    assert_eq!(
        e,
        vec![
            "openAPIV3Schema.properties[spec].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive"
        ]
    );
    let e =
        check_structural(&json!({"type": "object", "additionalProperties": {"type": "string"}}));
    assert_eq!(
        e,
        vec!["openAPIV3Schema.additionalProperties: Forbidden: must not be used at the root"]
    );
}

#[test]
fn structural_metadata_restrictions() {
    let ok = root(
        json!({"metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10}}}}),
    );
    assert!(check_structural(&ok).is_empty());
    let e = check_structural(&root(
        json!({"metadata": {"type": "object", "properties": {"labels": {"type": "object"}}}}),
    ));
    assert_eq!(
        e,
        vec![
            "openAPIV3Schema.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified"
        ]
    );
    let e = check_structural(&root(json!({"kind": {"type": "integer"}})));
    assert_eq!(
        e,
        vec!["openAPIV3Schema.properties[kind].type: Invalid value: \"integer\": must be string"]
    );
    let e = check_structural(&root(
        json!({"metadata": {"type": "object", "properties": {"name": {"type": "string", "default": "x"}}}}),
    ));
    assert_eq!(
        e,
        vec![
            "openAPIV3Schema.properties[metadata].properties[name].default: Forbidden: must not be set in top-level metadata"
        ]
    );
}

#[test]
fn structural_defaults_must_validate_and_be_pruned() {
    let e = check_structural(&root(json!({"spec": {"type": "object", "properties": {
        "a": {"type": "string", "enum": ["x"], "default": "y"},
        "o": {"type": "object", "properties": {"k": {"type": "string"}}, "default": {"k": "v", "extra": 1}}
    }}})));
    assert_eq!(
        e,
        vec![
            "openAPIV3Schema.properties[spec].properties[a].default: Unsupported value: \"y\": supported values: \"x\"",
            "openAPIV3Schema.properties[spec].properties[o].default: Invalid value: map[string]interface {}{\"extra\":1, \"k\":\"v\"}: must not have unknown fields",
        ]
    );
}

#[test]
fn structural_forbidden_keywords_and_list_types() {
    let e = check_structural(&root(json!({"spec": {"type": "object", "properties": {
        "u": {"type": "array", "uniqueItems": true, "items": {"type": "string"}},
        "t": {"type": "foo"},
        "r": {"type": "string", "$ref": "#/x"},
        "pp": {"type": "object", "patternProperties": {"^a": {"type": "string"}}},
        "ai": {"type": "array", "items": {"type": "string"}, "additionalItems": false},
        "de": {"type": "object", "dependencies": {"a": ["b"]}},
        "df": {"type": "object", "definitions": {"x": {"type": "string"}}},
        "id": {"type": "string", "id": "urn:x"},
        "lt": {"type": "array", "x-kubernetes-list-type": "bag", "items": {"type": "string"}},
        "lm": {"type": "array", "x-kubernetes-list-type": "map", "items": {"type": "object", "properties": {"n": {"type": "string"}}}},
        "p": {"type": "string", "pattern": "("}
    }}})));
    let expect = [
        "openAPIV3Schema.properties[spec].properties[u].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        "openAPIV3Schema.properties[spec].properties[t].type: Unsupported value: \"foo\": supported values: \"array\", \"boolean\", \"integer\", \"number\", \"object\", \"string\"",
        "openAPIV3Schema.properties[spec].properties[r].$ref: Forbidden: $ref is not supported",
        "openAPIV3Schema.properties[spec].properties[pp].patternProperties: Forbidden: patternProperties is not supported",
        "openAPIV3Schema.properties[spec].properties[ai].additionalItems: Forbidden: additionalItems is not supported",
        "openAPIV3Schema.properties[spec].properties[de].dependencies: Forbidden: dependencies is not supported",
        "openAPIV3Schema.properties[spec].properties[df].definitions: Forbidden: definitions is not supported",
        "openAPIV3Schema.properties[spec].properties[id].id: Forbidden: id is not supported",
        "openAPIV3Schema.properties[spec].properties[lt].x-kubernetes-list-type: Unsupported value: \"bag\": supported values: \"atomic\", \"set\", \"map\"",
        "openAPIV3Schema.properties[spec].properties[lm].x-kubernetes-list-map-keys: Required value: must not be empty if x-kubernetes-list-type is map",
    ];
    for x in expect {
        assert!(e.iter().any(|got| got == x), "missing {x} in {e:#?}");
    }
    assert!(
        e.iter().any(|g| g.starts_with(
            "openAPIV3Schema.properties[spec].properties[p].pattern: Invalid value: \"(\": must be a valid regular expression, but isn't: "
        )),
        "{e:#?}"
    );
}

#[test]
fn structural_completeness_and_int_or_string() {
    let e = check_structural(
        &json!({"type": "object", "properties": {"a": {"type": "string"}},
        "anyOf": [{"properties": {"b": {"maxLength": 1}}}]}),
    );
    assert_eq!(
        e,
        vec![
            "openAPIV3Schema.properties[b]: Required value: because it is defined in openAPIV3Schema.anyOf[0].properties[b]"
        ]
    );
    let e = check_structural(&root(
        json!({"v": {"x-kubernetes-int-or-string": true, "x-kubernetes-preserve-unknown-fields": true}}),
    ));
    assert_eq!(
        e,
        vec![
            "openAPIV3Schema.properties[v].x-kubernetes-preserve-unknown-fields: Invalid value: true: must be false if x-kubernetes-int-or-string is true"
        ]
    );
}

#[test]
fn structural_root_nullable_and_cel_shape() {
    let e = check_structural(&json!({"type": "object", "nullable": true}));
    assert_eq!(
        e,
        vec!["openAPIV3Schema.nullable: Forbidden: nullable cannot be true at the root"]
    );
    let e = check_structural(&root(
        json!({"spec": {"type": "object", "x-kubernetes-validations": [{"rule": " "}]}}),
    ));
    assert_eq!(
        e,
        vec![
            "openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Required value: rule is not specified"
        ]
    );
}

// ---------------------------------------------------------------- ESO's own CRDs

fn eso_crds() -> Vec<Value> {
    crds_in("../../../shared/compat/eso-crds")
}

fn crds_in(rel: &str) -> Vec<Value> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        println!("skipped: {} not found", dir.display());
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in entries.flatten() {
        let text = std::fs::read_to_string(e.path()).unwrap();
        out.push(yaml_serde::from_str::<Value>(&text).unwrap());
    }
    out
}

#[test]
fn eso_crds_are_structural() {
    for crd in eso_crds() {
        for v in crd["spec"]["versions"].as_array().unwrap() {
            let errs = check_structural(&v["schema"]["openAPIV3Schema"]);
            assert!(
                errs.is_empty(),
                "{} {}: {errs:#?}",
                crd["metadata"]["name"],
                v["name"]
            );
        }
    }
}

#[test]
fn esr_committed_crds_are_structural() {
    let mut all = Vec::new();
    for crd in &crds_in("../../crds") {
        for v in crd["spec"]["versions"].as_array().unwrap() {
            for e in check_structural(&v["schema"]["openAPIV3Schema"]) {
                all.push(format!("{} {}: {e}", crd["metadata"]["name"], v["name"]));
            }
        }
    }
    assert!(all.is_empty(), "{all:#?}");
}

#[test]
fn eso_external_secret_roundtrip() {
    let Some(crd) = eso_crds()
        .into_iter()
        .find(|c| c["spec"]["names"]["kind"] == "ExternalSecret")
    else {
        return;
    };
    let s = Schema::from_crd(&crd, "v1").unwrap().unwrap();
    let mut obj = json!({
        "apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret", "metadata": {"name": "e1"},
        "spec": {"secretStoreRef": {"name": "s", "kind": "SecretStore"}, "target": {"name": "t"},
                 "data": [{"secretKey": "k", "remoteRef": {"key": "r"}}]}
    });
    let (unknown, errs) = s.admit(&mut obj);
    assert!(
        unknown.is_empty() && errs.is_empty(),
        "{unknown:?} {errs:?}"
    );
    assert_eq!(obj["spec"]["refreshInterval"], "1h0m0s");
    assert_eq!(obj["spec"]["target"]["creationPolicy"], "Owner");
    assert_eq!(obj["spec"]["target"]["deletionPolicy"], "Retain");
    let mut bad = json!({"spec": {"target": {"creationPolicy": "Foo"}, "refreshInterval": 5, "data": [{"remoteRef": {"key": "r"}}]}});
    let (_, errs) = s.admit(&mut bad);
    let texts: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
    assert!(
        texts.contains(&"spec.data[0].secretKey: Required value".to_string()),
        "{texts:#?}"
    );
    assert!(
        texts.iter().any(|t| t.starts_with(
            "spec.target.creationPolicy: Unsupported value: \"Foo\": supported values: \"Owner\""
        )),
        "{texts:#?}"
    );
    assert!(
        texts.contains(
            &"spec.refreshInterval: Invalid value: \"integer\": spec.refreshInterval in body must be of type string: \"integer\"".to_string()
        ),
        "{texts:#?}"
    );
    assert!(Schema::from_crd(&crd, "v9").unwrap().is_none());
}

#[test]
fn invalid_status_like_apiserver() {
    use crate::{FieldError, invalid_status};
    let errs = vec![
        FieldError::required("spec.secretStoreRef.name", ""),
        FieldError::forbidden("metadata.finalizers", "x"),
        FieldError::forbidden("metadata.finalizers", "x"),
    ];
    let st = invalid_status("external-secrets.io", "ExternalSecret", "e1", &errs);
    assert_eq!(
        st["message"],
        "ExternalSecret.external-secrets.io \"e1\" is invalid: [spec.secretStoreRef.name: Required value, metadata.finalizers: Forbidden: x]"
    );
    assert_eq!(st["code"], 422);
    assert_eq!(st["reason"], "Invalid");
    assert_eq!(st["details"]["causes"].as_array().unwrap().len(), 3);
    assert_eq!(
        st["details"]["causes"][0],
        json!({"reason": "FieldValueRequired", "message": "Required value", "field": "spec.secretStoreRef.name"})
    );
    let one = invalid_status(
        "",
        "Secret",
        "imm",
        &[FieldError::forbidden(
            "data",
            "field is immutable when `immutable` is set",
        )],
    );
    assert_eq!(
        one["message"],
        "Secret \"imm\" is invalid: data: Forbidden: field is immutable when `immutable` is set"
    );
    assert!(one["details"].get("group").is_none());
}

#[test]
fn schema_is_shareable_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Schema>();
}

#[test]
fn defaults_inside_defaulted_nulls() {
    let s = schema(json!({"type": "object", "properties": {
        "l": {"type": "array", "items": {"type": "object", "default": {}, "properties": {"a": {"type": "string", "default": "x"}}}},
        "m": {"type": "object", "additionalProperties": {"type": "object", "default": {}, "properties": {"b": {"type": "integer", "default": 1}}}}
    }}));
    let mut obj = json!({"spec": {"l": [null, {"a": "set"}], "m": {"k": null}}});
    s.apply_defaults(&mut obj);
    assert_eq!(
        obj["spec"],
        json!({"l": [{"a": "x"}, {"a": "set"}], "m": {"k": {"b": 1}}})
    );
}
