//! Pre-flight table test: every host fixture in `tests/fixtures/hosts/` × a set of GPU
//! intents, resolved with `gpu::resolve` against the fixture's own `docker-info.json`. The
//! whole table is compared with `gpu_resolve.expected` (run with `ODAC_BLESS=1` to rewrite
//! it, then review the diff); invariants that must hold for every cell are asserted on top,
//! and a few cells are pinned by hand.

use crate::fixture_hosts;

use fixture_hosts::{INTENTS, assess, fixture_names};

use std::path::Path;

use odac_host::gpu::{Allocations, Plan, ResolveOptions, resolve, resolve_with};
use odac_host::inventory::Assessment;
use odac_protocol::{GpuCount, GpuRequest, Mechanism, Reason, Vendor};

fn intent(json: &str) -> GpuRequest {
    let g: GpuRequest = serde_json::from_str(json).unwrap();
    g.validate().unwrap();
    g
}

fn cell(plan: &Plan) -> String {
    match plan {
        Plan::Cpu { reason, .. } => format!("cpu {reason}"),
        Plan::Refuse { reason, .. } => format!("refuse {reason}"),
        Plan::Attach(a) => {
            let gids: Vec<String> = a.group_add.iter().map(u32::to_string).collect();
            format!(
                "attach {} {} [{}] gids [{}]",
                a.vendor,
                a.mechanism,
                a.devices.join(" "),
                gids.join(" ")
            )
        }
    }
}

/// What must hold for any host and intent.
fn check_invariants(host: &str, json: &str, a: &Assessment, g: &GpuRequest, plan: &Plan) {
    let at = format!("{host} × {json}");
    match plan {
        Plan::Cpu { detail, .. } => {
            assert!(g.is_optional(), "{at}: cpu plan for a required intent");
            assert!(!detail.is_empty(), "{at}");
        }
        Plan::Refuse { detail, .. } => {
            assert!(!g.is_optional(), "{at}: refusal of an optional intent");
            assert!(!detail.is_empty(), "{at}");
        }
        Plan::Attach(att) => {
            if let Some(v) = g.effective_vendor() {
                assert_eq!(att.vendor, v, "{at}: wrong vendor");
            }
            let verdict = a.verdict(att.vendor).unwrap();
            assert!(
                verdict.schedulable,
                "{at}: attached an unschedulable vendor"
            );
            assert!(!att.devices.is_empty() && !att.gpus.is_empty(), "{at}");
            if let GpuCount::N(n) = g.count() {
                assert_eq!(att.gpus.len(), n as usize, "{at}: count not honoured");
            } else {
                assert_eq!(att.gpus.len(), a.passable_gpus(att.vendor).len(), "{at}");
            }
            if att.mechanism == Mechanism::Cdi {
                assert!(
                    a.engine.cdi_enabled(),
                    "{at}: cdi chosen without engine cdi"
                );
            }
            match att.mechanism {
                Mechanism::Cdi | Mechanism::NvidiaRuntime => {
                    assert_eq!(att.devices.len(), att.gpus.len(), "{at}");
                    assert!(att.group_add.is_empty(), "{at}");
                }
                Mechanism::DeviceNodes => {
                    assert!(att.devices.iter().all(|d| d.starts_with("/dev/")), "{at}");
                    assert_eq!(
                        att.devices.iter().any(|d| d == "/dev/kfd"),
                        att.vendor == Vendor::Amd,
                        "{at}: /dev/kfd exactly for amd"
                    );
                    assert!(
                        att.devices.iter().any(|d| d.contains("/renderD")),
                        "{at}: a render node"
                    );
                }
            }
        }
    }
}

#[test]
fn every_fixture_host_times_every_intent() {
    let mut table = String::new();
    for host in fixture_names() {
        let a = assess(&host);
        table.push_str(&format!("{host}\n"));
        for json in INTENTS {
            let g = intent(json);
            let plan = resolve(&g, &a, &Allocations::new());
            check_invariants(&host, json, &a, &g, &plan);
            table.push_str(&format!("  {json:<52} {}\n", cell(&plan)));
        }
    }
    let expected_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/gpu_resolve.expected");
    if std::env::var("ODAC_BLESS").as_deref() == Ok("1") {
        std::fs::write(&expected_path, &table).unwrap();
    }
    let expected = std::fs::read_to_string(&expected_path).unwrap_or_default();
    assert_eq!(
        table, expected,
        "resolve table changed; rerun with ODAC_BLESS=1 and review the diff"
    );
}

