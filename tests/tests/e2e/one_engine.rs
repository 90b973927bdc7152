//! One engine, several owners, against the real Docker engine:
//!
//! 1. a second agent with the same instance on the same engine (its own state dir) refuses,
//!    naming the first, exits 78, and the first's containers keep their ids for 60 s;
//! 2. two agents with different instances both converge (each runs an app named `web`) and
//!    neither touches the other's containers;
//! 3. `odac-sim demo | tee` runs beside an agent for 60 s and is stopped with SIGINT to its
//!    process group (which kills `tee` too): the agent's container keeps its id and the demo's
//!    container is gone;
//! 4. two stacks of one scenario started by one process (as `cargo test` runs a binary's tests,
//!    as threads of one process) get their own instance, temp dir, state dir and instance
//!    lock, and both agents converge;
//! 5. `odac-agent apply` against the running agent's instance (by `--instance` and by
//!    `--config`) is refused with exit 1 and changes nothing.

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use odac_agent::instance_lock::{DEFAULT_LOCK_DIR, InstanceLock, engine_endpoint};
use odac_e2e::agent::Agent;
use odac_e2e::bins::{AGENT, SIM, bin};
use odac_e2e::docker::containers;
use odac_e2e::ports::free_port;
use odac_e2e::process::Process;
use odac_e2e::require_docker;
use odac_e2e::stack::Stack;

/// The ids of the stack's containers by app, once each app in `apps` runs.
fn running(stack: &Stack, apps: &[&str]) -> BTreeMap<String, String> {
    for app in apps {
        stack.sim.create_app(&Stack::app_body(app)).unwrap();
    }
    for app in apps {
        stack
            .wait_app(app, Duration::from_secs(60), "running", |a| {
                a.state == "running"
            })
            .unwrap();
    }
    ids(stack)
}

fn ids(stack: &Stack) -> BTreeMap<String, String> {
    stack
        .containers()
        .unwrap()
        .into_iter()
        .map(|c| (c.app, format!("{} {}", c.id, c.state)))
        .collect()
}

/// Checks every 2 s for `period` that the stack's containers are still `expect`.
fn unchanged_for(stack: &Stack, expect: &BTreeMap<String, String>, period: Duration) {
    let start = Instant::now();
    while start.elapsed() < period {
        let now = ids(stack);
        assert_eq!(&now, expect, "after {:?}", start.elapsed());
        std::thread::sleep(Duration::from_secs(2));
    }
}

#[test]
fn a_second_agent_on_the_same_instance_refuses_and_touches_nothing() {
    const SCENARIO: &str = "same-instance";
    require_docker!(SCENARIO);
    let stack = Stack::builder(SCENARIO).start().unwrap();
    stack.wait_connected(Duration::from_secs(30)).unwrap();
    let before = running(&stack, &["web", "db"]);
    assert_eq!(before.len(), 2, "{before:?}");
    let first_pid = stack.agent().unwrap().process().unwrap().pid();
    let first_id = std::fs::read_to_string(stack.agent().unwrap().state_dir().join("agent_id"))
        .unwrap()
        .trim()
        .to_owned();

    // another state dir, same instance, same engine
    let other = tempfile::tempdir().unwrap();
    let mut second = Agent::start(other.path(), stack.options.clone()).unwrap();
    let status = second
        .process_mut()
        .unwrap()
        .wait_exit(Duration::from_secs(30))
        .unwrap();
    assert_eq!(
        status.code(),
        Some(78),
        "{:?}",
        second.process().unwrap().tail(20)
    );
    let lines = second.process().unwrap().lines();
    let refusal = lines
        .iter()
        .find(|l| l.contains("is already managed by"))
        .unwrap_or_else(|| panic!("no refusal line: {lines:?}"));
    assert!(
        refusal.contains(&format!("pid {first_pid}")) && refusal.contains(&first_id),
        "names the first agent: {refusal}"
    );
    unchanged_for(&stack, &before, Duration::from_secs(60));
    let first = stack.agent().unwrap().process().unwrap();
    assert_eq!(first.count_lines("removing the container"), 0);
}

