//! The `Webhook` generator (namespaced, or a ClusterGenerator with `kind: Webhook`), as ESO v2.9
//! runs it: one request rendered from the named Secrets of the referrer's namespace (no
//! `.remoteRef`), whose JSON answer must be an object (or hold one at `result.jsonPath`, which is
//! not a template here); its entries are the generated data. It keeps no state between runs.

use std::collections::BTreeMap;
use std::sync::Arc;

use esr_api::generators::WebhookSpec;
use esr_provider::keys::json_error_text;
use esr_provider::metrics::CallRecorder;
use esr_provider::{ClientContext, KubeAccess, ProviderError, Result, StoreInfo, StoreKind};

use crate::client::SecretScope;
use crate::provider::build_client;

/// Parses a generator spec (`failed to parse provider spec: ...`).
pub fn parse_spec(spec: &serde_json::Value) -> Result<WebhookSpec> {
    serde_json::from_value(spec.clone()).map_err(|e| {
        ProviderError::invalid(format!(
            "failed to parse provider spec: {}",
            json_error_text(&e)
        ))
    })
}

/// Runs the generator `name` for a referrer in `namespace`.
pub async fn generate(
    name: &str,
    namespace: &str,
    spec: &serde_json::Value,
    kube: Arc<dyn KubeAccess>,
    recorder: Arc<dyn CallRecorder>,
) -> Result<BTreeMap<String, Vec<u8>>> {
    let spec = parse_spec(spec)?;
    // The generator reads its CA and Secrets like a SecretStore of the referrer's namespace.
    let store = StoreInfo::new(
        StoreKind::SecretStore,
        format!("Webhook/{name}"),
        Some(namespace.to_string()),
        serde_json::Value::Null,
    );
    let ctx = ClientContext::new(&store, Some(namespace), kube).with_recorder(recorder);
    let client = build_client(
        &ctx,
        spec.to_provider(),
        SecretScope::Namespace(namespace.to_string()),
    )
    .await
    .map_err(|e| e.wrap("failed to prepare provider http client"))?;
    client.generate_map().await
}
