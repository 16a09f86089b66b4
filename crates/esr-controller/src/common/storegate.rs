//! Per-store isolation: a slow or hung store delays only the ExternalSecrets that use it.
//!
//! Every provider call of a reconcile (building the client, which may log in, and each read),
//! and the store controller's validation of the store, go through the [`StoreGate`], keyed by the store's identity (`Kind/namespace/name`):
//! - at most `max_in_flight` calls run against one store at once (`--store-max-in-flight`);
//! - a call, including its wait for a slot, has a deadline (`--store-request-timeout`, default
//!   10 s, well under the time a reconcile may take), after which it fails with a transient,
//!   value-free error (`the store SecretStore/ns/name did not answer within 200ms`), and the
//!   ExternalSecret is retried with the usual backoff;
//! - once a call to a store has timed out, the store counts as stalled until one of its calls
//!   answers again: while it is stalled, a call that finds every slot taken fails at once instead
//!   of waiting, so the reconcilers are never all parked on one dead store.

use std::collections::BTreeMap;
use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use esr_api::duration::GoDuration;
use esr_provider::{
    FindRequest, ProviderError, PushRemoteRef, PushRequest, SecretRef, SecretsClient,
    ValidationResult,
};

/// The default deadline of one provider call (`--store-request-timeout`).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The default number of calls in flight per store (`--store-max-in-flight`).
pub const DEFAULT_MAX_IN_FLIGHT: usize = 8;

/// The bounds of provider calls, per store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreLimits {
    /// Deadline of one call, including the wait for a slot.
    pub timeout: Duration,
    /// Calls in flight per store.
    pub max_in_flight: usize,
}

impl Default for StoreLimits {
    fn default() -> Self {
        StoreLimits {
            timeout: DEFAULT_REQUEST_TIMEOUT,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
        }
    }
}

#[derive(Debug)]
struct Slot {
    permits: Arc<tokio::sync::Semaphore>,
    stalled: AtomicBool,
}

/// Bounds the provider calls of each store (see the module documentation).
#[derive(Debug, Default)]
pub struct StoreGate {
    limits: StoreLimits,
    slots: Mutex<HashMap<String, Arc<Slot>>>,
}

impl StoreGate {
    /// A gate with these limits.
    pub fn new(limits: StoreLimits) -> Self {
        StoreGate {
            limits: StoreLimits {
                max_in_flight: limits.max_in_flight.max(1),
                ..limits
            },
            slots: Mutex::new(HashMap::new()),
        }
    }

    /// The limits.
    pub fn limits(&self) -> StoreLimits {
        self.limits
    }

    fn slot(&self, store: &str) -> Arc<Slot> {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = slots.get(store) {
            return s.clone();
        }
        // Forget idle stores (no call holds or awaits their slot), so the map follows the
        // stores in use.
        slots.retain(|_, s| Arc::strong_count(s) > 1);
        let s = Arc::new(Slot {
            permits: Arc::new(tokio::sync::Semaphore::new(self.limits.max_in_flight)),
            stalled: AtomicBool::new(false),
        });
        slots.insert(store.to_string(), s.clone());
        s
    }

    fn timed_out(&self, store: &str) -> ProviderError {
        ProviderError::transient(format!(
            "the store {store} did not answer within {}",
            GoDuration::from_std(self.limits.timeout)
        ))
    }

    /// Runs `call` against `store` within the store's bounds.
    pub async fn call<T, F>(&self, store: &str, call: F) -> Result<T, ProviderError>
    where
        F: Future<Output = Result<T, ProviderError>>,
    {
        let slot = self.slot(store);
        let permit = match slot.permits.clone().try_acquire_owned() {
            Ok(p) => Some(p),
            Err(_) if slot.stalled.load(Ordering::Relaxed) => {
                return Err(ProviderError::transient(format!(
                    "the store {store} is not answering: {} calls are already waiting for it",
                    self.limits.max_in_flight
                )));
            }
            Err(_) => None,
        };
        let bounded = async {
            let _permit = match permit {
                Some(p) => p,
                None => slot
                    .permits
                    .clone()
                    .acquire_owned()
                    .await
                    .map_err(|_| self.timed_out(store))?,
            };
            call.await
        };
        match tokio::time::timeout(self.limits.timeout, bounded).await {
            Ok(out) => {
                slot.stalled.store(false, Ordering::Relaxed);
                out
            }
            Err(_) => {
                slot.stalled.store(true, Ordering::Relaxed);
                Err(self.timed_out(store))
            }
        }
    }

    /// Builds a client of `store` (`new_client`, which may log in) within the store's bounds,
    /// and returns it with every later call going through this gate too.
    pub async fn connect<F>(
        self: &Arc<Self>,
        store: String,
        new_client: F,
    ) -> Result<Arc<dyn SecretsClient>, ProviderError>
    where
        F: Future<Output = Result<Arc<dyn SecretsClient>, ProviderError>>,
    {
        let client = self.call(&store, new_client).await?;
        Ok(self.wrap(store, client))
    }

    /// `client`, with every call going through this gate as `store`.
    pub fn wrap(
        self: &Arc<Self>,
        store: String,
        client: Arc<dyn SecretsClient>,
    ) -> Arc<dyn SecretsClient> {
        Arc::new(GatedClient {
            gate: self.clone(),
            store,
            inner: client,
        })
    }
}

/// A [`SecretsClient`] whose calls go through a [`StoreGate`].
struct GatedClient {
    gate: Arc<StoreGate>,
    store: String,
    inner: Arc<dyn SecretsClient>,
}

#[async_trait]
impl SecretsClient for GatedClient {
    async fn get_secret(&self, r: &SecretRef) -> esr_provider::Result<Vec<u8>> {
        self.gate.call(&self.store, self.inner.get_secret(r)).await
    }

