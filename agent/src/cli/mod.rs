//! The `odac-agent` command line: the clap definitions, one file per command with its flags
//! and body (`run`, `inventory`, `doctor`, `enroll`, `apply`, `status`, `gpu-stats`), the
//! status table `apply` and `status` print, and the exit codes and output helpers they share.
//! The domain modules below (`appmgr`, `inventory`, `enroll`, `run`, ...) know nothing of
//! flags, stdout or exit codes; `main.rs` only parses and calls [`Cli::execute`].

pub mod apply;
pub mod doctor;
pub mod enroll;
pub mod gpu_stats;
pub mod inventory;
mod output;
pub mod run;
pub mod status;
pub mod table;
pub mod target;

use clap::{Parser, Subcommand};

pub use output::{EXIT_CONFIG, EXIT_FAILURE, EXIT_OK, EXIT_USAGE};

/// `odac-agent` and its subcommands.
#[derive(Debug, Parser)]
#[command(name = "odac-agent", version, about = "ODAC edge agent")]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the agent (the systemd service): manage apps and keep the control-plane link.
    Run(run::RunArgs),
    /// Print the agent version.
    Version,
    /// Show what GPUs this host can pass into containers, and why not.
    Inventory(inventory::ScanArgs),
    /// Check GPU passthrough prerequisites, with fixes (exit 1 when present hardware is
    /// unusable), and who owns the agent's containers on the engine.
    Doctor(doctor::DoctorArgs),
    /// Trade a one-time enrollment code for a token; write the token file and agent.toml.
    Enroll(enroll::EnrollArgs),
    /// Apply a desired-state file to the local engine once and print the app statuses.
    Apply(apply::ApplyArgs),
    /// Print the app statuses last recorded in the state directory.
    Status(status::StatusArgs),
    /// Print one sample of every GPU's figures (utilisation, VRAM, temperature, power, clock).
    GpuStats(gpu_stats::GpuStatsArgs),
}

impl Cli {
    /// Runs the chosen command; its exit code.
    pub fn execute(&self) -> i32 {
        match &self.command {
            Command::Run(args) => run::run_command(args),
            Command::Version => {
                println!("odac-agent {}", crate::AGENT_VERSION);
                EXIT_OK
            }
            Command::Inventory(args) => inventory::inventory_command(args),
            Command::Doctor(args) => doctor::doctor_command(args),
            Command::Enroll(args) => enroll::enroll_command(args),
            Command::Apply(args) => apply::apply_command(args),
            Command::Status(args) => status::status_command(args),
            Command::GpuStats(args) => gpu_stats::gpu_stats_command(args),
        }
    }
}
