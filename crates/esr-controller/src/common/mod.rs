//! Pieces shared by the controllers.
pub mod events;
pub mod fanout;
pub mod generators;
pub mod namespaces;
pub mod observe;
pub mod ratelimit;
pub mod refresh;
pub mod rollout;
pub mod storegate;
pub mod writes;
