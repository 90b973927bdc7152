//! One real-engine test's own agent set: the engine with the busybox test image, an
//! `apps.instance` no other test uses, a temp dir for the state and instance locks, the app
//! manager settings those tests share (short stop timeout, fast crash-loop backoff, every
//! container labelled `odac.test=1`), and the removal of every container of the instance.

use std::sync::Arc;

use odac_agent::appmgr::{AppManager, AppManagerConfig, CrashLoopConfig};
use odac_host::engine::{ContainerEngine, DockerEngine};

use super::{engine_with_test_image, unique_suffix};

/// One test's own instance on the real engine.
pub struct InstanceRun {
    pub engine: Arc<DockerEngine>,
    pub instance: String,
    pub tmp: tempfile::TempDir,
}

impl InstanceRun {
    /// The engine with the test image and a fresh instance named `<prefix><suffix>`; `None`
    /// when the developer opted out of a missing engine.
    pub async fn new(test: &str, prefix: &str) -> Option<InstanceRun> {
        let engine = engine_with_test_image(test).await?;
        Some(InstanceRun {
            engine: Arc::new(engine),
            instance: format!("{prefix}{}", unique_suffix()),
            tmp: tempfile::tempdir().expect("a temp dir"),
        })
    }

    /// The app manager settings of this run; a test changes what it needs with `..`.
    pub fn config(&self) -> AppManagerConfig {
        AppManagerConfig {
            state_dir: self.tmp.path().join("state"),
            instance: self.instance.clone(),
            lock_dir: self.tmp.path().join("locks"),
            stop_timeout_secs: 1,
            crash_loop: CrashLoopConfig {
                initial_backoff_ms: 200,
                ..CrashLoopConfig::default()
            },
            extra_labels: [("odac.test".to_owned(), "1".to_owned())].into(),
            ..AppManagerConfig::default()
        }
    }

    /// An app manager with [`config`](Self::config) on the GPU-less fixture host.
    pub fn open(&self) -> AppManager {
        AppManager::open(
            self.config(),
            self.engine.clone(),
            crate::fixture_hosts::no_gpu(),
        )
        .expect("open the app manager")
    }

    /// Removes every container of this instance.
    pub async fn clean_up(&self) {
        let filter = format!("{}={}", odac_host::names::INSTANCE, self.instance);
        for c in self.engine.list_by_label(&filter).await.unwrap_or_default() {
            let _ = self.engine.remove(&c.id, true).await;
        }
    }
}
