use super::*;
use crate::common::refresh::{RefreshPolicy, Requeue};
use crate::externalsecret::pipeline::{self, MissingEvent};
use chrono::TimeZone;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 5, 1, 12, 0, 0).unwrap()
}

fn es(creation: CreationPolicy, deletion: DeletionPolicy) -> EsView {
    EsView {
        name: "es".into(),
        namespace: "ns".into(),
        uid: "uid-1".into(),
        generation: 1,
        target_name: "tgt".into(),
        creation,
        deletion,
        refresh_interval: Duration::from_secs(3600),
        ..Default::default()
    }
}

fn dm(pairs: &[(&str, &str)]) -> DataMap {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
        .collect()
}

fn data(pairs: &[(&str, &str)]) -> Result<Assembled, SyncError> {
    Ok(Assembled {
        data: dm(pairs),
        missing: vec![],
    })
}

fn run(es: &EsView, provider: Result<Assembled, SyncError>, existing: Option<&Secret>) -> Plan {
    run_with(es, provider, existing, &NoTemplate, &[])
}

fn run_with(
    es: &EsView,
    provider: Result<Assembled, SyncError>,
    existing: Option<&Secret>,
    renderer: &dyn Renderer,
    owned: &[String],
) -> Plan {
    plan(PlanInput {
        es,
        provider,
        existing,
        owned_secret_names: owned,
        renderer,
        start: t0(),
        jitter: Duration::ZERO,
    })
}

fn secret(pairs: &[(&str, &str)]) -> Secret {
    let d = dm(pairs);
    let mut labels = BTreeMap::new();
    labels.insert(LABEL_MANAGED.to_string(), "true".to_string());
    let mut ann = BTreeMap::new();
    ann.insert(ANNOTATION_DATA_HASH.to_string(), hash::data_hash(&d));
    Secret {
        metadata: ObjectMeta {
            name: Some("tgt".into()),
            namespace: Some("ns".into()),
            uid: Some("s-uid".into()),
            resource_version: Some("7".into()),
            labels: Some(labels),
            annotations: Some(ann),
            ..Default::default()
        },
        data: Some(d.into_iter().map(|(k, v)| (k, ByteString(v))).collect()),
        ..Default::default()
    }
}

fn written(p: &Plan) -> &Secret {
    match &p.write {
        SecretWrite::Create(s) | SecretWrite::Update(s) => s,
        other => panic!("expected a create or update, got {other:?}"),
    }
}

fn ready(p: &Plan) -> (&str, &str, &str) {
    let c = p.status.ready().expect("ready condition");
    (c.status.as_str(), c.reason.as_str(), c.message.as_str())
}

#[derive(Debug, PartialEq)]
enum W {
    None,
    Create,
    Update,
    Delete,
}

fn kind(p: &Plan) -> W {
    match p.write {
        SecretWrite::None => W::None,
        SecretWrite::Create(_) => W::Create,
        SecretWrite::Update(_) => W::Update,
        SecretWrite::Delete(_) => W::Delete,
    }
}

const CREATIONS: [CreationPolicy; 5] = [
    CreationPolicy::Owner,
    CreationPolicy::Orphan,
    CreationPolicy::Merge,
    CreationPolicy::None,
    CreationPolicy::CreateOrMerge,
];
const DELETIONS: [DeletionPolicy; 3] = [
    DeletionPolicy::Retain,
    DeletionPolicy::Delete,
    DeletionPolicy::Merge,
];

#[test]
fn every_creation_and_deletion_policy_with_data_and_no_secret() {
    for c in CREATIONS {
        for d in DELETIONS {
            let e = es(c, d);
            let p = run(&e, data(&[("k", "v")]), None);
            let (want_write, want_reason) = match c {
                CreationPolicy::Owner | CreationPolicy::Orphan | CreationPolicy::CreateOrMerge => {
                    (W::Create, reason::SECRET_SYNCED)
                }
                CreationPolicy::Merge => (W::None, reason::SECRET_MISSING),
                CreationPolicy::None => (W::None, reason::SECRET_SYNCED),
            };
            assert_eq!(kind(&p), want_write, "{c:?}/{d:?}");
            assert_eq!(ready(&p).1, want_reason, "{c:?}/{d:?}");
            assert_eq!(ready(&p).0, "True");
            assert_eq!(p.outcome, Outcome::Done);
            assert_eq!(p.status.refresh_time, Some(t0()));
            assert_eq!(p.status.synced_resource_version, e.resource_version());
            assert_eq!(p.status.observed_generation, Some(1));
            assert_eq!(p.requeue, Requeue::After(Duration::from_secs(3600)));
            if want_write == W::Create {
                let s = written(&p);
                assert_eq!(s.data.as_ref().unwrap().get("k").unwrap().0, b"v");
                let labels = s.metadata.labels.as_ref().unwrap();
                assert_eq!(labels.get(LABEL_MANAGED).map(String::as_str), Some("true"));
                let owner = c == CreationPolicy::Owner;
                assert_eq!(labels.contains_key(LABEL_OWNER), owner, "{c:?}");
                assert_eq!(s.metadata.owner_references.is_some(), owner, "{c:?}");
                assert_eq!(
                    s.metadata
                        .annotations
                        .as_ref()
                        .unwrap()
                        .get(ANNOTATION_DATA_HASH)
                        .unwrap(),
                    &hash::data_hash(&dm(&[("k", "v")]))
                );
                assert_eq!(p.status.binding_name, "tgt");
                assert_eq!(p.write_event.as_ref().unwrap().reason, "Created");
                assert_eq!(p.write_event.as_ref().unwrap().message, "secret created");
            } else {
                assert_eq!(p.status.binding_name, "");
                assert!(p.write_event.is_none());
            }
            if c == CreationPolicy::Merge {
                assert_eq!(
                    ready(&p).2,
                    "secret will not be created due to CreationPolicy=Merge"
                );
            }
        }
    }
}

