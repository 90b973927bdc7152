//! Why an app is down, through the simulator: the spec's `restart`, `healthcheck` and `logs`
//! reach the agent as sent; a crash status (with a GPU fallback left from before) shows its
//! crash as the REASON of `odac app list`, never the GPU reason; `odac app show` prints the exit
//! code, the OOM flag, the next retry and the last output; the fields survive a restart of the
//! simulator (its store); the health check's verdict follows the state.

use crate::common;

use std::time::Duration;

use common::{Sim, stdout};
use odac_protocol::{
    AgentMessage, AppState, AppStatusReport, ControlMessage, HealthReport, HealthState,
    RestartPolicy,
};
use odac_simulator::fake_agent::agent_conn::Incoming;
use odac_simulator::fake_agent::inventories::profile;

#[test]
fn crash_and_health_reach_the_cli_and_survive_a_restart() {
    let mut sim = Sim::start();
    let mut agent = sim.agent("agt_a", profile(3, "a"));
    let (s, _) = sim.call(
        "POST",
        "/api/apps",
        Some(
            r#"{"name":"boom","image":"busybox","restart":"on_failure",
                "healthcheck":{"command":["true"],"interval_secs":5},
                "logs":{"max_size_bytes":1048576}}"#,
        ),
    );
    assert_eq!(s, 201);
    let sent = sim.rt.block_on(async {
        match agent.recv_timeout(Duration::from_secs(5)).await.unwrap() {
            Incoming::Message(ControlMessage::AppUpsert(u)) => u.app,
            other => panic!("upsert expected: {other:?}"),
        }
    });
    assert_eq!(sent.restart, Some(RestartPolicy::OnFailure));
    assert_eq!(sent.healthcheck.unwrap().interval_secs, Some(5));
    assert_eq!(sent.logs.unwrap().max_size_bytes, Some(1 << 20));

    let mut st = odac_simulator::fake_agent::sim_agent::status_for(
        &odac_protocol::AppSpec::new("boom", "busybox"),
        &profile(3, "a"),
        2,
    );
    st.state = AppState::CrashLoop;
    st.restart_count = 4;
    st.last_exit_code = Some(3);
    common::crash_loop_after_an_old_refusal(&mut st);
    sim.rt.block_on(async {
        agent
            .send(&AgentMessage::AppStatus(AppStatusReport {
                seq: 2,
                status: st.clone(),
            }))
            .await
            .unwrap();
    });
    sim.wait_api("/api/apps/boom", |v| v["state"] == "crash_loop");
    let check = |sim: &Sim| {
        let list = stdout(&sim.odac(&["app", "list"]));
        let row = list.lines().find(|l| l.starts_with("boom")).unwrap();
        assert!(row.ends_with("crash_loop (exit 3)"), "{list}");
        assert!(!row.contains("engine_rejected"), "{list}");
        let show = stdout(&sim.odac(&["app", "show", "boom"]));
        for want in [
            "state         crash_loop\n",
            "restarts      4\n",
            "gpu reason    engine_rejected\n",
            "crash         crash_loop: ",
            "exit code     3\n",
            "oom killed    no\n",
            "next retry    2100-01-01T00:00:00.000Z",
            "last output:\n  loading\n  boom\n",
        ] {
            assert!(show.contains(want), "{want:?} in\n{show}");
        }
    };
    check(&sim);
    drop(agent);
    sim.restart();
    check(&sim);

    let mut agent = sim.agent("agt_a", profile(3, "a"));
    st.state = AppState::Running;
    st.crash = None;
    st.gpu.fallback = None;
    st.health = Some(HealthReport {
        state: HealthState::Unhealthy,
        last_output: Some("not ready".into()),
    });
    sim.rt.block_on(async {
        agent
            .send(&AgentMessage::AppStatus(AppStatusReport {
                seq: 3,
                status: st,
            }))
            .await
            .unwrap();
    });
    sim.wait_api("/api/apps/boom", |v| v["state"] == "running");
    let list = stdout(&sim.odac(&["app", "list"]));
    assert!(list.contains(" running (unhealthy) "), "{list}");
    let show = stdout(&sim.odac(&["app", "show", "boom"]));
    assert!(
        show.contains("health        unhealthy\nhealth check  not ready\n"),
        "{show}"
    );
}
