//! `odac-sim` binary: the simulated control plane.

use clap::Parser;

#[derive(Debug, Parser)]
#[command(name = "odac-sim", version, about = "ODAC control-plane simulator")]
struct Cli {}

fn main() {
    let _cli = Cli::parse();
}
