//! Fuzzing the parser and executor (proptest): arbitrary and mutated template
//! text must never panic, hang or produce unbounded output; the executor stops
//! with an error at its step, depth, output and memory-budget limits.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;

use esr_template::limits::Limits;
use esr_template::{ExecOptions, FuncMap, Template, eso_funcs};
use proptest::prelude::*;

const TOKENS: &[&str] = &[
    "{{",
    "}}",
    "{{- ",
    " -}}",
    " ",
    "\n",
    ".",
    ".a",
    ".b.c",
    "$",
    "$x",
    "$y",
    ":=",
    "=",
    "|",
    "(",
    ")",
    ",",
    "\"s\"",
    "`r`",
    "'c'",
    "1",
    "-2",
    "3.5",
    "0x1f",
    "1e6",
    "2i",
    "nil",
    "true",
    "if",
    "else",
    "end",
    "range",
    "with",
    "break",
    "continue",
    "define \"t\"",
    "template \"t\"",
    "block \"b\" .",
    "/* c */",
    "and",
    "or",
    "not",
    "eq",
    "lt",
    "len",
    "index",
    "slice",
    "print",
    "printf \"%v %d\"",
    "println",
    "html",
    "js",
    "urlquery",
    "call",
    "list",
    "dict",
    "until 5",
    "add",
    "upper",
    "toJson",
    "fromJson",
    "b64enc",
    "b64dec",
    "default",
    "join \",\"",
    "splitList \",\"",
    "repeat 3",
    "repeat 100000",
    "until 100000",
    "concat",
    "set",
    "sha256sum",
    "text",
    "x",
    "}",
    "{",
];

fn limits() -> ExecOptions {
    ExecOptions {
        missingkey_error: true,
        redact: false,
        limits: Limits {
            max_steps: 20_000,
            max_output_bytes: 256 * 1024,
            max_template_depth: 50,
        },
        bounds: esr_template::RenderLimits {
            max_bytes: 64 * 1024 * 1024,
            ..Default::default()
        },
    }
}

fn data() -> BTreeMap<String, Vec<u8>> {
    BTreeMap::from([
        ("a".to_string(), b"1".to_vec()),
        ("b".to_string(), b"{\"c\":[1,2]}".to_vec()),
        ("bin".to_string(), vec![0xff, 0xfe, 0x00]),
    ])
}

