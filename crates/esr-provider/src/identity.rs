//! The controller's own identity and namespaced stores.
//!
//! Several providers can fall back to ambient credentials when a store names none: Vault
//! kubernetes auth with neither `serviceAccountRef` nor `secretRef` (the controller's
//! ServiceAccount token), the AWS SDK default chain (environment, web identity file, ECS, IMDS),
//! Azure managed identity and workload identity without a `serviceAccountRef` (the controller's
//! pod identity). Those credentials belong to the controller, which usually reads every Secret in
//! the cluster.
//!
//! A SecretStore is written by a namespace's tenant, so it may never authenticate as the
//! controller: such a store fails with [`ErrorKind::Auth`](crate::ErrorKind::Auth) and a message
//! naming the missing reference. A ClusterSecretStore is written by the cluster administrator and
//! keeps the fallback. An operator who trusts every namespace can lift the rule with the
//! controller flag `--allow-namespaced-store-controller-identity`, which calls
//! [`set_allow_namespaced_controller_identity`] at start-up.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::{ProviderError, Result};
use crate::provider::{StoreInfo, StoreKind};

static ALLOW_NAMESPACED: AtomicBool = AtomicBool::new(false);

/// Lets namespaced SecretStores use the controller's identity (the controller flag
/// `--allow-namespaced-store-controller-identity`; off by default).
pub fn set_allow_namespaced_controller_identity(allow: bool) {
    ALLOW_NAMESPACED.store(allow, Ordering::Relaxed);
}

/// Whether namespaced SecretStores may use the controller's identity.
pub fn namespaced_controller_identity_allowed() -> bool {
    ALLOW_NAMESPACED.load(Ordering::Relaxed)
}

/// Checks that `store` may authenticate with the controller's own identity, which `fallback`
/// describes (e.g. "vault kubernetes auth without serviceAccountRef or secretRef"); `hint` says
/// what the store should set instead.
pub fn require_controller_identity(store: &StoreInfo, fallback: &str, hint: &str) -> Result<()> {
    check_controller_identity(
        store.kind,
        namespaced_controller_identity_allowed(),
        fallback,
        hint,
    )
}

/// The pure rule behind [`require_controller_identity`].
pub fn check_controller_identity(
    kind: StoreKind,
    allow_namespaced: bool,
    fallback: &str,
    hint: &str,
) -> Result<()> {
    if kind == StoreKind::ClusterSecretStore || allow_namespaced {
        return Ok(());
    }
    Err(ProviderError::auth(format!(
        "{fallback} would authenticate as the controller, which a SecretStore may not do: \
         {hint}, or use a ClusterSecretStore \
         (or start the controller with --allow-namespaced-store-controller-identity)"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaced_stores_need_the_opt_in() {
        let e = check_controller_identity(
            StoreKind::SecretStore,
            false,
            "vault kubernetes auth without serviceAccountRef or secretRef",
            "set auth.kubernetes.serviceAccountRef or auth.kubernetes.secretRef",
        )
        .unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Auth);
        let text = e.to_string();
        assert!(text.contains("may not do"), "{text}");
        assert!(text.contains("serviceAccountRef"), "{text}");
        assert!(
            check_controller_identity(StoreKind::SecretStore, true, "x", "y").is_ok(),
            "the flag lifts the rule"
        );
        assert!(check_controller_identity(StoreKind::ClusterSecretStore, false, "x", "y").is_ok());
        // off by default
        assert!(!namespaced_controller_identity_allowed());
    }
}