#[test]
fn pinned_cells() {
    let none = Allocations::new();
    // No GPU at all: required → refuse no_device; optional → cpu no_device.
    let a = assess("no-gpu");
    assert!(matches!(
        resolve(&intent(INTENTS[0]), &a, &none),
        Plan::Refuse {
            reason: Reason::NoDevice,
            fix: None,
            ..
        }
    ));
    assert!(matches!(
        resolve(&intent(INTENTS[6]), &a, &none),
        Plan::Cpu {
            reason: Reason::NoDevice,
            ..
        }
    ));

    // Driver but no toolkit: the fix names the toolkit steps.
    let a = assess("nvidia-driver-no-toolkit");
    let Plan::Refuse { reason, fix, .. } = resolve(&intent(INTENTS[0]), &a, &none) else {
        panic!("expected a refusal")
    };
    assert_eq!(reason, Reason::NoContainerRuntime);
    assert!(
        fix.unwrap()
            .contains("nvidia-ctk runtime configure --runtime=docker")
    );

    // DGX: explicit UUIDs through the nvidia driver, never a count.
    let a = assess("nvidia-dgx-8gpu");
    let Plan::Attach(att) = resolve(&intent(INTENTS[1]), &a, &none) else {
        panic!("expected an attachment")
    };
    assert_eq!(att.mechanism, Mechanism::NvidiaRuntime);
    assert_eq!(att.devices.len(), 2);
    assert!(
        att.devices.iter().all(|d| d.starts_with("GPU-")),
        "{:?}",
        att.devices
    );

    // MI210: one GPU is /dev/kfd plus that GPU's render node, with the GIDs.
    let a = assess("amd-kfd-mi210-8gpu");
    let Plan::Attach(att) = resolve(&intent(INTENTS[2]), &a, &none) else {
        panic!("expected an attachment")
    };
    assert_eq!(att.mechanism, Mechanism::DeviceNodes);
    assert_eq!(att.devices[0], "/dev/kfd");
    assert_eq!(
        att.devices.iter().filter(|d| d.contains("renderD")).count(),
        1
    );

    // Count larger than the host: insufficient_devices.
    let Plan::Refuse { reason, .. } = resolve(&intent(r#"{"runtime":"amd","count":9}"#), &a, &none)
    else {
        panic!("expected a refusal")
    };
    assert_eq!(reason, Reason::InsufficientDevices);

    // Hybrid laptop: auto prefers nvidia by default, intel when configured first.
    let a = assess("hybrid-intel-nvidia");
    let g = intent(INTENTS[5]);
    let Plan::Attach(att) = resolve(&g, &a, &none) else {
        panic!("expected an attachment")
    };
    assert_eq!(att.vendor, Vendor::Nvidia);
    let intel_first = ResolveOptions {
        enabled: true,
        vendor_order: vec![Vendor::Intel, Vendor::Nvidia],
    };
    let Plan::Attach(att) = resolve_with(&g, &a, &none, &intel_first) else {
        panic!("expected an attachment")
    };
    assert_eq!(att.vendor, Vendor::Intel);
    assert_eq!(att.devices, vec!["/dev/dri/card0", "/dev/dri/renderD128"]);
    let disabled = ResolveOptions {
        enabled: false,
        ..ResolveOptions::default()
    };
    assert!(matches!(
        resolve_with(&g, &a, &none, &disabled),
        Plan::Cpu {
            reason: Reason::Disabled,
            ..
        }
    ));

    // CDI host: the engine lists the device, so the request is CDI with the per-GPU id.
    let a = assess("nvidia-cdi");
    let Plan::Attach(att) = resolve(&intent(INTENTS[0]), &a, &none) else {
        panic!("expected an attachment")
    };
    assert_eq!(att.mechanism, Mechanism::Cdi);
    assert_eq!(att.devices, vec!["example.com/device=0"]);
}

#[test]
fn allocations_spread_apps_over_least_used_gpus() {
    let a = assess("amd-kfd-mi210-8gpu");
    let g = intent(r#"{"runtime":"rocm","count":1}"#);
    let mut alloc = Allocations::new();
    let mut renders = Vec::new();
    for _ in 0..8 {
        let Plan::Attach(att) = resolve(&g, &a, &alloc) else {
            panic!("expected an attachment")
        };
        alloc.add(&att.gpus);
        renders.push(
            att.devices
                .iter()
                .find(|d| d.contains("renderD"))
                .cloned()
                .unwrap(),
        );
    }
    let mut unique = renders.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(
        unique.len(),
        8,
        "eight apps on eight different gpus: {renders:?}"
    );
    // A ninth app shares the least-used GPU rather than failing.
    assert!(matches!(resolve(&g, &a, &alloc), Plan::Attach(_)));
}

/// `min_vram_mib`: only GPUs with that much total VRAM are chosen; none → `insufficient_vram`
/// naming what was needed and the best GPU's figure (refused when required, CPU when
/// optional); a GPU whose size no source tells is not ruled out.
#[test]
fn min_vram_picks_only_gpus_with_enough_memory() {
    let none = Allocations::new();
    let mut a = assess("amd-kfd-mi210-8gpu");
    let ids: Vec<String> = a
        .passable_gpus(Vendor::Amd)
        .iter()
        .map(|g| g.id())
        .collect();
    assert!(ids.len() >= 2, "{ids:?}");
    let gib = 1024 * 1024 * 1024;
    for (i, id) in ids.iter().enumerate() {
        // one 24 GiB GPU, the rest 16 GiB
        let size = if i == 1 { 24 * gib } else { 16 * gib };
        a.scan.gpu_details.entry(id.clone()).or_default().vram_bytes = Some(size);
    }
    let want = |json: &str| resolve(&intent(json), &a, &none);
    match want(r#"{"runtime":"amd","count":1,"min_vram_mib":30000}"#) {
        Plan::Refuse { reason, detail, .. } => {
            assert_eq!(reason, Reason::InsufficientVram);
            assert!(
                detail.contains("30000 MiB") && detail.contains("24576 MiB total"),
                "{detail}"
            );
        }
        other => panic!("{other:?}"),
    }
    match want(r#"{"runtime":"amd","count":1,"min_vram_mib":20000}"#) {
        Plan::Attach(att) => assert_eq!(att.gpus, vec![ids[1].clone()], "the 24 GiB one"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        want(r#"{"runtime":"amd","count":2,"min_vram_mib":20000}"#),
        Plan::Refuse {
            reason: Reason::InsufficientVram,
            ..
        }
    ));
    assert!(matches!(
        want(r#"{"runtime":"amd","count":1,"min_vram_mib":30000,"optional":true}"#),
        Plan::Cpu {
            reason: Reason::InsufficientVram,
            ..
        }
    ));
    match want(r#"{"runtime":"amd","count":2,"min_vram_mib":8000}"#) {
        Plan::Attach(att) => assert_eq!(att.gpus.len(), 2),
        other => panic!("{other:?}"),
    }
    // a fresh telemetry reading of free VRAM is what counts where there is one
    a.free_vram_mib.insert(ids[1].clone(), 4096);
    match resolve(
        &intent(r#"{"runtime":"amd","count":1,"min_vram_mib":20000}"#),
        &a,
        &none,
    ) {
        Plan::Refuse { reason, detail, .. } => {
            assert_eq!(reason, Reason::InsufficientVram);
            assert!(detail.contains("the best has 16384 MiB total"), "{detail}");
        }
        other => panic!("{other:?}"),
    }
    for id in &ids {
        a.free_vram_mib.insert(id.clone(), 2048);
    }
    match resolve(
        &intent(r#"{"runtime":"amd","count":1,"min_vram_mib":8000}"#),
        &a,
        &none,
    ) {
        Plan::Refuse { detail, .. } => assert!(detail.contains("2048 MiB free"), "{detail}"),
        other => panic!("{other:?}"),
    }
    a.free_vram_mib.clear();
    // unknown sizes are not ruled out
    a.scan.gpu_details.clear();
    assert!(matches!(
        resolve(
            &intent(r#"{"runtime":"amd","count":1,"min_vram_mib":30000}"#),
            &a,
            &none
        ),
        Plan::Attach(_)
    ));
}
