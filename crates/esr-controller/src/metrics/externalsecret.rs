//! The per-ExternalSecret series ESO's dashboards read: `externalsecret_sync_calls_total`,
//! `externalsecret_reconcile_duration` (nanoseconds) and `externalsecret_status_condition`
//! (`Ready`/`True` = 1 with `Ready`/`False` = 0, or the reverse), all labelled `name, namespace`
//! (the condition series also `condition, status`), as ESO exposes them.
//!
//! With tens of thousands of ExternalSecrets these four series are the largest per-object cost of
//! the metrics: four prometheus-client `Family` entries, each a label set and a shared atomic
//! (about 680 bytes per ExternalSecret). They are kept here instead as one entry per
//! ExternalSecret (the counter, the duration and the Ready status side by side, under its name in
//! a map per namespace) and written out as the four series when the endpoint is scraped
//! ([`Collector`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;

/// What one ExternalSecret's series hold.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Values {
    /// `externalsecret_sync_calls_total`.
    calls: u64,
    /// `externalsecret_reconcile_duration`, once a reconcile has finished.
    duration_ns: Option<f64>,
    /// The `Ready` condition pair, once a reconcile has set it.
    ready: Option<bool>,
}

/// Namespace → name → values.
type ByNamespace = HashMap<Arc<str>, HashMap<Box<str>, Values>>;

/// The series of every ExternalSecret.
#[derive(Debug, Default)]
pub struct ExternalSecretSeries {
    namespaces: Mutex<ByNamespace>,
}

impl ExternalSecretSeries {
    fn lock(&self) -> MutexGuard<'_, ByNamespace> {
        self.namespaces.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn update(&self, name: &str, namespace: &str, f: impl FnOnce(&mut Values)) {
        let mut namespaces = self.lock();
        let names = match namespaces.get_mut(namespace) {
            Some(names) => names,
            None => namespaces.entry(Arc::from(namespace)).or_default(),
        };
        match names.get_mut(name) {
            Some(values) => f(values),
            None => {
                let mut values = Values::default();
                f(&mut values);
                names.insert(name.into(), values);
            }
        }
    }

    /// Counts one reconcile (`externalsecret_sync_calls_total`).
    pub fn sync_call(&self, name: &str, namespace: &str) {
        self.update(name, namespace, |v| v.calls += 1);
    }

    /// Records how long a reconcile took (`externalsecret_reconcile_duration`, in nanoseconds).
    pub fn reconciled(&self, name: &str, namespace: &str, took: Duration) {
        self.update(name, namespace, |v| {
            v.duration_ns = Some(took.as_nanos() as f64)
        });
    }

    /// Sets the `Ready` condition pair: `status` `True` gives `True` = 1 and `False` = 0, any
    /// other status the reverse (ESO behaviour).
    pub fn ready(&self, name: &str, namespace: &str, status: &str) {
        self.update(name, namespace, |v| v.ready = Some(status == "True"));
    }

    /// Removes the series of a deleted ExternalSecret.
    pub fn forget(&self, name: &str, namespace: &str) {
        let mut namespaces = self.lock();
        if let Some(names) = namespaces.get_mut(namespace) {
            names.remove(name);
            if names.is_empty() {
                namespaces.remove(namespace);
            }
        }
    }

    #[cfg(test)]
    fn get(&self, name: &str, namespace: &str) -> Option<Values> {
        self.lock().get(namespace)?.get(name).copied()
    }
}

impl Collector for ExternalSecretSeries {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let namespaces = self.lock();
        let series = || {
            namespaces.iter().flat_map(|(namespace, names)| {
                names.iter().map(move |(name, values)| {
                    ([("name", &**name), ("namespace", &**namespace)], values)
                })
            })
        };
        let mut e = encoder.encode_descriptor(
            "externalsecret_sync_calls",
            "Total number of the External Secret sync calls.",
            None,
            MetricType::Counter,
        )?;
        for (labels, v) in series() {
            e.encode_family(&labels)?
                .encode_counter::<NoLabelSet, _, u64>(&v.calls, None)?;
        }
        let mut e = encoder.encode_descriptor(
            "externalsecret_status_condition",
            "The status condition of a specific External Secret.",
            None,
            MetricType::Gauge,
        )?;
        for (labels, v) in series() {
            let Some(ready) = v.ready else { continue };
            for (status, on) in [("True", ready), ("False", !ready)] {
                let [name, namespace] = labels;
                let labels = [name, namespace, ("condition", "Ready"), ("status", status)];
                e.encode_family(&labels)?
                    .encode_gauge(&if on { 1.0_f64 } else { 0.0 })?;
            }
        }
        let mut e = encoder.encode_descriptor(
            "externalsecret_reconcile_duration",
            "The duration time to reconcile the External Secret.",
            None,
            MetricType::Gauge,
        )?;
        for (labels, v) in series() {
            if let Some(ns) = v.duration_ns {
                e.encode_family(&labels)?.encode_gauge(&ns)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_entry_per_external_secret_until_it_is_forgotten() {
        let s = ExternalSecretSeries::default();
        s.sync_call("db", "app");
        s.sync_call("db", "app");
        s.reconciled("db", "app", Duration::from_micros(3));
        s.ready("db", "app", "False");
        s.sync_call("cache", "app");
        assert_eq!(
            s.get("db", "app"),
            Some(Values {
                calls: 2,
                duration_ns: Some(3000.0),
                ready: Some(false)
            })
        );
        s.forget("db", "app");
        assert_eq!(s.get("db", "app"), None);
        assert_eq!(s.lock().len(), 1, "the namespace stays while it has series");
        s.forget("cache", "app");
        assert!(s.lock().is_empty(), "an empty namespace is dropped");
    }
}
