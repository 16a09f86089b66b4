//! The generator kinds compiled into esr beyond the built-in Password, Fake and ClusterGenerator.
//! Adding a generator kind is one line in [`registry`].
//!
//! `VaultDynamicSecret` ([`VaultDynamicSecretGenerator`]) runs on the process-wide
//! [`VaultProvider`](esr_provider_vault::VaultProvider) from [`crate::providers::vault`], so it
//! shares the provider's login sessions and keeps one renewable lease per consumer
//! (`ExternalSecret/<ns>/<name>/dataFrom/<i>`) in memory.
//!
//! `ECRAuthorizationToken` and `STSSessionToken` ([`AwsGenerator`]) run in the AWS provider crate
//! ([`esr_provider_aws::generate`]); they keep no state between runs.
//!
//! `Webhook` ([`WebhookGenerator`]) runs in the webhook provider crate
//! ([`esr_provider_webhook::generate`]); it keeps no state between runs either.

use std::sync::Arc;

use async_trait::async_trait;
use esr_api::generators::VaultDynamicSecretSpec;
use esr_controller::common::generators::{
    GenerateRequest, Generated, Generator, GeneratorError, Generators,
};
use esr_provider::metrics::{CallRecorder, noop_recorder};
use esr_provider::{KubeAccess, KubeClientAccess, ProviderError};
use esr_provider_vault::{GeneratorRequest, VaultProvider};
use kube::Client;

/// The `kind` of the Vault dynamic-secret generator.
pub const VAULT_DYNAMIC_SECRET: &str = "VaultDynamicSecret";

/// The generator registry every subcommand installs (generator API calls are not recorded in
/// metrics; see [`registry_with_recorder`]).
pub fn registry(client: Client) -> Generators {
    registry_with_recorder(client, noop_recorder())
}

/// [`registry`] with the generators' Vault API calls recorded in `recorder` (the controller's
/// `Metrics` implements [`CallRecorder`]).
pub fn registry_with_recorder(client: Client, recorder: Arc<dyn CallRecorder>) -> Generators {
    Generators::new(client)
        .with(
            VAULT_DYNAMIC_SECRET,
            Arc::new(
                VaultDynamicSecretGenerator::new(crate::providers::vault())
                    .with_recorder(recorder.clone()),
            ),
        )
        .with(
            esr_provider_aws::ECR_AUTHORIZATION_TOKEN,
            Arc::new(AwsGenerator(recorder.clone())),
        )
        .with(
            esr_provider_aws::STS_SESSION_TOKEN,
            Arc::new(AwsGenerator(recorder.clone())),
        )
        .with(
            esr_provider_webhook::WEBHOOK_GENERATOR,
            Arc::new(WebhookGenerator(recorder)),
        )
}

/// The `Webhook` generator (namespaced or in a `ClusterGenerator`); its requests go to the
/// recorder.
pub struct WebhookGenerator(Arc<dyn CallRecorder>);

#[async_trait]
impl Generator for WebhookGenerator {
    async fn generate(&self, req: &GenerateRequest<'_>) -> Result<Generated, GeneratorError> {
        let kube: Arc<dyn KubeAccess> = Arc::new(KubeClientAccess::new(req.client.clone()));
        Ok(
            esr_provider_webhook::generate(req.name, req.namespace, req.spec, kube, self.0.clone())
                .await?,
        )
    }
}

/// The AWS generators (`ECRAuthorizationToken`, `STSSessionToken`, namespaced or in a
/// `ClusterGenerator`); their AWS calls go to the recorder.
pub struct AwsGenerator(Arc<dyn CallRecorder>);

#[async_trait]
impl Generator for AwsGenerator {
    async fn generate(&self, req: &GenerateRequest<'_>) -> Result<Generated, GeneratorError> {
        let kube: Arc<dyn KubeAccess> = Arc::new(KubeClientAccess::new(req.client.clone()));
        Ok(esr_provider_aws::generate(
            req.kind,
            req.name,
            req.namespace,
            req.spec,
            kube,
            self.0.clone(),
        )
        .await?)
    }
}

/// `VaultDynamicSecret` (namespaced, or a `ClusterGenerator` with `spec.kind: VaultDynamicSecret`)
/// on a shared [`VaultProvider`]: the lease is renewed on each refresh while Vault allows it;
/// new credentials are issued when the spec changed, the lease is not renewable, or the renewal
/// fails or reaches the max TTL.
///
/// Provider API calls go to the recorder given with [`VaultDynamicSecretGenerator::with_recorder`]
/// (a no-op one by default).
pub struct VaultDynamicSecretGenerator {
    provider: Arc<VaultProvider>,
    recorder: Arc<dyn CallRecorder>,
}

