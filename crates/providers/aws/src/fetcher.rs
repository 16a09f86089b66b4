//! Cost control: coalescing and batching of secret reads.
//!
//! * **Single-flight + short-lived cache.** Reads are keyed by (secret id, version, value-or-tags).
//!   Concurrent reads of the same key share one AWS call; the result (a value, or "does not
//!   exist") is kept for a short TTL (default 3 s) so that ExternalSecrets refreshing in the same
//!   window share it too. The cache lives inside one store client, so the store identity and the
//!   credentials are implicitly part of the key. Errors other than not-found are never cached.
//! * **Micro-batching.** Reads of the current version of different secrets that arrive within a
//!   few milliseconds of each other are sent as one `BatchGetSecretValue` (≤ 20 ids per call).
//!   Version-pinned reads, which BatchGetSecretValue cannot express, use `GetSecretValue`.
//!   If the principal is not allowed to call BatchGetSecretValue, the fetcher falls back to
//!   `GetSecretValue` for good (ESO-era IAM policies keep working).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use moka::future::Cache;
use tokio::sync::{mpsc, oneshot};

use crate::api::{SecretValue, SmApi};
use crate::error::AwsError;
use crate::spec::Version;

/// Maximum ids per BatchGetSecretValue call (an AWS limit).
pub const MAX_BATCH: usize = 20;

/// Tunables of the cost-control layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CostOptions {
    /// How long a fetched value (or a not-found answer) is reused. Zero disables the cache and
    /// the single-flight coalescing.
    pub cache_ttl: Duration,
    /// Maximum number of cached entries per store client.
    pub cache_capacity: u64,
    /// How long to collect reads before sending one BatchGetSecretValue. Zero disables batching.
    pub batch_window: Duration,
}

impl Default for CostOptions {
    fn default() -> Self {
        Self {
            cache_ttl: Duration::from_secs(3),
            cache_capacity: 10_000,
            batch_window: Duration::from_millis(10),
        }
    }
}

/// What a read is for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FetchKey {
    /// The secret name or ARN, prefix already applied.
    pub id: String,
    pub version: Version,
    /// `metadataPolicy: Fetch` (tags instead of the value).
    pub metadata: bool,
}

impl FetchKey {
    pub fn value(id: impl Into<String>, version: Version) -> Self {
        Self {
            id: id.into(),
            version,
            metadata: false,
        }
    }
}

/// A cached answer: a value or "does not exist".
#[derive(Debug, Clone)]
enum Outcome {
    Found(Arc<SecretValue>),
    Missing(String),
}

type Reply = oneshot::Sender<Result<Arc<Outcome>, AwsError>>;

struct BatchReq {
    id: String,
    reply: Reply,
}

/// Coalescing, caching, batching reader for one store client.
pub struct Fetcher {
    api: Arc<SmApi>,
    cache: Option<Cache<FetchKey, Arc<Outcome>>>,
    batch_tx: Option<mpsc::UnboundedSender<BatchReq>>,
    batch_disabled: Arc<AtomicBool>,
}

impl std::fmt::Debug for Fetcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fetcher")
            .field("cache", &self.cache.is_some())
            .field("batching", &self.batch_tx.is_some())
            .finish()
    }
}

fn to_outcome(res: Result<SecretValue, AwsError>) -> Result<Arc<Outcome>, AwsError> {
    match res {
        Ok(v) => Ok(Arc::new(Outcome::Found(Arc::new(v)))),
        Err(e) if e.is_not_found() => Ok(Arc::new(Outcome::Missing(e.message))),
        Err(e) => Err(e),
    }
}

impl Fetcher {
    /// Must be called inside a Tokio runtime when batching is enabled (it spawns the batcher).
    pub fn new(api: Arc<SmApi>, opts: &CostOptions) -> Self {
        let cache = (!opts.cache_ttl.is_zero()).then(|| {
            Cache::builder()
                .max_capacity(opts.cache_capacity)
                .time_to_live(opts.cache_ttl)
                .build()
        });
        let batch_disabled = Arc::new(AtomicBool::new(false));
        let batch_tx = (!opts.batch_window.is_zero()).then(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            tokio::spawn(run_batcher(
                api.clone(),
                rx,
                opts.batch_window,
                batch_disabled.clone(),
            ));
            tx
        });
        Self {
            api,
            cache,
            batch_tx,
            batch_disabled,
        }
    }

    pub fn api(&self) -> &SmApi {
        &self.api
    }

    /// Read one secret (value or tags).
    pub async fn fetch(&self, key: &FetchKey) -> Result<Arc<SecretValue>, AwsError> {
        let outcome = match &self.cache {
            Some(cache) => cache
                .try_get_with(key.clone(), self.load(key.clone()))
                .await
                .map_err(|e| (*e).clone())?,
            None => self.load(key.clone()).await?,
        };
        match &*outcome {
            Outcome::Found(v) => Ok(v.clone()),
            Outcome::Missing(msg) => Err(AwsError::not_found(msg.clone())),
        }
    }

    /// Read many secrets concurrently; they coalesce into as few calls as possible.
    pub async fn fetch_many(
        &self,
        keys: &[FetchKey],
    ) -> Vec<(FetchKey, Result<Arc<SecretValue>, AwsError>)> {
        let futs = keys
            .iter()
            .map(|k| async move { (k.clone(), self.fetch(k).await) });
        futures::future::join_all(futs).await
    }

    /// Forget everything cached about `id` (after a write).
    pub async fn invalidate(&self, id: &str) {
        if let Some(cache) = &self.cache {
            for metadata in [false, true] {
                cache
                    .invalidate(&FetchKey {
                        id: id.to_string(),
                        version: Version::Current,
                        metadata,
                    })
                    .await;
            }
        }
    }

    /// Seed the cache with values obtained otherwise (e.g. by a `find`).
    pub async fn seed(&self, value: &SecretValue) {
        if let Some(cache) = &self.cache {
            let out = Arc::new(Outcome::Found(Arc::new(value.clone())));
            cache
                .insert(FetchKey::value(value.name.clone(), Version::Current), out)
                .await;
        }
    }

    async fn load(&self, key: FetchKey) -> Result<Arc<Outcome>, AwsError> {
        if key.metadata {
            return match self.api.describe(&key.id).await {
                Ok(d) => {
                    let json = serde_json::to_string(&d.tags).map_err(|e| {
                        AwsError::invalid(format!("cannot encode tags of {}: {e}", key.id))
                    })?;
                    Ok(Arc::new(Outcome::Found(Arc::new(SecretValue {
                        name: d.name,
                        arn: d.arn,
                        version_id: Some(key.version.label()),
                        string: Some(json),
                        binary: None,
                    }))))
                }
                Err(e) if e.is_not_found() => Ok(Arc::new(Outcome::Missing(e.message))),
                Err(e) => Err(e),
            };
        }
        if key.version == Version::Current
            && !self.batch_disabled.load(Ordering::Relaxed)
            && let Some(tx) = &self.batch_tx
        {
            let (reply, rx) = oneshot::channel();
            if tx
                .send(BatchReq {
                    id: key.id.clone(),
                    reply,
                })
                .is_ok()
                && let Ok(res) = rx.await
            {
                return res;
            }
        }
        to_outcome(self.api.get_secret_value(&key.id, &key.version).await)
    }
}

