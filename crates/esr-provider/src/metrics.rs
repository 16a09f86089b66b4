//! API-call accounting for `externalsecret_provider_api_calls_count{provider,call,status}`.
//!
//! Providers call [`CallRecorder::record`] once per remote API call; the controller's metrics module
//! implements the trait. ESO's `status` label is `success` or `error`
//! ([`CallStatus::eso_label`]), and that is all the controller exports. A failed call's
//! [`ErrorKind`] is still passed to the recorder ([`CallStatus::Error`]), so a recorder (e.g.
//! [`MemoryRecorder`] in tests) can tell the kinds apart.

use std::sync::Arc;
use std::sync::Mutex;

use crate::error::{ErrorKind, ProviderError};

/// Outcome of one API call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CallStatus {
    /// The call succeeded.
    Success,
    /// The call failed with this kind.
    Error(ErrorKind),
}

impl CallStatus {
    /// ESO's `status` label value: `success` or `error`.
    pub fn eso_label(self) -> &'static str {
        match self {
            CallStatus::Success => "success",
            CallStatus::Error(_) => "error",
        }
    }

    /// Status of a result.
    pub fn of<T>(result: &Result<T, ProviderError>) -> Self {
        match result {
            Ok(_) => CallStatus::Success,
            Err(e) => CallStatus::Error(e.kind()),
        }
    }
}

/// Receives one event per provider API call.
pub trait CallRecorder: Send + Sync {
    /// Records a call. `provider` is the metric provider (e.g. `AWS/SecretsManager`), `call` the API
    /// call name (e.g. `GetSecretValue`).
    fn record(&self, provider: &str, call: &str, status: CallStatus);
}

/// Records nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoopRecorder;

impl CallRecorder for NoopRecorder {
    fn record(&self, _provider: &str, _call: &str, _status: CallStatus) {}
}

/// A shared no-op recorder.
pub fn noop_recorder() -> Arc<dyn CallRecorder> {
    Arc::new(NoopRecorder)
}

/// Records a call from its result and passes the result through.
pub fn observe<T>(
    recorder: &dyn CallRecorder,
    provider: &str,
    call: &str,
    result: Result<T, ProviderError>,
) -> Result<T, ProviderError> {
    recorder.record(provider, call, CallStatus::of(&result));
    result
}

/// One recorded call (see [`MemoryRecorder`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedCall {
    /// Metric provider.
    pub provider: String,
    /// Call name.
    pub call: String,
    /// Outcome.
    pub status: CallStatus,
}

/// Keeps every call in memory: for tests and benchmarks.
#[derive(Debug, Default)]
pub struct MemoryRecorder {
    calls: Mutex<Vec<RecordedCall>>,
}

impl MemoryRecorder {
    /// A new, empty recorder.
    pub fn new() -> Self {
        Self::default()
    }

    /// All calls so far.
    pub fn calls(&self) -> Vec<RecordedCall> {
        self.calls.lock().map(|c| c.clone()).unwrap_or_default()
    }

    /// Number of calls named `call`.
    pub fn count(&self, call: &str) -> usize {
        self.calls().iter().filter(|c| c.call == call).count()
    }

    /// Total number of calls.
    pub fn total(&self) -> usize {
        self.calls().len()
    }
}

impl CallRecorder for MemoryRecorder {
    fn record(&self, provider: &str, call: &str, status: CallStatus) {
        if let Ok(mut calls) = self.calls.lock() {
            calls.push(RecordedCall {
                provider: provider.to_string(),
                call: call.to_string(),
                status,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observe_records_success_and_error() {
        let rec = MemoryRecorder::new();
        let ok: Result<u8, ProviderError> = observe(&rec, "P", "Get", Ok(1));
        assert_eq!(ok.ok(), Some(1));
        let err: Result<u8, ProviderError> =
            observe(&rec, "P", "Get", Err(ProviderError::not_found()));
        assert!(err.is_err());
        let calls = rec.calls();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].status.eso_label(), "success");
        assert_eq!(calls[1].status, CallStatus::Error(ErrorKind::NotFound));
        assert_eq!(calls[1].status.eso_label(), "error");
        assert_eq!(rec.count("Get"), 2);
        assert_eq!(rec.count("List"), 0);
    }
}