#[test]
fn every_creation_and_deletion_policy_with_empty_data_and_existing_secret() {
    for c in CREATIONS {
        for d in DELETIONS {
            let e = es(c, d);
            let existing = secret(&[("k", "old")]);
            let p = run(&e, data(&[]), Some(&existing));
            match (d, c) {
                (DeletionPolicy::Retain, _) => {
                    assert_eq!(kind(&p), W::None);
                    assert_eq!(
                        ready(&p),
                        (
                            "True",
                            "SecretSynced",
                            "secret retained due to DeletionPolicy=Retain"
                        )
                    );
                }
                (DeletionPolicy::Delete, CreationPolicy::Owner) => {
                    assert_eq!(p.write, SecretWrite::Delete("tgt".into()));
                    assert_eq!(
                        ready(&p),
                        (
                            "True",
                            "SecretDeleted",
                            "secret deleted due to DeletionPolicy=Delete"
                        )
                    );
                    assert_eq!(
                        p.write_event,
                        Some(EventRec::normal(
                            "Deleted",
                            "secret deleted due to DeletionPolicy=Delete"
                        ))
                    );
                }
                (DeletionPolicy::Delete, _) => {
                    assert_eq!(kind(&p), W::None);
                    assert_eq!(
                        ready(&p),
                        ("False", "SecretSyncedError", "could not delete secret")
                    );
                    let want = format!(
                        "unable to delete secret tgt: creationPolicy={} is not Owner",
                        creation_policy_name(c)
                    );
                    assert!(matches!(p.outcome, Outcome::Terminal(_)));
                    assert_eq!(p.outcome.text(), Some(want.clone()));
                    assert_eq!(p.events, vec![EventRec::warning("UpdateFailed", want)]);
                    assert_eq!(
                        p.status.refresh_time, None,
                        "refreshTime untouched on failure"
                    );
                    assert_eq!(p.status.synced_resource_version, "");
                }
                (DeletionPolicy::Merge, CreationPolicy::None) => {
                    assert_eq!(kind(&p), W::None);
                    assert_eq!(ready(&p).1, "SecretSynced");
                }
                (DeletionPolicy::Merge, _) => {
                    // The write proceeds with no provider keys.
                    assert_eq!(ready(&p), ("True", "SecretSynced", "secret synced"));
                    if matches!(c, CreationPolicy::Merge | CreationPolicy::CreateOrMerge) {
                        // merge keeps keys not owned by our field manager: nothing changes
                        assert_eq!(kind(&p), W::None, "{c:?}");
                    } else {
                        assert_eq!(kind(&p), W::Update, "{c:?}");
                        let keys: Vec<_> =
                            written(&p).data.as_ref().unwrap().keys().cloned().collect();
                        assert!(keys.is_empty(), "{c:?}: {keys:?}");
                    }
                }
            }
        }
    }
}

#[test]
fn delete_policy_without_existing_secret_marks_deleted_without_write() {
    let e = es(CreationPolicy::Owner, DeletionPolicy::Delete);
    let p = run(&e, data(&[]), None);
    assert_eq!(p.write, SecretWrite::None);
    assert!(p.write_event.is_none());
    assert_eq!(ready(&p).1, "SecretDeleted");
}

#[test]
fn missing_provider_secret_events_are_forwarded() {
    let e = es(CreationPolicy::Owner, DeletionPolicy::Merge);
    let provider = Ok(Assembled {
        data: dm(&[("a", "1")]),
        missing: vec![MissingEvent {
            message: "secret does not exist at provider using spec.dataFrom[1]".into(),
        }],
    });
    let p = run(&e, provider, None);
    assert_eq!(
        p.events,
        vec![EventRec::normal(
            "MissingProviderSecret",
            "secret does not exist at provider using spec.dataFrom[1]"
        )]
    );
}

#[test]
fn provider_error_fails_with_backoff_and_keeps_sync_fields() {
    let mut e = es(CreationPolicy::Owner, DeletionPolicy::Retain);
    e.status.synced_resource_version = "1-old".into();
    e.status.refresh_time = Some(t0() - chrono::Duration::hours(2));
    let p = run(
        &e,
        Err(SyncError::from(esr_provider::ProviderError::not_found()).at_data(0, "db")),
        None,
    );
    assert!(matches!(p.outcome, Outcome::Retry(_)));
    assert_eq!(
        p.outcome.text().as_deref(),
        Some("error processing spec.data[0] (key: db), err: Secret does not exist")
    );
    assert_eq!(
        ready(&p),
        (
            "False",
            "SecretSyncedError",
            "could not get secret data from provider"
        )
    );
    assert_eq!(p.status.synced_resource_version, "1-old");
    assert_eq!(p.status.refresh_time, e.status.refresh_time);
    assert_eq!(p.events[0].type_, EventType::Warning);
    assert_eq!(p.events[0].reason, "UpdateFailed");
    assert_eq!(p.write, SecretWrite::None);
}

#[test]
fn steady_state_writes_nothing_and_status_only_moves_refresh_time() {
    let e0 = es(CreationPolicy::Owner, DeletionPolicy::Retain);
    let first = run(&e0, data(&[("k", "v")]), None);
    let mut created = written(&first).clone();
    created.metadata.uid = Some("s-uid".into());
    created.metadata.resource_version = Some("9".into());
    let mut e1 = e0.clone();
    e1.status = first.status.clone();
    let second = run(&e1, data(&[("k", "v")]), Some(&created));
    assert_eq!(
        second.write,
        SecretWrite::None,
        "semantically equal: no update"
    );
    assert!(second.write_event.is_none());
    // Same timestamp → nothing changed at all: no status write.
    assert!(!second.status_changed(&e1.status));
    // The decision skips entirely while the interval has not elapsed.
    let d = decide(
        &e1,
        Some(&created),
        t0() + chrono::Duration::minutes(5),
        Duration::ZERO,
    );
    assert_eq!(
        d,
        Decision::Skip {
            requeue: Requeue::After(Duration::from_secs(3300)),
            status: None
        }
    );
}

#[test]
fn condition_transition_time_kept_when_status_unchanged() {
    let mut st = EsStatus::default();
    let c = |s: &str, r: &str, m: &str| Condition {
        type_: "Ready".into(),
        status: s.into(),
        reason: r.into(),
        message: m.into(),
        last_transition_time: None,
    };
    set_condition(&mut st, c("True", "SecretSynced", "secret synced"), t0());
    let later = t0() + chrono::Duration::hours(1);
    set_condition(
        &mut st,
        c(
            "True",
            "SecretSynced",
            "secret retained due to DeletionPolicy=Retain",
        ),
        later,
    );
    assert_eq!(st.conditions.len(), 1);
    assert_eq!(st.conditions[0].last_transition_time, Some(t0()));
    assert_eq!(
        st.conditions[0].message,
        "secret retained due to DeletionPolicy=Retain"
    );
    set_condition(&mut st, c("False", "SecretSyncedError", "x"), later);
    assert_eq!(st.conditions[0].last_transition_time, Some(later));
}

