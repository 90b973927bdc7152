//! GPU health end to end in the GPU lab: app A runs on NVIDIA GPU 0; `odac-sim gpu-lab inject
//! xid 79 --gpu 0` writes the driver's line into the lab's kmsg stand-in; the host's inventory
//! at the API shows GPU 0 `unhealthy` with the Xid (and `odac host show` says so), a new app B
//! is placed on GPU 1, A restarted (optional) moves to GPU 1; after the recovery period (5 s
//! here) GPU 0 is healthy again, with an event, and a new app C gets it.

use std::process::Command;
use std::time::{Duration, Instant};

use odac_e2e::bins::{SIM, bin};
use odac_e2e::figures::{figure, secs};
use odac_e2e::gpu_lab::Lab;
use odac_e2e::poll::poll;
use odac_e2e::require_docker;
use odac_e2e::stack::Stack;
use odac_protocol::{GpuHealthState, GpuInfo};
use odac_simulator::state::views::AppView;
use serde_json::{Value, json};

const SCENARIO: &str = "gpulab-health";
const WAIT: Duration = Duration::from_secs(60);
const GPU0: &str = "0000:10:00.0";

fn uuid(i: u32) -> String {
    format!("GPU-0dac1ab0-0000-4000-8000-{i:012x}")
}

fn app(lab: &Lab, name: &str) -> Value {
    json!({"name": name, "image": lab.image,
           "gpu": {"runtime": "nvidia", "count": 1, "optional": true}})
}

/// The app running with one GPU attached, that GPU's UUID.
fn on_gpu(stack: &Stack, name: &str, what: &str, want: &str) -> AppView {
    stack
        .wait_app(name, WAIT, what, |a| {
            a.state == "running"
                && a.attached
                    .as_ref()
                    .is_some_and(|at| at.devices == vec![want.to_owned()])
        })
        .unwrap()
}

/// GPU 0 as the control plane has it in the host's inventory.
fn gpu0(stack: &Stack) -> Option<GpuInfo> {
    let hosts = stack.sim.hosts().ok()?;
    let inv = hosts.first()?.inventory.clone()?;
    inv.gpus.iter().find(|g| g.pci_address == GPU0).cloned()
}

fn inject(lab: &Lab, args: &[&str]) {
    let out = Command::new(bin(SIM).unwrap())
        .args(["gpu-lab", "inject", "--dir"])
        .arg(&lab.dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn an_xid_79_moves_apps_off_the_gpu_and_it_is_trusted_again_after_the_recovery_period() {
    require_docker!(SCENARIO);
    let mut stack = Stack::builder(SCENARIO).no_agent().start().unwrap();
    let lab = Lab::start_for(&mut stack, "nvidia:2", &[]).unwrap();
    stack
        .start_agent_connected(&[("ODAC_AGENT__GPU__HEALTH_RECOVERY_SECS", "5")])
        .unwrap();

    stack.sim.create_app(&app(&lab, "a")).unwrap();
    on_gpu(&stack, "a", "a on gpu 0", &uuid(0));

    let t = Instant::now();
    inject(&lab, &["xid", "79", "--gpu", "0"]);
    let health = poll("gpu 0 unhealthy at the api", WAIT, || {
        match gpu0(&stack).and_then(|g| g.health) {
            Some(h) if h.state == GpuHealthState::Unhealthy => Ok(h),
            other => Err(format!("{other:?}")),
        }
    })
    .unwrap();
    // the figure is the measure (a real-time bound here would flake on a loaded machine; the
    // poll's own WAIT is the bound)
    figure(SCENARIO, "xid79_to_unhealthy_at_api", secs(t.elapsed()));
    let error = health.last_error.unwrap();
    assert_eq!(error.xid, Some(79));
    assert_eq!(error.summary, "xid 79: GPU has fallen off the bus");
    let hosts = stack.sim.hosts().unwrap();
    let show = stack.sim.odac_ok(&["host", "show", &hosts[0].id]).unwrap();
    let row = show
        .stdout
        .lines()
        .find(|l| l.starts_with(GPU0))
        .unwrap_or("");
    assert!(row.contains("unhealthy:xid79"), "{}", show.stdout);

    // a new app goes to GPU 1; A, restarted, moves there too
    stack.sim.create_app(&app(&lab, "b")).unwrap();
    on_gpu(&stack, "b", "b on gpu 1", &uuid(1));
    stack.sim.odac_ok(&["app", "restart", "a"]).unwrap();
    on_gpu(&stack, "a", "a moved to gpu 1", &uuid(1));

    // after the recovery period GPU 0 is healthy again, with an event, and allocatable
    poll("gpu 0 healthy again", WAIT, || {
        match gpu0(&stack).and_then(|g| g.health) {
            Some(h) if h.state == GpuHealthState::Healthy => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .unwrap();
    poll("the recovery event", WAIT, || {
        let log = stack.sim.event_log().map_err(|e| e.to_string())?;
        let text = log.to_string();
        if text.contains(&format!("gpu {GPU0} is healthy again")) {
            Ok(())
        } else {
            Err(text)
        }
    })
    .unwrap();
    stack.sim.create_app(&app(&lab, "c")).unwrap();
    on_gpu(&stack, "c", "c on the recovered gpu 0", &uuid(0));

    drop(stack.agent.take());
    let took = lab.stop().unwrap();
    figure(SCENARIO, "lab_stop", secs(took));
    let main = stack.containers().unwrap();
    assert!(main.is_empty(), "nothing on the main engine: {main:?}");
}
