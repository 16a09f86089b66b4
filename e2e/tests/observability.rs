//! Observability against the real `esr` binary: after a few ExternalSecrets sync (one through the
//! kubernetes provider, one through the fake provider, one failing), `/metrics` serves every
//! controller-runtime, workqueue, client and process family with its type and real values; every
//! metric the chart's Grafana dashboard and PrometheusRule name is in that scrape; and the JSON
//! log lines carry zap's field names and a per-reconcile `reconcileID`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod es_support;

use std::collections::{BTreeMap, BTreeSet};

use es_support::*;
use esr_e2e::{CLUSTER_WIDE, Env, wait_for};
use serde_json::{Value, json};

async fn http_get(addr: &str, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = addr.to_string();
    let path = path.to_string();
    wait_for(&format!("GET {addr}{path}"), TIMEOUT, || {
        let addr = addr.clone();
        let path = path.clone();
        async move {
            let mut s = tokio::net::TcpStream::connect(&addr).await.ok()?;
            s.write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes())
                .await
                .ok()?;
            let mut buf = String::new();
            s.read_to_string(&mut buf).await.ok()?;
            let (head, body) = buf.split_once("\r\n\r\n")?;
            (head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"))
                .then(|| body.to_string())
        }
    })
    .await
    .unwrap()
}

/// A parsed OpenMetrics scrape: family → type, and sample name with labels → value.
struct Scrape {
    text: String,
    types: BTreeMap<String, String>,
    samples: Vec<(String, BTreeMap<String, String>, f64)>,
}

fn parse_labels(s: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut rest = s;
    while let Some((k, v)) = rest.split_once("=\"") {
        let end = v.find('"').unwrap();
        out.insert(k.trim_start_matches(',').to_string(), v[..end].to_string());
        rest = &v[end + 1..];
    }
    out
}

impl Scrape {
    fn parse(text: String) -> Self {
        let mut types = BTreeMap::new();
        let mut samples = Vec::new();
        for line in text.lines() {
            if let Some(t) = line.strip_prefix("# TYPE ") {
                let (name, ty) = t.split_once(' ').unwrap();
                types.insert(name.to_string(), ty.to_string());
            } else if !line.starts_with('#') && !line.is_empty() {
                let (series, value) = line.rsplit_once(' ').unwrap();
                let (name, labels) = match series.split_once('{') {
                    Some((n, l)) => (n, parse_labels(l.trim_end_matches('}'))),
                    None => (series, BTreeMap::new()),
                };
                samples.push((name.to_string(), labels, value.parse().unwrap()));
            }
        }
        Scrape {
            text,
            types,
            samples,
        }
    }

    /// The sum of the samples named `name` whose labels include `with`.
    fn sum(&self, name: &str, with: &[(&str, &str)]) -> f64 {
        self.samples
            .iter()
            .filter(|(n, l, _)| {
                n == name
                    && with
                        .iter()
                        .all(|(k, v)| l.get(*k).map(String::as_str) == Some(v))
            })
            .map(|(_, _, v)| v)
            .sum()
    }

    fn has_sample(&self, name: &str) -> bool {
        self.samples.iter().any(|(n, _, _)| n == name)
    }
}

