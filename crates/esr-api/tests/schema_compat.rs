//! Acceptance: for every version ESO v2.9.0 serves, every field path of ESO's CRD schema exists in
//! esr's generated CRD with the same type, enum and default (plus the same required lists,
//! patterns, length/size limits, formats, CEL validations, list/map types and nullability).
//! Providers and generators esr does not implement are excluded below their key: there esr keeps
//! an opaque object that preserves unknown fields. CRD-level metadata (names, scope, printer
//! columns, subresources, selectable fields, served versions) must match too.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use esr_api::v1::IMPLEMENTED_PROVIDER_KEYS;
use serde_json::Value;
use std::collections::BTreeSet;

/// ClusterGenerator `spec.generator` keys esr types.
const IMPLEMENTED_GENERATOR_SPECS: &[&str] = &[
    "fakeSpec",
    "passwordSpec",
    "vaultDynamicSecretSpec",
    "ecrAuthorizationTokenSpec",
    "stsSessionTokenSpec",
    "webhookSpec",
];

/// Schema keywords compared besides type/enum/default.
const COMPARED_LIMITS: [&str; 15] = [
    "x-kubernetes-validations",
    "x-kubernetes-map-type",
    "x-kubernetes-list-type",
    "nullable",
    "maxItems",
    "minimum",
    "pattern",
    "minLength",
    "maxLength",
    "minProperties",
    "maxProperties",
    "minItems",
    "format",
    "x-kubernetes-int-or-string",
    "x-kubernetes-preserve-unknown-fields",
];

#[derive(Default)]
struct Report {
    total: usize,
    matched: usize,
    excluded_subpaths: usize,
    problems: Vec<String>,
}

fn enum_set(v: Option<&Value>) -> Option<BTreeSet<String>> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().map(|x| x.to_string()).collect())
}

