//! The ClusterPushSecret executor: runs the [`Steps`](super::plan::Steps) the plan returns, in
//! order, against the API server, then writes the status the plan maps the results to
//! ([`finish`], or [`stop_delete_old`] / [`stop_select`] when the reconcile stops early). The
//! controller itself is the shared fan-out runner ([`crate::common::fanout::run`]).

use std::future::Future;
use std::sync::Arc;

use esr_api::consts::{EVENT_SOURCE_CLUSTER_PUSHSECRET, REASON_PUSHSECRET_ERRORED};
use esr_api::v1alpha1::{ClusterPushSecret, ClusterPushSecretStatus, PushSecret};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::PostParams;
use kube::runtime::controller::Action;
use kube::{Api, Client, Resource, ResourceExt};
use tracing::debug;

use super::plan::{
    ApplyError, ApplyStep, DeleteError, Steps, Stopped, Write, cps_for_namespace, cps_for_ps,
    finish, ns_view, steps, stop_delete_old, stop_select, write_existing,
};
use crate::common::events::{EventSink, EventType, Reporter};
use crate::common::fanout::{
    self, FanOut, FanOutContext, ParentsOf, Reconciled, delete_child, is_status,
    patch_fanout_status, refresh_action,
};
use crate::common::observe::cache_ready;

pub use crate::common::fanout::Error;

/// The ClusterPushSecret fan-out kind: publishes its Warning events through `events`.
pub struct Cps {
    events: EventSink,
}

impl Cps {
    /// Events recorded as the ClusterPushSecret controller; `instance` names this replica.
    pub fn new(client: Client, instance: Option<String>) -> Self {
        Cps {
            events: EventSink::new(
                client,
                Reporter {
                    controller: EVENT_SOURCE_CLUSTER_PUSHSECRET.to_string(),
                    instance,
                },
            ),
        }
    }
}

/// Reconciler state.
pub type CpsContext = FanOutContext<Cps>;

impl FanOut for Cps {
    type Parent = ClusterPushSecret;
    type Child = PushSecret;
    const PARENTS_FOR_NAMESPACE: ParentsOf<ClusterPushSecret, Namespace> = cps_for_namespace;
    const PARENTS_FOR_CHILD: ParentsOf<ClusterPushSecret, PushSecret> = cps_for_ps;

    fn reconcile(
        parent: &ClusterPushSecret,
        ctx: &CpsContext,
    ) -> impl Future<Output = Result<Reconciled, Error>> + Send {
        execute(parent, ctx)
    }
}

fn warn_event(ctx: &CpsContext, cps: &ClusterPushSecret, note: &str) {
    ctx.kind.events.publish(
        cps.object_ref(&()),
        EventType::Warning,
        REASON_PUSHSECRET_ERRORED,
        note,
    );
}

async fn write_status(
    ctx: &CpsContext,
    cps: &ClusterPushSecret,
    st: Option<&ClusterPushSecretStatus>,
) -> Result<(), kube::Error> {
    match st {
        Some(st) => {
            let api = Api::<ClusterPushSecret>::all(ctx.client.clone());
            patch_fanout_status(&api, &cps.name_any(), st).await
        }
        None => Ok(()),
    }
}

/// Creates or replaces a namespace's PushSecret; a create that conflicts (the cache lags) reads
/// the live one back and lets the plan decide again.
async fn apply(
    ctx: &CpsContext,
    cps: &ClusterPushSecret,
    step: &ApplyStep,
    spec_checked: bool,
) -> Result<(), ApplyError> {
    let api: Api<PushSecret> = Api::namespaced(ctx.client.clone(), &step.namespace);
    let pp = PostParams::default();
    let write = match &step.write {
        Write::Create(ps) => match api.create(&pp, ps).await {
            Ok(_) => return Ok(()),
            Err(e) if is_status(&e, 409) => {
                let name = ps.name_any();
                match api
                    .get_opt(&name)
                    .await
                    .map_err(ApplyError::CreateOrUpdate)?
                {
                    Some(cur) => write_existing(cps, &cur, spec_checked)?,
                    None => {
                        return Err(ApplyError::Vanished {
                            namespace: step.namespace.clone(),
                            name,
                        });
                    }
                }
            }
            Err(e) => return Err(ApplyError::CreateOrUpdate(e)),
        },
        other => other.clone(),
    };
    match write {
        Write::Replace(ps) => api
            .replace(&ps.name_any(), &pp, &ps)
            .await
            .map(|_| ())
            .map_err(ApplyError::CreateOrUpdate),
        Write::Keep | Write::Create(_) => Ok(()),
    }
}

