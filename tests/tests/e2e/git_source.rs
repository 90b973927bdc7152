//! Apps from a git URL end to end (through the real binaries): a local
//! bare repository reached by a `file://` URL, whose Dockerfile starts `FROM odac/busybox:test`,
//! becomes an app through `odac app create -n NAME -u URL --branch main`; the agent clones,
//! builds and runs it, and `odac app list --json` shows the commit it runs. A second commit plus
//! `odac app restart NAME` runs the new commit in a new container. The agent's containers and
//! the images it built carry the scenario's run label and are removed at the end, also when an
//! assertion fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use odac_agent::engine::DockerEngine;
use odac_agent::engine::test_image::{BUSYBOX_TEST_IMAGE, ensure_busybox_image};
use odac_e2e::docker::{RUN_LABEL, inspect};
use odac_e2e::figures::{figure, secs};
use odac_e2e::require_docker;
use odac_e2e::stack::{Stack, instance_name};
use serde_json::Value;

const SCENARIO: &str = "git_source";
/// Clone + classic build + start on a 2-core debug machine.
const BUILD_WAIT: Duration = Duration::from_secs(180);

/// Runs git in `dir` with a fixed identity; panics with git's stderr on failure.
fn git(dir: &Path, args: &[&str]) -> String {
    odac_e2e::git_repo::git(dir, args).expect("git")
}

/// A bare repository `origin.git` and a working clone to commit from.
struct Repo {
    origin: PathBuf,
    work: PathBuf,
}

impl Repo {
    fn new(root: &Path) -> Repo {
        let origin = root.join("origin.git");
        let work = root.join("work");
        std::fs::create_dir_all(&origin).unwrap();
        std::fs::create_dir_all(&work).unwrap();
        git(&origin, &["init", "-q", "--bare"]);
        git(&work, &["init", "-q"]);
        git(&work, &["checkout", "-q", "-b", "main"]);
        Repo { origin, work }
    }

    fn url(&self) -> String {
        format!("file://{}", self.origin.display())
    }

    /// Writes `files`, commits on main, pushes; the commit id.
    fn commit(&self, files: &[(&str, &str)], message: &str) -> String {
        for (name, text) in files {
            std::fs::write(self.work.join(name), text).unwrap();
        }
        git(&self.work, &["add", "-A"]);
        git(&self.work, &["commit", "-q", "-m", message]);
        let origin = self.origin.to_string_lossy().into_owned();
        git(&self.work, &["push", "-q", &origin, "main:main"]);
        git(&self.work, &["rev-parse", "HEAD"])
    }
}

/// Removes the images carrying `label` when dropped (after the stack removed the containers).
struct ImageCleanup(String);

impl ImageCleanup {
    fn images(&self) -> Vec<String> {
        let out = Command::new("docker")
            .args(["image", "ls", "-q", "--no-trunc", "--filter"])
            .arg(format!("label={}", self.0))
            .stdin(Stdio::null())
            .output()
            .expect("docker image ls");
        let mut ids: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        ids.dedup();
        ids
    }
}

impl Drop for ImageCleanup {
    fn drop(&mut self) {
        let ids = self.images();
        if !ids.is_empty() {
            let _ = Command::new("docker")
                .args(["image", "rm", "-f"])
                .args(&ids)
                .stdin(Stdio::null())
                .output();
        }
    }
}

fn ensure_base_image() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let engine = DockerEngine::connect(None)
            .await
            .expect("connect to docker");
        ensure_busybox_image(&engine, BUSYBOX_TEST_IMAGE)
            .await
            .expect("import the busybox test image");
    });
}

fn dockerfile() -> String {
    format!(
        "FROM {BUSYBOX_TEST_IMAGE}\nCOPY version /version\n\
         CMD [\"sh\", \"-c\", \"cat /version; trap 'exit 0' TERM INT; sleep 999999999 & wait\"]\n"
    )
}

/// The app's entry in `odac app list --json`.
fn listed(stack: &Stack, name: &str) -> Value {
    let list = stack
        .sim
        .odac_ok(&["app", "list", "--json"])
        .unwrap()
        .json()
        .unwrap();
    list.as_array()
        .and_then(|a| a.iter().find(|x| x["name"] == name))
        .cloned()
        .expect("the app in odac app list --json")
}

