//! `odac-agent` binary: parses the command line and hands over to the library.

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "odac-agent", version, about = "ODAC edge agent")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the agent version.
    Version,
}

fn main() {
    let cli = Cli::parse();
    match cli.command {
        Command::Version => println!("odac-agent {}", odac_agent::AGENT_VERSION),
    }
}
