//! Prometheus metrics with ESO's names and labels.
//!
//! Non-condition metrics are labelled `name, namespace`; condition metrics
//! (`<kind>_status_condition`) `name, namespace, condition, status`, where `Ready`/`True` = 1 goes
//! with `Ready`/`False` = 0 and vice versa. `*_reconcile_duration` values are nanoseconds.
//! `externalsecret_provider_api_calls_count` is labelled `provider, call, status` (`success` or
//! `error`). The series of a deleted object are removed.
//!
//! `externalsecret_sync_calls_error` has one label beyond ESO's `name, namespace`: `reason`, why the
//! reconcile failed ([`SYNC_ERROR_REASONS`]): a provider error kind (`not_found`, `auth`,
//! `throttled`, `invalid`, `transient`, `unsupported`), `store` (a store that is missing, not
//! ready, denied to the namespace or of another controller class), `data` (key conversion, key validation, decoding or NUL-byte check), `generator`,
//! `template`, `ownership` (the target is owned by another ExternalSecret or controller),
//! `immutable`, `policy` (a refused creation/deletion policy combination or generic target),
//! `kubernetes` (a Kubernetes API error) or `internal`.
//!
//! prometheus-client appends `_total` to counters (OpenMetrics). ESO's `externalsecret_sync_calls_total`
//! is therefore registered as the counter `externalsecret_sync_calls`; the ESO counters whose names do
//! not end in `_total` (`externalsecret_sync_calls_error`, `externalsecret_provider_api_calls_count`)
//! use [`PlainCounter`], exposed with type `unknown` so the sample name is exactly ESO's.
//!
//! Beside ESO's own metrics, the registry holds what controller-runtime exports in ESO: the
//! controller and workqueue metrics ([`controller`]), `rest_client_requests_total` ([`rest`]) and
//! the `process_*` metrics ([`process`]).

pub mod controller;
pub mod externalsecret;
pub mod process;
pub mod rest;

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use esr_provider::{CallRecorder, CallStatus};
use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::Registry;

/// `name, namespace`. The strings are shared: every series of one object, and every object of one
/// namespace, hold the same allocation (see [`Metrics::resource`]).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResourceLabels {
    /// Resource name.
    pub name: Arc<str>,
    /// Resource namespace ("" for cluster-scoped).
    pub namespace: Arc<str>,
}

impl ResourceLabels {
    /// The labels of one condition status series of this resource.
    pub fn condition(&self, condition: &'static str, status: &'static str) -> ConditionLabels {
        ConditionLabels {
            name: self.name.clone(),
            namespace: self.namespace.clone(),
            condition,
            status,
        }
    }

    /// The labels of one `externalsecret_sync_calls_error` series of this resource.
    pub fn error(&self, reason: &'static str) -> ErrorLabels {
        ErrorLabels {
            name: self.name.clone(),
            namespace: self.namespace.clone(),
            reason,
        }
    }
}

/// `name, namespace, condition, status`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ConditionLabels {
    /// Resource name.
    pub name: Arc<str>,
    /// Resource namespace.
    pub namespace: Arc<str>,
    /// Condition type (a constant: no string per series).
    pub condition: &'static str,
    /// `True`/`False`.
    pub status: &'static str,
}

/// `name, namespace, reason` of `externalsecret_sync_calls_error`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    /// Resource name.
    pub name: Arc<str>,
    /// Resource namespace.
    pub namespace: Arc<str>,
    /// One of [`SYNC_ERROR_REASONS`].
    pub reason: &'static str,
}

/// The label strings in use, one allocation each. Strings no series holds any more are dropped
/// whenever the set has doubled since the last sweep.
#[derive(Debug, Default)]
struct Interner {
    strings: HashSet<Arc<str>>,
    sweep_at: usize,
}

impl Interner {
    fn get(&mut self, s: &str) -> Arc<str> {
        if let Some(a) = self.strings.get(s) {
            return a.clone();
        }
        if self.strings.len() >= self.sweep_at.max(1024) {
            self.strings.retain(|a| Arc::strong_count(a) > 1);
            self.sweep_at = 2 * self.strings.len();
        }
        let a: Arc<str> = Arc::from(s);
        self.strings.insert(a.clone());
        a
    }
}

/// Every value of the `reason` label of `externalsecret_sync_calls_error`.
pub const SYNC_ERROR_REASONS: &[&str] = &[
    "not_found",
    "auth",
    "throttled",
    "invalid",
    "transient",
    "unsupported",
    "store",
    "data",
    "generator",
    "template",
    "ownership",
    "immutable",
    "policy",
    "kubernetes",
    "internal",
];

