//! The end-to-end scenarios in one executable (one link instead of one per file): each module
//! starts the real binaries (agent, simulator, CLI) against the real Docker engine, a real
//! registry, systemd or the GPU lab's private engine, except `in_process`, which runs the agent
//! against a fake engine inside the test. nextest names a test `module::test`; the heavy ones
//! run one at a time (`.config/nextest.toml`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod app_exec;
mod app_exec_backpressure;
mod app_logs;
mod blackhole;
mod demo_exit;
mod engine_refusal;
mod engine_reload;
mod engine_restart;
mod enroll;
mod enroll_code;
mod fault_matrix;
mod git_source;
mod gpu_health_lab;
mod gpu_lab;
mod gpu_lab_enroll;
mod gpu_telemetry;
mod gpu_workloads;
mod host_access;
mod idle_agent;
mod impersonation;
mod in_process;
mod logs_follow;
mod metrics;
mod one_engine;
mod readme_demo;
mod readme_registry;
mod registry;
mod registry_login;
mod scale_200_apps;
mod secrets;
mod seed_commands;
mod systemd_self_update;
mod systemd_service;
mod walkthrough;
