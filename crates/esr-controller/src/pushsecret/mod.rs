//! The PushSecret controller: the pure plan ([`plan`]), sources and stores ([`source`]) and the
//! executor ([`reconcile`]).
pub mod plan;
pub mod reconcile;
pub mod source;