/// `provider, call, status`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CallLabels {
    /// e.g. `Kubernetes`.
    pub provider: String,
    /// e.g. `GetSecret`.
    pub call: String,
    /// `success` / `error`.
    pub status: String,
}

/// A monotonic counter encoded without the `_total` suffix.
#[derive(Debug, Default, Clone)]
pub struct PlainCounter(Arc<AtomicU64>);

impl PlainCounter {
    /// +1.
    pub fn inc(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
    /// Current value.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

impl TypedMetric for PlainCounter {
    const TYPE: MetricType = MetricType::Unknown;
}

impl EncodeMetric for PlainCounter {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        encoder.encode_gauge(&(self.get() as i64))
    }
    fn metric_type(&self) -> MetricType {
        MetricType::Unknown
    }
}

/// A gauge holding an `f64`.
pub(crate) type FloatGauge = Gauge<f64, AtomicU64>;

/// All metrics of the controller.
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    labels: Arc<Mutex<Interner>>,
    /// `externalsecret_sync_calls_total`, `externalsecret_status_condition` and
    /// `externalsecret_reconcile_duration` (nanoseconds), one entry per ExternalSecret.
    pub es: Arc<externalsecret::ExternalSecretSeries>,
    /// `externalsecret_sync_calls_error` (with a `reason` label).
    pub sync_calls_error: Family<ErrorLabels, PlainCounter>,
    /// `externalsecret_provider_api_calls_count`.
    pub provider_calls: Family<CallLabels, PlainCounter>,
    /// `secretstore_status_condition`.
    pub ss_condition: Family<ConditionLabels, FloatGauge>,
    /// `secretstore_reconcile_duration`.
    pub ss_duration: Family<ResourceLabels, FloatGauge>,
    /// `clustersecretstore_status_condition`.
    pub css_condition: Family<ConditionLabels, FloatGauge>,
    /// `clustersecretstore_reconcile_duration`.
    pub css_duration: Family<ResourceLabels, FloatGauge>,
    /// `clusterexternalsecret_status_condition`.
    pub ces_condition: Family<ConditionLabels, FloatGauge>,
    /// `clusterexternalsecret_reconcile_duration`.
    pub ces_duration: Family<ResourceLabels, FloatGauge>,
    /// `pushsecret_status_condition`.
    pub ps_condition: Family<ConditionLabels, FloatGauge>,
    /// `pushsecret_reconcile_duration`.
    pub ps_duration: Family<ResourceLabels, FloatGauge>,
    /// `clusterpushsecret_status_condition`.
    pub cps_condition: Family<ConditionLabels, FloatGauge>,
    /// `clusterpushsecret_reconcile_duration`.
    pub cps_duration: Family<ResourceLabels, FloatGauge>,
    /// controller-runtime's controller and workqueue metrics.
    pub runtime: controller::RuntimeMetrics,
    /// `rest_client_requests_total`, fed by [`rest::RestClientMetricsLayer`].
    pub rest_requests: rest::Requests,
}

