//! `odac app logs --follow` across restarts (issue 31), with the real engine, agent, simulator
//! and CLI: an app that prints `run-start`, then `run-end` and exits 3 is restarted by the
//! agent; one `odac app logs NAME --follow` prints both lines of at least two runs, in order
//! and each once (the stream re-opened for the new run does not repeat what was printed), and
//! says on stderr that it waits for and then follows the new run. An app that stays down
//! (`restart: never`) ends the follow at once with why.

use std::process::{Command, Stdio};
use std::time::Duration;

use odac_e2e::bins::{CLI, bin};
use odac_e2e::poll::poll;
use odac_e2e::require_docker;
use odac_e2e::stack::Stack;
use serde_json::json;

fn app(name: &str, script: &str, restart: &str) -> serde_json::Value {
    json!({
        "name": name,
        "image": odac_e2e::image::SLEEPER_IMAGE,
        "command": ["sh", "-c", script],
        "restart": restart,
    })
}

#[test]
fn follow_goes_on_into_the_next_run_and_stops_for_an_app_that_stays_down() {
    const SCENARIO: &str = "logs-follow";
    require_docker!(SCENARIO);
    let stack = Stack::builder(SCENARIO).start().unwrap();
    stack.wait_connected(Duration::from_secs(30)).unwrap();
    let script = "echo run-start; sleep 4; echo run-end; exit 3";
    stack
        .sim
        .create_app(&app("phoenix", script, "always"))
        .unwrap();
    stack
        .wait_app("phoenix", Duration::from_secs(90), "running", |a| {
            a.state == "running"
        })
        .unwrap();

    let dir = tempfile::tempdir().unwrap();
    let (out_path, err_path) = (dir.path().join("out"), dir.path().join("err"));
    let mut viewer = Command::new(bin(CLI).unwrap())
        .args(["--api", &stack.sim.api_url(), "--ca-file"])
        .arg(stack.sim.ca_path())
        .args(["app", "logs", "phoenix", "--follow", "--timeout", "120s"])
        .stdout(Stdio::from(std::fs::File::create(&out_path).unwrap()))
        .stderr(Stdio::from(std::fs::File::create(&err_path).unwrap()))
        .spawn()
        .unwrap();
    let read = |p: &std::path::Path| std::fs::read_to_string(p).unwrap_or_default();
    let followed = poll(
        "the follow to print the end of a second run",
        Duration::from_secs(110),
        || {
            let out = read(&out_path);
            if out.matches("run-end").count() >= 2 {
                Ok(out)
            } else {
                Err(format!("stdout {out:?}, stderr {:?}", read(&err_path)))
            }
        },
    );
    let _ = viewer.kill();
    let _ = viewer.wait();
    let out = followed.unwrap();
    let err = read(&err_path);
    println!("stdout:\n{out}stderr:\n{err}");
    assert!(err.contains("started again"), "{err}");
    assert!(err.contains("waiting to follow its next run"), "{err}");
    let lines: Vec<&str> = out.lines().collect();
    let want: Vec<&str> = ["run-start", "run-end"]
        .iter()
        .cycle()
        .take(lines.len())
        .copied()
        .collect();
    let start = usize::from(lines.first() == Some(&"run-end"));
    assert_eq!(
        &lines[start..],
        &want[..lines.len() - start],
        "each line of each run once, in order"
    );

    stack
        .sim
        .create_app(&app("once", "echo only-run; exit 3", "never"))
        .unwrap();
    stack
        .wait_app("once", Duration::from_secs(90), "down", |a| {
            a.state != "running" && a.state != "pending" && a.state != "creating"
        })
        .unwrap();
    let out = stack
        .sim
        .odac(&["app", "logs", "once", "--follow"])
        .unwrap();
    println!("{out:?}");
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("only-run"), "{out:?}");
    assert!(
        out.stderr
            .contains("the agent does not start it again by itself"),
        "{out:?}"
    );
}
