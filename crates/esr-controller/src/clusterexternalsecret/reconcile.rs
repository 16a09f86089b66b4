//! The ClusterExternalSecret executor: runs the [`Steps`](super::plan::Steps) the plan returns,
//! in order, against the API server, then writes the status [`finish`] maps the results to.
//!
//! Namespaces and ExternalSecrets are read from reflector caches (never re-listed per reconcile);
//! namespace events are mapped to the ClusterExternalSecrets whose selection matches, so a new
//! matching namespace gets its ExternalSecret at once. The controller itself is the shared
//! fan-out runner ([`crate::common::fanout::run`]).

use std::future::Future;
use std::sync::Arc;

use esr_api::v1::{ClusterExternalSecret, ExternalSecret};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Client, Resource, ResourceExt};
use tracing::{debug, info};

use super::plan::{
    ApplyStep, Steps, Write, ces_for_es, ces_for_namespace, finish, namespace_finalizer, ns_view,
    steps,
};
use crate::common::events::kube_error_text;
use crate::common::fanout::{
    self, FanOut, FanOutContext, ParentsOf, Reconciled, delete_child, is_status,
    patch_fanout_status, refresh_action,
};
use crate::common::observe::cache_ready;

pub use crate::common::fanout::Error;

/// The ClusterExternalSecret fan-out kind.
#[derive(Debug, Default)]
pub struct Ces;

/// Reconciler state.
pub type CesContext = FanOutContext<Ces>;

impl FanOut for Ces {
    type Parent = ClusterExternalSecret;
    type Child = ExternalSecret;
    const PARENTS_FOR_NAMESPACE: ParentsOf<ClusterExternalSecret, Namespace> = ces_for_namespace;
    const PARENTS_FOR_CHILD: ParentsOf<ClusterExternalSecret, ExternalSecret> = ces_for_es;

    fn reconcile(
        parent: &ClusterExternalSecret,
        ctx: &CesContext,
    ) -> impl Future<Output = Result<Reconciled, Error>> + Send {
        execute(parent, ctx)
    }
}

/// Sets a namespace's finalizers (`add` added, `remove` removed); a namespace gone is no error.
async fn patch_ns_finalizers(
    api: &Api<Namespace>,
    ns: &Namespace,
    add: Option<&str>,
    remove: Option<&str>,
) -> Result<(), kube::Error> {
    let mut f: Vec<String> = ns
        .finalizers()
        .iter()
        .filter(|f| Some(f.as_str()) != remove)
        .cloned()
        .collect();
    if let Some(a) = add
        && !f.iter().any(|x| x == a)
    {
        f.push(a.to_string());
    }
    let patch = serde_json::json!({"metadata": {"finalizers": f, "resourceVersion": ns.resource_version()}});
    match api
        .patch(
            &ns.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if is_status(&e, 404) => Ok(()),
        Err(e) => Err(e),
    }
}

async fn set_finalizers(
    client: &Client,
    ces: &ClusterExternalSecret,
    finalizers: Vec<String>,
) -> Result<(), kube::Error> {
    let patch = serde_json::json!({"metadata": {"finalizers": finalizers, "resourceVersion": ces.resource_version()}});
    Api::<ClusterExternalSecret>::all(client.clone())
        .patch(
            &ces.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .map(|_| ())
}

/// Namespace finalizer changes on the cached namespaces named.
async fn namespace_finalizers(
    ctx: &CesContext,
    names: &[String],
    add: Option<&str>,
    remove: Option<&str>,
) -> Result<(), kube::Error> {
    let api: Api<Namespace> = Api::all(ctx.client.clone());
    for name in names {
        if let Some(ns) = ctx.namespaces.get(&ObjectRef::new(name)) {
            patch_ns_finalizers(&api, &ns, add, remove).await?;
        }
    }
    Ok(())
}

async fn apply(ctx: &CesContext, fin: &str, step: &ApplyStep) -> Result<(), kube::Error> {
    let ns = &step.namespace;
    if step.add_finalizer {
        namespace_finalizers(ctx, std::slice::from_ref(ns), Some(fin), None).await?;
    }
    let api: Api<ExternalSecret> = Api::namespaced(ctx.client.clone(), ns);
    let pp = PostParams::default();
    match &step.write {
        Write::Create(es) => api.create(&pp, es).await.map(|_| ()),
        Write::Replace(es) => api.replace(&es.name_any(), &pp, es).await.map(|_| ()),
        Write::Keep => Ok(()),
    }
}

/// Runs the planned steps of one ClusterExternalSecret.
pub async fn execute(ces: &ClusterExternalSecret, ctx: &CesContext) -> Result<Reconciled, Error> {
    let name = ces.name_any();
    let uid = ces.uid().unwrap_or_default();
    let _ = cache_ready(&ctx.namespaces).await;
    let _ = cache_ready(&ctx.children).await;
    let fin = namespace_finalizer(&name);
    let generation = ces.meta().generation.unwrap_or_default();
    let views: Vec<_> = ctx
        .namespaces
        .state()
        .iter()
        .map(|n| ns_view(n, &name))
        .collect();
    let checked = ctx.applied.checked(&uid, generation);
    match steps(ces, &views, &ctx.children.state(), checked) {
        Steps::Done => Ok(Reconciled {
            action: Action::await_change(),
            ready: None,
        }),
        Steps::Cleanup {
            namespaces,
            delete,
            finalizers,
        } => {
            namespace_finalizers(ctx, &namespaces, None, Some(&fin)).await?;
            for (ns, es) in &delete {
                delete_child::<ExternalSecret>(&ctx.client, ns, es).await?;
            }
            set_finalizers(&ctx.client, ces, finalizers).await?;
            info!(ces = %name, "cleaned up ClusterExternalSecret");
            Ok(Reconciled {
                action: Action::await_change(),
                ready: None,
            })
        }
        Steps::Sync {
            add_own_finalizer,
            remove_finalizer,
            delete,
            apply: steps,
            mut failed,
        } => {
            if let Some(f) = add_own_finalizer {
                set_finalizers(&ctx.client, ces, f).await?;
            }
            namespace_finalizers(ctx, &remove_finalizer, None, Some(&fin)).await?;
            for (ns, es) in &delete {
                delete_child::<ExternalSecret>(&ctx.client, ns, es).await?;
                debug!(ces = %name, namespace = %ns, es = %es, "deleted ExternalSecret");
            }
            let mut provisioned = Vec::new();
            for step in &steps {
                match apply(ctx, &fin, step).await {
                    Ok(()) => provisioned.push(step.namespace.clone()),
                    Err(e) => failed.push((step.namespace.clone(), kube_error_text(&e))),
                }
            }
            let end = finish(ces, provisioned, failed);
            if end.all_applied {
                ctx.applied.record(&uid, generation);
            }
            if let Some(st) = &end.status {
                patch_fanout_status(
                    &Api::<ClusterExternalSecret>::all(ctx.client.clone()),
                    &name,
                    st,
                )
                .await?;
            }
            if end.retry {
                return Err(Error::Namespaces);
            }
            Ok(Reconciled {
                action: refresh_action(end.requeue),
                ready: Some(end.ready),
            })
        }
    }
}

/// The ClusterExternalSecret reconciler (the shared fan-out reconcile of [`Ces`]).
pub async fn reconcile(
    ces: Arc<ClusterExternalSecret>,
    ctx: Arc<CesContext>,
) -> Result<Action, Error> {
    fanout::reconcile(ces, ctx).await
}
