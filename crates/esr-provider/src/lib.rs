//! esr-provider
