//! Inventory limits degrade instead of failing: a host with more GPU PCI functions than the
//! protocol lists (SR-IOV virtual functions) reports its physical GPUs first, up to the limit,
//! with a scan problem naming what was left out, and its inventory still validates.

use std::path::Path;

use odac_host::engine::EngineCapabilities;
use odac_host::inventory::{Assessment, scan};
use odac_protocol::MAX_GPU_COUNT;

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// An NVIDIA function at `address`; a virtual one links `physfn` to its physical function.
fn function(root: &Path, address: &str, physfn: Option<&str>) {
    let dir = format!("sys/bus/pci/devices/{address}");
    write(root, &format!("{dir}/class"), "0x030200\n");
    write(root, &format!("{dir}/vendor"), "0x10de\n");
    write(root, &format!("{dir}/device"), "0x2330\n");
    if let Some(pf) = physfn {
        std::os::unix::fs::symlink(format!("../{pf}"), root.join(format!("{dir}/physfn"))).unwrap();
    }
}

#[test]
fn more_gpu_functions_than_the_limit_list_the_physical_ones_first() {
    let root = tempfile::tempdir().unwrap();
    // 4 physical GPUs at high bus numbers, 20 virtual functions each at lower ones: sorted
    // by address alone the VFs would crowd the physical GPUs out
    let mut physical = Vec::new();
    for p in 0..4u32 {
        let pf = format!("0000:{:02x}:00.0", 0xc0 + p);
        function(root.path(), &pf, None);
        for v in 0..20u32 {
            let vf = format!("0000:{:02x}:{:02x}.{}", 0x10 + p, v / 8, v % 8);
            function(root.path(), &vf, Some(&pf));
        }
        physical.push(pf);
    }
    let host = scan(root.path());
    let max = MAX_GPU_COUNT as usize;
    assert_eq!(host.gpus.len(), max);
    let ids: Vec<String> = host.gpus.iter().map(|g| g.id()).collect();
    for pf in &physical {
        assert!(ids.contains(pf), "{pf} missing from {ids:?}");
    }
    let indexes: Vec<u32> = host.gpus.iter().map(|g| g.index).collect();
    assert_eq!(indexes, (0..MAX_GPU_COUNT).collect::<Vec<_>>());
    let problem = host
        .problems
        .iter()
        .find(|p| p.problem.contains("left out"))
        .unwrap_or_else(|| panic!("no problem about the limit: {:#?}", host.problems));
    assert!(
        problem.problem.starts_with(
            "84 gpu pci functions (80 sr-iov virtual functions), the inventory lists at most 64: left out 20 (20 virtual functions): "
        ),
        "{}",
        problem.problem
    );
    let inventory = Assessment::new(host, EngineCapabilities::default()).inventory();
    assert_eq!(inventory.gpus.len(), max);
    inventory.validate().unwrap();
}
