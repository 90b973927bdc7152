//! `odac-sim`'s commands, one file each: the clap definitions of a command and its body.
//! `bin/odac-sim.rs` only parses the command line and calls [`run`]. [`serve`] is the
//! simulated control plane, [`fleet`] simulated agents against one, [`conformance`] the
//! scripted agent that checks one, [`demo`] the all-in-one demo with a real local agent,
//! [`gpu_lab`] the GPU lab and its faults, [`release`] agent releases.

use std::path::PathBuf;

use clap::Subcommand;

use crate::SimError;

pub mod conformance;
pub mod demo;
pub mod fleet;
pub mod gpu_lab;
pub mod release;
pub mod serve;

/// An `odac-sim` command.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the agents' WebSocket, the REST API and the dashboard on one TLS port.
    Serve(serve::ServeArgs),
    /// Agent releases: make a key, sign a binary (`odac agent update` offers it).
    #[command(subcommand)]
    Release(release::ReleaseCommand),
    /// Run N protocol-level simulated agents (no Docker) against a control plane.
    Fleet(fleet::FleetArgs),
    /// Check a control plane against the protocol rules it must keep, as a scripted agent:
    /// one PASS/FAIL line per rule; exit 1 when any fails.
    Conformance(conformance::ConformanceArgs),
    /// Serve, start a local odac-agent, build the sample image and create a sample app.
    Demo(demo::DemoArgs),
    /// Start a private Docker engine configured like a GPU host (simulated NVIDIA, AMD and
    /// Intel GPUs, toolkit stand-ins) and a host root describing it; run until Ctrl-C.
    /// `gpu-lab inject --dir DIR …` breaks a GPU of a running lab; `gpu-lab engine stop|start
    /// --dir DIR` stops and starts its engine.
    GpuLab(gpu_lab::GpuLabArgs),
}

/// Runs `command` to its end.
pub async fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Serve(args) => args.run().await,
        Command::Release(command) => Ok(command.run()?),
        Command::Fleet(args) => args.run().await,
        Command::Conformance(args) => args.run().await,
        Command::Demo(args) => args.run().await,
        Command::GpuLab(args) => args.run().await,
    }
}

/// The exit status for a command's error: a configuration that cannot work is EX_CONFIG (78),
/// like the agent's; anything else 1.
pub fn exit_code(e: &anyhow::Error) -> i32 {
    let config = matches!(
        e.downcast_ref::<SimError>(),
        Some(SimError::Config(_) | SimError::SecretFile { .. })
    );
    if config { 78 } else { 1 }
}

/// `$XDG_STATE_HOME/NAME`, `$HOME/.local/state/NAME`, or `./NAME-state`.
pub fn default_state(name: &str) -> PathBuf {
    if let Some(d) = std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(d).join(name);
    }
    if let Some(h) = std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(h).join(".local/state").join(name);
    }
    PathBuf::from(format!("{name}-state"))
}
