//! The protocol crate's integration tests in one executable (one link instead of one per file;
//! ripgrep's `tests/tests.rs` shape): each module is one subject, and nextest names a test
//! `module::test` (`cargo nextest run -p odac-protocol -E 'test(/^golden::/)'`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod decode_errors;
mod deploy_example;
mod golden;
mod gpu_health_wire;
mod identity;
mod odac_compat;
mod props;
mod protocol_doc;
mod schema_drift;
mod schema_rules;
