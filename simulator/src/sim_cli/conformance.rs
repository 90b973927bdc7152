//! `odac-sim conformance`: checks a control plane against the protocol rules it must keep,
//! as a scripted agent (`crate::conformance`); one PASS/FAIL line per rule, exit 1 when any
//! fails.

use std::path::PathBuf;

use clap::Args;

use crate::conformance::{ConformanceConfig, all_passed, report};

/// `odac-sim conformance`'s arguments.
#[derive(Debug, Args)]
pub struct ConformanceArgs {
    /// Control plane agent URL, e.g. wss://app.odac.run/agent/v1.
    #[arg(long)]
    control_plane: String,
    /// Agent bearer token.
    #[arg(long, env = "ODAC_TOKEN", hide_env_values = true)]
    token: String,
    /// CA certificate to trust (PEM), for a control plane with a private CA; without it
    /// the public web PKI roots are trusted.
    #[arg(long)]
    ca_file: Option<PathBuf>,
}

impl ConformanceArgs {
    /// Runs every rule and prints the report; exits 1 when a rule failed.
    pub async fn run(self) -> anyhow::Result<()> {
        let ca_pem = match &self.ca_file {
            Some(f) => std::fs::read(f)
                .map_err(|e| anyhow::anyhow!("cannot read CA file {}: {e}", f.display()))?,
            None => Vec::new(),
        };
        let cfg = ConformanceConfig::new(self.control_plane, self.token, ca_pem);
        let outcomes = crate::conformance::run(&cfg).await;
        print!("{}", report(&outcomes));
        if !all_passed(&outcomes) {
            std::process::exit(1);
        }
        Ok(())
    }
}
