//! esr-template
