//! The `VaultDynamicSecret` generator: calls an arbitrary Vault path and returns the response,
//! renewing the lease it got on later refreshes instead of minting new credentials.
//!
//! Renewal rules ([`VaultProvider::generate`]): with a previous state of the same spec whose lease
//! is renewable and not yet expired, the lease is renewed (`sys/leases/renew` for secret leases,
//! `auth/token/renew` for tokens) asking for the same duration again, and the previous values are
//! returned. New credentials are issued when there is no state, the spec changed, the lease is not
//! renewable, the renewal fails, or Vault grants less than was asked (the lease reached its max
//! TTL, so it is replaced while the old one is still valid).
//!
//! The state lives in memory ([`VaultProvider::generate_for`]): a restart of esr (or a new
//! leader) issues new credentials once; the old lease then expires at its TTL. Entries whose lease
//! has expired (last issue or renewal + lease duration) are dropped whenever the map is touched,
//! so the map does not grow with deleted consumers.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use esr_api::generators::{VaultDynamicSecretResultType, VaultDynamicSecretSpec};
use esr_provider::metrics::CallRecorder;
use esr_provider::{ClientContext, KubeAccess, ProviderError, Result, StoreInfo, StoreKind};
use serde_json::{Value, json};

use crate::VaultProvider;
use crate::client::value_bytes;

/// One generator run.
#[derive(Clone)]
pub struct GeneratorRequest<'a> {
    /// Generator name (`metadata.name`).
    pub name: &'a str,
    /// Generator namespace; credential references resolve here.
    pub namespace: &'a str,
    /// The spec.
    pub spec: &'a VaultDynamicSecretSpec,
    /// Kubernetes IO for credential references.
    pub kube: Arc<dyn KubeAccess>,
    /// API-call metrics.
    pub recorder: Arc<dyn CallRecorder>,
}

impl std::fmt::Debug for GeneratorRequest<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GeneratorRequest")
            .field("name", &self.name)
            .field("namespace", &self.namespace)
            .field("path", &self.spec.path)
            .finish_non_exhaustive()
    }
}

/// What was issued, so a later refresh can renew it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lease {
    /// Nothing renewable (a new value is generated on every refresh).
    None,
    /// A secret lease (`lease_id`), renewed with `sys/leases/renew`.
    Lease(String),
    /// A token (`auth.client_token`, e.g. from `auth/token/create`), renewed with
    /// `auth/token/renew`. The token is kept only in memory.
    Token,
}

/// Generator state between refreshes. Holds the generated values (needed to return them again
/// after a renewal); its `Debug` output redacts them.
#[derive(Clone)]
pub struct DynamicSecretState {
    /// What can be renewed.
    pub lease: Lease,
    /// Whether Vault said the lease is renewable.
    pub renewable: bool,
    /// Lease duration in seconds from the last issue or renewal.
    pub lease_duration: u64,
    /// How many times the lease was renewed since it was issued.
    pub renewals: u32,
    /// When the lease was last issued or renewed (taken before the request was sent, so the
    /// expiry estimate errs on the early side).
    pub touched: Instant,
    spec_hash: String,
    token: Option<String>,
    data: BTreeMap<String, Vec<u8>>,
}

