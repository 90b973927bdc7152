//! `odac-agent` library: everything the agent does lives here; `main.rs` only parses the
//! command line, sets up tracing and configuration, and calls into this crate.

pub mod appmgr;
pub mod bounded_read;
pub mod cli;
pub mod config;
pub mod enroll;
pub mod gpu_health;
pub mod identity;
pub mod instance_lock;
mod inventory_loop;
pub mod liveness;
pub mod logging;
pub mod metrics;
pub mod metrics_feed;
pub mod notify;
pub mod run;
pub mod telemetry;
pub mod update;
pub mod uplink;

/// The agent's version, as reported in `hello` and by `odac-agent version`.
pub const AGENT_VERSION: &str = env!("CARGO_PKG_VERSION");
