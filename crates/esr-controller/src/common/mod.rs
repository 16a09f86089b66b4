//! Pieces shared by the controllers.
pub mod fanout;
pub mod generators;
pub mod namespaces;
pub mod observe;
pub mod ratelimit;
pub mod refresh;
pub mod rollout;
