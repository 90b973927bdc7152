//! `odac-sim demo`: serve, start a local odac-agent, build the sample image and create a
//! sample app (`crate::demo`); what is left on exit is chosen here.

use std::path::PathBuf;

use clap::Args;

use crate::DEFAULT_LISTEN;
use crate::demo::{self, OnExit};

/// `odac-sim demo`'s arguments.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Address to listen on (one TLS port for agents, API and dashboard).
    #[arg(long, default_value = DEFAULT_LISTEN)]
    listen: String,
    /// State dir; default $XDG_STATE_HOME/odac-sim-demo.
    #[arg(long)]
    state: Option<PathBuf>,
    /// Leave the sample app (and its container) in place on exit.
    #[arg(long, conflicts_with = "clean")]
    keep: bool,
    /// On exit remove every app of the demo's host, the ones you added too (by default
    /// only the sample app is removed, and the others are named with how to remove them).
    #[arg(long)]
    clean: bool,
}

impl DemoArgs {
    /// Runs the demo until Ctrl-C.
    pub async fn run(self) -> anyhow::Result<()> {
        let on_exit = match (self.keep, self.clean) {
            (true, _) => OnExit::Keep,
            (_, true) => OnExit::Clean,
            _ => OnExit::RemoveSample,
        };
        let state = self
            .state
            .unwrap_or_else(|| super::default_state("odac-sim-demo"));
        demo::run(&self.listen, &state, on_exit).await
    }
}
