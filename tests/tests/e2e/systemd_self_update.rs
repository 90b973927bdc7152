//! Agent self-update under real systemd (`odac_e2e::systemd`: systemd as PID 1 in a
//! container, the agent's .deb installed, the packaged sandboxed unit with a drop-in that
//! shortens `WatchdogSec`, `RestartSec` and `TimeoutStartSec`), against `odac-sim serve
//! --releases` on the host's loopback, driven by `odac agent update`. The releases are signed
//! with a key pinned in `[update] public_keys`; `update.commit_within_secs` is 30. In order:
//! 1. from v1, a v3 that exits 1 at start: systemd restarts the service, the launcher finds the
//!    attempt spent and runs the packaged v1 again, which reports `update_failed`; a v4 that
//!    hangs before READY: `TimeoutStartSec` kills it, and the same rollback follows;
//! 2. v1 → v2 (this very binary signed as 0.2.0): staged under the state dir, started by the
//!    packaged launcher, connected, committed; the control plane sees 0.2.0; the app's
//!    container keeps its id across the switch;
//! 3. from v2, a v5 that exits 1 goes back to v2, the last committed release;
//! 4. v3 is not retried (refused); the sandbox refused nothing.
//!
//! Each rollback's time is printed as a figure. It fails, never skips, when systemd cannot boot.

use std::path::Path;
use std::time::{Duration, Instant};

use odac_e2e::bins::{AGENT, bin};
use odac_e2e::docker::{LabelCleanup, RUN_LABEL, TEST_LABEL, inspect};
use odac_e2e::figures::{figure, secs};
use odac_e2e::poll::poll;
use odac_e2e::require_docker;
use odac_e2e::stack::Stack;
use odac_e2e::systemd::{SystemdBox, agent_deb, ensure_image};
use odac_host::engine::DockerEngine;
use odac_host::engine::test_image::{BUSYBOX_TEST_IMAGE, ensure_busybox_image};
use odac_simulator::release::{self, ReleaseInfo};

const SCENARIO: &str = "systemd_self_update";
const UNIT: &str = "odac-agent";
const SHARE: &str = "/srv/odac-e2e";
const COMMIT_WITHIN_SECS: u64 = 30;
const START_TIMEOUT_SECS: u64 = 20;
/// Bound of one rollout step: download, restart, commit or rollback, on a loaded machine.
const STEP: &str = "240";

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

fn socket_gid() -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/var/run/docker.sock")
        .expect("stat /var/run/docker.sock")
        .gid()
}

/// Signs `artefact` as `version` into `dir` (served at `{api}/releases/NAME`).
fn publish(dir: &Path, key: &Path, api: &str, version: &str, artefact: &Path) {
    let name = format!("odac-agent-{version}");
    let file = dir.join(&name);
    std::fs::copy(artefact, &file).unwrap();
    let info = ReleaseInfo {
        version: version.to_owned(),
        target: odac_agent::update::target(),
        url: format!("{api}/releases/{name}"),
        allow_downgrade: false,
    };
    release::sign_file(key, &file, &info, &dir.join(format!("{name}.release.json"))).unwrap();
}

