//! The SecretStore / ClusterSecretStore reconciler (eso-inventory §2): build a client, validate,
//! set Ready and `capabilities`.
//!
//! Store finalizer (ESO's store controller): while a PushSecret with `deletionPolicy: Delete`
//! has pushed to a store or references it (by name or label selector), the store carries
//! `secretstore.externalsecrets.io/finalizer`, so deleting the store waits until those
//! PushSecrets are gone or changed (and have cleaned up their remote secrets); the finalizer is
//! removed when none is left. PushSecrets are watched (a reflector cache, no per-reconcile
//! lists) and a change re-reconciles the stores it concerns.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use esr_api::consts as c;
use esr_api::v1::{ClusterSecretStore, SecretStore};
use esr_api::v1alpha1::PushSecret;
use esr_provider::{
    ClientContext, Maintenance, StoreInfo, StoreKind, ValidationResult, store::store_is_managed,
};
use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event as KubeEvent, EventType as KubeEventType, Recorder, Reporter};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{Controller, WatchStreamExt, reflector, watcher};
use kube::{Api, Resource, ResourceExt};
use tracing::{debug, warn};

use crate::common::refresh;
use crate::externalsecret::convert::{chrono_to_time, time_to_chrono};
use crate::externalsecret::plan::{Condition, EsStatus, EventRec, EventType, set_condition};
use crate::externalsecret::reconcile::{Context, Error};
use crate::metrics::{Metrics, ResourceLabels};

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

/// Checks a store: registry, static validation, client, `Validate()`. Returns the check and the
/// capabilities string.
pub async fn check_store(
    ctx: &Context,
    info: &StoreInfo,
) -> (StoreCheck, Option<String>, Maintenance) {
    let provider = match ctx.registry.for_store(info) {
        Ok(p) => p.clone(),
        Err(e) => {
            return (
                StoreCheck::InvalidProvider(e.to_string()),
                None,
                Maintenance::Maintained,
            );
        }
    };
    let caps = Some(provider.capabilities(info).as_str().to_string());
    let maintenance = provider.maintenance();
    if let Err(e) = provider.validate_store(info) {
        return (StoreCheck::ClientError(e.to_string()), caps, maintenance);
    }
    let ns = info.namespace.clone();
    let cctx = ClientContext::new(info, ns.as_deref(), ctx.kube.clone())
        .with_recorder(Arc::new(ctx.metrics.clone()));
    let client = match provider.new_client(&cctx).await {
        Ok(c) => c,
        Err(e) => return (StoreCheck::ClientError(e.to_string()), caps, maintenance),
    };
    (
        StoreCheck::Validated(client.validate().await),
        caps,
        maintenance,
    )
}

