//! `odac-simulator`: a fake ODAC control plane (`odac-sim`) and the `odac` CLI that drives its
//! REST API. Tests and demos run the real agent against it.
//!
//! The modules are grouped by role. [`server`] holds the one TLS port that carries the agents'
//! WebSocket, the REST API under `/api/` and the dashboard. [`state`] holds the fleet: the
//! hub (in memory), the store (the state dir), the views and the standing faults that let tests
//! break things on purpose. [`fake_agent`] holds the protocol-level fake agents;
//! [`demo`] brings up the simulator with a real local agent; [`cli`] is the `odac` client;
//! [`gpu_lab`] is a private Docker engine configured like a GPU host (`odac-sim gpu-lab`);
//! [`sim_cli`] holds the `odac-sim` commands, one file each.

pub mod catalog;
pub mod cli;
pub mod clock;
pub mod conformance;
pub mod demo;
pub mod error;
pub mod fake_agent;
pub mod files;
pub mod gpu_auto;
pub mod gpu_lab;
pub mod logging;
pub mod placement;
pub mod release;
pub mod secret_file;
pub mod server;
pub mod sim_cli;
pub mod state;

pub use error::SimError;
pub use server::{ServeConfig, Server};

/// Path of the agents' WebSocket endpoint.
pub const AGENT_PATH: &str = "/agent/v1";

/// Default listen address of `odac-sim serve` and `odac-sim demo`.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7443";