fn run(text: &str, funcs: &FuncMap) {
    let opts = limits();
    if let Ok(t) = Template::parse("key", text, funcs) {
        match t.execute_data(funcs, &data(), &opts) {
            Ok(out) => assert!(
                out.len() <= opts.limits.max_output_bytes,
                "output over the limit"
            ),
            Err(e) => assert!(!e.message.is_empty()),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn token_soup(tokens in proptest::collection::vec(proptest::sample::select(TOKENS), 0..40)) {
        run(&tokens.concat(), eso_funcs());
    }

    #[test]
    fn arbitrary_text(text in "\\PC{0,80}") {
        run(&text, eso_funcs());
        run(&format!("{{{{{text}}}}}"), eso_funcs());
    }

    #[test]
    fn mutated_templates(base in proptest::sample::select(&[
        "{{ range $i, $v := list 1 2 3 }}{{ if eq $i 1 }}{{ continue }}{{ end }}{{ $v }}{{ end }}",
        "{{ define \"t\" }}{{ . }}{{ end }}{{ template \"t\" .a }}",
        "{{ with $x := .a }}{{ $x | printf \"%05s\" }}{{ else }}none{{ end }}",
        "{{ (.b | fromJson).c | toJson }}",
        "{{ index . \"a\" | b64enc | b64dec }}",
    ][..]), pos in 0usize..120, ins in proptest::sample::select(TOKENS), del in 0usize..4) {
        let mut s = base.to_string();
        let p = pos.min(s.len());
        let p = (0..=p).rev().find(|i| s.is_char_boundary(*i)).unwrap_or(0);
        s.insert_str(p, ins);
        let end = (p + ins.len() + del).min(s.len());
        let end = (end..=s.len()).find(|i| s.is_char_boundary(*i)).unwrap_or(s.len());
        s.replace_range(p + ins.len()..end, "");
        run(&s, eso_funcs());
    }
}

/// Syntactically valid templates from a small grammar, calling any function of
/// ESO's map with random operands.
fn valid_template() -> impl Strategy<Value = String> {
    let names: Vec<String> = eso_funcs().names();
    let func = proptest::sample::select(names);
    let leaf = proptest::sample::select(vec![
        ".a",
        ".b",
        ".bin",
        "$",
        ".",
        "$x",
        "0",
        "1",
        "-2",
        "3.5",
        "1e6",
        "\"s\"",
        "\"a,b\"",
        "`{\"k\":[1]}`",
        "nil",
        "true",
        "'c'",
        "2i",
    ])
    .prop_map(str::to_string);
    let expr = leaf.prop_recursive(3, 24, 4, move |inner| {
        (func.clone(), proptest::collection::vec(inner, 0..4))
            .prop_map(|(f, args)| format!("({} {})", f, args.join(" ")))
    });
    let pipeline =
        (expr.clone(), proptest::collection::vec(expr.clone(), 0..2)).prop_map(|(head, rest)| {
            let mut p = head;
            for r in rest {
                // a parenthesised call can take the pipeline value as last argument
                if let Some(inner) = r.strip_prefix('(').and_then(|x| x.strip_suffix(')')) {
                    p = format!("{p} | {inner}");
                }
            }
            p
        });
    let node = pipeline
        .clone()
        .prop_map(|p| format!("{{{{ {p} }}}}"))
        .prop_recursive(3, 16, 3, move |body| {
            let p = pipeline.clone();
            prop_oneof![
                (p.clone(), body.clone(), body.clone()).prop_map(|(c, a, b)| format!(
                    "{{{{ if {c} }}}}{a}{{{{ else }}}}{b}{{{{ end }}}}"
                )),
                (p.clone(), body.clone())
                    .prop_map(|(c, a)| format!("{{{{ range $i, $v := {c} }}}}{a}{{{{ end }}}}")),
                (p.clone(), body.clone())
                    .prop_map(|(c, a)| format!("{{{{ with {c} }}}}{a}{{{{ end }}}}")),
                (p, body.clone()).prop_map(|(c, a)| format!("{{{{ $x = {c} }}}}{a}")),
                proptest::collection::vec(body, 1..3).prop_map(|v| v.concat()),
            ]
        });
    node.prop_map(|n| format!("{{{{ $x := 1 }}}}{n}"))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn grammar_templates(text in valid_template()) {
        run(&text, eso_funcs());
    }
}

fn exec_err(text: &str) -> String {
    let funcs = eso_funcs();
    let t = Template::parse("key", text, funcs).unwrap();
    t.execute_data(funcs, &data(), &limits())
        .unwrap_err()
        .message
}

#[test]
fn infinite_template_recursion_stops() {
    let e = exec_err("{{ define \"a\" }}x{{ template \"a\" }}{{ end }}{{ template \"a\" }}");
    assert!(e.contains("exceeded maximum template depth (50)"), "{e}");
}

#[test]
fn step_limit_stops_long_loops() {
    let e = exec_err("{{ range until 100000 }}{{ range until 100000 }}{{ end }}{{ end }}");
    assert!(e.contains("steps (limit)"), "{e}");
}

#[test]
fn output_limit_stops_large_output() {
    let e = exec_err("{{ range until 10000 }}{{ printf \"%1000d\" 1 }}{{ end }}");
    assert!(e.contains("output larger than"), "{e}");
}

#[test]
fn deeply_nested_values_are_refused() {
    let funcs = eso_funcs();
    let run = |n: usize| {
        let text = format!(
            "{{{{ $x := list }}}}{{{{ range until {n} }}}}{{{{ $x = list $x }}}}{{{{ end }}}}done"
        );
        let t = Template::parse("key", &text, funcs).unwrap();
        t.execute_data(funcs, &data(), &ExecOptions::default())
    };
    assert_eq!(run(400).unwrap(), b"done");
    let e = run(10_000).unwrap_err();
    assert!(
        e.message
            .contains("value nested deeper than 500 levels (limit)"),
        "{e}"
    );
    assert!(e.limit);
}

#[test]
fn cyclic_maps_are_refused() {
    let e = exec_err("{{ $d := dict }}{{ $_ := set $d \"k\" $d }}{{ $d | toJson }}");
    assert!(e.contains("nested deeper"), "{e}");
}

#[test]
fn shared_structure_prints_bounded() {
    // a DAG whose tree form is 2^40 leaves: printing stops at the output limit
    let e =
        exec_err("{{ $x := list 1 }}{{ range until 40 }}{{ $x = list $x $x }}{{ end }}{{ $x }}");
    assert!(
        e.contains("output larger than") || e.contains("steps"),
        "{e}"
    );
}

#[test]
fn deep_parenthesis_nesting_is_an_error_not_a_crash() {
    let text = format!("{{{{ {}1{} }}}}", "(".repeat(5000), ")".repeat(5000));
    let err = Template::parse("key", &text, eso_funcs()).unwrap_err();
    assert!(
        err.to_string().contains("max expression depth exceeded"),
        "{err}"
    );
    let text = format!(
        "{}x{}",
        "{{ if true }}".repeat(5000),
        "{{ end }}".repeat(5000)
    );
    assert!(Template::parse("key", &text, eso_funcs()).is_err());
}

#[test]
fn grammar_generator_reaches_the_executor() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strat = valid_template();
    let funcs = eso_funcs();
    let (mut parsed, mut executed_ok, total) = (0, 0, 300);
    for _ in 0..total {
        let text = strat.new_tree(&mut runner).unwrap().current();
        if let Ok(t) = Template::parse("key", &text, funcs) {
            parsed += 1;
            if t.execute_data(funcs, &data(), &limits()).is_ok() {
                executed_ok += 1;
            }
        }
    }
    println!("grammar templates: {parsed}/{total} parse, {executed_ok} execute without error");
    assert!(
        parsed * 10 >= total * 9,
        "only {parsed}/{total} generated templates parse"
    );
    assert!(executed_ok > 0);
}
