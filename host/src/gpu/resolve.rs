//! Pre-flight: resolve an app's GPU intent against this host before any container exists.
//! Pure: the intent, the [`Assessment`] (scan + engine + verdicts) and the current
//! [`Allocations`] in, a [`Plan`] out.
//!
//! - An explicit vendor (`runtime`/`vendor`) is served by that vendor or not at all.
//! - Auto tries the vendors in the configured order (NVIDIA, AMD, Intel by default) and takes
//!   the first that is schedulable and has enough usable GPUs.
//! - The mechanism is the vendor verdict's: CDI only when the engine has CDI enabled and lists
//!   a CDI device for every chosen GPU (else NVIDIA falls back to its runtime when that is
//!   registered, AMD and Intel to device nodes); the NVIDIA runtime with explicit device ids
//!   (UUIDs where known); device nodes (AMD: `/dev/kfd` plus each GPU's card and render nodes;
//!   Intel: card and render) with the numeric GIDs owning them (never group 0).
//! - The attachment carries the intent's driver capabilities, else `compute,utility`; the
//!   image's own set is known only once the image is there ([`super::image`]).
//! - When the host cannot serve the intent: `optional` → [`Plan::Cpu`] with the reason,
//!   else [`Plan::Refuse`] with the reason and the fix.

use odac_protocol::{DriverCapabilities, GpuCount, GpuRequest, Mechanism, Reason, Vendor};
use serde::{Deserialize, Serialize};

use super::allocate::{Allocations, allocate};
use super::attach::Attachment;
use super::reason::{detail, fix};
use crate::inventory::cdi::in_dirs;
use crate::inventory::{Assessment, Gpu};

/// Auto's vendor preference when the configuration says nothing.
pub const DEFAULT_VENDOR_ORDER: [Vendor; 3] = [Vendor::Nvidia, Vendor::Amd, Vendor::Intel];

/// The outcome of pre-flight.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "plan", rename_all = "snake_case")]
pub enum Plan {
    /// Run on the CPU: the intent was optional and this host cannot serve it.
    Cpu {
        /// Why not.
        reason: Reason,
        /// The evidence.
        detail: String,
    },
    /// Attach these GPUs.
    Attach(Attachment),
    /// Do not start: the intent was required and this host cannot serve it.
    Refuse {
        /// Why not.
        reason: Reason,
        /// What the operator can do about it.
        fix: Option<String>,
        /// The evidence.
        detail: String,
    },
}

/// Knobs of the decision, from the agent's configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ResolveOptions {
    /// GPUs may be attached at all (`false`: every intent resolves to `disabled`).
    pub enabled: bool,
    /// Auto's vendor order; vendors left out are never chosen by auto.
    pub vendor_order: Vec<Vendor>,
}

impl Default for ResolveOptions {
    fn default() -> Self {
        Self {
            enabled: true,
            vendor_order: DEFAULT_VENDOR_ORDER.to_vec(),
        }
    }
}

/// Why one vendor cannot serve the intent.
struct Miss {
    reason: Reason,
    vendor: Option<Vendor>,
    evidence: String,
}

/// Resolve with the default options (enabled, NVIDIA → AMD → Intel).
pub fn resolve(intent: &GpuRequest, assessment: &Assessment, allocations: &Allocations) -> Plan {
    resolve_with(intent, assessment, allocations, &ResolveOptions::default())
}

/// Resolve `intent` against the host; see the module documentation.
pub fn resolve_with(
    intent: &GpuRequest,
    assessment: &Assessment,
    allocations: &Allocations,
    options: &ResolveOptions,
) -> Plan {
    let count = intent.count();
    let outcome = if !options.enabled {
        Err(Miss {
            reason: Reason::Disabled,
            vendor: intent.effective_vendor(),
            evidence: "gpu.enabled = false in the agent configuration".into(),
        })
    } else if let Some(vendor) = intent.effective_vendor() {
        try_vendor(
            assessment,
            allocations,
            vendor,
            (count, intent.min_vram_mib()),
        )
    } else {
        auto(
            assessment,
            allocations,
            (count, intent.min_vram_mib()),
            &options.vendor_order,
        )
    };
    match outcome {
        Ok(mut attachment) => {
            attachment.capabilities =
                DriverCapabilities::effective(intent.driver_capabilities().as_ref(), &[]);
            Plan::Attach(attachment)
        }
        Err(miss) if intent.is_optional() => Plan::Cpu {
            reason: miss.reason,
            detail: detail(miss.reason, &miss.evidence),
        },
        Err(miss) => Plan::Refuse {
            reason: miss.reason,
            fix: fix(miss.reason, miss.vendor),
            detail: detail(miss.reason, &miss.evidence),
        },
    }
}

