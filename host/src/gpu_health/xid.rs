//! NVIDIA Xid codes as NVIDIA documents them: which ones an application causes (the GPU stays
//! usable), which ones make a GPU unusable until it is reset, the host rebooted or the board
//! replaced, and what each means. Sources: NVIDIA's "Xid Errors" catalog
//! (docs.nvidia.com/deploy/xid-errors) for meanings and actions, and the NVIDIA Kubernetes
//! device plugin's list of application Xids it does not count against a GPU
//! (`13, 31, 43, 45, 68, 109`). Critical here: 48, 62, 64, 74, 79, 92, 94, 95, 119, 120.
//! 63 (a page retirement or row remap *recorded*) is a warning: the GPU works, the remap
//! takes effect at the next reset. Every other code is a warning too: reported, not acted on.

/// How an Xid bears on its GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XidClass {
    /// Caused by the application on the GPU; the GPU stays usable.
    Application,
    /// The GPU cannot be trusted until reset, reboot or replacement.
    Critical,
    /// Reported for the operator, not acted on (unknown codes too).
    Warning,
}

/// One Xid code's class, meaning and fix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XidInfo {
    pub code: u32,
    pub class: XidClass,
    /// NVIDIA's name for the error.
    pub meaning: &'static str,
    /// What NVIDIA says to do (reset, reboot, RMA), where it says something.
    pub fix: Option<&'static str>,
}

const RESET: &str = "stop the GPU's apps and reset it (nvidia-smi -r -i <bus id>), or reboot \
                     the host; if it recurs, contact the vendor (RMA)";
const REBOOT: &str = "reboot the host (a reset cannot reach a GPU that left the bus); check \
                      its power cables, seating and temperature; if it recurs, contact the \
                      vendor (RMA)";
const ECC: &str = "reset the GPU (nvidia-smi -r -i <bus id>) or reboot to retire the failing \
                   memory; if it recurs, contact the vendor (RMA)";
const APP: &str = "check the application on this GPU (its logs, CUDA version, memory access)";

/// NVIDIA's documented codes this agent knows by name.
const TABLE: &[XidInfo] = &[
    app(13, "graphics engine exception"),
    app(31, "GPU memory page fault"),
    app(
        43,
        "GPU stopped processing (the application's channel was reset)",
    ),
    app(45, "preemptive cleanup, due to previous errors"),
    app(68, "NVDEC0 exception (video decoder)"),
    app(109, "context switch timeout"),
    critical(48, "double bit ECC error (DBE)", ECC),
    critical(62, "internal micro-controller halt", RESET),
    critical(
        64,
        "ECC page retirement or row remapping recording failure",
        ECC,
    ),
    critical(74, "NVLink error", RESET),
    critical(79, "GPU has fallen off the bus", REBOOT),
    critical(92, "high single-bit ECC error rate", ECC),
    critical(94, "contained ECC error", ECC),
    critical(95, "uncontained ECC error", ECC),
    critical(119, "GSP RPC timeout", RESET),
    critical(120, "GSP error", RESET),
    warning(
        63,
        "ECC page retirement or row remapping recording event",
        Some("reset the GPU when convenient so the remapped memory takes effect"),
    ),
    warning(
        61,
        "internal micro-controller breakpoint/warning",
        Some(RESET),
    ),
    warning(8, "GPU stopped processing", None),
];

const fn app(code: u32, meaning: &'static str) -> XidInfo {
    XidInfo {
        code,
        class: XidClass::Application,
        meaning,
        fix: Some(APP),
    }
}

const fn critical(code: u32, meaning: &'static str, fix: &'static str) -> XidInfo {
    XidInfo {
        code,
        class: XidClass::Critical,
        meaning,
        fix: Some(fix),
    }
}

const fn warning(code: u32, meaning: &'static str, fix: Option<&'static str>) -> XidInfo {
    XidInfo {
        code,
        class: XidClass::Warning,
        meaning,
        fix,
    }
}

/// What this agent knows of `code`; an unknown code is a warning without a fix.
pub fn xid_info(code: u32) -> XidInfo {
    TABLE
        .iter()
        .copied()
        .find(|x| x.code == code)
        .unwrap_or(XidInfo {
            code,
            class: XidClass::Warning,
            meaning: "an Xid this agent does not know",
            fix: None,
        })
}

/// Codes of one class, ascending (for documentation and tests).
pub fn codes_of(class: XidClass) -> Vec<u32> {
    let mut codes: Vec<u32> = TABLE
        .iter()
        .filter(|x| x.class == class)
        .map(|x| x.code)
        .collect();
    codes.sort_unstable();
    codes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_application_set_is_the_device_plugins() {
        assert_eq!(
            codes_of(XidClass::Application),
            vec![13, 31, 43, 45, 68, 109]
        );
    }

    #[test]
    fn the_critical_set_and_unknown_codes() {
        assert_eq!(
            codes_of(XidClass::Critical),
            vec![48, 62, 64, 74, 79, 92, 94, 95, 119, 120]
        );
        assert_eq!(xid_info(79).meaning, "GPU has fallen off the bus");
        assert!(xid_info(79).fix.unwrap_or_default().contains("reboot"));
        assert!(xid_info(48).fix.unwrap_or_default().contains("RMA"));
        let unknown = xid_info(4242);
        assert_eq!(unknown.class, XidClass::Warning);
        assert_eq!(unknown.fix, None);
    }
}
