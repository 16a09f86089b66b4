//! esr-schema
