//! `[metrics] listen` with the real `odac-agent run` (no control plane, no engine: the agent
//! runs and keeps retrying both): a bad value and a taken port exit 78 naming
//! `metrics.listen`; on TCP and on a unix socket only `GET /metrics` is served (404, 405
//! otherwise), in the Prometheus text format or OpenMetrics when asked; the body passes
//! `promtool check metrics` (Debian's `prometheus` package; missing promtool fails the test
//! unless `ODAC_ALLOW_SKIP=1`); connections over the bound are closed while a scrape after
//! them still answers.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Agent {
    child: Child,
    _dir: tempfile::TempDir,
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `odac-agent run` with `listen`; control plane and engine point at nothing.
fn start(listen: &str) -> (Agent, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let config = root.join("agent.toml");
    std::fs::write(
        &config,
        format!(
            "state_dir = \"{root}/state\"\nhost_root = \"{root}/host\"\n\
             [control_plane]\nurl = \"wss://127.0.0.1:9/agent/v1\"\n\
             [docker]\nhost = \"unix://{root}/no-docker.sock\"\n\
             [apps]\ninstance = \"metricstest\"\nlock_dir = \"{root}/locks\"\n\
             [metrics]\nlisten = \"{listen}\"\n",
            root = root.display()
        ),
    )
    .unwrap();
    std::fs::create_dir_all(root.join("host")).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_odac-agent"))
        .args(["run", "--config"])
        .arg(&config)
        .env("ODAC_AGENT_TOKEN", "metrics-test-token")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    (Agent { child, _dir: dir }, root)
}

/// Waits (generously) for the agent to exit; its code and stderr.
fn exit_of(mut agent: Agent) -> (Option<i32>, String) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while agent.child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = agent.child.kill();
    let status = agent.child.wait().unwrap();
    let mut stderr = String::new();
    agent
        .child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    (status.code(), stderr)
}

fn free_port() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// One HTTP/1.1 request over `stream`; the whole answer (`None` when the endpoint closed or
/// reset the connection).
fn exchange(
    mut stream: impl Read + Write,
    method: &str,
    path: &str,
    accept: &str,
) -> Option<String> {
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nAccept: {accept}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    stream.read_to_string(&mut out).ok()?;
    Some(out)
}

fn tcp(addr: SocketAddr, method: &str, path: &str, accept: &str) -> Option<String> {
    let stream = TcpStream::connect(addr).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    exchange(stream, method, path, accept)
}

/// Polls until the endpoint answers `GET /metrics`.
fn wait_ready(get: impl Fn() -> Option<String>) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(answer) = get().filter(|a| a.starts_with("HTTP/1.1 200")) {
            return answer;
        }
        assert!(Instant::now() < deadline, "the endpoint never answered");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn body(answer: &str) -> &str {
    answer.split_once("\r\n\r\n").map_or("", |(_, b)| b)
}

/// `promtool check metrics` on `text`: its exit status and output.
fn promtool(text: &str) -> Option<(bool, String)> {
    let mut child = match Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            assert!(
                std::env::var("ODAC_ALLOW_SKIP").as_deref() == Ok("1"),
                "promtool not found ({e}): install Debian's prometheus package, or set ODAC_ALLOW_SKIP=1"
            );
            println!("skip promtool: not installed (ODAC_ALLOW_SKIP=1)");
            return None;
        }
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    Some((
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    ))
}

#[test]
fn a_listen_value_that_is_not_an_address_and_a_taken_port_exit_78_naming_the_key() {
    for bad in ["localhost:9400", "9400", "metrics.sock"] {
        let (agent, _) = start(bad);
        let (code, stderr) = exit_of(agent);
        assert_eq!(code, Some(78), "{bad}: {stderr}");
        assert!(stderr.contains("metrics.listen"), "{bad}: {stderr}");
    }
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let (agent, _) = start(&addr.to_string());
    let (code, stderr) = exit_of(agent);
    assert_eq!(code, Some(78), "{stderr}");
    assert!(
        stderr.contains("metrics.listen") && stderr.contains(&addr.to_string()),
        "{stderr}"
    );
}

