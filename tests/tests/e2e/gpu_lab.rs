//! GPU flows end to end without GPU hardware: each test starts `odac-sim gpu-lab` (a private
//! Docker engine configured like a GPU host, with NVIDIA toolkit stand-ins and a host root
//! describing its GPUs), points a real agent at it (`docker.host`, `host_root`) and checks
//! what the engine really did: the hook log, inspect, and the devices a command inside the
//! container sees. Every test ends by stopping the lab and checking it left no process,
//! mount, container, network namespace or file behind.

use std::collections::BTreeSet;
use std::time::Duration;

use odac_e2e::figures::{figure, secs};
use odac_e2e::gpu_lab::Lab;
use odac_e2e::require_docker;
use odac_e2e::stack::Stack;
use odac_protocol::{FallbackTier, Mechanism, Reason, Vendor};
use odac_simulator::state::views::AppView;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(60);
/// Render nodes and `/dev/kfd` belong to this group in the lab's host root.
const RENDER_GID: &str = "4610";
/// Card nodes belong to this group.
const VIDEO_GID: &str = "4044";
/// The lab's NVIDIA UUIDs.
fn uuid(i: u32) -> String {
    format!("GPU-0dac1ab0-0000-4000-8000-{i:012x}")
}

/// The agent's NVIDIA verdict detail (schedulable), after checking whether the engine lists
/// the `nvidia` runtime.
fn nvidia_verdict(stack: &Stack, runtime_registered: bool) -> String {
    let inv = stack.sim.hosts().unwrap()[0]
        .inventory
        .clone()
        .expect("an inventory");
    assert_eq!(
        inv.engine.runtimes.iter().any(|r| r == "nvidia"),
        runtime_registered,
        "{:?}",
        inv.engine.runtimes
    );
    let verdict = inv
        .accelerators
        .get(&Vendor::Nvidia)
        .cloned()
        .expect("an nvidia verdict");
    assert!(verdict.schedulable, "{verdict:?}");
    verdict.detail.unwrap_or_default()
}

/// A stack whose agent works on the lab's engine and host root.
fn stack_on_lab(scenario: &str, gpus: &str, extra: &[&str]) -> (Stack, Lab) {
    stack_on_lab_with(scenario, gpus, extra, &[])
}

/// [`stack_on_lab`] with extra `ODAC_AGENT__*` settings for the agent.
fn stack_on_lab_with(
    scenario: &str,
    gpus: &str,
    extra: &[&str],
    agent_env: &[(&str, &str)],
) -> (Stack, Lab) {
    let mut stack = Stack::builder(scenario).no_agent().start().unwrap();
    let t = std::time::Instant::now();
    let lab = Lab::start_for(&mut stack, gpus, extra).unwrap();
    figure(scenario, "lab_start", secs(t.elapsed()));
    stack.start_agent_connected(agent_env).unwrap();
    (stack, lab)
}

/// Stops the agent, then the lab, failing on anything the lab left.
fn finish(scenario: &str, mut stack: Stack, lab: Lab) {
    drop(stack.agent.take());
    let took = lab.stop().unwrap();
    figure(scenario, "lab_stop", secs(took));
    let main = stack.containers().unwrap();
    assert!(main.is_empty(), "nothing on the main engine: {main:?}");
}

fn app(lab: &Lab, name: &str, gpu: Value, command: Option<&str>) -> Value {
    let mut body = json!({"name": name, "image": lab.image, "gpu": gpu});
    if let Some(c) = command {
        body["command"] = json!([
            "sh",
            "-c",
            format!("{c}; trap 'exit 0' TERM; sleep 999999 & wait")
        ]);
    }
    body
}

fn running_with_gpu(stack: &Stack, name: &str) -> AppView {
    stack
        .wait_app(name, WAIT, "running with its gpu", |a| {
            a.state == "running" && a.attached.is_some()
        })
        .unwrap()
}

