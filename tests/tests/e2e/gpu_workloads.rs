//! The seed's GPU workloads on the GPU lab (a private engine with NVIDIA toolkit stand-ins,
//! see `gpu_lab.rs`): what a transcoder or an LLM server needs beyond a device node. Driver
//! capabilities: the lab's hook mounts stand-in libraries per `NVIDIA_DRIVER_CAPABILITIES`
//! like the toolkit, so an app that needs `libnvidia-encode.so.1` runs only when the agent
//! asked for `video`, and the status says the set the container really got. CUDA
//! requirements: an image whose `NVIDIA_REQUIRE_CUDA` the lab's driver cannot meet is
//! refused by the agent before any create (required) or runs on the CPU (optional), with
//! `driver_too_old`, the versions and the fix. VRAM: `min_vram_mib` picks only GPUs with
//! that much memory, else `insufficient_vram`.

use std::time::Duration;

use odac_e2e::gpu_lab::Lab;
use odac_e2e::require_docker;
use odac_e2e::stack::Stack;
use odac_protocol::{FallbackTier, Reason};
use odac_simulator::state::views::AppView;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(60);
/// Where the lab's hook places the stand-in libraries.
const LIBS: &str = "/usr/lib/x86_64-linux-gnu";

/// A stack whose agent works on a lab started with `extra`.
fn stack_on_lab(scenario: &str, gpus: &str, extra: &[&str]) -> (Stack, Lab) {
    let mut stack = Stack::builder(scenario).no_agent().start().unwrap();
    let lab = Lab::start_for(&mut stack, gpus, extra).unwrap();
    stack.start_agent_connected(&[]).unwrap();
    (stack, lab)
}

/// Stops the agent, then the lab, failing on anything the lab left.
fn finish(mut stack: Stack, lab: Lab) {
    drop(stack.agent.take());
    lab.stop().unwrap();
}

/// Builds `tag` in the lab's engine: the lab image with `env` lines (`KEY=VALUE`).
fn derived_image(stack: &Stack, lab: &Lab, tag: &str, env: &[&str]) {
    let ctx = stack.dir().join(tag.replace(['/', ':'], "-"));
    std::fs::create_dir_all(&ctx).unwrap();
    let mut dockerfile = format!("FROM {}\n", lab.image);
    for kv in env {
        dockerfile.push_str(&format!("ENV {kv}\n"));
    }
    std::fs::write(ctx.join("Dockerfile"), dockerfile).unwrap();
    lab.docker(&["build", "-q", "-t", tag, &ctx.display().to_string()])
        .unwrap();
}

/// A transcoder stand-in: exits 3 unless the NVENC and NVDEC libraries are there, else lists
/// the libraries it got and sleeps.
fn transcoder(name: &str, image: &str, gpu: Value) -> Value {
    let check = format!(
        "test -e {LIBS}/libnvidia-encode.so.1 && test -e {LIBS}/libnvcuvid.so.1 || {{ ls {LIBS}; exit 3; }}; ls {LIBS}; trap 'exit 0' TERM; sleep 999999 & wait"
    );
    json!({"name": name, "image": image, "gpu": gpu, "command": ["sh", "-c", check]})
}

fn container_of(a: &AppView) -> String {
    a.status
        .as_ref()
        .and_then(|s| s.container_id.clone())
        .expect("a container id")
}

fn capabilities(a: &AppView) -> Vec<String> {
    a.attached
        .as_ref()
        .map(|a| a.capabilities.clone())
        .unwrap_or_default()
}

/// The capabilities the hook logged for container `id`.
fn hook_capabilities(lab: &Lab, id: &str) -> Vec<Vec<String>> {
    lab.hook_lines()
        .unwrap()
        .into_iter()
        .filter(|l| l.kind == "hook" && l.container == id)
        .map(|l| l.capabilities)
        .collect()
}

