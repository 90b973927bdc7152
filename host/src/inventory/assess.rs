//! An assessment bundles one scan with the engine's capabilities and the verdicts drawn from
//! them: what the `inventory` and `doctor` commands print, and what the app manager allocates
//! from.

use std::collections::BTreeMap;

use odac_protocol::Inventory;
use serde::Serialize;

use super::model::{Gpu, HostScan, Vendor};
use super::verdict::{VendorVerdict, gpu_passable, verdicts};
use super::wire::to_inventory;
use crate::engine::EngineCapabilities;

/// A scan, the engine's capabilities and the per-vendor verdicts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Assessment {
    pub scan: HostScan,
    pub engine: EngineCapabilities,
    pub verdicts: BTreeMap<Vendor, VendorVerdict>,
    /// Free VRAM in MiB per GPU id, from a fresh telemetry reading (empty when there is
    /// none): `gpu.min_vram_mib` is checked against it where present, else against the total.
    pub free_vram_mib: BTreeMap<String, u64>,
    /// Unhealthy GPUs (id → the error, e.g. `xid 79: GPU has fallen off the bus`), from the
    /// agent's GPU health watch: not given to new containers.
    pub unhealthy: BTreeMap<String, String>,
}

impl Assessment {
    /// Decide the verdicts for this scan and engine.
    pub fn new(scan: HostScan, engine: EngineCapabilities) -> Self {
        let verdicts = verdicts(&scan, &engine);
        Self {
            scan,
            engine,
            verdicts,
            free_vram_mib: BTreeMap::new(),
            unhealthy: BTreeMap::new(),
        }
    }

    /// The verdict for one vendor (always present).
    pub fn verdict(&self, vendor: Vendor) -> Option<&VendorVerdict> {
        self.verdicts.get(&vendor)
    }

    /// GPUs of this vendor that can be passed into a container now, in index order.
    pub fn passable_gpus(&self, vendor: Vendor) -> Vec<&Gpu> {
        let Some(verdict) = self.verdicts.get(&vendor) else {
            return Vec::new();
        };
        self.scan
            .gpus
            .iter()
            .filter(|g| g.vendor == vendor && gpu_passable(&self.scan, g, verdict))
            .collect()
    }

    /// Host paths of the device nodes to pass for these GPUs with mechanism `device_nodes`:
    /// each GPU's own present nodes (card, render of every partition, `/dev/nvidiaN`), plus
    /// `/dev/kfd` once when an AMD GPU is among them.
    pub fn device_paths(&self, gpus: &[&Gpu]) -> Vec<String> {
        let mut paths: Vec<String> = Vec::new();
        if Self::need_shared_node(gpus) && self.scan.amd.kfd_node.present {
            paths.push(self.scan.amd.kfd_node.path.clone());
        }
        for node in gpus
            .iter()
            .flat_map(|g| g.own_nodes())
            .filter(|n| n.present)
        {
            if !paths.contains(&node.path) {
                paths.push(node.path.clone());
            }
        }
        paths
    }

    /// Numeric group ids owning these GPUs' device nodes (and `/dev/kfd` for AMD), sorted:
    /// add them to the container's `GroupAdd`.
    pub fn group_ids(&self, gpus: &[&Gpu]) -> Vec<u32> {
        let mut gids: Vec<u32> = gpus
            .iter()
            .flat_map(|g| g.own_nodes())
            .filter_map(|n| n.gid)
            .collect();
        if Self::need_shared_node(gpus)
            && let Some(gid) = self.scan.amd.kfd_node.gid
        {
            gids.push(gid);
        }
        gids.sort_unstable();
        gids.dedup();
        gids
    }

    /// Whether a vendor among `gpus` needs its shared node (`/dev/kfd`) besides each GPU's own.
    fn need_shared_node(gpus: &[&Gpu]) -> bool {
        gpus.iter()
            .any(|g| g.vendor.facts().shared_node().is_some())
    }

    /// The protocol inventory.
    pub fn inventory(&self) -> Inventory {
        to_inventory(&self.scan, &self.engine, &self.verdicts)
    }
}
