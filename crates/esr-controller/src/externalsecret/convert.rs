//! Conversions between the esr-api types and the pure core's views.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use esr_api::v1::{
    ExternalSecret, ExternalSecretRewrite, RefreshPolicy as ApiRefresh, SyncWindowKind,
    TemplateMergePolicy,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;

use crate::common::refresh::{RefreshPolicy, SyncWindow, SyncWindows, WindowKind};
use crate::externalsecret::pipeline::Rewrite;
use crate::externalsecret::plan::{
    Condition, EsStatus, EsView, FINALIZER, ManifestView, TemplateView,
};

/// The default `refreshInterval` (CRD default and ESO's fallback).
pub const DEFAULT_REFRESH_INTERVAL: Duration = Duration::from_secs(3600);

/// A k8s `Time` as chrono.
pub fn time_to_chrono(t: &Time) -> Option<DateTime<Utc>> {
    let ts = t.0;
    Utc.timestamp_opt(
        ts.as_second(),
        u32::try_from(ts.subsec_nanosecond()).unwrap_or(0),
    )
    .single()
}

/// chrono as a k8s `Time` (second precision, as the API server stores it).
pub fn chrono_to_time(t: DateTime<Utc>) -> Option<Time> {
    k8s_openapi::jiff::Timestamp::from_second(t.timestamp())
        .ok()
        .map(Time)
}

/// Parses a Go duration; negative or invalid → zero ("do not refresh").
pub fn go_duration(s: &str) -> Duration {
    esr_api::duration::parse(s)
        .ok()
        .and_then(|d| d.to_std())
        .unwrap_or(Duration::ZERO)
}

/// `dataFrom[].rewrite[]`.
pub fn rewrites(r: Option<&Vec<ExternalSecretRewrite>>) -> Vec<Rewrite> {
    let mut out = Vec::new();
    for op in r.into_iter().flatten() {
        if let Some(m) = &op.merge {
            out.push(Rewrite::Merge {
                into: m.into.clone().unwrap_or_default(),
                priority: m.priority.clone().unwrap_or_default(),
                priority_policy: m.priority_policy.unwrap_or_default(),
                conflict_policy: m.conflict_policy.unwrap_or_default(),
                strategy: m.strategy.unwrap_or_default(),
            });
        } else if let Some(re) = &op.regexp {
            out.push(Rewrite::Regexp {
                source: re.source.clone(),
                target: re.target.clone(),
            });
        } else if let Some(t) = &op.transform {
            out.push(Rewrite::Transform {
                template: t.template.clone(),
            });
        }
    }
    out
}

/// The status as the pure core sees it.
pub fn status_view(es: &ExternalSecret, observed_generation: Option<i64>) -> EsStatus {
    let Some(st) = &es.status else {
        return EsStatus {
            observed_generation,
            ..Default::default()
        };
    };
    EsStatus {
        refresh_time: st.refresh_time.as_ref().and_then(time_to_chrono),
        synced_resource_version: st.synced_resource_version.clone().unwrap_or_default(),
        conditions: st
            .conditions
            .iter()
            .flatten()
            .map(|c| Condition {
                type_: serde_json::to_value(c.type_)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
                status: c.status.clone(),
                reason: c.reason.clone().unwrap_or_default(),
                message: c.message.clone().unwrap_or_default(),
                last_transition_time: c.last_transition_time.as_ref().and_then(time_to_chrono),
            })
            .collect(),
        binding_name: st
            .binding
            .as_ref()
            .and_then(|b| b.name.clone())
            .unwrap_or_default(),
        observed_generation,
    }
}

/// The status as JSON for the status subresource (ESO shape plus `observedGeneration`).
pub fn status_json(st: &EsStatus) -> serde_json::Value {
    let conds: Vec<serde_json::Value> = st
        .conditions
        .iter()
        .map(|c| {
            let mut o = serde_json::json!({"type": c.type_, "status": c.status, "reason": c.reason, "message": c.message});
            if let Some(t) = c.last_transition_time.and_then(chrono_to_time) {
                o["lastTransitionTime"] = serde_json::to_value(&t).unwrap_or(serde_json::Value::Null);
            }
            o
        })
        .collect();
    let mut v = serde_json::json!({
        "refreshTime": st.refresh_time.and_then(chrono_to_time).and_then(|t| serde_json::to_value(&t).ok()),
        "conditions": conds,
        "binding": {"name": st.binding_name},
    });
    if !st.synced_resource_version.is_empty() {
        v["syncedResourceVersion"] = serde_json::Value::String(st.synced_resource_version.clone());
    }
    if let Some(g) = st.observed_generation {
        v["observedGeneration"] = serde_json::Value::from(g);
    }
    v
}