/// Starts esr, syncs three ExternalSecrets (kubernetes provider, fake provider, one failing) and
/// returns the process and the scrape taken once all three are reflected in the metrics.
async fn synced(env: &Env) -> (esr_e2e::EsrProcess, Scrape) {
    let esr = env.start_esr(CLUSTER_WIDE).unwrap();
    let maddr = esr.metrics_addr.clone().unwrap();
    let ns = env.namespace("obs").await.unwrap();
    apply(
        env,
        "",
        fake_css("obs-fake", json!([{"key": "/app/token", "value": "T0KEN"}])),
    )
    .await;
    apply(
        env,
        &ns,
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "reader"}}),
    )
    .await;
    apply(
        env,
        &ns,
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "src"},
               "stringData": {"user": "admin"}}),
    )
    .await;
    apply(
        env,
        &ns,
        json!({"apiVersion": "external-secrets.io/v1", "kind": "SecretStore", "metadata": {"name": "k8s"},
               "spec": {"provider": {"kubernetes": {"remoteNamespace": ns,
                        "auth": {"serviceAccount": {"name": "reader"}}}}}}),
    )
    .await;
    let css = json!({"kind": "ClusterSecretStore", "name": "obs-fake"});
    apply(
        env,
        &ns,
        es(
            "db",
            json!({"refreshInterval": "1h", "secretStoreRef": {"kind": "SecretStore", "name": "k8s"},
                   "data": [{"secretKey": "user", "remoteRef": {"key": "src", "property": "user"}}]}),
        ),
    )
    .await;
    apply(
        env,
        &ns,
        es(
            "token",
            json!({"refreshInterval": "1h", "secretStoreRef": css,
                   "data": [{"secretKey": "token", "remoteRef": {"key": "/app/token"}}]}),
        ),
    )
    .await;
    apply(
        env,
        &ns,
        es(
            "broken",
            json!({"refreshInterval": "1h", "secretStoreRef": css,
                   "data": [{"secretKey": "x", "remoteRef": {"key": "/does/not/exist"}}]}),
        ),
    )
    .await;
    wait_secret_data(env, &ns, "db", &[("user", "admin")]).await;
    wait_secret_data(env, &ns, "token", &[("token", "T0KEN")]).await;
    let text = wait_for("the three ExternalSecrets in /metrics", TIMEOUT, || {
        let maddr = maddr.clone();
        let ns = ns.clone();
        async move {
            let s = Scrape::parse(http_get(&maddr, "/metrics").await);
            let ready = |name: &str, status: &str| {
                s.sum(
                    "externalsecret_status_condition",
                    &[
                        ("namespace", &ns),
                        ("name", name),
                        ("condition", "Ready"),
                        ("status", status),
                    ],
                ) == 1.0
            };
            (ready("db", "True")
                && ready("token", "True")
                && ready("broken", "False")
                && s.sum(
                    "externalsecret_provider_api_calls_count",
                    &[("provider", "Kubernetes")],
                ) > 0.0
                && s.sum("externalsecret_sync_calls_error", &[("name", "broken")]) > 0.0
                && s.sum("workqueue_retries_total", &[("name", "externalsecret")]) > 0.0)
                .then_some(s.text)
        }
    })
    .await
    .unwrap();
    (esr, Scrape::parse(text))
}

