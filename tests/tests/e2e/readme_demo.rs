//! The README's "Run" section typed as a user would, read out of README.md at test time
//! (`odac_e2e::readme`, the block marked `<!-- walkthrough: demo -->`), with the real
//! binaries and engine. The block's `cargo run -p odac-simulator --bin odac-sim --` is the
//! `odac-sim` binary cargo builds (run directly, its `odac-agent` given as `ODAC_AGENT_BIN`
//! so the demo does not build it again), with the test's own `--listen` port and `--state`
//! dir. Then the prose's promises: it prints the dashboard URL and the `export ODAC_API=…
//! ODAC_CA_FILE=…` line, which has the shape of the walk-through's export line (the README's
//! default port 7443 being the test's port); typed as printed, it makes the walk-through's
//! `odac app list` work, where (on a host without a GPU) the sample app runs on the CPU with
//! reason `no_device`; Ctrl-C removes the sample app, stops the demo's agent and control plane,
//! and names an app added meanwhile, whose container keeps running. Uses the demo's fixed
//! instance `odac-demo` (the `demo` test group runs one at a time).

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::Duration;

use odac_e2e::bins::{AGENT, CLI, SIM, bin};
use odac_e2e::docker::containers;
use odac_e2e::poll::poll;
use odac_e2e::ports::free_port;
use odac_e2e::process::Process;
use odac_e2e::readme;
use odac_e2e::require_docker;
use odac_simulator::demo::{DEMO_APP, DEMO_INSTANCE};

/// What the README runs the simulator with.
const CARGO_RUN: &str = "cargo run -p odac-simulator --bin odac-sim --";
/// The demo's default port, as the walk-through's export line shows it.
const DEFAULT_PORT: &str = "7443";
const EXTRA: &str = "readme-extra";

