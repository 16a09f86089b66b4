//! The providers compiled into esr. Adding a provider is one line here.

use std::sync::Arc;

use esr_provider::ProviderRegistry;

/// The registry every subcommand uses.
pub fn registry() -> ProviderRegistry {
    let mut r = ProviderRegistry::new();
    r.register(Arc::new(esr_provider_fake::FakeProvider::new()));
    r.register(Arc::new(esr_provider_kubernetes::KubernetesProvider));
    r.register(Arc::new(
        esr_provider_aws::AwsSecretsManagerProvider::from_env(),
    ));
    r.register(Arc::new(esr_provider_vault::VaultProvider::new()));
    r.register(Arc::new(
        esr_provider_azure::AzureKeyVaultProvider::from_env(),
    ));
    r
}
