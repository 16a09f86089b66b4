//! Deploy tooling for esr.