    async fn get_secrets(&self, refs: &[SecretRef]) -> Vec<esr_provider::Result<Vec<u8>>> {
        let batch = async { Ok(self.inner.get_secrets(refs).await) };
        match self.gate.call(&self.store, batch).await {
            Ok(out) => out,
            Err(e) => refs.iter().map(|_| Err(e.clone())).collect(),
        }
    }

    async fn get_secret_map(
        &self,
        r: &SecretRef,
    ) -> esr_provider::Result<BTreeMap<String, Vec<u8>>> {
        self.gate
            .call(&self.store, self.inner.get_secret_map(r))
            .await
    }

    async fn get_all_secrets(
        &self,
        f: &FindRequest,
    ) -> esr_provider::Result<BTreeMap<String, Vec<u8>>> {
        self.gate
            .call(&self.store, self.inner.get_all_secrets(f))
            .await
    }

    async fn push_secret(&self, req: &PushRequest) -> esr_provider::Result<()> {
        self.gate
            .call(&self.store, self.inner.push_secret(req))
            .await
    }

    async fn delete_secret(&self, r: &PushRemoteRef) -> esr_provider::Result<()> {
        self.gate
            .call(&self.store, self.inner.delete_secret(r))
            .await
    }

    async fn secret_exists(&self, r: &PushRemoteRef) -> esr_provider::Result<bool> {
        self.gate
            .call(&self.store, self.inner.secret_exists(r))
            .await
    }

    /// A validation past the deadline (or refused by a stalled store) is a failed one.
    async fn validate(&self) -> ValidationResult {
        let validated = async { Ok(self.inner.validate().await) };
        match self.gate.call(&self.store, validated).await {
            Ok(v) => v,
            Err(e) => ValidationResult::Error(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A short deadline: the hung calls below never answer, so each test waits for it.
    fn gate(max_in_flight: usize) -> Arc<StoreGate> {
        Arc::new(StoreGate::new(StoreLimits {
            timeout: Duration::from_millis(200),
            max_in_flight,
        }))
    }

    async fn hang() -> Result<u8, ProviderError> {
        std::future::pending().await
    }

    #[tokio::test]
    async fn a_hung_call_times_out_with_a_value_free_error() {
        let g = gate(2);
        let err = g.call("SecretStore/a/vault", hang()).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "the store SecretStore/a/vault did not answer within 200ms"
        );
        assert_eq!(err.kind(), esr_provider::ErrorKind::Transient);
    }

    /// A hung store takes its own slots only: another store answers while every slot of the
    /// hung one is held, and once the hung store timed out, calls that find no free slot fail at
    /// once; an answer clears the stall.
    #[tokio::test]
    async fn a_hung_store_delays_only_its_own_calls() {
        let g = gate(2);
        let hung: Vec<_> = (0..2)
            .map(|_| {
                let g = g.clone();
                tokio::spawn(async move { g.call("SecretStore/a/vault", hang()).await })
            })
            .collect();
        tokio::task::yield_now().await;
        // Every slot of the hung store is taken; the other store is served.
        assert_eq!(
            g.call("SecretStore/b/fake", async { Ok(7u8) })
                .await
                .unwrap(),
            7
        );
        for h in hung {
            assert!(
                h.await
                    .unwrap()
                    .unwrap_err()
                    .to_string()
                    .contains("did not answer")
            );
        }
        // Stalled: with its slots taken, the next call fails without waiting.
        let again: Vec<_> = (0..2)
            .map(|_| {
                let g = g.clone();
                tokio::spawn(async move { g.call("SecretStore/a/vault", hang()).await })
            })
            .collect();
        tokio::task::yield_now().await;
        // (This call would answer at once: it fails because it does not wait for a slot.)
        let err = g
            .call("SecretStore/a/vault", async { Ok(1u8) })
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "the store SecretStore/a/vault is not answering: 2 calls are already waiting for it"
        );
        for h in again {
            let _ = h.await;
        }
        // A free slot and an answer: the store is served again, and no longer stalled.
        assert_eq!(
            g.call("SecretStore/a/vault", async { Ok(2u8) })
                .await
                .unwrap(),
            2
        );
        assert!(
            !g.slot("SecretStore/a/vault")
                .stalled
                .load(Ordering::Relaxed)
        );
    }

    #[tokio::test]
    async fn a_batch_fails_per_ref_when_the_store_hangs() {
        struct Hung;
        #[async_trait]
        impl SecretsClient for Hung {
            async fn get_secret(&self, _r: &SecretRef) -> esr_provider::Result<Vec<u8>> {
                std::future::pending().await
            }
            async fn get_secret_map(
                &self,
                _r: &SecretRef,
            ) -> esr_provider::Result<BTreeMap<String, Vec<u8>>> {
                std::future::pending().await
            }
            async fn get_all_secrets(
                &self,
                _f: &FindRequest,
            ) -> esr_provider::Result<BTreeMap<String, Vec<u8>>> {
                std::future::pending().await
            }
            async fn validate(&self) -> ValidationResult {
                std::future::pending().await
            }
        }
        let g = gate(1);
        let c = g.wrap("ClusterSecretStore//vault".into(), Arc::new(Hung));
        let out = c
            .get_secrets(&[SecretRef::new("a"), SecretRef::new("b")])
            .await;
        assert_eq!(out.len(), 2);
        for r in out {
            assert_eq!(
                r.unwrap_err().to_string(),
                "the store ClusterSecretStore//vault did not answer within 200ms"
            );
        }
        // The store controller's validation is bounded too: a failed validation, not a hang.
        assert_eq!(
            c.validate().await,
            ValidationResult::Error(
                "the store ClusterSecretStore//vault did not answer within 200ms".into()
            )
        );
    }
}
