//! `odac-simulator`: a fake ODAC control plane (`odac-sim`) and the `odac` CLI that drives its
//! REST API. Tests and demos run the real agent against it.
//!
//! One TLS port ([`server`]) carries the agents' WebSocket ([`ws`]), the REST API under
//! `/api/` ([`api`], [`admin`], [`sse`]) and the dashboard ([`dashboard`]). Fleet state lives
//! in [`hub`] (in memory) and [`store`] (the state dir). [`faults`] lets tests break things on
//! purpose; [`agent_conn`], [`sim_agent`] and [`fleet`] are protocol-level fake agents;
//! [`demo`] brings up the simulator with a real local agent; [`cli`] is the `odac` client;
//! [`gpu_lab`] is a private Docker engine configured like a GPU host (`odac-sim gpu-lab`).

pub mod admin;
pub mod agent_auth;
pub mod agent_conn;
pub mod api;
pub mod api_error;
pub mod body;
pub mod catalog;
pub mod cli;
pub mod clock;
pub mod conformance;
pub mod dashboard;
pub mod dedup;
pub mod demo;
pub mod error;
pub mod faults;
pub mod fleet;
pub mod gpu_auto;
pub mod gpu_history;
pub mod gpu_lab;
pub mod http_errors;
pub mod http_serve;
pub mod hub;
pub mod identity;
pub mod inventories;
pub mod listener;
pub mod liveness;
pub mod logs;
pub mod model;
pub mod placement;
pub mod reasons;
pub mod registries;
pub mod secret_file;
pub mod secrets;
pub mod server;
pub mod sim_agent;
pub mod sse;
pub mod store;
pub mod tls;
pub mod views;
pub mod ws;

pub use error::SimError;
pub use server::{ServeConfig, Server};

/// Path of the agents' WebSocket endpoint.
pub const AGENT_PATH: &str = "/agent/v1";

/// Default listen address of `odac-sim serve` and `odac-sim demo`.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7443";
