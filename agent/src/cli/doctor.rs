//! `odac-agent doctor`: the host and engine checks of [`inventory::doctor`](odac_host::inventory::doctor)
//! plus, against a live engine, the ownership checks of
//! [`appmgr::local::doctor`](crate::appmgr::local::doctor). Exit 0 when nothing present is broken,
//! 1 when present hardware (or the asked engine) is unusable, 2 on usage errors, 78 for an unusable
//! `--config`; ownership conflicts are warnings.

use super::EXIT_CONFIG;
use super::inventory::{CliError, ScanArgs, assess, usage_error};
use super::output::emit;
use crate::appmgr::local::doctor::{check, ownership_checks};
use crate::cli::target::{AgentSetArgs, TargetArgs};
use odac_host::inventory::doctor::{CheckStatus, DoctorReport, doctor, render};

/// `odac-agent doctor` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct DoctorArgs {
    /// Host and engine checks.
    #[command(flatten)]
    pub scan: ScanArgs,
    /// The agent set whose containers the ownership check looks at.
    #[command(flatten)]
    pub set: AgentSetArgs,
}

/// The doctor's host and engine checks.
pub fn doctor_report(args: &ScanArgs) -> Result<DoctorReport, CliError> {
    let (a, asked) = assess(args)?;
    let mut report = doctor(&a, asked);
    report
        .checks
        .push(crate::gpu_health::doctor::kmsg_check(&args.root));
    Ok(report)
}

/// Prints a doctor report; its exit code (2 when it cannot be printed).
pub fn print_report(report: &DoctorReport, json: bool) -> i32 {
    if json {
        match serde_json::to_string_pretty(report) {
            Ok(json) => emit(&format!("{json}\n")),
            Err(e) => return usage_error(&CliError::Json(e)),
        }
    } else {
        emit(&render(report));
    }
    report.exit_code
}

/// `odac-agent doctor`: exit 0 when nothing present is broken, 1 when present hardware (or the
/// asked engine) is unusable, 2 on usage errors, 78 for an unusable `--config`.
pub fn doctor_command(args: &DoctorArgs) -> i32 {
    let mut report = match doctor_report(&args.scan) {
        Ok(r) => r,
        Err(e) => return usage_error(&e),
    };
    let live_engine = !args.scan.no_engine && args.scan.docker_info.is_none();
    if live_engine {
        let target = TargetArgs {
            set: args.set.clone(),
            docker_host: args.scan.docker_host.clone(),
            lock_dir: None,
        }
        .resolve();
        let target = match target {
            Ok(t) => t,
            Err(e) => {
                eprintln!("odac-agent: {e}");
                return EXIT_CONFIG;
            }
        };
        let checks = match super::output::local_runtime() {
            Ok(rt) => rt.block_on(ownership_checks(&target)),
            Err(e) => vec![check(
                CheckStatus::Info,
                format!("not checked: cannot start the async runtime: {e}"),
                None,
            )],
        };
        report.checks.extend(checks);
    }
    print_report(&report, args.scan.json)
}
