//! The comparisons every fault scenario ends with: the control plane's view (`GET /api/apps`)
//! equals the agent's (`statuses.json`), the desired state the agent holds equals the control
//! plane's apps, and exactly one container exists per app; and the wait for the agent's
//! statuses to reach the control plane.

use crate::error::Result;
use crate::poll::poll;
use odac_protocol::AppStatus;
use std::collections::BTreeMap;
use std::time::Duration;

use super::Stack;

impl Stack {
    /// Waits up to `timeout` for the control plane to hold the agent's exact status of every
    /// app in `names`; returns the apps whose status still differs (empty: all delivered).
    pub fn wait_statuses_delivered(&self, names: &[String], timeout: Duration) -> Vec<String> {
        let undelivered = || -> Vec<String> {
            let mine = self.agent().and_then(|a| a.statuses()).unwrap_or_default();
            names
                .iter()
                .filter(|n| {
                    let theirs = self.sim.app(n).ok().flatten().and_then(|a| a.status);
                    theirs.as_ref() != mine.get(n.as_str())
                })
                .cloned()
                .collect()
        };
        let _ = poll(
            "the agent's statuses to reach the control plane",
            timeout,
            || {
                let left = undelivered();
                if left.is_empty() {
                    Ok(())
                } else {
                    Err(format!("{left:?}"))
                }
            },
        );
        undelivered()
    }

    /// Checks the end state of a fault scenario once: every app of the control plane is
    /// `running` with the agent's exact status, the agent's persisted desired state names the
    /// same apps with the same specs, and each app has exactly one container, running.
    pub fn converged(&self, expect_apps: usize) -> std::result::Result<(), String> {
        let apps = self.sim.apps().map_err(|e| e.to_string())?;
        let agent = self.agent().map_err(|e| e.to_string())?;
        let statuses = agent.statuses().map_err(|e| e.to_string())?;
        if apps.len() != expect_apps {
            return Err(format!(
                "control plane has {} apps, want {expect_apps}",
                apps.len()
            ));
        }
        if statuses.len() != expect_apps {
            return Err(format!(
                "agent has {} statuses, want {expect_apps}",
                statuses.len()
            ));
        }
        for a in &apps {
            let mine: Option<&AppStatus> = statuses.get(&a.name);
            if a.state != "running" {
                return Err(format!("{}: control plane says {}", a.name, a.state));
            }
            if a.status.as_ref() != mine {
                return Err(format!(
                    "{}: control plane has {:?}, agent has {:?}",
                    a.name, a.status, mine
                ));
            }
        }
        let desired = agent
            .desired()
            .map_err(|e| e.to_string())?
            .ok_or("the agent holds no desired state")?;
        let cp_specs: BTreeMap<&str, &odac_protocol::AppSpec> =
            apps.iter().map(|a| (a.name.as_str(), &a.spec)).collect();
        let agent_specs: BTreeMap<&str, &odac_protocol::AppSpec> =
            desired.apps.iter().map(|a| (a.name.as_str(), a)).collect();
        if cp_specs != agent_specs {
            return Err(format!(
                "desired state differs: control plane {:?}, agent {:?}",
                cp_specs.keys(),
                agent_specs.keys()
            ));
        }
        let by_app = self.containers_by_app().map_err(|e| e.to_string())?;
        if by_app.len() != expect_apps {
            return Err(format!(
                "{} apps have containers, want {expect_apps}",
                by_app.len()
            ));
        }
        for (app, cs) in &by_app {
            if cs.len() != 1 {
                return Err(format!("{app}: {} containers: {cs:?}", cs.len()));
            }
            if cs[0].state != "running" {
                return Err(format!("{app}: container is {}", cs[0].state));
            }
        }
        Ok(())
    }

    /// Waits for [`Stack::converged`].
    pub fn wait_converged(&self, expect_apps: usize, timeout: Duration) -> Result<()> {
        // large fleets are polled more gently: each probe lists every container
        let every = if expect_apps > 20 {
            Duration::from_secs(1)
        } else {
            crate::poll::POLL_INTERVAL
        };
        crate::poll::poll_every(
            &format!("{expect_apps} apps to converge"),
            timeout,
            every,
            || self.converged(expect_apps),
        )
    }
}
