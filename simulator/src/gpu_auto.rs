//! Automatic vendor detection, as ODAC's control plane does it. A required GPU request that
//! names no vendor (`{"runtime":"auto"}`, `{"count":2}`, what `odac app gpu NAME` sends) is
//! not legal on the wire: the control plane resolves it from the inventory of the app's host
//! and stores a concrete runtime. Only an `optional` request stays `auto` (the agent picks a
//! vendor at every start, or runs the app on the CPU).
//!
//! The choice, in this order (the agent's own auto order: NVIDIA, AMD, Intel):
//! 1. the first vendor that is schedulable and has at least `count` usable GPUs;
//! 2. else the first schedulable vendor (the agent then reports `insufficient_devices`);
//! 3. else the first vendor whose GPUs are present but not usable, so that the agent reports
//!    why it cannot attach them (`no_container_runtime`, `no_driver`, …);
//! 4. a host without any GPU (or that never reported its inventory) is refused with a message
//!    naming the ways out: a vendor flag, or `--optional`.

use odac_protocol::{GpuCount, GpuRequest, GpuRuntime, Inventory, Reason, ValidationError, Vendor};

/// The vendor order of automatic detection (the agent's default order).
pub const AUTO_ORDER: [Vendor; 3] = [Vendor::Nvidia, Vendor::Amd, Vendor::Intel];

/// What automatic detection chose on a host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Detected {
    /// The vendor chosen.
    pub vendor: Vendor,
    /// `None` when its GPUs can be passed into containers, else why not (the agent will say
    /// the same when it tries).
    pub unusable: Option<Reason>,
}

/// Why a GPU request cannot be stored (the API answers 400 naming [`GpuAutoError::field`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GpuAutoError {
    /// A field of the request is invalid (`gpu.count`, …).
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    /// Detection found no GPU on the host: it has none, or has not reported its inventory
    /// yet (`why`).
    #[error(
        "automatic vendor detection found no GPU: host {host} {why}; name a vendor \
         (--nvidia, --amd or --intel; \"runtime\" in the API) to require one anyway, or \
         use --optional (\"optional\": true) to take any vendor when one appears and run \
         on the CPU until then"
    )]
    NoGpu {
        /// The host as people name it.
        host: String,
        /// Why no GPU was found.
        why: &'static str,
    },
}

impl GpuAutoError {
    /// The request field at fault, as the protocol's validation names it.
    pub fn field(&self) -> &str {
        match self {
            Self::Invalid(e) => &e.field,
            Self::NoGpu { .. } => "gpu.runtime",
        }
    }
}

/// True for a request the control plane must resolve: it asks for a GPU, names no vendor and
/// is not optional (an invalid `optional` is left to validation).
pub fn needs_detection(g: &GpuRequest) -> bool {
    !g.is_empty()
        && g.effective_vendor().is_none()
        && matches!(g.runtime, None | Some(GpuRuntime::Auto))
        && g.try_optional() == Ok(false)
}

/// Validates every field of `g` except the rule "no vendor needs optional", which
/// [`resolve`] settles; errors name the field (`gpu.count`, …).
pub fn validate_fields(g: &GpuRequest) -> Result<(), GpuAutoError> {
    if needs_detection(g) {
        g.clone().with_optional(true).validate()?;
    } else {
        g.validate()?;
    }
    Ok(())
}

/// Chooses a vendor on a host with inventory `inv` for `count` GPUs; `None` when the host has
/// no GPU at all.
pub fn detect(inv: &Inventory, count: GpuCount) -> Option<Detected> {
    detect_with_vram(inv, count, None)
}

/// [`detect`] where a GPU counts as usable only with at least `min_vram_mib` MiB of VRAM
/// (when the inventory tells its size), so a vendor whose GPUs are too small is passed over
/// for one whose GPUs fit.
pub fn detect_with_vram(
    inv: &Inventory,
    count: GpuCount,
    min_vram_mib: Option<u32>,
) -> Option<Detected> {
    let present = |v: Vendor| inv.gpus.iter().filter(|g| g.vendor == v).count();
    let big_enough = |g: &odac_protocol::GpuInfo| match (min_vram_mib, g.vram_bytes) {
        (Some(min), Some(bytes)) => bytes / (1024 * 1024) >= u64::from(min),
        _ => true,
    };
    let usable = |v: Vendor| {
        inv.gpus
            .iter()
            .filter(|g| g.vendor == v && g.passable && big_enough(g))
            .count()
    };
    let schedulable = |v: Vendor| inv.accelerators.get(&v).is_some_and(|a| a.schedulable);
    let enough = |v: Vendor| match count {
        GpuCount::All => usable(v) > 0,
        GpuCount::N(n) => usable(v) >= usize::try_from(n).unwrap_or(usize::MAX),
    };
    let ok = |vendor| Detected {
        vendor,
        unusable: None,
    };
    if let Some(v) = AUTO_ORDER.iter().find(|v| schedulable(**v) && enough(**v)) {
        return Some(ok(*v));
    }
    if let Some(v) = AUTO_ORDER.iter().find(|v| schedulable(**v)) {
        return Some(ok(*v));
    }
    AUTO_ORDER
        .iter()
        .find(|v| present(**v) > 0)
        .map(|v| Detected {
            vendor: *v,
            unusable: Some(
                inv.accelerators
                    .get(v)
                    .and_then(|a| a.reason)
                    .unwrap_or(Reason::NoDevice),
            ),
        })
}

