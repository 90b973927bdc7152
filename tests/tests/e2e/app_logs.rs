//! Live logs with the real engine, agent, simulator and `odac` CLI:
//!
//! 1. an app that prints `boom` and exits 3: `odac app logs NAME --tail 5` prints `boom`;
//! 2. two viewers follow an app printing one line a second at once: both get every line,
//!    each within 2 s of the previous one;
//! 3. 100,000 lines in a burst while a viewer follows: a crash of another app during the burst
//!    still reaches the control plane, every line is either printed or counted as dropped, and the agent's
//!    peak RSS (`VmHWM`) grows by at most 5 MiB;
//! 4. a cut link ends both viewers' streams with a message, and so do an agent stopped
//!    gracefully (`shutdown`) and a killed agent (`agent_disconnected`).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use odac_e2e::poll::poll;
use odac_e2e::require_docker;
use odac_e2e::stack::Stack;
use serde_json::json;

const BURST: u64 = 100_000;

/// Lines of one stream with the time each arrived.
type Lines = Arc<Mutex<Vec<(Instant, String)>>>;

/// A running `odac app logs …`.
struct Viewer {
    child: Child,
    stdout: Lines,
    stderr: Lines,
    readers: Vec<JoinHandle<()>>,
}

fn read_into(pipe: impl std::io::Read + Send + 'static, into: Lines) -> JoinHandle<()> {
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines() {
            let Ok(line) = line else { break };
            into.lock().unwrap().push((Instant::now(), line));
        }
    })
}

