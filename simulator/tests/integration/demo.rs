//! `odac-sim demo` end to end on this machine: the simulator, a real `odac-agent run` over TLS,
//! the locally built sample image and the sample app with an optional GPU. `odac app list`
//! shows the app running with its request and (on a host without a usable GPU) the reason it
//! runs on the CPU; Ctrl-C (SIGTERM) removes the app's container. Needs Docker and the
//! `odac-agent` binary: a missing one fails the test unless `ODAC_ALLOW_SKIP=1` (and not
//! `ODAC_REQUIRE_DOCKER=1`).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use odac_host::engine::{ContainerEngine, DockerEngine};
use odac_host::names::container_name;
use odac_simulator::demo::{DEMO_APP, DEMO_INSTANCE, agent_binary};

/// Fails unless the developer opted out (`ODAC_ALLOW_SKIP=1`, not `ODAC_REQUIRE_DOCKER=1`);
/// then prints a skip line.
fn missing(what: &str) {
    assert!(
        std::env::var("ODAC_ALLOW_SKIP").as_deref() == Ok("1")
            && std::env::var("ODAC_REQUIRE_DOCKER").as_deref() != Ok("1"),
        "{what}; set ODAC_ALLOW_SKIP=1 to skip this test"
    );
    println!("skip: {what} (ODAC_ALLOW_SKIP=1)");
}

fn engine(rt: &tokio::runtime::Runtime) -> Option<DockerEngine> {
    match rt.block_on(DockerEngine::connect(None)) {
        Ok(e) => Some(e),
        Err(e) => {
            missing(&format!("the Docker engine is unreachable: {e}"));
            None
        }
    }
}

/// Stops the demo when the test ends early (a failed assertion): SIGTERM, so the demo stops its
/// agent and removes its app as on Ctrl-C, then SIGKILL after 40 s. Without it a failed run
/// left the demo's agent holding the `odac-demo` instance lock, and the retry could not start.
struct StopOnDrop(std::process::Child);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        if !matches!(self.0.try_wait(), Ok(None)) {
            return;
        }
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let deadline = std::time::Instant::now() + Duration::from_secs(40);
        while matches!(self.0.try_wait(), Ok(None)) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(200));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn demo_runs_the_sample_app_through_a_real_agent() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let Some(engine) = engine(&rt) else { return };
    let Some(agent) = agent_binary() else {
        missing("the odac-agent binary is not built: cargo build -p odac-agent");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut child = StopOnDrop(
        Command::new(env!("CARGO_BIN_EXE_odac-sim"))
            .args(["demo", "--listen", "127.0.0.1:0", "--state"])
            .arg(dir.path())
            .env("ODAC_AGENT_BIN", &agent)
            .env_remove("CARGO")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    );
    let (tx, rx) = mpsc::channel();
    let stdout = child.0.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            println!("demo: {line}");
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut api = None;
    let mut sample = None;
    while sample.is_none() {
        let line = rx
            .recv_timeout(Duration::from_secs(120))
            .unwrap_or_else(|_| {
                let _ = child.0.kill();
                panic!("the demo printed no sample-app line within 120 s");
            });
        if let Some(u) = line.strip_prefix("api: ") {
            api = Some(u.trim_end_matches("/api/").to_owned());
        }
        if line.starts_with("sample app ") {
            sample = Some(line);
        }
    }
    let api = api.unwrap();
    let ca = dir.path().join("sim/ca.pem");
    let sample = sample.unwrap();
    assert!(sample.contains("gpu requested auto optional"), "{sample}");

    // odac app list: the app runs, with its request and the attached GPU or the reason
    // generous: the engine may be busy with the heavy tests' 200 containers meanwhile
    let deadline = std::time::Instant::now() + Duration::from_secs(180);
    let row = loop {
        let o = Command::new(env!("CARGO_BIN_EXE_odac"))
            .args(["--api", &api, "--ca-file"])
            .arg(&ca)
            .args(["app", "list"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        let row = out
            .lines()
            .find(|l| l.starts_with(DEMO_APP))
            .unwrap_or_default()
            .to_owned();
        if row.contains(" running ") || std::time::Instant::now() > deadline {
            break row;
        }
        std::thread::sleep(Duration::from_millis(300));
    };
    println!("{row}");
    assert!(row.contains(" running "), "{row}");
    assert!(row.contains("auto optional"), "{row}");
    assert!(
        row.contains("(on CPU)") || !row.trim_end().ends_with(" -"),
        "either a GPU is attached or the reason is shown: {row}"
    );

    // the container really runs and printed what it received
    let logs = rt
        .block_on(engine.logs_tail(&container_name(DEMO_INSTANCE, DEMO_APP), 50))
        .unwrap_or_default();
    println!("{logs}");

    // SIGTERM: the demo removes the sample app, then stops the agent and the simulator
    Command::new("kill")
        .args(["-TERM", &child.0.id().to_string()])
        .status()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(40);
    let status = loop {
        if let Some(s) = child.0.try_wait().unwrap() {
            break s;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.0.kill();
            panic!("the demo did not stop within 40 s of SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(status.success(), "{status}");
    let gone = rt
        .block_on(engine.inspect(&container_name(DEMO_INSTANCE, DEMO_APP)))
        .is_err();
    assert!(gone, "the sample container was left behind");
    assert!(logs.contains("== GPU device nodes =="), "{logs}");
}
