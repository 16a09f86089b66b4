//! The PushSecret controller.
pub mod reconcile;
pub mod source;
