//! The installed subscriber's level hint: records more verbose than every `log_level`
//! directive are skipped where they are made, for tracing's macros and for dependencies that
//! log through the `log` facade alike. The subscriber is global and installed once per
//! process, so each case runs in a child process of this test binary (nextest runs a test per
//! process already; `cargo test` runs a binary's tests as threads of one process).

use std::process::Command;

use odac_agent::config::LogFormat;
use odac_agent::logging;
use tracing::level_filters::LevelFilter;

/// The variable that marks the child process running one case.
const CASE: &str = "ODAC_LOGGING_LEVELS_CASE";

/// Whether this process is the one to run `case`: in the child it is; otherwise it runs the
/// case alone in a child of this test binary, checks that exactly that test ran and passed,
/// and returns false.
fn own_process(case: &str) -> bool {
    if std::env::var(CASE).as_deref() == Ok(case) {
        return true;
    }
    let exe = std::env::current_exe().expect("test executable");
    // the test's full name in this executable: its module path without the crate's name
    let module = module_path!().split_once("::").map_or("", |(_, m)| m);
    let out = Command::new(exe)
        .args([&format!("{module}::{case}"), "--exact", "--test-threads=1"])
        .env(CASE, case)
        .output()
        .expect("run the case in a child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "{case} in its own process: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    false
}

#[test]
fn records_above_the_most_verbose_directive_are_skipped_at_the_call_site() {
    if !own_process("records_above_the_most_verbose_directive_are_skipped_at_the_call_site") {
        return;
    }
    logging::init("info,odac_agent::appmgr=debug", LogFormat::Text).expect("install");
    assert_eq!(LevelFilter::current(), LevelFilter::DEBUG);
    assert_eq!(log::max_level(), log::LevelFilter::Debug);
    assert!(!log::log_enabled!(target: "hyper::proto", log::Level::Trace));
    assert!(!log::log_enabled!(target: "hyper::proto", log::Level::Debug));
    assert!(log::log_enabled!(target: "hyper::proto", log::Level::Info));
    assert!(log::log_enabled!(target: "odac_agent::appmgr::pass", log::Level::Debug));
}

#[test]
fn a_trace_directive_keeps_trace_records() {
    if !own_process("a_trace_directive_keeps_trace_records") {
        return;
    }
    logging::init("warn,odac_agent=trace", LogFormat::Json).expect("install");
    assert_eq!(LevelFilter::current(), LevelFilter::TRACE);
    assert_eq!(log::max_level(), log::LevelFilter::Trace);
    assert!(log::log_enabled!(target: "odac_agent::uplink", log::Level::Trace));
    assert!(!log::log_enabled!(target: "bollard::docker", log::Level::Trace));
}
