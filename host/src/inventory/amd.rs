//! AMD ROCm evidence: the kfd topology under `/sys/class/kfd/kfd/topology/nodes` (one node per
//! GPU, or many per GPU when it is partitioned), `/dev/kfd`, and per-GPU VRAM.

use super::fsread::{Reader, space_value};
use super::model::{AmdHost, KfdNode};

/// Host-wide AMD state.
pub(crate) fn scan_host(r: &mut Reader) -> AmdHost {
    let topology = r.host("sys/class/kfd/kfd/topology");
    let kfd_topology = r.exists(&topology);
    let kfd_node = r.node("/dev/kfd");
    let mut kfd_gpu_nodes = Vec::new();
    if kfd_topology {
        for (name, path) in r.entries(&topology.join("nodes")) {
            let Ok(node) = name.parse::<u32>() else {
                continue;
            };
            let props_path = path.join("properties");
            let Some(props) = r.text(&props_path) else {
                continue;
            };
            if let Some(n) = parse_node(node, &props) {
                kfd_gpu_nodes.push(n);
            }
        }
        kfd_gpu_nodes.sort_by_key(|n| n.node);
    }
    AmdHost {
        kfd_topology,
        kfd_node,
        kfd_gpu_nodes,
    }
}

/// A kfd node's `properties`; `None` for CPU nodes (no SIMDs).
pub(crate) fn parse_node(node: u32, props: &str) -> Option<KfdNode> {
    let num = |key: &str| space_value(props, key).and_then(|v| v.parse::<u64>().ok());
    if num("simd_count").unwrap_or(0) == 0 {
        return None;
    }
    let pci_address = num("location_id").map(|loc| {
        let domain = num("domain").unwrap_or(0);
        format!(
            "{:04x}:{:02x}:{:02x}.{:x}",
            domain,
            (loc >> 8) & 0xff,
            (loc >> 3) & 0x1f,
            loc & 0x7
        )
    });
    Some(KfdNode {
        node,
        device_id: num("device_id").and_then(|v| u32::try_from(v).ok()),
        pci_address,
        render_minor: num("drm_render_minor").and_then(|v| u32::try_from(v).ok()),
        unique_id: space_value(props, "unique_id")
            .filter(|u| *u != "0")
            .map(str::to_owned),
    })
}

/// `dddd:bb:dd` of a PCI address: kfd partitions of one GPU differ only in the function.
pub(crate) fn slot_of(addr: &str) -> &str {
    addr.rsplit_once('.').map_or(addr, |(slot, _)| slot)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_node_properties() {
        let props = "cpu_cores_count 0\nsimd_count 256\nvendor_id 4098\ndevice_id 26720\nlocation_id 6400\ndrm_render_minor 128\nunique_id 14073402507705256556\n";
        let node = parse_node(1, props).unwrap();
        assert_eq!(node.pci_address.as_deref(), Some("0000:19:00.0"));
        assert_eq!(node.render_minor, Some(128));
        assert_eq!(node.device_id, Some(0x6860));
        assert!(parse_node(0, "cpu_cores_count 20\nsimd_count 0\n").is_none());
    }

    #[test]
    fn slot_drops_function() {
        assert_eq!(slot_of("0000:05:00.3"), "0000:05:00");
    }
}
