//! Counting of AWS API calls.
//!
//! Every call esr makes to AWS goes through [`CallLog::record`], which keeps its own counters
//! (used by tests and the call-count benchmark) and forwards the observation to an optional
//! [`CallObserver`] (the controller's `externalsecret_provider_api_calls_count` metric).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// `provider` label for Secrets Manager calls (as in ESO).
pub const PROVIDER_SM: &str = "AWS/SecretsManager";
/// `provider` label for STS calls (credential exchange; ESO does not count these).
pub const PROVIDER_STS: &str = "AWS/STS";

/// Receives one observation per AWS API call.
pub trait CallObserver: Send + Sync {
    /// `status` is `success` or `error`, as in ESO.
    fn observe(&self, provider: &str, call: &str, status: &str);
}

type Counts = BTreeMap<(&'static str, &'static str, &'static str), u64>;

/// Shared, cloneable call counter.
#[derive(Clone, Default)]
pub struct CallLog {
    counts: Arc<Mutex<Counts>>,
    observer: Option<Arc<dyn CallObserver>>,
}

impl std::fmt::Debug for CallLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallLog")
            .field("counts", &self.snapshot())
            .finish()
    }
}

impl CallLog {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with_observer(observer: Arc<dyn CallObserver>) -> Self {
        Self {
            counts: Arc::default(),
            observer: Some(observer),
        }
    }

    pub fn record(&self, provider: &'static str, call: &'static str, ok: bool) {
        let status = if ok { "success" } else { "error" };
        if let Ok(mut c) = self.counts.lock() {
            *c.entry((provider, call, status)).or_insert(0) += 1;
        }
        if let Some(o) = &self.observer {
            o.observe(provider, call, status);
        }
    }

    /// All counters: `(provider, call, status) -> count`.
    pub fn snapshot(&self) -> BTreeMap<(String, String, String), u64> {
        self.counts
            .lock()
            .map(|c| {
                c.iter()
                    .map(|((p, call, s), n)| ((p.to_string(), call.to_string(), s.to_string()), *n))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Calls of one kind (any provider, any status).
    pub fn count(&self, call: &str) -> u64 {
        self.counts
            .lock()
            .map(|c| {
                c.iter()
                    .filter(|((_, k, _), _)| *k == call)
                    .map(|(_, n)| *n)
                    .sum()
            })
            .unwrap_or(0)
    }

    /// All Secrets Manager calls.
    pub fn total_sm(&self) -> u64 {
        self.counts
            .lock()
            .map(|c| {
                c.iter()
                    .filter(|((p, _, _), _)| *p == PROVIDER_SM)
                    .map(|(_, n)| *n)
                    .sum()
            })
            .unwrap_or(0)
    }

    /// Every call, Secrets Manager and STS.
    pub fn total(&self) -> u64 {
        self.counts.lock().map(|c| c.values().sum()).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    struct Obs(AtomicU64);
    impl CallObserver for Obs {
        fn observe(&self, provider: &str, call: &str, status: &str) {
            assert_eq!(provider, PROVIDER_SM);
            assert_eq!(call, "GetSecretValue");
            assert!(status == "success" || status == "error");
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn counts_and_forwards() {
        let obs = Arc::new(Obs(AtomicU64::new(0)));
        let log = CallLog::with_observer(obs.clone());
        log.record(PROVIDER_SM, "GetSecretValue", true);
        log.record(PROVIDER_SM, "GetSecretValue", false);
        assert_eq!(log.count("GetSecretValue"), 2);
        assert_eq!(log.total_sm(), 2);
        assert_eq!(obs.0.load(Ordering::SeqCst), 2);
        let snap = log.snapshot();
        assert_eq!(
            snap.get(&(PROVIDER_SM.into(), "GetSecretValue".into(), "error".into())),
            Some(&1)
        );
    }
}
