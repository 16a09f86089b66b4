//! esr-testkit