/// The controllers esr runs, named as ESO's (controller-runtime's lower-case kinds).
const CONTROLLERS: [&str; 6] = [
    "externalsecret",
    "secretstore",
    "clustersecretstore",
    "pushsecret",
    "clusterexternalsecret",
    "clusterpushsecret",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_runtime_families_are_served_with_real_values() {
    let env = Env::start().await.unwrap();
    let (mut esr, s) = synced(&env).await;
    // Family (as in `# TYPE`) → type. OpenMetrics names a counter family without `_total`.
    let want = [
        ("controller_runtime_reconcile", "counter"),
        ("controller_runtime_reconcile_errors", "counter"),
        ("controller_runtime_reconcile_time_seconds", "histogram"),
        ("controller_runtime_max_concurrent_reconciles", "gauge"),
        ("controller_runtime_active_workers", "gauge"),
        ("workqueue_depth", "gauge"),
        ("workqueue_adds", "counter"),
        ("workqueue_queue_duration_seconds", "histogram"),
        ("workqueue_work_duration_seconds", "histogram"),
        ("workqueue_retries", "counter"),
        ("workqueue_unfinished_work_seconds", "gauge"),
        ("workqueue_longest_running_processor_seconds", "gauge"),
        ("rest_client_requests", "counter"),
        ("process_cpu_seconds", "counter"),
        ("process_resident_memory_bytes", "gauge"),
        ("process_virtual_memory_bytes", "gauge"),
        ("process_open_fds", "gauge"),
        ("process_max_fds", "gauge"),
        ("process_start_time_seconds", "gauge"),
    ];
    for (family, ty) in want {
        assert_eq!(
            s.types.get(family).map(String::as_str),
            Some(ty),
            "TYPE of {family} in\n{}",
            s.text
        );
    }
    for c in CONTROLLERS {
        assert_eq!(
            s.sum(
                "controller_runtime_max_concurrent_reconciles",
                &[("controller", c)]
            ),
            1.0,
            "{c}"
        );
        for f in ["workqueue_depth", "workqueue_adds_total"] {
            assert!(
                s.samples
                    .iter()
                    .any(|(n, l, _)| n == f && l["name"] == c && l["controller"] == c),
                "{f} of {c}"
            );
        }
    }
    let es = [("controller", "externalsecret")];
    let q = [("name", "externalsecret"), ("controller", "externalsecret")];
    // Two ExternalSecrets synced (their reconciles ask for the 1h refresh) and one failed.
    let requeued = s.sum(
        "controller_runtime_reconcile_total",
        &[
            ("controller", "externalsecret"),
            ("result", "requeue_after"),
        ],
    );
    let errors = s.sum("controller_runtime_reconcile_errors_total", &es);
    assert!(requeued >= 2.0, "{requeued}");
    assert!(errors >= 1.0, "{errors}");
    assert_eq!(
        s.sum(
            "controller_runtime_reconcile_total",
            &[("controller", "externalsecret"), ("result", "error")]
        ),
        errors
    );
    let reconciles = s.sum("controller_runtime_reconcile_total", &es);
    assert_eq!(
        s.sum("controller_runtime_reconcile_time_seconds_count", &es),
        reconciles
    );
    assert_eq!(
        s.sum("workqueue_work_duration_seconds_count", &q),
        reconciles
    );
    // Each reconcile left the queue once; every add was seen (three watch triggers at least).
    assert!(s.sum("workqueue_adds_total", &q) >= 3.0);
    assert!(s.sum("workqueue_queue_duration_seconds_count", &q) >= 3.0);
    assert!(s.sum("workqueue_retries_total", &q) >= 1.0);
    // The store controllers reconciled the two stores.
    assert!(
        s.sum(
            "controller_runtime_reconcile_total",
            &[("controller", "secretstore")]
        ) >= 1.0
    );
    assert!(
        s.sum(
            "controller_runtime_reconcile_total",
            &[("controller", "clustersecretstore")]
        ) >= 1.0
    );
    // The client's requests: watches and reads (GET), status writes (PATCH), by code.
    assert!(
        s.sum(
            "rest_client_requests_total",
            &[("method", "GET"), ("code", "200")]
        ) > 0.0
    );
    assert!(s.sum("rest_client_requests_total", &[("method", "PATCH")]) > 0.0);
    let host = s
        .samples
        .iter()
        .find(|(n, _, _)| n == "rest_client_requests_total")
        .map(|(_, l, _)| l["host"].clone())
        .unwrap();
    assert!(host.contains(':'), "{host}");
    assert!(s.sum("process_resident_memory_bytes", &[]) > 1_000_000.0);
    assert!(s.sum("process_open_fds", &[]) >= 3.0);
    assert!(s.sum("process_max_fds", &[]) >= s.sum("process_open_fds", &[]));
    assert!(s.sum("process_start_time_seconds", &[]) > 1_577_836_800.0);
    for line in s.text.lines().filter(|l| {
        l.starts_with("controller_runtime_reconcile_total{controller=\"externalsecret\"")
            || l.starts_with("workqueue_adds_total")
            || l.starts_with("rest_client_requests_total")
            || l.starts_with("process_")
    }) {
        println!("metrics: {line}");
    }

    // JSON log lines: zap's names, and the reconcile's id on the lines it logs.
    esr.stop();
    let logs = esr.logs();
    let lines: Vec<Value> = logs
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert!(!lines.is_empty(), "{logs}");
    for l in &lines {
        for k in ["level", "ts", "msg", "logger"] {
            assert!(l.get(k).is_some(), "{k} missing in {l}");
        }
        assert!(l["ts"].is_number(), "{l}");
    }
    let failed: Vec<&Value> = lines
        .iter()
        .filter(|l| l["msg"] == "reconcile failed" && l["es"] == "broken")
        .collect();
    assert!(!failed.is_empty(), "{logs}");
    for l in &failed {
        assert_eq!(l["level"], "warn");
        assert_eq!(l["controller"], "externalsecret");
        assert_eq!(l["externalsecret"], "broken");
        let id = l["reconcileID"].as_str().unwrap();
        assert_eq!(id.len(), 36, "{id}");
    }
    let ids: BTreeSet<&str> = failed
        .iter()
        .map(|l| l["reconcileID"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), failed.len(), "one id per reconcile");
    let synced_line = lines
        .iter()
        .find(|l| l["msg"] == "reconciled secret" && l["es"] == "db")
        .unwrap_or_else(|| panic!("{logs}"));
    assert!(synced_line["reconcileID"].is_string(), "{synced_line}");
    assert!(
        synced_line["logger"]
            .as_str()
            .unwrap()
            .starts_with("esr_controller."),
        "{synced_line}"
    );
    println!("log: {}", failed[0]);
}

/// Every metric name in a PromQL expression (functions, keywords, label names and matchers,
/// durations and strings left out).
fn metric_names(expr: &str) -> BTreeSet<String> {
    // Drop strings, label matchers, ranges and grouping clauses.
    let mut s = String::new();
    let mut depth_brace = 0;
    let mut depth_bracket = 0;
    let mut in_str = false;
    for c in expr.chars() {
        match c {
            '"' if depth_brace == 0 => in_str = !in_str,
            _ if in_str => {}
            '{' => depth_brace += 1,
            '}' => depth_brace -= 1,
            '[' => depth_bracket += 1,
            ']' => depth_bracket -= 1,
            _ if depth_brace > 0 || depth_bracket > 0 => {}
            c => s.push(c),
        }
        if matches!(c, '{' | '}' | '[' | ']') {
            s.push(' ');
        }
    }
    let grouping = regex_lite_grouping(&s);
    let mut out = BTreeSet::new();
    let keywords = [
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "bool",
        "and",
        "or",
        "unless",
        "offset",
        "inf",
        "nan",
    ];
    let chars: Vec<char> = grouping.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric() || matches!(chars[i], '_' | ':'))
            {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let next = chars[i..].iter().find(|c| !c.is_whitespace());
            let preceded_by_digit = start > 0 && chars[start - 1].is_ascii_digit();
            if next != Some(&'(')
                && !keywords.contains(&word.to_lowercase().as_str())
                && !preceded_by_digit
            {
                out.insert(word);
            }
        } else {
            i += 1;
        }
    }
    out
}

