//! esr-provider-azure
