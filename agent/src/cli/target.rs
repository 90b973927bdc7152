//! The flags that choose which agent's set a local command (`apply`, `status`, `doctor`) works
//! on: [`TargetArgs`] reads the state dir, instance, engine, lock dir and policy from an agent
//! configuration (`--config FILE`) and lets flags override them; without `--config` the
//! defaults of a fresh agent (`/var/lib/odac-agent`, instance `odac`) apply.

use std::path::PathBuf;

use crate::appmgr::AppManagerConfig;
use crate::appmgr::local::Target;
use crate::config::Config;

/// The flags that name an agent set: its configuration, state dir and instance (`apply`,
/// `status` and `doctor` share them).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct AgentSetArgs {
    /// Agent configuration to take the state dir, instance, engine, lock dir and policy from
    /// (e.g. /etc/odac/agent.toml); the flags below override it.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// State directory (desired state, statuses, agent id) [default: /var/lib/odac-agent].
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Container instance (the agent's `apps.instance`) [default: odac].
    #[arg(long, value_name = "NAME")]
    pub instance: Option<String>,
}

/// The flags that choose the agent set a local command works on.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TargetArgs {
    /// Configuration, state dir and instance.
    #[command(flatten)]
    pub set: AgentSetArgs,
    /// Docker endpoint (default: DOCKER_HOST or the local socket).
    #[arg(long, value_name = "URL")]
    pub docker_host: Option<String>,
    /// Directory of the agents' instance locks (the agent's `apps.lock_dir`).
    #[arg(long, value_name = "DIR", env = "ODAC_AGENT__APPS__LOCK_DIR")]
    pub lock_dir: Option<PathBuf>,
}

/// Why the flags do not name a usable target; the message names the flag or file.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct TargetError(pub String);

impl TargetArgs {
    /// The target these flags name.
    pub fn resolve(&self) -> Result<Target, TargetError> {
        // the configuration's one state_dir (the loader gives the app manager the same)
        let (mut apps, mut docker_host) = match &self.set.config {
            Some(path) => {
                let c = Config::load(Some(path)).map_err(|e| TargetError(e.to_string()))?;
                (c.apps, c.docker.host)
            }
            None => (AppManagerConfig::default(), None),
        };
        if let Some(dir) = &self.set.state_dir {
            apps.state_dir.clone_from(dir);
        }
        if let Some(instance) = &self.set.instance {
            odac_protocol::check_dns_label("--instance", instance)
                .map_err(|e| TargetError(e.to_string()))?;
            apps.instance.clone_from(instance);
        }
        if let Some(dir) = &self.lock_dir {
            apps.lock_dir.clone_from(dir);
        }
        if self.docker_host.is_some() {
            docker_host.clone_from(&self.docker_host);
        }
        Ok(Target { apps, docker_host })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn flags_override_the_configuration() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("agent.toml");
        std::fs::write(
            &file,
            "state_dir = \"/srv/odac\"\n[control_plane]\nurl = \"wss://cp.example/agent/v1\"\n\
             [docker]\nhost = \"unix:///srv/docker.sock\"\n\
             [apps]\ninstance = \"prod\"\nlock_dir = \"/srv/locks\"\n",
        )
        .unwrap();
        let set = |config, state_dir, instance: Option<&str>| TargetArgs {
            set: AgentSetArgs {
                config,
                state_dir,
                instance: instance.map(str::to_owned),
            },
            ..TargetArgs::default()
        };
        let args = set(Some(file.clone()), None, None);
        let t = args.resolve().unwrap();
        assert_eq!(t.apps.instance, "prod");
        assert_eq!(t.apps.state_dir, PathBuf::from("/srv/odac"));
        assert_eq!(t.apps.state_dir, PathBuf::from("/srv/odac"));
        assert_eq!(t.apps.lock_dir, PathBuf::from("/srv/locks"));
        assert_eq!(t.docker_host.as_deref(), Some("unix:///srv/docker.sock"));
        let args = set(Some(file), Some("/tmp/x".into()), Some("other"));
        let t = args.resolve().unwrap();
        assert_eq!(
            (t.apps.instance.as_str(), t.apps.state_dir.as_path()),
            ("other", std::path::Path::new("/tmp/x"))
        );
        let bad = set(None, None, Some("Bad Name!"));
        assert!(bad.resolve().unwrap_err().0.contains("--instance"));
        let t = TargetArgs::default().resolve().unwrap();
        assert_eq!(t.apps.instance, "odac");
        assert_eq!(t.apps.state_dir, PathBuf::from("/var/lib/odac-agent"));
    }
}
