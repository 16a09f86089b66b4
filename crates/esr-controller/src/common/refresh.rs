//! The refresh decision (ESO `shouldRefresh` / `isSecretValid`), sync windows, requeue and backoff.
//! Pure: the clock and the jitter are inputs.

use std::time::Duration;

use chrono::{DateTime, Utc};

/// `spec.refreshPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RefreshPolicy {
    /// Refresh every `refreshInterval` (also the meaning of an empty value).
    #[default]
    Periodic,
    /// Sync once, then only on drift.
    CreatedOnce,
    /// Sync when the ExternalSecret's generation, labels or annotations change.
    OnChange,
}

/// `spec.syncWindows[].kind`... here the whole `syncWindows` object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WindowKind {
    /// Periodic refreshes only while a window is active.
    #[default]
    Allow,
    /// No periodic refresh while a window is active.
    Deny,
}

/// One parsed schedule.
#[derive(Debug, Clone)]
pub enum Schedule {
    /// A 5-field cron spec or an `@descriptor`, evaluated in UTC.
    Cron(Box<croner::Cron>),
    /// `@every <duration>`: firings at multiples of the duration since the Unix epoch.
    Every(Duration),
}

impl Schedule {
    /// Parses a robfig/cron standard spec: 5 fields, `@yearly`/`@annually`/`@monthly`/`@weekly`/
    /// `@daily`/`@midnight`/`@hourly`, or `@every <go duration>`. `None` when unparsable.
    pub fn parse(spec: &str) -> Option<Schedule> {
        let spec = spec.trim();
        if let Some(rest) = spec.strip_prefix("@every ") {
            let d = esr_api::duration::parse(rest.trim()).ok()?.to_std()?;
            if d < Duration::from_secs(1) {
                return None;
            }
            return Some(Schedule::Every(d));
        }
        let normalized = if spec.eq_ignore_ascii_case("@midnight") {
            "@daily"
        } else {
            spec
        };
        if !normalized.starts_with('@') && normalized.split_whitespace().count() != 5 {
            return None;
        }
        let parser = croner::parser::CronParser::builder()
            .seconds(croner::parser::Seconds::Disallowed)
            .build();
        parser
            .parse(normalized)
            .ok()
            .map(|c| Schedule::Cron(Box::new(c)))
    }

    /// The latest firing at or before `now`.
    pub fn last_firing(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            Schedule::Cron(c) => c.find_previous_occurrence(&now, true).ok(),
            Schedule::Every(d) => {
                let secs = d.as_secs().max(1) as i64;
                let t = now.timestamp();
                DateTime::from_timestamp(t - t.rem_euclid(secs), 0)
            }
        }
    }
}

/// One window: schedule + duration.
#[derive(Debug, Clone)]
pub struct SyncWindow {
    /// Parsed schedule (`None` when the spec did not parse: the window is ignored).
    pub schedule: Option<Schedule>,
    /// How long the window stays open after each firing.
    pub duration: Duration,
}

impl SyncWindow {
    /// Builds a window from spec strings.
    pub fn new(schedule: &str, duration: Duration) -> SyncWindow {
        SyncWindow {
            schedule: Schedule::parse(schedule),
            duration,
        }
    }

    /// Active if `last firing ≤ now ≤ last firing + duration`.
    pub fn is_active(&self, now: DateTime<Utc>) -> bool {
        let Some(s) = &self.schedule else {
            return false;
        };
        let Some(last) = s.last_firing(now) else {
            return false;
        };
        let Ok(d) = chrono::Duration::from_std(self.duration) else {
            return false;
        };
        last <= now && now <= last + d
    }
}

/// `spec.syncWindows`.
#[derive(Debug, Clone, Default)]
pub struct SyncWindows {
    /// allow or deny.
    pub kind: WindowKind,
    /// The windows.
    pub windows: Vec<SyncWindow>,
}

impl SyncWindows {
    /// Whether a periodic refresh may happen now. Unparsable windows are ignored; with no usable
    /// window there is no restriction.
    pub fn allows(&self, now: DateTime<Utc>) -> bool {
        let usable: Vec<&SyncWindow> = self
            .windows
            .iter()
            .filter(|w| w.schedule.is_some())
            .collect();
        if usable.is_empty() {
            return true;
        }
        let any_active = usable.iter().any(|w| w.is_active(now));
        match self.kind {
            WindowKind::Allow => any_active,
            WindowKind::Deny => !any_active,
        }
    }
}

