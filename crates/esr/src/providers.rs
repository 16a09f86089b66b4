//! The providers compiled into esr. Adding a provider is one line here.

use std::sync::{Arc, OnceLock};

use esr_provider::ProviderRegistry;
use esr_provider_vault::VaultProvider;

/// The process-wide Vault provider: the provider registry and the `VaultDynamicSecret` generator
/// (see [`crate::generators`]) share it, so they share its login sessions (token cache) and the
/// generator lease state.
pub fn vault() -> Arc<VaultProvider> {
    static VAULT: OnceLock<Arc<VaultProvider>> = OnceLock::new();
    VAULT.get_or_init(|| Arc::new(VaultProvider::new())).clone()
}

/// The registry every subcommand uses.
pub fn registry() -> ProviderRegistry {
    let mut r = ProviderRegistry::new();
    r.register(Arc::new(esr_provider_fake::FakeProvider::new()));
    r.register(Arc::new(esr_provider_kubernetes::KubernetesProvider));
    r.register(Arc::new(
        esr_provider_aws::AwsSecretsManagerProvider::from_env(),
    ));
    r.register(vault());
    r.register(Arc::new(
        esr_provider_azure::AzureKeyVaultProvider::from_env(),
    ));
    r.register(Arc::new(
        esr_provider_gcp::GcpSecretManagerProvider::from_env(),
    ));
    r.register(Arc::new(esr_provider_webhook::WebhookStoreProvider));
    r
}
