//! `odac` binary: the command line client of the control plane's REST API.

use clap::Parser;

#[derive(Debug, Parser)]
#[command(name = "odac", version, about = "ODAC command line client")]
struct Cli {}

fn main() {
    let _cli = Cli::parse();
}
