//! Leader election on a `coordination.k8s.io/v1` Lease (`--enable-leader-election`), with
//! controller-runtime's defaults: lease 15s, renew deadline 10s, retry 2s, changed by
//! `--leader-election-lease-duration`, `--leader-election-renew-deadline` and
//! `--leader-election-retry-period` (checked as client-go checks them, see [`LeaseTimings::new`]).

use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Client;
use kube::api::{Api, PostParams};
use tracing::{info, warn};

/// Timings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseTimings {
    /// How long a lease is valid without renewal.
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before giving up.
    pub renew_deadline: Duration,
    /// Pause between attempts.
    pub retry_period: Duration,
}

/// Leader election timings that client-go refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LeaseTimingsError {
    /// `leaseDuration must be greater than renewDeadline`.
    #[error("leaseDuration must be greater than renewDeadline")]
    LeaseNotAboveRenew,
    /// `renewDeadline must be greater than retryPeriod*JitterFactor` (JitterFactor 1.2).
    #[error("renewDeadline must be greater than retryPeriod*JitterFactor")]
    RenewNotAboveRetry,
    /// A zero timing.
    #[error("{0} must be greater than zero")]
    Zero(&'static str),
}

/// client-go's `JitterFactor` of the leader elector.
pub const JITTER_FACTOR: f64 = 1.2;

impl LeaseTimings {
    /// Timings checked as client-go's `NewLeaderElector` checks them: every value above zero,
    /// lease duration above the renew deadline, renew deadline above 1.2 × the retry period.
    pub fn new(
        lease_duration: Duration,
        renew_deadline: Duration,
        retry_period: Duration,
    ) -> Result<Self, LeaseTimingsError> {
        for (name, d) in [
            ("leaseDuration", lease_duration),
            ("renewDeadline", renew_deadline),
            ("retryPeriod", retry_period),
        ] {
            if d.is_zero() {
                return Err(LeaseTimingsError::Zero(name));
            }
        }
        if lease_duration <= renew_deadline {
            return Err(LeaseTimingsError::LeaseNotAboveRenew);
        }
        if renew_deadline.as_secs_f64() <= JITTER_FACTOR * retry_period.as_secs_f64() {
            return Err(LeaseTimingsError::RenewNotAboveRetry);
        }
        Ok(LeaseTimings {
            lease_duration,
            renew_deadline,
            retry_period,
        })
    }

    /// `leaseDurationSeconds` written to the Lease (whole seconds, at least 1).
    pub fn lease_seconds(&self) -> i32 {
        i32::try_from(self.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX)
    }
}