#[test]
fn drift_forces_resync_under_every_policy_but_orphan() {
    for policy in [
        RefreshPolicy::Periodic,
        RefreshPolicy::CreatedOnce,
        RefreshPolicy::OnChange,
    ] {
        let mut e = es(CreationPolicy::Owner, DeletionPolicy::Retain);
        e.refresh_policy = policy;
        e.status.synced_resource_version = e.resource_version();
        e.status.refresh_time = Some(t0());
        let good = secret(&[("k", "v")]);
        let now = t0() + chrono::Duration::minutes(1);
        assert!(
            matches!(
                decide(&e, Some(&good), now, Duration::ZERO),
                Decision::Skip { .. }
            ),
            "{policy:?}"
        );
        let mut edited = good.clone();
        edited
            .data
            .as_mut()
            .unwrap()
            .insert("k".into(), ByteString(b"tampered".to_vec()));
        assert_eq!(
            decide(&e, Some(&edited), now, Duration::ZERO),
            Decision::Sync,
            "{policy:?} edit"
        );
        assert_eq!(
            decide(&e, None, now, Duration::ZERO),
            Decision::Sync,
            "{policy:?} deleted"
        );
        let mut unlabelled = good.clone();
        unlabelled.metadata.labels = None;
        assert_eq!(
            decide(&e, Some(&unlabelled), now, Duration::ZERO),
            Decision::Sync,
            "{policy:?} label removed"
        );
        e.creation = CreationPolicy::Orphan;
        assert!(
            matches!(decide(&e, None, now, Duration::ZERO), Decision::Skip { .. }),
            "orphan never resyncs on drift"
        );
    }
}

#[test]
fn refresh_policies_in_decide() {
    let now = t0() + chrono::Duration::hours(5);
    let good = secret(&[("k", "v")]);
    for (policy, spec_changed, want_sync) in [
        (RefreshPolicy::Periodic, false, true),
        (RefreshPolicy::Periodic, true, true),
        (RefreshPolicy::CreatedOnce, false, false),
        (RefreshPolicy::CreatedOnce, true, false),
        (RefreshPolicy::OnChange, false, false),
        (RefreshPolicy::OnChange, true, true),
    ] {
        let mut e = es(CreationPolicy::Owner, DeletionPolicy::Retain);
        e.refresh_policy = policy;
        e.status.synced_resource_version = e.resource_version();
        e.status.refresh_time = Some(t0());
        e.status.conditions.push(Condition {
            type_: "Ready".into(),
            status: "True".into(),
            reason: "SecretSynced".into(),
            message: "secret synced".into(),
            last_transition_time: Some(t0()),
        });
        e.status.observed_generation = Some(1);
        if spec_changed {
            e.generation = 2;
        }
        let d = decide(&e, Some(&good), now, Duration::from_secs(3));
        assert_eq!(
            d == Decision::Sync,
            want_sync,
            "{policy:?} spec_changed={spec_changed}"
        );
        if let Decision::Skip { status, requeue } = d {
            // observedGeneration catches up even when the spec change is not synced.
            assert_eq!(
                status.map(|s| s.observed_generation),
                spec_changed.then_some(Some(2))
            );
            assert_eq!(
                requeue,
                Requeue::Now,
                "interval elapsed: CreatedOnce/OnChange still wake up"
            );
        }
    }
}

#[test]
fn label_only_change_moves_the_resource_version() {
    let mut e = es(CreationPolicy::Owner, DeletionPolicy::Retain);
    let before = e.resource_version();
    e.labels.insert("team".into(), "a".into());
    let after = e.resource_version();
    assert_ne!(before, after);
    assert!(after.starts_with("1-"));
    e.status.synced_resource_version = before;
    e.status.refresh_time = Some(t0());
    assert_eq!(
        decide(&e, Some(&secret(&[("k", "v")])), t0(), Duration::ZERO),
        Decision::Sync
    );
}

#[test]
fn interval_zero_never_requeues() {
    let mut e = es(CreationPolicy::Owner, DeletionPolicy::Retain);
    e.refresh_interval = Duration::ZERO;
    let p = run(&e, data(&[("k", "v")]), None);
    assert_eq!(p.requeue, Requeue::Never);
}

#[test]
fn jitter_only_for_periodic() {
    let mut e = es(CreationPolicy::Owner, DeletionPolicy::Retain);
    let p = plan(PlanInput {
        es: &e,
        provider: data(&[("k", "v")]),
        existing: None,
        owned_secret_names: &[],
        renderer: &NoTemplate,
        start: t0(),
        jitter: Duration::from_secs(11),
    });
    assert_eq!(p.requeue, Requeue::After(Duration::from_secs(3611)));
    e.refresh_policy = RefreshPolicy::OnChange;
    let p = plan(PlanInput {
        es: &e,
        provider: data(&[("k", "v")]),
        existing: None,
        owned_secret_names: &[],
        renderer: &NoTemplate,
        start: t0(),
        jitter: Duration::from_secs(11),
    });
    assert_eq!(p.requeue, Requeue::After(Duration::from_secs(3600)));
}