/// Removes the label lists of `by (...)`, `without (...)`, `on (...)`, `ignoring (...)` and
/// `group_left/right (...)`.
fn regex_lite_grouping(s: &str) -> String {
    let mut out = s.to_string();
    for kw in [
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
    ] {
        while let Some(pos) = find_keyword(&out, kw) {
            let after = pos + kw.len();
            let rest = &out[after..];
            let trimmed = rest.trim_start();
            if !trimmed.starts_with('(') {
                // A keyword without a list (e.g. `group_left` alone): drop the keyword.
                out.replace_range(pos..after, " ");
                continue;
            }
            let open = after + (rest.len() - trimmed.len());
            let close = open + out[open..].find(')').unwrap();
            out.replace_range(pos..=close, " ");
        }
    }
    out
}

fn find_keyword(s: &str, kw: &str) -> Option<usize> {
    let b = s.as_bytes();
    let is_word = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b':';
    let mut from = 0;
    while let Some(i) = s[from..].find(kw).map(|i| i + from) {
        let before_ok = i == 0 || !is_word(b[i - 1]);
        let end = i + kw.len();
        let after_ok = end >= b.len() || !is_word(b[end]);
        if before_ok && after_ok {
            return Some(i);
        }
        from = i + 1;
    }
    None
}

