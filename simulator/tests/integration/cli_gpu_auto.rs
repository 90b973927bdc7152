//! Automatic vendor detection through the `odac` binary and the REST API, against simulated
//! hosts of every profile: `odac app gpu NAME` with no vendor flag, `create --auto`, and
//! `--count N` alone store the vendor the host has (a present-but-unusable one included, so
//! that the agent reports why), a host without any GPU is refused with a message naming the
//! flags, `--optional` keeps the request automatic, `--off` removes it. Also the seed's JSON
//! payload through `odac app create -f FILE` and `-f -`, the printed `…/api/` URL as
//! `--api`, and help texts without a dangling `[env: …=]`.

use crate::common;

use std::io::Write;
use std::process::{Command, Stdio};

use common::{Sim, stderr, stdout};
use serde_json::{Value, json};

/// Inventory profiles of `odac_simulator::fake_agent::inventories::profile`.
const NVIDIA: usize = 0;
const AMD: usize = 1;
const CPU_ONLY: usize = 3;
const NVIDIA_NO_TOOLKIT: usize = 4;

fn code(o: &std::process::Output) -> i32 {
    o.status.code().unwrap()
}

fn requested(sim: &Sim, app: &str) -> Value {
    sim.call("GET", &format!("/api/apps/{app}"), None).1["requested"].clone()
}

