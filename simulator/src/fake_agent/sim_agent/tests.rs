//! Unit tests of the simulated agent: placement, statuses and what it reports.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;
use crate::fake_agent::inventories::profile;
use odac_protocol::{GpuRuntime, Vendor};

fn spec(gpu: Option<GpuRequest>) -> AppSpec {
    AppSpec {
        gpu,
        ..AppSpec::new("web", "busybox")
    }
}

#[test]
fn nvidia_box_attaches_and_cpu_box_falls_back() {
    let req = GpuRequest::new(GpuRuntime::Nvidia)
        .with_count(1)
        .with_optional(true);
    let st = status_for(&spec(Some(req.clone())), &profile(0, "a"), 3);
    let a = st.gpu.attached.unwrap();
    assert_eq!(a.vendor, Vendor::Nvidia);
    assert_eq!(a.devices.len(), 1);
    assert_eq!(st.state, AppState::Running);

    let st = status_for(&spec(Some(req)), &profile(3, "b"), 3);
    assert_eq!(st.state, AppState::Running);
    assert_eq!(st.gpu.fallback.unwrap().reason, Reason::NoDevice);

    let required = GpuRequest::new(GpuRuntime::Nvidia);
    let st = status_for(&spec(Some(required)), &profile(4, "c"), 3);
    assert_eq!(st.state, AppState::Failed);
    assert_eq!(st.gpu.fallback.unwrap().reason, Reason::NoContainerRuntime);
    let error = st.last_error.unwrap();
    assert!(
        error.starts_with("no_container_runtime: ") && error.contains("; fix: "),
        "the agent's refusal, with its fix: {error}"
    );
}

#[test]
fn auto_vendor_and_counts() {
    let auto = GpuRequest::default().with_optional(true);
    let Plan::Attach(a) = place(&auto, &profile(1, "amd")) else {
        panic!("auto on an amd box attaches")
    };
    assert_eq!(a.vendor, Vendor::Amd);
    assert_eq!(
        a.devices,
        [
            "/dev/kfd",
            "/dev/dri/card1",
            "/dev/dri/renderD128",
            "/dev/dri/card2",
            "/dev/dri/renderD129"
        ],
        "every gpu by default, /dev/kfd once"
    );
    let too_many = GpuRequest::new(GpuRuntime::Amd).with_count(3);
    let Plan::Refuse { reason, .. } = place(&too_many, &profile(1, "amd")) else {
        panic!("three of two amd gpus is refused")
    };
    assert_eq!(reason, Reason::InsufficientDevices);
}

#[test]
fn gpu_change_needs_a_restart() {
    let mut agent = SimAgent::new(
        SimAgentConfig {
            url: String::new(),
            ca_pem: Vec::new(),
            token: String::new(),
            agent_id: "a".into(),
            inventory: profile(3, "cpu"),
            heartbeat: Duration::from_secs(20),
        },
        Arc::default(),
    );
    agent.upsert(spec(None));
    assert!(!agent.status("web").unwrap().restart_required);
    agent.upsert(spec(Some(GpuRequest::default().with_optional(true))));
    let st = agent.status("web").unwrap();
    assert!(st.restart_required);
    assert!(st.gpu.requested.is_some() && st.gpu.fallback.is_none());
    let mut restarted = spec(Some(GpuRequest::default().with_optional(true)));
    restarted.restart_token = Some("r1".into());
    agent.upsert(restarted);
    let st = agent.status("web").unwrap();
    assert!(!st.restart_required);
    assert_eq!(st.restart_count, 1);
    assert_eq!(st.gpu.fallback.unwrap().reason, Reason::NoDevice);
}