/// The kinds whose reconciles are observed with a `<kind>_status_condition` /
/// `<kind>_reconcile_duration` pair (ExternalSecrets and stores have their own paths).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Observed {
    /// `clusterexternalsecret_*` (cluster-scoped: namespace label empty).
    ClusterExternalSecret,
    /// `pushsecret_*`.
    PushSecret,
    /// `clusterpushsecret_*` (cluster-scoped: namespace label empty).
    ClusterPushSecret,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Registers every metric.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let runtime = controller::RuntimeMetrics::register(&mut registry);
        let rest_requests = rest::Requests::default();
        registry.register(
            "rest_client_requests",
            "Number of HTTP requests, partitioned by status code, method, and host.",
            rest_requests.clone(),
        );
        registry.register_collector(Box::new(process::ProcessCollector));
        let m = Metrics {
            registry: Arc::new(Registry::default()),
            labels: Arc::default(),
            es: Arc::default(),
            sync_calls_error: Family::default(),
            provider_calls: Family::default(),
            ss_condition: Family::default(),
            ss_duration: Family::default(),
            css_condition: Family::default(),
            css_duration: Family::default(),
            ces_condition: Family::default(),
            ces_duration: Family::default(),
            ps_condition: Family::default(),
            ps_duration: Family::default(),
            cps_condition: Family::default(),
            cps_duration: Family::default(),
            runtime,
            rest_requests,
        };
        registry.register_collector(Box::new(m.es.clone()));
        registry.register(
            "externalsecret_sync_calls_error",
            "Total number of the External Secret sync errors",
            m.sync_calls_error.clone(),
        );
        registry.register(
            "externalsecret_provider_api_calls_count",
            "Number of API calls towards the secret provider",
            m.provider_calls.clone(),
        );
        registry.register(
            "secretstore_status_condition",
            "The status condition of a specific Secret Store",
            m.ss_condition.clone(),
        );
        registry.register(
            "secretstore_reconcile_duration",
            "The duration time to reconcile the Secret Store",
            m.ss_duration.clone(),
        );
        registry.register(
            "clustersecretstore_status_condition",
            "The status condition of a specific Cluster Secret Store",
            m.css_condition.clone(),
        );
        registry.register(
            "clustersecretstore_reconcile_duration",
            "The duration time to reconcile the Cluster Secret Store",
            m.css_duration.clone(),
        );
        for (prefix, what, cond, dur) in [
            (
                "clusterexternalsecret",
                "Cluster External Secret",
                &m.ces_condition,
                &m.ces_duration,
            ),
            ("pushsecret", "Push Secret", &m.ps_condition, &m.ps_duration),
            (
                "clusterpushsecret",
                "Cluster Push Secret",
                &m.cps_condition,
                &m.cps_duration,
            ),
        ] {
            registry.register(
                format!("{prefix}_status_condition"),
                format!("The status condition of a specific {what}"),
                cond.clone(),
            );
            registry.register(
                format!("{prefix}_reconcile_duration"),
                format!("The duration time to reconcile the {what}"),
                dur.clone(),
            );
        }
        Metrics {
            registry: Arc::new(registry),
            ..m
        }
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        self.runtime.refresh(std::time::Instant::now());
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }

    /// The `name, namespace` labels of a resource, with shared strings.
    pub fn resource(&self, name: &str, namespace: &str) -> ResourceLabels {
        let mut i = self.labels.lock().unwrap_or_else(|p| p.into_inner());
        ResourceLabels {
            name: i.get(name),
            namespace: i.get(namespace),
        }
    }

    /// Sets a condition gauge pair of `resource`: `status` gets 1 and the opposite status 0 (ESO
    /// behaviour).
    pub fn set_condition(
        family: &Family<ConditionLabels, FloatGauge>,
        resource: &ResourceLabels,
        condition: &'static str,
        status: &str,
    ) {
        let (on, off) = match status {
            "True" => ("True", "False"),
            _ => ("False", "True"),
        };
        family
            .get_or_create(&resource.condition(condition, on))
            .set(1.0);
        family
            .get_or_create(&resource.condition(condition, off))
            .set(0.0);
    }

    fn families(
        &self,
        kind: Observed,
    ) -> (
        &Family<ConditionLabels, FloatGauge>,
        &Family<ResourceLabels, FloatGauge>,
    ) {
        match kind {
            Observed::ClusterExternalSecret => (&self.ces_condition, &self.ces_duration),
            Observed::PushSecret => (&self.ps_condition, &self.ps_duration),
            Observed::ClusterPushSecret => (&self.cps_condition, &self.cps_duration),
        }
    }

    /// Records one reconcile of a CES / PushSecret / ClusterPushSecret: the duration gauge (in
    /// nanoseconds, as ESO) and, when known, the Ready condition pair.
    pub fn observe(
        &self,
        kind: Observed,
        name: &str,
        namespace: &str,
        took: std::time::Duration,
        ready: Option<bool>,
    ) {
        let (cond, dur) = self.families(kind);
        let r = self.resource(name, namespace);
        dur.get_or_create(&r).set(took.as_nanos() as f64);
        if let Some(ready) = ready {
            Metrics::set_condition(cond, &r, "Ready", if ready { "True" } else { "False" });
        }
    }

    /// Removes the series of a deleted CES / PushSecret / ClusterPushSecret.
    pub fn forget_observed(&self, kind: Observed, name: &str, namespace: &str) {
        let (cond, dur) = self.families(kind);
        let r = self.resource(name, namespace);
        dur.remove(&r);
        for s in ["True", "False"] {
            cond.remove(&r.condition("Ready", s));
        }
    }

    /// Counts a failed ExternalSecret reconcile; `reason` is one of [`SYNC_ERROR_REASONS`].
    pub fn sync_error(&self, name: &str, namespace: &str, reason: &'static str) {
        self.sync_calls_error
            .get_or_create(&self.resource(name, namespace).error(reason))
            .inc();
    }

    /// Removes every series of a deleted resource.
    pub fn forget(&self, name: &str, namespace: &str) {
        let r = self.resource(name, namespace);
        for reason in SYNC_ERROR_REASONS {
            self.sync_calls_error.remove(&r.error(reason));
        }
        self.es.forget(name, namespace);
    }
}

