//! Cost control: coalescing and batching of secret reads, for any AWS service with a batch read
//! ([`Source`]: Secrets Manager's `BatchGetSecretValue`, Parameter Store's `GetParameters`).
//!
//! * **Single-flight + short-lived cache.** Reads are keyed by (secret id, version, value-or-tags).
//!   Concurrent reads of the same key share one AWS call; the result (a value, or "does not
//!   exist") is kept for a short TTL (default 3 s) so that ExternalSecrets refreshing in the same
//!   window share it too. The cache lives inside one store client, so the store identity and the
//!   credentials are implicitly part of the key. Errors other than not-found are never cached.
//! * **Micro-batching.** Reads of the current version of different secrets that arrive within a
//!   few milliseconds of each other are sent as one batch call (`BatchGetSecretValue`, ≤ 20 ids;
//!   `GetParameters`, ≤ 10 names). Version-pinned and metadata reads use the single-item call
//!   (`GetSecretValue` / `GetParameter` / `DescribeSecret` / `ListTagsForResource`).
//!   If the principal is not allowed to call the batch operation, the fetcher falls back to the
//!   single-item call for good (ESO-era IAM policies keep working).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use moka::future::Cache;
use tokio::sync::{mpsc, oneshot};

use crate::error::AwsError;
use crate::spec::Version;

/// An AWS API the [`Fetcher`] reads through: one call per item, and one batch call for the current
/// version of many items.
#[async_trait]
pub trait Source: Send + Sync + 'static {
    /// What one read returns.
    type Value: Send + Sync + 'static;
    /// Maximum ids per batch call (an AWS limit).
    const MAX_BATCH: usize;
    /// Read one item: a pinned version, the metadata (tags), or the current value when batching
    /// is off or not worth it.
    async fn load_one(&self, key: &FetchKey) -> Result<Self::Value, AwsError>;
    /// Read the current version of `ids` with one batch call (all pages).
    async fn load_batch(&self, ids: &[String]) -> Result<Batch<Self::Value>, AwsError>;
    /// The ids a value answers to (its name, then its ARN).
    fn ids_of(v: &Self::Value) -> [&str; 2];
    /// Whether a failed batch call means the principal may not batch at all.
    fn batch_denied(e: &AwsError) -> bool;
}

/// Result of one batch read: values found and per-id errors (not-found among them).
#[derive(Debug)]
pub struct Batch<V> {
    pub values: Vec<V>,
    pub errors: Vec<(String, AwsError)>,
}

impl<V> Default for Batch<V> {
    fn default() -> Self {
        Self {
            values: Vec::new(),
            errors: Vec::new(),
        }
    }
}

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
#[derive(Debug)]
enum Outcome<V> {
    Found(Arc<V>),
    Missing(String),
}

type Shared<V> = Arc<Outcome<V>>;
type Reply<V> = oneshot::Sender<Result<Shared<V>, AwsError>>;
type Pending<V> = BTreeMap<String, Vec<Reply<V>>>;

struct BatchReq<V> {
    id: String,
    reply: Reply<V>,
}

/// Coalescing, caching, batching reader for one store client.
pub struct Fetcher<S: Source> {
    api: Arc<S>,
    cache: Option<Cache<FetchKey, Shared<S::Value>>>,
    batch_tx: Option<mpsc::UnboundedSender<BatchReq<S::Value>>>,
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
struct BatchCtx<S: Source> {
    api: Arc<S>,
    disabled: Arc<AtomicBool>,
    cache: Option<Cache<FetchKey, Shared<S::Value>>>,
    known: Option<Known>,
    /// Ids in batches being sent, so refresh-ahead does not fetch them twice.
    in_flight: Arc<Mutex<HashMap<String, usize>>>,
}

impl<S: Source> Clone for BatchCtx<S> {
    fn clone(&self) -> Self {
        Self {
            api: self.api.clone(),
            disabled: self.disabled.clone(),
            cache: self.cache.clone(),
            known: self.known.clone(),
            in_flight: self.in_flight.clone(),
        }
    }
}

impl<S: Source> std::fmt::Debug for Fetcher<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fetcher")
            .field("cache", &self.cache.is_some())
            .field("batching", &self.batch_tx.is_some())
            .finish()
    }
}

fn to_outcome<V>(res: Result<V, AwsError>) -> Result<Shared<V>, AwsError> {
    match res {
        Ok(v) => Ok(Arc::new(Outcome::Found(Arc::new(v)))),
        Err(e) if e.is_not_found() => Ok(Arc::new(Outcome::Missing(e.message))),
        Err(e) => Err(e),
    }
}