/// The ExternalSecret's `status.observedGeneration`, read from a raw object.
pub fn observed_generation_of(raw: &serde_json::Value) -> Option<i64> {
    raw.get("status")
        .and_then(|s| s.get("observedGeneration"))
        .and_then(|g| g.as_i64())
}

/// Builds the [`EsView`] of an ExternalSecret.
pub fn es_view(es: &ExternalSecret, observed_generation: Option<i64>) -> EsView {
    let spec = &es.spec;
    let target = spec.target.clone().unwrap_or_default();
    let name = es.name_any();
    let template = target.template.as_ref().map(|t| {
        let md = t.metadata.clone().unwrap_or_default();
        TemplateView {
            type_: t.type_.clone().unwrap_or_default(),
            engine_version: if t.engine_version.is_some() {
                "v2".to_string()
            } else {
                String::new()
            },
            merge_policy_merge: t.merge_policy == Some(TemplateMergePolicy::Merge),
            has_data_templates: t.data.as_ref().is_some_and(|d| !d.is_empty())
                || t.template_from.as_ref().is_some_and(|d| !d.is_empty()),
            labels: md.labels.unwrap_or_default(),
            annotations: md.annotations.unwrap_or_default(),
            finalizers: md.finalizers.unwrap_or_default(),
        }
    });
    EsView {
        name: name.clone(),
        namespace: es.namespace().unwrap_or_default(),
        uid: es.uid().unwrap_or_default(),
        generation: es.metadata.generation.unwrap_or(0),
        labels: es.labels().clone(),
        annotations: es.annotations().clone(),
        target_name: target
            .name
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or(name),
        creation: target.creation_policy.unwrap_or_default(),
        deletion: target.deletion_policy.unwrap_or_default(),
        immutable: target.immutable.unwrap_or(false),
        manifest: target.manifest.as_ref().map(|m| ManifestView {
            api_version: m.api_version.clone(),
            kind: m.kind.clone(),
        }),
        template,
        refresh_policy: match spec.refresh_policy {
            Some(ApiRefresh::CreatedOnce) => RefreshPolicy::CreatedOnce,
            Some(ApiRefresh::OnChange) => RefreshPolicy::OnChange,
            _ => RefreshPolicy::Periodic,
        },
        refresh_interval: spec
            .refresh_interval
            .as_deref()
            .map(go_duration)
            .unwrap_or(DEFAULT_REFRESH_INTERVAL),
        sync_windows: spec.sync_windows.as_ref().map(|w| SyncWindows {
            kind: match w.kind {
                SyncWindowKind::Allow => WindowKind::Allow,
                SyncWindowKind::Deny => WindowKind::Deny,
            },
            windows: w
                .windows
                .iter()
                .map(|x| SyncWindow::new(&x.schedule, go_duration(&x.duration)))
                .collect(),
        }),
        status: status_view(es, observed_generation),
        deleting: es.metadata.deletion_timestamp.is_some(),
        has_finalizer: es.finalizers().iter().any(|f| f == FINALIZER),
        uses_cluster_store: spec.secret_store_ref.as_ref().and_then(|r| r.kind)
            == Some(esr_api::v1::SecretStoreKind::ClusterSecretStore),
    }
}

