//! Prometheus metrics end to end. A real Prometheus (Debian's `prometheus` package, started
//! by the test on loopback with its own data dir and a 1 s scrape interval) scrapes a real
//! agent working on the GPU lab's private engine with an AMD GPU whose sysfs counters the
//! test sets: its HTTP API returns `DCGM_FI_DEV_GPU_UTIL{app=…}` and `DCGM_FI_DEV_FB_USED`
//! for the app's GPU and `odac_agent_link_up 1`, and after the app is removed its series are
//! gone. `promtool check metrics` passes on the agent's and the simulator's output. A
//! missing `prometheus`/`promtool` fails the tests unless `ODAC_ALLOW_SKIP=1`.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use odac_e2e::gpu_lab::Lab;
use odac_e2e::poll::poll;
use odac_e2e::ports::free_port;
use odac_e2e::process::Process;
use odac_e2e::require_docker;
use odac_e2e::stack::Stack;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(90);

/// Whether a missing tool may skip the test (`ODAC_ALLOW_SKIP=1`); otherwise it fails.
fn tool_or_skip(tool: &str) -> bool {
    let found = Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    if !found {
        assert!(
            std::env::var("ODAC_ALLOW_SKIP").as_deref() == Ok("1"),
            "{tool} not found: install Debian's prometheus package, or set ODAC_ALLOW_SKIP=1"
        );
        println!("skip: {tool} not installed (ODAC_ALLOW_SKIP=1)");
    }
    found
}

/// `promtool check metrics` on `text`; panics with its output when it complains.
fn promtool_check(what: &str, text: &str) {
    let out = odac_e2e::command::output_with_stdin(
        Command::new("promtool").args(["check", "metrics"]),
        "promtool check metrics",
        Some(text.as_bytes()),
    )
    .unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics on the {what}'s output: {}{}\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn get_text(url: &str) -> Result<String, String> {
    ureq::get(url)
        .call()
        .map_err(|e| format!("GET {url}: {e}"))?
        .body_mut()
        .read_to_string()
        .map_err(|e| format!("GET {url}: {e}"))
}

fn metrics_env(stack: &mut Stack, port: u16) {
    stack.options.env.push((
        "ODAC_AGENT__METRICS__LISTEN".to_owned(),
        format!("127.0.0.1:{port}"),
    ));
}

#[test]
fn agent_and_simulator_metrics_pass_promtool() {
    const SCENARIO: &str = "metrics-promtool";
    require_docker!(SCENARIO);
    if !tool_or_skip("promtool") {
        return;
    }
    let port = free_port().unwrap();
    let mut stack = Stack::builder(SCENARIO).no_agent().start().unwrap();
    metrics_env(&mut stack, port);
    stack.start_agent().unwrap();
    let host = stack.wait_connected(Duration::from_secs(30)).unwrap();
    let url = format!("http://127.0.0.1:{port}/metrics");
    let agent = poll("the agent's link up in its metrics", WAIT, || {
        let text = get_text(&url)?;
        if text.contains("\nodac_agent_link_up 1\n")
            && text.contains("odac_agent_reports_acked_total ")
        {
            Ok(text)
        } else {
            Err(text)
        }
    })
    .unwrap();
    promtool_check("agent", &agent);

    let sim = poll("the simulator's fleet in its metrics", WAIT, || {
        let mut text = String::new();
        stack
            .sim
            .client()
            .map_err(|e| e.to_string())?
            .get_stream("/metrics")
            .map_err(|e| e.to_string())?
            .read_to_string(&mut text)
            .map_err(|e| e.to_string())?;
        if text.contains("odac_sim_hosts{state=\"connected\"} 1") {
            Ok(text)
        } else {
            Err(text)
        }
    })
    .unwrap();
    assert!(sim.contains("odac_sim_build_info{version="), "{sim}");
    assert!(sim.contains("# TYPE odac_sim_apps gauge"), "{sim}");
    promtool_check("simulator", &sim);
    drop(host);
}

/// A Prometheus on loopback scraping `target` every second, its data under `dir`.
fn start_prometheus(dir: &Path, target: u16) -> (Process, u16) {
    let port = free_port().unwrap();
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: odac-agent\n    static_configs:\n      - targets: ['127.0.0.1:{target}']\n"
        ),
    )
    .unwrap();
    let mut cmd = Command::new("prometheus");
    cmd.arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"));
    let process = Process::spawn("prometheus", &mut cmd, dir).unwrap();
    (process, port)
}

