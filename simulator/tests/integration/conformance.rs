//! The conformance kit against the simulator: `odac-sim conformance` passes every rule against
//! `odac-sim serve`, and fails (exit 1, the rule named with its evidence) against a control
//! plane that skips acks (the `withhold_acks` fault), refuses without `Retry-After`
//! (`refuse_secs` + `omit_retry_after`) or closes with wrong codes (`wrong_close_codes`); a
//! refusal with `Retry-After` passes that rule.

use crate::common;

use std::process::Command;

use common::{Sim, TOKEN};

fn conformance(sim: &Sim) -> (i32, String) {
    conformance_with(sim, &["--ca-file", &sim.ca_path()])
}

fn conformance_with(sim: &Sim, extra: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_odac-sim"))
        .args([
            "conformance",
            "--control-plane",
            &sim.server().agents_url(),
            "--token",
            TOKEN,
        ])
        .args(extra)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn the_simulator_passes_every_rule() {
    let sim = Sim::start();
    let (code, out) = conformance(&sim);
    assert_eq!(code, 0, "{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines.len() >= 10, "{out}");
    for line in &lines[..lines.len() - 1] {
        assert!(line.starts_with("PASS "), "{line}");
    }
    assert!(out.contains("PASS acks_every_report: "), "{out}");
    assert!(
        out.contains("PASS acks_a_rolled_back_status: app_status seq 1005"),
        "{out}"
    );
    assert!(
        out.contains("PASS acks_gpu_stats: gpu_stats seq 1101 acked"),
        "{out}"
    );
    assert!(
        out.contains("PASS refuses_duplicate_keys: error invalid (")
            && out.contains("not acked, and the session went on"),
        "{out}"
    );
    assert!(
        out.contains(
            "PASS never_answers_an_error: error conflict sent: no error back, and the session went on"
        ),
        "{out}"
    );
    assert!(
        out.contains("PASS answers_resync_with_a_snapshot: "),
        "{out}"
    );
    assert!(out.contains(" 0 failed"), "{out}");
    assert!(
        out.contains("PASS retry_after_when_refusing: the upgrade was accepted"),
        "{out}"
    );
    assert!(
        out.contains("PASS closes_a_replaced_session: the older session closed with 4000"),
        "{out}"
    );
    assert!(
        out.contains(
            "PASS closes_an_unsupported_version: error unsupported_version, then closed with 1008"
        ),
        "{out}"
    );
    assert!(
        out.contains("PASS closes_a_session_without_hello: error invalid, then closed with 1008"),
        "{out}"
    );
    assert!(
        out.contains(
            "PASS refuses_an_unknown_exec_ticket: http 403 for a ticket never issued (unknown exec ticket)"
        ),
        "{out}"
    );
}

#[test]
fn a_control_plane_that_skips_acks_fails() {
    let sim = Sim::start();
    let (s, _) = sim.call(
        "POST",
        "/api/admin/faults",
        Some(r#"{"withhold_acks":true}"#),
    );
    assert_eq!(s, 200);
    let (code, out) = conformance(&sim);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("FAIL acks_every_report: no ack for seq 1001"),
        "{out}"
    );
    assert!(out.contains("FAIL acks_a_resent_seq: "), "{out}");
    assert!(
        out.contains("FAIL acks_a_rolled_back_status: no ack for seq 1005"),
        "{out}"
    );
    assert!(
        out.contains("FAIL acks_gpu_stats: no ack for gpu_stats seq 1101"),
        "{out}"
    );
    assert!(
        out.contains("FAIL refuses_duplicate_keys: the session did not go on"),
        "{out}"
    );
    assert!(
        out.contains("FAIL never_answers_an_error: the session did not go on"),
        "{out}"
    );
    assert!(out.contains("PASS welcome_after_hello: "), "{out}");
}

#[test]
fn a_control_plane_that_closes_with_wrong_codes_fails() {
    let sim = Sim::start();
    let (s, _) = sim.call(
        "POST",
        "/api/admin/faults",
        Some(r#"{"wrong_close_codes":true}"#),
    );
    assert_eq!(s, 200);
    let (code, out) = conformance(&sim);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(
            "FAIL closes_a_replaced_session: the older session closed with code 1000 reason \"closed\", expected 4000 \"replaced by a newer session\""
        ),
        "{out}"
    );
    assert!(
        out.contains("FAIL closes_an_unsupported_version: error unsupported_version, then closed with code 1000"),
        "{out}"
    );
    assert!(
        out.contains(
            "FAIL closes_a_session_without_hello: error invalid, then closed with code 1000"
        ),
        "{out}"
    );
    assert!(out.contains("PASS acks_every_report: "), "{out}");
}

#[test]
fn a_refusal_is_checked_for_retry_after() {
    let sim = Sim::start();
    let (s, _) = sim.call("POST", "/api/admin/faults", Some(r#"{"refuse_secs":600}"#));
    assert_eq!(s, 200);
    let (code, out) = conformance(&sim);
    assert_eq!(code, 1, "{out}");
    let line = out
        .lines()
        .find(|l| l.contains(" retry_after_when_refusing: "))
        .unwrap();
    assert!(
        line.starts_with("PASS retry_after_when_refusing: http 503 with Retry-After: "),
        "{out}"
    );
    let secs: u64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert!((590..=600).contains(&secs), "{line}");

    let (s, _) = sim.call(
        "POST",
        "/api/admin/faults",
        Some(r#"{"omit_retry_after":true}"#),
    );
    assert_eq!(s, 200);
    let (code, out) = conformance(&sim);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("FAIL retry_after_when_refusing: http 503 without Retry-After"),
        "{out}"
    );
}

#[test]
fn without_ca_file_only_public_roots_are_trusted() {
    let sim = Sim::start();
    let (code, out) = conformance_with(&sim, &[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("FAIL welcome_after_hello: no session: cannot connect to"),
        "{out}"
    );
    assert!(out.to_lowercase().contains("certificate"), "{out}");
}
