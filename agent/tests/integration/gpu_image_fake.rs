//! What the image says about its GPU, against the fake engine: the NVIDIA driver
//! capabilities reach the engine (device request and `NVIDIA_DRIVER_CAPABILITIES`) and the
//! status says the set the container got (the request's, else the image's, else
//! `compute,utility`); an image whose `NVIDIA_REQUIRE_CUDA` the host's driver (550, CUDA 12.4,
//! in the fixture) cannot meet fails a required app with `driver_too_old` before any create,
//! and runs an optional one on the CPU without asking for a restart later.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use odac_agent::appmgr::{AppManager, AppManagerConfig};
use odac_agent::cli::inventory::engine_from_info_file;
use odac_host::engine::{ContainerSpec, EngineCall, FakeEngine, Op};
use odac_protocol::{AppSpec, AppState, DesiredState, FallbackTier, Reason};

const HOST: &str = "nvidia-dgx-8gpu";
const PLAIN: &str = "odac/busybox:test";
const ALL_CAPS: &str = "odac/nvcaps-all:test";
const CUDA_12_8: &str = "odac/cuda128:test";

fn fixture() -> PathBuf {
    crate::fixture_hosts::host(HOST)
}

fn setup(dir: &Path) -> (Arc<FakeEngine>, AppManager) {
    let fake = FakeEngine::new();
    let caps = engine_from_info_file(&fixture().join("docker-info.json")).unwrap();
    fake.add_device_driver("nvidia");
    fake.set_capabilities(caps);
    fake.add_image(PLAIN);
    fake.add_image_with_env(ALL_CAPS, &["PATH=/bin", "NVIDIA_DRIVER_CAPABILITIES=all"]);
    fake.add_image_with_env(CUDA_12_8, &["NVIDIA_REQUIRE_CUDA=cuda>=12.8"]);
    let fake = Arc::new(fake);
    let config = AppManagerConfig {
        state_dir: dir.to_path_buf(),
        stop_timeout_secs: 0,
        ..AppManagerConfig::default()
    };
    let m = AppManager::open(config, fake.clone(), fixture()).unwrap();
    (fake, m)
}

fn app(name: &str, image: &str, gpu: &str) -> AppSpec {
    let mut spec = AppSpec::new(name, image);
    spec.command = vec!["sleep".into(), "3600".into()];
    spec.gpu = Some(serde_json::from_str(gpu).unwrap());
    spec
}

