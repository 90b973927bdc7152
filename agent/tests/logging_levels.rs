//! The installed subscriber's level hint: records more verbose than every `log_level`
//! directive are skipped where they are made, for tracing's macros and for dependencies that
//! log through the `log` facade alike (nextest runs each test in its own process, so the
//! global subscriber is installed once per test).

use odac_agent::config::LogFormat;
use odac_agent::logging;
use tracing::level_filters::LevelFilter;

#[test]
fn records_above_the_most_verbose_directive_are_skipped_at_the_call_site() {
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
    logging::init("warn,odac_agent=trace", LogFormat::Json).expect("install");
    assert_eq!(LevelFilter::current(), LevelFilter::TRACE);
    assert_eq!(log::max_level(), log::LevelFilter::Trace);
    assert!(log::log_enabled!(target: "odac_agent::uplink", log::Level::Trace));
    assert!(!log::log_enabled!(target: "bollard::docker", log::Level::Trace));
}