fn status_of(v: &serde_json::Value) -> (EsStatus, Option<String>) {
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

/// Runs the two store controllers.
pub struct StoreControllers {
    ctx: Arc<Context>,
    push_secrets: bool,
}

fn store_kind(cluster: bool) -> StoreKind {
    if cluster {
        StoreKind::ClusterSecretStore
    } else {
        StoreKind::SecretStore
    }
}

/// A PushSecret reflector: the cache the finalizer decision reads and the trigger stream.
fn push_secret_cache(
    client: kube::Client,
    namespace: Option<&str>,
) -> (
    Store<PushSecret>,
    impl futures::Stream<Item = Result<PushSecret, watcher::Error>> + Send + 'static,
) {
    let api: Api<PushSecret> = match namespace {
        Some(n) => Api::namespaced(client, n),
        None => Api::all(client),
    };
    let (reader, writer) = reflector::store();
    let stream = reflector(
        writer,
        watcher(api, watcher::Config::default()).default_backoff(),
    )
    .touched_objects();
    (reader, stream)
}

/// The stores (from the store controller's cache) a PushSecret concerns.
fn stores_for_ps<K: StoreObject>(
    stores: &Store<K>,
    ps: &PushSecret,
    cluster: bool,
) -> Vec<ObjectRef<K>> {
    stores
        .state()
        .iter()
        .filter(|s| {
            crate::pushsecret::source::ps_concerns_store(
                ps,
                store_kind(cluster),
                &s.name_any(),
                s.namespace().as_deref(),
                s.labels(),
            )
        })
        .map(|s| ObjectRef::from_obj(&**s))
        .collect()
}

impl StoreControllers {
    /// New (the store finalizer for PushSecrets is managed; see
    /// [`StoreControllers::with_push_secret_finalizer`]).
    pub fn new(ctx: Arc<Context>) -> Self {
        StoreControllers {
            ctx,
            push_secrets: true,
        }
    }

    /// Whether the store finalizer for PushSecrets with `deletionPolicy: Delete` is managed (ESO
    /// does it only when the PushSecret reconciler is enabled). Default true.
    #[must_use]
    pub fn with_push_secret_finalizer(mut self, enabled: bool) -> Self {
        self.push_secrets = enabled;
        self
    }

    /// The SecretStore controller.
    pub async fn run_secret_stores(
        &self,
        namespace: Option<String>,
        shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
    ) {
        let ctx = self.ctx.clone();
        let api: Api<SecretStore> = match &namespace {
            Some(n) => Api::namespaced(ctx.client.clone(), n),
            None => Api::all(ctx.client.clone()),
        };
        let recorder = Arc::new(Recorder::new(
            ctx.client.clone(),
            Reporter {
                controller: c::EVENT_SOURCE_SECRET_STORE.to_string(),
                instance: ctx.config.instance.clone(),
            },
        ));
        let mut controller = Controller::new(api, watcher::Config::default());
        let mut ps_cache = None;
        if self.push_secrets {
            let (reader, stream) = push_secret_cache(ctx.client.clone(), namespace.as_deref());
            let stores = controller.store();
            controller =
                controller.watches_stream(stream, move |ps| stores_for_ps(&stores, &ps, false));
            ps_cache = Some(reader);
        }
        controller
            .with_config(
                kube::runtime::controller::Config::default().concurrency(ctx.config.concurrency),
            )
            .graceful_shutdown_on(shutdown)
            .run(
                move |s: Arc<SecretStore>, ctx: Arc<Context>| {
                    let recorder = recorder.clone();
                    let ps_cache = ps_cache.clone();
                    async move { reconcile_store(s, ctx, recorder, false, ps_cache).await }
                },
                |_s, e, _ctx| {
                    warn!(error = %e, "store reconcile failed");
                    Action::requeue(Duration::from_secs(5))
                },
                ctx.clone(),
            )
            .for_each(|_| async {})
            .await;
    }

    /// The ClusterSecretStore controller.
    pub async fn run_cluster_secret_stores(
        &self,
        shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
    ) {
        let ctx = self.ctx.clone();
        let api: Api<ClusterSecretStore> = Api::all(ctx.client.clone());
        let recorder = Arc::new(Recorder::new(
            ctx.client.clone(),
            Reporter {
                controller: c::EVENT_SOURCE_CLUSTER_SECRET_STORE.to_string(),
                instance: ctx.config.instance.clone(),
            },
        ));
        let mut controller = Controller::new(api, watcher::Config::default());
        let mut ps_cache = None;
        if self.push_secrets {
            let (reader, stream) =
                push_secret_cache(ctx.client.clone(), ctx.config.namespace.as_deref());
            let stores = controller.store();
            controller =
                controller.watches_stream(stream, move |ps| stores_for_ps(&stores, &ps, true));
            ps_cache = Some(reader);
        }
        controller
            .with_config(
                kube::runtime::controller::Config::default().concurrency(ctx.config.concurrency),
            )
            .graceful_shutdown_on(shutdown)
            .run(
                move |s: Arc<ClusterSecretStore>, ctx: Arc<Context>| {
                    let recorder = recorder.clone();
                    let ps_cache = ps_cache.clone();
                    async move { reconcile_store(s, ctx, recorder, true, ps_cache).await }
                },
                |_s, e, _ctx| {
                    warn!(error = %e, "cluster store reconcile failed");
                    Action::requeue(Duration::from_secs(5))
                },
                ctx.clone(),
            )
            .for_each(|_| async {})
            .await;
    }
}

trait StoreObject:
    Resource<DynamicType = ()>
    + serde::Serialize
    + Clone
    + std::fmt::Debug
    + serde::de::DeserializeOwned
{
    fn refresh_interval(&self) -> Option<&IntOrString>;
}

impl StoreObject for SecretStore {
    fn refresh_interval(&self) -> Option<&IntOrString> {
        self.spec.refresh_interval.as_ref()
    }
}

impl StoreObject for ClusterSecretStore {
    fn refresh_interval(&self) -> Option<&IntOrString> {
        self.spec.refresh_interval.as_ref()
    }
}

/// How long a store reconcile waits for the PushSecret cache before leaving the finalizer alone.
const PS_CACHE_WAIT: Duration = Duration::from_secs(10);

/// Adds or removes the store finalizer as [`store_finalizer_action`] decides (merge patch with
/// the resourceVersion, so a concurrent change makes it retry).
async fn manage_store_finalizer<K: StoreObject>(
    store: &K,
    ctx: &Context,
    cluster: bool,
    push_secrets: &Store<PushSecret>,
) -> Result<(), Error> {
    // Never decide on an incomplete cache (that could drop a needed finalizer); if PushSecrets
    // cannot be listed (e.g. the CRD is not installed) the store is still validated.
    match tokio::time::timeout(PS_CACHE_WAIT, push_secrets.wait_until_ready()).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(Error::Store(format!("PushSecret cache: {e}"))),
        Err(_) => {
            warn!(store = %store.name_any(), "PushSecret cache not ready; store finalizer left unchanged");
            return Ok(());
        }
    }
    let name = store.name_any();
    let ns = store.namespace();
    let all = push_secrets.state();
    let referenced = crate::pushsecret::source::store_has_delete_refs(
        store_kind(cluster),
        &name,
        ns.as_deref(),
        store.labels(),
        all.iter().map(|p| &**p),
    );
    let has = store.finalizers().iter().any(|f| f == c::FINALIZER_STORE);
    let deleting = store.meta().deletion_timestamp.is_some();
    let Some(add) = store_finalizer_action(referenced, deleting, has) else {
        if deleting && referenced {
            debug!(store = %name, "store is being deleted; PushSecrets with deletionPolicy=Delete still reference it");
        }
        return Ok(());
    };
    let mut f: Vec<String> = store
        .finalizers()
        .iter()
        .filter(|f| *f != c::FINALIZER_STORE)
        .cloned()
        .collect();
    if add {
        f.push(c::FINALIZER_STORE.to_string());
    }
    let patch = serde_json::json!({"metadata": {"finalizers": f, "resourceVersion": store.resource_version()}});
    let pp = PatchParams::default();
    if cluster {
        Api::<ClusterSecretStore>::all(ctx.client.clone())
            .patch(&name, &pp, &Patch::Merge(&patch))
            .await?;
    } else {
        Api::<SecretStore>::namespaced(ctx.client.clone(), ns.as_deref().unwrap_or_default())
            .patch(&name, &pp, &Patch::Merge(&patch))
            .await?;
    }
    debug!(store = %name, add, "store finalizer updated for PushSecrets with deletionPolicy=Delete");
    Ok(())
}

