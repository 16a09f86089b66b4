//! The PushSecret controller: the pure plan ([`plan`]), sources and stores ([`source`]), typed
//! failures ([`error`]) and the executor ([`reconcile`]).
pub mod error;
pub mod plan;
pub mod reconcile;
pub mod source;