/// Auto: the first vendor in `order` that can serve; else the most telling miss (a vendor
/// whose GPUs exist but cannot be used beats "no device").
fn auto(
    a: &Assessment,
    allocations: &Allocations,
    count: (GpuCount, Option<u32>),
    order: &[Vendor],
) -> Result<Attachment, Miss> {
    let mut misses = Vec::new();
    for vendor in order {
        match try_vendor(a, allocations, *vendor, count) {
            Ok(attachment) => return Ok(attachment),
            Err(miss) => misses.push(miss),
        }
    }
    if let Some(pos) = misses.iter().position(|m| m.reason != Reason::NoDevice) {
        return Err(misses.swap_remove(pos));
    }
    let names: Vec<&str> = order.iter().map(|v| v.as_str()).collect();
    Err(Miss {
        reason: Reason::NoDevice,
        vendor: None,
        evidence: format!("no gpu of any vendor ({}) on the pci bus", names.join(", ")),
    })
}

/// `0000:07:00.0 (xid 79: GPU has fallen off the bus)`, each unhealthy GPU named with its
/// error, and how many healthy ones remain.
fn unhealthy_evidence(a: &Assessment, unhealthy: &[&Gpu], healthy: usize) -> String {
    let named: Vec<String> = unhealthy
        .iter()
        .map(|g| {
            let id = g.id();
            let error = a.unhealthy.get(&id).map_or("", String::as_str);
            format!("gpu {} {id} ({error})", g.index)
        })
        .collect();
    format!("{}; {healthy} healthy gpu(s) left", named.join(", "))
}

/// One vendor for `count` GPUs with at least `min_vram` MiB each (where the GPU's VRAM is
/// known: a GPU whose size no source tells is not ruled out).
fn try_vendor(
    a: &Assessment,
    allocations: &Allocations,
    vendor: Vendor,
    (count, min_vram): (GpuCount, Option<u32>),
) -> Result<Attachment, Miss> {
    let miss = |reason: Reason, evidence: String| Miss {
        reason,
        vendor: Some(vendor),
        evidence,
    };
    let Some(verdict) = a.verdict(vendor) else {
        return Err(miss(Reason::NoDevice, format!("no {vendor} verdict")));
    };
    if !verdict.schedulable {
        let reason = verdict.reason.unwrap_or(Reason::NoDevice);
        return Err(miss(reason, verdict.detail.clone()));
    }
    let (usable, unhealthy): (Vec<&Gpu>, Vec<&Gpu>) = a
        .passable_gpus(vendor)
        .into_iter()
        .partition(|g| !a.unhealthy.contains_key(&g.id()));
    let short = |have: usize| match count {
        GpuCount::All => have == 0,
        GpuCount::N(n) => usize::try_from(n).unwrap_or(usize::MAX) > have,
    };
    if !unhealthy.is_empty() && short(usable.len()) {
        return Err(miss(
            Reason::GpuUnhealthy,
            unhealthy_evidence(a, &unhealthy, usable.len()),
        ));
    }
    let usable = match min_vram {
        Some(min) => with_vram(a, usable, vendor, count, min)
            .map_err(|e| miss(Reason::InsufficientVram, e))?,
        None => usable,
    };
    let with_cdi: Vec<&Gpu> = usable
        .iter()
        .copied()
        .filter(|g| cdi_id(a, g).is_some())
        .collect();
    let wanted = match count {
        GpuCount::All => usable.len(),
        GpuCount::N(n) => usize::try_from(n).unwrap_or(usize::MAX),
    };
    if wanted > usable.len() {
        return Err(miss(
            Reason::InsufficientDevices,
            format!(
                "{wanted} {vendor} gpu(s) requested, {} usable on this host",
                usable.len()
            ),
        ));
    }
    let mechanism = match verdict.mechanism {
        Some(Mechanism::Cdi) if with_cdi.len() >= wanted && !with_cdi.is_empty() => Mechanism::Cdi,
        Some(Mechanism::Cdi) | Some(Mechanism::NvidiaRuntime) | None
            if let Some(runtime) = vendor.facts().runtime =>
        {
            if a.engine.has_runtime(runtime) || a.scan.nvidia.has_runtime_hook() {
                Mechanism::NvidiaRuntime
            } else {
                return Err(miss(
                    Reason::NoContainerRuntime,
                    format!(
                        "the engine lists cdi devices for {} of {} {vendor} gpu(s) and has no {runtime} runtime",
                        with_cdi.len(),
                        wanted
                    ),
                ));
            }
        }
        _ => Mechanism::DeviceNodes,
    };
    let candidates = if mechanism == Mechanism::Cdi {
        with_cdi
    } else {
        usable
    };
    let chosen = allocate(&candidates, count, allocations).map_err(|e| {
        miss(
            Reason::InsufficientDevices,
            format!(
                "{} {vendor} gpu(s) requested, {} usable on this host",
                e.wanted, e.available
            ),
        )
    })?;
    let (devices, group_add) = match mechanism {
        Mechanism::Cdi => (
            chosen.iter().filter_map(|g| cdi_id(a, g)).collect(),
            Vec::new(),
        ),
        Mechanism::NvidiaRuntime => (chosen.iter().map(|g| nvidia_id(g)).collect(), Vec::new()),
        // Group 0 (root) is never added: it would widen the container's rights well beyond
        // the device, and root-owned nodes are what fixture trees and odd hosts show.
        Mechanism::DeviceNodes => (
            a.device_paths(&chosen),
            a.group_ids(&chosen)
                .into_iter()
                .filter(|g| *g != 0)
                .collect(),
        ),
    };
    Ok(Attachment {
        vendor: chosen.first().map_or(vendor, |g| g.vendor),
        mechanism,
        devices,
        gpus: chosen.iter().map(|g| g.id()).collect(),
        group_add,
        capabilities: DriverCapabilities::default(),
    })
}