/// ESO's `markAsFailed`: a Warning event, Ready=False Errored, and an error so the reconcile is
/// retried with backoff.
async fn stop(ctx: &CpsContext, cps: &ClusterPushSecret, s: Stopped) -> Result<Reconciled, Error> {
    warn_event(ctx, cps, s.message);
    write_status(ctx, cps, s.status.as_ref()).await?;
    Err(Error::Errored {
        message: s.message,
        cause: s.cause,
    })
}

/// Runs the planned steps of one ClusterPushSecret.
pub async fn execute(cps: &ClusterPushSecret, ctx: &CpsContext) -> Result<Reconciled, Error> {
    let name = cps.name_any();
    let uid = cps.uid().unwrap_or_default();
    let generation = cps.meta().generation.unwrap_or_default();
    if cps.meta().deletion_timestamp.is_none() {
        let _ = cache_ready(&ctx.namespaces).await;
        let _ = cache_ready(&ctx.children).await;
    }
    let views: Vec<_> = ctx.namespaces.state().iter().map(|n| ns_view(n)).collect();
    let checked = ctx.applied.checked(&uid, generation);
    let Steps::Sync {
        delete_old,
        select_error,
        delete_outdated,
        apply: steps,
        mut failed,
    } = steps(cps, &views, &ctx.children.state(), checked)
    else {
        // ESO skips a ClusterPushSecret being deleted; the garbage collector removes its
        // PushSecrets through their owner references.
        debug!(cps = %name, "skipping ClusterPushSecret in deletion");
        return Ok(Reconciled {
            action: Action::await_change(),
            ready: None,
        });
    };
    let mut old_failed = Vec::new();
    for (ns, ps) in &delete_old {
        match delete_child::<PushSecret>(&ctx.client, ns, ps).await {
            Ok(()) => {
                debug!(cps = %name, namespace = %ns, ps = %ps, "deleted PushSecret under the old name")
            }
            Err(e) => old_failed.push((ns.clone(), DeleteError(e).to_string())),
        }
    }
    if !old_failed.is_empty() {
        return stop(ctx, cps, stop_delete_old(cps, old_failed, now_seconds())).await;
    }
    if let Some(e) = &select_error {
        return stop(ctx, cps, stop_select(cps, e, now_seconds())).await;
    }
    for (ns, ps) in &delete_outdated {
        match delete_child::<PushSecret>(&ctx.client, ns, ps).await {
            Ok(()) => {
                debug!(cps = %name, namespace = %ns, ps = %ps, "deleted PushSecret from a namespace that stopped matching")
            }
            Err(e) => failed.push((ns.clone(), DeleteError(e).to_string())),
        }
    }
    let mut provisioned = Vec::new();
    for step in &steps {
        match apply(ctx, cps, step, checked).await {
            Ok(()) => provisioned.push(step.namespace.clone()),
            Err(e) => failed.push((step.namespace.clone(), e.to_string())),
        }
    }
    let end = finish(cps, provisioned, failed);
    if end.all_applied {
        ctx.applied.record(&uid, generation);
    }
    write_status(ctx, cps, end.status.as_ref()).await?;
    if end.retry {
        return Err(Error::Namespaces);
    }
    Ok(Reconciled {
        action: refresh_action(end.requeue),
        ready: Some(end.ready),
    })
}

/// Now, truncated to seconds (metav1.Time precision).
fn now_seconds() -> Time {
    let now = k8s_openapi::jiff::Timestamp::now();
    Time(k8s_openapi::jiff::Timestamp::from_second(now.as_second()).unwrap_or(now))
}

/// The ClusterPushSecret reconciler (the shared fan-out reconcile of [`Cps`]).
pub async fn reconcile(cps: Arc<ClusterPushSecret>, ctx: Arc<CpsContext>) -> Result<Action, Error> {
    fanout::reconcile(cps, ctx).await
}
