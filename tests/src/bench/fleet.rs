//! `odac-sim fleet` as a [`Process`]: N simulated agents against one simulator, the token in a
//! file (not on the command line), and a wait on the fleet's own counter line (`connected N |
//! …`, printed every 5 s) until every agent holds a session.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use odac_e2e::bins::{SIM, bin};
use odac_e2e::process::Process;
use odac_e2e::sim::Sim;
use odac_e2e::{Error, Result};

/// Starts `agents` simulated agents named `PREFIX-NNNN` against `sim`, logging under `dir`.
pub fn start_fleet(sim: &Sim, agents: usize, prefix: &str, dir: &Path) -> Result<Process> {
    let token_file = dir.join(format!("{prefix}.token"));
    std::fs::write(&token_file, sim.token()).map_err(|e| Error::io("write", &token_file, e))?;
    let mut cmd = Command::new(bin(SIM)?);
    cmd.arg("fleet")
        .arg("--agents")
        .arg(agents.to_string())
        .arg("--cp")
        .arg(sim.agents_url())
        .arg("--ca-file")
        .arg(sim.ca_path())
        .arg("--token-file")
        .arg(&token_file)
        .arg("--prefix")
        .arg(prefix)
        .env_remove("ODAC_TOKEN")
        .env_remove("ODAC_AGENT_TOKEN")
        .env("ODAC_SIM_LOG", "warn");
    Process::spawn(&format!("fleet-{prefix}"), &mut cmd, &dir.join("logs"))
}

/// The `connected` counter of a fleet summary line.
pub fn connected_of(line: &str) -> Option<usize> {
    line.strip_prefix("connected ")?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Waits until a summary line printed after `mark` says `agents` are connected.
pub fn wait_all_connected(
    fleet: &Process,
    mark: usize,
    agents: usize,
    timeout: Duration,
) -> Result<()> {
    fleet
        .wait_for(mark, timeout, &format!("{agents} agents connected"), |l| {
            connected_of(l) == Some(agents)
        })
        .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_connected_counter() {
        let line = "connected 4999 | sessions 5000 | connect failures 0 | reports 5000 | acks 0";
        assert_eq!(connected_of(line), Some(4999));
        assert_eq!(connected_of("fleet: 10 simulated agents started"), None);
    }
}
