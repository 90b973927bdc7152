//! Apps from a git URL end to end (through the real binaries): a local
//! bare repository reached by a `file://` URL, whose Dockerfile starts `FROM odac/busybox:test`,
//! becomes an app through `odac app create -n NAME -u URL --branch main`; the agent clones,
//! builds and runs it, and `odac app list --json` shows the commit it runs. A second commit plus
//! `odac app restart NAME` runs the new commit in a new container. The agent's containers and
//! the images it built carry the scenario's run label and are removed at the end, also when an
//! assertion fails.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use odac_e2e::docker::{RUN_LABEL, inspect};
use odac_e2e::figures::{figure, secs};
use odac_e2e::git_repo::{ImageCleanup, LocalRepo};
use odac_e2e::require_docker;
use odac_e2e::stack::{Stack, instance_name};
use odac_host::engine::test_image::BUSYBOX_TEST_IMAGE;
use serde_json::Value;

const SCENARIO: &str = "git_source";
/// Clone + classic build + start on a 2-core debug machine.
const BUILD_WAIT: Duration = Duration::from_secs(180);

fn dockerfile() -> String {
    format!(
        "FROM {BUSYBOX_TEST_IMAGE}\nCOPY version /version\n\
         CMD [\"sh\", \"-c\", \"cat /version; trap 'exit 0' TERM INT; sleep 999999999 & wait\"]\n"
    )
}

/// The app's entry in `odac app list --json`.
pub(crate) fn listed(stack: &Stack, name: &str) -> Value {
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
    odac_e2e::image::ensure_busybox_test_image().unwrap();
    let t0 = Instant::now();
    // declared before the stack: dropped after it, once the containers are gone
    let instance = instance_name(SCENARIO);
    let images = ImageCleanup(format!("{RUN_LABEL}={instance}"));
    let stack = Stack::builder(SCENARIO)
        .instance(&instance)
        .start()
        .unwrap();
    stack.wait_connected(Duration::from_secs(30)).unwrap();
    let repo = LocalRepo::new(&stack.dir().join("repo")).unwrap();
    let c1 = repo
        .commit(
            &[("Dockerfile", &dockerfile()), ("version", "version one\n")],
            "one",
        )
        .unwrap();
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
    let c2 = repo.commit(&[("version", "version two\n")], "two").unwrap();
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