#[test]
fn only_get_metrics_is_served_in_either_format_and_promtool_accepts_it() {
    let addr = free_port();
    let (_agent, _) = start(&addr.to_string());
    let answer = wait_ready(|| tcp(addr, "GET", "/metrics", "*/*"));
    assert!(
        answer.contains("content-type: text/plain; version=0.0.4"),
        "{answer}"
    );
    let text = body(&answer);
    // no control plane: the link is down; the build is named
    assert!(text.contains("\nodac_agent_link_up 0\n"), "{text}");
    assert!(
        text.contains(&format!(
            "odac_agent_build_info{{version=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION")
        )),
        "{text}"
    );
    assert!(
        text.contains("odac_agent_apps{state=\"running\"} 0"),
        "{text}"
    );
    assert!(
        text.contains("# TYPE odac_agent_reconnects_total counter"),
        "{text}"
    );
    assert!(!text.contains("# EOF"), "{text}");
    if let Some((ok, out)) = promtool(text) {
        assert!(ok, "promtool check metrics: {out}\n{text}");
    }

    let om = tcp(
        addr,
        "GET",
        "/metrics",
        "application/openmetrics-text;version=1.0.0",
    )
    .unwrap();
    assert!(
        om.contains("content-type: application/openmetrics-text"),
        "{om}"
    );
    assert!(body(&om).ends_with("# EOF\n"), "{om}");

    let not_found = tcp(addr, "GET", "/", "*/*").unwrap();
    assert!(not_found.starts_with("HTTP/1.1 404"), "{not_found}");
    let not_found = tcp(addr, "GET", "/metrics/x", "*/*").unwrap();
    assert!(not_found.starts_with("HTTP/1.1 404"), "{not_found}");
    let post = tcp(addr, "POST", "/metrics", "*/*").unwrap();
    assert!(post.starts_with("HTTP/1.1 405"), "{post}");
    assert!(post.contains("allow: GET, HEAD"), "{post}");
}

/// Whether the endpoint closed `s` (end of stream or reset) without being asked anything.
fn closed(s: &TcpStream) -> bool {
    s.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 1];
    let r = (&*s).read(&mut buf);
    s.set_nonblocking(false).unwrap();
    match r {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
    }
}

#[test]
fn idle_connections_over_the_bound_are_closed_and_do_not_stop_the_endpoint() {
    let addr = free_port();
    let (_agent, _) = start(&addr.to_string());
    wait_ready(|| tcp(addr, "GET", "/metrics", "*/*"));
    // slow scrapers that never send a request hold every slot; a slot still held by the
    // scrape just answered is released a moment later, so the eight are opened until all
    // eight stay open
    let mut idle = Vec::new();
    for attempt in 0..5 {
        std::thread::sleep(Duration::from_millis(300));
        idle = (0..8).map(|_| TcpStream::connect(addr).unwrap()).collect();
        std::thread::sleep(Duration::from_millis(300));
        if !idle.iter().any(closed) {
            break;
        }
        assert!(
            attempt < 4,
            "eight idle connections were never all held open"
        );
    }
    // ...so one more is closed at once, without an answer
    let mut extra = TcpStream::connect(addr).unwrap();
    extra
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut buf = Vec::new();
    let _ = extra.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    let n = extra.read_to_end(&mut buf).unwrap_or(0);
    assert_eq!(n, 0, "{}", String::from_utf8_lossy(&buf));
    // the slow ones go away: scrapes are answered again
    drop(idle);
    let answer = wait_ready(|| tcp(addr, "GET", "/metrics", "*/*"));
    assert!(body(&answer).contains("odac_agent_link_up"), "{answer}");
}

#[test]
fn a_unix_socket_path_is_served_and_a_stale_socket_file_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("metrics.sock");
    // a socket file left by an earlier run, nobody accepting on it
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    assert!(path.exists());
    let (_agent, _) = start(&path.display().to_string());
    let get = |p: &Path| {
        let s = std::os::unix::net::UnixStream::connect(p).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        exchange(s, "GET", "/metrics", "*/*")
    };
    let answer = wait_ready(|| get(&path));
    assert!(body(&answer).contains("odac_agent_link_up 0"), "{answer}");
}
