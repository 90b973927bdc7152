//! `odac-agent` binary: parses the command line and hands over to the library's CLI layer
//! ([`odac_agent::cli`]), which sets up tracing and configuration for the command it runs.

use clap::Parser;

fn main() {
    let cli = odac_agent::cli::Cli::parse();
    std::process::exit(cli.execute());
}