/// Labels of a map, for convenience.
pub fn labels_of(m: &Option<BTreeMap<String, String>>) -> BTreeMap<String, String> {
    m.clone().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::externalsecret::plan::{CreationPolicy, DeletionPolicy};

    fn es(yaml: &str) -> ExternalSecret {
        yaml_serde::from_str(yaml).unwrap()
    }

    #[test]
    fn view_applies_eso_defaults() {
        let e = es(r#"
apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {name: db, namespace: app, generation: 3, uid: u1, labels: {a: b}}
spec:
  secretStoreRef: {name: s}
  data: [{secretKey: k, remoteRef: {key: r}}]
"#);
        let v = es_view(&e, None);
        assert_eq!(v.target_name, "db");
        assert_eq!(v.creation, CreationPolicy::Owner);
        assert_eq!(v.deletion, DeletionPolicy::Retain);
        assert_eq!(v.refresh_interval, DEFAULT_REFRESH_INTERVAL);
        assert_eq!(v.refresh_policy, RefreshPolicy::Periodic);
        assert_eq!(v.generation, 3);
        assert_eq!(
            v.resource_version(),
            esr_api::hash::synced_resource_version(3, e.labels(), e.annotations())
        );
        assert_eq!(v.field_manager(), esr_api::hash::field_manager("db"));
        assert!(v.template.is_none());
    }

    #[test]
    fn view_reads_policies_template_and_windows() {
        let e = es(r#"
apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {name: db, namespace: app}
spec:
  refreshInterval: 0s
  refreshPolicy: OnChange
  syncWindows: {kind: deny, windows: [{schedule: "0 9 * * *", duration: 1h}]}
  target:
    name: other
    creationPolicy: Merge
    deletionPolicy: Merge
    immutable: true
    template:
      type: kubernetes.io/tls
      mergePolicy: Merge
      metadata: {labels: {x: y}, finalizers: [f]}
      data: {a: "{{ .b }}"}
  data: []
"#);
        let v = es_view(&e, Some(1));
        assert_eq!(v.target_name, "other");
        assert_eq!(v.creation, CreationPolicy::Merge);
        assert_eq!(v.deletion, DeletionPolicy::Merge);
        assert!(v.immutable);
        assert_eq!(v.refresh_interval, Duration::ZERO);
        assert_eq!(v.refresh_policy, RefreshPolicy::OnChange);
        let w = v.sync_windows.unwrap();
        assert_eq!(w.kind, WindowKind::Deny);
        assert_eq!(w.windows[0].duration, Duration::from_secs(3600));
        let t = v.template.unwrap();
        assert_eq!(t.type_, "kubernetes.io/tls");
        assert!(t.merge_policy_merge && t.has_data_templates);
        assert_eq!(t.labels["x"], "y");
        assert_eq!(t.finalizers, vec!["f".to_string()]);
        assert_eq!(v.status.observed_generation, Some(1));
    }

    #[test]
    fn hashes_agree_with_esr_api() {
        let mut d = BTreeMap::new();
        d.insert("foo".to_string(), b"value1".to_vec());
        assert_eq!(
            crate::externalsecret::hash::data_hash(&d),
            esr_api::hash::data_hash(&d)
        );
        assert_eq!(
            crate::externalsecret::hash::created_by_label("a", "b"),
            esr_api::hash::created_by_label("a", "b")
        );
        let long = "y".repeat(60);
        assert_eq!(
            crate::externalsecret::hash::field_manager(&long),
            esr_api::hash::field_manager(&long)
        );
    }

    #[test]
    fn status_roundtrip_json() {
        let t = Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap();
        let st = EsStatus {
            refresh_time: Some(t),
            synced_resource_version: "1-x".into(),
            conditions: vec![Condition {
                type_: "Ready".into(),
                status: "True".into(),
                reason: "SecretSynced".into(),
                message: "secret synced".into(),
                last_transition_time: Some(t),
            }],
            binding_name: "tgt".into(),
            observed_generation: Some(4),
        };
        let j = status_json(&st);
        assert_eq!(j["refreshTime"], "2026-01-02T03:04:05Z");
        assert_eq!(j["binding"]["name"], "tgt");
        assert_eq!(j["observedGeneration"], 4);
        let es: ExternalSecret = serde_json::from_value(serde_json::json!({
            "apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
            "metadata": {"name": "x", "namespace": "n"}, "spec": {}, "status": j
        }))
        .unwrap();
        assert_eq!(status_view(&es, Some(4)), st);
    }
}
