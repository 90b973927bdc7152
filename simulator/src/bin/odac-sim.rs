//! `odac-sim` binary: the simulated control plane (`serve`), a simulated fleet of agents
//! (`fleet`), the all-in-one demo with a real local agent (`demo`), the GPU lab (`gpu-lab`)
//! and agent releases (`release`). It parses the command line and runs the command; each
//! command's definition and body is a file of `odac_simulator::sim_cli`.

use clap::Parser;
use odac_simulator::sim_cli::{self, Command};

#[derive(Debug, Parser)]
#[command(name = "odac-sim", version, about = "ODAC control-plane simulator")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

fn main() {
    odac_simulator::logging::init();
    let cli = Cli::parse();
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = rt.block_on(sim_cli::run(cli.command)) {
        eprintln!("error: {e:#}");
        std::process::exit(sim_cli::exit_code(&e));
    }
}
