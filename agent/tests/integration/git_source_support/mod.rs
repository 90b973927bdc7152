//! Shared by the git-source tests: a local bare repository reached by a `file://` URL, with a
//! working clone to commit from, and helpers to drive an app manager until a status or a
//! number of events shows up.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use odac_agent::appmgr::{AppEvent, AppManager};
use odac_protocol::{AppSpec, AppStatus, DesiredState, GitSource};
use tokio::sync::broadcast;

/// Run git in `dir` with a fixed identity; panics with git's stderr on failure.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=odac test",
            "-c",
            "user.email=test@odac.invalid",
            "-c",
            "commit.gpgsign=false",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A bare repository `origin.git` and a working clone `work` under a temp dir.
pub struct Repo {
    pub origin: PathBuf,
    pub work: PathBuf,
}

impl Repo {
    pub fn new(root: &Path) -> Self {
        let origin = root.join("origin.git");
        let work = root.join("work");
        std::fs::create_dir_all(&origin).unwrap();
        std::fs::create_dir_all(&work).unwrap();
        git(&origin, &["init", "-q", "--bare"]);
        git(&work, &["init", "-q"]);
        git(&work, &["checkout", "-q", "-b", "main"]);
        Self { origin, work }
    }

    /// The `file://` URL of the bare repository.
    pub fn url(&self) -> String {
        format!("file://{}", self.origin.display())
    }

    /// Write `files`, commit on `branch` and push it; the commit id.
    pub fn commit(&self, branch: &str, files: &[(&str, &str)], message: &str) -> String {
        let current = git(&self.work, &["symbolic-ref", "--short", "HEAD"]);
        if current != branch {
            let exists = Command::new("git")
                .arg("-C")
                .arg(&self.work)
                .args(["rev-parse", "--verify", "--quiet", branch])
                .status()
                .unwrap()
                .success();
            if exists {
                git(&self.work, &["checkout", "-q", branch]);
            } else {
                git(&self.work, &["checkout", "-q", "-b", branch]);
            }
        }
        for (path, text) in files {
            let path = self.work.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        git(&self.work, &["add", "-A"]);
        git(
            &self.work,
            &["commit", "-q", "--allow-empty", "-m", message],
        );
        let origin = self.origin.to_string_lossy().into_owned();
        git(&self.work, &["push", "-q", &origin, branch]);
        git(&self.work, &["rev-parse", "HEAD"])
    }
}

/// An app built from `url` (branch `branch` when given).
pub fn git_app(name: &str, url: &str, branch: Option<&str>) -> AppSpec {
    AppSpec {
        name: name.into(),
        source: Some(GitSource {
            url: url.into(),
            branch: branch.map(str::to_owned),
            ..GitSource::default()
        }),
        ..AppSpec::default()
    }
}

pub fn desired(generation: u64, apps: Vec<AppSpec>) -> DesiredState {
    DesiredState { generation, apps }
}

/// Reconcile until `pred` holds for app `name` (bounded); the last status.
pub async fn until(
    manager: &AppManager,
    name: &str,
    within: Duration,
    pred: impl Fn(&AppStatus) -> bool,
) -> AppStatus {
    let deadline = Instant::now() + within;
    loop {
        let statuses = manager.reconcile_once().await;
        let status = statuses.iter().find(|s| s.name == name).cloned();
        if let Some(s) = &status
            && pred(s)
        {
            return s.clone();
        }
        assert!(
            Instant::now() < deadline,
            "app {name} did not reach the expected status within {within:?}; last: {status:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every event received so far.
pub fn drain(rx: &mut broadcast::Receiver<AppEvent>, into: &mut Vec<AppEvent>) {
    while let Ok(e) = rx.try_recv() {
        into.push(e);
    }
}

/// How many events of `app` contain `needle`.
pub fn count(events: &[AppEvent], app: &str, needle: &str) -> usize {
    events
        .iter()
        .filter(|e| e.app.as_deref() == Some(app) && e.message.contains(needle))
        .count()
}
