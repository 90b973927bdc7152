//! `odac-sim gpu-lab`: a private Docker engine configured like a GPU host (`crate::gpu_lab`)
//! until Ctrl-C; `gpu-lab inject --dir DIR …` breaks a GPU of a running lab and `gpu-lab
//! engine stop|start --dir DIR` stops and starts its engine.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use odac_protocol::Vendor;

use crate::gpu_lab::control::EngineAction;
use crate::gpu_lab::inject::{Fault, inject, parse_vendor};
use crate::gpu_lab::{LabConfig, LabGpus, NvidiaRuntime, host_root};

/// `odac-sim gpu-lab`'s arguments: a new lab, or an action on a running one.
#[derive(Debug, Args)]
#[command(subcommand_negates_reqs = true, args_conflicts_with_subcommands = true)]
pub struct GpuLabArgs {
    /// Lab dir (created, must be empty; removed on exit).
    #[arg(long, required = true)]
    dir: Option<PathBuf>,
    /// GPUs to simulate: vendor:count, comma-separated.
    #[arg(long, default_value = "nvidia:2,amd:2,intel:1", value_parser = LabGpus::parse)]
    gpus: LabGpus,
    /// The `nvidia` runtime: not registered, registered, or registered as the default.
    #[arg(long, value_enum, default_value_t)]
    nvidia_runtime: NvidiaRuntime,
    /// The NVIDIA driver version the lab shows, e.g. 535.183.01 (CUDA 12.2); the hook
    /// refuses images whose NVIDIA_REQUIRE_CUDA its CUDA version cannot meet.
    #[arg(long, value_name = "VERSION", default_value = host_root::NVIDIA_DRIVER, value_parser = host_root::parse_driver)]
    nvidia_driver: String,
    /// VRAM of the AMD GPUs in MiB, comma-separated in GPU order (the last repeats),
    /// e.g. 16384,24576; the agent reads it from sysfs (mem_info_vram_total).
    #[arg(long, value_name = "MIB[,MIB…]", default_value = "65520", value_parser = host_root::parse_vram)]
    vram_mib: ::std::vec::Vec<u64>,
    /// Stop (as on SIGTERM) when the process that started the lab exits.
    #[arg(long)]
    stop_with_parent: bool,
    /// A fault in a running lab instead of a new lab.
    #[command(subcommand)]
    action: Option<LabAction>,
}

/// `odac-sim gpu-lab inject` and `engine`.
#[derive(Debug, Subcommand)]
enum LabAction {
    /// Stop the running lab's private engine (its containers stop with it) or start it again.
    Engine {
        /// The running lab's dir.
        #[arg(long)]
        dir: PathBuf,
        /// stop or start.
        #[arg(value_enum)]
        action: EngineAction,
    },
    /// Break (or mend) one GPU of the running lab at --dir, as the host would show it.
    Inject {
        /// The running lab's dir.
        #[arg(long)]
        dir: PathBuf,
        /// What happens to the GPU.
        #[command(subcommand)]
        fault: LabFault,
    },
}

/// One fault of `gpu-lab inject`.
#[derive(Debug, Subcommand)]
enum LabFault {
    /// The NVIDIA kernel module reports Xid N for NVIDIA GPU --gpu (a line in the kmsg stand-in).
    Xid {
        /// The Xid, e.g. 79 (fallen off the bus), 48 (double-bit ECC), 13 (application).
        code: u32,
        /// The lab's NVIDIA GPU index.
        #[arg(long)]
        gpu: u32,
    },
    /// The GPU's PCI device leaves the host root's sysfs.
    Vanish {
        /// The GPU index among the vendor's lab GPUs.
        #[arg(long)]
        gpu: u32,
        /// nvidia, amd or intel.
        #[arg(long, default_value = "nvidia", value_parser = parse_vendor)]
        vendor: Vendor,
    },
    /// A vanished GPU comes back.
    Return {
        /// The GPU index among the vendor's lab GPUs.
        #[arg(long)]
        gpu: u32,
        /// nvidia, amd or intel.
        #[arg(long, default_value = "nvidia", value_parser = parse_vendor)]
        vendor: Vendor,
    },
}

impl GpuLabArgs {
    /// Runs a lab until Ctrl-C, or injects a fault into / controls the engine of a running one.
    pub async fn run(self) -> anyhow::Result<()> {
        match self.action {
            Some(LabAction::Inject { dir, fault }) => {
                let (fault, vendor, gpu) = match fault {
                    LabFault::Xid { code, gpu } => (Fault::Xid(code), Vendor::Nvidia, gpu),
                    LabFault::Vanish { gpu, vendor } => (Fault::Vanish, vendor, gpu),
                    LabFault::Return { gpu, vendor } => (Fault::Return, vendor, gpu),
                };
                println!("{}", inject(&dir, fault, vendor, gpu)?);
            }
            Some(LabAction::Engine { dir, action }) => {
                let said = crate::gpu_lab::control::request(&dir, action).await?;
                println!("{said}");
            }
            None => {
                let Some(dir) = self.dir else {
                    anyhow::bail!("gpu-lab: --dir is required");
                };
                let config = LabConfig {
                    dir,
                    gpus: self.gpus,
                    nvidia_runtime: self.nvidia_runtime,
                    nvidia_driver: self.nvidia_driver,
                    vram_mib: self.vram_mib,
                    stop_with_parent: self.stop_with_parent,
                };
                crate::gpu_lab::run(&config).await?;
            }
        }
        Ok(())
    }
}
