//! `odac-sim serve`: the simulated control plane, its agents' WebSocket, REST API and
//! dashboard on one TLS port, until a signal.

use std::path::PathBuf;

use clap::Args;

use crate::server::DEFAULT_HEARTBEAT_SECS;
use crate::state::identity::{DEFAULT_HOSTS_PER_TOKEN, MAX_HOSTS_PER_TOKEN};
use crate::{DEFAULT_LISTEN, ServeConfig, Server, secret_file};

/// `odac-sim serve`'s arguments.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on (one TLS port for agents, API and dashboard).
    #[arg(long, default_value = DEFAULT_LISTEN)]
    listen: String,
    /// State dir (CA, fleet state); default $XDG_STATE_HOME/odac-sim.
    #[arg(long)]
    state: Option<PathBuf>,
    /// Agent bearer token to accept (repeatable); none = generate DIR/agent-token.
    #[arg(
        long = "token",
        env = "ODAC_SIM_TOKENS",
        value_delimiter = ',',
        hide_env_values = true
    )]
    tokens: Vec<String>,
    /// File holding agent bearer tokens, one per line (mode 0600; keeps them out of `ps`).
    #[arg(long = "token-file")]
    token_files: Vec<PathBuf>,
    /// Agent ids each static token may register (the first ones it is used with).
    #[arg(
        long,
        default_value_t = DEFAULT_HOSTS_PER_TOKEN,
        value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_HOSTS_PER_TOKEN))
    )]
    hosts_per_token: u32,
    /// One-time enrollment code to accept (repeatable).
    #[arg(long = "enroll-code")]
    enroll_codes: Vec<String>,
    /// Require this bearer token on the REST API (visible in `ps`: prefer the file or env).
    #[arg(
        long,
        env = "ODAC_SIM_API_TOKEN",
        hide_env_values = true,
        conflicts_with = "api_token_file"
    )]
    api_token: Option<String>,
    /// File holding the REST API's bearer token (mode 0600).
    #[arg(long)]
    api_token_file: Option<PathBuf>,
    /// Serve the REST API without a token on a non-loopback address.
    #[arg(long)]
    insecure_open_api: bool,
    /// Heartbeat (ping) interval told to agents in `welcome`, in seconds.
    #[arg(
        long,
        default_value_t = DEFAULT_HEARTBEAT_SECS,
        value_parser = clap::value_parser!(u32).range(1..=3600)
    )]
    heartbeat_secs: u32,
    /// Pull the catalog's images from this registry mirror (HOST[:PORT]) instead of
    /// their own registries, e.g. a local registry on an air-gapped network.
    #[arg(long, value_name = "HOST[:PORT]", value_parser = crate::catalog::check_registry)]
    catalog_registry: Option<String>,
    /// Agent releases to offer (`odac-sim release sign` files) and serve (/releases/NAME).
    #[arg(long, value_name = "DIR")]
    releases: Option<PathBuf>,
    /// Release public key (`ed25519:…`, repeatable) told to agents at enrollment.
    #[arg(long = "release-public-key", value_name = "KEY")]
    release_keys: Vec<String>,
}

impl ServeArgs {
    /// Serves until SIGINT or SIGTERM; tokens and the API token may come from files.
    pub async fn run(self) -> anyhow::Result<()> {
        let mut tokens = self.tokens;
        for f in &self.token_files {
            tokens.extend(secret_file::read_tokens(f)?);
        }
        let api_token = match self.api_token_file {
            Some(f) => Some(secret_file::read_one(&f)?),
            None => self.api_token,
        };
        let state = self
            .state
            .unwrap_or_else(|| super::default_state("odac-sim"));
        let mut cfg = ServeConfig::new(self.listen, state);
        cfg.tokens = tokens;
        cfg.hosts_per_token = self.hosts_per_token;
        cfg.enroll_codes = self.enroll_codes;
        cfg.api_token = api_token;
        cfg.insecure_open_api = self.insecure_open_api;
        cfg.heartbeat_secs = self.heartbeat_secs;
        cfg.catalog_registry = self.catalog_registry;
        cfg.releases = self.releases;
        cfg.release_keys = self.release_keys;
        let server = Server::start(cfg).await?;
        print!("{}", server.banner());
        server.run_until_signal().await;
        Ok(())
    }
}
