//! The lab's host root: a fixture tree, in the formats the agent's scan reads (see
//! `tests/fixtures/hosts`), describing the chosen GPUs (PCI devices under `sys/devices`, the
//! NVIDIA procfs and module, the kfd topology), and a `dev/` whose GPU nodes are real character
//! devices (mknod with `/dev/null`'s numbers 1:3, owned by the render and video groups). The
//! lab's engine sees this `dev/` as its `/dev`, so a node the agent finds is one the engine can
//! pass, and a node removed here vanishes for both.

use std::path::{Path, PathBuf};

use super::error::LabError;
use odac_protocol::{Compute, NodeRule, VramSource};

use super::gpus::{LabGpu, LabGpus};

/// Group owning render nodes and `/dev/kfd` (like `render` on a GPU host).
pub const RENDER_GID: u32 = 4610;
/// Group owning card nodes (like `video`).
pub const VIDEO_GID: u32 = 4044;
/// The NVIDIA driver version the tree shows unless told otherwise (a 550 branch: CUDA 12.4).
pub const NVIDIA_DRIVER: &str = "550.54.14";

/// VRAM of the lab's AMD GPUs unless told otherwise (an MI210: 64 GiB less reserved).
pub const AMD_VRAM_MIB: u64 = 65520;

/// Parses `--vram-mib`: the AMD GPUs' VRAM in MiB, comma-separated in GPU order (the last
/// one repeats), e.g. `16384` or `16384,24576`.
pub fn parse_vram(s: &str) -> Result<Vec<u64>, String> {
    s.split(',')
        .map(|v| match v.trim().parse::<u64>() {
            Ok(n) if (1..=1024 * 1024).contains(&n) => Ok(n),
            _ => Err(format!("{v:?} is not a VRAM size in MiB (1 to 1048576)")),
        })
        .collect()
}

/// Parses `--nvidia-driver`: a dotted numeric version whose branch (major) the CUDA table
/// knows, e.g. `535.183.01`.
pub fn parse_driver(s: &str) -> Result<String, String> {
    let numeric = !s.is_empty()
        && s.split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    if !numeric {
        return Err(format!("{s:?} is not a driver version such as 535.183.01"));
    }
    match odac_host::inventory::cuda::cuda_for_driver(s) {
        Some(_) => Ok(s.to_owned()),
        None => Err(format!(
            "driver {s} is older than the 450 branch (CUDA 11.0)"
        )),
    }
}

/// Character devices every `/dev` needs (the engine and runc use them): name, major, minor.
const BASE_NODES: [(&str, u32, u32); 6] = [
    ("null", 1, 3),
    ("zero", 1, 5),
    ("full", 1, 7),
    ("random", 1, 8),
    ("urandom", 1, 9),
    ("tty", 5, 0),
];

fn write(root: &Path, rel: &str, text: &str) -> Result<(), LabError> {
    let path = root.join(rel);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| LabError::io("create", parent, e))?;
    }
    std::fs::write(&path, text).map_err(|e| LabError::io("write", &path, e))
}

fn symlink(root: &Path, rel: &str, target: &str) -> Result<(), LabError> {
    let path = root.join(rel);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| LabError::io("create", parent, e))?;
    }
    std::os::unix::fs::symlink(target, &path).map_err(|e| LabError::io("symlink", &path, e))
}

/// `mknod PATH c MAJOR MINOR`, mode 0666 (0660 for GPU nodes), group `gid`.
fn mknod(path: &Path, major: u32, minor: u32, mode: &str, gid: u32) -> Result<(), LabError> {
    let out = std::process::Command::new("mknod")
        .args(["-m", mode])
        .arg(path)
        .args(["c", &major.to_string(), &minor.to_string()])
        .output()
        .map_err(|e| LabError::command("mknod", e.to_string()))?;
    if !out.status.success() {
        return Err(LabError::command(
            format!("mknod {}", path.display()),
            String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        ));
    }
    std::os::unix::fs::chown(path, Some(0), Some(gid)).map_err(|e| LabError::io("chown", path, e))
}