#[test]
fn immutable_secret_data_change_is_terminal_but_metadata_updates() {
    let mut e = es(CreationPolicy::Owner, DeletionPolicy::Retain);
    e.immutable = true;
    let created = run(&e, data(&[("k", "v")]), None);
    let mut s = written(&created).clone();
    assert_eq!(s.immutable, Some(true));
    s.metadata.uid = Some("s-uid".into());
    // same data: no write
    let same = run(&e, data(&[("k", "v")]), Some(&s));
    assert_eq!(same.write, SecretWrite::None);
    assert_eq!(same.outcome, Outcome::Done);
    // ES labels change: metadata-only update of the existing immutable Secret
    let mut e2 = e.clone();
    e2.labels.insert("l".into(), "1".into());
    let meta = run(&e2, data(&[("k", "v")]), Some(&s));
    // existing immutable Secrets are never re-templated, so ES labels are not copied again
    assert_eq!(meta.write, SecretWrite::None);
    // tamper the data → the hash annotation is recomputed from the stored data, so the metadata
    // changes, and the data itself is never rewritten
    let mut tampered = s.clone();
    tampered
        .metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert(ANNOTATION_DATA_HASH.into(), "stale".into());
    let fixed = run(&e, data(&[("k", "v")]), Some(&tampered));
    assert_eq!(kind(&fixed), W::Update);
    assert_eq!(written(&fixed).data, s.data);
    // the existing Secret immutable but the type changes through the template → terminal
    let mut e3 = e.clone();
    e3.template = Some(TemplateView {
        type_: "kubernetes.io/tls".into(),
        ..Default::default()
    });
    let mut mutable_view = s.clone();
    mutable_view.immutable = Some(true);
    let p = run(&e3, data(&[("k", "v")]), Some(&mutable_view));
    assert_eq!(
        p.write,
        SecretWrite::None,
        "immutable secrets are not re-templated"
    );
}

#[test]
fn immutable_change_detected_when_existing_is_mutable_flag_toggle() {
    // An existing mutable Secret gets immutable=true and new data in one update: allowed.
    let mut e = es(CreationPolicy::Owner, DeletionPolicy::Retain);
    e.immutable = true;
    let s = secret(&[("k", "old")]);
    let p = run(&e, data(&[("k", "new")]), Some(&s));
    let w = written(&p);
    assert_eq!(w.immutable, Some(true));
    assert_eq!(w.data.as_ref().unwrap()["k"].0, b"new");
}

#[test]
fn immutable_existing_with_changed_data_from_merge_policy_is_terminal() {
    // CreateOrMerge keeps existing keys; with an immutable Secret whose stored hash is stale and
    // whose owner label must be removed, the metadata changes; a data change cannot happen since
    // data is never re-templated. Simulate a type change request via ownership: force data change
    // by a Secret that lacks our data-hash but is immutable — only metadata is written.
    let mut e = es(CreationPolicy::CreateOrMerge, DeletionPolicy::Retain);
    e.immutable = true;
    let mut s = secret(&[("k", "old")]);
    s.immutable = Some(true);
    s.metadata
        .labels
        .as_mut()
        .unwrap()
        .insert(LABEL_OWNER.into(), "x".into());
    let p = run(&e, data(&[("k", "new")]), Some(&s));
    let w = written(&p);
    assert_eq!(
        w.data.as_ref().unwrap()["k"].0,
        b"old",
        "immutable data stays"
    );
    assert!(
        !w.metadata
            .labels
            .as_ref()
            .unwrap()
            .contains_key(LABEL_OWNER)
    );
    assert_eq!(p.outcome, Outcome::Done);
}

#[test]
fn owned_by_another_es_is_terminal() {
    let e = es(CreationPolicy::Owner, DeletionPolicy::Retain);
    let mut s = secret(&[("k", "v")]);
    s.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "external-secrets.io/v1".into(),
        kind: "ExternalSecret".into(),
        name: "other".into(),
        uid: "u2".into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }]);
    let p = run(&e, data(&[("k", "v")]), Some(&s));
    // ESO v2.10+: own reason, `<base>: <detail>`.
    assert_eq!(
        ready(&p),
        (
            "False",
            "SecretOwnedByOther",
            "target is owned by another ExternalSecret: unable to mutate secret tgt: secret is owned by another ExternalSecret: other"
        )
    );
    assert!(matches!(p.outcome, Outcome::Terminal(_)));
    assert_eq!(
        p.outcome.text().as_deref(),
        Some("unable to mutate secret tgt: secret is owned by another ExternalSecret: other")
    );
    // also for Orphan: another ES owning the Secret is always an error
    let p = run(
        &es(CreationPolicy::Orphan, DeletionPolicy::Retain),
        data(&[("k", "v")]),
        Some(&s),
    );
    assert!(matches!(p.outcome, Outcome::Terminal(_)));
}

#[test]
fn owned_by_other_controller_cannot_take_ownership() {
    let e = es(CreationPolicy::Owner, DeletionPolicy::Retain);
    let mut s = secret(&[("k", "v")]);
    s.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "apps/v1".into(),
        kind: "Deployment".into(),
        name: "web".into(),
        uid: "u3".into(),
        controller: Some(true),
        block_owner_deletion: None,
    }]);
    let p = run(&e, data(&[("k", "v")]), Some(&s));
    assert_eq!(ready(&p).1, "SecretOwnedByOther");
    assert_eq!(
        ready(&p).2,
        "failed to take ownership of target secret: unable to mutate secret tgt: could not set controller reference on secret: Object ns/tgt is already owned by another Deployment controller web"
    );
    assert!(
        matches!(&p.outcome, Outcome::Terminal(t) if t.to_string().contains("already owned by another Deployment controller web"))
    );
    // Orphan does not need the controller ref: fine
    let p = run(
        &es(CreationPolicy::Orphan, DeletionPolicy::Retain),
        data(&[("k", "v")]),
        Some(&s),
    );
    assert_eq!(p.outcome, Outcome::Done);
}

#[test]
fn adopting_and_releasing_ownership() {
    let e = es(CreationPolicy::Owner, DeletionPolicy::Retain);
    let s = secret(&[("k", "v")]);
    let p = run(&e, data(&[("k", "v")]), Some(&s));
    let w = written(&p);
    let refs = w.metadata.owner_references.as_ref().unwrap();
    assert_eq!(refs.len(), 1);
    assert_eq!(refs[0].api_version, "external-secrets.io/v1");
    assert_eq!(refs[0].kind, "ExternalSecret");
    assert_eq!(refs[0].name, "es");
    assert_eq!(refs[0].uid, "uid-1");
    assert_eq!(refs[0].controller, Some(true));
    assert_eq!(refs[0].block_owner_deletion, Some(true));
    assert_eq!(
        w.metadata.labels.as_ref().unwrap()[LABEL_OWNER],
        hash::created_by_label("ns", "es")
    );
    // switching to Orphan releases the ref and the created-by label
    let owned = w.clone();
    let p = run(
        &es(CreationPolicy::Orphan, DeletionPolicy::Retain),
        data(&[("k", "v")]),
        Some(&owned),
    );
    let w = written(&p);
    assert!(w.metadata.owner_references.is_none());
    assert!(
        !w.metadata
            .labels
            .as_ref()
            .unwrap()
            .contains_key(LABEL_OWNER)
    );
    assert!(delete_target_on_es_deletion(
        &es(CreationPolicy::Owner, DeletionPolicy::Delete),
        Some(&owned)
    ));
    assert!(!delete_target_on_es_deletion(
        &es(CreationPolicy::Owner, DeletionPolicy::Retain),
        Some(&owned)
    ));
    assert!(!delete_target_on_es_deletion(
        &es(CreationPolicy::Owner, DeletionPolicy::Delete),
        Some(&s)
    ));
}