#[test]
fn metric_names_are_extracted_from_promql() {
    assert_eq!(
        metric_names(
            "histogram_quantile(0.99, sum by (controller, le) (rate(controller_runtime_reconcile_time_seconds_bucket{job=~\"$job\"}[$__rate_interval]))) > 5"
        ),
        BTreeSet::from(["controller_runtime_reconcile_time_seconds_bucket".to_string()])
    );
    assert_eq!(
        metric_names(
            "sum by (name) (workqueue_depth) > 50 and sum by (name) (deriv(workqueue_depth[15m])) > 0"
        ),
        BTreeSet::from(["workqueue_depth".to_string()])
    );
    assert_eq!(
        metric_names(
            "sum(a_total{status=\"error\"}) / on (x) group_left (y) b_count + time() - 1e9"
        ),
        BTreeSet::from(["a_total".to_string(), "b_count".to_string()])
    );
}

/// (where, PromQL) pairs: a panel's title or an alert's name, and its expression.
type Queries = Vec<(String, String)>;

/// The chart's dashboard queries and alert expressions, rendered by real Helm with both enabled.
fn chart_queries() -> (Queries, Queries) {
    // Rendering starts its own runtime and API server: off the test's runtime.
    let objs = std::thread::spawn(|| {
        esr_deploytool::render_chart(
            &esr_deploytool::repo_root().join("deploy/charts/esr"),
            &json!({"installCRDs": false, "grafanaDashboard": {"enabled": true},
                    "prometheusRule": {"enabled": true}}),
            &esr_deploytool::Release::default(),
        )
        .unwrap()
        .into_iter()
        .flat_map(|r| r.documents)
        .map(|d| yaml_serde::from_str::<Value>(&d).unwrap())
        .collect::<Vec<Value>>()
    })
    .join()
    .unwrap();
    let cm = objs
        .iter()
        .find(|o| o["kind"] == "ConfigMap" && o["metadata"]["labels"]["grafana_dashboard"] == "1")
        .expect("the dashboard ConfigMap");
    let dash: Value = serde_json::from_str(cm["data"]["esr.json"].as_str().unwrap()).unwrap();
    let mut panels = Vec::new();
    for p in dash["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().into_iter().flatten() {
            panels.push((
                p["title"].as_str().unwrap().to_string(),
                t["expr"].as_str().unwrap().to_string(),
            ));
        }
    }
    for v in dash["templating"]["list"].as_array().unwrap() {
        if let Some(q) = v["query"]["query"].as_str() {
            let inner = q
                .trim_start_matches("label_values(")
                .split(',')
                .next()
                .unwrap();
            panels.push((format!("variable {}", v["name"]), inner.to_string()));
        }
    }
    let rule = objs
        .iter()
        .find(|o| o["kind"] == "PrometheusRule")
        .expect("the PrometheusRule");
    let mut alerts = Vec::new();
    for g in rule["spec"]["groups"].as_array().unwrap() {
        for r in g["rules"].as_array().unwrap() {
            alerts.push((
                r["alert"].as_str().unwrap().to_string(),
                r["expr"].as_str().unwrap().to_string(),
            ));
        }
    }
    (panels, alerts)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dashboard_panel_and_alert_names_exported_metrics() {
    let (panels, alerts) = chart_queries();
    assert!(panels.len() >= 25, "{panels:?}");
    assert_eq!(alerts.len(), 6, "{alerts:?}");
    let env = Env::start().await.unwrap();
    let (_esr, s) = synced(&env).await;
    let mut missing = Vec::new();
    let mut seen = BTreeSet::new();
    for (what, expr) in panels.iter().chain(alerts.iter()) {
        let names = metric_names(expr);
        assert!(!names.is_empty(), "{what}: no metric in {expr}");
        for n in names {
            if !s.has_sample(&n) {
                missing.push(format!("{what}: {n}"));
            }
            seen.insert(n);
        }
    }
    assert!(missing.is_empty(), "not exported: {missing:#?}");
    println!(
        "{} metrics named by the dashboard and alerts: {seen:?}",
        seen.len()
    );
}
