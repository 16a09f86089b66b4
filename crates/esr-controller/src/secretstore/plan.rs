//! The SecretStore / ClusterSecretStore plan (pure): what a store check means for the store's
//! Ready condition, event and requeue ([`store_outcome`], [`finish`]), the refresh interval
//! ([`store_interval`]) and the store finalizer ([`store_finalizer_action`]).
//!
//! A store reconcile (ESO's store controller) resolves the provider, validates the store section,
//! builds a client and calls its `Validate()`; it sets the Ready condition and `capabilities`
//! (`ReadOnly`, `WriteOnly` or `ReadWrite`). Outcomes: an unknown provider or a malformed provider
//! section is Ready=False `ProviderNotFound` with the registry's text (ESO v2.10+); a client that
//! cannot be built is Ready=False `InvalidProviderConfig` `unable to create client` and a failed
//! validation Ready=False `InvalidProviderConfig` `unable to validate store` (event reason
//! `ValidationFailed`), both retried with backoff; an unknown validation result is Ready=True
//! `ValidationUnknown` with a Warning event; success is Ready=True `Valid` `store validated`. The
//! Ready event is published when the condition's status or reason changes, and every Warning
//! each time. A provider that is not maintained or deprecated gets a Warning event
//! (`StoreUnmaintained`, `StoreDeprecated`) unless the store carries
//! `external-secrets.io/ignore-maintenance-checks`. A store of another controller class is left
//! alone. The store is requeued after `spec.refreshInterval` (seconds or a Go duration; zero or
//! unset: the controller's `--store-requeue-interval`).
//!
//! Store finalizer (ESO's store controller): while a PushSecret with `deletionPolicy: Delete`
//! has pushed to a store or references it (by name or label selector), the store carries
//! `secretstore.externalsecrets.io/finalizer`, so deleting the store waits until those
//! PushSecrets are gone or changed (and have cleaned up their remote secrets); the finalizer is
//! removed when none is left.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use esr_api::consts as c;
use esr_provider::{Maintenance, ValidationResult};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::externalsecret::convert::{chrono_to_time, time_to_chrono};
use crate::externalsecret::plan::{Condition, EsStatus, EventRec, EventType, set_condition};

/// What checking a store found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreCheck {
    /// The provider cannot be resolved: the provider key is unsupported or the provider section
    /// is malformed (registry error text). Ready=False `ProviderNotFound` with that text (ESO
    /// v2.10+).
    InvalidProvider(String),
    /// Building the client (or the static store validation) failed.
    ClientError(String),
    /// `Validate()` result.
    Validated(ValidationResult),
}

/// The status and event for a check (pure).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreOutcome {
    /// Ready status.
    pub status: &'static str,
    /// Ready reason.
    pub reason: &'static str,
    /// Ready message.
    pub message: String,
    /// Event to record.
    pub event: EventRec,
    /// Retry with backoff (error) instead of waiting for the interval.
    pub retry: bool,
}

/// ESO's store reconcile outcomes.
pub fn store_outcome(check: &StoreCheck) -> StoreOutcome {
    let warn = |reason: &str, message: &str| EventRec {
        type_: EventType::Warning,
        reason: reason.to_string(),
        message: message.to_string(),
    };
    match check {
        StoreCheck::InvalidProvider(e) => StoreOutcome {
            status: c::CONDITION_FALSE,
            reason: c::REASON_PROVIDER_NOT_FOUND,
            message: e.clone(),
            event: warn(c::REASON_PROVIDER_NOT_FOUND, e),
            retry: false,
        },
        StoreCheck::ClientError(e) => StoreOutcome {
            status: c::CONDITION_FALSE,
            reason: c::REASON_INVALID_PROVIDER_CONFIG,
            message: c::MSG_STORE_UNABLE_CREATE_CLIENT.to_string(),
            event: warn(c::REASON_INVALID_PROVIDER_CONFIG, e),
            retry: true,
        },
        StoreCheck::Validated(ValidationResult::Error(e)) => StoreOutcome {
            status: c::CONDITION_FALSE,
            reason: c::REASON_INVALID_PROVIDER_CONFIG,
            message: c::MSG_STORE_UNABLE_VALIDATE.to_string(),
            event: warn(c::REASON_VALIDATION_FAILED, e),
            retry: true,
        },
        StoreCheck::Validated(ValidationResult::Unknown) => StoreOutcome {
            status: c::CONDITION_TRUE,
            reason: c::REASON_VALIDATION_UNKNOWN,
            message: c::MSG_STORE_VALIDATION_UNKNOWN.to_string(),
            event: warn(
                c::REASON_VALIDATION_UNKNOWN,
                c::MSG_STORE_VALIDATION_UNKNOWN,
            ),
            retry: false,
        },
        StoreCheck::Validated(ValidationResult::Ready) => StoreOutcome {
            status: c::CONDITION_TRUE,
            reason: c::REASON_STORE_VALID,
            message: c::MSG_STORE_VALIDATED.to_string(),
            event: EventRec {
                type_: EventType::Normal,
                reason: c::REASON_STORE_VALID.to_string(),
                message: c::MSG_STORE_VALIDATED.to_string(),
            },
            retry: false,
        },
    }
}