impl Default for LeaseTimings {
    fn default() -> Self {
        LeaseTimings {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// What to do with the Lease (pure decision).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseAction {
    /// No Lease yet: create it.
    Create,
    /// We hold it: renew.
    Renew,
    /// Another holder let it expire: take it over.
    TakeOver,
    /// Another holder has a valid lease: wait.
    Wait,
}

fn micro(t: DateTime<Utc>) -> Option<MicroTime> {
    k8s_openapi::jiff::Timestamp::from_microsecond(t.timestamp_micros())
        .ok()
        .map(MicroTime)
}

fn chrono_of(t: &MicroTime) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp_micros(t.0.as_microsecond())
}

/// Decides from the current Lease spec.
pub fn decide(
    spec: Option<&LeaseSpec>,
    me: &str,
    now: DateTime<Utc>,
    timings: &LeaseTimings,
) -> LeaseAction {
    let Some(spec) = spec else {
        return LeaseAction::Create;
    };
    let holder = spec.holder_identity.as_deref().unwrap_or("");
    if holder == me {
        return LeaseAction::Renew;
    }
    if holder.is_empty() {
        return LeaseAction::TakeOver;
    }
    let duration = spec
        .lease_duration_seconds
        .map(|s| Duration::from_secs(s.max(0) as u64))
        .unwrap_or(timings.lease_duration);
    let renewed = spec.renew_time.as_ref().and_then(chrono_of);
    match (renewed, chrono::Duration::from_std(duration)) {
        (Some(r), Ok(d)) if r + d > now => LeaseAction::Wait,
        _ => LeaseAction::TakeOver,
    }
}

fn spec_for(
    me: &str,
    now: DateTime<Utc>,
    timings: &LeaseTimings,
    prev: Option<&LeaseSpec>,
    take_over: bool,
) -> LeaseSpec {
    let transitions = prev.and_then(|p| p.lease_transitions).unwrap_or(0);
    LeaseSpec {
        holder_identity: Some(me.to_string()),
        lease_duration_seconds: Some(timings.lease_seconds()),
        acquire_time: if take_over || prev.is_none() {
            micro(now)
        } else {
            prev.and_then(|p| p.acquire_time.clone())
        },
        renew_time: micro(now),
        lease_transitions: Some(if take_over {
            transitions + 1
        } else {
            transitions
        }),
        ..Default::default()
    }
}

/// One attempt: returns true when we hold the lease afterwards.
pub async fn try_acquire_or_renew(
    api: &Api<Lease>,
    name: &str,
    me: &str,
    timings: &LeaseTimings,
) -> Result<bool, kube::Error> {
    let now = Utc::now();
    let current = api.get_opt(name).await?;
    let action = decide(
        current.as_ref().and_then(|l| l.spec.as_ref()),
        me,
        now,
        timings,
    );
    match (action, current) {
        (LeaseAction::Wait, _) => Ok(false),
        (LeaseAction::Create, _) => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(name.to_string()),
                    ..Default::default()
                },
                spec: Some(spec_for(me, now, timings, None, false)),
            };
            match api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
                Err(e) => Err(e),
            }
        }
        (action, Some(mut lease)) => {
            lease.spec = Some(spec_for(
                me,
                now,
                timings,
                lease.spec.as_ref(),
                action == LeaseAction::TakeOver,
            ));
            match api.replace(name, &PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
                Err(e) => Err(e),
            }
        }
        (_, None) => Ok(false),
    }
}

/// Blocks until this instance holds the Lease `namespace/name`.
pub async fn acquire(
    client: Client,
    namespace: &str,
    name: &str,
    me: &str,
    timings: LeaseTimings,
) -> Api<Lease> {
    let api: Api<Lease> = Api::namespaced(client, namespace);
    loop {
        match try_acquire_or_renew(&api, name, me, &timings).await {
            Ok(true) => {
                info!(lease = %name, identity = %me, "acquired leadership");
                return api;
            }
            Ok(false) => {}
            Err(e) => warn!(error = %e, "leader election attempt failed"),
        }
        tokio::time::sleep(timings.retry_period).await;
    }
}

/// The Lease spec that hands leadership back (client-go's `ReleaseOnCancel`): no holder, a 1 s
/// duration, the transition count kept, so a standby takes over at its next retry instead of
/// waiting for the lease to expire.
pub fn released_spec(prev: &LeaseSpec, now: DateTime<Utc>) -> LeaseSpec {
    LeaseSpec {
        holder_identity: None,
        lease_duration_seconds: Some(1),
        acquire_time: micro(now),
        renew_time: micro(now),
        lease_transitions: prev.lease_transitions,
        ..Default::default()
    }
}