/// The result vector of an instant query.
fn query(port: u16, q: &str) -> Result<Vec<Value>, String> {
    let url = format!("http://127.0.0.1:{port}/api/v1/query");
    let body = ureq::get(&url)
        .query("query", q)
        .call()
        .map_err(|e| format!("{q}: {e}"))?
        .body_mut()
        .read_to_string()
        .map_err(|e| format!("{q}: {e}"))?;
    let v: Value = serde_json::from_str(&body).map_err(|e| format!("{q}: {e}: {body}"))?;
    if v["status"] != "success" {
        return Err(format!("{q}: {body}"));
    }
    Ok(v["data"]["result"].as_array().cloned().unwrap_or_default())
}

/// The sysfs directory of PCI device `id` under `dir` (the real one, not a bus symlink).
fn device_dir(dir: &Path, id: &str) -> Option<std::path::PathBuf> {
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        let kind = entry.file_type().ok()?;
        if !kind.is_dir() {
            continue;
        }
        if entry.file_name() == id {
            return Some(path);
        }
        if let Some(found) = device_dir(&path, id) {
            return Some(found);
        }
    }
    None
}

/// The value of a sample of an instant query result.
fn value(sample: &Value) -> &str {
    sample["value"][1].as_str().unwrap_or_default()
}

