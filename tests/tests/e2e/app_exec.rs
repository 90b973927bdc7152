//! Exec sessions with the real engine, agent, simulator and `odac` CLI:
//!
//! 1. `odac app exec web -- sh -c 'echo out; echo err >&2; exit 7'` prints `out` on stdout,
//!    `err` on stderr and exits 7; `-i` passes standard input and its end; a command that does not exist exits 126/127 with the
//!    engine's words;
//! 2. `odac app shell web` under a pseudo-terminal (Python's `pty`): `stty size` inside shows
//!    the terminal's size, then the size set by a resize; Ctrl-C interrupts a `sleep` (status
//!    130) and the shell goes on; `exit 3` returns the CLI with 3 and the terminal restored;
//! 3. with three sessions open a fourth is refused (`busy`, exit 125 and the reason);
//! 4. a session with no byte either way is closed at the (shortened, 4 s) idle timeout;
//! 5. exec into a container of the instance owned by another agent is refused (`forbidden`);
//! 6. every session's start and end is in the control plane's event log and in `odac events`
//!    (principal, app, command, duration, exit code) and no byte of any session is.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use odac_e2e::agent::AgentOptions;
use odac_e2e::bins::{CLI, bin};
use odac_e2e::poll::poll;
use odac_e2e::require_docker;
use odac_e2e::stack::Stack;

const SCENARIO: &str = "app-exec";

/// Drives `odac app shell` on a pty: argv is the CLI's command line. Prints one line per
/// check (`size1 …`, `size2 …`, `ctrl-c …`, `exit …`, `restored …`).
const PTY_SCRIPT: &str = r##"
import fcntl, os, pty, select, struct, sys, termios, time
argv = sys.argv[1:]
def setsize(fd, rows, cols):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
pid, fd = pty.fork()
if pid == 0:
    setsize(0, 24, 80)
    os.execv(argv[0], argv)
buf = b""
def until(pat, secs):
    global buf
    end = time.time() + secs
    while time.time() < end:
        r, _, _ = select.select([fd], [], [], 0.2)
        if r:
            try:
                data = os.read(fd, 65536)
            except OSError:
                return False
            if not data:
                return False
            buf += data
            if pat in buf:
                buf = buf[buf.index(pat) + len(pat):]
                return True
    return False
print("prompt", until(b"# ", 60), flush=True)
os.write(fd, b"stty size\r")
print("size1", until(b"24 80", 15), flush=True)
setsize(fd, 40, 120)
time.sleep(1)
os.write(fd, b"stty size\r")
print("size2", until(b"40 120", 15), flush=True)
os.write(fd, b"sleep 30\r")
time.sleep(1)
started = time.time()
os.write(fd, b"\x03")
os.write(fd, b"echo rc=$?\r")
print("ctrl-c", until(b"rc=130", 15), round(time.time() - started, 1), flush=True)
os.write(fd, b"exit 3\r")
until(b"\x00never", 5)
_, status = os.waitpid(pid, 0)
print("exit", os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1, flush=True)
lflag = termios.tcgetattr(fd)[3]
print("restored", bool(lflag & termios.ICANON) and bool(lflag & termios.ECHO), flush=True)
"##;

fn short_idle(o: &mut AgentOptions) {
    o.env.push((
        "ODAC_AGENT__EXEC__IDLE_TIMEOUT_SECS".to_owned(),
        "4".to_owned(),
    ));
}

fn odac_cmd(stack: &Stack) -> Command {
    stack.sim.odac_command().unwrap()
}

/// A session that prints `tick` every second until killed; returns once it printed one.
fn ticking_session(stack: &Stack) -> Child {
    let mut child = odac_cmd(stack)
        .args(["app", "exec", "web", "--", "sh", "-c"])
        .arg("while true; do echo tick; sleep 1; done")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert_eq!(first, "tick\n", "the session's first output");
    child
}