/// The inputs of the refresh decision.
#[derive(Debug, Clone, Default)]
pub struct RefreshState {
    /// `spec.refreshPolicy`.
    pub policy: RefreshPolicy,
    /// `spec.refreshInterval` (zero when `<= 0`).
    pub interval: Duration,
    /// `spec.syncWindows`.
    pub windows: Option<SyncWindows>,
    /// `status.syncedResourceVersion`.
    pub synced_resource_version: String,
    /// `GetResourceVersion(meta)` of the ExternalSecret now.
    pub current_resource_version: String,
    /// `status.refreshTime`.
    pub refresh_time: Option<DateTime<Utc>>,
}

/// ESO `shouldRefresh`.
pub fn should_refresh(s: &RefreshState, now: DateTime<Utc>) -> bool {
    let never_synced = s.synced_resource_version.is_empty() || s.refresh_time.is_none();
    match s.policy {
        RefreshPolicy::CreatedOnce => never_synced,
        RefreshPolicy::OnChange => {
            never_synced || s.synced_resource_version != s.current_resource_version
        }
        RefreshPolicy::Periodic => {
            if s.interval.is_zero() && !s.synced_resource_version.is_empty() {
                return false;
            }
            if s.synced_resource_version != s.current_resource_version {
                return true;
            }
            let Some(rt) = s.refresh_time else {
                return true;
            };
            if rt > now {
                return true;
            }
            let Ok(iv) = chrono::Duration::from_std(s.interval) else {
                return true;
            };
            let due = rt + iv < now;
            due && s.windows.as_ref().is_none_or(|w| w.allows(now))
        }
    }
}

/// What ESO's `isSecretValid` needs of the target Secret.
#[derive(Debug, Clone, Default)]
pub struct SecretValidity {
    /// The Secret exists.
    pub exists: bool,
    /// It carries `reconcile.external-secrets.io/managed=true`.
    pub managed: bool,
    /// Its `data-hash` annotation equals `ObjectHash(secret.Data)`.
    pub hash_matches: bool,
}

/// ESO `isSecretValid`; `creationPolicy=Orphan` always counts as valid.
pub fn is_secret_valid(orphan: bool, v: &SecretValidity) -> bool {
    orphan || (v.exists && v.managed && v.hash_matches)
}

/// When to look at the ExternalSecret again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requeue {
    /// Not until a watch event.
    Never,
    /// Right away.
    Now,
    /// After this long.
    After(Duration),
}

/// ESO `getRequeueResult`, plus `jitter` added to the periodic delay (to spread provider load).
pub fn requeue_after(
    interval: Duration,
    refresh_time: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
    jitter: Duration,
) -> Requeue {
    if interval.is_zero() {
        return Requeue::Never;
    }
    let Some(rt) = refresh_time else {
        return Requeue::After(interval + jitter);
    };
    let since = now - rt;
    if since < chrono::Duration::zero() {
        return Requeue::Now;
    }
    match since.to_std() {
        Ok(since) if since < interval => Requeue::After(interval - since + jitter),
        _ => Requeue::Now,
    }
}

/// The largest jitter for an interval: 10% of it, at most 5 minutes.
pub fn max_jitter(interval: Duration) -> Duration {
    (interval / 10).min(Duration::from_secs(300))
}

/// Per-item exponential backoff of ESO's rate limiter: 1s × 2^failures, capped at 7 minutes.
pub fn backoff(failures: u32) -> Duration {
    let cap = Duration::from_secs(7 * 60);
    if failures >= 9 {
        return cap;
    }
    Duration::from_secs(1u64 << failures).min(cap)
}

/// The wait before retrying a failed reconcile: the exponential `backoff`, or the backend's
/// retry-after hint when it throttled us and asked for a longer wait.
pub fn retry_delay(backoff: Duration, retry_after: Option<Duration>) -> Duration {
    retry_after.map_or(backoff, |r| r.max(backoff))
}

/// Per-object failure counts behind [`backoff`], shared by the reconcilers' error policies: the
/// first failure retries after 1 s, each further one doubles the wait; a success resets it.
#[derive(Debug)]
pub struct Backoffs<K>(std::sync::Mutex<std::collections::HashMap<K, u32>>);

impl<K> Default for Backoffs<K> {
    fn default() -> Self {
        Backoffs(std::sync::Mutex::new(std::collections::HashMap::new()))
    }
}

impl<K: std::hash::Hash + Eq> Backoffs<K> {
    /// Records a failure of `key`; returns how long to wait before retrying.
    pub fn failed(&self, key: K) -> Duration {
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let n = m.entry(key).or_insert(0);
        let delay = backoff(*n);
        *n = n.saturating_add(1);
        delay
    }

    /// Forgets the failures of `key` (it succeeded, or is gone).
    pub fn reset(&self, key: &K) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).remove(key);
    }
}

#[cfg(test)]
#[path = "refresh_tests.rs"]
mod tests;