#[test]
fn orphans_deleted_for_owner_only() {
    let owned = vec!["tgt".to_string(), "old-name".to_string()];
    let p = run_with(
        &es(CreationPolicy::Owner, DeletionPolicy::Retain),
        data(&[("k", "v")]),
        None,
        &NoTemplate,
        &owned,
    );
    assert_eq!(p.delete_orphans, vec!["old-name".to_string()]);
    let p = run_with(
        &es(CreationPolicy::Orphan, DeletionPolicy::Retain),
        data(&[("k", "v")]),
        None,
        &NoTemplate,
        &owned,
    );
    assert!(p.delete_orphans.is_empty());
    assert_eq!(
        orphan_deleted_event().message,
        "secret deleted because it was orphaned"
    );
}

#[test]
fn es_labels_and_annotations_copied_without_template() {
    let mut e = es(CreationPolicy::Owner, DeletionPolicy::Retain);
    e.labels.insert("team".into(), "a".into());
    e.annotations.insert("note".into(), "n".into());
    let p = run(&e, data(&[("k", "v")]), None);
    let w = written(&p);
    assert_eq!(w.metadata.labels.as_ref().unwrap()["team"], "a");
    assert_eq!(w.metadata.annotations.as_ref().unwrap()["note"], "n");
}

fn managed_fields(fm: &str, fields: serde_json::Value) -> Vec<ManagedFieldsEntry> {
    vec![ManagedFieldsEntry {
        manager: Some(fm.to_string()),
        operation: Some("Update".into()),
        fields_type: Some("FieldsV1".into()),
        fields_v1: Some(FieldsV1(fields)),
        ..Default::default()
    }]
}

#[test]
fn keys_labels_annotations_owned_by_our_field_manager_are_removed() {
    let e = es(CreationPolicy::Merge, DeletionPolicy::Retain);
    let mut s = secret(&[("old", "1"), ("foreign", "2")]);
    s.metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("gone".into(), "x".into());
    s.metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("theirs".into(), "y".into());
    s.metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert("gone-ann".into(), "x".into());
    s.metadata.managed_fields = Some(managed_fields(
        &e.field_manager(),
        serde_json::json!({
            "f:data": {".": {}, "f:old": {}},
            "f:metadata": {"f:labels": {"f:gone": {}}, "f:annotations": {"f:gone-ann": {}}}
        }),
    ));
    let p = run(&e, data(&[("new", "3")]), Some(&s));
    let w = written(&p);
    let keys: Vec<_> = w.data.as_ref().unwrap().keys().cloned().collect();
    assert_eq!(keys, vec!["foreign".to_string(), "new".to_string()]);
    let labels = w.metadata.labels.as_ref().unwrap();
    assert!(!labels.contains_key("gone"));
    assert_eq!(labels["theirs"], "y");
    assert!(
        !w.metadata
            .annotations
            .as_ref()
            .unwrap()
            .contains_key("gone-ann")
    );
    assert!(w.metadata.owner_references.is_none(), "Merge never owns");
}

#[test]
fn managed_fields_of_other_managers_are_ignored() {
    let s = {
        let mut s = secret(&[("a", "1")]);
        s.metadata.managed_fields = Some(managed_fields(
            "kubectl",
            serde_json::json!({"f:data": {"f:a": {}}}),
        ));
        s
    };
    assert!(managed_keys(&s, "externalsecrets.external-secrets.io/es", &["data"]).is_empty());
    assert_eq!(
        managed_keys(&s, "kubectl", &["data"]),
        vec!["a".to_string()]
    );
}

struct FakeRenderer {
    result: Result<Rendered, RenderError>,
}

impl Renderer for FakeRenderer {
    fn render(&self, _data: &DataMap) -> Result<Rendered, RenderError> {
        self.result.clone()
    }
}

fn tmpl() -> TemplateView {
    let mut labels = BTreeMap::new();
    labels.insert("app".to_string(), "{{ .k }}".to_string());
    TemplateView {
        type_: "kubernetes.io/basic-auth".into(),
        engine_version: "v2".into(),
        has_data_templates: true,
        labels,
        finalizers: vec!["example.com/keep".into()],
        ..Default::default()
    }
}

#[test]
fn template_output_metadata_type_and_finalizers() {
    let mut e = es(CreationPolicy::Owner, DeletionPolicy::Retain);
    e.labels.insert("es-label".into(), "x".into());
    e.template = Some(tmpl());
    let mut rl = BTreeMap::new();
    rl.insert("app".to_string(), "rendered".to_string());
    let r = FakeRenderer {
        result: Ok(Rendered {
            data: dm(&[("username", "u")]),
            labels: rl,
            annotations: BTreeMap::new(),
        }),
    };
    let p = run_with(&e, data(&[("k", "v")]), None, &r, &[]);
    let w = written(&p);
    assert_eq!(w.type_.as_deref(), Some("kubernetes.io/basic-auth"));
    let keys: Vec<_> = w.data.as_ref().unwrap().keys().cloned().collect();
    assert_eq!(
        keys,
        vec!["username".to_string()],
        "data templates replace provider keys"
    );
    let labels = w.metadata.labels.as_ref().unwrap();
    assert_eq!(labels["app"], "rendered");
    assert!(
        !labels.contains_key("es-label"),
        "ES labels are not copied when a template exists"
    );
    assert_eq!(
        w.metadata.finalizers.as_ref().unwrap(),
        &vec!["example.com/keep".to_string()]
    );
    // mergePolicy Merge also copies provider keys
    let mut t = tmpl();
    t.merge_policy_merge = true;
    e.template = Some(t);
    let p = run_with(&e, data(&[("k", "v")]), None, &r, &[]);
    let keys: Vec<_> = written(&p).data.as_ref().unwrap().keys().cloned().collect();
    assert_eq!(keys, vec!["k".to_string(), "username".to_string()]);
    // no data templates: provider keys are copied
    let mut t = tmpl();
    t.has_data_templates = false;
    e.template = Some(t);
    let r = FakeRenderer {
        result: Ok(Rendered::default()),
    };
    let p = run_with(&e, data(&[("k", "v")]), None, &r, &[]);
    let keys: Vec<_> = written(&p).data.as_ref().unwrap().keys().cloned().collect();
    assert_eq!(keys, vec!["k".to_string()]);
}

