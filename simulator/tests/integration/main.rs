//! The simulator crate's integration tests in one executable (one link instead of one per
//! file; ripgrep's `tests/tests.rs` shape): each module is one subject, and nextest names a test
//! `module::test`. Modules named `*_browser` drive headless Chromium (`browser`), `demo` runs
//! the demo against the real engine; the rest need nothing outside the process. `common` starts
//! a simulator on loopback.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod browser;
mod common;

mod agent_update;
mod agent_update_browser;
mod agent_ws;
mod api;
mod app_update;
mod cli;
mod cli_app_failures;
mod cli_crash_story;
mod cli_diagnosis;
mod cli_escapes;
mod cli_gpu_auto;
mod cli_gpu_facts;
mod conformance;
mod dashboard_browser;
mod dashboard_crash_browser;
mod dashboard_defects_browser;
mod dashboard_fleet_browser;
mod dashboard_gpu_browser;
mod dashboard_logs_browser;
mod dashboard_phone_browser;
mod demo;
mod edges;
mod exec_terminal_browser;
mod exec_tickets;
mod faults;
mod fleet;
mod identity;
mod liveness;
mod logs_relay;
mod protocol_rules;
mod removal_resend;
mod secrets;
mod serve_flags;
