//! Protocol-level fake agents, which speak the agent protocol without running containers:
//! [`agent_conn`] is one TLS WebSocket connection with the agent's token and subprotocol,
//! [`inventories`] the realistic inventories they report, and [`fleet`] runs N of them
//! against a control plane (`odac-sim fleet`). The simulated agent itself is
//! `crate::sim_agent`.

pub mod agent_conn;
pub mod fleet;
pub mod inventories;
