//! Protocol-level fake agents, which speak the agent protocol without running containers:
//! [`agent_conn`] is one TLS WebSocket connection with the agent's token and subprotocol,
//! [`inventories`] the realistic inventories they report, and [`fleet`] runs N of them
//! against a control plane (`odac-sim fleet`); [`sim_agent`] is one simulated agent, which
//! acks and "applies" desired state as a real host with its inventory would report it.

pub mod agent_conn;
pub mod fleet;
pub mod inventories;
pub mod sim_agent;
