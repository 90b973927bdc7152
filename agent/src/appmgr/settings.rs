//! [`AppManagerConfig`]: the app manager's part of the agent configuration (the `[apps]`
//! table of agent.toml, embedded by the agent's config module). Every field has a default, so
//! an empty table is a working configuration.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use odac_host::gpu::ResolveOptions;

/// The default state directory (agent id, desired state, statuses), for the agent and for
/// every local command.
pub const DEFAULT_STATE_DIR: &str = "/var/lib/odac-agent";

/// Where the app manager keeps its state, what the local policy allows, how GPUs are chosen
/// and how crash loops are paced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AppManagerConfig {
    /// Directory of `desired.json` and `statuses.json` (created if missing): the agent's one
    /// `state_dir` (the configuration sets it from the top-level key; `[apps] state_dir` is
    /// only read as an old name of that key).
    pub state_dir: PathBuf,
    /// Name of this agent's set of containers: the prefix of container and volume names
    /// (`<instance>_<app>`, see [`container`](super::container)) and the value of the
    /// `odac.instance` label that marks them.
    pub instance: String,
    /// Directory of the per-(engine, instance) lock files that keep a second agent off the
    /// same set ([`instance_lock`](crate::instance_lock)); shared by every state dir.
    pub lock_dir: PathBuf,
    /// The agent id recorded on every container and volume as `odac.owner` (not a
    /// configuration key: the agent sets it from its identity; empty: the manager reads or
    /// creates `<state_dir>/agent_id` when it opens).
    #[serde(skip)]
    pub owner: String,
    /// Local policy: what app specs may ask of this host.
    pub policy: PolicyConfig,
    /// GPU choice.
    pub gpu: ResolveOptions,
    /// Crash-loop pacing.
    pub crash_loop: CrashLoopConfig,
    /// How often the loop looks at the containers when nothing else wakes it, in ms.
    pub poll_interval_ms: u64,
    /// While the engine's event stream is up, events wake the loop and a full pass still
    /// runs this often, in seconds (the backstop for anything an event did not say); while
    /// it is down, the loop polls every `poll_interval_ms`.
    pub backstop_secs: u64,
    /// How long a container may take to stop before it is killed, in seconds.
    pub stop_timeout_secs: u64,
    /// Extra labels put on every container and volume the manager creates.
    pub extra_labels: BTreeMap<String, String>,
    /// Apps built from git sources.
    pub build: BuildConfig,
    /// Containers run with `no-new-privileges`: setuid binaries and file capabilities
    /// cannot raise a process's privileges (images that need `sudo` inside break).
    pub no_new_privileges: bool,
    /// Most processes and threads per container (a fork bomb stays in its container);
    /// 0 leaves the engine's default (unlimited).
    pub pids_limit: u32,
    /// Largest log file of a container (json-file driver), in bytes; an app spec may ask for
    /// less, never more.
    pub log_max_size_bytes: u64,
    /// Log files kept per container; an app spec may ask for fewer, never more.
    pub log_max_files: u32,
    /// How long an engine refusal of a device set is remembered
    /// ([`refusals`](super::gpu::refusals)), in seconds: until then, or until the inventory
    /// changes, creates asking for the same devices go straight to the CPU (optional) or fail
    /// (required). 0: never remembered.
    pub refusal_memory_secs: u64,
    /// The Docker client's `config.json` whose `auths` (`docker login`) are used for pulls
    /// when the control plane sent no credentials for a registry; a missing file is fine.
    pub docker_config: PathBuf,
    /// Free space, in MB, a pull must leave in the engine's data root beyond the image's
    /// compressed size; a pull that would not is refused (`image_pull_failed`).
    pub pull_disk_reserve_mb: u64,
    /// Seconds a pull may go without progress (no new byte or layer from the engine) before
    /// it is cancelled and the app fails with `image_pull_failed` (a stalled registry).
    pub pull_stall_secs: u64,
    /// Seconds an image the agent pulled or built stays after no app of its instance uses it
    /// (nor needs it to roll back to) before it is removed ([`image_gc`](super::gc::image_gc)).
    pub image_gc_delay_secs: u64,
    /// Free space, in MB, below which the engine's data root has the agent remove its unused
    /// images at once, oldest unused first (0: no low-disk clean-up).
    pub image_gc_min_free_mb: u64,
}

impl Default for AppManagerConfig {
    fn default() -> Self {
        Self {
            state_dir: PathBuf::from(DEFAULT_STATE_DIR),
            instance: "odac".into(),
            lock_dir: PathBuf::from(crate::instance_lock::DEFAULT_LOCK_DIR),
            owner: String::new(),
            policy: PolicyConfig::default(),
            gpu: ResolveOptions::default(),
            crash_loop: CrashLoopConfig::default(),
            poll_interval_ms: 2_000,
            backstop_secs: 60,
            stop_timeout_secs: 10,
            extra_labels: BTreeMap::new(),
            build: BuildConfig::default(),
            no_new_privileges: true,
            pids_limit: 4096,
            log_max_size_bytes: 10 * 1024 * 1024,
            log_max_files: 3,
            refusal_memory_secs: 600,
            docker_config: PathBuf::from("/root/.docker/config.json"),
            pull_disk_reserve_mb: 1024,
            pull_stall_secs: 120,
            image_gc_delay_secs: 600,
            image_gc_min_free_mb: 2048,
        }
    }
}

