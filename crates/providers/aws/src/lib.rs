//! esr-provider-aws
