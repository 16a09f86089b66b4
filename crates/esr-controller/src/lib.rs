//! esr-controller
