//! Pieces shared by the controllers.
pub mod events;
pub(crate) mod fanout;
pub mod generators;
pub mod ratelimit;
pub mod refresh;
pub mod rollout;
pub mod storegate;
