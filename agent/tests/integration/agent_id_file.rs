//! An empty or invalid `agent_id` file in the state dir stops `odac-agent run` at once with
//! exit 78 (EX_CONFIG, which the systemd unit does not restart) and a message that names the
//! file and the fix; the file is left as it was (the control plane binds the id to the host's
//! token, so the agent never invents a new identity behind the operator's back).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const EX_CONFIG: i32 = 78;

fn write_config(dir: &Path) -> std::path::PathBuf {
    let token = dir.join("token");
    std::fs::write(&token, "odac_test_token\n").unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    let state = dir.join("state");
    std::fs::create_dir(&state).unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o700)).unwrap();
    let config = dir.join("agent.toml");
    let q = |p: &Path| serde_json::Value::String(p.display().to_string()).to_string();
    std::fs::write(
        &config,
        format!(
            "state_dir = {}\n\n[control_plane]\nurl = \"wss://127.0.0.1:9/agent/v1\"\ntoken_file = {}\n\n[apps]\ninstance = \"agent-id-file-test\"\n",
            q(&state),
            q(&token)
        ),
    )
    .unwrap();
    config
}

/// Runs `odac-agent run --config CONFIG`; an agent still running after 20 s (it accepted the
/// file and went on) is killed, and its output returned with no exit code.
fn run_bounded(config: &Path) -> std::process::Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_odac-agent"))
        .arg("run")
        .arg("--config")
        .arg(config)
        .env_remove("ODAC_AGENT_TOKEN")
        .env_remove("ODAC_AGENT__STATE_DIR")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    if child.try_wait().unwrap().is_none() {
        let _ = child.kill();
    }
    child.wait_with_output().unwrap()
}

#[test]
fn an_empty_or_invalid_agent_id_file_exits_78_naming_the_file_and_the_fix() {
    for (content, why) in [
        ("", "it is empty"),
        ("\n\n", "it is empty"),
        ("../../etc\n", "contains '/'"),
        ("host one\n", "contains ' '"),
        ("\u{7}bell\n", "contains '\\u{7}'"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let config = write_config(dir.path());
        let id_file = dir.path().join("state/agent_id");
        std::fs::write(&id_file, content).unwrap();
        let out = run_bounded(&config);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(EX_CONFIG), "{content:?}: {text}");
        assert!(
            text.contains(&id_file.display().to_string()),
            "{content:?}: {text}"
        );
        assert!(text.contains(why), "{content:?}: {text}");
        assert!(text.contains("delete the file to get a new id"), "{text}");
        assert!(!text.contains("odac_test_token"), "{text}");
        assert_eq!(
            std::fs::read_to_string(&id_file).unwrap(),
            content,
            "left as it was"
        );
    }
}

#[test]
fn the_systemd_unit_does_not_restart_on_exit_78() {
    let unit = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/odac-agent.service"),
    )
    .unwrap();
    let line = unit
        .lines()
        .find(|l| l.starts_with("RestartPreventExitStatus="))
        .expect("RestartPreventExitStatus in the unit");
    assert!(line.split(['=', ' ']).any(|c| c == "78"), "{line}");
}
