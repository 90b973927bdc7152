//! Reason codes as the GPU decision phrases them: the operator's fix for a refusal (the
//! protocol's closed set carries the texts; this narrows them to the vendor at hand) and the
//! one-line detail that goes into a status's `fallback.detail`.

use odac_protocol::{Reason, Vendor};

/// The fix an operator can apply, narrowed to the vendor when one was involved.
pub fn fix(reason: Reason, vendor: Option<Vendor>) -> Option<String> {
    reason
        .fix(vendor)
        .or_else(|| reason.fix(None))
        .map(str::to_owned)
}

/// The text of a fallback's detail, one sentence: `<explanation>: <evidence>`. For
/// `no_device` the evidence already says what was missing and which vendor (the generic
/// explanation speaks of "this vendor", which reads wrong for an automatic request), so it
/// stands alone.
pub fn detail(reason: Reason, evidence: &str) -> String {
    if evidence.is_empty() {
        reason.explanation().to_owned()
    } else if reason == Reason::NoDevice {
        evidence.to_owned()
    } else {
        format!("{}: {evidence}", reason.explanation())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixes_are_vendor_specific_where_they_can_be() {
        let nvidia = fix(Reason::NoContainerRuntime, Some(Vendor::Nvidia)).unwrap_or_default();
        assert!(nvidia.contains("nvidia-ctk runtime configure --runtime=docker"));
        let amd = fix(Reason::NoContainerRuntime, Some(Vendor::Amd)).unwrap_or_default();
        assert!(amd.contains("/dev/kfd"));
        assert_eq!(fix(Reason::NoDevice, None), None);
        assert_eq!(
            detail(Reason::NoDevice, "no nvidia gpu on the pci bus"),
            "no nvidia gpu on the pci bus",
            "said once"
        );
        assert_eq!(
            detail(Reason::NoDevice, ""),
            "no GPU of this vendor was found on the PCI bus"
        );
        assert_eq!(
            detail(Reason::NoDriver, "no usable nvidia gpu"),
            "a GPU is present but its kernel driver is not loaded: no usable nvidia gpu"
        );
    }
}
