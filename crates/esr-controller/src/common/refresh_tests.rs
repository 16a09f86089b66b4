use super::*;
use chrono::TimeZone;

fn t(h: u32, m: u32, s: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 4, h, m, s).unwrap()
}

fn synced(policy: RefreshPolicy, interval_s: u64, refresh: DateTime<Utc>) -> RefreshState {
    RefreshState {
        policy,
        interval: Duration::from_secs(interval_s),
        windows: None,
        synced_resource_version: "1-abc".into(),
        current_resource_version: "1-abc".into(),
        refresh_time: Some(refresh),
    }
}

#[test]
fn periodic_refresh_rules() {
    let s = synced(RefreshPolicy::Periodic, 3600, t(10, 0, 0));
    assert!(!should_refresh(&s, t(10, 30, 0)), "within interval");
    assert!(should_refresh(&s, t(11, 0, 1)), "interval elapsed");
    assert!(
        !should_refresh(&s, t(11, 0, 0)),
        "exactly at the boundary is not before now"
    );
    assert!(should_refresh(&s, t(9, 0, 0)), "refreshTime in the future");
    let changed = RefreshState {
        current_resource_version: "2-abc".into(),
        ..s.clone()
    };
    assert!(should_refresh(&changed, t(10, 0, 1)), "spec changed");
    let never = RefreshState {
        refresh_time: None,
        ..s.clone()
    };
    assert!(should_refresh(&never, t(10, 0, 1)));
    let fresh = RefreshState {
        synced_resource_version: String::new(),
        refresh_time: None,
        ..s
    };
    assert!(should_refresh(&fresh, t(10, 0, 1)));
}

#[test]
fn periodic_interval_zero_syncs_once_even_on_spec_change() {
    let s = RefreshState {
        current_resource_version: "2-x".into(),
        ..synced(RefreshPolicy::Periodic, 0, t(10, 0, 0))
    };
    assert!(!should_refresh(&s, t(12, 0, 0)));
    let first = RefreshState {
        synced_resource_version: String::new(),
        refresh_time: None,
        ..s
    };
    assert!(should_refresh(&first, t(12, 0, 0)));
}

#[test]
fn created_once_and_on_change() {
    let s = synced(RefreshPolicy::CreatedOnce, 60, t(10, 0, 0));
    assert!(!should_refresh(&s, t(23, 0, 0)));
    let changed = RefreshState {
        current_resource_version: "2-x".into(),
        ..s.clone()
    };
    assert!(
        !should_refresh(&changed, t(23, 0, 0)),
        "CreatedOnce ignores spec changes"
    );
    assert!(should_refresh(
        &RefreshState {
            refresh_time: None,
            ..s.clone()
        },
        t(23, 0, 0)
    ));
    let oc = synced(RefreshPolicy::OnChange, 60, t(10, 0, 0));
    assert!(!should_refresh(&oc, t(23, 0, 0)), "OnChange ignores time");
    let changed = RefreshState {
        current_resource_version: "2-x".into(),
        ..oc
    };
    assert!(should_refresh(&changed, t(10, 0, 1)));
}

#[test]
fn secret_validity() {
    let ok = SecretValidity {
        exists: true,
        managed: true,
        hash_matches: true,
    };
    assert!(is_secret_valid(false, &ok));
    assert!(!is_secret_valid(
        false,
        &SecretValidity {
            hash_matches: false,
            ..ok.clone()
        }
    ));
    assert!(!is_secret_valid(
        false,
        &SecretValidity {
            managed: false,
            ..ok.clone()
        }
    ));
    assert!(!is_secret_valid(false, &SecretValidity::default()));
    assert!(
        is_secret_valid(true, &SecretValidity::default()),
        "Orphan is always valid"
    );
}

#[test]
fn schedules_parse_like_robfig_standard() {
    assert!(Schedule::parse("0 9 * * 1-5").is_some());
    assert!(Schedule::parse("@hourly").is_some());
    assert!(Schedule::parse("@midnight").is_some());
    assert!(Schedule::parse("@every 90m").is_some());
    assert!(
        Schedule::parse("0 0 9 * * *").is_none(),
        "6 fields are not standard"
    );
    assert!(Schedule::parse("not a cron").is_none());
    assert!(Schedule::parse("@every banana").is_none());
}

#[test]
fn window_activity() {
    let w = SyncWindow::new("0 9 * * *", Duration::from_secs(3600));
    assert!(w.is_active(t(9, 0, 0)));
    assert!(w.is_active(t(9, 59, 59)));
    assert!(w.is_active(t(10, 0, 0)));
    assert!(!w.is_active(t(10, 0, 1)));
    assert!(!w.is_active(t(8, 59, 0)));
    let every = SyncWindow::new("@every 2h", Duration::from_secs(600));
    assert!(every.is_active(t(10, 5, 0)));
    assert!(!every.is_active(t(11, 5, 0)));
    let bad = SyncWindow::new("garbage", Duration::from_secs(600));
    assert!(!bad.is_active(t(10, 0, 0)));
}

