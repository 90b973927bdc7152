//! `odac-agent enroll` as a real process against a tiny in-process HTTPS control plane: the
//! token lands in a 0600 file, agent.toml (0644) points at the control plane and keeps what the
//! operator wrote, a used or unknown code fails with a clear message and exit 1, a bad
//! argument exits 2, and neither the code nor the token ever appears in the output.

use crate::enroll_support as support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

use support::{Answer, FakeCp};

const BIN: &str = env!("CARGO_BIN_EXE_odac-agent");

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

fn enroll(args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("enroll")
        .args(args)
        .env_remove("ODAC_ENROLL_CODE")
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs a successful enrollment into `dir/etc` and returns the process output.
fn enroll_ok(cp: &FakeCp, dir: &Path, code: &str, extra: &[&str]) -> Output {
    let ca = dir.join("ca-in.pem");
    cp.write_ca(&ca);
    let etc = dir.join("etc");
    let url = cp.url();
    let mut args = vec![
        "--code",
        code,
        "--cp",
        &url,
        "--ca-file",
        ca.to_str().unwrap(),
        "--config-dir",
        etc.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    enroll(&args)
}

#[test]
fn enroll_writes_token_0600_and_config_0644_without_printing_secrets() {
    let cp = FakeCp::start();
    cp.add_code("enr_code_1", "odac_token_abc");
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let out = enroll_ok(
        &cp,
        dir.path(),
        "enr_code_1",
        &["--state-dir", state.to_str().unwrap()],
    );
    let all = text(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(!all.contains("odac_token_abc"), "token printed: {all}");
    assert!(!all.contains("enr_code_1"), "code printed: {all}");

    let etc = dir.path().join("etc");
    let token = etc.join("token");
    assert_eq!(std::fs::read_to_string(&token).unwrap(), "odac_token_abc");
    assert_eq!(mode(&token), 0o600);
    let config = etc.join("agent.toml");
    assert_eq!(mode(&config), 0o644);
    assert_eq!(mode(&etc.join("ca.pem")), 0o644);
    assert_eq!(
        std::fs::read_to_string(etc.join("ca.pem")).unwrap(),
        cp.ca_pem
    );
    assert_eq!(mode(&state), 0o700);
    let toml = std::fs::read_to_string(&config).unwrap();
    assert!(toml.starts_with("# odac-agent configuration"), "{toml}");
    let loaded =
        odac_agent::config::Config::load_with_env(Some(&config), Vec::<(String, String)>::new())
            .unwrap();
    assert_eq!(loaded.state_dir, state);
    let port = cp.addr.port();
    for want in [
        format!("[control_plane]\nurl = \"wss://127.0.0.1:{port}/agent/v1\""),
        format!("token_file = \"{}\"", token.display()),
        format!("ca_file = \"{}\"", etc.join("ca.pem").display()),
        format!("state_dir = \"{}\"", state.display()),
    ] {
        assert!(toml.contains(&want), "missing {want:?} in:\n{toml}");
    }
    // no temporary files left behind
    let mut names: Vec<String> = std::fs::read_dir(&etc)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["agent.toml", "ca.pem", "token"]);

    let seen = cp.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].method, "POST");
    assert_eq!(seen[0].path, "/api/enroll");
    let body: serde_json::Value = serde_json::from_str(&seen[0].body).unwrap();
    assert_eq!(body["code"], "enr_code_1");
}

