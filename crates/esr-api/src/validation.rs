//! Semantic validation of external-secrets.io objects (ESO admission rules, eso-inventory §1.4).