/// Builds the tree under `root` (created); returns the GPUs it describes.
pub fn build(
    root: &Path,
    gpus: &LabGpus,
    driver: &str,
    vram_mib: &[u64],
) -> Result<Vec<LabGpu>, LabError> {
    let devices = gpus.devices();
    write(
        root,
        "etc/os-release",
        "NAME=\"odac gpu-lab\"\nPRETTY_NAME=\"odac gpu-lab\"\n",
    )?;
    write(root, "proc/sys/kernel/hostname", "odac-gpu-lab\n")?;
    write(root, "proc/sys/kernel/osrelease", "6.1.0-odac-gpu-lab\n")?;
    write(
        root,
        "proc/meminfo",
        "MemTotal:       32768000 kB\nMemFree:        16384000 kB\n",
    )?;
    write(root, "sys/devices/system/cpu/online", "0-3\n")?;
    let dev = root.join("dev");
    for sub in ["dri", "pts", "shm", "mqueue"] {
        let d = dev.join(sub);
        std::fs::create_dir_all(&d).map_err(|e| LabError::io("create", &d, e))?;
    }
    // the kernel log stand-in the agent follows (odac-sim gpu-lab inject appends to it)
    write(root, "dev/kmsg", "")?;
    for (name, major, minor) in BASE_NODES {
        mknod(&dev.join(name), major, minor, "666", 0)?;
    }
    for gpu in &devices {
        let index = usize::try_from(gpu.index).unwrap_or(usize::MAX);
        let vram = vram_mib
            .get(index)
            .or(vram_mib.last())
            .copied()
            .unwrap_or(AMD_VRAM_MIB);
        pci_device(root, gpu, vram)?;
    }
    let has = |pred: &dyn Fn(&LabGpu) -> bool| devices.iter().any(pred);
    if has(&|g| g.vendor.facts().nodes == NodeRule::PerGpuControl) {
        nvidia(root, &devices, driver)?;
    }
    if has(&|g| g.vendor.facts().compute == Compute::Rocm) {
        amd(root, &devices)?;
    }
    for gpu in &devices {
        if let Some(card) = gpu.card {
            mknod(&dev.join(format!("dri/card{card}")), 1, 3, "660", VIDEO_GID)?;
        }
        if let Some(render) = gpu.render {
            mknod(
                &dev.join(format!("dri/renderD{render}")),
                1,
                3,
                "660",
                RENDER_GID,
            )?;
        }
    }
    Ok(devices)
}

/// `sys/devices/pci0000:00/<addr>/` with ids, class, driver link and DRM minors.
fn pci_device(root: &Path, gpu: &LabGpu, vram_mib: u64) -> Result<(), LabError> {
    let facts = gpu.vendor.facts();
    let vendor = format!("0x{:04x}", facts.pci_id);
    let device = format!("0x{:04x}", facts.lab.device_id);
    let class = format!("0x{:06x}", facts.lab.class);
    let driver = facts.drivers.first().copied().unwrap_or("unknown");
    let dir = format!("sys/devices/pci0000:00/{}", gpu.pci_address);
    write(root, &format!("{dir}/vendor"), &format!("{vendor}\n"))?;
    write(root, &format!("{dir}/device"), &format!("{device}\n"))?;
    write(root, &format!("{dir}/class"), &format!("{class}\n"))?;
    write(root, &format!("{dir}/numa_node"), "0\n")?;
    symlink(
        root,
        &format!("{dir}/driver"),
        &format!("../../../bus/pci/drivers/{driver}"),
    )?;
    let drivers = root.join("sys/bus/pci/drivers").join(driver);
    std::fs::create_dir_all(&drivers).map_err(|e| LabError::io("create", &drivers, e))?;
    if let Some(card) = gpu.card {
        write(
            root,
            &format!("{dir}/drm/card{card}/dev"),
            &format!("226:{card}\n"),
        )?;
    }
    if let Some(render) = gpu.render {
        write(
            root,
            &format!("{dir}/drm/renderD{render}/dev"),
            &format!("226:{render}\n"),
        )?;
    }
    if facts.vram == VramSource::KfdTopology {
        write(
            root,
            &format!("{dir}/product_name"),
            "AMD Instinct MI210 (gpu-lab)\n",
        )?;
        let bytes = vram_mib * 1024 * 1024;
        write(
            root,
            &format!("{dir}/mem_info_vram_total"),
            &format!("{bytes}\n"),
        )?;
    }
    Ok(())
}