/// A GPU's VRAM in MiB and which figure it is: free, from a fresh telemetry reading, else
/// the total the scan knows (AMD and Intel sysfs, NVIDIA NVML).
fn vram_mib(a: &Assessment, gpu: &Gpu) -> Option<(u64, &'static str)> {
    let id = gpu.id();
    if let Some(free) = a.free_vram_mib.get(&id) {
        return Some((*free, "free"));
    }
    a.scan
        .gpu_details
        .get(&id)
        .and_then(|d| d.vram_bytes)
        .map(|b| (b / (1024 * 1024), "total"))
}

/// The GPUs of `usable` with at least `min` MiB of VRAM (free where a fresh reading says,
/// else total; a GPU of unknown size is kept); the
/// evidence of `insufficient_vram` when fewer than `count` remain of GPUs that exist.
fn with_vram<'a>(
    a: &Assessment,
    usable: Vec<&'a Gpu>,
    vendor: Vendor,
    count: GpuCount,
    min: u32,
) -> Result<Vec<&'a Gpu>, String> {
    let fits: Vec<&Gpu> = usable
        .iter()
        .copied()
        .filter(|g| vram_mib(a, g).is_none_or(|(v, _)| v >= u64::from(min)))
        .collect();
    let wanted = match count {
        GpuCount::All => 1,
        GpuCount::N(n) => usize::try_from(n).unwrap_or(usize::MAX),
    };
    if usable.is_empty() || fits.len() >= wanted || usable.len() < wanted {
        return Ok(fits);
    }
    let best = usable.iter().filter_map(|g| vram_mib(a, g)).max();
    Err(format!(
        "{min} MiB of VRAM needed (gpu.min_vram_mib) on {wanted} {vendor} gpu(s), {} have it; the best has {}",
        fits.len(),
        best.map_or_else(
            || "an unknown size".to_owned(),
            |(mib, figure)| format!("{mib} MiB {figure}")
        )
    ))
}

/// The CDI id that names exactly this GPU and that the engine can inject: listed in the
/// engine's discovered devices (or, for engines that do not list them, in a spec inside one of
/// its spec dirs), preferring a per-GPU id over an `=all` one.
fn cdi_id(a: &Assessment, gpu: &Gpu) -> Option<String> {
    if !a.engine.cdi_enabled() {
        return None;
    }
    let injectable = |id: &String| {
        if a.engine.cdi_devices.is_empty() {
            a.scan
                .cdi
                .specs
                .iter()
                .filter(|s| in_dirs(&s.dir, &a.engine.cdi_spec_dirs))
                .any(|s| s.devices.iter().any(|d| &d.id == id))
        } else {
            a.engine.cdi_devices.contains(id)
        }
    };
    let ids: Vec<&String> = gpu.cdi_ids.iter().filter(|id| injectable(id)).collect();
    ids.iter()
        .find(|id| !id.ends_with("=all"))
        .or_else(|| ids.first())
        .map(|id| (*id).clone())
}

/// The id the NVIDIA driver is asked for: the UUID where known, else the index.
fn nvidia_id(gpu: &Gpu) -> String {
    gpu.nvidia
        .as_ref()
        .and_then(|n| n.uuid.clone())
        .unwrap_or_else(|| gpu.index.to_string())
}
