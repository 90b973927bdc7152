//! The agent crate's integration tests in one executable (one link instead of one per file;
//! ripgrep's `tests/tests.rs` shape): each module is one subject, and nextest names a test
//! `module::test`. Modules named `*_docker` need the real engine (the fast tier leaves them
//! out); the rest need nothing outside the process. Shared support: `uplink_support` (a scripted
//! control plane), `docker_support` (the engine and test image), `fixture_hosts` (host trees),
//! `git_source_support`, `enroll_support`, `self_update_support` (release keys and update
//! seams).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod appmgr_support;
mod docker_support;
mod enroll_support;
mod fixture_hosts;
mod git_source_support;
mod self_update_support;
mod uplink_support;

mod agent_id_file;
mod appmgr_crash_docker;
mod appmgr_crash_fake;
mod appmgr_docker;
mod appmgr_fake;
mod appmgr_generations;
mod appmgr_hardening_docker;
mod appmgr_host_access_docker;
mod appmgr_isolation;
mod appmgr_refusals_fake;
mod appmgr_rollout_docker;
mod appmgr_start_first_docker;
mod config_cli;
mod crash_runs_docker;
mod deploy_deb;
mod deploy_install;
mod engine_docker;
mod engine_events_docker;
mod engine_events_fake;
mod engine_fake;
mod enroll_cli;
mod exec_session;
mod git_source_docker;
mod git_source_fake;
mod gpu_from_inventory;
mod gpu_health_fake;
mod gpu_health_kmsg;
mod gpu_image_fake;
mod gpu_resolve;
mod host_access_restart_fake;
mod image_gc_docker;
mod image_gc_fake;
mod inventory_cli;
mod inventory_fixtures;
mod inventory_garbage;
mod inventory_limits;
mod inventory_verdict;
mod log_lines_docker;
mod logging_levels;
mod metrics_endpoint;
mod ownership_fake;
mod protocol_conversation;
mod pull_fake;
mod pull_faults;
mod removal_foreign_fake;
mod removal_restart;
mod rollout_fake;
mod rollout_pull_fake;
mod rollout_start_first_fake;
mod self_update_commit;
mod self_update_enroll;
mod self_update_launch;
mod self_update_launcher_process;
mod self_update_stage;
mod self_update_verify;
mod uplink_backoff;
mod uplink_duplicate_keys;
mod uplink_host_access;
mod uplink_http_contract;
mod uplink_live_logs;
mod uplink_logs;
mod uplink_protocol_rules;
mod uplink_resend;
mod uplink_session;
mod uplink_tls;
