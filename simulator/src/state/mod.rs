//! The simulator's state: what the fake control plane knows and keeps. [`hub`] is the shared
//! in-memory state every handler goes through (fleet data, live sessions, broadcast channels),
//! [`model`] the persisted data, [`store`] its files in the state dir (git secrets sealed by
//! [`secrets`]), [`views`] the REST API's views of hosts and apps, [`identity`] which agent ids
//! a token may speak for, [`dedup`] the report seqs already recorded, [`faults`] the standing
//! faults, [`gpu_history`] the live GPU figures, [`registries`] the registry logins (in
//! memory only) and [`exec_tickets`] the exec sessions waiting for their agent.

pub mod dedup;
pub mod exec_tickets;
pub mod faults;
pub mod gpu_history;
pub mod hub;
pub mod identity;
pub mod liveness;
pub mod log_viewers;
pub mod model;
pub mod registries;
pub mod secrets;
pub mod store;
pub mod views;