fn script(dir: &Path, name: &str, body: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

fn host_state(stack: &Stack) -> (String, String) {
    let hosts = stack.sim.hosts().unwrap();
    let h = &hosts[0];
    let update = h
        .update
        .as_ref()
        .map(|u| {
            format!(
                "{} {} {}",
                u.version,
                u.phase.as_str(),
                u.message.clone().unwrap_or_default()
            )
        })
        .unwrap_or_default();
    (h.agent_version.clone(), update)
}

fn exe_of_main_pid(sd: &SystemdBox) -> String {
    let pid = sd.property(UNIT, "MainPID").unwrap();
    sd.sh(&format!("readlink /proc/{pid}/exe"))
        .unwrap()
        .trim()
        .to_owned()
}

const V2_EXE: &str = "/var/lib/odac-agent/update/versions/0.2.0/odac-agent";

fn update(stack: &Stack, version: &str) -> odac_e2e::sim::CliOutput {
    stack
        .sim
        .odac(&[
            "agent",
            "update",
            "--version",
            version,
            "--all",
            "--timeout-secs",
            STEP,
        ])
        .unwrap()
}

/// Offers `version` (which never commits) and checks the host is back on `back` (version,
/// binary) with `update_failed`, the app's container untouched.
fn roll_back(
    stack: &Stack,
    sd: &SystemdBox,
    container: &str,
    (version, what): (&str, &str),
    (back, exe): (&str, &str),
) {
    let t = Instant::now();
    let out = update(stack, version);
    figure(
        SCENARIO,
        &format!("{what}_to_rolled_back"),
        secs(t.elapsed()),
    );
    assert_eq!(out.code, 1, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr
            .contains(&format!("update_failed: version {version} did not commit")),
        "{}",
        out.stderr
    );
    poll(
        &format!("{back} reconnected"),
        Duration::from_secs(60),
        || match host_state(stack) {
            (v, _) if v == back => Ok(()),
            other => Err(format!("{other:?}")),
        },
    )
    .unwrap();
    assert_eq!(exe_of_main_pid(sd), exe);
    assert_eq!(inspect(container).unwrap()["State"]["Running"], true);
}

#[test]
fn self_update_under_systemd_commits_v2_and_rolls_back_a_crashing_and_a_hanging_version() {
    require_docker!(SCENARIO);
    let t0 = Instant::now();
    ensure_base_image();
    let image = ensure_image().expect("build the systemd test image");
    let mut stack = Stack::builder(SCENARIO).no_agent().start().unwrap();
    let run_label = format!("{RUN_LABEL}={}", stack.instance);
    let _boxes = LabelCleanup::new(run_label.clone());
    let share = stack.dir().join("share");
    let releases = stack.dir().join("releases");
    std::fs::create_dir_all(&share).unwrap();
    std::fs::create_dir_all(&releases).unwrap();
    let agent = bin(AGENT).unwrap();
    let deb = agent_deb(&agent, &share).expect("build the agent's .deb");
    let deb_name = deb.file_name().unwrap().to_string_lossy().into_owned();
    if deb.parent() != Some(share.as_path()) {
        std::fs::copy(&deb, share.join(&deb_name)).unwrap();
    }
    // the release key, and three releases: v2 (this binary), v3 (exits 1), v4 (hangs)
    let key = stack.dir().join("release.key");
    let public = release::keygen(&key).unwrap();
    let api = stack.sim.api_url();
    publish(&releases, &key, &api, "0.2.0", &agent);
    publish(
        &releases,
        &key,
        &api,
        "0.3.0",
        &script(stack.dir(), "v3", "exit 1"),
    );
    publish(
        &releases,
        &key,
        &api,
        "0.4.0",
        &script(stack.dir(), "v4", "exec sleep 600"),
    );
    publish(
        &releases,
        &key,
        &api,
        "0.5.0",
        &script(stack.dir(), "v5", "exit 1"),
    );
    stack
        .sim
        .serve_with(&["--releases", &releases.to_string_lossy()])
        .unwrap();
    std::fs::copy(stack.sim.ca_path(), share.join("ca.pem")).unwrap();
    std::fs::write(share.join("token"), format!("{}\n", stack.sim.token())).unwrap();
    stack.options.ca_file = Some("/etc/odac/ca.pem".into());
    let mut config = stack.options.toml(
        Path::new("/var/lib/odac-agent"),
        Path::new("/etc/odac/token"),
    );
    config.push_str(&format!(
        "\n[update]\npublic_keys = [\"{public}\"]\ncommit_within_secs = {COMMIT_WITHIN_SECS}\n"
    ));
    std::fs::write(share.join("agent.toml"), &config).unwrap();

    let name = format!("odac-e2e-sdupdate-{}", std::process::id());
    let sd = SystemdBox::boot(
        &image,
        &name,
        &[run_label, format!("{TEST_LABEL}=1")],
        &share,
    )
    .expect("boot systemd as PID 1 in a container");
    let gid = socket_gid();
    sd.sh(&format!(
        "groupadd -o -g {gid} docker && \
         DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends {SHARE}/{deb_name} 2>&1 && \
         install -m 0644 {SHARE}/ca.pem /etc/odac/ca.pem && \
         install -m 0600 {SHARE}/token /etc/odac/token && \
         install -m 0644 {SHARE}/agent.toml /etc/odac/agent.toml && \
         mkdir -p /etc/systemd/system/{UNIT}.service.d && \
         printf '[Service]\\nWatchdogSec=5s\\nRestartSec=1s\\nTimeoutStartSec={START_TIMEOUT_SECS}s\\n' \
           > /etc/systemd/system/{UNIT}.service.d/e2e.conf && \
         systemctl daemon-reload && systemctl start {UNIT}"
    ))
    .expect("install and start the agent");
    poll("the host on v1", Duration::from_secs(60), || {
        let hosts = stack.sim.hosts().map_err(|e| e.to_string())?;
        match hosts.as_slice() {
            [h] if h.connected => Ok(h.agent_version.clone()),
            other => Err(format!("{} hosts", other.len())),
        }
    })
    .unwrap();
    let v1 = host_state(&stack).0;
    assert_eq!(exe_of_main_pid(&sd), "/usr/bin/odac-agent");
    let app = format!("su{}", std::process::id());
    stack.sim.create_app(&Stack::app_body(&app)).unwrap();
    let view = stack
        .wait_app(&app, Duration::from_secs(60), "running", |a| {
            a.state == "running" && a.status.as_ref().is_some_and(|s| s.container_id.is_some())
        })
        .unwrap();
    let container = view.status.unwrap().container_id.unwrap();

    // 1. from v1: a v3 that exits 1 at start, and a v4 that hangs before READY, both rolled
    // back to the packaged v1
    for (version, what) in [("0.3.0", "v3_exit_1"), ("0.4.0", "v4_hang")] {
        roll_back(
            &stack,
            &sd,
            &container,
            (version, what),
            (&v1, "/usr/bin/odac-agent"),
        );
    }

    // 2. v1 → v2
    let t = Instant::now();
    let out = update(&stack, "0.2.0");
    assert_eq!(
        out.code,
        0,
        "{}\n{}\n{}",
        out.stdout,
        out.stderr,
        sd.journal(UNIT).unwrap_or_default()
    );
    figure(SCENARIO, "v1_to_v2_committed", secs(t.elapsed()));
    let (version, update_cell) = host_state(&stack);
    assert_eq!(version, "0.2.0", "was {v1}");
    assert!(update_cell.starts_with("0.2.0 committed"), "{update_cell}");
    assert_eq!(exe_of_main_pid(&sd), V2_EXE);
    assert_eq!(sd.property(UNIT, "ActiveState").unwrap(), "active");
    let now = stack.sim.app(&app).unwrap().unwrap();
    assert_eq!(
        now.status.and_then(|s| s.container_id).as_deref(),
        Some(container.as_str()),
        "the app's container was replaced by the switch"
    );
    assert_eq!(inspect(&container).unwrap()["State"]["Running"], true);

    // 3. from v2: a v5 that exits 1 goes back to v2 (the last committed release)
    roll_back(
        &stack,
        &sd,
        &container,
        ("0.5.0", "v5_exit_1"),
        ("0.2.0", V2_EXE),
    );

    // 4. a failed version is not retried
    let again = update(&stack, "0.3.0");
    assert_eq!(again.code, 1);
    assert!(
        again.stderr.contains("failed on this host before"),
        "{}",
        again.stderr
    );

    // 5. what the journal says, and what the sandbox refused (nothing)
    let journal = sd.journal(UNIT).unwrap();
    println!("{journal}");
    assert!(journal.contains("starting the staged version"), "{journal}");
    for refused in [
        "Permission denied",
        "Operation not permitted",
        "Read-only file system",
    ] {
        assert!(!journal.contains(refused), "{refused:?} in the journal");
    }
    let record = sd
        .sh("cat /var/lib/odac-agent/update/current.json")
        .unwrap();
    println!("{record}");
    assert!(record.contains("\"failed\""), "{record}");
    figure(SCENARIO, "total", secs(t0.elapsed()));
    drop(sd);
}
