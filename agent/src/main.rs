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
    /// Run the agent (the systemd service): manage apps and keep the control-plane link.
    Run(odac_agent::run::RunArgs),
    /// Print the agent version.
    Version,
    /// Show what GPUs this host can pass into containers, and why not.
    Inventory(odac_agent::sysinfo::cli::ScanArgs),
    /// Check GPU passthrough prerequisites, with fixes (exit 1 when present hardware is
    /// unusable), and who owns the agent's containers on the engine.
    Doctor(odac_agent::appmgr::doctor::DoctorArgs),
    /// Trade a one-time enrollment code for a token; write the token file and agent.toml.
    Enroll(odac_agent::enroll::EnrollArgs),
    /// Apply a desired-state file to the local engine once and print the app statuses.
    Apply(odac_agent::appmgr::cli::ApplyArgs),
    /// Print the app statuses last recorded in the state directory.
    Status(odac_agent::appmgr::cli::StatusArgs),
    /// Print one sample of every GPU's figures (utilisation, VRAM, temperature, power, clock).
    GpuStats(odac_agent::telemetry::cli::GpuStatsArgs),
}

fn main() {
    let cli = Cli::parse();
    match cli.command {
        Command::Run(args) => std::process::exit(odac_agent::run::run_command(&args)),
        Command::Version => println!("odac-agent {}", odac_agent::AGENT_VERSION),
        Command::Inventory(args) => {
            std::process::exit(odac_agent::sysinfo::cli::inventory_command(&args))
        }
        Command::Doctor(args) => {
            std::process::exit(odac_agent::appmgr::doctor::doctor_command(&args))
        }
        Command::Enroll(args) => std::process::exit(odac_agent::enroll::enroll_command(&args)),
        Command::Apply(args) => std::process::exit(odac_agent::appmgr::cli::apply_command(&args)),
        Command::Status(args) => std::process::exit(odac_agent::appmgr::cli::status_command(&args)),
        Command::GpuStats(args) => {
            std::process::exit(odac_agent::telemetry::cli::gpu_stats_command(&args))
        }
    }
}
