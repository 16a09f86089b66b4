//! Runs every case of `shared/compat/template-vectors.json` (outputs of ESO's Go
//! engine) through the Rust engine: same output, or an error where Go errors.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::PathBuf;

use esr_template::{ExecOptions, FuncMap, execute_eso};

struct Case {
    name: String,
    template: String,
    data: BTreeMap<String, Vec<u8>>,
    output: Option<String>,
}

fn load() -> Vec<Case> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/compat/template-vectors.json");
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| Case {
            name: c["name"].as_str().unwrap().to_string(),
            template: c["template"].as_str().unwrap().to_string(),
            data: c["data"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap().as_bytes().to_vec()))
                .collect(),
            output: if c.get("error").and_then(|e| e.as_bool()) == Some(true) {
                None
            } else {
                Some(c["output"].as_str().unwrap().to_string())
            },
        })
        .collect()
}

/// Categories that exercise the text/template language itself (plus a few sprig
/// functions used as helpers).
const CORE: &[&str] = &[
    "core", "printf", "print", "escape", "call", "comment", "trim", "lit", "tmpl", "nil", "index",
    "slice", "len", "err",
];

fn run(filter: impl Fn(&str) -> bool, label: &str) -> (usize, Vec<String>) {
    let funcs = FuncMap::eso();
    let opts = ExecOptions::default();
    let mut passed = 0;
    let mut failed = Vec::new();
    for c in load()
        .into_iter()
        .filter(|c| filter(c.name.split('/').next().unwrap_or("")))
    {
        let got = execute_eso(&c.template, &c.data, &funcs, &opts);
        let ok = match (&got, &c.output) {
            (Ok(out), Some(want)) => out == want.as_bytes(),
            (Err(_), None) => true,
            _ => false,
        };
        if ok {
            passed += 1;
        } else {
            let got = match &got {
                Ok(o) => format!("output {:?}", String::from_utf8_lossy(o)),
                Err(e) => format!("error {e}"),
            };
            let want = match &c.output {
                Some(o) => format!("output {o:?}"),
                None => "an error".to_string(),
            };
            failed.push(format!(
                "{}: template {:?}: got {got}, want {want}",
                c.name, c.template
            ));
        }
    }
    for f in &failed {
        eprintln!("FAILED {f}");
    }
    println!("{label}: {passed} passed, {} failed", failed.len());
    (passed, failed)
}

#[test]
fn language_vectors() {
    let (_, failed) = run(|cat| CORE.contains(&cat), "language");
    assert!(
        failed.is_empty(),
        "{} language vectors failed",
        failed.len()
    );
}

#[test]
fn all_vectors() {
    let (passed, failed) = run(|_| true, "vectors");
    assert!(passed > 0);
    assert!(
        failed.is_empty(),
        "{} template vectors failed",
        failed.len()
    );
}
