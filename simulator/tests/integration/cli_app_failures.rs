//! An app's own failure (a pull, a build) in `odac app show`: its `reason`, never a `gpu
//! reason` with a pre-flight tier; when the agent tries again (`next retry`), so a failed pull
//! does not look final; and a fix that names the command to run: `odac registry login HOST`
//! for a refused login, the catalog mirror (`--catalog-registry`) for a registry the host
//! cannot reach.

use crate::common;

use common::{Sim, stdout};
use odac_protocol::{AppSpec, AppState, ImageFailure, Reason};
use odac_simulator::fake_agent::agent_conn::AgentConn;
use odac_simulator::fake_agent::inventories::profile;

const IMAGE: &str = "registry.example:5000/team/web:1";

fn setup(sim: &Sim) -> AgentConn {
    sim.agent_with_app("agt_fail", "web", IMAGE)
}

/// Report a failed pull of `web` with the registry's `words`; `odac app show web`.
fn show_failed(sim: &Sim, c: &mut AgentConn, seq: u64, reason: Reason, words: &str) -> String {
    let mut st = odac_simulator::fake_agent::sim_agent::status_for(
        &AppSpec::new("web", IMAGE),
        &profile(1, "agt_fail"),
        2,
    );
    st.state = AppState::Failed;
    st.last_error = Some(format!("{reason}: {words}"));
    st.image_failure = Some(ImageFailure {
        reason,
        detail: Some(words.to_owned()),
    });
    st.next_retry_at_ms = Some(4_102_444_800_000);
    let error = st.last_error.clone().unwrap();
    sim.send_status(c, seq, st);
    sim.wait_api("/api/apps/web", |v| {
        v["status"]["last_error"] == error.as_str()
    });
    stdout(&sim.odac(&["app", "show", "web"]))
}

#[test]
fn pull_and_build_failures_are_the_app_s_own_with_their_retry_and_fix() {
    let sim = Sim::start();
    let mut c = setup(&sim);
    let show = show_failed(
        &sim,
        &mut c,
        2,
        Reason::ImagePullFailed,
        "Head \"https://registry.example:5000/v2/team/web/manifests/1\": unauthorized: authentication required",
    );
    assert!(show.contains("reason        image_pull_failed\n"), "{show}");
    assert!(!show.contains("gpu "), "not a gpu reason:\n{show}");
    assert!(
        !show.contains("preflight") && !show.contains("pre-flight"),
        "{show}"
    );
    assert!(
        show.contains("next retry    2100-01-01T00:00:00.000Z"),
        "{show}"
    );
    assert!(
        show.contains(
            "fix           log in to the registry: odac registry login registry.example:5000"
        ),
        "{show}"
    );

    let show = show_failed(
        &sim,
        &mut c,
        3,
        Reason::ImagePullFailed,
        "Get \"https://registry.example:5000/v2/\": dial tcp 10.0.0.9:5000: connect: connection refused",
    );
    assert!(show.contains("--catalog-registry"), "{show}");
    assert!(
        show.contains("cannot reach the registry registry.example:5000"),
        "{show}"
    );

    let show = show_failed(
        &sim,
        &mut c,
        4,
        Reason::BuildFailed,
        "The command '/bin/sh -c make' returned a non-zero code: 2",
    );
    assert!(show.contains("reason        build_failed\n"), "{show}");
    assert!(!show.contains("gpu reason"), "{show}");
    assert!(show.contains("next retry    2100-01-01"), "{show}");
    assert!(show.contains("fix           read the build log"), "{show}");
}