#[test]
fn reused_code_fails_with_a_clear_message_and_keeps_the_old_token() {
    let cp = FakeCp::start();
    cp.add_code("enr_once", "odac_first");
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(
        enroll_ok(&cp, dir.path(), "enr_once", &[]).status.code(),
        Some(0)
    );
    let out = enroll_ok(&cp, dir.path(), "enr_once", &[]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(all.contains("refused the enrollment code"), "{all}");
    assert!(all.contains("already used"), "{all}");
    assert!(all.contains("ask the control plane for a new one"), "{all}");
    assert!(
        !all.contains("enr_once") && !all.contains("odac_first"),
        "{all}"
    );
    let token = dir.path().join("etc/token");
    assert_eq!(std::fs::read_to_string(&token).unwrap(), "odac_first");
    assert_eq!(mode(&token), 0o600);
}

#[test]
fn unknown_code_writes_nothing() {
    let cp = FakeCp::start();
    let dir = tempfile::tempdir().unwrap();
    let out = enroll_ok(&cp, dir.path(), "enr_nope", &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("http 401"), "{}", text(&out));
    let etc = dir.path().join("etc");
    assert_eq!(std::fs::read_dir(&etc).unwrap().count(), 0, "no files left");
}

#[test]
fn existing_config_keeps_operator_settings() {
    let cp = FakeCp::start();
    cp.add_code("enr_keep", "odac_keep");
    let dir = tempfile::tempdir().unwrap();
    let etc = dir.path().join("etc");
    std::fs::create_dir_all(&etc).unwrap();
    let before = "# my fleet\nlog_level = \"debug\"\n\n[control_plane]\nurl = \"wss://old.example/agent/v1\"\n\n[docker]\nhost = \"unix:///run/docker.sock\"\n";
    std::fs::write(etc.join("agent.toml"), before).unwrap();
    let out = enroll_ok(&cp, dir.path(), "enr_keep", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let after = std::fs::read_to_string(etc.join("agent.toml")).unwrap();
    assert!(
        after.starts_with("# my fleet\nlog_level = \"debug\"\n"),
        "{after}"
    );
    assert!(
        after.contains("[docker]\nhost = \"unix:///run/docker.sock\"\n"),
        "{after}"
    );
    assert!(!after.contains("old.example"), "{after}");
    assert_eq!(after.matches("[control_plane]").count(), 1, "{after}");
    assert_eq!(mode(&etc.join("agent.toml")), 0o644);
}

#[test]
fn untrusted_certificate_fails_before_the_code_is_sent() {
    let cp = FakeCp::start();
    cp.add_code("enr_tls", "odac_tls");
    let dir = tempfile::tempdir().unwrap();
    let etc = dir.path().join("etc");
    // no --ca-file: the public roots do not trust the test CA
    let out = enroll(&[
        "--code",
        "enr_tls",
        "--cp",
        &cp.url(),
        "--config-dir",
        etc.to_str().unwrap(),
    ]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(all.contains("cannot reach the control plane"), "{all}");
    assert!(cp.seen().is_empty(), "the code reached an untrusted server");
    assert!(!etc.join("token").exists());
}

#[test]
fn code_from_environment_and_server_echo_is_masked() {
    let cp = FakeCp::start();
    cp.add_answer(
        "enr_echo",
        Answer::Raw(403, r#"{"error":"code enr_echo is revoked"}"#.to_owned()),
    );
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    cp.write_ca(&ca);
    let out = Command::new(BIN)
        .args(["enroll", "--cp", &cp.url(), "--ca-file"])
        .arg(&ca)
        .arg("--config-dir")
        .arg(dir.path().join("etc"))
        .env("ODAC_ENROLL_CODE", "enr_echo")
        .output()
        .unwrap();
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(all.contains("code <code> is revoked"), "{all}");
    assert!(!all.contains("enr_echo"), "{all}");
    assert_eq!(cp.seen().len(), 1);
}

#[test]
fn server_error_says_try_again() {
    let cp = FakeCp::start();
    cp.add_answer("enr_500", Answer::Raw(500, "boom".to_owned()));
    let dir = tempfile::tempdir().unwrap();
    let out = enroll_ok(&cp, dir.path(), "enr_500", &[]);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "{all}");
    assert!(
        all.contains("http 500") && all.contains("try again later"),
        "{all}"
    );
}

#[test]
fn usage_errors_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let etc = dir.path().join("etc");
    let etc = etc.to_str().unwrap();
    for args in [
        vec![
            "--code",
            "x",
            "--cp",
            "http://127.0.0.1:1",
            "--config-dir",
            etc,
        ],
        vec!["--code", "x", "--cp", "not a url", "--config-dir", etc],
        vec!["--cp", "https://127.0.0.1:1", "--config-dir", etc],
        vec![
            "--code",
            "",
            "--cp",
            "https://127.0.0.1:1",
            "--config-dir",
            etc,
        ],
        vec![
            "--code",
            "x",
            "--cp",
            "https://127.0.0.1:1",
            "--ca-file",
            "/nonexistent/ca.pem",
            "--config-dir",
            etc,
        ],
    ] {
        let out = enroll(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
    }
    assert!(!Path::new(etc).exists());
}

#[test]
fn enrolled_example_config_loads_with_the_agents_loader() {
    let cp = FakeCp::start();
    cp.add_code("enr_load", "odac_load_token");
    let dir = tempfile::tempdir().unwrap();
    let etc = dir.path().join("etc");
    std::fs::create_dir_all(&etc).unwrap();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/agent.toml");
    std::fs::copy(&example, etc.join("agent.toml")).unwrap();
    let state = dir.path().join("state");
    let out = enroll_ok(
        &cp,
        dir.path(),
        "enr_load",
        &["--state-dir", state.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let config = odac_agent::config::Config::load_with_env(
        Some(&etc.join("agent.toml")),
        Vec::<(String, String)>::new(),
    )
    .unwrap();
    let port = cp.addr.port();
    assert_eq!(
        config.control_plane.url,
        format!("wss://127.0.0.1:{port}/agent/v1")
    );
    assert_eq!(config.control_plane.token_file, Some(etc.join("token")));
    assert_eq!(config.control_plane.ca_file, Some(etc.join("ca.pem")));
    assert_eq!(config.state_dir, state);
    // the example's other keys are untouched
    let text = std::fs::read_to_string(etc.join("agent.toml")).unwrap();
    assert!(text.contains("heartbeat_secs = 20"), "{text}");
    assert_eq!(text.matches("ca_file").count(), 1, "{text}");
}
