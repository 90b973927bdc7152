//! The classifier on the drivers' real messages (sources in tests/fixtures/kernel-log/README.md)
//! and on garbage.

#![allow(clippy::unwrap_used)]

use super::*;

fn fixture(name: &str) -> String {
    let path = format!(
        "{}/../tests/fixtures/kernel-log/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap()
}

#[test]
fn nvidia_critical_xids_from_real_captures() {
    let e = classify(&fixture("nvidia-xid79.kmsg")).unwrap();
    assert_eq!(e.vendor, Vendor::Nvidia);
    assert_eq!(e.pci.as_deref(), Some("0000:0f:00"));
    assert_eq!(e.severity, Severity::Critical);
    assert_eq!(e.xid, Some(79));
    assert_eq!(e.summary, "xid 79: GPU has fallen off the bus");
    assert!(e.fix.unwrap().contains("reboot"));
    assert!(e.message.starts_with("NVRM: Xid (PCI:0000:0f:00): 79"));

    let e = classify(&fixture("nvidia-xid48.kmsg")).unwrap();
    assert_eq!(e.pci.as_deref(), Some("0000:07:00"));
    assert_eq!(e.severity, Severity::Critical);
    assert_eq!(e.xid, Some(48));
    assert!(e.summary.contains("double bit ECC"));
}

#[test]
fn nvidia_application_xids_stay_with_the_app() {
    let e = classify(&fixture("nvidia-xid13.kmsg")).unwrap();
    assert_eq!(e.severity, Severity::Application);
    assert_eq!(e.xid, Some(13));
    let line = "[Fri Aug 30 11:43:14 2024] NVRM: Xid (PCI:0000:cb:00): 109, pid=1797828, \
                name=pt_main_thread, Ch 00000008, errorString CTX SWITCH TIMEOUT, Info 0x58005";
    // a dmesg --ctime date is not a kernel record's prefix: only kmsg and numeric stamps are read
    assert_eq!(classify(line), None);
    let line = "[ 2674.170431] NVRM: Xid (PCI:0000:cb:00): 109, pid=1797828, name=pt_main_thread, \
                Ch 00000008, errorString CTX SWITCH TIMEOUT, Info 0x58005";
    let e = classify(line).unwrap();
    assert_eq!((e.severity, e.xid), (Severity::Application, Some(109)));
    // Bumblebee #677: an old driver without pid=
    let e = classify("[24128.834365] NVRM: Xid (PCI:0000:01:00): 31, Ch 00000003, engmask 00000101, intr 10000000").unwrap();
    assert_eq!((e.severity, e.xid), (Severity::Application, Some(31)));
    assert_eq!(e.pci.as_deref(), Some("0000:01:00"));
}

#[test]
fn unknown_and_warning_xids_are_warnings() {
    let e = classify("NVRM: Xid (PCI:0000:01:00): 32, Channel ID 00000000 intr 00004000").unwrap();
    assert_eq!(e.severity, Severity::Warning);
    assert_eq!(e.fix, None);
    let e =
        classify("NVRM: Xid (PCI:0000:01:00): 63, pid='<unknown>', name=<unknown>, Row Remapper")
            .unwrap();
    assert_eq!(e.severity, Severity::Warning);
}

#[test]
fn amd_ring_timeouts_and_resets_in_both_kernel_formats() {
    let e = classify(&fixture("amd-ring-timeout.kmsg")).unwrap();
    assert_eq!(e.vendor, Vendor::Amd);
    assert_eq!(e.pci.as_deref(), Some("0000:03:00.0"));
    assert_eq!(e.severity, Severity::Critical);
    assert_eq!(e.summary, "ring comp_1.1.0 timeout");
    let e = classify(&fixture("amd-ring-reset.kmsg")).unwrap();
    assert_eq!(
        (e.severity, e.pci.as_deref()),
        (Severity::Reset, Some("0000:03:00.0"))
    );

    // pop-os/pop #2132: the older format names no device; the reset line does
    let e = classify("[37937.168911] [drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring gfx_0.0.0 timeout, signaled seq=228661, emitted seq=228662").unwrap();
    assert_eq!((e.severity, e.pci), (Severity::Critical, None));
    let e = classify("[37937.169164] amdgpu 0000:03:00.0: amdgpu: GPU reset begin!").unwrap();
    assert_eq!(e.severity, Severity::Critical);
    let e = classify("amdgpu 0000:28:00.0: GPU reset begin!. Source:  1").unwrap();
    assert_eq!(e.pci.as_deref(), Some("0000:28:00.0"));
    let e = classify("amdgpu 0000:08:00.0: amdgpu: GPU reset(2) succeeded!").unwrap();
    assert_eq!(e.severity, Severity::Reset);
    // neither a ring test failure nor a ring reset start is a timeout
    assert_eq!(
        classify(
            "amdgpu 0000:0c:00.0: [drm:amdgpu_ring_test_helper [amdgpu]] *ERROR* ring kiq_2.1.0 test failed (-110)"
        ),
        None
    );
    assert_eq!(
        classify("amdgpu 0000:28:00.0: Starting gfx_0.0.0 ring reset"),
        None
    );
}

#[test]
fn intel_hangs_are_application_events_and_wedges_are_critical() {
    let e =
        classify("i915 0000:00:02.0: [drm] GPU HANG: ecode 9:1:85dffffb, in Xorg [1234]").unwrap();
    assert_eq!(e.vendor, Vendor::Intel);
    assert_eq!(e.pci.as_deref(), Some("0000:00:02.0"));
    assert_eq!(e.severity, Severity::Application);
    assert!(e.summary.contains("Xorg [1234]"));
    let e = classify("i915 0000:00:02.0: [drm] *ERROR* Failed to reset chip").unwrap();
    assert_eq!(e.severity, Severity::Critical);
}

#[test]
fn garbage_is_skipped_never_a_panic() {
    for line in [
        "",
        ";",
        "6,1,2,-;",
        "NVRM: Xid (",
        "NVRM: Xid (PCI:0000:01:00): ",
        "NVRM: Xid (PCI:0000:01:00): x79",
        "NVRM: Xid (PCI:0000:01:00): 99999999999999999999, overflow",
        "amdgpu ",
        "amdgpu 0000:zz:00.0: ring gfx timeout",
        "[",
        "[]",
        "usb 1-1: new high-speed USB device number 2 using xhci_hcd",
        "\u{1F600}NVRM: Xid",
    ] {
        let got = classify(line);
        assert!(got.is_none(), "{line:?} gave {got:?}");
    }
    // a huge message is kept clipped on a char boundary
    let long = format!("NVRM: Xid (PCI:0000:01:00): 79, {}", "é".repeat(2000));
    let e = classify(&long).unwrap();
    assert!(e.message.len() <= 512);
}
