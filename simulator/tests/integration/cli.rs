//! The `odac` binary against an in-process simulator: every subcommand, table and JSON
//! output, the ODAC GPU walk-through with a simulated agent, and bad input: usage errors exit
//! 2 naming the flag, API refusals exit 1 with the API's message, an unreachable API exits 1
//! with one line.

use crate::common;

use std::process::Command;

use common::{Sim, stderr, stdout};
use odac_simulator::fake_agent::inventories::profile;
use serde_json::{Value, json};

fn code(o: &std::process::Output) -> i32 {
    o.status.code().unwrap()
}

#[test]
fn odac_walkthrough_gpu_optional_restart_required_then_cpu_fallback() {
    let sim = Sim::start();
    let _agent = sim.sim_agent("cpu-box", 3);

    let o = sim.odac(&["app", "create", "-n", "web", "--image", "busybox"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&o), "created app web on cpu-box (pending)\n");
    sim.wait_api("/api/apps/web", |a| a["state"] == "running");

    let o = sim.odac(&["app", "gpu", "web", "--nvidia", "--optional"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stdout(&o).contains("restart required to apply"),
        "{}",
        stdout(&o)
    );
    sim.wait_api("/api/apps/web", |a| a["restart_required"] == true);
    let o = sim.odac(&["app", "list"]);
    assert!(
        stdout(&o).contains("running (restart required)"),
        "{}",
        stdout(&o)
    );

    let o = sim.odac(&["app", "restart", "web"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stdout(&o).starts_with("restart requested for app web"));
    let app = sim.wait_api("/api/apps/web", |a| {
        a["restart_required"] == false && a["reason"] == "no_device"
    });
    assert_eq!(app["state"], "running");

    let o = sim.odac(&["app", "list", "--json"]);
    assert_eq!(code(&o), 0);
    let list: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let web = &list[0];
    assert_eq!(
        web["requested"],
        json!({"runtime":"nvidia","optional":true})
    );
    assert_eq!(web["attached"], Value::Null);
    assert_eq!(web["fallback"]["reason"], "no_device");
    assert_eq!(web["fallback"]["tier"], "preflight");
    assert_eq!(web["status"]["restart_count"], 1);

    let o = sim.odac(&["app", "list"]);
    let table = stdout(&o);
    let mut lines = table.lines();
    let header = lines.next().unwrap();
    for col in [
        "NAME",
        "HOST",
        "STATE",
        "IMAGE",
        "GPU REQUEST",
        "ATTACHED",
        "REASON",
    ] {
        assert!(header.contains(col), "{header}");
    }
    let row = lines.next().unwrap();
    for cell in [
        "web",
        "cpu-box",
        "running",
        "busybox",
        "nvidia optional",
        "no_device (on CPU)",
    ] {
        assert!(row.contains(cell), "{row}");
    }
}

#[test]
fn create_with_gpu_flags_keeps_the_request_as_sent() {
    let sim = Sim::start();
    let _agent = sim.sim_agent("nv-box", 0);
    let o = sim.odac(&[
        "app",
        "create",
        "-n",
        "train",
        "--image",
        "busybox",
        "--gpu-nvidia",
        "--count",
        "1",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let app = sim.wait_api("/api/apps/train", |a| a["attached"].is_object());
    assert_eq!(app["requested"], json!({"runtime":"nvidia","count":1}));
    assert_eq!(app["attached"]["vendor"], "nvidia");
    let o = sim.odac(&[
        "app",
        "create",
        "-n",
        "any",
        "--image",
        "busybox",
        "--gpu-auto",
        "--count",
        "all",
        "--optional",
        "--host",
        "nv-box",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let app = sim.wait_api("/api/apps/any", |a| a["attached"].is_object());
    assert_eq!(
        app["requested"],
        json!({"runtime":"auto","count":"all","optional":true})
    );
    let o = sim.odac(&[
        "app",
        "create",
        "-n",
        "src",
        "-u",
        "https://example.com/r.git",
        "--branch",
        "main",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let (_, app) = sim.call("GET", "/api/apps/src", None);
    assert_eq!(
        app["spec"]["source"],
        json!({"url":"https://example.com/r.git","branch":"main"})
    );
    let o = sim.odac(&["app", "create", "-n", "llm", "--app", "ollama"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let (_, app) = sim.call("GET", "/api/apps/llm", None);
    assert_eq!(app["spec"]["image"], "ollama/ollama:0.6.2");
}

#[test]
fn usage_errors_exit_2_naming_the_flag() {
    let sim = Sim::start();
    for (args, needle) in [
        (
            vec![
                "app",
                "create",
                "-n",
                "a",
                "--image",
                "x",
                "--gpu-nvidia",
                "--count",
                "0",
            ],
            "--count",
        ),
        (vec!["app", "gpu", "web", "--count", "0"], "--count"),
        (vec!["app", "gpu", "web", "--count", "many"], "--count"),
        (vec!["app", "gpu", "web", "--off", "--nvidia"], "--off"),
        (vec!["app", "gpu", "web", "--nvidia", "--amd"], "--amd"),
        (vec!["app", "create", "-n", "a"], "--image"),
        (
            vec!["app", "create", "-n", "a", "--image", "x", "--branch", "b"],
            "--url",
        ),
        (vec!["app", "create", "--image", "x"], "--name"),
        (vec!["app", "frobnicate"], "frobnicate"),
        (vec!["app", "restart"], "<NAME>"),
        (vec![], "Usage"),
    ] {
        let o = sim.odac(&args);
        assert_eq!(code(&o), 2, "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn api_refusals_exit_1_with_the_apis_message() {
    let sim = Sim::start();
    let _agent = sim.sim_agent("a", 3);
    for (args, msg) in [
        (
            vec!["app", "gpu", "nope", "--off"],
            "error: unknown app \"nope\"; no apps known yet\n",
        ),
        (
            vec!["app", "restart", "nope"],
            "error: unknown app \"nope\"; no apps known yet\n",
        ),
        (
            vec!["app", "remove", "nope"],
            "error: unknown app \"nope\"; no apps known yet\n",
        ),
        (
            vec!["app", "create", "-n", "Bad_Name", "--image", "x"],
            "error: -n/--name: \"Bad_Name\" is not a lowercase DNS label (only a-z, 0-9 and '-' are allowed)\n",
        ),
        (
            vec!["app", "create", "-n", "a", "--image", "x", "--gpu-auto"],
            "error: automatic vendor detection found no GPU: host a has none; name a vendor \
             (--nvidia, --amd or --intel) to require one anyway, or use --optional to take any \
             vendor when one appears and run on the CPU until then\n",
        ),
        (
            vec![
                "app", "create", "-n", "a", "--image", "x", "--host", "ghost",
            ],
            "error: unknown host \"ghost\"; known hosts: a\n",
        ),
    ] {
        let o = sim.odac(&args);
        assert_eq!(code(&o), 1, "{args:?}");
        assert_eq!(stderr(&o), msg, "{args:?}");
    }
    // the name exists only once
    assert_eq!(
        code(&sim.odac(&["app", "create", "-n", "w", "--image", "x"])),
        0
    );
    let o = sim.odac(&["app", "create", "-n", "w", "--image", "x"]);
    assert_eq!(
        (code(&o), stderr(&o)),
        (1, "error: app \"w\" already exists\n".into())
    );
}

#[test]
fn gpu_off_restart_and_remove() {
    let sim = Sim::start();
    let _agent = sim.sim_agent("amd-box", 1);
    assert_eq!(
        code(&sim.odac(&["app", "create", "-n", "w", "--image", "x", "--gpu-amd"])),
        0
    );
    sim.wait_api("/api/apps/w", |a| a["attached"]["vendor"] == "amd");
    let o = sim.odac(&["app", "gpu", "w", "--off"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stdout(&o).starts_with("app w: gpu request -\n"),
        "{}",
        stdout(&o)
    );
    assert!(stdout(&o).contains("restart required to apply"));
    let o = sim.odac(&["app", "gpu", "w", "--intel", "--count", "1"]);
    assert_eq!(code(&o), 0);
    assert!(
        stdout(&o).contains("gpu request intel count=1"),
        "{}",
        stdout(&o)
    );
    assert_eq!(code(&sim.odac(&["app", "restart", "w"])), 0);
    let app = sim.wait_api("/api/apps/w", |a| a["state"] == "failed");
    assert_eq!(app["reason"], "no_device", "required intel on an AMD box");
    let o = sim.odac(&["app", "remove", "w"]);
    assert_eq!((code(&o), stdout(&o)), (0, "removed app w\n".into()));
    let o = sim.odac(&["app", "list", "--json"]);
    assert_eq!(
        serde_json::from_str::<Value>(&stdout(&o)).unwrap(),
        json!([])
    );
}

#[test]
fn host_list_table_and_json() {
    let sim = Sim::start();
    let _a = sim.sim_agent("nv", 0);
    let _b = sim.sim_agent("broken", 4);
    let o = sim.odac(&["host", "list"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let t = stdout(&o);
    let header = t.lines().next().unwrap();
    for col in [
        "HOST",
        "CONNECTED",
        "GPUS",
        "SCHEDULABLE",
        "REASON",
        "ENGINE",
    ] {
        assert!(header.contains(col), "{header}");
    }
    let broken = t.lines().find(|l| l.starts_with("broken")).unwrap();
    assert!(
        broken.contains("nvidia×1 (NVIDIA GeForce RTX 4090)"),
        "{broken}"
    );
    assert!(broken.contains("nvidia: no_container_runtime"), "{broken}");
    assert!(broken.contains("docker 27.5.1"), "{broken}");
    let nv = t.lines().find(|l| l.starts_with("nv ")).unwrap();
    assert!(nv.contains("yes") && nv.contains("nvidia×1"), "{nv}");
    let o = sim.odac(&["host", "list", "--json"]);
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 2);
}

#[test]
fn unreachable_api_is_one_line_and_exit_1() {
    let sim = Sim::start();
    // a port that was free a moment ago
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let o = Command::new(env!("CARGO_BIN_EXE_odac"))
        .args(["--api", &format!("https://127.0.0.1:{port}"), "app", "list"])
        .args(["--ca-file", &sim.ca_path()])
        .output()
        .unwrap();
    assert_eq!(code(&o), 1);
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!(
            "error: cannot reach the API at https://127.0.0.1:{port}"
        )),
        "{err}"
    );

    let o = Command::new(env!("CARGO_BIN_EXE_odac"))
        .args([
            "--api",
            &sim.api(),
            "--ca-file",
            "/nonexistent/ca.pem",
            "host",
            "list",
        ])
        .output()
        .unwrap();
    assert_eq!(code(&o), 1);
    assert!(stderr(&o).contains("/nonexistent/ca.pem"), "{}", stderr(&o));

    // without the CA the simulator's certificate is not trusted
    let o = Command::new(env!("CARGO_BIN_EXE_odac"))
        .args(["--api", &sim.api(), "host", "list"])
        .env_remove("ODAC_CA_FILE")
        .output()
        .unwrap();
    assert_eq!(code(&o), 1);
    assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));
}

/// Sends `gpu_stats` (seq `seq`) for the host's first GPU: the app `llm` holds it and uses
/// `util` % and `vram` MiB of it.
fn usage_report(seq: u64, gpu: &str, util: u8, vram: u64) -> odac_protocol::AgentMessage {
    odac_protocol::AgentMessage::GpuStats(odac_protocol::GpuStatsReport {
        seq,
        stats: odac_protocol::GpuStats {
            interval_secs: 60,
            gpus: vec![odac_protocol::GpuSample {
                id: gpu.into(),
                util: Some(util),
                vram_used_mib: Some(vram),
                vram_total_mib: Some(24_564),
                ..odac_protocol::GpuSample::default()
            }],
            apps: vec![odac_protocol::AppGpus {
                app: "llm".into(),
                gpus: vec![gpu.into()],
            }],
            usage: vec![odac_protocol::AppGpuUsage {
                app: "llm".into(),
                gpu: gpu.into(),
                vram_used_mib: vram,
                util: Some(util),
            }],
        },
    })
}

#[test]
fn host_show_prints_what_each_app_uses_of_its_gpu() {
    let sim = Sim::start();
    let inv = profile(0, "nv");
    let gpu = inv.gpus[0].pci_address.clone();
    let mut agent = sim.agent("nv", inv);
    let send = |agent: &mut odac_simulator::fake_agent::agent_conn::AgentConn, m| {
        sim.rt.block_on(agent.send(&m)).unwrap();
    };
    let app_row = |show: &str| -> Vec<String> {
        show.lines()
            .find(|l| l.starts_with("llm "))
            .unwrap_or_else(|| panic!("no llm row: {show}"))
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    };

    // holds the NVIDIA GPU, runs nothing on it: 0 % and 0 MiB
    send(&mut agent, usage_report(2, &gpu, 0, 0));
    sim.wait_api("/api/hosts/nv/gpu-stats", |v| v["usage"][0]["app"] == "llm");
    let o = sim.odac(&["host", "show", "nv"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let show = stdout(&o);
    assert!(
        show.contains("APP UTIL") && show.contains("APP VRAM MiB"),
        "{show}"
    );
    assert_eq!(app_row(&show), ["llm", gpu.as_str(), "0%", "0"], "{show}");

    // it starts working: the next report's figures show
    send(&mut agent, usage_report(3, &gpu, 35, 1024));
    sim.wait_api("/api/hosts/nv/gpu-stats", |v| {
        v["usage"][0]["vram_used_mib"] == 1024
    });
    let show = stdout(&sim.odac(&["host", "show", "nv"]));
    assert_eq!(
        app_row(&show),
        ["llm", gpu.as_str(), "35%", "1024"],
        "{show}"
    );
    let o = sim.odac(&["host", "show", "nv", "--json"]);
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(
        v["gpu_stats"]["usage"],
        json!([{"app": "llm", "gpu": gpu, "vram_used_mib": 1024, "util": 35}])
    );
}
