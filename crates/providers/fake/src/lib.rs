//! The `fake` provider (ESO `providers/v1/fake`): serves the `data` of the store spec, and keeps
//! pushed values in memory.
//!
//! Semantics (as ESO v2.9.0):
//! - entries are keyed by `key + version`; `GetSecret` needs an exact version match (an empty
//!   version matches only an entry without version), otherwise `Secret does not exist`;
//! - `property` is a gjson path over the value; a missing path is `Secret does not exist`;
//! - `GetSecretMap` decodes the (property-selected) value as a JSON object, string values unquoted;
//! - `find` needs `name.regexp` (tags and path alone are an error), takes the highest version of
//!   each key (string comparison) and applies the conversion strategy;
//! - `PushSecret` stores the value in memory; a key that comes from the store spec is refused with
//!   `key already exists`; pushed values survive store updates (they are kept per store identity in
//!   a process-wide map);
//! - `validationResult` 0 / unset → Ready, 1 → Unknown, anything else → Error `unable to validate`;
//! - capabilities ReadWrite, maintenance NotMaintained.
//!
//! Deliberate differences from ESO, both supersets that no ESO user can rely on against:
//! - pushing a whole Secret (no `secretKey`) stores the JSON object of all its keys (ESO stores an
//!   empty value);
//! - `DeleteSecret` removes a pushed value (ESO does nothing); values from the spec stay.
//!
//! ESO v1's fake provider has no `valueMap` (it was removed with v1beta1); a JSON `value` read with
//! `dataFrom.extract` gives the same result.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use esr_api::providers::fake::FakeProvider as FakeSpec;
use esr_provider::find::NameMatcher;
use esr_provider::keys::{convert_keys, json_object_to_map};
use esr_provider::{
    Capabilities, ClientContext, FindRequest, Maintenance, Provider, ProviderError, PushRemoteRef,
    PushRequest, Result, SecretRef, SecretsClient, StoreInfo, ValidationResult,
};

/// The `spec.provider` key.
pub const NAME: &str = "fake";
/// Provider label in API-call metrics.
pub const METRIC_PROVIDER: &str = "Fake";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Origin {
    /// From the store spec.
    Store,
    /// Pushed.
    Pushed,
}

#[derive(Clone)]
struct Entry {
    value: Vec<u8>,
    version: String,
    origin: Origin,
}

type Db = BTreeMap<String, Entry>;

type Stores = Arc<Mutex<HashMap<String, Arc<Mutex<Db>>>>>;

/// The fake provider. Pushed values are kept per store identity (`Kind/namespace/name`) in a
/// process-wide map shared by every instance made with [`FakeProvider::new`].
pub struct FakeProvider {
    stores: Stores,
}

impl std::fmt::Debug for FakeProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeProvider").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for FakeClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeClient")
            .field("validation_result", &self.validation_result)
            .finish_non_exhaustive()
    }
}

impl Default for FakeProvider {
    fn default() -> Self {
        Self::new()
    }
}

impl FakeProvider {
    /// A provider using the process-wide store of pushed values.
    pub fn new() -> Self {
        static SHARED: std::sync::OnceLock<Stores> = std::sync::OnceLock::new();
        FakeProvider {
            stores: SHARED.get_or_init(Stores::default).clone(),
        }
    }

    /// A provider with its own, empty store of pushed values (tests).
    pub fn isolated() -> Self {
        FakeProvider {
            stores: Stores::default(),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> Result<MutexGuard<'_, T>> {
    m.lock()
        .map_err(|_| ProviderError::transient("fake provider state lock poisoned"))
}

fn spec_of(store: &StoreInfo) -> Result<FakeSpec> {
    store
        .provider_spec::<FakeSpec>(NAME)
        .map_err(|_| ProviderError::invalid("missing store provider fake"))
}

fn map_key(key: &str, version: &str) -> String {
    format!("{key}{version}")
}

#[async_trait]
impl Provider for FakeProvider {
    fn name(&self) -> &'static str {
        NAME
    }

    fn metric_provider(&self) -> &'static str {
        METRIC_PROVIDER
    }

    fn capabilities(&self, _store: &StoreInfo) -> Capabilities {
        Capabilities::ReadWrite
    }

    fn maintenance(&self) -> Maintenance {
        Maintenance::NotMaintained
    }

    fn validate_store(&self, store: &StoreInfo) -> Result<Vec<String>> {
        let Some(raw) = store.provider_json(NAME) else {
            return Ok(Vec::new());
        };
        let spec: FakeSpec = serde_json::from_value(raw.clone())
            .map_err(|e| ProviderError::invalid(format!("invalid spec.provider.fake: {e}")))?;
        for (pos, d) in spec.data.iter().enumerate() {
            if d.key.is_empty() {
                return Err(ProviderError::invalid(format!(
                    "key must be set in data {pos}"
                )));
            }
            if d.value.is_empty() {
                return Err(ProviderError::invalid(format!(
                    "at least one value must be set in data {pos}"
                )));
            }
        }
        Ok(Vec::new())
    }