fn container_of(a: &AppView) -> String {
    a.status
        .as_ref()
        .and_then(|s| s.container_id.clone())
        .expect("a container id")
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The lines of the hook log of `kind` for container `id`.
fn hook_visible(lab: &Lab, kind: &str, id: &str) -> Vec<Vec<String>> {
    lab.hook_lines()
        .unwrap()
        .into_iter()
        .filter(|l| l.kind == kind && l.container == id)
        .map(|l| l.visible)
        .collect()
}

/// What `cmd` prints in the container (polled: the app's command runs after start).
fn logs_with(lab: &Lab, id: &str, needle: &str) -> String {
    odac_e2e::poll::poll("the container's output", Duration::from_secs(20), || {
        let out = lab.docker(&["logs", id]).map_err(|e| e.to_string())?;
        if out.contains(needle) {
            Ok(out)
        } else {
            Err(out)
        }
    })
    .unwrap()
}

/// NVIDIA by UUID through `DeviceRequests` alone (no `nvidia` runtime registered: moby's
/// `nvidia` device driver adds the toolkit's prestart hook, which the agent found installed in
/// the host root): a count-2 and a count-1 app on three GPUs get disjoint UUIDs covering all
/// three; the hook was asked for exactly those, inspect shows them, the container has their
/// device nodes.
#[test]
fn nvidia_by_uuid_through_device_requests_with_count_and_spread() {
    const SCENARIO: &str = "gpulab-nvidia";
    require_docker!(SCENARIO);
    let (stack, lab) = stack_on_lab(SCENARIO, "nvidia:3", &["--nvidia-runtime", "none"]);
    let verdict = nvidia_verdict(&stack, false);
    assert!(
        verdict.contains("nvidia-container-runtime-hook installed"),
        "{verdict}"
    );
    figure(SCENARIO, "verdict", verdict);
    stack
        .sim
        .create_app(&app(
            &lab,
            "two",
            json!({"runtime": "nvidia", "count": 2}),
            None,
        ))
        .unwrap();
    let two = running_with_gpu(&stack, "two");
    stack
        .sim
        .create_app(&app(
            &lab,
            "one",
            json!({"runtime": "nvidia", "count": 1}),
            None,
        ))
        .unwrap();
    let one = running_with_gpu(&stack, "one");

    let mut all = BTreeSet::new();
    for (a, count) in [(&two, 2), (&one, 1)] {
        let attached = a.attached.clone().unwrap();
        assert_eq!(attached.mechanism, Mechanism::NvidiaRuntime, "{attached:?}");
        assert_eq!(attached.devices.len(), count, "{attached:?}");
        let id = container_of(a);
        let ins = lab.inspect(&id).unwrap();
        let reqs = ins["HostConfig"]["DeviceRequests"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert_eq!(reqs.len(), 1, "{reqs:?}");
        assert_eq!(reqs[0]["Driver"], json!("nvidia"));
        assert_eq!(
            strings(&reqs[0]["DeviceIDs"]),
            attached.devices,
            "inspect = attached"
        );
        assert_eq!(
            hook_visible(&lab, "hook", &id),
            vec![attached.devices.clone()],
            "the hook was asked for exactly the allocated uuids"
        );
        let dev = lab.docker(&["exec", &id, "ls", "/dev"]).unwrap();
        for u in &attached.devices {
            let minor = (0..3).find(|i| &uuid(*i) == u).expect("a lab uuid");
            assert!(
                dev.split_whitespace()
                    .any(|n| n == format!("nvidia{minor}")),
                "{dev}"
            );
            assert!(all.insert(u.clone()), "spread: {u} given twice");
        }
    }
    assert_eq!(all, (0..3).map(uuid).collect(), "every gpu used once");
    figure(SCENARIO, "uuids", format!("{all:?}"));
    finish(SCENARIO, stack, lab);
}

/// NVIDIA through the runtime mechanism: `nvidia` is the engine's default runtime (as
/// `nvidia-ctk runtime configure --set-as-default` leaves it), so the container is created by
/// the runtime stand-in, which sees the same UUIDs the agent allocated.
#[test]
fn nvidia_through_the_nvidia_runtime() {
    const SCENARIO: &str = "gpulab-nvrt";
    require_docker!(SCENARIO);
    let (stack, lab) = stack_on_lab(SCENARIO, "nvidia:2", &["--nvidia-runtime", "default"]);
    let verdict = nvidia_verdict(&stack, true);
    assert!(
        verdict.contains("nvidia runtime registered with the engine"),
        "{verdict}"
    );
    stack
        .sim
        .create_app(&app(
            &lab,
            "rt",
            json!({"runtime": "nvidia", "count": 1}),
            None,
        ))
        .unwrap();
    let a = running_with_gpu(&stack, "rt");
    let attached = a.attached.clone().unwrap();
    assert_eq!(attached.mechanism, Mechanism::NvidiaRuntime);
    assert_eq!(attached.devices.len(), 1);
    assert!(
        attached.devices[0].starts_with("GPU-0dac1ab0-"),
        "by uuid: {attached:?}"
    );
    let id = container_of(&a);
    let ins = lab.inspect(&id).unwrap();
    assert_eq!(ins["HostConfig"]["Runtime"], json!("nvidia"));
    assert_eq!(
        strings(&ins["HostConfig"]["DeviceRequests"][0]["DeviceIDs"]),
        attached.devices
    );
    assert_eq!(
        hook_visible(&lab, "runtime", &id),
        vec![attached.devices.clone()]
    );
    assert_eq!(
        hook_visible(&lab, "hook", &id),
        vec![attached.devices.clone()]
    );
    finish(SCENARIO, stack, lab);
}

/// AMD as `/dev/kfd` plus each allocated GPU's render and card nodes, Intel as render and
/// card nodes, with the nodes' group ids added; `ls -l` inside the containers sees them.
#[test]
fn amd_and_intel_device_nodes_with_group_ids() {
    const SCENARIO: &str = "gpulab-nodes";
    require_docker!(SCENARIO);
    let (stack, lab) = stack_on_lab(SCENARIO, "amd:2,intel:1", &[]);
    let ls = "ls -l /dev/dri /dev/kfd; echo groups: $(id -G)";
    for name in ["rocm-a", "rocm-b"] {
        stack
            .sim
            .create_app(&app(
                &lab,
                name,
                json!({"runtime": "amd", "count": 1}),
                Some(ls),
            ))
            .unwrap();
    }
    stack
        .sim
        .create_app(&app(
            &lab,
            "igpu",
            json!({"runtime": "intel", "count": 1}),
            Some(ls),
        ))
        .unwrap();

    let mut renders = BTreeSet::new();
    for name in ["rocm-a", "rocm-b"] {
        let a = running_with_gpu(&stack, name);
        let attached = a.attached.clone().unwrap();
        assert_eq!(attached.mechanism, Mechanism::DeviceNodes);
        assert_eq!(attached.devices.len(), 3, "kfd, render, card: {attached:?}");
        assert_eq!(attached.devices[0], "/dev/kfd");
        let render = attached
            .devices
            .iter()
            .find(|d| d.contains("renderD"))
            .unwrap();
        assert!(renders.insert(render.clone()), "spread: {render} twice");
        let id = container_of(&a);
        let ins = lab.inspect(&id).unwrap();
        let mut groups = strings(&ins["HostConfig"]["GroupAdd"]);
        groups.sort();
        assert_eq!(groups, vec![VIDEO_GID, RENDER_GID]);
        let paths: Vec<String> = ins["HostConfig"]["Devices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["PathOnHost"].as_str().unwrap_or_default().to_owned())
            .collect();
        assert_eq!(paths, attached.devices, "inspect = attached");
        let out = logs_with(&lab, &id, "groups:");
        for d in &attached.devices {
            let node = d.rsplit('/').next().unwrap();
            assert!(
                out.lines().any(|l| l.starts_with('c') && l.ends_with(node)),
                "{node} seen inside: {out}"
            );
        }
        assert!(out.contains(&format!(" {RENDER_GID} ")), "{out}");
        let groups_line = out.lines().find(|l| l.starts_with("groups:")).unwrap();
        assert!(
            groups_line.contains(RENDER_GID) && groups_line.contains(VIDEO_GID),
            "{out}"
        );
        figure(SCENARIO, name, format!("{:?}", attached.devices));
    }
    assert_eq!(renders.len(), 2);

    let a = running_with_gpu(&stack, "igpu");
    let attached = a.attached.clone().unwrap();
    assert_eq!(attached.mechanism, Mechanism::DeviceNodes);
    assert_eq!(
        attached.devices,
        vec!["/dev/dri/card2", "/dev/dri/renderD130"]
    );
    let id = container_of(&a);
    let out = logs_with(&lab, &id, "groups:");
    assert!(out.contains("renderD130") && out.contains("card2"), "{out}");
    assert!(
        !out.lines()
            .any(|l| l.ends_with("/dev/kfd") && l.starts_with('c')),
        "{out}"
    );
    let mut groups = strings(&lab.inspect(&id).unwrap()["HostConfig"]["GroupAdd"]);
    groups.sort();
    assert_eq!(groups, vec![VIDEO_GID, RENDER_GID]);
    finish(SCENARIO, stack, lab);
}

/// The lab makes the hook fail: an optional NVIDIA app runs on the CPU with the engine's
/// words (`engine_rejected`), a required one fails with them. Learned refusals are off here so
/// that the engine is asked for both (`a12` in `appmgr_docker.rs` covers the learned path).
#[test]
fn hook_failure_optional_falls_back_required_fails() {
    const SCENARIO: &str = "gpulab-hookfail";
    require_docker!(SCENARIO);
    let (stack, lab) = stack_on_lab_with(
        SCENARIO,
        "nvidia:1",
        &[],
        &[("ODAC_AGENT__APPS__REFUSAL_MEMORY_SECS", "0")],
    );
    lab.fail_hook(true).unwrap();
    stack
        .sim
        .create_app(&app(
            &lab,
            "opt",
            json!({"runtime": "nvidia", "optional": true}),
            None,
        ))
        .unwrap();
    let opt = stack
        .wait_app("opt", WAIT, "running on the cpu", |a| {
            a.state == "running" && a.fallback.is_some()
        })
        .unwrap();
    let fallback = opt.fallback.clone().unwrap();
    assert_eq!(fallback.tier, FallbackTier::Engine, "{fallback:?}");
    assert_eq!(fallback.reason, Reason::EngineRejected);
    let detail = fallback.detail.clone().unwrap_or_default();
    assert!(
        detail.contains("nvidia-container-cli: initialization error") && detail.contains("hook"),
        "the engine's words: {detail}"
    );
    assert!(opt.attached.is_none());
    let id = container_of(&opt);
    let ins = lab.inspect(&id).unwrap();
    assert_eq!(ins["State"]["Running"], json!(true));
    assert!(
        ins["HostConfig"]["DeviceRequests"]
            .as_array()
            .is_none_or(Vec::is_empty),
        "{}",
        ins["HostConfig"]["DeviceRequests"]
    );
    figure(SCENARIO, "engine_words", format!("{detail:?}"));

    stack
        .sim
        .create_app(&app(&lab, "req", json!({"runtime": "nvidia"}), None))
        .unwrap();
    let req = stack
        .wait_app("req", WAIT, "failed", |a| a.state == "failed")
        .unwrap();
    let error = req
        .status
        .as_ref()
        .and_then(|s| s.last_error.clone())
        .unwrap_or_default();
    assert!(
        error.contains("nvidia-container-cli: initialization error"),
        "the engine's words: {req:?}"
    );
    assert!(req.attached.is_none(), "{req:?}");
    assert_eq!(req.reason, Some(Reason::EngineRejected), "{req:?}");
    let failed = lab
        .hook_lines()
        .unwrap()
        .into_iter()
        .filter(|l| l.kind == "hook-failed")
        .count();
    assert!(failed >= 2, "the hook ran and failed for both: {failed}");
    assert!(
        lab.hook_lines()
            .unwrap()
            .iter()
            .filter(|l| l.kind == "hook-failed")
            .all(|l| l.visible == vec![uuid(0)]),
        "asked for the allocated uuid"
    );
    finish(SCENARIO, stack, lab);
}

/// The "refused on restart" path: the GPU's render and card nodes vanish from the host and
/// the container stops (in that order, so the agent cannot restart it in between); the engine
/// refuses to start it again, and the agent recreates the optional app on the CPU.
#[test]
fn device_vanished_while_stopped_recreated_on_cpu() {
    const SCENARIO: &str = "gpulab-vanished";
    require_docker!(SCENARIO);
    let (stack, lab) = stack_on_lab(SCENARIO, "intel:1", &[]);
    stack
        .sim
        .create_app(&app(
            &lab,
            "vid",
            json!({"runtime": "intel", "optional": true}),
            None,
        ))
        .unwrap();
    let before = running_with_gpu(&stack, "vid");
    let old = container_of(&before);
    let mark = stack.agent().unwrap().process().unwrap().mark();
    for node in ["renderD128", "card0"] {
        std::fs::remove_file(lab.host_root.join("dev/dri").join(node)).unwrap();
    }
    lab.docker(&["stop", "-t", "1", &old]).unwrap();
    stack
        .agent()
        .unwrap()
        .process()
        .unwrap()
        .wait_for_line_after(mark, "the engine refused the device on restart", WAIT)
        .unwrap();
    let after = stack
        .wait_app("vid", WAIT, "recreated on the cpu", |a| {
            a.state == "running"
                && a.attached.is_none()
                && a.fallback.is_some()
                && a.status.as_ref().and_then(|s| s.container_id.as_deref()) != Some(old.as_str())
        })
        .unwrap();
    let ids = lab.containers(stack.cleanup.label()).unwrap();
    assert_eq!(
        ids,
        vec![container_of(&after)],
        "exactly one container, the new one"
    );
    let ins = lab.inspect(&ids[0]).unwrap();
    assert!(
        ins["HostConfig"]["Devices"]
            .as_array()
            .is_none_or(Vec::is_empty),
        "{}",
        ins["HostConfig"]["Devices"]
    );
    figure(SCENARIO, "fallback", format!("{:?}", after.fallback));
    finish(SCENARIO, stack, lab);
}

/// Input the lab cannot use is refused before anything is made: an unknown vendor (clap's
/// usage error naming it), and a dir with files in it (which the lab would delete on exit).
#[test]
fn bad_gpus_and_a_dir_with_files_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let sim = odac_e2e::bins::bin(odac_e2e::bins::SIM).unwrap();
    let dir = tmp.path().join("lab");
    let out = std::process::Command::new(&sim)
        .args(["gpu-lab", "--gpus", "tpu:1", "--dir"])
        .arg(&dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("invalid --gpus \"tpu:1\"") && err.contains("unknown vendor"),
        "{err}"
    );
    assert!(!dir.exists(), "nothing made");

    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("keep"), "mine").unwrap();
    let out = std::process::Command::new(&sim)
        .args(["gpu-lab", "--gpus", "intel:1", "--dir"])
        .arg(&dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("not empty") && err.contains(&dir.display().to_string()),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(dir.join("keep")).unwrap(), "mine");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "nothing made");
}
