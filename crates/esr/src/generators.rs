//! The generator kinds compiled into esr beyond the built-in Password, Fake and ClusterGenerator.
//! Adding a generator kind is one line here.

use esr_controller::generators::Generators;
use kube::Client;

/// The generator registry every subcommand installs.
pub fn registry(client: Client) -> Generators {
    Generators::new(client)
}