impl std::fmt::Debug for VaultDynamicSecretGenerator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VaultDynamicSecretGenerator")
            .field("provider", &self.provider)
            .finish_non_exhaustive()
    }
}

impl VaultDynamicSecretGenerator {
    /// A generator on `provider`, recording no API-call metrics.
    pub fn new(provider: Arc<VaultProvider>) -> Self {
        VaultDynamicSecretGenerator {
            provider,
            recorder: noop_recorder(),
        }
    }

    /// Records the Vault API calls (`GeneratorRequest`, `RenewLease`, `Login`, ...) in `recorder`.
    #[must_use]
    pub fn with_recorder(mut self, recorder: Arc<dyn CallRecorder>) -> Self {
        self.recorder = recorder;
        self
    }
}

/// Parses a `VaultDynamicSecret` spec. serde's messages name the field and the expected type.
pub fn parse_spec(spec: &serde_json::Value) -> Result<VaultDynamicSecretSpec, ProviderError> {
    serde_json::from_value(spec.clone())
        .map_err(|e| ProviderError::invalid(format!("invalid VaultDynamicSecret spec: {e}")))
}

#[async_trait]
impl Generator for VaultDynamicSecretGenerator {
    async fn generate(&self, req: &GenerateRequest<'_>) -> Result<Generated, GeneratorError> {
        let spec = parse_spec(req.spec)?;
        let kube: Arc<dyn KubeAccess> = Arc::new(KubeClientAccess::new(req.client.clone()));
        let r = GeneratorRequest {
            name: req.name,
            namespace: req.namespace,
            spec: &spec,
            kube,
            recorder: self.recorder.clone(),
        };
        Ok(self.provider.generate_for(&r, req.consumer).await?)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use esr_provider::MemoryRecorder;
    use serde_json::json;

    /// A client whose every request fails: the tests below must not reach the API.
    fn offline_client() -> Client {
        let svc = tower::service_fn(|_req: http::Request<kube::client::Body>| async {
            Err::<http::Response<kube::client::Body>, _>(std::io::Error::other("offline"))
        });
        Client::new(svc, "default")
    }

    #[tokio::test]
    async fn the_generator_shares_the_provider_registry_instance() {
        assert!(Arc::ptr_eq(
            &crate::providers::vault(),
            &crate::providers::vault()
        ));
        let g = VaultDynamicSecretGenerator::new(crate::providers::vault());
        assert!(Arc::ptr_eq(&g.provider, &crate::providers::vault()));
    }

    #[tokio::test]
    async fn bad_specs_fail_before_any_call() {
        let client = offline_client();
        let rec = Arc::new(MemoryRecorder::default());
        let g = VaultDynamicSecretGenerator::new(Arc::new(VaultProvider::new()))
            .with_recorder(rec.clone());
        let run = |spec: serde_json::Value| {
            let g = &g;
            let client = &client;
            async move {
                g.generate(&GenerateRequest {
                    kind: VAULT_DYNAMIC_SECRET,
                    name: "db",
                    namespace: "team",
                    spec: &spec,
                    consumer: "ExternalSecret/team/app/dataFrom/0",
                    client,
                })
                .await
            }
        };
        let e = run(json!({"path": "database/creds/r"}))
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("invalid VaultDynamicSecret spec"), "{e}");
        assert!(e.contains("provider"), "{e}");
        let e = run(json!({"path": "database/creds/r", "provider": {"server": ""}}))
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("server"), "{e}");
        assert_eq!(rec.total(), 0);
    }

    #[tokio::test]
    async fn an_unreachable_server_is_an_error_with_the_address() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let client = offline_client();
        let rec = Arc::new(MemoryRecorder::default());
        let g = VaultDynamicSecretGenerator::new(Arc::new(VaultProvider::new()))
            .with_recorder(rec.clone());
        let spec = json!({
            "path": "database/creds/r",
            "retrySettings": {"maxRetries": 0},
            "provider": {"server": format!("http://{addr}")}
        });
        let e = g
            .generate(&GenerateRequest {
                kind: VAULT_DYNAMIC_SECRET,
                name: "db",
                namespace: "team",
                spec: &spec,
                consumer: "ExternalSecret/team/app/dataFrom/0",
                client: &client,
            })
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains(&addr.to_string()), "{e}");
        assert_eq!(rec.count("GeneratorRequest"), 1);
        assert_eq!(g.provider.generator_state_count(), 0);
    }
}
