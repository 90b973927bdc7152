//! The GPU facts the README promises, in the `odac` CLI: `odac host show` lists the apps that
//! hold each GPU even before the host's first `gpu_stats` report (from the apps' attached
//! devices), `odac app show` prints the request and the devices attached, and an unknown app
//! or host name is answered with the names the control plane knows.

use crate::common;

use common::{Sim, stderr, stdout};
use odac_protocol::{AppSpec, AppState, Attached, GpuRequest, Mechanism, Vendor};
use odac_simulator::fake_agent::inventories::profile;

#[test]
fn host_show_lists_the_apps_per_gpu_and_app_show_the_devices() {
    let sim = Sim::start();
    // profile 0: one NVIDIA GPU
    let inventory = profile(0, "gpu-a");
    let mut c = sim.agent("agt_gpu", inventory.clone());
    let gpu: GpuRequest = serde_json::from_str(r#"{"runtime":"nvidia","count":1}"#).unwrap();
    for (seq, name) in [(2, "a1"), (3, "a2"), (4, "a3")] {
        let mut spec = AppSpec::new(name, "busybox");
        spec.gpu = Some(gpu.clone());
        sim.rt
            .block_on(sim.server().hub.create_app(Some("agt_gpu"), spec.clone()))
            .unwrap();
        let mut st = odac_simulator::fake_agent::sim_agent::status_for(&spec, &inventory, 2);
        st.state = AppState::Running;
        st.gpu.attached = Some(Attached {
            vendor: Vendor::Nvidia,
            mechanism: Mechanism::Cdi,
            devices: vec!["nvidia.com/gpu=0".into()],
            capabilities: vec!["compute".into(), "utility".into()],
        });
        sim.send_status(&mut c, seq, st);
        sim.wait_api(&format!("/api/apps/{name}"), |v| v["state"] == "running");
    }
    let out = sim.odac(&["host", "show", "agt_gpu"]);
    let text = stdout(&out);
    let row = text
        .lines()
        .find(|l| l.contains("NVIDIA A100"))
        .unwrap_or_else(|| panic!("{text}{}", stderr(&out)));
    assert!(row.ends_with("a1,a2,a3"), "{text}");

    let show = stdout(&sim.odac(&["app", "show", "a2"]));
    assert!(show.contains("gpu request   nvidia count=1"), "{show}");
    assert!(
        show.contains("gpu attached  nvidia: nvidia.com/gpu=0 [compute,utility]\n"),
        "{show}"
    );
}

#[test]
fn unknown_names_are_answered_with_the_known_ones() {
    let sim = Sim::start();
    let _c = sim.agent("agt_known", profile(1, "box-1"));
    sim.rt
        .block_on(
            sim.server()
                .hub
                .create_app(Some("agt_known"), AppSpec::new("web", "busybox")),
        )
        .unwrap();
    let out = sim.odac(&["host", "show", "ghost"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("unknown host \"ghost\""), "{err}");
    assert!(err.contains("known hosts: box-1 (agt_known)"), "{err}");
    let out = sim.odac(&["app", "show", "wbe"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("unknown app \"wbe\"; known apps: web"),
        "{err}"
    );
}