    async fn new_client(&self, ctx: &ClientContext<'_>) -> Result<Arc<dyn SecretsClient>> {
        let spec = spec_of(ctx.store)?;
        let db = {
            let mut stores = lock(&self.stores)?;
            stores
                .entry(ctx.store.identity())
                .or_insert_with(|| Arc::new(Mutex::new(Db::new())))
                .clone()
        };
        {
            let mut entries = lock(&db)?;
            // Spec entries are replaced by the current spec; pushed ones are kept.
            entries.retain(|_, e| e.origin == Origin::Pushed);
            for d in &spec.data {
                let version = d.version.clone().unwrap_or_default();
                entries.insert(
                    map_key(&d.key, &version),
                    Entry {
                        value: d.value.clone().into_bytes(),
                        version,
                        origin: Origin::Store,
                    },
                );
            }
        }
        Ok(Arc::new(FakeClient {
            db,
            validation_result: spec.validation_result,
        }))
    }
}

/// A client over one store's in-memory data.
pub struct FakeClient {
    db: Arc<Mutex<Db>>,
    validation_result: Option<i64>,
}

impl FakeClient {
    fn lookup(&self, r: &SecretRef) -> Result<Vec<u8>> {
        let db = lock(&self.db)?;
        match db.get(&map_key(&r.key, r.version_str())) {
            Some(e) if e.version == r.version_str() => Ok(e.value.clone()),
            _ => Err(ProviderError::not_found().with_key(r.key.clone())),
        }
    }
}

#[async_trait]
impl SecretsClient for FakeClient {
    async fn get_secret(&self, r: &SecretRef) -> Result<Vec<u8>> {
        let value = self.lookup(r)?;
        match r.property() {
            None => Ok(value),
            Some(p) => esr_provider::gjson::get_bytes(&value, p)
                .ok_or_else(|| ProviderError::not_found().with_key(r.key.clone())),
        }
    }

    async fn get_secret_map(&self, r: &SecretRef) -> Result<BTreeMap<String, Vec<u8>>> {
        let data = self.get_secret(r).await?;
        json_object_to_map(&data).map_err(|e| e.wrap("unable to unmarshal secret"))
    }

    async fn get_all_secrets(&self, f: &FindRequest) -> Result<BTreeMap<String, Vec<u8>>> {
        let Some(re) = f.name_regexp() else {
            return Err(ProviderError::invalid(
                "unsupported find operator: the fake provider only supports find.name",
            ));
        };
        let matcher = NameMatcher::new(re)?;
        let db = lock(&self.db)?;
        let mut latest: BTreeMap<String, (&str, &[u8])> = BTreeMap::new();
        for (key, e) in db.iter() {
            let original = key.strip_suffix(e.version.as_str()).unwrap_or(key);
            if !matcher.matches(original) {
                continue;
            }
            match latest.get(original) {
                Some((v, _)) if *v >= e.version.as_str() => {}
                _ => {
                    latest.insert(original.to_string(), (e.version.as_str(), &e.value));
                }
            }
        }
        convert_keys(
            f.conversion_strategy,
            latest.into_iter().map(|(k, (_, v))| (k, v.to_vec())),
        )
    }

    async fn push_secret(&self, req: &PushRequest) -> Result<()> {
        let mut db = lock(&self.db)?;
        match db.get_mut(req.remote_key()) {
            None => {
                db.insert(
                    req.remote_key().to_string(),
                    Entry {
                        value: req.value.clone(),
                        version: String::new(),
                        origin: Origin::Pushed,
                    },
                );
                Ok(())
            }
            Some(e) if e.origin == Origin::Pushed => {
                e.value = req.value.clone();
                Ok(())
            }
            Some(_) => Err(ProviderError::invalid("key already exists").with_key(req.remote_key())),
        }
    }

    async fn delete_secret(&self, r: &PushRemoteRef) -> Result<()> {
        let mut db = lock(&self.db)?;
        if db.get(&r.remote_key).map(|e| e.origin) == Some(Origin::Pushed) {
            db.remove(&r.remote_key);
        }
        Ok(())
    }

    async fn secret_exists(&self, r: &PushRemoteRef) -> Result<bool> {
        Ok(lock(&self.db)?.contains_key(&r.remote_key))
    }

    async fn validate(&self) -> ValidationResult {
        match self.validation_result {
            None | Some(0) => ValidationResult::Ready,
            Some(1) => ValidationResult::Unknown,
            Some(_) => ValidationResult::Error("unable to validate".to_string()),
        }
    }
}

#[cfg(test)]
mod tests;