fn created(fake: &FakeEngine, name: &str) -> Vec<ContainerSpec> {
    fake.calls_of(Op::Create)
        .into_iter()
        .filter_map(|c| match c {
            EngineCall::Create(spec) if spec.name.ends_with(&format!("_{name}")) => Some(*spec),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn capabilities_reach_the_engine_and_the_status() {
    let dir = tempfile::tempdir().unwrap();
    let (fake, m) = setup(dir.path());
    let apps = vec![
        app(
            "enc",
            PLAIN,
            r#"{"runtime":"nvidia","count":1,"capabilities":"video,compute"}"#,
        ),
        app("plain", PLAIN, r#"{"runtime":"nvidia","count":1}"#),
        app("allimg", ALL_CAPS, r#"{"runtime":"nvidia","count":1}"#),
    ];
    m.set_desired(DesiredState {
        generation: 1,
        apps,
    })
    .await
    .unwrap();
    let statuses = m.reconcile_once().await;
    for (name, want) in [
        ("enc", "compute,video"),
        ("plain", "compute,utility"),
        ("allimg", "compute,utility,video,graphics,display,compat32"),
    ] {
        let s = statuses.iter().find(|s| s.name == name).unwrap();
        assert_eq!(s.state, AppState::Running, "{s:?}");
        let attached = s.gpu.attached.clone().unwrap();
        assert_eq!(attached.capabilities.join(","), want, "{name}");
        let spec = &created(&fake, name)[0];
        let caps: Vec<String> = std::iter::once("gpu".to_owned())
            .chain(want.split(',').map(str::to_owned))
            .collect();
        assert_eq!(spec.device_requests[0].capabilities, vec![caps], "{name}");
        assert_eq!(
            spec.env
                .get("NVIDIA_DRIVER_CAPABILITIES")
                .map(String::as_str),
            Some(want),
            "{name}"
        );
    }
}

#[tokio::test]
async fn an_unmet_cuda_requirement_is_refused_before_any_create() {
    let dir = tempfile::tempdir().unwrap();
    let (fake, m) = setup(dir.path());
    let apps = vec![
        app("req", CUDA_12_8, r#"{"runtime":"nvidia","count":1}"#),
        app(
            "opt",
            CUDA_12_8,
            r#"{"runtime":"nvidia","count":1,"optional":true}"#,
        ),
    ];
    m.set_desired(DesiredState {
        generation: 1,
        apps,
    })
    .await
    .unwrap();
    for pass in 0..2 {
        let statuses = m.reconcile_once().await;
        let req = statuses.iter().find(|s| s.name == "req").unwrap();
        assert_eq!(req.state, AppState::Failed, "pass {pass}: {req:?}");
        let fb = req.gpu.fallback.clone().unwrap();
        assert_eq!(
            (fb.tier, fb.reason),
            (FallbackTier::Preflight, Reason::DriverTooOld)
        );
        let error = req.last_error.clone().unwrap_or_default();
        assert!(
            error.starts_with("driver_too_old: the image requires cuda>=12.8 (NVIDIA_REQUIRE_CUDA); this host's NVIDIA driver 550.54.14 supports CUDA 12.4; fix: install NVIDIA driver ≥ 570 for CUDA 12.8"),
            "{error}"
        );
        assert!(
            created(&fake, "req").is_empty(),
            "no create for a required app"
        );

        let opt = statuses.iter().find(|s| s.name == "opt").unwrap();
        assert_eq!(opt.state, AppState::Running, "{opt:?}");
        assert_eq!(opt.gpu.attached, None);
        assert_eq!(
            opt.gpu.fallback.as_ref().map(|f| f.reason),
            Some(Reason::DriverTooOld)
        );
        assert!(
            !opt.restart_required,
            "pass {pass}: the image still needs 12.8"
        );
        let opt_specs = created(&fake, "opt");
        assert_eq!(opt_specs.len(), 1, "created once, on the cpu");
        assert!(opt_specs[0].device_requests.is_empty());
    }
}

/// NVIDIA VRAM comes from NVML, which only the inventory loop reads: the sizes it offered are
/// kept for the app manager's own scans, so `min_vram_mib` sees 16 GiB GPUs as too small.
#[tokio::test]
async fn nvml_vram_offered_by_the_inventory_loop_reaches_placement() {
    let dir = tempfile::tempdir().unwrap();
    let (_fake, m) = setup(dir.path());
    let caps = engine_from_info_file(&fixture().join("docker-info.json")).unwrap();
    let mut scan = odac_host::inventory::scan(&fixture());
    let ids: Vec<String> = scan.gpus.iter().map(|g| g.id()).collect();
    for id in ids {
        scan.gpu_details.entry(id).or_default().vram_bytes = Some(16 * 1024 * 1024 * 1024);
    }
    m.offer_facts(odac_host::inventory::Assessment::new(scan, caps));
    m.set_desired(DesiredState {
        generation: 1,
        apps: vec![
            app(
                "llm",
                PLAIN,
                r#"{"runtime":"nvidia","count":1,"min_vram_mib":20000}"#,
            ),
            app(
                "small",
                PLAIN,
                r#"{"runtime":"nvidia","count":1,"min_vram_mib":8000}"#,
            ),
        ],
    })
    .await
    .unwrap();
    let statuses = m.reconcile_once().await;
    let llm = statuses.iter().find(|s| s.name == "llm").unwrap();
    assert_eq!(llm.state, AppState::Failed, "{llm:?}");
    let error = llm.last_error.clone().unwrap_or_default();
    assert!(
        error.starts_with("insufficient_vram: ") && error.contains("16384 MiB total"),
        "{error}"
    );
    let small = statuses.iter().find(|s| s.name == "small").unwrap();
    assert_eq!(small.state, AppState::Running, "{small:?}");

    // a telemetry reading of free VRAM counts instead of the total while it is fresh
    let free = odac_host::inventory::scan(&fixture())
        .gpus
        .iter()
        .map(|g| (g.id(), 1024))
        .collect::<std::collections::BTreeMap<_, _>>();
    m.offer_free_vram(free);
    let later = app(
        "later",
        PLAIN,
        r#"{"runtime":"nvidia","count":1,"min_vram_mib":8000}"#,
    );
    m.upsert(2, later).await.unwrap();
    let statuses = m.reconcile_once().await;
    let later = statuses.iter().find(|s| s.name == "later").unwrap();
    assert_eq!(later.state, AppState::Failed, "{later:?}");
    let error = later.last_error.clone().unwrap_or_default();
    assert!(error.contains("MiB free"), "{error}");
}