/// `spec.refreshInterval` (int seconds or Go duration); zero or missing → `default`.
pub fn store_interval(v: Option<&IntOrString>, default: Duration) -> Duration {
    let d = match v {
        Some(IntOrString::Int(i)) if *i > 0 => Duration::from_secs(*i as u64),
        Some(IntOrString::String(s)) => crate::externalsecret::convert::go_duration(s),
        _ => Duration::ZERO,
    };
    if d.is_zero() { default } else { d }
}

/// The Warning event for a provider that is not maintained or deprecated, unless the store
/// carries `external-secrets.io/ignore-maintenance-checks`.
pub fn maintenance_event(
    maintenance: Maintenance,
    annotations: &BTreeMap<String, String>,
) -> Option<EventRec> {
    if annotations.contains_key(c::ANNOTATION_IGNORE_MAINTENANCE_CHECKS) {
        return None;
    }
    let (reason, msg) = match maintenance {
        Maintenance::Deprecated => (
            c::REASON_STORE_DEPRECATED,
            "store is deprecated and will be removed on the next minor release",
        ),
        Maintenance::NotMaintained => (
            c::REASON_STORE_UNMAINTAINED,
            "store isn't currently maintained. Please plan and prepare accordingly.",
        ),
        _ => return None,
    };
    Some(EventRec {
        type_: EventType::Warning,
        reason: reason.to_string(),
        message: msg.to_string(),
    })
}

/// What a store reconcile writes after its check.
#[derive(Debug, Clone, PartialEq)]
pub struct Finish {
    /// The Ready event, when the condition transitioned or it is a Warning.
    pub event: Option<EventRec>,
    /// The status merge patch body, when the conditions or capabilities changed.
    pub status: Option<serde_json::Value>,
}

/// Maps a check's outcome onto the store's current status (`raw`: the store object as JSON).
pub fn finish(
    raw: &serde_json::Value,
    outcome: &StoreOutcome,
    caps: Option<String>,
    now: DateTime<Utc>,
) -> Finish {
    let (before, caps_before) = status_of(raw);
    let mut after = before.clone();
    set_condition(
        &mut after,
        Condition {
            type_: c::CONDITION_READY.to_string(),
            status: outcome.status.to_string(),
            reason: outcome.reason.to_string(),
            message: outcome.message.clone(),
            last_transition_time: None,
        },
        now,
    );
    let caps_after = caps.or(caps_before.clone());
    let transitioned = before.ready().map(|c| (&c.status, &c.reason))
        != after.ready().map(|c| (&c.status, &c.reason));
    let event =
        (transitioned || outcome.event.type_ == EventType::Warning).then(|| outcome.event.clone());
    let status = (after != before || caps_after != caps_before).then(|| {
        let conds: Vec<serde_json::Value> = after
            .conditions
            .iter()
            .map(|c| {
                serde_json::json!({
                    "type": c.type_, "status": c.status, "reason": c.reason, "message": c.message,
                    "lastTransitionTime": c.last_transition_time.and_then(chrono_to_time),
                })
            })
            .collect();
        let mut st = serde_json::json!({ "conditions": conds });
        if let Some(cp) = &caps_after {
            st["capabilities"] = serde_json::Value::String(cp.clone());
        }
        st
    });
    Finish { event, status }
}

