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
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

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
    /// Fill batches that have room with other secrets this client read recently and whose cached
    /// value has expired (refresh-ahead). A batch call costs the same whatever the number of ids
    /// (≤ 20), so this makes sequential reconciles share calls too.
    pub prefetch: bool,
}

impl Default for CostOptions {
    fn default() -> Self {
        Self {
            cache_ttl: Duration::from_secs(3),
            cache_capacity: 10_000,
            batch_window: Duration::from_millis(10),
            prefetch: true,
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
    known: Option<Known>,
}

/// Secrets (current version) read recently through this client: candidates for refresh-ahead.
type Known = Arc<Mutex<HashMap<String, Instant>>>;

/// How long a secret stays a refresh-ahead candidate after its last read.
const KNOWN_FOR: Duration = Duration::from_secs(15 * 60);
/// At most this many candidates are remembered per client.
const KNOWN_MAX: usize = 10_000;

/// What the batcher needs besides the API.
#[derive(Clone)]
struct BatchCtx {
    api: Arc<SmApi>,
    disabled: Arc<AtomicBool>,
    cache: Option<Cache<FetchKey, Arc<Outcome>>>,
    known: Option<Known>,
    /// Ids in batches being sent, so refresh-ahead does not fetch them twice.
    in_flight: Arc<Mutex<HashMap<String, usize>>>,
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
        let known: Option<Known> = (opts.prefetch && cache.is_some()).then(Known::default);
        let batch_tx = (!opts.batch_window.is_zero()).then(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            let ctx = BatchCtx {
                api: api.clone(),
                disabled: batch_disabled.clone(),
                cache: cache.clone(),
                known: known.clone(),
                in_flight: Arc::default(),
            };
            tokio::spawn(run_batcher(ctx, rx, opts.batch_window));
            tx
        });
        Self {
            api,
            cache,
            batch_tx,
            batch_disabled,
            known,
        }
    }

    pub fn api(&self) -> &SmApi {
        &self.api
    }

    /// Read one secret (value or tags).
    pub async fn fetch(&self, key: &FetchKey) -> Result<Arc<SecretValue>, AwsError> {
        if let Some(known) = &self.known
            && key.version == Version::Current
            && !key.metadata
            && let Ok(mut k) = known.lock()
            && (k.len() < KNOWN_MAX || k.contains_key(&key.id))
        {
            k.insert(key.id.clone(), Instant::now());
        }
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

async fn run_batcher(ctx: BatchCtx, mut rx: mpsc::UnboundedReceiver<BatchReq>, window: Duration) {
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
        tokio::spawn(execute_batch(ctx.clone(), pending));
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

/// Recently read secrets whose cached value is gone, to fill `room` free slots of a batch.
async fn refresh_ahead(
    ctx: &BatchCtx,
    pending: &BTreeMap<String, Vec<Reply>>,
    room: usize,
) -> Vec<String> {
    let (Some(known), Some(cache)) = (&ctx.known, &ctx.cache) else {
        return Vec::new();
    };
    let now = Instant::now();
    let busy: Vec<String> = ctx
        .in_flight
        .lock()
        .map(|f| f.keys().cloned().collect())
        .unwrap_or_default();
    let candidates: Vec<String> = match known.lock() {
        Ok(mut k) => {
            k.retain(|_, seen| now.duration_since(*seen) < KNOWN_FOR);
            k.keys()
                .filter(|id| !pending.contains_key(*id) && !busy.contains(*id))
                .cloned()
                .collect()
        }
        Err(_) => return Vec::new(),
    };
    candidates
        .into_iter()
        .filter(|id| !cache.contains_key(&FetchKey::value(id.clone(), Version::Current)))
        .take(room)
        .collect()
}

async fn execute_batch(ctx: BatchCtx, pending: BTreeMap<String, Vec<Reply>>) {
    if ctx.disabled.load(Ordering::Relaxed) {
        return individually(ctx.api.clone(), pending).await;
    }
    let extra = refresh_ahead(&ctx, &pending, MAX_BATCH.saturating_sub(pending.len())).await;
    if pending.len() == 1 && extra.is_empty() {
        return individually(ctx.api.clone(), pending).await;
    }
    let ids: Vec<String> = pending.keys().chain(extra.iter()).cloned().collect();
    mark(&ctx, &ids, true);
    run_batch(ctx.clone(), pending, extra).await;
    mark(&ctx, &ids, false);
}

fn mark(ctx: &BatchCtx, ids: &[String], busy: bool) {
    if let Ok(mut f) = ctx.in_flight.lock() {
        for id in ids {
            if busy {
                *f.entry(id.clone()).or_insert(0) += 1;
            } else if let Some(n) = f.get_mut(id) {
                *n -= 1;
                if *n == 0 {
                    f.remove(id);
                }
            }
        }
    }
}

async fn run_batch(ctx: BatchCtx, mut pending: BTreeMap<String, Vec<Reply>>, extra: Vec<String>) {
    let api = ctx.api.clone();
    let mut ids: Vec<String> = pending.keys().cloned().collect();
    ids.extend(extra.iter().cloned());
    let mut extra: BTreeMap<String, ()> = extra.into_iter().map(|id| (id, ())).collect();
    let store = |id: &str, outcome: Arc<Outcome>| {
        let cache = ctx.cache.clone();
        let key = FetchKey::value(id.to_string(), Version::Current);
        async move {
            if let Some(c) = cache {
                c.insert(key, outcome).await;
            }
        }
    };
    match api.batch_get_by_ids(&ids).await {
        Ok(batch) => {
            for v in batch.values {
                let id = [&v.name, &v.arn]
                    .into_iter()
                    .find(|i| pending.contains_key(*i) || extra.contains_key(*i))
                    .cloned();
                let Some(id) = id else { continue };
                let outcome = Arc::new(Outcome::Found(Arc::new(v)));
                if let Some(replies) = pending.remove(&id) {
                    deliver(replies, Ok(outcome));
                } else if extra.remove(&id).is_some() {
                    store(&id, outcome).await;
                }
            }
            for (id, err) in batch.errors {
                let res = if err.is_not_found() {
                    Ok(Arc::new(Outcome::Missing(err.message)))
                } else {
                    Err(err)
                };
                if let Some(replies) = pending.remove(&id) {
                    deliver(replies, res);
                } else if extra.remove(&id).is_some()
                    && let Ok(outcome) = res
                {
                    store(&id, outcome).await;
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
            ctx.disabled.store(true, Ordering::Relaxed);
            individually(api, pending).await;
        }
        // A refresh-ahead id may be what the request failed on: retry without them.
        Err(e) if !extra.is_empty() && e.kind == crate::error::ErrorKind::Invalid => {
            Box::pin(run_batch(ctx.clone(), pending, Vec::new())).await;
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
