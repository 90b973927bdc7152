//! A host tree full of broken symlinks, unreadable entries (sockets, FIFOs, directories where
//! files belong), bytes that are not UTF-8 and plain garbage: the scan must finish, report
//! problems with their paths, and still find what is readable.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;

use odac_host::engine::EngineCapabilities;
use odac_host::inventory::doctor::doctor;
use odac_host::inventory::{Assessment, Vendor, scan};
use odac_protocol::Reason;

fn write(root: &Path, rel: &str, bytes: &[u8]) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, bytes).unwrap();
}

fn dir(root: &Path, rel: &str) {
    fs::create_dir_all(root.join(rel)).unwrap();
}

fn link(root: &Path, rel: &str, target: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    symlink(target, path).unwrap();
}

/// A FIFO (std has no mkfifo and unsafe code is forbidden: use the coreutils binary).
fn fifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
}

fn build(root: &Path) {
    let pci = "sys/bus/pci/devices";
    // broken device symlink
    link(
        root,
        &format!("{pci}/0000:01:00.0"),
        "../../../devices/pci0000:00/nowhere",
    );
    // class is not UTF-8
    write(root, &format!("{pci}/0000:02:00.0/class"), b"\xff\xfe\x03");
    write(root, &format!("{pci}/0000:02:00.0/vendor"), b"0x10de\n");
    // vendor is garbage
    write(root, &format!("{pci}/0000:03:00.0/class"), b"0x030000\n");
    write(
        root,
        &format!("{pci}/0000:03:00.0/vendor"),
        b"not hex at all",
    );
    // a real NVIDIA GPU with a directory where `device` belongs, a dangling driver link and
    // a socket where subsystem_vendor belongs
    write(root, &format!("{pci}/0000:04:00.0/class"), b"0x030200");
    write(root, &format!("{pci}/0000:04:00.0/vendor"), b"0x10de");
    dir(root, &format!("{pci}/0000:04:00.0/device"));
    link(
        root,
        &format!("{pci}/0000:04:00.0/driver"),
        "../../../bus/pci/drivers/nvidia",
    );
    let sock = root.join(format!("{pci}/0000:04:00.0/subsystem_vendor"));
    let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    fifo(&root.join(format!("{pci}/0000:04:00.0/subsystem_device")));
    // class file that is a FIFO: must not hang
    dir(root, &format!("{pci}/0000:05:00.0"));
    fifo(&root.join(format!("{pci}/0000:05:00.0/class")));
    // procfs: information is a directory, version is binary garbage
    dir(root, "proc/driver/nvidia/gpus/0000:04:00.0/information");
    write(
        root,
        "proc/driver/nvidia/version",
        b"\x00\x01\x02garbage\xff",
    );
    write(
        root,
        "proc/driver/nvidia/gpus/not-an-address/information",
        b"Model: x",
    );
    // kfd: garbage properties, non-numeric node, properties as a broken link
    write(
        root,
        "sys/class/kfd/kfd/topology/nodes/1/properties",
        b"simd_count lots\n\xff",
    );
    write(
        root,
        "sys/class/kfd/kfd/topology/nodes/x/properties",
        b"simd_count 4\n",
    );
    link(
        root,
        "sys/class/kfd/kfd/topology/nodes/2/properties",
        "missing",
    );
    // drm: a symlink loop and a broken device link
    link(root, "sys/class/drm/card0", "card0");
    link(root, "sys/class/drm/renderD128/device", "../../nowhere");
    // CDI: garbage YAML, non-UTF-8 JSON, a directory named like a spec, a spec with a bad kind
    write(root, "etc/cdi/garbage.yaml", b": : :\n- [\n");
    write(root, "etc/cdi/binary.json", b"{\"cdiVersion\": \"\xff\"}");
    dir(root, "etc/cdi/dir.yaml");
    write(
        root,
        "var/run/cdi/badkind.json",
        b"{\"cdiVersion\":\"0.6.0\",\"kind\":\"nokind\",\"devices\":[{\"name\":\"a\"}]}",
    );
    // host facts: garbage everywhere
    write(root, "proc/meminfo", b"MemTotal: lots kB\n");
    write(root, "sys/devices/system/cpu/online", b"x-y");
    write(root, "etc/os-release", b"PRETTY_NAME=\"\xff\xfe\"\n");
    dir(root, "proc/sys/kernel/osrelease");
    // device nodes: /dev/kfd broken, /dev/dri a file
    link(root, "dev/kfd", "nowhere");
    write(root, "dev/dri", b"not a dir");
    // toolkit binary that is a directory
    dir(root, "usr/bin/nvidia-container-runtime-hook");
}

#[test]
fn garbage_tree_yields_problems_never_a_panic() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    build(root);

    let s = scan(root);
    let problem_paths: Vec<&str> = s.problems.iter().map(|p| p.path.as_str()).collect();
    for expected in [
        "/sys/bus/pci/devices/0000:01:00.0",
        "/sys/bus/pci/devices/0000:02:00.0/class",
        "/sys/bus/pci/devices/0000:03:00.0/vendor",
        "/sys/bus/pci/devices/0000:04:00.0/device",
        "/sys/bus/pci/devices/0000:04:00.0/subsystem_vendor",
        "/proc/driver/nvidia/gpus/0000:04:00.0/information",
        "/proc/driver/nvidia/version",
        "/sys/class/kfd/kfd/topology/nodes/2/properties",
        "/sys/class/drm/card0",
        "/etc/cdi/garbage.yaml",
        "/etc/cdi/binary.json",
        "/etc/cdi/dir.yaml",
        "/var/run/cdi/badkind.json",
        "/proc/meminfo",
        "/etc/os-release",
        "/proc/sys/kernel/osrelease",
        "/dev/kfd",
    ] {
        assert!(
            problem_paths.contains(&expected),
            "no problem recorded for {expected}; got {problem_paths:#?}"
        );
    }

    // What was readable is still there: the NVIDIA GPU at 04:00.0, driver from the dangling link.
    assert_eq!(s.gpus.len(), 1, "{:#?}", s.gpus);
    let gpu = &s.gpus[0];
    assert_eq!(gpu.pci_address.as_deref(), Some("0000:04:00.0"));
    assert_eq!(gpu.vendor, Vendor::Nvidia);
    assert_eq!(gpu.driver.as_deref(), Some("nvidia"));
    assert_eq!(gpu.pci.device_id, None);
    assert_eq!(s.host.memory_bytes, None);
    assert_eq!(s.host.cpus, None);
    assert!(s.cdi.specs.is_empty());
    assert!(!s.amd.kfd_node.present);
    assert!(s.nvidia.toolkit.is_empty(), "a directory is not a binary");

    // The verdict and the doctor still work on it.
    let a = Assessment::new(s, EngineCapabilities::unreachable("test"));
    let nvidia = a.verdict(Vendor::Nvidia).unwrap();
    assert_eq!(nvidia.reason, Some(Reason::EngineUnavailable));
    a.inventory().validate().unwrap();
    let report = doctor(&a, false);
    assert_eq!(report.exit_code, 1);
}

#[test]
fn missing_root_contents_are_simply_absent() {
    let tmp = tempfile::tempdir().unwrap();
    let s = scan(tmp.path());
    assert!(s.gpus.is_empty());
    assert!(s.problems.is_empty(), "{:#?}", s.problems);
    let a = Assessment::new(s, EngineCapabilities::unreachable("test"));
    for v in Vendor::ALL {
        assert_eq!(a.verdict(v).unwrap().reason, Some(Reason::NoDevice));
    }
}
