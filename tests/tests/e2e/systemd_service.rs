//! The agent as a systemd service under real systemd: systemd boots as PID 1 in a
//! container on the local engine (`odac_e2e::systemd`), the agent's Debian package is installed
//! in it with `apt-get install ./odac-agent_….deb` (without Recommends: the host's engine stands in
//! for docker.io), and the packaged, sandboxed unit
//! (`deploy/odac-agent.service`, plus a test drop-in that only shortens `WatchdogSec` and
//! `RestartSec`) drives the host's Docker engine through the mounted socket and talks to an
//! `odac-sim serve` on the host's loopback. One scenario, in order:
//! 1. `systemctl start` returns once the agent sent READY=1; the unit is active and the
//!    simulator shows the host connected with an inventory read through the sandbox (CPUs,
//!    memory, kernel, the engine); `journalctl -u odac-agent` has the structured lines;
//! 2. an image app is applied through the service: its container runs on the engine with this
//!    test's instance label; a git-sourced app (a local bare repository, `file://` URL, mounted
//!    read-only into the container) is cloned and built by the sandboxed agent and runs;
//! 3. SIGSTOP of the agent: the watchdog fires, systemd kills and restarts it (new main PID,
//!    NRestarts + 1) and it reconnects;
//! 4. `systemctl stop`: a clean exit (status 0, result success) well within TimeoutStopSec,
//!    and the apps' containers keep running;
//! 5. a bad config: exit 78, unit failed, and not restarted;
//! 6. `systemd-analyze security odac-agent` ≤ 5.0 on the installed unit; the agent's journal
//!    has no "Permission denied", "Operation not permitted" or "Read-only file system".
//!
//! It fails, never skips, when systemd cannot boot (with Docker absent it follows
//! `ODAC_REQUIRE_DOCKER`). Everything it starts carries `odac.e2e.run=<instance>` and is removed
//! at the end, also when an assertion fails.

use std::path::Path;
use std::time::{Duration, Instant};

use odac_e2e::bins::{AGENT, bin};
use odac_e2e::docker::{LabelCleanup, RUN_LABEL, TEST_LABEL, inspect};
use odac_e2e::figures::{figure, secs};
use odac_e2e::git_repo::ImageCleanup;
use odac_e2e::poll::poll;
use odac_e2e::require_docker;
use odac_e2e::stack::Stack;
use odac_e2e::systemd::{SystemdBox, agent_deb, ensure_image};
use odac_host::engine::test_image::BUSYBOX_TEST_IMAGE;

const SCENARIO: &str = "systemd_service";
const UNIT: &str = "odac-agent";
/// The drop-in's watchdog (the packaged unit says 30 s).
const WATCHDOG_SECS: u64 = 5;
/// The packaged unit's TimeoutStopSec, which is also how long systemd waits after the watchdog
/// signal (SIGABRT) before SIGKILL.
const TIMEOUT_STOP: Duration = Duration::from_secs(30);
/// Clone + build + start of the git app on a 2-core debug machine.
const BUILD_WAIT: Duration = Duration::from_secs(180);
/// Where the shared folder is mounted in the container.
const SHARE: &str = "/srv/odac-e2e";

/// Runs git in `dir` with the harness's fixed identity; panics with git's stderr on failure.
fn git(dir: &Path, args: &[&str]) -> String {
    odac_e2e::git_repo::git(dir, args).expect("git")
}

/// A bare repository at `root/origin.git` with one commit whose Dockerfile builds on the
/// busybox test image; the commit id.
fn git_repo(root: &Path) -> String {
    let origin = root.join("origin.git");
    let work = root.join("work");
    std::fs::create_dir_all(&origin).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    git(&origin, &["init", "-q", "--bare"]);
    git(&work, &["init", "-q"]);
    git(&work, &["checkout", "-q", "-b", "main"]);
    let dockerfile = format!(
        "FROM {BUSYBOX_TEST_IMAGE}\nCOPY version /version\n\
         CMD [\"sh\", \"-c\", \"cat /version; trap 'exit 0' TERM INT; sleep 999999999 & wait\"]\n"
    );
    std::fs::write(work.join("Dockerfile"), dockerfile).unwrap();
    std::fs::write(work.join("version"), "built under systemd\n").unwrap();
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-q", "-m", "one"]);
    git(
        &work,
        &["push", "-q", &origin.to_string_lossy(), "main:main"],
    );
    git(&work, &["rev-parse", "HEAD"])
}