/// The refusal for a host without any GPU (or without an inventory yet).
fn no_gpu(host: &str, why: &'static str) -> GpuAutoError {
    GpuAutoError::NoGpu {
        host: host.to_owned(),
        why,
    }
}

/// Resolves `gpu` for an app on the host `host` (shown as `host_label`) whose inventory is
/// `inv`: returns the request to store (unchanged unless it needed detection) and what was
/// detected, if anything.
pub fn resolve(
    gpu: Option<GpuRequest>,
    host_label: &str,
    inv: Option<&Inventory>,
) -> Result<(Option<GpuRequest>, Option<Detected>), GpuAutoError> {
    let Some(g) = gpu else {
        return Ok((None, None));
    };
    validate_fields(&g)?;
    if !needs_detection(&g) {
        return Ok((Some(g), None));
    }
    let Some(inv) = inv else {
        return Err(no_gpu(host_label, "has not reported its inventory yet"));
    };
    let detected = detect_with_vram(inv, g.try_count()?, g.min_vram_mib())
        .ok_or_else(|| no_gpu(host_label, "has none"))?;
    let resolved = GpuRequest {
        runtime: Some(GpuRuntime::for_vendor(detected.vendor)),
        ..g
    };
    resolved.validate()?;
    Ok((Some(resolved), Some(detected)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::collections::BTreeMap;

    use odac_protocol::{AcceleratorVerdict, GpuInfo};

    use super::*;

    fn gpu(vendor: Vendor, passable: bool) -> GpuInfo {
        GpuInfo {
            vendor,
            pci_address: "0000:01:00.0".into(),
            vendor_id: "0x10de".into(),
            device_id: "0x1234".into(),
            model: "m".into(),
            driver: None,
            driver_version: None,
            vram_bytes: None,
            card_node: None,
            render_node: None,
            uuid: None,
            passable,
            health: None,
        }
    }

    fn inv(gpus: Vec<GpuInfo>, verdicts: &[(Vendor, bool, Option<Reason>)]) -> Inventory {
        let accelerators: BTreeMap<Vendor, AcceleratorVerdict> = verdicts
            .iter()
            .map(|(v, s, r)| {
                (
                    *v,
                    AcceleratorVerdict {
                        schedulable: *s,
                        reason: *r,
                        ..AcceleratorVerdict::default()
                    },
                )
            })
            .collect();
        Inventory {
            gpus,
            accelerators,
            ..Inventory::default()
        }
    }

    fn req(json: &str) -> GpuRequest {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn which_requests_need_detection() {
        for (json, needs) in [
            (r#"{"runtime":"auto"}"#, true),
            (r#"{"count":2}"#, true),
            (r#"{"runtime":"auto","optional":false}"#, true),
            (r#"{"runtime":"auto","optional":true}"#, false),
            (r#"{"optional":true}"#, false),
            (r#"{"runtime":"nvidia"}"#, false),
            (r#"{"vendor":"intel"}"#, false),
            (r#"{"runtime":"auto","optional":"maybe"}"#, false),
            ("{}", false),
        ] {
            assert_eq!(needs_detection(&req(json)), needs, "{json}");
        }
    }

    #[test]
    fn picks_the_usable_vendor_in_order() {
        let both = inv(
            vec![
                gpu(Vendor::Intel, true),
                gpu(Vendor::Nvidia, true),
                gpu(Vendor::Nvidia, true),
            ],
            &[(Vendor::Intel, true, None), (Vendor::Nvidia, true, None)],
        );
        let d = detect(&both, GpuCount::N(1)).unwrap();
        assert_eq!(d.vendor, Vendor::Nvidia);
        assert_eq!(d.unusable, None);
        // NVIDIA has the two GPUs asked for
        let d = detect(&both, GpuCount::N(2)).unwrap();
        assert_eq!(d.vendor, Vendor::Nvidia);
        // NVIDIA present but unusable, Intel usable: Intel
        let hybrid = inv(
            vec![gpu(Vendor::Nvidia, false), gpu(Vendor::Intel, true)],
            &[
                (Vendor::Nvidia, false, Some(Reason::NoContainerRuntime)),
                (Vendor::Intel, true, None),
            ],
        );
        assert_eq!(
            detect(&hybrid, GpuCount::All).unwrap().vendor,
            Vendor::Intel
        );
    }

    #[test]
    fn count_prefers_a_vendor_with_enough_gpus() {
        let host = inv(
            vec![
                gpu(Vendor::Nvidia, true),
                gpu(Vendor::Amd, true),
                gpu(Vendor::Amd, true),
            ],
            &[(Vendor::Nvidia, true, None), (Vendor::Amd, true, None)],
        );
        assert_eq!(detect(&host, GpuCount::N(2)).unwrap().vendor, Vendor::Amd);
        assert_eq!(
            detect(&host, GpuCount::N(3)).unwrap().vendor,
            Vendor::Nvidia,
            "no vendor has 3: the first schedulable, the agent reports insufficient_devices"
        );
    }

    #[test]
    fn min_vram_prefers_a_vendor_whose_gpus_fit() {
        let sized = |v: Vendor, gib: u64| GpuInfo {
            vram_bytes: Some(gib * 1024 * 1024 * 1024),
            ..gpu(v, true)
        };
        let host = inv(
            vec![sized(Vendor::Nvidia, 16), sized(Vendor::Amd, 64)],
            &[(Vendor::Nvidia, true, None), (Vendor::Amd, true, None)],
        );
        assert_eq!(
            detect(&host, GpuCount::N(1)).unwrap().vendor,
            Vendor::Nvidia
        );
        assert_eq!(
            detect_with_vram(&host, GpuCount::N(1), Some(20000))
                .unwrap()
                .vendor,
            Vendor::Amd,
            "the 16 GiB nvidia gpu is too small"
        );
        let (g, d) = resolve(
            Some(req(r#"{"runtime":"auto","count":1,"min_vram_mib":20000}"#)),
            "h",
            Some(&host),
        )
        .unwrap();
        assert_eq!(d.unwrap().vendor, Vendor::Amd);
        assert_eq!(g.unwrap().min_vram_mib(), Some(20000), "kept as sent");
    }

    #[test]
    fn a_present_but_unusable_vendor_is_still_chosen() {
        let host = inv(
            vec![gpu(Vendor::Nvidia, false)],
            &[(Vendor::Nvidia, false, Some(Reason::NoContainerRuntime))],
        );
        let d = detect(&host, GpuCount::All).unwrap();
        assert_eq!(d.vendor, Vendor::Nvidia);
        assert_eq!(d.unusable, Some(Reason::NoContainerRuntime));
        let (g, _) = resolve(
            Some(req(r#"{"runtime":"auto","count":1}"#)),
            "h",
            Some(&host),
        )
        .unwrap();
        assert_eq!(
            serde_json::to_string(&g.unwrap()).unwrap(),
            r#"{"runtime":"nvidia","count":1}"#,
            "stored as a concrete runtime, the other fields as sent"
        );
    }

    #[test]
    fn amd_is_stored_as_rocm() {
        let host = inv(vec![gpu(Vendor::Amd, true)], &[(Vendor::Amd, true, None)]);
        let (g, d) = resolve(Some(req(r#"{"count":1}"#)), "h", Some(&host)).unwrap();
        assert_eq!(d.unwrap().vendor, Vendor::Amd);
        assert_eq!(
            serde_json::to_string(&g.unwrap()).unwrap(),
            r#"{"runtime":"rocm","count":1}"#
        );
    }

    #[test]
    fn no_gpu_is_refused_naming_the_flags() {
        let none = inv(Vec::new(), &[]);
        for inventory in [Some(&none), None] {
            let e = resolve(Some(req(r#"{"runtime":"auto"}"#)), "cpu-1", inventory).unwrap_err();
            assert_eq!(e.field(), "gpu.runtime");
            for flag in ["--nvidia", "--amd", "--intel", "--optional", "cpu-1"] {
                assert!(e.to_string().contains(flag), "{flag} in {e}");
            }
        }
    }

    #[test]
    fn optional_and_explicit_requests_are_left_alone() {
        let none = inv(Vec::new(), &[]);
        for json in [
            r#"{"runtime":"auto","optional":true}"#,
            r#"{"runtime":"intel"}"#,
            r#"{"vendor":"amd","count":"all"}"#,
        ] {
            let (g, d) = resolve(Some(req(json)), "h", Some(&none)).unwrap();
            assert_eq!(serde_json::to_string(&g.unwrap()).unwrap(), json);
            assert_eq!(d, None);
        }
        assert_eq!(resolve(None, "h", None).unwrap(), (None, None));
    }

    #[test]
    fn bad_fields_are_reported_before_detection() {
        let e = resolve(Some(req(r#"{"runtime":"auto","count":0}"#)), "h", None).unwrap_err();
        assert_eq!(e.field(), "gpu.count");
    }
}