async fn reconcile_store<K: StoreObject>(
    store: Arc<K>,
    ctx: Arc<Context>,
    recorder: Arc<Recorder>,
    cluster: bool,
    push_secrets: Option<Store<PushSecret>>,
) -> Result<Action, Error> {
    let started = Instant::now();
    let name = store.name_any();
    let ns = store.namespace().unwrap_or_default();
    let raw = serde_json::to_value(&*store).map_err(|e| Error::Store(e.to_string()))?;
    let info = StoreInfo::from_object(&raw).map_err(|e| Error::Store(e.to_string()))?;
    if !store_is_managed(&info, &ctx.config.controller_class) {
        return Ok(Action::await_change());
    }
    if let Some(ps) = &push_secrets {
        manage_store_finalizer(&*store, &ctx, cluster, ps).await?;
    }
    if store.meta().deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let (check, caps, maintenance) = check_store(&ctx, &info).await;
    let outcome = store_outcome(&check);
    let reference = store.object_ref(&());
    let publish = |ev: EventRec| {
        let recorder = recorder.clone();
        let reference = reference.clone();
        async move {
            let e = KubeEvent {
                type_: if ev.type_ == EventType::Normal {
                    KubeEventType::Normal
                } else {
                    KubeEventType::Warning
                },
                reason: ev.reason.clone(),
                note: Some(crate::common::events::capped_note(&ev.message)),
                action: crate::externalsecret::reconcile::event_action(&ev),
                secondary: None,
            };
            if let Err(err) = recorder.publish(&e, &reference).await {
                debug!(error = %err, "failed to publish store event");
            }
        }
    };
    if matches!(
        maintenance,
        Maintenance::NotMaintained | Maintenance::Deprecated
    ) && !info
        .annotations
        .contains_key(c::ANNOTATION_IGNORE_MAINTENANCE_CHECKS)
    {
        let (reason, msg) = if maintenance == Maintenance::Deprecated {
            (
                c::REASON_STORE_DEPRECATED,
                "store is deprecated and will be removed on the next minor release",
            )
        } else {
            (
                c::REASON_STORE_UNMAINTAINED,
                "store isn't currently maintained. Please plan and prepare accordingly.",
            )
        };
        publish(EventRec {
            type_: EventType::Warning,
            reason: reason.to_string(),
            message: msg.to_string(),
        })
        .await;
    }
    let (before, caps_before) = status_of(&raw);
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
        Utc::now(),
    );
    let caps_after = caps.or(caps_before.clone());
    let transitioned = before.ready().map(|c| (&c.status, &c.reason))
        != after.ready().map(|c| (&c.status, &c.reason));
    if transitioned || outcome.event.type_ == EventType::Warning {
        publish(outcome.event.clone()).await;
    }
    if after != before || caps_after != caps_before {
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
        let patch = serde_json::json!({ "status": st });
        let pp = PatchParams::default();
        let res = if cluster {
            Api::<ClusterSecretStore>::all(ctx.client.clone())
                .patch_status(&name, &pp, &Patch::Merge(&patch))
                .await
                .map(|_| ())
        } else {
            Api::<SecretStore>::namespaced(ctx.client.clone(), &ns)
                .patch_status(&name, &pp, &Patch::Merge(&patch))
                .await
                .map(|_| ())
        };
        res?;
    }
    let labels = ResourceLabels {
        name: name.clone(),
        namespace: ns.clone(),
    };
    let (cond_family, dur_family) = if cluster {
        (&ctx.metrics.css_condition, &ctx.metrics.css_duration)
    } else {
        (&ctx.metrics.ss_condition, &ctx.metrics.ss_duration)
    };
    Metrics::set_condition(cond_family, &name, &ns, "Ready", outcome.status);
    dur_family
        .get_or_create(&labels)
        .set(started.elapsed().as_nanos() as f64);
    let interval = store_interval(store.refresh_interval(), ctx.config.store_requeue_interval);
    if outcome.retry {
        let _ = refresh::backoff(0);
        return Err(Error::Store(outcome.event.message));
    }
    Ok(Action::requeue(interval))
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
