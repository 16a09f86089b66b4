//! esr-provider-kubernetes
