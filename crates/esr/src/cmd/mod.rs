//! One module per subcommand; each owns its clap `Args` and a `run` function.

pub mod crdgen;