impl<S: Source> Fetcher<S> {
    /// Must be called inside a Tokio runtime when batching is enabled (it spawns the batcher).
    pub fn new(api: Arc<S>, opts: &CostOptions) -> Self {
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

    pub fn api(&self) -> &S {
        &self.api
    }

    /// Read one secret (value or tags).
    pub async fn fetch(&self, key: &FetchKey) -> Result<Arc<S::Value>, AwsError> {
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
    ) -> Vec<(FetchKey, Result<Arc<S::Value>, AwsError>)> {
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

    /// Seed the cache with a value obtained otherwise (e.g. by a `find`), under its name.
    pub async fn seed(&self, value: S::Value) {
        if let Some(cache) = &self.cache {
            let name = S::ids_of(&value)[0].to_string();
            let out = Arc::new(Outcome::Found(Arc::new(value)));
            cache
                .insert(FetchKey::value(name, Version::Current), out)
                .await;
        }
    }

    async fn load(&self, key: FetchKey) -> Result<Shared<S::Value>, AwsError> {
        if !key.metadata
            && key.version == Version::Current
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
        to_outcome(self.api.load_one(&key).await)
    }
}

async fn run_batcher<S: Source>(
    ctx: BatchCtx<S>,
    mut rx: mpsc::UnboundedReceiver<BatchReq<S::Value>>,
    window: Duration,
) {
    while let Some(first) = rx.recv().await {
        let mut pending: Pending<S::Value> = BTreeMap::new();
        pending.entry(first.id).or_default().push(first.reply);
        let deadline = tokio::time::Instant::now() + window;
        let mut closed = false;
        while pending.len() < S::MAX_BATCH {
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

fn deliver<V>(replies: Vec<Reply<V>>, res: Result<Shared<V>, AwsError>) {
    for r in replies {
        // The caller may have gone away; nothing to do then.
        let _ = r.send(res.clone());
    }
}

async fn individually<S: Source>(api: Arc<S>, pending: Pending<S::Value>) {
    let futs = pending.into_iter().map(|(id, replies)| {
        let api = api.clone();
        async move {
            let res = to_outcome(api.load_one(&FetchKey::value(id, Version::Current)).await);
            deliver(replies, res);
        }
    });
    futures::future::join_all(futs).await;
}

/// Recently read secrets whose cached value is gone, to fill `room` free slots of a batch.
async fn refresh_ahead<S: Source>(
    ctx: &BatchCtx<S>,
    pending: &Pending<S::Value>,
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

async fn execute_batch<S: Source>(ctx: BatchCtx<S>, pending: Pending<S::Value>) {
    if ctx.disabled.load(Ordering::Relaxed) {
        return individually(ctx.api.clone(), pending).await;
    }
    let extra = refresh_ahead(&ctx, &pending, S::MAX_BATCH.saturating_sub(pending.len())).await;
    if pending.len() == 1 && extra.is_empty() {
        return individually(ctx.api.clone(), pending).await;
    }
    let ids: Vec<String> = pending.keys().chain(extra.iter()).cloned().collect();
    mark(&ctx, &ids, true);
    run_batch(ctx.clone(), pending, extra).await;
    mark(&ctx, &ids, false);
}

fn mark<S: Source>(ctx: &BatchCtx<S>, ids: &[String], busy: bool) {
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

async fn run_batch<S: Source>(
    ctx: BatchCtx<S>,
    mut pending: Pending<S::Value>,
    extra: Vec<String>,
) {
    let api = ctx.api.clone();
    let mut ids: Vec<String> = pending.keys().cloned().collect();
    ids.extend(extra.iter().cloned());
    let mut extra: BTreeMap<String, ()> = extra.into_iter().map(|id| (id, ())).collect();
    let store = |id: &str, outcome: Shared<S::Value>| {
        let cache = ctx.cache.clone();
        let key = FetchKey::value(id.to_string(), Version::Current);
        async move {
            if let Some(c) = cache {
                c.insert(key, outcome).await;
            }
        }
    };
    match api.load_batch(&ids).await {
        Ok(batch) => {
            for v in batch.values {
                let id = S::ids_of(&v)
                    .into_iter()
                    .find(|i| pending.contains_key(*i) || extra.contains_key(*i))
                    .map(str::to_string);
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
        Err(e) if S::batch_denied(&e) => {
            tracing::warn!(
                error = %e.message,
                "the batch read is not allowed for this principal; falling back to one call per secret (grant secretsmanager:BatchGetSecretValue or ssm:GetParameters to reduce API calls)"
            );
            ctx.disabled.store(true, Ordering::Relaxed);
            individually(api, pending).await;
        }
        // A refresh-ahead id may be what the request failed on: retry without them.
        Err(e) if !extra.is_empty() && e.kind == crate::error::AwsErrorKind::Invalid => {
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