/// The conditions and capabilities of a store object (as JSON).
pub fn status_of(v: &serde_json::Value) -> (EsStatus, Option<String>) {
    let mut st = EsStatus::default();
    for cond in v
        .pointer("/status/conditions")
        .and_then(|c| c.as_array())
        .into_iter()
        .flatten()
    {
        let s = |k: &str| {
            cond.get(k)
                .and_then(|x| x.as_str())
                .unwrap_or("")
                .to_string()
        };
        let ltt = cond
            .get("lastTransitionTime")
            .and_then(|t| {
                serde_json::from_value::<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>(
                    t.clone(),
                )
                .ok()
            })
            .and_then(|t| time_to_chrono(&t));
        st.conditions.push(Condition {
            type_: s("type"),
            status: s("status"),
            reason: s("reason"),
            message: s("message"),
            last_transition_time: ltt,
        });
    }
    let caps = v
        .pointer("/status/capabilities")
        .and_then(|c| c.as_str())
        .map(str::to_string);
    (st, caps)
}

/// What to do with the store finalizer (ESO's `handleFinalizer`): `Some(true)` add,
/// `Some(false)` remove, `None` leave as is. A store being deleted keeps its finalizer while
/// PushSecrets with `deletionPolicy: Delete` still reference it.
pub fn store_finalizer_action(
    referenced: bool,
    deleting: bool,
    has_finalizer: bool,
) -> Option<bool> {
    match (deleting, referenced, has_finalizer) {
        (true, true, _) => None,
        (true, false, true) => Some(false),
        (false, true, false) => Some(true),
        (false, false, true) => Some(false),
        _ => None,
    }
}

/// The store's finalizers with [`c::FINALIZER_STORE`] added or removed.
pub fn finalizers_with(current: &[String], add: bool) -> Vec<String> {
    let mut f: Vec<String> = current
        .iter()
        .filter(|f| *f != c::FINALIZER_STORE)
        .cloned()
        .collect();
    if add {
        f.push(c::FINALIZER_STORE.to_string());
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_match_eso() {
        let o = store_outcome(&StoreCheck::InvalidProvider(
            "provider gcpsm is not supported by esr".into(),
        ));
        assert_eq!(
            (o.status, o.reason, o.message.as_str()),
            (
                "False",
                "ProviderNotFound",
                "provider gcpsm is not supported by esr"
            )
        );
        assert_eq!(o.event.reason, "ProviderNotFound");
        assert!(!o.retry);
        let o = store_outcome(&StoreCheck::ClientError("bad token".into()));
        assert_eq!(
            (o.status, o.reason, o.message.as_str()),
            ("False", "InvalidProviderConfig", "unable to create client")
        );
        assert_eq!(o.event.message, "bad token");
        assert!(o.retry);
        let o = store_outcome(&StoreCheck::Validated(ValidationResult::Error(
            "unable to validate".into(),
        )));
        assert_eq!(
            (o.status, o.message.as_str()),
            ("False", "unable to validate store")
        );
        let o = store_outcome(&StoreCheck::Validated(ValidationResult::Unknown));
        assert_eq!((o.status, o.reason), ("True", "ValidationUnknown"));
        assert_eq!(o.event.type_, EventType::Warning);
        let o = store_outcome(&StoreCheck::Validated(ValidationResult::Ready));
        assert_eq!(
            (o.status, o.reason, o.message.as_str()),
            ("True", "Valid", "store validated")
        );
        assert_eq!(o.event.type_, EventType::Normal);
    }

    #[test]
    fn store_finalizer_follows_push_secret_references() {
        // (referenced, deleting, has finalizer) -> add / remove / leave
        assert_eq!(store_finalizer_action(true, false, false), Some(true));
        assert_eq!(store_finalizer_action(true, false, true), None);
        assert_eq!(store_finalizer_action(false, false, true), Some(false));
        assert_eq!(store_finalizer_action(false, false, false), None);
        // Being deleted: kept while referenced, removed once nothing references the store.
        assert_eq!(store_finalizer_action(true, true, true), None);
        assert_eq!(store_finalizer_action(false, true, true), Some(false));
        assert_eq!(store_finalizer_action(false, true, false), None);
    }

    #[test]
    fn intervals() {
        let d = Duration::from_secs(300);
        assert_eq!(store_interval(None, d), d);
        assert_eq!(store_interval(Some(&IntOrString::Int(0)), d), d);
        assert_eq!(
            store_interval(Some(&IntOrString::Int(30)), d),
            Duration::from_secs(30)
        );
        assert_eq!(
            store_interval(Some(&IntOrString::String("1m".into())), d),
            Duration::from_secs(60)
        );
        assert_eq!(
            store_interval(Some(&IntOrString::String("0s".into())), d),
            d
        );
    }
}
