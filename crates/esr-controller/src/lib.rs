pub mod pipeline;
pub mod refresh;
