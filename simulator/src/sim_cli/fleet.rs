//! `odac-sim fleet`: N protocol-level simulated agents (no Docker) against a control plane,
//! with a summary line every 5 s, until Ctrl-C or `--duration-secs`.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::fake_agent::fleet::{Fleet, FleetConfig};

/// `odac-sim fleet`'s arguments.
#[derive(Debug, Args)]
pub struct FleetArgs {
    /// Number of simulated agents to run.
    #[arg(long, default_value_t = 10)]
    agents: usize,
    /// Control plane agent URL, e.g. wss://127.0.0.1:7443/agent/v1.
    #[arg(long)]
    cp: String,
    /// CA certificate to trust (PEM), e.g. the simulator's DIR/ca.pem.
    #[arg(long)]
    ca_file: PathBuf,
    /// Agent bearer token the control plane accepts (`odac-sim serve --token`; not the
    /// API token). `ODAC_TOKEN` is still read when neither this nor --token-file is given.
    #[arg(
        long,
        env = "ODAC_AGENT_TOKEN",
        hide_env_values = true,
        conflicts_with = "token_file"
    )]
    token: Option<String>,
    /// File holding the agent bearer token (e.g. the simulator's DIR/agent-token).
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// Host name prefix: agents are named PREFIX-0000, PREFIX-0001, …
    #[arg(long, default_value = "sim")]
    prefix: String,
    /// Heartbeat (ping) interval in seconds.
    #[arg(long, default_value_t = 20)]
    heartbeat_secs: u64,
    /// Stop after this many seconds (default: run until Ctrl-C).
    #[arg(long)]
    duration_secs: Option<u64>,
}

impl FleetArgs {
    /// Runs the fleet until a signal or the duration's end, then stops it.
    pub async fn run(self) -> anyhow::Result<()> {
        let ca_pem = std::fs::read(&self.ca_file)
            .map_err(|e| anyhow::anyhow!("cannot read CA file {}: {e}", self.ca_file.display()))?;
        let token = agent_token(self.token, self.token_file)?;
        let agents = self.agents;
        let fleet = Fleet::start(&FleetConfig {
            agents,
            url: self.cp,
            ca_pem,
            token,
            prefix: self.prefix,
            heartbeat: Duration::from_secs(self.heartbeat_secs.max(1)),
        });
        println!("fleet: {agents} simulated agents started");
        let mut tick = tokio::time::interval(Duration::from_secs(5));
        let until = self
            .duration_secs
            .map(|s| tokio::time::Instant::now() + Duration::from_secs(s));
        let signal = crate::server::wait_for_signal();
        tokio::pin!(signal);
        loop {
            tokio::select! {
                _ = tick.tick() => println!("{}", fleet.summary()),
                _ = &mut signal => break,
            }
            if until.is_some_and(|u| tokio::time::Instant::now() >= u) {
                break;
            }
        }
        println!("{}", fleet.summary());
        fleet.stop().await;
        Ok(())
    }
}

/// The agent token: `--token`, else `--token-file`, else `ODAC_TOKEN` with a warning.
fn agent_token(token: Option<String>, token_file: Option<PathBuf>) -> anyhow::Result<String> {
    Ok(match (token, token_file) {
        (Some(t), _) => t,
        (None, Some(f)) => std::fs::read_to_string(&f)
            .map_err(|e| anyhow::anyhow!("cannot read token file {}: {e}", f.display()))?
            .trim()
            .to_owned(),
        (None, None) => match std::env::var("ODAC_TOKEN") {
            Ok(t) if !t.is_empty() => {
                eprintln!(
                    "warning: reading the agent token from ODAC_TOKEN, which is the API \
                     token of `odac`; set ODAC_AGENT_TOKEN instead"
                );
                t
            }
            _ => {
                anyhow::bail!("give the agent token with --token, --token-file or ODAC_AGENT_TOKEN")
            }
        },
    })
}
