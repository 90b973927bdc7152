//! Self-update keys at enrollment: a control plane that answers `POST /api/enroll` with
//! `release_keys` gets them written as `[update] public_keys` of agent.toml (which the agent
//! then loads and trusts); a malformed key fails the enrollment naming `release_keys[i]`, and
//! nothing is written.

use crate::enroll_support as support;

use std::process::Command;

use odac_agent::config::Config;
use support::{Answer, FakeCp};

use super::self_update_support::Key;

fn enroll(cp: &FakeCp, dir: &std::path::Path) -> std::process::Output {
    let ca = dir.join("ca-in.pem");
    cp.write_ca(&ca);
    Command::new(env!("CARGO_BIN_EXE_odac-agent"))
        .args(["enroll", "--code", "enr_k", "--cp", &cp.url(), "--ca-file"])
        .arg(&ca)
        .arg("--config-dir")
        .arg(dir.join("etc"))
        .env_remove("ODAC_ENROLL_CODE")
        .output()
        .unwrap()
}

#[test]
fn self_update_enroll_records_the_control_planes_release_keys() {
    let cp = FakeCp::start();
    let key = Key::new();
    let body = serde_json::json!({"token": "odac_tok_1", "release_keys": [key.public()]});
    cp.add_answer("enr_k", Answer::Raw(201, body.to_string()));
    let dir = tempfile::tempdir().unwrap();
    let out = enroll(&cp, dir.path());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("release keys: 1 trusted for self-update"),
        "{stdout}"
    );
    let toml = std::fs::read_to_string(dir.path().join("etc/agent.toml")).unwrap();
    assert!(
        toml.contains(&format!("public_keys = [\"{}\"]", key.public())),
        "{toml}"
    );
    let config = Config::load(Some(&dir.path().join("etc/agent.toml"))).unwrap();
    assert_eq!(config.update.public_keys, [key.public()]);
    assert!(!config.update.trusted_keys().unwrap().is_empty());
}

#[test]
fn self_update_enroll_refuses_a_malformed_release_key_and_writes_nothing() {
    let cp = FakeCp::start();
    let body = r#"{"token":"odac_tok_2","release_keys":["ed25519:AAAA"]}"#;
    cp.add_answer("enr_k", Answer::Raw(201, body.to_owned()));
    let dir = tempfile::tempdir().unwrap();
    let out = enroll(&cp, dir.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("release_keys[0]"), "{stderr}");
    assert!(
        !stderr.contains("odac_tok_2"),
        "the token is never shown: {stderr}"
    );
    assert!(!dir.path().join("etc/token").exists());
    assert!(!dir.path().join("etc/agent.toml").exists());
}
