//! One run's crash, against the real Docker engine (PROTOCOL.md 3.1, `crash`): an app that
//! crashes again and again (the same container restarted, its log holding every run) reports
//! with each crash the output of the run that ended and of no earlier one, and a status whose
//! state is `running` never carries a crash part. The app numbers its runs in a file of the
//! container's own layer, which survives a restart, and prints the number on every line.
//! Each test has its own `apps.instance` and removes every container of it at the end.

use crate::docker_support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use docker_support::{InstanceRun, then_clean_up};
use odac_host::engine::test_image::BUSYBOX_TEST_IMAGE;
use odac_protocol::{AppSpec, AppState};

/// Runs to see crash; each prints three lines and exits 3 after a short life.
const RUNS: u32 = 4;

/// Numbers its run, prints three lines naming it (stdout and stderr), lives 1.5 s, exits 3.
const SCRIPT: &str = "n=$(cat /runs 2>/dev/null || echo 0); n=$((n+1)); echo $n > /runs; \
     echo \"run $n starting\"; echo \"run $n boom\" >&2; sleep 1.5; echo \"run $n ends\"; exit 3";

/// Which runs the lines of `tail` name (`run N …`); lines naming none count as run 0.
fn runs_named(tail: &str) -> Vec<u32> {
    let mut runs: Vec<u32> = tail
        .lines()
        .map(|l| {
            l.strip_prefix("run ")
                .and_then(|r| r.split(' ').next())
                .and_then(|n| n.parse().ok())
                .unwrap_or(0)
        })
        .collect();
    runs.dedup();
    runs
}

#[tokio::test]
async fn each_crash_tail_holds_only_its_own_run_and_running_never_carries_a_crash() {
    let Some(run) = InstanceRun::new("crash_runs", "odac-runs").await else {
        return;
    };
    then_clean_up(
        async {
            let m = run.open();
            let mut spec = AppSpec::new("runs", BUSYBOX_TEST_IMAGE);
            spec.command = vec!["sh".into(), "-c".into(), SCRIPT.into()];
            crate::appmgr_support::set_one(&m, 1, spec).await;
            // every crash seen, by the run its tail names; every running status
            let mut tails: BTreeMap<u32, String> = BTreeMap::new();
            let mut running = 0;
            let deadline = Instant::now() + Duration::from_secs(90);
            while tails.len() < RUNS as usize {
                let s = m.reconcile_once().await.remove(0);
                if s.state == AppState::Running {
                    running += 1;
                    assert_eq!(s.crash, None, "a running status carries a crash: {s:?}");
                }
                if let Some(tail) = s.crash.as_ref().and_then(|c| c.output_tail.clone()) {
                    let runs = runs_named(&tail);
                    assert_eq!(
                        runs.len(),
                        1,
                        "the tail of one crash names runs {runs:?}: {tail:?}"
                    );
                    assert!(
                        tail.contains("boom") && tail.contains("ends"),
                        "stdout and stderr of the run: {tail:?}"
                    );
                    if let Some(seen) = tails.get(&runs[0]) {
                        assert_eq!(seen, &tail, "one run, one tail");
                    }
                    tails.insert(runs[0], tail);
                }
                assert!(
                    Instant::now() < deadline,
                    "{} crashes seen in 90 s (tails {tails:?}), last status {s:?}",
                    tails.len()
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            assert_eq!(
                tails.keys().copied().collect::<Vec<_>>(),
                (1..=RUNS).collect::<Vec<_>>(),
                "every run crashed once, in order: {tails:?}"
            );
            assert!(running > 0, "the app was seen running between crashes");
            for (run, tail) in &tails {
                assert_eq!(
                    tail.lines().count(),
                    3,
                    "run {run}: its three lines, no other: {tail:?}"
                );
            }
        },
        run.clean_up(),
    )
    .await;
}