impl AppManagerConfig {
    /// The security options every container gets.
    pub fn security_opt(&self) -> Vec<String> {
        if self.no_new_privileges {
            vec!["no-new-privileges".into()]
        } else {
            Vec::new()
        }
    }

    /// The pids limit every container gets.
    pub fn pids_limit(&self) -> Option<i64> {
        (self.pids_limit > 0).then_some(i64::from(self.pids_limit))
    }

    /// How long an engine refusal is remembered (zero: not at all).
    pub fn refusal_memory(&self) -> Duration {
        Duration::from_secs(self.refusal_memory_secs)
    }

    /// The poll interval.
    pub fn poll_interval(&self) -> Duration {
        Duration::from_millis(self.poll_interval_ms.max(10))
    }

    /// The backstop interval of full passes while the event stream is up.
    pub fn backstop(&self) -> Duration {
        Duration::from_secs(self.backstop_secs.max(1))
    }
}

/// The host's local policy. The control plane cannot override it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PolicyConfig {
    /// Host directories under which bind mounts are allowed (whole path components:
    /// `/srv/data` allows `/srv/data/x`, not `/srv/database`). Empty: no bind mounts.
    pub allowed_bind_prefixes: Vec<PathBuf>,
    /// Host device paths under which an app's `devices` may be mapped (whole path
    /// components: `/dev/bus/usb` allows `/dev/bus/usb/001/002`). Empty: no extra devices. GPU
    /// devices are never mapped from here, only from the GPU intent.
    pub allowed_device_prefixes: Vec<PathBuf>,
}

/// Git sources: how long fetching and building may take, how many images of an app are
/// kept, and the largest build context. A failed build is retried on the crash-loop backoff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BuildConfig {
    /// The git program (a name looked up in `PATH`, or a path).
    pub git: PathBuf,
    /// Time allowed to fetch a repository and pack its build context, in seconds (5 min).
    pub git_timeout_secs: u64,
    /// Time allowed for one image build, in seconds (1 h).
    pub build_timeout_secs: u64,
    /// Images of an app kept (the newest ones, the running one included); older ones are
    /// removed after each build. At least 1.
    pub keep_images: usize,
    /// Largest build context (the repository's tree at the commit), in bytes (1 GiB).
    pub max_context_bytes: u64,
    /// Builds running at the same time on this host.
    pub max_parallel: usize,
}

impl Default for BuildConfig {
    fn default() -> Self {
        Self {
            git: PathBuf::from("git"),
            git_timeout_secs: 300,
            build_timeout_secs: 3600,
            keep_images: 2,
            max_context_bytes: 1 << 30,
            max_parallel: 2,
        }
    }
}

impl BuildConfig {
    /// The fetch bound.
    pub fn git_timeout(&self) -> Duration {
        Duration::from_secs(self.git_timeout_secs.max(1))
    }

    /// The build bound.
    pub fn build_timeout(&self) -> Duration {
        Duration::from_secs(self.build_timeout_secs.max(1))
    }
}

/// Crash-loop backoff: the first restart after `initial_backoff_ms`, doubling up to
/// `max_backoff_secs`; a run of `healthy_reset_secs` resets the backoff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CrashLoopConfig {
    /// First delay, in ms (1 s).
    pub initial_backoff_ms: u64,
    /// Largest delay, in seconds (5 min).
    pub max_backoff_secs: u64,
    /// Healthy run that resets the backoff, in seconds (10 min).
    pub healthy_reset_secs: u64,
}

impl Default for CrashLoopConfig {
    fn default() -> Self {
        Self {
            initial_backoff_ms: 1_000,
            max_backoff_secs: 300,
            healthy_reset_secs: 600,
        }
    }
}

impl CrashLoopConfig {
    /// The first delay.
    pub fn initial(&self) -> Duration {
        Duration::from_millis(self.initial_backoff_ms.max(1))
    }

    /// The cap.
    pub fn max(&self) -> Duration {
        Duration::from_secs(self.max_backoff_secs).max(self.initial())
    }

    /// The healthy run that resets the backoff.
    pub fn healthy_reset(&self) -> Duration {
        Duration::from_secs(self.healthy_reset_secs)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use odac_protocol::Vendor;

    #[test]
    fn defaults_and_partial_tables() {
        let c: AppManagerConfig = serde_json::from_str("{}").unwrap();
        assert_eq!(c, AppManagerConfig::default());
        assert!(c.policy.allowed_bind_prefixes.is_empty());
        assert_eq!(
            c.gpu.vendor_order,
            vec![Vendor::Nvidia, Vendor::Amd, Vendor::Intel]
        );
        assert_eq!(c.crash_loop.initial(), Duration::from_secs(1));
        assert_eq!(c.crash_loop.max(), Duration::from_secs(300));
        let c: AppManagerConfig = serde_json::from_str(
            r#"{"state_dir":"/tmp/x","gpu":{"vendor_order":["intel"]},"policy":{"allowed_bind_prefixes":["/srv"]}}"#,
        )
        .unwrap();
        assert_eq!(c.gpu.vendor_order, vec![Vendor::Intel]);
        assert!(c.gpu.enabled);
        assert_eq!(c.policy.allowed_bind_prefixes, vec![PathBuf::from("/srv")]);
        assert!(serde_json::from_str::<AppManagerConfig>(r#"{"nope":1}"#).is_err());
    }
}
