//! Self-update with real processes: `odac-agent run` executes a pending staged version
//! (replacing itself: same arguments, `ODAC_AGENT_LAUNCHED` set) with its attempt already on
//! disk; when that version died without committing, the next `odac-agent run` does not
//! execute it again but runs the packaged agent (here it stops at its missing token, exit 78,
//! which shows it got past the launcher) and records the failure with its cause. Also: a bad
//! `[update]` key is a configuration error (exit 78) naming the key.

use std::path::Path;
use std::process::{Command, Output};

use odac_agent::update::state::{self, CurrentUpdate, Slot, UpdateState};

fn run(config: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_odac-agent"))
        .args(["run", "--config"])
        .arg(config)
        .env_remove("ODAC_AGENT_TOKEN")
        .env_remove("ODAC_AGENT_LAUNCHED")
        .output()
        .unwrap()
}

fn config(dir: &Path, update: &str) -> std::path::PathBuf {
    let path = dir.join("agent.toml");
    std::fs::write(
        &path,
        format!(
            "state_dir = {:?}\n[control_plane]\nurl = \"wss://127.0.0.1:9/agent/v1\"\ntoken_file = {:?}\n{update}",
            dir.join("state"),
            dir.join("no-token")
        ),
    )
    .unwrap();
    path
}

#[test]
fn self_update_the_launcher_execs_a_pending_version_once_then_rolls_back() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let state_dir = dir.path().join("state");
    let marker = dir.path().join("v2-ran");
    let bin = state_dir.join("update/versions/0.2.0/odac-agent");
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    std::fs::write(
        &bin,
        format!(
            "#!/bin/sh\necho \"$ODAC_AGENT_LAUNCHED $*\" > {}\nexit 1\n",
            marker.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let slot = Slot {
        version: "0.2.0".to_owned(),
        path: bin,
    };
    state::save(&state_dir, &CurrentUpdate::staged(slot, None, Vec::new())).unwrap();
    let cfg = config(dir.path(), "");

    // first start: the staged version replaces the process and exits 1
    let out = run(&cfg);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let seen = std::fs::read_to_string(&marker).unwrap();
    assert_eq!(seen.trim(), format!("0.2.0 run --config {}", cfg.display()));
    let record = state::load(&state_dir).unwrap().unwrap();
    assert_eq!((record.state, record.attempts), (UpdateState::Pending, 1));

    // second start: v2 is not executed again; the packaged agent runs
    std::fs::remove_file(&marker).unwrap();
    let out = run(&cfg);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{stderr}");
    assert!(stderr.contains("control_plane.token_file"), "{stderr}");
    assert!(!marker.exists(), "the failed version ran again");
    let record = state::load(&state_dir).unwrap().unwrap();
    assert_eq!(record.state, UpdateState::Failed);
    assert!(
        record
            .cause
            .unwrap()
            .contains("version 0.2.0 did not commit after 1 start(s)")
    );
}

#[test]
fn self_update_a_bad_release_key_in_the_config_exits_78_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "[update]\npublic_keys = [\"ed25519:AAAA\"]\n");
    let out = run(&cfg);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{stderr}");
    assert!(stderr.contains("update.public_keys[0]"), "{stderr}");
    let cfg = config(dir.path(), "[update]\ncommit_within_secs = 5\n");
    let out = run(&cfg);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{stderr}");
    assert!(stderr.contains("update.commit_within_secs"), "{stderr}");
}