impl Viewer {
    fn start(stack: &Stack, args: &[&str]) -> Viewer {
        let mut child = stack
            .sim
            .odac_command()
            .unwrap()
            .args(["app", "logs"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout: Lines = Arc::default();
        let stderr: Lines = Arc::default();
        let readers = vec![
            read_into(child.stdout.take().unwrap(), Arc::clone(&stdout)),
            read_into(child.stderr.take().unwrap(), Arc::clone(&stderr)),
        ];
        Viewer {
            child,
            stdout,
            stderr,
            readers,
        }
    }

    fn lines(&self) -> Vec<(Instant, String)> {
        self.stdout.lock().unwrap().clone()
    }

    fn errors(&self) -> String {
        let lines = self.stderr.lock().unwrap();
        lines
            .iter()
            .map(|(_, l)| l.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Lines reported dropped on stderr (`[N lines dropped]`).
    fn dropped(&self) -> u64 {
        self.stderr
            .lock()
            .unwrap()
            .iter()
            .filter_map(|(_, l)| {
                l.strip_prefix('[')?
                    .strip_suffix(" lines dropped]")?
                    .parse::<u64>()
                    .ok()
            })
            .sum()
    }

    /// Waits for the CLI to exit; returns its code.
    fn wait_exit(&mut self, timeout: Duration) -> Option<i32> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                for r in self.readers.drain(..) {
                    let _ = r.join();
                }
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        None
    }
}

impl Drop for Viewer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn app(name: &str, script: &str) -> serde_json::Value {
    json!({
        "name": name,
        "image": odac_e2e::image::SLEEPER_IMAGE,
        "command": ["sh", "-c", script],
    })
}

/// Idles until SIGTERM after `body`, like the sleeper image.
fn idle_after(body: &str) -> String {
    format!("trap 'exit 0' TERM INT; {body}; sleep 999999999 & wait")
}

/// The agent process's peak resident memory so far, KiB.
pub(crate) fn agent_hwm_kib(stack: &Stack) -> u64 {
    stack
        .agent()
        .unwrap()
        .process()
        .unwrap()
        .peak_rss_kib()
        .unwrap()
}

#[test]
fn live_logs_stream_through_the_uplink_and_end_cleanly() {
    const SCENARIO: &str = "app-logs";
    require_docker!(SCENARIO);
    let mut stack = Stack::builder(SCENARIO).tcp_proxy().start().unwrap();
    stack.wait_connected(Duration::from_secs(30)).unwrap();
    stack
        .sim
        .create_app(&app("boom", "echo boom; exit 3"))
        .unwrap();
    stack
        .sim
        .create_app(&app(
            "ticker",
            &idle_after("i=0; while true; do i=$((i+1)); echo tick $i; sleep 1; done"),
        ))
        .unwrap();
    stack
        .sim
        .create_app(&app("burst", &idle_after("sleep 1")))
        .unwrap();
    stack.sim.create_app(&Stack::app_body("victim")).unwrap();
    for name in ["ticker", "burst", "victim"] {
        stack
            .wait_app(name, Duration::from_secs(90), "running", |a| {
                a.state == "running"
            })
            .unwrap();
    }

    // 1. the output of a crashed app
    let out = poll(
        "odac app logs boom --tail 5 to print boom",
        Duration::from_secs(60),
        || {
            let out = stack
                .sim
                .odac(&["app", "logs", "boom", "--tail", "5"])
                .map_err(|e| e.to_string())?;
            if out.code == 0 && out.stdout.lines().any(|l| l == "boom") {
                Ok(out)
            } else {
                Err(format!("exit {}: {}{}", out.code, out.stdout, out.stderr))
            }
        },
    )
    .unwrap();
    println!("odac app logs boom --tail 5 printed {:?}", out.stdout);
    assert!(out.stdout.lines().count() <= 5, "{out:?}");

    // 2. two viewers follow the ticker at once
    let a = Viewer::start(&stack, &["ticker", "--follow", "--tail", "0"]);
    let b = Viewer::start(&stack, &["ticker", "--follow", "--tail", "0"]);
    poll(
        "both viewers to get 5 lines",
        Duration::from_secs(30),
        || {
            let (na, nb) = (a.lines().len(), b.lines().len());
            if na >= 5 && nb >= 5 {
                Ok(())
            } else {
                Err(format!(
                    "a: {na} lines, b: {nb} lines; {} {}",
                    a.errors(),
                    b.errors()
                ))
            }
        },
    )
    .unwrap();
    for v in [&a, &b] {
        let lines = v.lines();
        assert!(
            lines.iter().all(|(_, l)| l.starts_with("tick ")),
            "{lines:?}"
        );
        let gaps: Vec<Duration> = lines.windows(2).map(|w| w[1].0 - w[0].0).collect();
        println!("follow: gaps between lines {gaps:?}");
        assert!(
            gaps.iter().all(|g| *g < Duration::from_secs(2)),
            "a line a second arrives within 2 s: {gaps:?}"
        );
        let n = |l: &str| l.trim_start_matches("tick ").parse::<u64>().unwrap();
        assert!(
            lines.windows(2).all(|w| n(&w[1].1) == n(&w[0].1) + 1),
            "no line lost: {lines:?}"
        );
    }

    // 3. a burst of 100,000 lines while a viewer follows
    let hwm_before = agent_hwm_kib(&stack);
    let statuses_before = stack.agent().unwrap().statuses().unwrap();
    let burster = Viewer::start(&stack, &["burst", "--follow", "--tail", "0"]);
    std::thread::sleep(Duration::from_secs(2));
    let container = stack.containers_by_app().unwrap()["burst"][0].id.clone();
    let burst_started = Instant::now();
    let exec = Command::new("docker")
        .args(["exec", "-d", &container, "sh", "-c"])
        .arg(format!("seq 1 {BURST} > /proc/1/fd/1"))
        .status()
        .unwrap();
    assert!(exec.success());
    stack.crash(&["victim"]).unwrap();
    let crashed = Instant::now();
    let restart_seen = stack
        .wait_app("victim", Duration::from_secs(30), "restart reported", |v| {
            v.status.as_ref().is_some_and(|s| {
                s.restart_count > statuses_before["victim"].restart_count
                    || s.container_id != statuses_before["victim"].container_id
            })
        })
        .map(|_| crashed.elapsed());
    poll(
        "every burst line printed or counted as dropped",
        Duration::from_secs(60),
        || {
            let got = burster.lines().len() as u64;
            let dropped = burster.dropped();
            if got + dropped >= BURST {
                Ok(())
            } else {
                Err(format!(
                    "printed {got}, dropped {dropped}: {}",
                    burster.errors()
                ))
            }
        },
    )
    .unwrap();
    let burst_took = burst_started.elapsed();
    let hwm_after = agent_hwm_kib(&stack);
    let (got, dropped) = (burster.lines().len() as u64, burster.dropped());
    println!(
        "burst of {BURST} lines: printed {got}, dropped {dropped}, relayed in {burst_took:?}; \
         victim's restart reported {restart_seen:?} after the crash; agent VmHWM {hwm_before} KiB -> {hwm_after} KiB (+{} KiB)",
        hwm_after.saturating_sub(hwm_before)
    );
    assert_eq!(got + dropped, BURST, "{}", burster.errors());
    let printed: Vec<String> = burster.lines().into_iter().map(|(_, l)| l).collect();
    assert_eq!(printed.first().map(String::as_str), Some("1"));
    assert!(
        restart_seen.is_ok(),
        "a status change arrives during the burst: {restart_seen:?}"
    );
    assert!(
        hwm_after.saturating_sub(hwm_before) <= 5 * 1024,
        "peak RSS grew by {} KiB",
        hwm_after - hwm_before
    );
    drop(burster);

    // 4. a cut link ends both followers with a message
    let mut a = a;
    let mut b = b;
    stack.proxy().unwrap().cut();
    for v in [&mut a, &mut b] {
        let code = v.wait_exit(Duration::from_secs(30));
        println!("after the cut: exit {code:?}: {}", v.errors());
        assert_eq!(code, Some(1), "{}", v.errors());
        assert!(v.errors().contains("disconnected"), "{}", v.errors());
    }
    let mark = stack.agent().unwrap().process().unwrap().mark();
    stack.restore_link(mark).unwrap();
    stack.wait_connected(Duration::from_secs(30)).unwrap();

    // ... and so does an agent restart
    let mut c = Viewer::start(&stack, &["ticker", "--follow", "--tail", "1"]);
    poll(
        "the new viewer to get a line",
        Duration::from_secs(30),
        || {
            if c.lines().is_empty() {
                Err(c.errors())
            } else {
                Ok(())
            }
        },
    )
    .unwrap();
    // a graceful stop says so (`shutdown`); a killed agent is a disconnect like a cut link
    let agent = stack.agent_mut().unwrap();
    agent
        .process_mut()
        .unwrap()
        .terminate(Duration::from_secs(30))
        .unwrap();
    let code = c.wait_exit(Duration::from_secs(30));
    println!("after the agent stopped: exit {code:?}: {}", c.errors());
    assert_eq!(code, Some(1), "{}", c.errors());
    assert!(
        c.errors()
            .contains("(shutdown): the agent is shutting down"),
        "{}",
        c.errors()
    );
    agent.restart().unwrap();
    stack.wait_connected(Duration::from_secs(30)).unwrap();
    let mut d = Viewer::start(&stack, &["ticker", "--follow", "--tail", "1"]);
    poll(
        "a viewer after the restart to get a line",
        Duration::from_secs(30),
        || {
            if d.lines().is_empty() {
                Err(d.errors())
            } else {
                Ok(())
            }
        },
    )
    .unwrap();
    stack.agent_mut().unwrap().restart().unwrap();
    let code = d.wait_exit(Duration::from_secs(30));
    println!("after the agent was killed: exit {code:?}: {}", d.errors());
    assert_eq!(code, Some(1), "{}", d.errors());
    assert!(d.errors().contains("disconnected"), "{}", d.errors());
}
