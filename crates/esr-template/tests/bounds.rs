//! The bounds of one render: the memory budget counts every value the render
//! builds (across all its templates), the deadline and the cancel flag stop it
//! at the next step, and each stop is a typed, value-free error.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use esr_template::{
    ExecOptions, RenderInput, RenderLimits, RenderedSecret, Stop, Template, TemplateError,
    TemplateSources, eso_funcs, render_secret, render_secret_with,
};

const SECRET: &str = "s3cr3t-value-xyz";

fn one(key: &str, text: &str) -> esr_api::v1::ExternalSecretTemplate {
    let mut data = BTreeMap::new();
    data.insert(key.to_string(), text.to_string());
    esr_api::v1::ExternalSecretTemplate {
        data: Some(data),
        ..Default::default()
    }
}

fn render(
    t: &esr_api::v1::ExternalSecretTemplate,
    limits: Option<&RenderLimits>,
) -> Result<RenderedSecret, TemplateError> {
    let data = BTreeMap::from([("pw".to_string(), SECRET.as_bytes().to_vec())]);
    let empty = BTreeMap::new();
    let base = RenderedSecret::default();
    let sources = TemplateSources::default();
    let input = RenderInput {
        template: Some(t),
        data: &data,
        sources: &sources,
        base: &base,
        es_labels: &empty,
        es_annotations: &empty,
    };
    match limits {
        Some(l) => render_secret_with(&input, l),
        None => render_secret(&input),
    }
}

fn assert_value_free(e: &TemplateError) {
    let text = e.to_string();
    assert!(!text.contains(SECRET), "{text}");
    assert!(!text.contains("aaaa"), "{text}");
}

/// Each `until 1000000` is small enough on its own; one render building them
/// in a loop is not (default limits, as the controller renders).
#[test]
fn cpu_poison_loop_of_large_values_exhausts_the_budget() {
    let t = one(
        "k",
        "{{ range until 1000000 }}{{ $x := until 1000000 }}{{ end }}",
    );
    let e = render(&t, None).unwrap_err();
    assert_eq!(
        e,
        TemplateError::Budget(esr_template::limits::MAX_RENDER_BYTES)
    );
    assert_value_free(&e);
}

/// Doubling a list of 16 MB strings: each concat is checked before it copies.
#[test]
fn memory_poison_concat_doubling_exhausts_the_budget() {
    let t = one(
        "k",
        r#"{{ $l := list (repeat 16000000 "a") }}{{ range until 20 }}{{ $l = concat $l $l }}{{ end }}"#,
    );
    let e = render(&t, None).unwrap_err();
    assert!(matches!(e, TemplateError::Budget(_)), "{e:?}");
    assert_value_free(&e);
}

