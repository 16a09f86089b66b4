//! esr-provider-vault
