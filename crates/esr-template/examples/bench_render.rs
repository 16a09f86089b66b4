//! Benchmark: renders a typical 10-key ExternalSecret template (fromJson, printf,
//! b64dec) the way the controller does, and prints µs per render.
//! Run with `make bench-template` (release build).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::collections::BTreeMap;
use std::time::Instant;

use esr_api::v1::ExternalSecretTemplate;
use esr_template::{
    ExecOptions, RenderInput, RenderedSecret, Template, TemplateSources, eso_funcs, render_secret,
};

const TEMPLATE: &str = r#"
type: Opaque
data:
  username: '{{ (.creds | fromJson).username }}'
  password: '{{ (.creds | fromJson).password }}'
  host: '{{ .host }}'
  port: '{{ .port }}'
  url: '{{ $c := .creds | fromJson }}{{ printf "postgres://%s:%s@%s:%s/%s?sslmode=%s" $c.username ($c.password | urlquery) .host .port .db "require" }}'
  tls.crt: '{{ .cert_b64 | b64dec }}'
  tls.key: '{{ .key_b64 | b64dec }}'
  .dockerconfigjson: '{"auths":{"{{ .registry }}":{"auth":"{{ printf "%s:%s" .ruser .rpass | b64enc }}"}}}'
  config.yaml: |
    {{- range $k, $v := (.settings | fromJson) }}
    {{ $k }}: {{ $v | quote }}
    {{- end }}
  token: '{{ .token_b64 | b64dec | trim }}'
"#;

fn main() {
    let tpl: ExternalSecretTemplate = yaml_serde::from_str(TEMPLATE).unwrap();
    let mut data = BTreeMap::new();
    let mut put = |k: &str, v: &str| {
        data.insert(k.to_string(), v.as_bytes().to_vec());
    };
    put(
        "creds",
        r#"{"username":"app_user","password":"p@ss w:rd/#1","extra":[1,2,3]}"#,
    );
    put("host", "db.internal");
    put("port", "5432");
    put("db", "orders");
    put(
        "cert_b64",
        "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJLekNCMHFBREFnRUNBaEVBCi0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K",
    );
    put(
        "key_b64",
        "LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0tCk1DNENBUUF3QlFZREsyVndCQ0lFSUp1aAotLS0tLUVORCBQUklWQVRFIEtFWS0tLS0tCg==",
    );
    put("registry", "registry.example.com");
    put("ruser", "robot$ci");
    put("rpass", "tok3n");
    put(
        "settings",
        r#"{"feature.a":"on","pool.size":10,"ratio":0.5,"name":"orders"}"#,
    );
    put("token_b64", "IHNlY3JldC10b2tlbi12YWx1ZSAK");

    let sources = TemplateSources::default();
    let base = RenderedSecret::default();
    let empty = BTreeMap::new();
    let input = RenderInput {
        template: Some(&tpl),
        data: &data,
        sources: &sources,
        base: &base,
        es_labels: &empty,
        es_annotations: &empty,
    };
    let first = render_secret(&input).unwrap();
    assert_eq!(first.data.len(), 10);
    assert_eq!(
        first.data["url"],
        b"postgres://app_user:p%40ss+w%3Ard%2F%231@db.internal:5432/orders?sslmode=require"
    );

    // warm-up
    for _ in 0..200 {
        render_secret(&input).unwrap();
    }
    let iterations: u32 = std::env::var("BENCH_ITERATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5000);
    let start = Instant::now();
    for _ in 0..iterations {
        std::hint::black_box(render_secret(std::hint::black_box(&input)).unwrap());
    }
    let per_render = start.elapsed().as_secs_f64() * 1e6 / f64::from(iterations);

    // execute-only: templates parsed once
    let funcs = eso_funcs();
    let parsed: Vec<Template> = tpl
        .data
        .as_ref()
        .unwrap()
        .iter()
        .map(|(k, v)| Template::parse(k, v, funcs).unwrap())
        .collect();
    let opts = ExecOptions::default();
    let start = Instant::now();
    for _ in 0..iterations {
        for t in &parsed {
            std::hint::black_box(t.execute_data(funcs, &data, &opts).unwrap());
        }
    }
    let per_exec = start.elapsed().as_secs_f64() * 1e6 / f64::from(iterations);

    // parse + execute every time (no cache), as ESO's Go code does
    let texts: Vec<(String, String)> = tpl
        .data
        .as_ref()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let start = Instant::now();
    for _ in 0..iterations {
        for (k, v) in &texts {
            let t = Template::parse(k, v, funcs).unwrap();
            std::hint::black_box(t.execute_data(funcs, &data, &opts).unwrap());
        }
    }
    let per_parse_exec = start.elapsed().as_secs_f64() * 1e6 / f64::from(iterations);

    println!("template bench: 10-key template (fromJson, printf, b64dec), {iterations} iterations");
    println!(
        "render_secret (whole Secret; parsed templates cached): {per_render:.1} µs per render"
    );
    println!(
        "parse + execute of the 10 keys, no cache:              {per_parse_exec:.1} µs per render"
    );
    println!("execute only of the 10 keys (pre-parsed):              {per_exec:.1} µs per render");
}
