//! The copy-paste path from a control plane to a connected agent (issue 31 finding 8), through
//! the real binaries: `odac host enroll-code --config-dir DIR` prints an `odac-agent enroll`
//! line and an `odac-agent run` line; both are run exactly as printed, over an `agent.toml` the
//! way the GPU lab writes one (host root and engine, no control plane yet), and the agent
//! connects. A second agent reusing that token (another agent id) is refused with 403, and its
//! log carries the control plane's own words (`… is not the agent this token was issued to`),
//! not only generic advice.

use std::process::Command;
use std::time::Duration;

use odac_e2e::agent::{Agent, AgentOptions, SESSION_UP};
use odac_e2e::bins::{AGENT, bin};
use odac_e2e::process::Process;
use odac_e2e::require_docker;
use odac_e2e::sim::Sim;

/// The printed line that starts with `prefix`, split as a shell would split it (no quoting is
/// needed: the paths have no spaces). The GPU lab's walk-through reads the same lines.
pub(crate) fn printed(out: &str, prefix: &str) -> Vec<String> {
    let line = out
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line starting {prefix:?} in:\n{out}"));
    line.split_whitespace().map(str::to_owned).collect()
}

#[test]
fn an_enroll_code_line_connects_an_agent_and_a_reused_token_shows_the_refusal() {
    require_docker!("enroll code");
    let dir = tempfile::tempdir().unwrap();
    let mut sim = Sim::start(dir.path(), "unused-token-enroll-code").unwrap();
    let instance = odac_e2e::stack::instance_name("enroll_code");

    // the GPU lab's way: an agent.toml with the host facts and no control plane yet
    let lab = dir.path().join("lab");
    std::fs::create_dir_all(&lab).unwrap();
    let mut options = AgentOptions::new("wss://127.0.0.1:9/agent/v1".into(), None, "-", &instance);
    options.heartbeat_secs = 5;
    let toml = options.toml(&lab.join("agent-state"), &lab.join("placeholder-token"));
    std::fs::write(lab.join("agent.toml"), toml).unwrap();

    let out = sim
        .odac_line(
            &format!("odac host enroll-code --config-dir {}", lab.display()),
            None,
        )
        .unwrap()
        .stdout;
    println!("{out}");
    let enroll = printed(&out, "odac-agent enroll ");
    let run = printed(&out, "odac-agent run ");
    let enrolled = Command::new(bin(AGENT).unwrap())
        .args(&enroll[1..])
        .output()
        .unwrap();
    assert!(
        enrolled.status.success(),
        "{}{}",
        String::from_utf8_lossy(&enrolled.stdout),
        String::from_utf8_lossy(&enrolled.stderr)
    );
    let mut cmd = Command::new(bin(AGENT).unwrap());
    cmd.args(&run[1..]);
    let mut agent =
        Process::spawn("odac-agent-enrolled", &mut cmd, &dir.path().join("logs")).unwrap();
    agent
        .wait_for_line(SESSION_UP, Duration::from_secs(60))
        .unwrap();
    assert_eq!(sim.hosts().unwrap().len(), 1);

    // the same token from another agent id: 403 with the control plane's words
    let token = std::fs::read_to_string(lab.join("token")).unwrap();
    let other = AgentOptions::new(
        sim.agents_url(),
        Some(sim.ca_path()),
        token.trim(),
        &format!("{instance}-2"),
    );
    let second = Agent::start(&dir.path().join("second"), other).unwrap();
    let line = second
        .process()
        .unwrap()
        .wait_for_line("the control plane says", Duration::from_secs(60))
        .unwrap();
    println!("second agent: {line}");
    assert!(
        line.contains("http 403") && line.contains("is not the agent this token was issued to"),
        "{line}"
    );
    assert!(line.contains("token_file"), "the advice stays: {line}");
    assert!(!line.contains(token.trim()), "the token shows: {line}");

    drop(second);
    agent.sigterm().unwrap();
    let _ = agent.wait_exit(Duration::from_secs(10));
    sim.kill().unwrap();
}
