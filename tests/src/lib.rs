//! `odac-e2e`: the harness of the end-to-end tests, which start the real `odac-sim`,
//! `odac-agent` and `odac` binaries on loopback against the real Docker engine.
//!
//! - [`bins`]: find (and build once) the binaries;
//! - [`command`]: a short command run to completion, stdin fed, output captured;
//! - [`process`]: a child process with captured logs, line waits, signals, peak RSS;
//! - [`poll`]: deadlines instead of sleeps;
//! - [`ports`], [`tcp_proxy`], [`unix_proxy`] (over [`relay`]): loopback ports and the proxies
//!   the tests cut, blackhole and restore;
//! - [`docker`], [`image`]: the test's own view of the engine, cleanup by label, the test image;
//! - [`gpu_lab`]: `odac-sim gpu-lab` (a private engine configured like a GPU host) and its checks;
//! - [`tls`]: certificates made at test time;
//! - [`registry`]: a real image registry (docker-registry with htpasswd auth) to pull from;
//! - [`readme`]: the README's walk-through blocks and the answers it promises, read at test time;
//! - [`git_repo`]: a local repository a public git URL is rewritten to, built-image cleanup;
//! - [`sim`], [`agent`], [`stack`]: the simulator, the agent and a scenario's whole world;
//! - [`in_process`]: the whole agent in the test's process on the in-memory fake engine;
//! - [`systemd`]: real systemd as PID 1 in a container, and the agent's Debian package;
//! - [`backoff`]: the agent's logged reconnect schedule against its envelope;
//! - [`figures`]: the numbers each scenario prints.

pub mod agent;
pub mod backoff;
pub mod bins;
pub mod command;
pub mod docker;
pub mod error;
pub mod figures;
pub mod git_repo;
pub mod gpu_counters;
pub mod gpu_lab;
pub mod image;
pub mod in_process;
pub mod poll;
pub mod ports;
pub mod process;
pub mod readme;
pub mod registry;
mod relay;
pub mod sim;
pub mod stack;
pub mod systemd;
pub mod tcp_proxy;
pub mod tls;
pub mod unix_proxy;

pub use error::{Error, Result};
pub use relay::LinkState;