/// Removes what the test made (the demo app and the extra app named) if it fails before the
/// demo did.
pub(crate) struct Leftovers(pub(crate) &'static str);

impl Drop for Leftovers {
    fn drop(&mut self) {
        for app in [DEMO_APP, self.0] {
            let name = odac_host::names::container_name(DEMO_INSTANCE, app);
            let _ = Command::new("docker").args(["rm", "-f", &name]).output();
        }
    }
}

/// Sends the demo SIGINT (Ctrl-C).
pub(crate) fn interrupt(demo: &Process) {
    assert!(
        Command::new("kill")
            .args(["-INT", &demo.pid().to_string()])
            .status()
            .unwrap()
            .success()
    );
}

/// The demo's containers by app.
pub(crate) fn demo_apps() -> Vec<String> {
    containers(&format!("odac.instance={DEMO_INSTANCE}"))
        .unwrap()
        .into_iter()
        .map(|c| c.app)
        .collect()
}

/// `export K=V K=V` → the variables.
fn exports(line: &str) -> BTreeMap<String, String> {
    line.trim()
        .strip_prefix("export ")
        .unwrap_or_else(|| panic!("not an export line: {line}"))
        .split_whitespace()
        .map(|kv| {
            let (k, v) = kv
                .split_once('=')
                .unwrap_or_else(|| panic!("{kv} in {line}"));
            (k.to_owned(), v.to_owned())
        })
        .collect()
}

/// Runs an `odac …` line of the README with the printed exports as its environment.
fn odac(line: &str, env: &BTreeMap<String, String>) -> String {
    let mut words = line.split_whitespace();
    assert_eq!(words.next(), Some("odac"), "{line}");
    let out = Command::new(bin(CLI).unwrap())
        .args(words)
        .env_remove("ODAC_TOKEN")
        .envs(env)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{line}: {}{text}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    println!("$ {line}\n{text}");
    text
}

#[test]
fn the_readme_demo_prints_what_it_says_and_ctrl_c_does_what_it_says() {
    require_docker!("readme demo");
    let text = readme::text().unwrap();
    let run = readme::block(&text, "demo").unwrap();
    let [run] = run.as_slice() else {
        panic!("the README's Run block is one command: {run:?}");
    };
    let args = run
        .command
        .strip_prefix(CARGO_RUN)
        .unwrap_or_else(|| panic!("the README runs {CARGO_RUN} …: {run:?}"));
    let prose = readme::prose_after(&text, "demo").unwrap();
    let commands = readme::block(&text, "commands").unwrap();
    let readme_export = commands
        .iter()
        .find(|l| l.command.starts_with("export "))
        .map(|l| exports(&l.command))
        .expect("the walk-through's export line");
    let list_line = commands
        .iter()
        .find(|l| l.command == "odac app list")
        .expect("the walk-through's odac app list");

    assert!(
        demo_apps().is_empty(),
        "another odac-sim demo runs on this engine"
    );
    let _left = Leftovers(EXTRA);
    let dir = tempfile::tempdir().unwrap();
    let port = free_port().unwrap();
    let mut cmd = Command::new(bin(SIM).unwrap());
    cmd.args(args.split_whitespace())
        .args(["--listen", &format!("127.0.0.1:{port}"), "--state"])
        .arg(dir.path().join("state"))
        .env("ODAC_AGENT_BIN", bin(AGENT).unwrap())
        .process_group(0);
    let mut demo = Process::spawn("demo", &mut cmd, &dir.path().join("logs")).unwrap();
    demo.wait_for_line("Ctrl-C stops the demo", Duration::from_secs(180))
        .unwrap();
    let said = demo.lines().join("\n");
    println!("{said}");

    // "It prints the dashboard URL and the `export ODAC_API=… ODAC_CA_FILE=…` line"
    assert!(prose.starts_with("It prints the dashboard URL"), "{prose}");
    let dashboard = format!("https://127.0.0.1:{port}/");
    assert!(
        said.lines()
            .any(|l| l.contains("dashboard:") && l.contains(&dashboard)),
        "{said}"
    );
    let fragments = readme::promise(&prose, "export ").unwrap();
    let printed = said
        .lines()
        .find(|l| fragments.iter().all(|f| l.contains(f.as_str())))
        .unwrap_or_else(|| panic!("no line with {fragments:?}: {said}"));
    let env = exports(printed);
    let keys = |m: &BTreeMap<String, String>| m.keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(&env), keys(&readme_export), "{printed}");
    assert_eq!(
        readme_export["ODAC_API"].replace(DEFAULT_PORT, &port.to_string()),
        env["ODAC_API"],
        "the walk-through's export line is the demo's, port aside"
    );

    // "On a host without a GPU the sample app runs on the CPU and `odac app list` says why"
    let hosts = odac("odac host list --json", &env);
    let gpus: serde_json::Value = serde_json::from_str(&hosts).unwrap();
    let no_gpu = gpus.as_array().is_some_and(|h| {
        h.iter().all(|h| {
            h["inventory"]["gpus"]
                .as_array()
                .is_none_or(|g| g.is_empty())
        })
    });
    let table = odac(&list_line.command, &env);
    let row = table
        .lines()
        .find(|l| l.starts_with(&format!("{DEMO_APP} ")))
        .unwrap_or_else(|| panic!("no {DEMO_APP} row: {table}"));
    assert!(row.contains("running"), "{table}");
    if no_gpu {
        assert!(
            prose.contains("`odac app list` says why (`no_device`)"),
            "{prose}"
        );
        assert!(row.contains("no_device"), "{table}");
    } else {
        println!("this host has a GPU: the no_device promise does not apply");
    }

    // an app added during the walk-through, then Ctrl-C
    let spec = serde_json::json!({
        "name": EXTRA,
        "image": odac_simulator::catalog::DEMO_IMAGE,
        "command": ["sleep", "2147483647"],
    });
    let spec_file = dir.path().join("extra.json");
    std::fs::write(&spec_file, spec.to_string()).unwrap();
    odac(&format!("odac app create -f {}", spec_file.display()), &env);
    poll("the added app running", Duration::from_secs(90), || {
        let apps = demo_apps();
        if apps.iter().any(|a| a == EXTRA) {
            Ok(())
        } else {
            Err(format!("{apps:?}"))
        }
    })
    .unwrap();
    interrupt(&demo);
    let status = demo.wait_exit(Duration::from_secs(90)).unwrap();
    let said = demo.lines().join("\n");
    println!("{said}");
    assert!(status.success(), "{status}: {said}");
    assert!(
        prose.contains("Ctrl-C removes the sample app, stops the demo's agent and control plane, and names every app you added that it leaves"),
        "{prose}"
    );
    assert!(said.contains(&format!("removed {DEMO_APP}")), "{said}");
    assert!(said.contains(EXTRA), "the added app named: {said}");
    assert_eq!(demo_apps(), vec![EXTRA.to_owned()], "{said}");
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "the control plane stopped"
    );
    let agents = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| {
            std::fs::read(e.path().join("cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&*dir.path().to_string_lossy()))
        })
        .count();
    assert_eq!(agents, 0, "the demo's agent stopped");
}
