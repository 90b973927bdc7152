//! Which concrete GPUs an app gets. Apps may share a GPU, so allocation never fails because a
//! GPU is taken; it spreads apps over the least-used GPUs instead, and fails only when `count`
//! is larger than the number of usable GPUs of the vendor. [`Allocations`] counts the apps per
//! GPU; the app manager rebuilds it from its containers' labels after an agent restart.

use std::collections::BTreeMap;

use odac_protocol::GpuCount;

use crate::inventory::Gpu;

/// How many apps hold each GPU, keyed by [`Gpu::id`] (the PCI address).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Allocations {
    users: BTreeMap<String, u32>,
}

impl Allocations {
    /// No GPU in use.
    pub fn new() -> Self {
        Self::default()
    }

    /// Record that one more app holds each of these GPUs.
    pub fn add<S: AsRef<str>>(&mut self, gpu_ids: &[S]) {
        for id in gpu_ids {
            *self.users.entry(id.as_ref().to_owned()).or_default() += 1;
        }
    }

    /// Record that one app released these GPUs.
    pub fn remove<S: AsRef<str>>(&mut self, gpu_ids: &[S]) {
        for id in gpu_ids {
            if let Some(n) = self.users.get_mut(id.as_ref()) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    self.users.remove(id.as_ref());
                }
            }
        }
    }

    /// How many apps hold this GPU.
    pub fn users(&self, gpu_id: &str) -> u32 {
        self.users.get(gpu_id).copied().unwrap_or(0)
    }

    /// Every GPU in use with its number of apps.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u32)> {
        self.users.iter().map(|(k, v)| (k.as_str(), *v))
    }
}

/// More GPUs were asked for than the vendor has usable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Insufficient {
    /// How many were asked for.
    pub wanted: u32,
    /// How many usable GPUs there are.
    pub available: usize,
}

/// Pick `count` of `gpus` (all of one vendor, usable): every one for `all`, else the
/// least-used ones (ties broken by index), returned in index order.
pub fn allocate<'a>(
    gpus: &[&'a Gpu],
    count: GpuCount,
    allocations: &Allocations,
) -> Result<Vec<&'a Gpu>, Insufficient> {
    let mut chosen: Vec<&'a Gpu> = match count {
        GpuCount::All => {
            if gpus.is_empty() {
                return Err(Insufficient {
                    wanted: 1,
                    available: 0,
                });
            }
            gpus.to_vec()
        }
        GpuCount::N(n) => {
            let wanted = usize::try_from(n).unwrap_or(usize::MAX);
            if wanted > gpus.len() || n == 0 {
                return Err(Insufficient {
                    wanted: n,
                    available: gpus.len(),
                });
            }
            let mut ranked = gpus.to_vec();
            ranked.sort_by_key(|g| (allocations.users(&g.id()), g.index));
            ranked.truncate(wanted);
            ranked
        }
    };
    chosen.sort_by_key(|g| g.index);
    Ok(chosen)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::inventory::{PciIds, Vendor};

    fn gpu(index: u32) -> Gpu {
        Gpu {
            vendor: Vendor::Amd,
            index,
            pci_address: Some(format!("0000:{:02x}:00.0", index + 1)),
            pci: PciIds::default(),
            driver: Some("amdgpu".into()),
            model: None,
            card: None,
            render: None,
            nvidia: None,
            amd: None,
            cdi_ids: Vec::new(),
        }
    }

    #[test]
    fn spreads_over_least_used_and_honours_count() {
        let gpus: Vec<Gpu> = (0..4).map(gpu).collect();
        let refs: Vec<&Gpu> = gpus.iter().collect();
        let mut alloc = Allocations::new();
        let mut seen = Vec::new();
        for _ in 0..4 {
            let got = allocate(&refs, GpuCount::N(1), &alloc).unwrap();
            assert_eq!(got.len(), 1);
            alloc.add(&[got[0].id()]);
            seen.push(got[0].index);
        }
        assert_eq!(seen, vec![0, 1, 2, 3], "each app gets a different gpu");
        let two = allocate(&refs, GpuCount::N(2), &alloc).unwrap();
        assert_eq!(two.iter().map(|g| g.index).collect::<Vec<_>>(), vec![0, 1]);
        alloc.add(&[two[0].id(), two[1].id()]);
        let next = allocate(&refs, GpuCount::N(2), &alloc).unwrap();
        assert_eq!(next.iter().map(|g| g.index).collect::<Vec<_>>(), vec![2, 3]);
        alloc.remove(&[gpus[0].id()]);
        assert_eq!(alloc.users(&gpus[0].id()), 1);
    }

    #[test]
    fn too_many_and_all() {
        let gpus: Vec<Gpu> = (0..2).map(gpu).collect();
        let refs: Vec<&Gpu> = gpus.iter().collect();
        let alloc = Allocations::new();
        assert_eq!(
            allocate(&refs, GpuCount::N(3), &alloc).unwrap_err(),
            Insufficient {
                wanted: 3,
                available: 2
            }
        );
        assert_eq!(allocate(&refs, GpuCount::All, &alloc).unwrap().len(), 2);
        assert!(allocate(&[], GpuCount::All, &alloc).is_err());
    }
}
