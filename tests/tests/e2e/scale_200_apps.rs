//! Scale: a desired state of 200 apps (the tiny sleeper image) converges — 200 containers,
//! one per app, all running, the control plane's view equal to the agent's — and the agent's
//! peak resident set size (`VmHWM`) is printed with the time it took.

use std::time::{Duration, Instant};

use odac_e2e::figures::{figure, secs};
use odac_e2e::require_docker;
use odac_e2e::stack::Stack;

const SCENARIO: &str = "200-apps";
const APPS: usize = 200;

#[test]
fn two_hundred_apps_converge_and_peak_rss_is_printed() {
    require_docker!(SCENARIO);
    let stack = Stack::builder(SCENARIO)
        .agent_options(|o| {
            // a calmer loop: 200 containers are listed on every pass
            o.poll_interval_ms = 2_000;
            o.log_level = "info".to_owned();
        })
        .start()
        .unwrap();
    stack.wait_connected(Duration::from_secs(30)).unwrap();
    let agent = stack.agent().unwrap().process().unwrap();
    let rss_idle = agent.peak_rss_kib().unwrap();

    let t = Instant::now();
    for i in 0..APPS {
        stack
            .sim
            .create_app(&Stack::app_body(&format!("s{i:03}")))
            .unwrap();
    }
    figure(SCENARIO, "desired_state_sent_in", secs(t.elapsed()));
    stack
        .wait_converged(APPS, Duration::from_secs(360))
        .unwrap();
    let took = t.elapsed();
    let rss_peak = agent.peak_rss_kib().unwrap();
    let sim_rss = stack.sim.process().unwrap().peak_rss_kib().unwrap();
    figure(SCENARIO, "apps", APPS);
    figure(SCENARIO, "converged_in", secs(took));
    figure(
        SCENARIO,
        "containers_per_second",
        format!("{:.1}", APPS as f64 / took.as_secs_f64()),
    );
    figure(SCENARIO, "agent_peak_rss_idle", format!("{rss_idle} KiB"));
    figure(SCENARIO, "agent_peak_rss", format!("{rss_peak} KiB"));
    figure(SCENARIO, "simulator_peak_rss", format!("{sim_rss} KiB"));
    assert_eq!(stack.containers().unwrap().len(), APPS);
    // a generous ceiling that still catches a leak per app (debug build)
    assert!(rss_peak < 512 * 1024, "agent peak rss {rss_peak} KiB");
}