#[test]
fn template_errors() {
    let mut e = es(CreationPolicy::Owner, DeletionPolicy::Retain);
    e.template = Some(tmpl());
    let r = FakeRenderer {
        result: Err(RenderError::Exec(
            "unable to execute template at key tls.crt: boom".into(),
        )),
    };
    let p = run_with(&e, data(&[("k", "v")]), None, &r, &[]);
    assert_eq!(
        ready(&p),
        ("False", "SecretSyncedError", "could not update secret")
    );
    assert!(matches!(p.outcome, Outcome::Retry(_)));
    assert_eq!(
        p.outcome.text().as_deref(),
        Some(
            "could not apply template: could not execute template: unable to execute template at key tls.crt: boom"
        )
    );
    // on update, ESO wraps with "unable to mutate secret"
    let s = secret(&[("k", "v")]);
    let p = run_with(&e, data(&[("k", "v")]), Some(&s), &r, &[]);
    assert!(
        matches!(&p.outcome, Outcome::Retry(t) if t.to_string().starts_with("unable to mutate secret tgt: could not apply template: could not execute template:"))
    );
    let r = FakeRenderer {
        result: Err(RenderError::Fetch("configmaps \"tpl\" not found".into())),
    };
    let p = run_with(&e, data(&[("k", "v")]), None, &r, &[]);
    assert!(matches!(p.outcome, Outcome::Retry(_)));
    assert_eq!(
        p.outcome.text().as_deref(),
        Some(
            "could not apply template: error fetching templateFrom data: configmaps \"tpl\" not found"
        )
    );
    let mut t = tmpl();
    t.engine_version = "v1".into();
    e.template = Some(t);
    let p = run_with(&e, data(&[("k", "v")]), None, &NoTemplate, &[]);
    assert!(matches!(p.outcome, Outcome::Retry(_)));
    assert_eq!(
        p.outcome.text().as_deref(),
        Some("could not apply template: unsupported template engine version")
    );
    assert_eq!(p.write, SecretWrite::None);
}

struct Prefix;
impl pipeline::KeyTransformer for Prefix {
    fn transform_key(&self, template: &str, key: &str) -> Result<String, pipeline::PipelineError> {
        Ok(format!("{template}{key}"))
    }
}

