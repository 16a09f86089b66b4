//! One module per subcommand; each owns its clap `Args` and a `run` function.

pub mod controller;
pub mod crdgen;
pub mod input;
pub mod migrate;
pub mod render;
pub mod template;
pub mod validate;
pub mod version;