async fn run_batcher(
    api: Arc<SmApi>,
    mut rx: mpsc::UnboundedReceiver<BatchReq>,
    window: Duration,
    disabled: Arc<AtomicBool>,
) {
    while let Some(first) = rx.recv().await {
        let mut pending: BTreeMap<String, Vec<Reply>> = BTreeMap::new();
        pending.entry(first.id).or_default().push(first.reply);
        let deadline = tokio::time::Instant::now() + window;
        let mut closed = false;
        while pending.len() < MAX_BATCH {
            tokio::select! {
                r = rx.recv() => match r {
                    Some(r) => pending.entry(r.id).or_default().push(r.reply),
                    None => { closed = true; break; }
                },
                _ = tokio::time::sleep_until(deadline) => break,
            }
        }
        tokio::spawn(execute_batch(api.clone(), pending, disabled.clone()));
        if closed {
            break;
        }
    }
}

fn deliver(replies: Vec<Reply>, res: Result<Arc<Outcome>, AwsError>) {
    for r in replies {
        // The caller may have gone away; nothing to do then.
        let _ = r.send(res.clone());
    }
}

async fn individually(api: Arc<SmApi>, pending: BTreeMap<String, Vec<Reply>>) {
    let futs = pending.into_iter().map(|(id, replies)| {
        let api = api.clone();
        async move {
            let res = to_outcome(api.get_secret_value(&id, &Version::Current).await);
            deliver(replies, res);
        }
    });
    futures::future::join_all(futs).await;
}

async fn execute_batch(
    api: Arc<SmApi>,
    mut pending: BTreeMap<String, Vec<Reply>>,
    disabled: Arc<AtomicBool>,
) {
    if pending.len() == 1 || disabled.load(Ordering::Relaxed) {
        return individually(api, pending).await;
    }
    let ids: Vec<String> = pending.keys().cloned().collect();
    match api.batch_get_by_ids(&ids).await {
        Ok(batch) => {
            for v in batch.values {
                let id = if pending.contains_key(&v.name) {
                    Some(v.name.clone())
                } else if pending.contains_key(&v.arn) {
                    Some(v.arn.clone())
                } else {
                    None
                };
                if let Some(replies) = id.and_then(|id| pending.remove(&id)) {
                    deliver(replies, Ok(Arc::new(Outcome::Found(Arc::new(v)))));
                }
            }
            for (id, err) in batch.errors {
                if let Some(replies) = pending.remove(&id) {
                    let res = if err.is_not_found() {
                        Ok(Arc::new(Outcome::Missing(err.message)))
                    } else {
                        Err(err)
                    };
                    deliver(replies, res);
                }
            }
            // Ids AWS answered under another spelling (e.g. a partial ARN): ask one by one.
            if !pending.is_empty() {
                individually(api, pending).await;
            }
        }
        Err(e) if e.message.starts_with("BatchGetSecretValue: AccessDenied") => {
            tracing::warn!(
                error = %e.message,
                "BatchGetSecretValue is not allowed for this principal; falling back to GetSecretValue (grant secretsmanager:BatchGetSecretValue to reduce API calls)"
            );
            disabled.store(true, Ordering::Relaxed);
            individually(api, pending).await;
        }
        Err(e) => {
            for (_, replies) in pending {
                deliver(replies, Err(e.clone()));
            }
        }
    }
}

/// Group keys by distinct value, to fetch each secret once per request whatever the number of
/// properties taken from it.
pub fn distinct(keys: impl IntoIterator<Item = FetchKey>) -> Vec<FetchKey> {
    let mut seen: HashMap<FetchKey, ()> = HashMap::new();
    let mut out = Vec::new();
    for k in keys {
        if seen.insert(k.clone(), ()).is_none() {
            out.push(k);
        }
    }
    out
}
