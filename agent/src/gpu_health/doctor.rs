//! The `doctor` line about GPU health: whether the kernel log under the host root can be
//! followed (the real `/dev/kmsg`, a stand-in file, or nothing, and why), so an operator
//! knows whether kernel-reported GPU errors (Xids, resets) will be seen.

use std::path::Path;

use super::kmsg::{KmsgState, probe};
use odac_host::inventory::doctor::{Check, CheckStatus};

/// The name of the check.
pub const NAME: &str = "gpu health";

/// One check: `ok` when the kernel log can be read, `warn` (with the fix) when not.
pub fn kmsg_check(root: &Path) -> Check {
    match probe(root) {
        KmsgState::Device(path) => Check {
            name: NAME.to_owned(),
            status: CheckStatus::Ok,
            message: format!(
                "kernel log {} readable: gpu errors (nvidia xids, amdgpu resets, i915 wedges) are watched",
                path.display()
            ),
            reason: None,
            fix: None,
        },
        KmsgState::File(path) => Check {
            name: NAME.to_owned(),
            status: CheckStatus::Info,
            message: format!(
                "{} is a regular file (a stand-in, as in the gpu lab): lines appended to it are watched",
                path.display()
            ),
            reason: None,
            fix: None,
        },
        KmsgState::Absent { path, why } => Check {
            name: NAME.to_owned(),
            status: CheckStatus::Warn,
            message: format!(
                "kernel log {} cannot be read ({why}): gpu errors are not watched and every gpu counts as healthy",
                path.display()
            ),
            reason: None,
            fix: Some(
                "run the agent as root with CAP_SYSLOG (the shipped unit has it, with \
                 DeviceAllow=/dev/kmsg r and ProtectKernelLogs=no), or set host_root to a tree \
                 that has dev/kmsg"
                    .to_owned(),
            ),
        },
    }
}