#[test]
fn gpu_without_a_vendor_flag_stores_the_hosts_vendor() {
    let sim = Sim::start();
    let _a = sim.sim_agent("nv-box", NVIDIA);
    let o = sim.odac(&["app", "create", "-n", "my-app", "--image", "busybox"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));

    let o = sim.odac(&["app", "gpu", "my-app"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stdout(&o).starts_with("app my-app: gpu request nvidia (vendor detected on nv-box)\n"),
        "{}",
        stdout(&o)
    );
    assert_eq!(requested(&sim, "my-app"), json!({"runtime": "nvidia"}));
    // the agent attaches it after a restart: the request is a plain required NVIDIA one
    assert_eq!(code(&sim.odac(&["app", "restart", "my-app"])), 0);
    sim.wait_api("/api/apps/my-app", |a| a["attached"]["vendor"] == "nvidia");

    // --count alone is detection too, the count kept
    let o = sim.odac(&["app", "gpu", "my-app", "--count", "1"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(
        requested(&sim, "my-app"),
        json!({"runtime": "nvidia", "count": 1})
    );
    // the seed's explicit form is kept as sent
    let o = sim.odac(&[
        "app",
        "gpu",
        "my-app",
        "--nvidia",
        "--count",
        "1",
        "--optional",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(!stdout(&o).contains("detected"), "{}", stdout(&o));
    assert_eq!(
        requested(&sim, "my-app"),
        json!({"runtime": "nvidia", "count": 1, "optional": true})
    );
    // --optional alone stays automatic: the agent picks at every start
    let o = sim.odac(&["app", "gpu", "my-app", "--optional"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(
        requested(&sim, "my-app"),
        json!({"runtime": "auto", "optional": true})
    );
    // --off removes the request
    let o = sim.odac(&["app", "gpu", "my-app", "--off"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(requested(&sim, "my-app"), Value::Null);
}

#[test]
fn create_auto_and_count_alone_detect_on_the_chosen_host() {
    let sim = Sim::start();
    let _a = sim.sim_agent("amd-box", AMD);
    let _b = sim.sim_agent("cpu-box", CPU_ONLY);
    let o = sim.odac(&[
        "app", "create", "-n", "a1", "--image", "x", "--host", "amd-box", "--auto",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stdout(&o).contains("gpu request rocm (vendor detected on amd-box)"),
        "{}",
        stdout(&o)
    );
    assert_eq!(requested(&sim, "a1"), json!({"runtime": "rocm"}));
    // the old spelling still works (hidden alias)
    let o = sim.odac(&[
        "app", "create", "-n", "a2", "--image", "x", "--host", "amd-box", "--count", "1",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(
        requested(&sim, "a2"),
        json!({"runtime": "rocm", "count": 1})
    );
    let o = sim.odac(&[
        "app",
        "create",
        "-n",
        "a3",
        "--image",
        "x",
        "--host",
        "amd-box",
        "--gpu-auto",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));

    // two hosts connected and none named: the refusal says how to choose, naming them
    let o = sim.odac(&["app", "create", "-n", "a4", "--image", "x"]);
    assert_eq!(code(&o), 1);
    let err = stderr(&o);
    for needle in ["2 hosts are connected", "--host", "amd-box", "cpu-box"] {
        assert!(err.contains(needle), "{needle} in {err}");
    }
    assert!(!err.contains("\"host\""), "{err}");

    // a host without any GPU: refused, naming the flags, nothing created
    let o = sim.odac(&[
        "app", "create", "-n", "c1", "--image", "x", "--host", "cpu-box", "--auto",
    ]);
    assert_eq!(code(&o), 1);
    assert_eq!(
        stderr(&o),
        "error: automatic vendor detection found no GPU: host cpu-box has none; name a vendor \
         (--nvidia, --amd or --intel) to require one anyway, or use --optional to take any \
         vendor when one appears and run on the CPU until then\n"
    );
    assert_eq!(sim.call("GET", "/api/apps/c1", None).0, 404);
    // with --optional it is accepted and stays automatic
    let o = sim.odac(&[
        "app",
        "create",
        "-n",
        "c1",
        "--image",
        "x",
        "--host",
        "cpu-box",
        "--optional",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(
        requested(&sim, "c1"),
        json!({"runtime": "auto", "optional": true})
    );
    let o = sim.odac(&["app", "gpu", "c1", "--count", "2"]);
    assert_eq!(code(&o), 1);
    assert!(stderr(&o).contains("--optional"), "{}", stderr(&o));
    assert_eq!(
        requested(&sim, "c1"),
        json!({"runtime": "auto", "optional": true}),
        "a refused change loses nothing"
    );
}

#[test]
fn a_present_but_unusable_vendor_is_chosen_and_the_agent_says_why() {
    let sim = Sim::start();
    let _a = sim.sim_agent("broken", NVIDIA_NO_TOOLKIT);
    let o = sim.odac(&["app", "create", "-n", "w", "--image", "x"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = sim.odac(&["app", "gpu", "w"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("gpu request nvidia (vendor detected on broken)"),
        "{out}"
    );
    assert!(
        out.contains("note: the nvidia GPUs of broken cannot be used now (no_container_runtime"),
        "{out}"
    );
    assert_eq!(code(&sim.odac(&["app", "restart", "w"])), 0);
    let app = sim.wait_api("/api/apps/w", |a| a["state"] == "failed");
    assert_eq!(app["reason"], "no_container_runtime");
    let o = sim.odac(&["app", "list"]);
    let row = stdout(&o)
        .lines()
        .find(|l| l.starts_with("w "))
        .unwrap()
        .to_owned();
    assert!(row.contains("no_container_runtime"), "{row}");
}

#[test]
fn api_put_gpu_auto_and_count_alone() {
    let sim = Sim::start();
    let _a = sim.sim_agent("nv", NVIDIA);
    let (s, _) = sim.call("POST", "/api/apps", Some(r#"{"name":"w","image":"x"}"#));
    assert_eq!(s, 201);
    for (body, stored) in [
        (r#"{"runtime":"auto"}"#, json!({"runtime":"nvidia"})),
        (r#"{"count":1}"#, json!({"runtime":"nvidia","count":1})),
        (
            r#"{"runtime":"auto","count":"all","optional":false}"#,
            json!({"runtime":"nvidia","count":"all","optional":false}),
        ),
        (
            r#"{"runtime":"auto","optional":true}"#,
            json!({"runtime":"auto","optional":true}),
        ),
        ("{}", Value::Null),
    ] {
        let (s, v) = sim.call("PUT", "/api/apps/w/gpu", Some(body));
        assert_eq!(s, 200, "{body}: {v}");
        assert_eq!(v["app"]["requested"], stored, "{body}");
        let detected = stored.get("runtime") == Some(&json!("nvidia"));
        assert_eq!(v["detected"].is_object(), detected, "{body}: {v}");
        if detected {
            assert_eq!(v["detected"], json!({"vendor": "nvidia", "host": "nv"}));
        }
    }
    let (s, v) = sim.call(
        "PUT",
        "/api/apps/w/gpu",
        Some(r#"{"runtime":"auto","count":0}"#),
    );
    assert_eq!((s, v["field"].clone()), (400, json!("gpu.count")), "{v}");
}

#[test]
fn seed_payload_from_a_file_and_from_stdin() {
    let sim = Sim::start();
    let _a = sim.sim_agent("nv", NVIDIA);
    let payload = r#"{"name":"ollama-app","type":"app","app":"ollama","gpu":{"runtime":"nvidia","count":1,"optional":true}}"#;
    let file = sim.dir.path().join("payload.json");
    std::fs::write(&file, payload).unwrap();
    let o = sim.odac(&["app", "create", "-f", file.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&o), "created app ollama-app on nv (pending)\n");
    let app = sim.call("GET", "/api/apps/ollama-app", None).1;
    assert_eq!(app["image"], "ollama/ollama:0.6.2");
    assert_eq!(
        app["requested"],
        json!({"runtime":"nvidia","count":1,"optional":true}),
        "kept as sent"
    );

    let mut child = sim.spawn_odac(&["app", "create", "-f", "-"], Stdio::piped());
    child
        .stdin
        .take()
        .unwrap()
        .write_all(payload.replace("ollama-app", "ollama-2").as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&o), "created app ollama-2 on nv (pending)\n");

    // refusals of a payload keep its own field names; a bad file is named
    std::fs::write(
        &file,
        r#"{"name":"x","image":"i","gpu":{"runtime":"nvidia","count":0}}"#,
    )
    .unwrap();
    let o = sim.odac(&["app", "create", "-f", file.to_str().unwrap()]);
    assert_eq!(code(&o), 1);
    assert_eq!(stderr(&o), "error: gpu.count: 0 is out of range 1..=64\n");
    std::fs::write(&file, "{").unwrap();
    let o = sim.odac(&["app", "create", "-f", file.to_str().unwrap()]);
    assert_eq!(code(&o), 1);
    assert!(
        stderr(&o).contains("payload.json: not valid JSON"),
        "{}",
        stderr(&o)
    );
    let o = sim.odac(&["app", "create", "-f", "/nonexistent/p.json"]);
    assert_eq!(code(&o), 1);
    assert!(stderr(&o).contains("/nonexistent/p.json"), "{}", stderr(&o));
    // -f excludes the flags that build a spec
    let o = sim.odac(&["app", "create", "-f", "-", "--image", "x"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
}

#[test]
fn flag_refusals_name_flags_and_the_printed_api_url_works() {
    let sim = Sim::start();
    let _a = sim.sim_agent("nv", NVIDIA);
    let o = sim.odac(&["app", "create", "-n", "Bad", "--image", "x"]);
    assert_eq!(code(&o), 1);
    assert!(
        stderr(&o).starts_with("error: -n/--name: "),
        "{}",
        stderr(&o)
    );
    // the `api:` line odac-sim serve prints
    let printed = format!("{}/api/", sim.api());
    let o = Command::new(env!("CARGO_BIN_EXE_odac"))
        .args([
            "--api",
            &printed,
            "--ca-file",
            &sim.ca_path(),
            "host",
            "list",
        ])
        .env_remove("ODAC_API")
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stdout(&o).contains("nv (nv)"), "{}", stdout(&o));
}

#[test]
fn help_has_a_line_for_every_flag_and_no_dangling_env() {
    for args in [
        vec!["--help"],
        vec!["app", "create", "--help"],
        vec!["app", "gpu", "--help"],
        vec!["app", "list", "--help"],
        vec!["host", "list", "--help"],
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_odac"))
            .args(&args)
            .env_remove("ODAC_API")
            .env_remove("ODAC_CA_FILE")
            .env_remove("ODAC_TOKEN")
            .output()
            .unwrap();
        assert_eq!(code(&o), 0);
        let help = stdout(&o);
        assert!(!help.contains("=]"), "{args:?}: {help}");
        assert!(
            !help.contains("gpu-nvidia"),
            "old spellings are hidden: {help}"
        );
        for line in help.lines().filter(|l| l.trim_start().starts_with('-')) {
            let text = line.trim_start();
            // `--flag <V>  help`: the help is after two spaces
            let help_text = text.split_once("  ").map(|(_, h)| h.trim()).unwrap_or("");
            assert!(
                help_text.len() >= 10,
                "{args:?}: flag without a real help line: {line:?}"
            );
        }
    }
    let o = Command::new(env!("CARGO_BIN_EXE_odac"))
        .args(["app", "gpu", "--help"])
        .output()
        .unwrap();
    for flag in [
        "--nvidia",
        "--amd",
        "--intel",
        "--auto",
        "--count",
        "--optional",
        "--off",
    ] {
        assert!(stdout(&o).contains(flag), "{flag}");
    }
}

/// NVIDIA driver capabilities: `--capabilities video,compute` and `--video` reach the stored
/// request, a bad name is refused by the CLI (exit 2) and by the API (400 naming
/// `gpu.capabilities`), and `odac app list` shows the attached set in short form.
#[test]
fn capabilities_flags_reach_the_request_and_the_attached_column() {
    let sim = Sim::start();
    let _a = sim.sim_agent("nv-caps", NVIDIA);
    let o = sim.odac(&["app", "create", "-n", "enc", "--image", "busybox"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));

    let o = sim.odac(&[
        "app",
        "gpu",
        "enc",
        "--nvidia",
        "--capabilities",
        "video,compute",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(
        requested(&sim, "enc"),
        json!({"runtime": "nvidia", "capabilities": ["compute", "video"]})
    );
    let o = sim.odac(&["app", "gpu", "enc", "--nvidia", "--video"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(
        requested(&sim, "enc"),
        json!({"runtime": "nvidia", "capabilities": ["compute", "utility", "video"]})
    );
    let o = sim.odac(&["app", "gpu", "enc", "--nvidia", "--capabilities", "vidoe"]);
    assert_eq!(code(&o), 2, "{}", stdout(&o));
    assert!(
        stderr(&o).contains("unknown capability \"vidoe\""),
        "{}",
        stderr(&o)
    );

    let (s, v) = sim.call(
        "PUT",
        "/api/apps/enc/gpu",
        Some(r#"{"runtime":"nvidia","capabilities":["video","hdr"]}"#),
    );
    assert_eq!(
        (s, v["field"].clone()),
        (400, json!("gpu.capabilities")),
        "{v}"
    );
    let (s, v) = sim.call(
        "PUT",
        "/api/apps/enc/gpu",
        Some(r#"{"runtime":"nvidia","capabilities":"video,compute,utility"}"#),
    );
    assert_eq!(s, 200, "{v}");

    assert_eq!(code(&sim.odac(&["app", "restart", "enc"])), 0);
    sim.wait_api("/api/apps/enc", |a| {
        a["attached"]["capabilities"] == json!(["compute", "utility", "video"])
    });
    let o = sim.odac(&["app", "list"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let line = stdout(&o)
        .lines()
        .find(|l| l.starts_with("enc "))
        .map(str::to_owned)
        .unwrap_or_default();
    assert!(line.contains("[compute,utility,video]"), "{}", stdout(&o));

    // --min-vram-mib reaches the request; 0 is refused by the CLI
    let o = sim.odac(&["app", "gpu", "enc", "--nvidia", "--min-vram-mib", "8000"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(
        requested(&sim, "enc"),
        json!({"runtime": "nvidia", "min_vram_mib": 8000})
    );
    let o = sim.odac(&["app", "gpu", "enc", "--nvidia", "--min-vram-mib", "0"]);
    assert_eq!(code(&o), 2, "{}", stdout(&o));
}