/// With `capabilities: ["video"]` the transcoder finds NVENC/NVDEC and runs, the status and
/// the hook say `video`; without, it gets the toolkit's `compute,utility` (no NVENC: it
/// exits) and the status says exactly that; an image whose own `NVIDIA_DRIVER_CAPABILITIES`
/// is `all` gets every capability without asking.
#[test]
fn driver_capabilities_reach_the_toolkit_and_the_status() {
    const SCENARIO: &str = "gpulab-caps";
    require_docker!(SCENARIO);
    let (stack, lab) = stack_on_lab(SCENARIO, "nvidia:2", &["--nvidia-runtime", "none"]);

    let gpu = json!({"runtime": "nvidia", "count": 1, "capabilities": ["video", "compute"]});
    stack
        .sim
        .create_app(&transcoder("enc", &lab.image, gpu))
        .unwrap();
    let enc = stack
        .wait_app("enc", WAIT, "running with video", |a| {
            a.state == "running" && a.attached.is_some()
        })
        .unwrap();
    assert_eq!(capabilities(&enc), vec!["compute", "video"], "{enc:?}");
    let id = container_of(&enc);
    assert_eq!(
        hook_capabilities(&lab, &id),
        vec![vec!["compute".to_owned(), "video".to_owned()]]
    );
    let ins = lab.inspect(&id).unwrap();
    assert_eq!(
        ins["HostConfig"]["DeviceRequests"][0]["Capabilities"],
        json!([["gpu", "compute", "video"]])
    );

    // no capabilities: the toolkit's default, which has no NVENC, and the status says so
    let gpu = json!({"runtime": "nvidia", "count": 1});
    stack
        .sim
        .create_app(&transcoder("plain", &lab.image, gpu))
        .unwrap();
    let plain = stack
        .wait_app("plain", WAIT, "attached with compute,utility", |a| {
            a.attached.is_some()
                && a.status
                    .as_ref()
                    .is_some_and(|s| s.last_exit_code == Some(3))
        })
        .unwrap();
    assert_eq!(
        capabilities(&plain),
        vec!["compute", "utility"],
        "{plain:?}"
    );
    let logged = hook_capabilities(&lab, &container_of(&plain));
    assert!(
        !logged.is_empty()
            && logged
                .iter()
                .all(|c| c == &vec!["compute".to_owned(), "utility".to_owned()]),
        "{logged:?}"
    );

    // the image's own NVIDIA_DRIVER_CAPABILITIES=all is honoured
    let tag = "odac-test/nvcaps-all:1";
    derived_image(&stack, &lab, tag, &["NVIDIA_DRIVER_CAPABILITIES=all"]);
    stack
        .sim
        .create_app(&transcoder(
            "allimg",
            tag,
            json!({"runtime": "nvidia", "count": 1}),
        ))
        .unwrap();
    let all = stack
        .wait_app("allimg", WAIT, "running with every capability", |a| {
            a.state == "running" && a.attached.is_some()
        })
        .unwrap();
    assert_eq!(
        capabilities(&all),
        vec![
            "compute", "utility", "video", "graphics", "display", "compat32"
        ],
        "{all:?}"
    );

    // the lab's default driver (550, CUDA 12.4) meets cuda>=12.4
    let cuda = "odac-test/cuda124:1";
    derived_image(&stack, &lab, cuda, &["NVIDIA_REQUIRE_CUDA=cuda>=12.4"]);
    stack
        .sim
        .create_app(
            &json!({"name": "cuda", "image": cuda, "gpu": {"runtime": "nvidia", "count": 1}}),
        )
        .unwrap();
    stack
        .wait_app("cuda", WAIT, "running with its gpu on a 550 driver", |a| {
            a.state == "running" && a.attached.is_some()
        })
        .unwrap();

    // the seed's payload for Jellyfin with `--nvidia --optional`: the catalog's entry brings
    // the video capability (its gpu.capabilities, added to the payload's own request), so the transcoder finds NVENC
    // (the lab's image stands in for Jellyfin's, which this machine cannot pull)
    let mut jellyfin = transcoder(
        "jf",
        &lab.image,
        json!({"runtime": "nvidia", "optional": true}),
    );
    jellyfin["type"] = json!("app");
    jellyfin["app"] = json!("jellyfin");
    stack.sim.create_app(&jellyfin).unwrap();
    let jf = stack
        .wait_app("jf", WAIT, "jellyfin running with video", |a| {
            a.state == "running" && a.attached.is_some()
        })
        .unwrap();
    assert!(capabilities(&jf).contains(&"video".to_owned()), "{jf:?}");
    finish(stack, lab);
}

