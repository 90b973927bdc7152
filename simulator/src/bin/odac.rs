//! `odac` binary: the command line client of the control plane's REST API.

fn main() {
    std::process::exit(odac_simulator::cli::run(std::env::args_os()));
}
