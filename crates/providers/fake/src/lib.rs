//! esr-provider-fake