/// On a lab with driver 535 (CUDA 12.2) an image that requires `cuda>=12.4`: required →
/// `failed` / `driver_too_old` naming 12.4, 12.2 and the fix, and no container was made;
/// optional → running on the CPU with that reason; `NVIDIA_DISABLE_REQUIRE=1` → attached.
/// The inventory and `odac host show` say CUDA 12.2.
#[test]
fn cuda_requirements_are_checked_before_any_create() {
    const SCENARIO: &str = "gpulab-cuda";
    require_docker!(SCENARIO);
    let (stack, lab) = stack_on_lab(
        SCENARIO,
        "nvidia:1",
        &["--nvidia-runtime", "none", "--nvidia-driver", "535.183.01"],
    );
    let host = stack.sim.hosts().unwrap()[0].clone();
    let inv = host.inventory.clone().expect("an inventory");
    assert_eq!(
        inv.host.cuda_version.as_deref(),
        Some("12.2"),
        "{:?}",
        inv.host
    );

    let image = "odac-test/cuda124:1";
    derived_image(&stack, &lab, image, &["NVIDIA_REQUIRE_CUDA=cuda>=12.4"]);
    let body = |name: &str, gpu: Value| json!({"name": name, "image": image, "gpu": gpu});
    stack
        .sim
        .create_app(&body("req", json!({"runtime": "nvidia", "count": 1})))
        .unwrap();
    let req = stack
        .wait_app("req", WAIT, "failed with driver_too_old", |a| {
            a.state == "failed" && a.reason == Some(Reason::DriverTooOld)
        })
        .unwrap();
    let error = req
        .status
        .as_ref()
        .and_then(|s| s.last_error.clone())
        .unwrap_or_default();
    for needle in [
        "cuda>=12.4",
        "CUDA 12.2",
        "install NVIDIA driver ≥ 550 for CUDA 12.4",
    ] {
        assert!(error.contains(needle), "{needle:?} in {error}");
    }
    assert!(
        req.status
            .as_ref()
            .is_some_and(|s| s.container_id.is_none()),
        "{req:?}"
    );
    let made = lab
        .docker(&["ps", "-aq", "--filter", "label=odac.app=req"])
        .unwrap();
    assert!(made.trim().is_empty(), "no container was created: {made}");

    stack
        .sim
        .create_app(&body(
            "opt",
            json!({"runtime": "nvidia", "count": 1, "optional": true}),
        ))
        .unwrap();
    let opt = stack
        .wait_app("opt", WAIT, "running on the cpu", |a| a.state == "running")
        .unwrap();
    assert!(opt.attached.is_none(), "{opt:?}");
    let fb = opt.fallback.clone().expect("a fallback");
    assert_eq!(
        (fb.tier, fb.reason),
        (FallbackTier::Preflight, Reason::DriverTooOld)
    );
    assert!(fb.detail.unwrap_or_default().contains("CUDA 12.2"));

    let mut off = body("off", json!({"runtime": "nvidia", "count": 1}));
    off["env"] = json!({"NVIDIA_DISABLE_REQUIRE": "1"});
    stack.sim.create_app(&off).unwrap();
    let off = stack
        .wait_app("off", WAIT, "running with its gpu", |a| {
            a.state == "running" && a.attached.is_some()
        })
        .unwrap();
    let id = container_of(&off);
    assert!(
        lab.hook_lines()
            .unwrap()
            .iter()
            .any(|l| l.kind == "hook" && l.container == id),
        "the hook started it"
    );
    assert!(
        !lab.hook_lines()
            .unwrap()
            .iter()
            .any(|l| l.kind == "refused"),
        "the lab's hook refused nothing: the agent never asked"
    );
    // what the start would have met: the lab's hook refuses it in the toolkit's words
    let refused = lab
        .docker(&["run", "--rm", "--gpus", "1", image, "true"])
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains(
            "requirement error: unsatisfied condition: cuda>=12.4, please update your driver"
        ),
        "{refused}"
    );
    finish(stack, lab);
}

/// `min_vram_mib` on the lab's AMD GPUs, 16 GiB each (`--vram-mib 16384`, read from sysfs
/// `mem_info_vram_total`): 20000 MiB → `failed` / `insufficient_vram` naming the need and
/// the best GPU's total, no container; 8000 → attached.
#[test]
fn min_vram_picks_only_gpus_with_enough_memory() {
    const SCENARIO: &str = "gpulab-vram";
    require_docker!(SCENARIO);
    let (stack, lab) = stack_on_lab(SCENARIO, "amd:2", &["--vram-mib", "16384"]);
    let body = |name: &str, mib: u32| json!({"name": name, "image": lab.image, "gpu": {"runtime": "amd", "count": 1, "min_vram_mib": mib}});
    stack.sim.create_app(&body("big", 20_000)).unwrap();
    let big = stack
        .wait_app("big", WAIT, "failed with insufficient_vram", |a| {
            a.state == "failed" && a.reason == Some(Reason::InsufficientVram)
        })
        .unwrap();
    let error = big
        .status
        .as_ref()
        .and_then(|s| s.last_error.clone())
        .unwrap_or_default();
    assert!(
        error.contains("20000 MiB") && error.contains("16384 MiB total"),
        "{error}"
    );
    let made = lab
        .docker(&["ps", "-aq", "--filter", "label=odac.app=big"])
        .unwrap();
    assert!(made.trim().is_empty(), "no container: {made}");

    stack.sim.create_app(&body("fits", 8000)).unwrap();
    stack
        .wait_app("fits", WAIT, "running with its gpu", |a| {
            a.state == "running" && a.attached.is_some()
        })
        .unwrap();
    finish(stack, lab);
}
