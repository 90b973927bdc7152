//! `odac-agent run` with configurations that used to start silently wrong: each one exits 78 (EX_CONFIG, which the systemd unit does not restart) before doing
//! anything, with a message naming the key.

use std::process::Command;
use std::time::Duration;

const BASE: &str = "state_dir = \"/nonexistent/odac-config-cli\"\n[control_plane]\nurl = \"wss://127.0.0.1:9/agent/v1\"\ntoken_file = \"/nonexistent/odac-config-cli/token\"\n";

fn run_with(extra_top: &str, extra_tables: &str) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.toml");
    std::fs::write(&path, format!("{extra_top}{BASE}{extra_tables}")).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_odac-agent"))
        .args(["run", "--config"])
        .arg(&path)
        .env_remove("ODAC_AGENT_TOKEN")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // a configuration that is accepted would run: bound the wait and stop it
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    if child.try_wait().unwrap().is_none() {
        let _ = child.kill();
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn silently_wrong_configurations_exit_78_naming_the_key() {
    let cases: &[(&str, &str, &str)] = &[
        ("log_level = \"infoo\"\n", "", "log_level"),
        ("", "heartbeat_secs = 1.5\n", "control_plane.heartbeat_secs"),
        (
            "",
            "[apps]\npoll_interval_ms = 0\n",
            "apps.poll_interval_ms",
        ),
        (
            "",
            "[apps.build]\nkeep_images = 0\n",
            "apps.build.keep_images",
        ),
        ("", "[apps]\ninstance = \"Bad Name!\"\n", "apps.instance"),
        (
            "",
            "[apps.policy]\nallowed_bind_prefixes = [\"srv/data\"]\n",
            "apps.policy.allowed_bind_prefixes[0]",
        ),
    ];
    for (top, tables, key) in cases {
        let (code, stderr) = run_with(top, tables);
        assert_eq!(code, Some(78), "{top}{tables}: {stderr}");
        assert!(
            stderr.contains(key),
            "{top}{tables}: the message names {key}: {stderr}"
        );
    }
}