/// The NVIDIA driver's procfs and module, `/dev/nvidia*`, and the devices file of the hook.
fn nvidia(root: &Path, devices: &[LabGpu], driver: &str) -> Result<(), LabError> {
    write(
        root,
        "proc/driver/nvidia/version",
        &format!("NVRM version: NVIDIA UNIX x86_64 Kernel Module  {driver}  (gpu-lab)\n"),
    )?;
    write(root, "sys/module/nvidia/version", &format!("{driver}\n"))?;
    let dev = root.join("dev");
    mknod(&dev.join("nvidiactl"), 1, 3, "666", 0)?;
    mknod(&dev.join("nvidia-uvm"), 1, 3, "666", 0)?;
    for gpu in devices
        .iter()
        .filter(|g| g.vendor.facts().nodes == NodeRule::PerGpuControl)
    {
        let uuid = gpu.uuid.clone().unwrap_or_default();
        write(
            root,
            &format!("proc/driver/nvidia/gpus/{}/information", gpu.pci_address),
            &format!(
                "Model: \t\t NVIDIA A100-SXM4-40GB (gpu-lab)\nGPU UUID: \t {uuid}\n\
                 Bus Location: \t {}\nDevice Minor: \t {}\n",
                gpu.pci_address, gpu.index
            ),
        )?;
        mknod(&dev.join(format!("nvidia{}", gpu.index)), 1, 3, "666", 0)?;
    }
    Ok(())
}

/// `/dev/kfd` and the kfd topology: a CPU node 0, then one node per AMD GPU.
fn amd(root: &Path, devices: &[LabGpu]) -> Result<(), LabError> {
    mknod(&root.join("dev/kfd"), 1, 3, "660", RENDER_GID)?;
    let nodes = "sys/class/kfd/kfd/topology/nodes";
    write(
        root,
        &format!("{nodes}/0/properties"),
        "cpu_cores_count 4\nsimd_count 0\n",
    )?;
    for (i, gpu) in devices
        .iter()
        .filter(|g| g.vendor.facts().compute == Compute::Rocm)
        .enumerate()
    {
        let bus = u32::from_str_radix(gpu.pci_address.get(5..7).unwrap_or("0"), 16).unwrap_or(0);
        write(
            root,
            &format!("{nodes}/{}/properties", i + 1),
            &format!(
                "cpu_cores_count 0\nsimd_count 416\nvendor_id 4098\ndevice_id 29711\n\
                 location_id {}\ndomain 0\ndrm_render_minor {}\nunique_id {}\n",
                bus << 8,
                gpu.render.unwrap_or(0),
                1_801_979_520_617_338_000u64 + u64::from(gpu.index)
            ),
        )?;
    }
    Ok(())
}

/// Where the toolkit binaries go in the tree (on the lab engine's PATH as well).
pub fn bin_dir(root: &Path) -> PathBuf {
    root.join("usr/bin")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse_and_refuse_with_the_value_named() {
        assert_eq!(parse_driver("535.183.01"), Ok("535.183.01".to_owned()));
        assert!(parse_driver("535.x").is_err());
        assert_eq!(
            parse_driver("440.33"),
            Err("driver 440.33 is older than the 450 branch (CUDA 11.0)".to_owned())
        );
        assert_eq!(parse_vram("16384, 24576"), Ok(vec![16384, 24576]));
        assert_eq!(
            parse_vram("16g"),
            Err("\"16g\" is not a VRAM size in MiB (1 to 1048576)".to_owned())
        );
    }
}