fn container_logs(id: &str) -> String {
    let out = Command::new("docker")
        .args(["logs", id])
        .stdin(Stdio::null())
        .output()
        .expect("docker logs");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Waits until the app runs `commit`; returns its container id.
fn wait_commit(stack: &Stack, app: &str, commit: &str) -> String {
    let view = stack
        .wait_app(app, BUILD_WAIT, &format!("running commit {commit}"), |a| {
            a.state == "running"
                && a.status.as_ref().is_some_and(|s| {
                    s.commit.as_deref() == Some(commit) && s.container_id.is_some()
                })
        })
        .unwrap();
    view.status.unwrap().container_id.unwrap()
}

#[test]
fn git_app_runs_its_commit_and_a_restart_runs_the_next_commit() {
    require_docker!(SCENARIO);
    ensure_base_image();
    let t0 = Instant::now();
    // declared before the stack: dropped after it, once the containers are gone
    let instance = instance_name(SCENARIO);
    let images = ImageCleanup(format!("{RUN_LABEL}={instance}"));
    let stack = Stack::builder(SCENARIO)
        .instance(&instance)
        .start()
        .unwrap();
    stack.wait_connected(Duration::from_secs(30)).unwrap();
    let repo = Repo::new(&stack.dir().join("repo"));
    let c1 = repo.commit(
        &[("Dockerfile", &dockerfile()), ("version", "version one\n")],
        "one",
    );
    let app = format!("gs{}", std::process::id());

    // 1. create from the URL: cloned, built, running at the first commit
    let t = Instant::now();
    let url = repo.url();
    let out = stack
        .sim
        .odac_ok(&["app", "create", "-n", &app, "-u", &url, "--branch", "main"])
        .unwrap();
    assert!(
        out.stdout.contains(&format!("created app {app}")),
        "{}",
        out.stdout
    );
    let first = wait_commit(&stack, &app, &c1);
    figure(SCENARIO, "create_to_running", secs(t.elapsed()));
    let entry = listed(&stack, &app);
    assert_eq!(
        entry["status"]["commit"],
        Value::from(c1.as_str()),
        "{entry}"
    );
    assert_eq!(entry["spec"]["source"]["url"], Value::from(url.as_str()));
    assert_eq!(entry["spec"]["source"]["branch"], "main");
    let tag1 = format!("odac/{app}:{}", &c1[..12]);
    assert_eq!(
        entry["status"]["image"],
        Value::from(tag1.as_str()),
        "{entry}"
    );
    let table = stack.sim.odac_ok(&["app", "list"]).unwrap().stdout;
    println!("{table}");
    let row = table
        .lines()
        .find(|l| l.starts_with(&format!("{app} ")))
        .expect("a row for the app");
    assert!(row.contains(&c1[..12]), "commit missing in {row:?}");
    let ins = inspect(&first).unwrap();
    assert_eq!(ins["Config"]["Image"], Value::from(tag1.as_str()));
    assert_eq!(ins["State"]["Running"], Value::Bool(true));
    assert!(
        container_logs(&first).contains("version one"),
        "{}",
        container_logs(&first)
    );
    assert!(
        !images.images().is_empty(),
        "the built image carries {RUN_LABEL}"
    );

    // 2. a second commit is not picked up on its own; a restart builds and runs it
    let c2 = repo.commit(&[("version", "version two\n")], "two");
    assert_ne!(c1, c2);
    let t = Instant::now();
    stack.sim.odac_ok(&["app", "restart", &app]).unwrap();
    let second = wait_commit(&stack, &app, &c2);
    figure(SCENARIO, "restart_to_new_commit", secs(t.elapsed()));
    assert_ne!(first, second, "a new container for the new commit");
    let entry = listed(&stack, &app);
    assert_eq!(
        entry["status"]["commit"],
        Value::from(c2.as_str()),
        "{entry}"
    );
    let tag2 = format!("odac/{app}:{}", &c2[..12]);
    assert_eq!(
        inspect(&second).unwrap()["Config"]["Image"],
        Value::from(tag2.as_str())
    );
    let logs = odac_e2e::poll::poll("version two in the logs", Duration::from_secs(10), || {
        let l = container_logs(&second);
        if l.contains("version two") {
            Ok(l)
        } else {
            Err(l)
        }
    });
    assert!(logs.is_ok(), "{logs:?}");
    let containers = stack.containers().unwrap();
    assert_eq!(containers.len(), 1, "{containers:?}");
    assert_eq!(containers[0].id, second);
    figure(SCENARIO, "total", secs(t0.elapsed()));
}