/// The budget is one per render: two templates of the same Secret share it.
#[test]
fn budget_is_shared_by_every_template_of_the_render() {
    let limits = RenderLimits {
        max_bytes: 3 * 1024 * 1024,
        ..Default::default()
    };
    let mut t = one("a", r#"{{ $x := repeat 2000000 "a" }}ok"#);
    assert!(render(&t, Some(&limits)).is_ok(), "one template fits");
    t.data
        .get_or_insert_with(BTreeMap::new)
        .insert("b".into(), r#"{{ $x := repeat 2000000 "a" }}ok"#.into());
    let e = render(&t, Some(&limits)).unwrap_err();
    assert_eq!(e, TemplateError::Budget(3 * 1024 * 1024));
}

/// Growing one map with `set` costs what is inserted, not the map's whole size
/// at every call.
#[test]
fn growing_a_dict_costs_what_is_inserted() {
    let limits = RenderLimits {
        max_bytes: 4 * 1024 * 1024,
        ..Default::default()
    };
    let t = one(
        "k",
        r#"{{ $d := dict }}{{ range $i := until 5000 }}{{ $_ := set $d (toString $i) "v" }}{{ end }}{{ len $d }}"#,
    );
    let out = render(&t, Some(&limits)).unwrap();
    assert_eq!(out.data["k"], b"5000");
    // the same loop with large values does not fit
    let t = one(
        "k",
        r#"{{ $d := dict }}{{ range $i := until 5000 }}{{ $_ := set $d (toString $i) (repeat 1000 "v") }}{{ end }}"#,
    );
    assert!(matches!(
        render(&t, Some(&limits)),
        Err(TemplateError::Budget(_))
    ));
}

/// The output counts too.
#[test]
fn output_is_charged() {
    let limits = RenderLimits {
        max_bytes: 1024 * 1024,
        ..Default::default()
    };
    let t = one("k", "{{ range until 100000 }}0123456789abcdef{{ end }}");
    assert!(matches!(
        render(&t, Some(&limits)),
        Err(TemplateError::Budget(_))
    ));
}

#[test]
fn a_passed_deadline_stops_the_render() {
    let limits = RenderLimits {
        deadline: Some(Instant::now()),
        ..Default::default()
    };
    let t = one("k", r#"{{ range until 1000 }}{{ bcrypt "x" }}{{ end }}"#);
    let e = render(&t, Some(&limits)).unwrap_err();
    assert_eq!(e, TemplateError::Deadline);
    assert_value_free(&e);
    assert_eq!(
        e.to_string(),
        "could not execute template: the render exceeded its deadline"
    );
}

/// Another thread stops a render that would otherwise run for hours (a loop of
/// bcrypt hashes within the step limit).
#[test]
fn cancel_flag_stops_a_running_render_from_another_thread() {
    let cancel = Arc::new(AtomicBool::new(false));
    let started = Arc::new(std::sync::Barrier::new(2));
    let (c, s) = (cancel.clone(), started.clone());
    let worker = std::thread::spawn(move || {
        let limits = RenderLimits {
            cancel: Some(c),
            ..Default::default()
        };
        s.wait();
        let t = one(
            "k",
            r#"{{ range until 300000 }}{{ $h := sha256sum (repeat 1000000 "a") }}{{ $x := bcrypt "x" }}{{ end }}"#,
        );
        render(&t, Some(&limits))
    });
    started.wait();
    cancel.store(true, Ordering::Relaxed);
    let e = worker.join().unwrap().unwrap_err();
    assert_eq!(e, TemplateError::Cancelled);
}

/// The executor API reports the stop as a typed field, and a stop inside a
/// function (pre-flight check of `repeat`) is classified the same way.
#[test]
fn exec_error_carries_the_stop() {
    let funcs = eso_funcs();
    let opts = ExecOptions {
        bounds: RenderLimits {
            max_bytes: 1024 * 1024,
            ..Default::default()
        },
        ..ExecOptions::default()
    };
    let t = Template::parse("k", r#"{{ repeat 2000000 "a" }}"#, funcs).unwrap();
    let e = t.execute_data(funcs, &BTreeMap::new(), &opts).unwrap_err();
    assert_eq!(e.stop, Some(Stop::Budget));
    assert!(e.limit);
    let t = Template::parse("k", r#"{{ repeat 2000 "a" }}"#, funcs).unwrap();
    assert_eq!(
        t.execute_data(funcs, &BTreeMap::new(), &opts)
            .unwrap()
            .len(),
        2000
    );
    // each execution outside a render gets its own budget
    assert!(t.execute_data(funcs, &BTreeMap::new(), &opts).is_ok());
}

/// Ordinary templates fit the default bounds.
#[test]
fn ordinary_templates_are_unaffected() {
    let t = one(
        "dsn",
        r#"{{ $parts := list "postgres://u:" .pw "@db" }}{{ join "" $parts | b64enc | b64dec }}"#,
    );
    let out = render(&t, None).unwrap();
    assert_eq!(
        out.data["dsn"],
        format!("postgres://u:{SECRET}@db").into_bytes()
    );
}