#[test]
fn rewrite_chain_into_plan() {
    use pipeline::*;
    let opts = DataFromOptions {
        rewrite: vec![
            Rewrite::Merge {
                into: String::new(),
                priority: vec![],
                priority_policy: PriorityPolicy::Strict,
                conflict_policy: ConflictPolicy::Error,
                strategy: MergeStrategy::Extract,
            },
            Rewrite::Regexp {
                source: "^(.*)_pass$".into(),
                target: "${1}-password".into(),
            },
            Rewrite::Transform {
                template: "app-".into(),
            },
        ],
        ..Default::default()
    };
    let fetched = dm(&[("cfg", r#"{"db_pass":"p","db_user":"u"}"#)]);
    let processed = process_data_from_map(&opts, &Prefix, fetched).unwrap();
    let assembled = assemble(
        vec![DataFromResult {
            kind: DataFromKind::Extract,
            result: EntryResult::Ok(processed),
        }],
        vec![],
        false,
    )
    .unwrap();
    let p = run(
        &es(CreationPolicy::Owner, DeletionPolicy::Retain),
        Ok(assembled),
        None,
    );
    let keys: Vec<_> = written(&p).data.as_ref().unwrap().keys().cloned().collect();
    assert_eq!(
        keys,
        vec!["app-db-password".to_string(), "app-db_user".to_string()]
    );
}

#[test]
fn secret_validity_reads_label_and_hash() {
    let s = secret(&[("k", "v")]);
    let v = secret_validity(Some(&s));
    assert!(v.exists && v.managed && v.hash_matches);
    assert!(!secret_validity(None).exists);
}

#[test]
fn detailed_messages_cut_the_detail_at_256_characters() {
    assert_eq!(
        detailed("could not update secret", "secrets \"x\" is forbidden"),
        "could not update secret: secrets \"x\" is forbidden"
    );
    assert_eq!(detailed("base", "  "), "base");
    let exact = "d".repeat(MAX_DETAIL);
    assert_eq!(detailed("base", &exact), format!("base: {exact}"));
    let long = format!("{}{}", "é".repeat(MAX_DETAIL), "tail");
    assert_eq!(
        detailed("base", &long),
        format!("base: {}...", "é".repeat(MAX_DETAIL))
    );
}

#[test]
fn write_failures_carry_the_api_error() {
    let e = es(CreationPolicy::Owner, DeletionPolicy::Retain);
    let err = "secrets \"tgt\" is forbidden: User cannot update";
    let cond = |k: WriteKind| {
        let (st, ev) = write_failed(&e, &e.status, k, &write_error(&e, k, err, None), t0());
        let c = st.ready().unwrap().clone();
        (c.reason, c.message, ev.reason, ev.message)
    };
    assert_eq!(
        cond(WriteKind::Create),
        (
            "SecretSyncedError".into(),
            format!("could not update secret: {err}"),
            "UpdateFailed".into(),
            err.to_string()
        )
    );
    let (r, m, _, ev) = cond(WriteKind::Update);
    assert_eq!(r, "SecretSyncedError");
    assert_eq!(
        m,
        format!("could not update secret: unable to update secret tgt: {err}")
    );
    assert_eq!(ev, format!("unable to update secret tgt: {err}"));
    assert_eq!(
        cond(WriteKind::Delete).1,
        format!("could not delete secret: {err}")
    );
    assert_eq!(
        cond(WriteKind::DeleteOrphans).1,
        format!("could not delete orphaned secrets: {err}")
    );
    let (r, m, _, _) = cond(WriteKind::Immutable);
    assert_eq!(r, "SecretImmutable");
    assert_eq!(
        m,
        format!("could not update secret, target is immutable: {err}")
    );
}

#[test]
fn generic_targets_are_refused_with_esos_condition() {
    let mut e = es(CreationPolicy::Owner, DeletionPolicy::Retain);
    assert_eq!(generic_target_error(e.manifest.as_ref(), false), None);
    e.manifest = Some(ManifestView {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
    });
    let err = generic_target_error(e.manifest.as_ref(), false).unwrap();
    assert_eq!(err, GenericTargetError::Disabled);
    let p = generic_target_failed(&e, &err, t0());
    assert_eq!(
        ready(&p),
        (
            "False",
            "SecretSyncedError",
            "invalid generic target: generic targets are disabled. Enable with --unsafe-allow-generic-targets flag"
        )
    );
    assert_eq!(p.write, SecretWrite::None);
    assert!(matches!(p.outcome, Outcome::Terminal(_)));
    assert_eq!(p.events.len(), 1);
    assert_eq!(p.events[0].reason, "UpdateFailed");
    // Allowed: ESO's required fields first, then esr's refusal.
    let err = generic_target_error(e.manifest.as_ref(), true).unwrap();
    assert_eq!(
        detailed(msg::ERR_GENERIC_TARGET, &err.to_string()),
        "invalid generic target: esr does not write generic targets (v1 ConfigMap); only Secret targets are supported"
    );
    e.manifest = Some(ManifestView {
        api_version: "v1".into(),
        kind: String::new(),
    });
    assert_eq!(
        generic_target_error(e.manifest.as_ref(), true),
        Some(GenericTargetError::NoKind)
    );
}

/// The step kinds, for order assertions.
fn names(steps: &Steps) -> Vec<&'static str> {
    steps
        .steps
        .iter()
        .map(|s| match s {
            Step::AddFinalizer => "add-finalizer",
            Step::RemoveFinalizer => "remove-finalizer",
            Step::DeleteTarget => "delete-target",
            Step::Forget => "forget",
            Step::Event(_) => "event",
            Step::DeleteOrphan(_) => "delete-orphan",
            Step::Write(SecretWrite::Create(_)) => "create",
            Step::Write(SecretWrite::Update(_)) => "update",
            Step::Write(SecretWrite::Delete(_)) => "delete",
            Step::Write(SecretWrite::None) => "no-write",
            Step::Rollout(_) => "rollout",
            Step::Status(_) => "status",
            Step::ReadyMetric(_) => "ready-metric",
        })
        .collect()
}

#[test]
fn a_first_sync_creates_then_records_then_writes_status() {
    let e = es(CreationPolicy::Owner, DeletionPolicy::Retain);
    let p = run_with(
        &e,
        data(&[("k", "v")]),
        None,
        &NoTemplate,
        &["tgt".to_string(), "old".to_string()],
    );
    let steps = p.steps(&e);
    assert_eq!(
        names(&steps),
        [
            "delete-orphan",
            "create",
            "event",
            "rollout",
            "status",
            "ready-metric"
        ]
    );
    assert_eq!(steps.steps[0], Step::DeleteOrphan("old".into()));
    assert_eq!(
        steps.steps[2],
        Step::Event(EventRec::normal("Created", "secret created"))
    );
    assert_eq!(
        steps.steps[3],
        Step::Rollout(hash::data_hash(&dm(&[("k", "v")])))
    );
    assert_eq!(steps.steps[5], Step::ReadyMetric("True".into()));
    assert_eq!(
        steps.end,
        End::Done {
            requeue: p.requeue,
            wrote: true
        }
    );
}

#[test]
fn an_unchanged_refresh_writes_only_the_status() {
    let mut e = es(CreationPolicy::Owner, DeletionPolicy::Retain);
    let first = run(&e, data(&[("k", "v")]), None);
    let created = written(&first).clone();
    e.status = first.status.clone();
    let mut later = e.clone();
    later.status.refresh_time = Some(t0() - chrono::Duration::hours(2));
    let p = run(&later, data(&[("k", "v")]), Some(&created));
    let steps = p.steps(&later);
    assert_eq!(names(&steps), ["status", "ready-metric"]);
    assert_eq!(
        steps.end,
        End::Done {
            requeue: p.requeue,
            wrote: false
        }
    );
    // Nothing changed at all: only the metric.
    let p = run(&e, data(&[("k", "v")]), Some(&created));
    assert_eq!(names(&p.steps(&e)), ["ready-metric"]);
}

#[test]
fn a_fetch_failure_writes_nothing_but_the_failure() {
    let e = es(CreationPolicy::Owner, DeletionPolicy::Retain);
    let err = SyncError::from(esr_provider::ProviderError::throttled(
        "slow down",
        Some(Duration::from_secs(9)),
    ))
    .at_data(0, "db");
    let p = run_with(
        &e,
        Err(err.clone()),
        None,
        &NoTemplate,
        &["orphan".to_string()],
    );
    let steps = p.steps(&e);
    assert_eq!(names(&steps), ["event", "status", "ready-metric"]);
    assert_eq!(steps.steps[2], Step::ReadyMetric("False".into()));
    assert_eq!(steps.end, End::Retry(err));
    let End::Retry(e) = &steps.end else {
        panic!("{steps:?}")
    };
    assert_eq!(e.retry_after(), Some(Duration::from_secs(9)));
}

#[test]
fn a_failed_write_maps_to_status_event_and_retry() {
    let e = es(CreationPolicy::Owner, DeletionPolicy::Retain);
    let p = run(&e, data(&[("k", "new")]), Some(&secret(&[("k", "old")])));
    let steps = p.steps(&e);
    let write = steps
        .steps
        .iter()
        .find(|s| matches!(s, Step::Write(_)))
        .unwrap();
    let api = "secrets \"tgt\" is forbidden";
    let failed = write_failure(&e, write, &steps.end, api, t0()).unwrap();
    assert_eq!(names(&failed), ["event", "status", "ready-metric"]);
    let want = format!("unable to update secret tgt: {api}");
    assert_eq!(
        failed.steps[0],
        Step::Event(EventRec::warning("UpdateFailed", want.clone()))
    );
    let Step::Status(st) = &failed.steps[1] else {
        panic!("{failed:?}")
    };
    assert_eq!(
        st.ready().unwrap().message,
        format!("could not update secret: {want}")
    );
    let End::Retry(err) = &failed.end else {
        panic!("{failed:?}")
    };
    assert_eq!(err.to_string(), want);
    assert_eq!(err.metric_label(), "kubernetes");

    // An orphan that cannot be deleted: event and status, no metric (ESO order kept).
    let orphan = Step::DeleteOrphan("old".into());
    let failed = write_failure(&e, &orphan, &steps.end, api, t0()).unwrap();
    assert_eq!(names(&failed), ["event", "status"]);
    let Step::Status(st) = &failed.steps[1] else {
        panic!("{failed:?}")
    };
    assert_eq!(
        st.ready().unwrap().message,
        format!("could not delete orphaned secrets: {api}")
    );

    // The metadata write of an immutable target keeps the immutability failure in front.
    let imm = es(CreationPolicy::Owner, DeletionPolicy::Retain);
    let terminal = End::Terminal(SyncError::Immutable {
        target: "tgt".into(),
    });
    let write = Step::Write(SecretWrite::Update(Box::new(secret(&[("k", "old")]))));
    let failed = write_failure(&imm, &write, &terminal, api, t0()).unwrap();
    let End::Retry(err) = &failed.end else {
        panic!("{failed:?}")
    };
    assert_eq!(
        err.to_string(),
        format!("unable to update secret tgt: secret is immutable; {api}")
    );
    let Step::Status(st) = &failed.steps[1] else {
        panic!("{failed:?}")
    };
    assert_eq!(st.ready().unwrap().reason, "SecretImmutable");

    // Other steps' failures are the reconcile's error.
    assert_eq!(
        write_failure(&e, &Step::AddFinalizer, &steps.end, api, t0()),
        None
    );
    assert!(Step::Write(SecretWrite::None).requeue_on_conflict());
    assert!(!Step::RemoveFinalizer.requeue_on_conflict());
}

#[test]
fn admission_orders_the_gates() {
    let gates = Gates {
        foreign_class: false,
        cluster_stores: true,
        allow_generic_targets: false,
    };
    let mut e = es(CreationPolicy::Owner, DeletionPolicy::Retain);
    assert_eq!(
        admit(&e, &gates, t0()),
        Admission::Proceed(vec![Step::AddFinalizer])
    );
    e.has_finalizer = true;
    assert_eq!(admit(&e, &gates, t0()), Admission::Proceed(vec![]));
    // Another class's ExternalSecret: nothing at all, not even the finalizer.
    e.has_finalizer = false;
    let foreign = Gates {
        foreign_class: true,
        ..gates
    };
    let Admission::Stop(s) = admit(&e, &foreign, t0()) else {
        panic!()
    };
    assert!(s.steps.is_empty());
    assert!(matches!(s.end, End::Await(_)));
    // ClusterSecretStore reconciler disabled: the finalizer, then skip.
    e.uses_cluster_store = true;
    let no_css = Gates {
        cluster_stores: false,
        ..gates
    };
    let Admission::Stop(s) = admit(&e, &no_css, t0()) else {
        panic!()
    };
    assert_eq!(s.steps, vec![Step::AddFinalizer]);
    assert!(matches!(s.end, End::Await(_)));
    // A generic target: finalizer, the Warning, the status and the metric; refused, no retry.
    e.uses_cluster_store = false;
    e.manifest = Some(ManifestView {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
    });
    let Admission::Stop(s) = admit(&e, &gates, t0()) else {
        panic!()
    };
    assert_eq!(
        names(&s),
        ["add-finalizer", "event", "status", "ready-metric"]
    );
    assert_eq!(
        s.end,
        End::Refused(SyncError::GenericTarget(GenericTargetError::Disabled))
    );
}

#[test]
fn deletion_applies_the_policy_then_drops_the_finalizer() {
    let mut e = es(CreationPolicy::Owner, DeletionPolicy::Delete);
    e.deleting = true;
    e.has_finalizer = true;
    let mut owned = secret(&[("k", "v")]);
    owned.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "external-secrets.io/v1".into(),
        kind: "ExternalSecret".into(),
        name: "es".into(),
        uid: "uid-1".into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }]);
    assert!(deletion_reads_target(&e));
    assert_eq!(
        names(&deletion(&e, Some(&owned))),
        ["delete-target", "remove-finalizer", "forget"]
    );
    // Not controlled by this ExternalSecret, or Retain: kept.
    assert_eq!(
        names(&deletion(&e, Some(&secret(&[("k", "v")])))),
        ["remove-finalizer", "forget"]
    );
    e.deletion = DeletionPolicy::Retain;
    assert_eq!(
        names(&deletion(&e, Some(&owned))),
        ["remove-finalizer", "forget"]
    );
    // Without our finalizer there is nothing to clean up.
    e.has_finalizer = false;
    assert!(!deletion_reads_target(&e));
    assert_eq!(names(&deletion(&e, None)), ["forget"]);
}

#[test]
fn a_skipped_refresh_only_catches_the_status_up() {
    let r = Requeue::After(Duration::from_secs(60));
    assert_eq!(
        refresh_skipped(r, None),
        Steps {
            steps: vec![],
            end: End::Done {
                requeue: r,
                wrote: false
            }
        }
    );
    let st = EsStatus::default();
    assert_eq!(
        refresh_skipped(r, Some(st.clone())).steps,
        vec![Step::Status(st)]
    );
    let e = es(CreationPolicy::Owner, DeletionPolicy::Retain);
    assert_eq!(owner_label(&e), Some(hash::created_by_label("ns", "es")));
    assert_eq!(
        owner_label(&es(CreationPolicy::Orphan, DeletionPolicy::Retain)),
        None
    );
}