#[test]
fn prometheus_scrapes_an_apps_gpu_series_and_they_go_with_the_app() {
    const SCENARIO: &str = "metrics-prometheus";
    require_docker!(SCENARIO);
    if !tool_or_skip("prometheus") {
        return;
    }
    let agent_port = free_port().unwrap();
    let mut stack = Stack::builder(SCENARIO).no_agent().start().unwrap();
    let lab = Lab::start_for(&mut stack, "amd:1", &[]).unwrap();
    stack.options.env.push((
        "ODAC_AGENT__TELEMETRY__INTERVAL_SECS".to_owned(),
        "10".to_owned(),
    ));
    metrics_env(&mut stack, agent_port);
    stack.start_agent().unwrap();
    stack.wait_connected(Duration::from_secs(30)).unwrap();
    let gpu_id = stack.sim.hosts().unwrap()[0]
        .inventory
        .as_ref()
        .expect("an inventory")
        .gpus[0]
        .pci_address
        .clone();
    // the lab's GPU: 37 % busy, 2 GiB of VRAM in use, 55 °C, 120 W, 1700 MHz
    let dev = device_dir(&lab.host_root.join("sys/devices"), &gpu_id).expect("the GPU's sysfs dir");
    let hwmon = dev.join("hwmon/hwmon0");
    std::fs::create_dir_all(&hwmon).unwrap();
    for (file, value) in [
        (dev.join("gpu_busy_percent"), 37u64),
        (dev.join("mem_info_vram_used"), 2048 * 1024 * 1024),
        (hwmon.join("temp1_input"), 55_000),
        (hwmon.join("power1_average"), 120_000_000),
        (hwmon.join("freq1_input"), 1_700_000_000),
    ] {
        // written beside and renamed: the agent's telemetry reads these files on its own
        // clock and must never see one truncated and not yet written
        let part = file.with_extension("part");
        std::fs::write(&part, format!("{value}\n")).unwrap();
        std::fs::rename(&part, &file).unwrap();
    }
    let total_mib: u64 = std::fs::read_to_string(dev.join("mem_info_vram_total"))
        .unwrap()
        .trim()
        .parse::<u64>()
        .unwrap()
        / (1024 * 1024);
    let free_mib = (total_mib - 2048).to_string();

    let name = "metrics-amd";
    stack
        .sim
        .create_app(&json!({
            "name": name,
            "image": lab.image,
            "gpu": {"runtime": "amd", "count": 1},
            "command": ["sh", "-c", "trap 'exit 0' TERM; sleep 999999 & wait"],
        }))
        .unwrap();
    stack
        .wait_app(name, WAIT, "running with its gpu", |a| {
            a.state == "running" && a.attached.is_some()
        })
        .unwrap();

    let prom_dir = stack.dir().join("prometheus");
    std::fs::create_dir_all(&prom_dir).unwrap();
    let (prometheus, prom_port) = start_prometheus(&prom_dir, agent_port);

    let util = poll("the app's GPU utilisation in Prometheus", WAIT, || {
        let r = query(
            prom_port,
            &format!("DCGM_FI_DEV_GPU_UTIL{{app=\"{name}\"}}"),
        )?;
        match r.as_slice() {
            [one] if value(one) == "37" => Ok(one.clone()),
            _ => Err(format!("{r:?}")),
        }
    })
    .unwrap();
    let labels = &util["metric"];
    assert_eq!(labels["pci_bus_id"], gpu_id.as_str(), "{util}");
    assert_eq!(labels["vendor"], "amd", "{util}");
    assert_eq!(labels["gpu"], "0", "{util}");
    assert!(
        labels["container"]
            .as_str()
            .unwrap()
            .ends_with(&format!("_{name}")),
        "{util}"
    );
    assert!(
        !labels["Hostname"].as_str().unwrap_or_default().is_empty(),
        "{util}"
    );
    let fb = query(
        prom_port,
        &format!("DCGM_FI_DEV_FB_USED{{app=\"{name}\",pci_bus_id=\"{gpu_id}\"}}"),
    )
    .unwrap();
    assert_eq!(fb.len(), 1, "{fb:?}");
    assert_eq!(value(&fb[0]), "2048", "{fb:?}");
    for (metric, want) in [
        ("DCGM_FI_DEV_GPU_TEMP", "55"),
        ("DCGM_FI_DEV_POWER_USAGE", "120"),
        ("DCGM_FI_DEV_SM_CLOCK", "1700"),
        ("DCGM_FI_DEV_FB_FREE", free_mib.as_str()),
    ] {
        let r = query(prom_port, &format!("{metric}{{app=\"{name}\"}}")).unwrap();
        assert_eq!(r.len(), 1, "{metric}: {r:?}");
        assert_eq!(value(&r[0]), want, "{metric}: {r:?}");
    }
    let link = query(prom_port, "odac_agent_link_up").unwrap();
    assert_eq!(link.len(), 1, "{link:?}");
    assert_eq!(value(&link[0]), "1", "{link:?}");
    let running = query(prom_port, "odac_agent_apps{state=\"running\"}").unwrap();
    assert_eq!(running.len(), 1, "{running:?}");
    assert_eq!(value(&running[0]), "1", "{running:?}");
    let attached = query(prom_port, "odac_agent_gpu_requests{result=\"attached\"}").unwrap();
    assert_eq!(attached.len(), 1, "{attached:?}");

    // the Grafana dashboard's queries run on this Prometheus, and its app panels show the app
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(
            odac_e2e::bins::workspace_root().join("deploy/grafana-dashboard.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let mut exprs = 0;
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"]
                .as_str()
                .unwrap()
                .replace("$Hostname", ".*")
                .replace("$gpu", ".*")
                .replace("$app", ".*");
            let result =
                query(prom_port, &expr).unwrap_or_else(|e| panic!("panel {}: {e}", panel["title"]));
            exprs += 1;
            let title = panel["title"].as_str().unwrap_or_default();
            // everything but the per-process (NVIDIA-only) panels has data on this AMD host
            let nvidia_only = title.contains("(NVIDIA)");
            if !nvidia_only
                && (title.contains("the app's GPUs")
                    || title.starts_with("GPU ")
                    || title == "Control-plane link up")
            {
                assert!(!result.is_empty(), "panel {title}: {expr} is empty");
            }
            if title.contains("the app's GPUs") {
                assert_eq!(result[0]["metric"]["app"], name, "{title}: {result:?}");
            }
        }
    }
    assert!(exprs >= 18, "{exprs} queries");

    // the app goes: its series go with it, the GPU stays without an app
    stack.sim.delete_app(name).unwrap();
    poll("the app's series gone from Prometheus", WAIT, || {
        let app = query(prom_port, &format!("{{app=\"{name}\"}}"))?;
        let gpu = query(
            prom_port,
            &format!("DCGM_FI_DEV_GPU_UTIL{{pci_bus_id=\"{gpu_id}\"}}"),
        )?;
        let free = gpu.len() == 1 && gpu[0]["metric"].get("app").is_none();
        if app.is_empty() && free {
            Ok(())
        } else {
            Err(format!("app series {app:?}; gpu series {gpu:?}"))
        }
    })
    .unwrap();

    drop(prometheus);
    drop(stack.agent.take());
    lab.stop().unwrap();
}