#[test]
fn two_stacks_of_one_scenario_in_one_process_share_no_instance_dir_or_lock() {
    const SCENARIO: &str = "one-scenario-twice";
    require_docker!(SCENARIO);
    let a = Stack::builder(SCENARIO).start().unwrap();
    let b = Stack::builder(SCENARIO).start().unwrap();
    assert_ne!(a.instance, b.instance);
    for s in [&a, &b] {
        assert!(
            s.instance.starts_with("e2e-one-scenario-twice-"),
            "recognisable in docker ps: {}",
            s.instance
        );
    }
    assert_ne!(a.dir(), b.dir());
    assert_ne!(
        a.agent().unwrap().state_dir(),
        b.agent().unwrap().state_dir()
    );
    a.wait_connected(Duration::from_secs(30)).unwrap();
    b.wait_connected(Duration::from_secs(30)).unwrap();
    // each agent holds the lock of its own instance (the second did not exit 78 on the first's)
    let engine = engine_endpoint(None);
    for s in [&a, &b] {
        let pid = s.agent().unwrap().process().unwrap().pid();
        let holder = InstanceLock::holder(Path::new(DEFAULT_LOCK_DIR), &engine, &s.instance)
            .unwrap_or_else(|| panic!("no holder of {}'s lock", s.instance));
        assert!(holder.contains(&format!("pid {pid}")), "{holder}");
    }
    let apps = [running(&a, &["web"]), running(&b, &["web"])];
    assert_ne!(apps[0], apps[1], "one container each");
}

#[test]
fn two_agents_with_their_own_instances_both_converge_side_by_side() {
    const SCENARIO: &str = "two-instances";
    require_docker!(SCENARIO);
    let a = Stack::builder("two-instances-a").start().unwrap();
    let b = Stack::builder("two-instances-b").start().unwrap();
    a.wait_connected(Duration::from_secs(30)).unwrap();
    b.wait_connected(Duration::from_secs(30)).unwrap();
    let a_ids = running(&a, &["web", "only-a"]);
    let b_ids = running(&b, &["web"]);
    a.wait_converged(2, Duration::from_secs(30)).unwrap();
    b.wait_converged(1, Duration::from_secs(30)).unwrap();
    let a_web = a_ids["web"].split(' ').next().unwrap().to_owned();
    let b_web = b_ids["web"].split(' ').next().unwrap().to_owned();
    assert_ne!(a_web, b_web);
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(20) {
        assert_eq!(ids(&a), a_ids);
        assert_eq!(ids(&b), b_ids);
        std::thread::sleep(Duration::from_secs(2));
    }
    for s in [&a, &b] {
        let p = s.agent().unwrap().process().unwrap();
        assert_eq!(p.count_lines("removing the container"), 0);
        assert_eq!(p.count_lines("conflict: "), 0);
    }
}

/// Ends every process of a process group on drop.
struct Group(u32);

impl Group {
    fn signal(&self, sig: &str) -> bool {
        Command::new("kill")
            .args([sig, "--", &format!("-{}", self.0)])
            .status()
            .is_ok_and(|s| s.success())
    }

    fn alive(&self) -> bool {
        self.signal("-0")
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.signal("-KILL");
    }
}

/// Removes the demo's container if the test fails before the demo did.
struct Leftovers(Vec<String>);

impl Drop for Leftovers {
    fn drop(&mut self) {
        for id in &self.0 {
            let _ = Command::new("docker").args(["rm", "-f", id]).output();
        }
    }
}

fn demo_containers() -> Vec<String> {
    containers("odac.instance=odac-demo")
        .unwrap()
        .into_iter()
        .filter(|c| c.app == odac_simulator::demo::DEMO_APP)
        .map(|c| c.id)
        .collect()
}