/// The group owning the host's Docker socket (the container's `docker` group gets it).
fn socket_gid() -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/var/run/docker.sock")
        .expect("stat /var/run/docker.sock")
        .gid()
}

fn main_pid(sd: &SystemdBox) -> u32 {
    sd.property(UNIT, "MainPID").unwrap().parse().unwrap()
}

fn wait_host(stack: &Stack, connected: bool, timeout: Duration) {
    poll(&format!("the host connected={connected}"), timeout, || {
        let hosts = stack.sim.hosts().map_err(|e| e.to_string())?;
        odac_e2e::sim::only_host(&hosts, connected).map(|_| ())
    })
    .unwrap();
}

/// Waits until app `name` runs (with `commit`, when given); its container id.
fn wait_running(stack: &Stack, name: &str, commit: Option<&str>, timeout: Duration) -> String {
    let view = stack
        .wait_app(name, timeout, "running", |a| {
            a.state == "running"
                && a.status.as_ref().is_some_and(|s| {
                    s.container_id.is_some()
                        && commit.is_none_or(|c| s.commit.as_deref() == Some(c))
                })
        })
        .unwrap();
    view.status.unwrap().container_id.unwrap()
}

fn running(id: &str) -> bool {
    inspect(id).unwrap()["State"]["Running"] == serde_json::Value::Bool(true)
}

