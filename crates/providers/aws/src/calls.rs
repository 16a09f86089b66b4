//! Counting of AWS API calls.
//!
//! Every call esr makes to AWS goes through [`CallLog::record`], which keeps its own counters
//! (used by tests and the call-count benchmark) and forwards the observation to an optional
//! [`CallObserver`] (the controller's `externalsecret_provider_api_calls_count` metric).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};

use crate::error::AwsErrorKind;

/// `provider` label for Secrets Manager calls (as in ESO).
pub const PROVIDER_SM: &str = "AWS/SecretsManager";
/// `provider` label for Parameter Store calls (as in ESO).
pub const PROVIDER_PS: &str = "AWS/ParameterStore";
/// `provider` label for STS calls (credential exchange; ESO does not count these).
pub const PROVIDER_STS: &str = "AWS/STS";

/// Receives one observation per AWS API call: `error` is `None` for a success.
pub trait CallObserver: Send + Sync {
    fn observe(&self, provider: &str, call: &str, error: Option<AwsErrorKind>);
}

/// ESO's `status` label: `success` or `error`.
pub fn status_label(error: Option<AwsErrorKind>) -> &'static str {
    if error.is_none() { "success" } else { "error" }
}

type Counts = BTreeMap<(&'static str, &'static str, &'static str), u64>;

/// Shared, cloneable call counter.
#[derive(Clone, Default)]
pub struct CallLog {
    counts: Arc<Mutex<Counts>>,
    observer: Arc<RwLock<Option<Arc<dyn CallObserver>>>>,
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
            observer: Arc::new(RwLock::new(Some(observer))),
        }
    }

    /// Replace the observer (shared by every clone of this log).
    pub fn set_observer(&self, observer: Arc<dyn CallObserver>) {
        if let Ok(mut o) = self.observer.write() {
            *o = Some(observer);
        }
    }

    pub fn record(&self, provider: &'static str, call: &'static str, error: Option<AwsErrorKind>) {
        let status = status_label(error);
        if let Ok(mut c) = self.counts.lock() {
            *c.entry((provider, call, status)).or_insert(0) += 1;
        }
        let observer = self.observer.read().ok().and_then(|o| o.clone());
        if let Some(o) = observer {
            o.observe(provider, call, error);
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
        self.total_of(PROVIDER_SM)
    }

    /// Calls of one provider label (any call, any status).
    pub fn total_of(&self, provider: &str) -> u64 {
        self.counts
            .lock()
            .map(|c| {
                c.iter()
                    .filter(|((p, _, _), _)| *p == provider)
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
        fn observe(&self, provider: &str, call: &str, error: Option<AwsErrorKind>) {
            assert_eq!(provider, PROVIDER_SM);
            assert_eq!(call, "GetSecretValue");
            assert!(error.is_none() || error == Some(AwsErrorKind::NotFound));
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn counts_and_forwards() {
        let obs = Arc::new(Obs(AtomicU64::new(0)));
        let log = CallLog::with_observer(obs.clone());
        log.record(PROVIDER_SM, "GetSecretValue", None);
        log.record(PROVIDER_SM, "GetSecretValue", Some(AwsErrorKind::NotFound));
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