impl std::fmt::Debug for DynamicSecretState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynamicSecretState")
            .field("lease", &self.lease)
            .field("renewable", &self.renewable)
            .field("lease_duration", &self.lease_duration)
            .field("renewals", &self.renewals)
            .field("touched", &self.touched)
            .field("keys", &self.data.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl DynamicSecretState {
    /// When the lease expires by Vault's last answer (`touched + lease_duration`).
    pub fn expires_at(&self) -> Instant {
        self.touched + Duration::from_secs(self.lease_duration)
    }

    /// Whether the lease has expired at `now`.
    pub fn expired(&self, now: Instant) -> bool {
        self.expires_at() <= now
    }
}

/// Lease states kept by the provider for [`VaultProvider::generate_for`]. Every access first
/// drops the entries whose lease has expired.
#[derive(Default)]
pub(crate) struct LeaseStates(Mutex<HashMap<String, DynamicSecretState>>);

impl LeaseStates {
    fn with<T>(
        &self,
        now: Instant,
        f: impl FnOnce(&mut HashMap<String, DynamicSecretState>) -> T,
    ) -> T {
        let mut m = match self.0.lock() {
            Ok(m) => m,
            Err(poisoned) => poisoned.into_inner(),
        };
        m.retain(|_, s| !s.expired(now));
        f(&mut m)
    }

    /// The live state of `key`.
    pub(crate) fn get(&self, key: &str, now: Instant) -> Option<DynamicSecretState> {
        self.with(now, |m| m.get(key).cloned())
    }

    /// Stores the state of `key`; a state with nothing to renew is not kept (the next refresh
    /// issues new values anyway).
    pub(crate) fn put(&self, key: String, state: DynamicSecretState, now: Instant) {
        self.with(now, |m| {
            if state.renewable && !state.expired(now) {
                m.insert(key, state);
            } else {
                m.remove(&key);
            }
        });
    }

    /// Removes `key`.
    pub(crate) fn remove(&self, key: &str, now: Instant) {
        self.with(now, |m| m.remove(key));
    }

    /// Number of live entries.
    pub(crate) fn len(&self, now: Instant) -> usize {
        self.with(now, |m| m.len())
    }
}

fn spec_hash(spec: &VaultDynamicSecretSpec) -> String {
    use sha2::{Digest, Sha256};
    let text = serde_json::to_string(spec).unwrap_or_default();
    hex::encode(&Sha256::digest(text.as_bytes())[..16])
}

fn to_map(v: Option<&Value>) -> BTreeMap<String, Vec<u8>> {
    match v {
        Some(Value::Object(m)) => m.iter().map(|(k, v)| (k.clone(), value_bytes(v))).collect(),
        _ => BTreeMap::new(),
    }
}

fn state_key(namespace: &str, name: &str, consumer: &str) -> String {
    format!("{namespace}/{name}\u{0}{consumer}")
}

impl VaultProvider {
    /// Runs the generator. With a `previous` state of the same spec whose lease is renewable, the
    /// lease is renewed and the previous values are returned; otherwise (no state, spec changed,
    /// not renewable, renewal refused) the path is called again and new values are returned.
    pub async fn generate(
        &self,
        req: &GeneratorRequest<'_>,
        previous: Option<&DynamicSecretState>,
    ) -> Result<(BTreeMap<String, Vec<u8>>, DynamicSecretState)> {
        let started = Instant::now();
        let spec = req.spec;
        let mut store_spec = json!({"provider": {"vault": spec.provider}});
        if let Some(rs) = &spec.retry_settings {
            store_spec["retrySettings"] = json!(rs);
        }
        let store = StoreInfo::new(
            StoreKind::SecretStore,
            req.name,
            Some(req.namespace.to_string()),
            store_spec,
        );
        let ctx = ClientContext::new(&store, Some(req.namespace), req.kube.clone())
            .with_recorder(req.recorder.clone());
        let session = self.session(&ctx, &spec.provider, "generator").await?;
        let hash = spec_hash(spec);

        if let Some(prev) =
            previous.filter(|p| p.spec_hash == hash && p.renewable && !p.expired(started))
        {
            let token = session.token().await?;
            let renewed = match (&prev.lease, &prev.token) {
                (Lease::Lease(id), _) => session
                    .transport
                    .request(
                        "RenewLease",
                        "PUT",
                        "sys/leases/renew",
                        &[],
                        Some(&json!({"lease_id": id, "increment": prev.lease_duration})),
                        Some(&token),
                        None,
                    )
                    .await
                    .map(|r| {
                        let b = r.and_then(|r| r.body).unwrap_or(Value::Null);
                        (
                            b.get("lease_duration").and_then(Value::as_u64).unwrap_or(0),
                            b.get("renewable").and_then(Value::as_bool).unwrap_or(false),
                        )
                    }),
                (Lease::Token, Some(t)) => session
                    .transport
                    .request(
                        "RenewLease",
                        "POST",
                        "auth/token/renew",
                        &[],
                        Some(&json!({"token": t, "increment": prev.lease_duration})),
                        Some(&token),
                        None,
                    )
                    .await
                    .map(|r| {
                        let a = r
                            .and_then(|r| r.body)
                            .and_then(|b| b.get("auth").cloned())
                            .unwrap_or(Value::Null);
                        (
                            a.get("lease_duration").and_then(Value::as_u64).unwrap_or(0),
                            a.get("renewable").and_then(Value::as_bool).unwrap_or(false),
                        )
                    }),
                _ => Err(ProviderError::invalid("nothing to renew")),
            };
            match renewed {
                Ok((duration, renewable)) if duration > 0 && duration >= prev.lease_duration => {
                    let mut st = prev.clone();
                    st.lease_duration = duration;
                    st.renewable = renewable;
                    st.renewals += 1;
                    st.touched = started;
                    return Ok((st.data.clone(), st));
                }
                Ok((duration, _)) => tracing::info!(
                    generator = req.name,
                    granted = duration,
                    asked = prev.lease_duration,
                    "lease reached its max TTL; issuing new credentials"
                ),
                Err(e) => {
                    tracing::info!(generator = req.name, error = %e, "lease renewal failed; issuing new credentials")
                }
            }
        }

        let method = spec
            .method
            .as_deref()
            .filter(|m| !m.is_empty())
            .unwrap_or("GET")
            .to_ascii_uppercase();
        let mut query: Vec<(String, String)> = Vec::new();
        if let Some(gp) = &spec.get_parameters {
            for (k, vs) in gp {
                for v in vs {
                    query.push((k.clone(), v.clone()));
                }
            }
        }
        // As ESO: `parameters` are the body of a write (POST/PUT); GET, LIST and DELETE send none.
        let body = spec
            .parameters
            .as_ref()
            .map(|p| p.0.clone())
            .filter(|_| !matches!(method.as_str(), "GET" | "LIST" | "DELETE"));
        let token = session.token().await?;
        let mut resp = session
            .transport
            .request(
                "GeneratorRequest",
                &method,
                spec.path.trim_start_matches('/'),
                &query,
                body.as_ref(),
                Some(&token),
                None,
            )
            .await;
        if let Err(e) = &resp
            && e.kind() == esr_provider::ErrorKind::Auth
        {
            session.invalidate(&token).await;
            let token = session.token().await?;
            resp = session
                .transport
                .request(
                    "GeneratorRequest",
                    &method,
                    spec.path.trim_start_matches('/'),
                    &query,
                    body.as_ref(),
                    Some(&token),
                    None,
                )
                .await;
        }
        let body = resp?.and_then(|r| r.body).unwrap_or(Value::Null);
        let result_type = spec.result_type.unwrap_or_default();
        let data = match result_type {
            VaultDynamicSecretResultType::Data => to_map(body.get("data")),
            VaultDynamicSecretResultType::Auth => to_map(body.get("auth")),
            VaultDynamicSecretResultType::Raw => to_map(Some(&body)),
        };
        if data.is_empty() && !spec.allow_empty_response.unwrap_or(false) {
            return Err(ProviderError::invalid(format!(
                "got empty response for path {}",
                spec.path
            )));
        }
        let lease_id = body
            .get("lease_id")
            .and_then(Value::as_str)
            .filter(|l| !l.is_empty());
        let auth = body.get("auth").filter(|a| !a.is_null());
        let (lease, renewable, duration, token) = if let Some(id) = lease_id {
            (
                Lease::Lease(id.to_string()),
                body.get("renewable")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
                body.get("lease_duration")
                    .and_then(Value::as_u64)
                    .unwrap_or(0),
                None,
            )
        } else if let Some(a) = auth
            && let Some(t) = a.get("client_token").and_then(Value::as_str)
        {
            (
                Lease::Token,
                a.get("renewable").and_then(Value::as_bool).unwrap_or(false),
                a.get("lease_duration").and_then(Value::as_u64).unwrap_or(0),
                Some(t.to_string()),
            )
        } else {
            (Lease::None, false, 0, None)
        };
        let state = DynamicSecretState {
            lease,
            renewable,
            lease_duration: duration,
            renewals: 0,
            touched: started,
            spec_hash: hash,
            token,
            data: data.clone(),
        };
        Ok((data, state))
    }

    /// [`VaultProvider::generate`] with the state kept in the provider, keyed by generator identity
    /// (namespace/name) and `consumer` (e.g. `ExternalSecret ns/name`, `dataFrom[i]`).
    pub async fn generate_for(
        &self,
        req: &GeneratorRequest<'_>,
        consumer: &str,
    ) -> Result<BTreeMap<String, Vec<u8>>> {
        let key = state_key(req.namespace, req.name, consumer);
        let prev = self.leases.get(&key, Instant::now());
        let (data, state) = self.generate(req, prev.as_ref()).await?;
        self.leases.put(key, state, Instant::now());
        Ok(data)
    }

    /// The stored state of a generator/consumer pair.
    pub fn generator_state(
        &self,
        namespace: &str,
        name: &str,
        consumer: &str,
    ) -> Option<DynamicSecretState> {
        self.leases
            .get(&state_key(namespace, name, consumer), Instant::now())
    }

    /// Number of generator/consumer pairs with a live, renewable lease.
    pub fn generator_state_count(&self) -> usize {
        self.leases.len(Instant::now())
    }

    /// Forgets a generator/consumer pair (the consumer was deleted); the lease then expires on
    /// its own.
    pub fn forget_generator_state(&self, namespace: &str, name: &str, consumer: &str) {
        self.leases
            .remove(&state_key(namespace, name, consumer), Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(renewable: bool, lease_duration: u64, touched: Instant) -> DynamicSecretState {
        DynamicSecretState {
            lease: Lease::Lease("database/creds/r/abc".into()),
            renewable,
            lease_duration,
            renewals: 0,
            touched,
            spec_hash: "h".into(),
            token: None,
            data: BTreeMap::from([("password".to_string(), b"pw".to_vec())]),
        }
    }

    #[test]
    fn expired_leases_are_dropped_when_the_map_is_touched() {
        let t0 = Instant::now();
        let at = |secs: u64| t0 + Duration::from_secs(secs);
        let m = LeaseStates::default();
        m.put("short".into(), state(true, 10, t0), t0);
        m.put("long".into(), state(true, 100, t0), t0);
        assert_eq!(m.len(t0), 2);
        assert!(m.get("short", at(9)).is_some());
        // Touching the map at t0+10s drops the expired entry, whichever key is asked for.
        assert!(m.get("long", at(10)).is_some());
        assert_eq!(m.len(at(10)), 1);
        assert!(m.get("short", at(10)).is_none());
        // A renewal moves the expiry: renewed at t0+50s for 100s more.
        m.put("long".into(), state(true, 100, at(50)), at(50));
        assert_eq!(m.len(at(149)), 1);
        // put() of another key at a later time also prunes.
        m.put("other".into(), state(true, 1000, at(150)), at(150));
        assert!(m.get("long", at(150)).is_none());
        assert_eq!(m.len(at(150)), 1);
        // The map is empty once every lease has expired.
        assert_eq!(m.len(at(2000)), 0);
    }

    #[test]
    fn states_with_nothing_to_renew_are_not_kept() {
        let t0 = Instant::now();
        let m = LeaseStates::default();
        m.put("k".into(), state(true, 60, t0), t0);
        assert_eq!(m.len(t0), 1);
        // A refresh that got a non-renewable value replaces (removes) the old state.
        m.put("k".into(), state(false, 60, t0), t0);
        assert_eq!(m.len(t0), 0);
        m.put("zero".into(), state(true, 0, t0), t0);
        assert_eq!(m.len(t0), 0);
    }

    #[test]
    fn debug_output_has_no_values() {
        let s = state(true, 60, Instant::now());
        let text = format!("{s:?}");
        assert!(text.contains("password"), "{text}");
        assert!(!text.contains("\"pw\""), "{text}");
    }
}