/// Gives up the Lease if this instance still holds it. Call it only after every controller has
/// stopped writing (a graceful shutdown), so two instances never write at the same time. Returns
/// true when the Lease was released.
pub async fn release(api: &Api<Lease>, name: &str, me: &str) -> Result<bool, kube::Error> {
    let Some(mut lease) = api.get_opt(name).await? else {
        return Ok(false);
    };
    let Some(spec) = lease.spec.as_ref() else {
        return Ok(false);
    };
    if spec.holder_identity.as_deref() != Some(me) {
        return Ok(false);
    }
    lease.spec = Some(released_spec(spec, Utc::now()));
    match api.replace(name, &PostParams::default(), &lease).await {
        Ok(_) => {
            info!(lease = %name, identity = %me, "released leadership");
            Ok(true)
        }
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}

/// Keeps renewing; resolves when leadership is lost (no successful renewal within the deadline).
pub async fn hold(api: Api<Lease>, name: String, me: String, timings: LeaseTimings) {
    let mut last_ok = tokio::time::Instant::now();
    loop {
        tokio::time::sleep(timings.retry_period).await;
        match try_acquire_or_renew(&api, &name, &me, &timings).await {
            Ok(true) => last_ok = tokio::time::Instant::now(),
            Ok(false) => {
                warn!(lease = %name, "leadership taken by another instance");
                return;
            }
            Err(e) => warn!(error = %e, "renewing the lease failed"),
        }
        if last_ok.elapsed() > timings.renew_deadline {
            warn!(lease = %name, "could not renew the lease in time");
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t(s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, s).unwrap()
    }

    #[test]
    fn released_lease_is_taken_over_at_once() {
        let timings = LeaseTimings::default();
        let held = spec_for("old", t(10), &timings, None, false);
        let released = released_spec(&held, t(11));
        assert_eq!(released.holder_identity, None);
        assert_eq!(released.lease_transitions, held.lease_transitions);
        // Still within the old 15 s lease: a standby takes it over instead of waiting.
        assert_eq!(
            decide(Some(&released), "new", t(12), &timings),
            LeaseAction::TakeOver
        );
        assert_eq!(
            decide(Some(&held), "new", t(12), &timings),
            LeaseAction::Wait
        );
    }

    #[test]
    fn timings_are_checked_like_client_go() {
        let s = Duration::from_secs;
        assert_eq!(
            LeaseTimings::new(s(15), s(10), s(2))
                .unwrap()
                .lease_duration,
            LeaseTimings::default().lease_duration
        );
        assert_eq!(
            LeaseTimings::new(s(10), s(10), s(2)),
            Err(LeaseTimingsError::LeaseNotAboveRenew)
        );
        // 1.2 × 5s = 6s is not below a 6s renew deadline.
        assert_eq!(
            LeaseTimings::new(s(30), s(6), s(5)),
            Err(LeaseTimingsError::RenewNotAboveRetry)
        );
        assert_eq!(
            LeaseTimings::new(s(30), s(20), Duration::ZERO),
            Err(LeaseTimingsError::Zero("retryPeriod"))
        );
        // A longer lease is written to the Lease and honoured by a standby.
        let long = LeaseTimings::new(s(60), s(40), s(5)).unwrap();
        let held = spec_for("other", t(0), &long, None, false);
        assert_eq!(held.lease_duration_seconds, Some(60));
        let short = LeaseTimings::default();
        assert_eq!(decide(Some(&held), "me", t(30), &short), LeaseAction::Wait);
    }

    #[test]
    fn lease_decisions() {
        let timings = LeaseTimings::default();
        assert_eq!(decide(None, "me", t(0), &timings), LeaseAction::Create);
        let held = spec_for("other", t(0), &timings, None, false);
        assert_eq!(
            decide(Some(&held), "me", t(10), &timings),
            LeaseAction::Wait
        );
        assert_eq!(
            decide(Some(&held), "me", t(16), &timings),
            LeaseAction::TakeOver
        );
        assert_eq!(
            decide(Some(&held), "other", t(5), &timings),
            LeaseAction::Renew
        );
        let taken = spec_for("me", t(16), &timings, Some(&held), true);
        assert_eq!(taken.lease_transitions, Some(1));
        assert_eq!(taken.holder_identity.as_deref(), Some("me"));
        let renewed = spec_for("me", t(20), &timings, Some(&taken), false);
        assert_eq!(renewed.lease_transitions, Some(1));
        assert_eq!(renewed.acquire_time, taken.acquire_time);
        let empty = LeaseSpec::default();
        assert_eq!(
            decide(Some(&empty), "me", t(0), &timings),
            LeaseAction::TakeOver
        );
    }
}