#[test]
fn packaged_unit_under_real_systemd_reaches_ready_applies_apps_and_obeys_the_watchdog() {
    require_docker!(SCENARIO);
    let t0 = Instant::now();
    odac_e2e::image::ensure_busybox_test_image().unwrap();
    let image = ensure_image().expect("build the systemd test image");
    figure(SCENARIO, "image_ready", secs(t0.elapsed()));

    // the simulator on the host's loopback; the agent is started by systemd, not by the stack
    let mut stack = Stack::builder(SCENARIO).no_agent().start().unwrap();
    let run_label = format!("{RUN_LABEL}={}", stack.instance);
    let _images = ImageCleanup(run_label.clone());
    let _boxes = LabelCleanup::new(run_label.clone());
    let share = stack.dir().join("share");
    std::fs::create_dir_all(&share).unwrap();
    let t = Instant::now();
    let agent = bin(AGENT).unwrap(); // builds the binaries when stale (not under nextest's build)
    figure(SCENARIO, "binaries_ready", secs(t.elapsed()));
    let t = Instant::now();
    let deb = agent_deb(&agent, &share).expect("build the agent's .deb");
    figure(SCENARIO, "deb", secs(t.elapsed()));
    let deb_name = deb.file_name().unwrap().to_string_lossy().into_owned();
    if deb.parent() != Some(share.as_path()) {
        std::fs::copy(&deb, share.join(&deb_name)).unwrap();
    }
    std::fs::copy(stack.sim.ca_path(), share.join("ca.pem")).unwrap();
    std::fs::write(share.join("token"), format!("{}\n", stack.sim.token())).unwrap();
    stack.options.ca_file = Some("/etc/odac/ca.pem".into());
    let config = stack.options.toml(
        Path::new("/var/lib/odac-agent"),
        Path::new("/etc/odac/token"),
    );
    std::fs::write(share.join("agent.toml"), &config).unwrap();
    std::fs::write(
        share.join("bad.toml"),
        config.replace("[control_plane]", "[control_plane]\nno_such_key = true"),
    )
    .unwrap();
    let commit = git_repo(&share.join("repo"));

    // 0. boot systemd, install the package as an operator would
    let t = Instant::now();
    let name = format!("odac-e2e-systemd-{}", std::process::id());
    let sd = SystemdBox::boot(
        &image,
        &name,
        &[run_label.clone(), format!("{TEST_LABEL}=1")],
        &share,
    )
    .expect("boot systemd as PID 1 in a container");
    figure(SCENARIO, "boot", secs(t.elapsed()));
    let gid = socket_gid();
    let install = sd
        .sh(&format!(
            "groupadd -o -g {gid} docker && \
             DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends {SHARE}/{deb_name} 2>&1"
        ))
        .expect("apt-get install the .deb");
    println!("{install}");
    assert_eq!(sd.property(UNIT, "UnitFileState").unwrap(), "enabled");
    assert_eq!(
        sd.property(UNIT, "ActiveState").unwrap(),
        "inactive",
        "started before a token"
    );
    sd.sh(&format!(
        "install -m 0644 {SHARE}/ca.pem /etc/odac/ca.pem && \
         install -m 0600 {SHARE}/token /etc/odac/token && \
         install -m 0644 {SHARE}/agent.toml /etc/odac/agent.toml && \
         mkdir -p /etc/systemd/system/{UNIT}.service.d && \
         printf '[Service]\\nWatchdogSec={WATCHDOG_SECS}s\\nRestartSec=1s\\n' \
           > /etc/systemd/system/{UNIT}.service.d/e2e.conf && \
         systemctl daemon-reload"
    ))
    .unwrap();

    // 1. start: returns after READY=1
    let t = Instant::now();
    let started = sd.exec(&["systemctl", "start", UNIT]).unwrap();
    assert!(
        started.status.success(),
        "systemctl start: {}; journal:\n{}",
        String::from_utf8_lossy(&started.stderr),
        sd.journal(UNIT).unwrap_or_default()
    );
    figure(SCENARIO, "start_to_ready", secs(t.elapsed()));
    assert_eq!(sd.property(UNIT, "ActiveState").unwrap(), "active");
    assert_eq!(sd.property(UNIT, "SubState").unwrap(), "running");
    assert_eq!(
        sd.property(UNIT, "StatusText").unwrap(),
        "running",
        "READY=1 with its status"
    );
    wait_host(&stack, true, Duration::from_secs(30));
    let journal = sd.journal(UNIT).unwrap();
    let starting = journal
        .lines()
        .find(|l| l.contains("odac-agent starting"))
        .unwrap_or_else(|| panic!("no start line in the journal:\n{journal}"));
    for field in [
        "agent_id=",
        "control_plane=",
        "state_dir=/var/lib/odac-agent",
        "version=",
    ] {
        assert!(starting.contains(field), "{field} missing in {starting:?}");
    }
    assert!(
        journal.contains("control plane session established"),
        "{journal}"
    );
    // the inventory was read through the sandbox (/proc, /sys, the Docker socket)
    let inventory = poll("the host's inventory", Duration::from_secs(30), || {
        let hosts = stack.sim.hosts().map_err(|e| e.to_string())?;
        hosts
            .first()
            .and_then(|h| h.inventory.clone())
            .ok_or_else(|| "no inventory yet".to_owned())
    })
    .unwrap();
    assert!(inventory.host.cpus > 0, "{:?}", inventory.host);
    assert!(inventory.host.memory_bytes > 0, "{:?}", inventory.host);
    assert!(!inventory.host.kernel.is_empty(), "{:?}", inventory.host);
    assert!(inventory.engine.reachable, "{:?}", inventory.engine);

    // 2. an image app, then a git-sourced app, through the sandboxed service
    let app = format!("sd{}", std::process::id());
    stack.sim.create_app(&Stack::app_body(&app)).unwrap();
    let app_container = wait_running(&stack, &app, None, Duration::from_secs(60));
    let ins = inspect(&app_container).unwrap();
    assert_eq!(
        ins["Config"]["Labels"]["odac.instance"],
        stack.instance.as_str()
    );
    assert!(running(&app_container));
    let git_app = format!("sdg{}", std::process::id());
    let t = Instant::now();
    let url = format!("file://{SHARE}/repo/origin.git");
    stack
        .sim
        .odac_ok(&[
            "app", "create", "-n", &git_app, "-u", &url, "--branch", "main",
        ])
        .unwrap();
    let git_container = wait_running(&stack, &git_app, Some(&commit), BUILD_WAIT);
    figure(SCENARIO, "git_create_to_running", secs(t.elapsed()));
    assert_eq!(
        inspect(&git_container).unwrap()["Config"]["Labels"]["odac.instance"],
        stack.instance.as_str()
    );

    // 3. a hung agent: the watchdog gets it killed and restarted
    let pid = main_pid(&sd);
    let restarts: u32 = sd.property(UNIT, "NRestarts").unwrap().parse().unwrap();
    let t = Instant::now();
    sd.sh(&format!("kill -STOP {pid}")).unwrap();
    poll(
        "systemd to restart the stopped agent",
        Duration::from_secs(WATCHDOG_SECS) + TIMEOUT_STOP + Duration::from_secs(30),
        || {
            let now = main_pid(&sd);
            let state = sd
                .property(UNIT, "ActiveState")
                .map_err(|e| e.to_string())?;
            if now != 0 && now != pid && state == "active" {
                Ok(())
            } else {
                Err(format!("MainPID={now} ActiveState={state}"))
            }
        },
    )
    .unwrap();
    let waited = t.elapsed();
    figure(SCENARIO, "sigstop_to_restarted", secs(waited));
    // The agent pings every half `WatchdogSec`, so the SIGSTOP lands up to half a period
    // after the last ping: systemd may kill it as early as half `WatchdogSec` after the stop.
    assert!(
        waited >= Duration::from_secs(WATCHDOG_SECS) / 2,
        "restarted after {waited:?}: before the watchdog could have fired"
    );
    let after: u32 = sd.property(UNIT, "NRestarts").unwrap().parse().unwrap();
    assert_eq!(after, restarts + 1);
    let journal = sd.sh("journalctl -b --no-pager -o cat").unwrap();
    assert!(
        journal.contains("Watchdog timeout"),
        "no watchdog timeout in:\n{journal}"
    );
    wait_host(&stack, true, Duration::from_secs(30));

    // 4. a clean stop within the stop timeout; the containers stay
    let t = Instant::now();
    let stopped = sd.exec(&["systemctl", "stop", UNIT]).unwrap();
    let took = t.elapsed();
    figure(SCENARIO, "stop", secs(took));
    assert!(stopped.status.success(), "systemctl stop: {stopped:?}");
    assert!(took < TIMEOUT_STOP, "stop took {took:?}");
    assert_eq!(sd.property(UNIT, "Result").unwrap(), "success");
    assert_eq!(sd.property(UNIT, "ExecMainStatus").unwrap(), "0");
    assert!(sd.journal(UNIT).unwrap().contains("odac-agent stopped"));
    assert!(
        running(&app_container),
        "the app's container was stopped with the agent"
    );
    assert!(
        running(&git_container),
        "the git app's container was stopped with the agent"
    );

    // 5. a bad config: exit 78, failed, no restart
    sd.sh(&format!(
        "install -m 0644 {SHARE}/bad.toml /etc/odac/agent.toml"
    ))
    .unwrap();
    let bad = sd.exec(&["systemctl", "start", UNIT]).unwrap();
    assert!(!bad.status.success(), "start with a bad config succeeded");
    std::thread::sleep(Duration::from_secs(4)); // several RestartSec=1s
    assert_eq!(sd.property(UNIT, "ExecMainStatus").unwrap(), "78");
    assert_eq!(sd.property(UNIT, "ActiveState").unwrap(), "failed");
    assert_eq!(sd.property(UNIT, "Result").unwrap(), "exit-code");
    let tail = sd.journal(UNIT).unwrap();
    assert!(
        tail.contains("no_such_key"),
        "the error names the bad key:\n{tail}"
    );
    assert!(
        !tail.contains("Scheduled restart job, restart counter is at 2"),
        "{tail}"
    );

    // 6. exposure of the installed unit
    let security = sd
        .sh(&format!("systemd-analyze security {UNIT} --no-pager 2>&1"))
        .unwrap();
    let score: f64 = security
        .lines()
        .find_map(|l| l.split("Overall exposure level for").nth(1))
        .and_then(|rest| rest.split(':').nth(1))
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no exposure level in:\n{security}"));
    figure(SCENARIO, "exposure", format!("{score:.1}"));
    assert!(score <= 5.0, "exposure {score} > 5.0:\n{security}");

    // nothing the agent touched was refused by the sandbox
    let journal = sd.journal(UNIT).unwrap();
    println!("{journal}");
    for refused in [
        "Permission denied",
        "Operation not permitted",
        "Read-only file system",
    ] {
        assert!(
            !journal.contains(refused),
            "{refused:?} in the journal:\n{journal}"
        );
    }

    figure(SCENARIO, "total", secs(t0.elapsed()));
    drop(sd);
}