fn required_set(v: &Value) -> BTreeSet<String> {
    v.get("required")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn count_nodes(v: &Value) -> usize {
    let mut n = 0;
    if let Some(props) = v.get("properties").and_then(Value::as_object) {
        for child in props.values() {
            n += 1 + count_nodes(child);
        }
    }
    if let Some(items) = v.get("items") {
        n += 1 + count_nodes(items);
    }
    if let Some(ap) = v.get("additionalProperties").filter(|a| a.is_object()) {
        n += 1 + count_nodes(ap);
    }
    n
}

fn is_opaque_exclusion(crd: &str, path: &str) -> bool {
    let provider = path
        .strip_prefix(".spec.provider.")
        .filter(|rest| !rest.contains('.'));
    if (crd.starts_with("secretstores.") || crd.starts_with("clustersecretstores."))
        && let Some(key) = provider
    {
        return !IMPLEMENTED_PROVIDER_KEYS.contains(&key);
    }
    if crd.starts_with("clustergenerators.")
        && let Some(key) = path
            .strip_prefix(".spec.generator.")
            .filter(|r| !r.contains('.'))
    {
        return !IMPLEMENTED_GENERATOR_SPECS.contains(&key);
    }
    false
}

fn compare(crd: &str, path: &str, eso: &Value, ours: Option<&Value>, report: &mut Report) {
    report.total += 1;
    let Some(ours) = ours else {
        report
            .problems
            .push(format!("{crd} {path}: missing in esr"));
        // Children are counted as missing too.
        let missing = count_nodes(eso);
        report.total += missing;
        return;
    };
    let mut ok = true;
    if eso.get("type") != ours.get("type") {
        ok = false;
        report.problems.push(format!(
            "{crd} {path}: type {:?} vs esr {:?}",
            eso.get("type"),
            ours.get("type")
        ));
    }
    if enum_set(eso.get("enum")) != enum_set(ours.get("enum")) {
        ok = false;
        report.problems.push(format!(
            "{crd} {path}: enum {:?} vs esr {:?}",
            eso.get("enum"),
            ours.get("enum")
        ));
    }
    if eso.get("default") != ours.get("default") {
        ok = false;
        report.problems.push(format!(
            "{crd} {path}: default {:?} vs esr {:?}",
            eso.get("default"),
            ours.get("default")
        ));
    }
    if is_opaque_exclusion(crd, path) {
        if ours.get("x-kubernetes-preserve-unknown-fields") != Some(&Value::Bool(true)) {
            ok = false;
            report.problems.push(format!(
                "{crd} {path}: opaque object must preserve unknown fields"
            ));
        }
        report.excluded_subpaths += count_nodes(eso);
        if ok {
            report.matched += 1;
        }
        return;
    }
    if required_set(eso) != required_set(ours) {
        ok = false;
        report.problems.push(format!(
            "{crd} {path}: required {:?} vs esr {:?}",
            required_set(eso),
            required_set(ours)
        ));
    }
    for key in COMPARED_LIMITS {
        // `format: int32/int64` on integers is informational; other formats must match.
        if key == "format" && eso.get("type") == Some(&Value::String("integer".into())) {
            continue;
        }
        if eso.get(key) != ours.get(key) {
            ok = false;
            report.problems.push(format!(
                "{crd} {path}: {key} {:?} vs esr {:?}",
                eso.get(key),
                ours.get(key)
            ));
        }
    }
    if ok {
        report.matched += 1;
    }
    if let Some(props) = eso.get("properties").and_then(Value::as_object) {
        for (name, child) in props {
            let theirs = ours.get("properties").and_then(|p| p.get(name));
            compare(crd, &format!("{path}.{name}"), child, theirs, report);
        }
    }
    if let Some(items) = eso.get("items") {
        compare(crd, &format!("{path}[]"), items, ours.get("items"), report);
    }
    if let Some(ap) = eso.get("additionalProperties").filter(|a| a.is_object()) {
        compare(
            crd,
            &format!("{path}{{}}"),
            ap,
            ours.get("additionalProperties").filter(|a| a.is_object()),
            report,
        );
    }
}

fn versions(crd: &Value) -> &Vec<Value> {
    crd["spec"]["versions"].as_array().unwrap()
}

#[test]
fn schema_matches_eso_for_every_served_version() {
    let dir = common::shared_dir().join("compat/eso-crds");
    let ours = common::our_crds();
    let mut report = Report::default();
    let mut eso_names = BTreeSet::new();
    for file in common::sorted_files(&dir) {
        for (_, eso) in common::yaml_docs(&file) {
            let name = eso["metadata"]["name"].as_str().unwrap().to_owned();
            eso_names.insert(name.clone());
            let Some(mine) = ours.iter().find(|c| c["metadata"]["name"] == name.as_str()) else {
                report.problems.push(format!("{name}: CRD missing in esr"));
                continue;
            };
            // CRD-level metadata.
            for key in ["group", "scope", "names"] {
                if eso["spec"][key] != mine["spec"][key] {
                    report.problems.push(format!(
                        "{name}: spec.{key} {} vs esr {}",
                        eso["spec"][key], mine["spec"][key]
                    ));
                }
            }
            if eso["metadata"]["labels"] != mine["metadata"]["labels"] {
                report.problems.push(format!("{name}: labels differ"));
            }
            for eso_version in versions(&eso) {
                let vname = eso_version["name"].as_str().unwrap();
                let Some(my_version) = versions(mine).iter().find(|v| v["name"] == vname) else {
                    report
                        .problems
                        .push(format!("{name} {vname}: version missing in esr"));
                    continue;
                };
                for key in [
                    "served",
                    "storage",
                    "deprecated",
                    "additionalPrinterColumns",
                    "subresources",
                ] {
                    if eso_version.get(key) != my_version.get(key) {
                        report.problems.push(format!(
                            "{name} {vname}: {key} {:?} vs esr {:?}",
                            eso_version.get(key),
                            my_version.get(key)
                        ));
                    }
                }
                if eso_version["served"] != Value::Bool(true) {
                    continue;
                }
                if eso_version.get("selectableFields") != my_version.get("selectableFields") {
                    report
                        .problems
                        .push(format!("{name} {vname}: selectableFields differ"));
                }
                compare(
                    &format!("{name} {vname}"),
                    "",
                    &eso_version["schema"]["openAPIV3Schema"],
                    my_version
                        .get("schema")
                        .and_then(|s| s.get("openAPIV3Schema")),
                    &mut report,
                );
            }
        }
    }
    let our_names: BTreeSet<String> = ours
        .iter()
        .map(|c| c["metadata"]["name"].as_str().unwrap().to_owned())
        .collect();
    let missing: Vec<&String> = eso_names.difference(&our_names).collect();
    assert!(
        missing.is_empty(),
        "esr must serve every CRD in eso-crds/: missing {missing:?}"
    );
    let foreign: Vec<&String> = our_names
        .difference(&eso_names)
        .filter(|n| !common::is_eso_generator_crd(n))
        .collect();
    assert!(
        foreign.is_empty(),
        "esr serves CRDs that are not ESO's: {foreign:?}"
    );

    let pct = if report.total == 0 {
        0.0
    } else {
        100.0 * report.matched as f64 / report.total as f64
    };
    println!(
        "schema coverage: {}/{} field paths ({pct:.1}%); {} paths below unimplemented providers/generators excluded (kept opaque)",
        report.matched, report.total, report.excluded_subpaths
    );
    for p in &report.problems {
        println!("MISMATCH {p}");
    }
    assert!(
        report.total > 500,
        "suspiciously few field paths compared: {}",
        report.total
    );
    assert!(
        report.problems.is_empty() && report.matched == report.total,
        "{} schema mismatches (see MISMATCH lines above)",
        report.problems.len()
    );
}