#[test]
fn exec_and_shell_through_the_control_plane_with_limits_and_audit() {
    require_docker!(SCENARIO);
    let stack = Stack::builder(SCENARIO)
        .agent_options(short_idle)
        .start()
        .unwrap();
    stack.wait_connected(Duration::from_secs(30)).unwrap();
    stack.sim.create_app(&Stack::app_body("web")).unwrap();
    stack
        .wait_app("web", Duration::from_secs(90), "running", |a| {
            a.state == "running"
        })
        .unwrap();

    // 1. a command: both streams on their own fds, its exit code the CLI's
    let script = "echo out; echo err >&2; exit 7";
    let out = stack
        .sim
        .odac(&["app", "exec", "web", "--", "sh", "-c", script])
        .unwrap();
    println!(
        "odac app exec: exit {}, stdout {:?}, stderr {:?}",
        out.code, out.stdout, out.stderr
    );
    assert_eq!(
        (out.code, out.stdout.as_str(), out.stderr.as_str()),
        (7, "out\n", "err\n")
    );

    // -i: the CLI's standard input is the command's, its end closes it
    let piped = stack
        .sim
        .odac_line("odac app exec -i web -- wc -l", Some("a\nb\nc\n"))
        .unwrap();
    println!(
        "odac app exec -i web -- wc -l: exit {}, {:?}",
        piped.code, piped.stdout
    );
    assert_eq!((piped.code, piped.stdout.trim()), (0, "3"), "{piped:?}");

    // a command that does not exist: the engine's status (126/127) and its words, like docker exec
    let missing = stack
        .sim
        .odac(&["app", "exec", "web", "--", "no-such-command"])
        .unwrap();
    println!(
        "odac app exec web -- no-such-command: exit {}, {:?}{:?}",
        missing.code, missing.stdout, missing.stderr
    );
    assert!(matches!(missing.code, 126 | 127), "{missing:?}");
    assert!(
        format!("{}{}", missing.stdout, missing.stderr).contains("no-such-command"),
        "{missing:?}"
    );

    // 2. a shell on a pseudo-terminal
    let cli = bin(CLI).unwrap();
    let api = stack.sim.api_url();
    let ca = stack.sim.ca_path();
    let shell = Command::new("python3")
        .arg("-c")
        .arg(PTY_SCRIPT)
        .arg(&cli)
        .args(["--api", &api, "--ca-file"])
        .arg(&ca)
        .args(["app", "shell", "web"])
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&shell.stdout).into_owned();
    println!("pty: {report}{}", String::from_utf8_lossy(&shell.stderr));
    for want in [
        "prompt True",
        "size1 True",
        "size2 True",
        "exit 3",
        "restored True",
    ] {
        assert!(report.lines().any(|l| l == want), "{want:?} in {report}");
    }
    assert!(
        report.lines().any(|l| l.starts_with("ctrl-c True")),
        "Ctrl-C interrupts the sleep: {report}"
    );

    // 3. three sessions open, a fourth refused
    let mut open: Vec<Child> = (0..3).map(|_| ticking_session(&stack)).collect();
    let fourth = stack
        .sim
        .odac(&["app", "exec", "web", "--", "true"])
        .unwrap();
    println!(
        "fourth session: exit {}, {}",
        fourth.code,
        fourth.stderr.trim()
    );
    assert_eq!(fourth.code, 125, "{fourth:?}");
    assert!(
        fourth
            .stderr
            .contains("exec session ended (busy): 3 exec sessions are already open"),
        "{}",
        fourth.stderr
    );
    for c in &mut open {
        c.kill().unwrap();
        c.wait().unwrap();
    }

    // 4. an idle session is closed at the idle timeout (the killed ones free their places)
    let (idle, took) = poll("an idle session to end", Duration::from_secs(60), || {
        let started = Instant::now();
        let out = stack
            .sim
            .odac(&["app", "exec", "web", "--", "sleep", "60"])
            .map_err(|e| e.to_string())?;
        if out.stderr.contains("(busy)") {
            return Err(out.stderr);
        }
        Ok((out, started.elapsed()))
    })
    .unwrap();
    println!(
        "idle session: exit {} after {took:?}: {}",
        idle.code,
        idle.stderr.trim()
    );
    assert_eq!(idle.code, 125);
    assert!(
        idle.stderr
            .contains("(idle_timeout): no input or output for 4s"),
        "{}",
        idle.stderr
    );
    assert!(
        took < Duration::from_secs(50),
        "closed long before the command's 60 s"
    );

    // 5. a container of this instance owned by another agent
    let foreign = format!("{}_other", stack.instance);
    let run = Command::new("docker")
        .args(["run", "-d", "--name", &foreign])
        .args(["--label", &format!("odac.instance={}", stack.instance)])
        .args([
            "--label",
            "odac.app=other",
            "--label",
            "odac.owner=another-agent",
        ])
        .args([odac_e2e::image::SLEEPER_IMAGE, "sleep", "600"])
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    stack.sim.create_app(&Stack::app_body("other")).unwrap();
    let refused = stack
        .sim
        .odac(&["app", "exec", "other", "--", "true"])
        .unwrap();
    let _ = Command::new("docker").args(["rm", "-f", &foreign]).output();
    println!(
        "foreign container: exit {}, {}",
        refused.code,
        refused.stderr.trim()
    );
    assert_eq!(refused.code, 125);
    assert!(
        refused.stderr.contains("(forbidden)") && refused.stderr.contains("not this agent's own"),
        "{}",
        refused.stderr
    );

    // 6. the audit trail
    let log = poll("the exec events", Duration::from_secs(30), || {
        let log = stack.sim.event_log().map_err(|e| e.to_string())?;
        let text = log.to_string();
        if text.contains("exec ended") && text.contains("forbidden") {
            Ok(log)
        } else {
            Err(text)
        }
    })
    .unwrap();
    let messages: Vec<String> = log
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["message"].as_str())
        .filter(|m| m.starts_with("exec "))
        .map(str::to_owned)
        .collect();
    for m in &messages {
        println!("event: {m}");
    }
    assert!(
        messages
            .iter()
            .any(|m| m.starts_with("exec started: session ")
                && m.contains("by open-api in app web: sh -c \"echo out; echo err >&2; exit 7\""))
    );
    assert!(messages.iter().any(|m| m.starts_with("exec ended: ")
        && m.contains("sh -c \"echo out; echo err >&2; exit 7\"; exited after ")
        && m.ends_with("exit code 7: the command exited with code 7")));
    assert!(messages.iter().any(|m| m.contains("idle_timeout after")));
    let listed = stack.sim.odac(&["events", "--app", "web"]).unwrap();
    assert_eq!(listed.code, 0, "{listed:?}");
    assert!(
        listed.stdout.lines().any(|l| l.contains("  info   ")
            && l.contains("  web  exec ended: session ")
            && l.contains("exited after ")
            && l.contains("exit code 7")),
        "odac events --app web lists the session: {}",
        listed.stdout
    );
    assert!(!listed.stdout.contains("app other"), "--app keeps to web");
    assert!(
        !messages
            .iter()
            .any(|m| m.contains("rc=130") || m.contains("40 120")),
        "no byte of a session is logged"
    );
}
