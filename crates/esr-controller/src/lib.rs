pub mod convert;
pub mod fetch;
pub mod hash;
pub mod pipeline;
pub mod plan;
pub mod refresh;