#[test]
fn windows_gate_only_periodic_time_refresh() {
    let allow = SyncWindows {
        kind: WindowKind::Allow,
        windows: vec![SyncWindow::new("0 9 * * *", Duration::from_secs(3600))],
    };
    let deny = SyncWindows {
        kind: WindowKind::Deny,
        windows: allow.windows.clone(),
    };
    let base = synced(RefreshPolicy::Periodic, 60, t(7, 0, 0));
    let with_allow = RefreshState {
        windows: Some(allow.clone()),
        ..base.clone()
    };
    assert!(should_refresh(&with_allow, t(9, 30, 0)));
    assert!(!should_refresh(&with_allow, t(12, 0, 0)));
    let with_deny = RefreshState {
        windows: Some(deny),
        ..base.clone()
    };
    assert!(!should_refresh(&with_deny, t(9, 30, 0)));
    assert!(should_refresh(&with_deny, t(12, 0, 0)));
    let changed = RefreshState {
        current_resource_version: "2-x".into(),
        ..with_allow
    };
    assert!(
        should_refresh(&changed, t(12, 0, 0)),
        "spec changes are not gated"
    );
    let unusable = SyncWindows {
        kind: WindowKind::Allow,
        windows: vec![SyncWindow::new("bad", Duration::from_secs(1))],
    };
    assert!(unusable.allows(t(12, 0, 0)));
}

#[test]
fn requeue_rules() {
    let iv = Duration::from_secs(3600);
    let j = Duration::from_secs(7);
    assert_eq!(
        requeue_after(Duration::ZERO, Some(t(10, 0, 0)), t(10, 0, 0), j),
        Requeue::Never
    );
    assert_eq!(
        requeue_after(iv, None, t(10, 0, 0), j),
        Requeue::After(iv + j)
    );
    assert_eq!(
        requeue_after(iv, Some(t(10, 0, 0)), t(10, 15, 0), Duration::ZERO),
        Requeue::After(Duration::from_secs(2700))
    );
    assert_eq!(
        requeue_after(iv, Some(t(10, 0, 0)), t(10, 15, 0), j),
        Requeue::After(Duration::from_secs(2707))
    );
    assert_eq!(
        requeue_after(iv, Some(t(10, 0, 0)), t(11, 0, 0), j),
        Requeue::Now
    );
    assert_eq!(
        requeue_after(iv, Some(t(11, 0, 0)), t(10, 0, 0), j),
        Requeue::Now
    );
    assert_eq!(max_jitter(iv), Duration::from_secs(300));
    assert_eq!(max_jitter(Duration::from_secs(60)), Duration::from_secs(6));
}

#[test]
fn backoff_doubles_to_seven_minutes() {
    assert_eq!(backoff(0), Duration::from_secs(1));
    assert_eq!(backoff(1), Duration::from_secs(2));
    assert_eq!(backoff(8), Duration::from_secs(256));
    assert_eq!(backoff(9), Duration::from_secs(420));
    assert_eq!(backoff(40), Duration::from_secs(420));
}

#[test]
fn go_durations() {
    let parse_go_duration = |s: &str| esr_api::duration::parse(s).ok().and_then(|d| d.to_std());
    assert_eq!(parse_go_duration("1h0m0s"), Some(Duration::from_secs(3600)));
    assert_eq!(parse_go_duration("0s"), Some(Duration::ZERO));
    assert_eq!(parse_go_duration("0"), Some(Duration::ZERO));
    assert_eq!(parse_go_duration("1.5h"), Some(Duration::from_secs(5400)));
    assert_eq!(parse_go_duration("300ms"), Some(Duration::from_millis(300)));
    assert_eq!(parse_go_duration("-1s"), None);
    assert_eq!(parse_go_duration("5x"), None);
    assert_eq!(parse_go_duration(""), None);
}

#[test]
fn backoffs_double_per_failure_and_reset_on_success() {
    let b: Backoffs<&str> = Backoffs::default();
    assert_eq!(b.failed("a"), Duration::from_secs(1));
    assert_eq!(b.failed("a"), Duration::from_secs(2));
    assert_eq!(b.failed("b"), Duration::from_secs(1), "per object");
    assert_eq!(b.failed("a"), Duration::from_secs(4));
    b.reset(&"a");
    assert_eq!(b.failed("a"), Duration::from_secs(1));
}

#[test]
fn a_throttling_hint_lengthens_the_retry() {
    let s = Duration::from_secs;
    assert_eq!(retry_delay(s(1), None), s(1));
    assert_eq!(retry_delay(s(1), Some(s(30))), s(30));
    // The hint never shortens the backoff.
    assert_eq!(retry_delay(s(64), Some(s(5))), s(64));
}