impl CallRecorder for Metrics {
    fn record(&self, provider: &str, call: &str, status: CallStatus) {
        self.provider_calls
            .get_or_create(&CallLabels {
                provider: provider.to_string(),
                call: call.to_string(),
                status: status.eso_label().to_string(),
            })
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_strings_are_shared_and_dropped_with_their_series() {
        let m = Metrics::new();
        let a = m.resource("db", "app");
        let b = m.resource("db", "app");
        assert!(Arc::ptr_eq(&a.name, &b.name) && Arc::ptr_eq(&a.namespace, &b.namespace));
        let other = m.resource("cache", "app");
        assert!(Arc::ptr_eq(&a.namespace, &other.namespace));
        Metrics::set_condition(&m.ps_condition, &a, "Ready", "True");
        drop((a, b, other));
        // Strings no series holds go at a sweep; the series' strings stay.
        for i in 0..5000 {
            drop(m.resource(&format!("es-{i}"), "app"));
        }
        let i = m.labels.lock().unwrap();
        assert!(i.strings.len() <= 1024, "{}", i.strings.len());
        assert!(i.strings.contains("db"), "held by the condition series");
        assert!(!i.strings.contains("cache"), "held by nothing");
    }

    #[test]
    fn names_match_eso() {
        let m = Metrics::new();
        m.es.sync_call("db", "app");
        m.sync_error("db", "app", "throttled");
        m.es.reconciled("db", "app", std::time::Duration::from_nanos(1500));
        m.es.ready("db", "app", "True");
        m.record("Kubernetes", "GetSecret", CallStatus::Success);
        let text = m.encode();
        assert!(
            text.contains("# HELP externalsecret_sync_calls Total number of the External Secret sync calls.\n# TYPE externalsecret_sync_calls counter\n"),
            "{text}"
        );
        assert!(
            text.contains("externalsecret_sync_calls_total{name=\"db\",namespace=\"app\"} 1"),
            "{text}"
        );
        assert!(
            text.contains(
                "externalsecret_sync_calls_error{name=\"db\",namespace=\"app\",reason=\"throttled\"} 1"
            ),
            "{text}"
        );
        assert!(
            text.contains("externalsecret_reconcile_duration{name=\"db\",namespace=\"app\"} 1500"),
            "{text}"
        );
        assert!(
            text.contains("externalsecret_status_condition{name=\"db\",namespace=\"app\",condition=\"Ready\",status=\"True\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("externalsecret_status_condition{name=\"db\",namespace=\"app\",condition=\"Ready\",status=\"False\"} 0"),
            "{text}"
        );
        assert!(
            text.contains("externalsecret_provider_api_calls_count{provider=\"Kubernetes\",call=\"GetSecret\",status=\"success\"} 1"),
            "{text}"
        );
        m.forget("db", "app");
        assert!(!m.encode().contains("name=\"db\""));
    }

    #[test]
    fn observed_kinds_use_eso_names() {
        let m = Metrics::new();
        let d = std::time::Duration::from_millis(2);
        m.observe(Observed::ClusterExternalSecret, "wild", "", d, Some(true));
        m.observe(Observed::PushSecret, "push", "app", d, Some(false));
        m.observe(Observed::ClusterPushSecret, "cps", "", d, None);
        let text = m.encode();
        for want in [
            "clusterexternalsecret_reconcile_duration{name=\"wild\",namespace=\"\"} 2000000",
            "clusterexternalsecret_status_condition{name=\"wild\",namespace=\"\",condition=\"Ready\",status=\"True\"} 1",
            "pushsecret_status_condition{name=\"push\",namespace=\"app\",condition=\"Ready\",status=\"False\"} 1",
            "pushsecret_status_condition{name=\"push\",namespace=\"app\",condition=\"Ready\",status=\"True\"} 0",
            "clusterpushsecret_reconcile_duration{name=\"cps\",namespace=\"\"} 2000000",
        ] {
            assert!(text.contains(want), "missing {want} in {text}");
        }
        assert!(
            !text.contains("clusterpushsecret_status_condition{"),
            "{text}"
        );
        m.forget_observed(Observed::PushSecret, "push", "app");
        assert!(!m.encode().contains("name=\"push\""));
    }
}
