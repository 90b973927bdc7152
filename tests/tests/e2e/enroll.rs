//! Enrollment end to end (through the real binaries): `odac-sim serve
//! --enroll-code C` accepts a one-time code; `odac-agent enroll --code C --cp URL --ca-file
//! <sim>/ca.pem --config-dir D --state-dir S` writes the token (mode 0600), the CA and an
//! `agent.toml` pointing at the control plane; `odac-agent run --config D/agent.toml` (with a
//! unique `apps.instance`, so it never touches other containers) connects and its host shows as
//! connected in the simulator. The same code a second time exits 1 with a clear message and
//! writes nothing. Neither the code nor the token appears in any output or log.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use odac_e2e::bins::{AGENT, SIM, bin};
use odac_e2e::docker::LabelCleanup;
use odac_e2e::figures::{figure, secs};
use odac_e2e::poll::poll;
use odac_e2e::ports::free_port;
use odac_e2e::process::Process;
use odac_e2e::require_docker;
use odac_e2e::stack::instance_name;
use odac_simulator::cli::client::Client;
use odac_simulator::state::views::HostView;

const SCENARIO: &str = "enroll";

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs `odac-agent enroll` with `code` into `config_dir` / `state_dir`.
fn enroll(code: &str, api: &str, ca: &Path, config_dir: &Path, state_dir: &Path) -> Output {
    Command::new(bin(AGENT).unwrap())
        .arg("enroll")
        .args(["--code", code, "--cp", api])
        .arg("--ca-file")
        .arg(ca)
        .arg("--config-dir")
        .arg(config_dir)
        .arg("--state-dir")
        .arg(state_dir)
        .env_remove("ODAC_ENROLL_CODE")
        .stdin(Stdio::null())
        .output()
        .expect("run odac-agent enroll")
}

#[test]
fn enrolled_agent_connects_and_a_reused_code_is_refused() {
    require_docker!(SCENARIO);
    let t0 = Instant::now();
    let dir = tempfile::Builder::new()
        .prefix("odac-e2e-enroll-")
        .tempdir()
        .unwrap();
    let instance = instance_name(SCENARIO);
    // the agent runs no app here; this removes anything it might make, by its own instance
    let _cleanup = LabelCleanup::new(format!("odac.instance={instance}"));
    let code = format!("enr_e2e_{}_{}", std::process::id(), t0.elapsed().as_nanos());
    let logs = dir.path().join("logs");

    // the simulator, accepting one enrollment code and no preset agent token
    let port = free_port().unwrap();
    let sim_state = dir.path().join("sim");
    let mut cmd = Command::new(bin(SIM).unwrap());
    cmd.arg("serve")
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .arg("--state")
        .arg(&sim_state)
        .args(["--enroll-code", &code])
        .env_remove("ODAC_SIM_TOKENS")
        .env_remove("ODAC_SIM_API_TOKEN")
        .env("ODAC_SIM_LOG", "info");
    let sim = Process::spawn("odac-sim", &mut cmd, &logs).unwrap();
    sim.wait_for_line("agents: wss://", Duration::from_secs(30))
        .unwrap();
    let api = format!("https://127.0.0.1:{port}");
    let ca = sim_state.join("ca.pem");

    // 1. enroll: token 0600, CA copied, agent.toml pointing at the simulator
    let config_dir = dir.path().join("etc");
    let state_dir = dir.path().join("state");
    let t = Instant::now();
    let out = enroll(&code, &api, &ca, &config_dir, &state_dir);
    figure(SCENARIO, "enroll", secs(t.elapsed()));
    let printed = text(&out);
    println!("{printed}");
    assert_eq!(out.status.code(), Some(0), "{printed}");
    assert!(printed.contains("enrolled with"), "{printed}");
    let token_file = config_dir.join("token");
    let token = std::fs::read_to_string(&token_file).unwrap();
    let token = token.trim().to_owned();
    assert!(token.len() >= 16, "a real token was written");
    assert_eq!(mode(&token_file), 0o600, "token file mode");
    assert_eq!(mode(&config_dir.join("agent.toml")), 0o644, "config mode");
    assert_eq!(mode(&state_dir), 0o700, "state dir mode");
    assert_eq!(
        std::fs::read(config_dir.join("ca.pem")).unwrap(),
        std::fs::read(&ca).unwrap(),
        "the CA is copied"
    );
    let config = std::fs::read_to_string(config_dir.join("agent.toml")).unwrap();
    assert!(
        config.contains(&format!("wss://127.0.0.1:{port}/agent/v1")),
        "{config}"
    );
    assert!(!config.contains(&token), "the token is not in agent.toml");
    for secret in [&code, &token] {
        assert!(!printed.contains(secret.as_str()), "a secret in: {printed}");
    }

    // 2. run the agent with the written config: its host connects
    let t = Instant::now();
    let mut cmd = odac_e2e::agent::run_command(&config_dir.join("agent.toml")).unwrap();
    cmd.env("ODAC_AGENT__APPS__INSTANCE", &instance)
        .env("ODAC_AGENT__LOG_LEVEL", "info,odac_agent=debug");
    let mut agent = Process::spawn("odac-agent", &mut cmd, &logs).unwrap();
    let client = Client::new(&api, Some(&ca), None).unwrap();
    let host = poll(
        "the enrolled agent's host to connect",
        Duration::from_secs(30),
        || {
            let hosts: Vec<HostView> = client.get_as("/api/hosts").map_err(|e| e.to_string())?;
            odac_e2e::sim::only_host(&hosts, true)
        },
    )
    .unwrap();
    figure(SCENARIO, "run_to_connected", secs(t.elapsed()));
    println!("connected host {} ({})", host.hostname, host.id);
    assert!(agent.is_running(), "{:?}", agent.tail(20));

    // 3. the same code again: exit 1, a clear message, nothing written
    let config_dir2 = dir.path().join("etc2");
    let out = enroll(&code, &api, &ca, &config_dir2, &dir.path().join("state2"));
    let refused = text(&out);
    println!("{refused}");
    assert_eq!(out.status.code(), Some(1), "{refused}");
    assert!(
        refused.contains("refused the enrollment code") && refused.contains("a code works once"),
        "{refused}"
    );
    assert!(!refused.contains(&code), "the code in: {refused}");
    assert!(!config_dir2.join("token").exists(), "no token written");
    assert!(
        !config_dir2.join("agent.toml").exists(),
        "no config written"
    );
    // the first enrollment is untouched and the agent stays connected
    assert_eq!(std::fs::read_to_string(&token_file).unwrap().trim(), token);
    let hosts: Vec<HostView> = client.get_as("/api/hosts").unwrap();
    assert!(hosts.len() == 1 && hosts[0].connected, "{hosts:?}");

    // 4. no secret in any log: the agent's, the simulator's
    let (status, took) = agent.terminate(Duration::from_secs(10)).unwrap();
    figure(SCENARIO, "agent_stop", secs(took));
    assert!(
        status.success(),
        "agent exit {status:?}: {:?}",
        agent.tail(20)
    );
    for p in [&agent, &sim] {
        let lines = p.lines();
        assert!(!lines.is_empty(), "{} logged nothing", p.name());
        for l in &lines {
            assert!(!l.contains(&token), "the token in {}: {l}", p.name());
            assert!(!l.contains(&code), "the code in {}: {l}", p.name());
        }
    }
    figure(SCENARIO, "total", secs(t0.elapsed()));
}