#[test]
fn the_demo_beside_an_agent_owns_its_own_set_and_ctrl_c_through_tee_removes_only_it() {
    const SCENARIO: &str = "demo-beside";
    require_docker!(SCENARIO);
    assert!(
        demo_containers().is_empty(),
        "another odac-sim demo runs on this engine"
    );
    let stack = Stack::builder(SCENARIO).start().unwrap();
    stack.wait_connected(Duration::from_secs(30)).unwrap();
    let before = running(&stack, &["web"]);

    let dir = tempfile::tempdir().unwrap();
    let port = free_port().unwrap();
    let tee_log = dir.path().join("demo.tee.log");
    let script = format!(
        "{} demo --listen 127.0.0.1:{port} --state {} | tee {}",
        bin(SIM).unwrap().display(),
        dir.path().join("state").display(),
        tee_log.display()
    );
    // as in a terminal: SIGINT kills `tee` (a test runner may have it ignored, and an ignored
    // signal stays ignored across exec)
    let mut cmd = Command::new("env");
    cmd.args(["--default-signal=INT", "sh", "-c", &script])
        .env("ODAC_AGENT_BIN", bin(AGENT).unwrap())
        .process_group(0);
    let mut demo = Process::spawn("demo", &mut cmd, &dir.path().join("logs")).unwrap();
    let group = Group(demo.pid());
    demo.wait_for_line("Ctrl-C stops the demo", Duration::from_secs(120))
        .unwrap();
    let demo_ids = demo_containers();
    let _left = Leftovers(demo_ids.clone());
    assert_eq!(demo_ids.len(), 1, "the demo's sample app runs");
    let state = dir.path().join("state/agent/state");
    assert!(state.join("desired.json").is_file(), "its own state dir");

    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(60) {
        assert_eq!(ids(&stack), before, "after {:?}", start.elapsed());
        assert_eq!(demo_containers(), demo_ids);
        std::thread::sleep(Duration::from_secs(2));
    }

    // Ctrl-C in a terminal: SIGINT to the whole foreground group. Its worst order: `tee` is
    // gone before the demo prints "stopping…" to the pipe (which used to panic the demo and
    // leave its container behind), so signal `tee` first, then the group.
    let tee = Command::new("pgrep")
        .args(["-g", &demo.pid().to_string(), "-x", "tee"])
        .output()
        .unwrap();
    let tee = String::from_utf8_lossy(&tee.stdout).trim().to_owned();
    assert!(!tee.is_empty(), "tee runs in the demo's group");
    assert!(
        Command::new("kill")
            .args(["-INT", &tee])
            .status()
            .unwrap()
            .success()
    );
    let t = Instant::now();
    while Path::new(&format!("/proc/{tee}")).exists() && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !Path::new(&format!("/proc/{tee}")).exists(),
        "tee did not die on SIGINT"
    );
    assert!(group.signal("-INT"));
    let gone = Instant::now();
    // reap the shell: a zombie still counts as a member of its group
    while (demo.is_running() || group.alive()) && gone.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(!group.alive(), "the demo did not stop: {:?}", demo.tail(20));
    assert!(
        demo_containers().is_empty(),
        "the demo's container is gone: {:?}",
        demo.tail(20)
    );
    assert_eq!(ids(&stack), before, "the agent's container is untouched");
    let agent = stack.agent().unwrap().process().unwrap();
    assert_eq!(agent.count_lines("removing the container"), 0);
}

fn apply(args: &[&str], file: &Path) -> std::process::Output {
    Command::new(bin(AGENT).unwrap())
        .arg("apply")
        .arg("-f")
        .arg(file)
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn apply_against_a_running_agents_instance_is_refused_and_changes_nothing() {
    const SCENARIO: &str = "apply-refused";
    require_docker!(SCENARIO);
    let stack = Stack::builder(SCENARIO).start().unwrap();
    stack.wait_connected(Duration::from_secs(30)).unwrap();
    let before = running(&stack, &["web"]);
    let agent = stack.agent().unwrap();
    let desired_before = std::fs::read(agent.state_dir().join("desired.json")).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("desired.json");
    std::fs::write(
        &file,
        format!(
            r#"{{"generation": 99, "apps": [{{"name": "other", "image": "{}"}}]}}"#,
            odac_e2e::image::SLEEPER_IMAGE
        ),
    )
    .unwrap();
    let own_state = dir.path().join("state");
    let by_instance = apply(
        &[
            "--instance",
            &stack.instance,
            "--state-dir",
            own_state.to_str().unwrap(),
        ],
        &file,
    );
    let by_config = apply(&["--config", agent.config_path().to_str().unwrap()], &file);
    for out in [&by_instance, &by_config] {
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(
            err.contains("refusing to apply") && err.contains("is already managed by"),
            "{err}"
        );
        assert!(out.stdout.is_empty());
    }
    assert!(!own_state.exists(), "apply wrote nothing");
    assert_eq!(
        std::fs::read(agent.state_dir().join("desired.json")).unwrap(),
        desired_before
    );
    unchanged_for(&stack, &before, Duration::from_secs(6));
}
