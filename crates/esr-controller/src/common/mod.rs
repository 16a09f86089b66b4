//! Pieces shared by the controllers.
pub(crate) mod fanout;
pub mod generators;
pub mod ratelimit;
pub mod refresh;
pub mod rollout;
