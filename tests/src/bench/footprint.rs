//! Footprint: the agent's peak resident set (`VmHWM`) and CPU share while idle, connected to
//! `odac-sim` and managing 20 running apps, beside the bare client (`odac-bench-client`)
//! holding the same kind of link to the same simulator in the same windows.
//!
//! One setup (20 apps created through the control plane and converged), then per run: both
//! processes restarted (the agent adopts its 20 containers), the agent converged, 3 s to
//! settle, then an idle window (60 s; `--quick` 5 s) over which CPU is read from
//! `/proc/<pid>/stat`; peak and current RSS at its end. Targets: agent peak RSS ≤ 1.5× the bare
//! client's, idle CPU ≤ 0.1 % of one core. The two binaries' sizes on disk are reported too.

use std::time::Duration;

use odac_e2e::agent::SESSION_UP;
use odac_e2e::process::Process;
use odac_e2e::stack::Stack;
use odac_e2e::{Error, Result};

use super::client::start_client;
use super::procfs::{CpuWindow, pid_of, status_kib};
use super::{Opts, Row, Table, Target, Unit, docker_or_skip, production, wait_host};

/// Apps the agent manages while measured.
const APPS: usize = 20;
/// Host id of the bare client.
const CLIENT_ID: &str = "bench-bare-client";

/// One run's figures.
#[derive(Debug, Default)]
struct Figures {
    agent_hwm: f64,
    agent_rss: f64,
    agent_cpu: f64,
    agent_anon: f64,
    agent_file: f64,
    client_anon: f64,
    client_file: f64,
    client_hwm: f64,
    client_rss: f64,
    client_cpu: f64,
    dockerd_cpu: Option<f64>,
}

/// Runs the suite.
pub fn run(opts: Opts) -> Result<Option<Table>> {
    if !docker_or_skip("footprint")? {
        return Ok(None);
    }
    let runs = opts.pick(3, 2);
    let window = Duration::from_secs(opts.pick(60, 5));
    let mut stack = Stack::builder("bench-footprint")
        .agent_options(production)
        .hosts_per_token(2)
        .start()?;
    let host = stack.wait_connected(Duration::from_secs(60))?;
    for i in 0..APPS {
        let mut body = Stack::app_body(&format!("fp{i:02}"));
        body["host"] = serde_json::Value::String(host.clone());
        stack.sim.create_app(&body)?;
    }
    stack.wait_converged(APPS, Duration::from_secs(300))?;
    let mut client: Option<Process> = None;
    let mut figures = Vec::new();
    for run in 0..runs {
        drop(client.take());
        stack.agent_mut()?.restart_with(|_| {})?;
        stack
            .agent()?
            .process()?
            .wait_for_line(SESSION_UP, Duration::from_secs(60))?;
        wait_host(&stack.sim, &host, Duration::from_secs(60))?;
        let c = start_client(&stack.sim, None, CLIENT_ID, stack.dir())?;
        stack.wait_converged(APPS, Duration::from_secs(120))?;
        std::thread::sleep(Duration::from_secs(3));
        let agent_pid = stack.agent()?.process()?.pid();
        let dockerd = pid_of("dockerd");
        let mut pids = vec![agent_pid, c.pid()];
        pids.extend(dockerd);
        let cpu = CpuWindow::start(&pids)?;
        std::thread::sleep(window);
        let pct = cpu.percent()?;
        let f = Figures {
            agent_hwm: status_kib(agent_pid, "VmHWM")? as f64,
            agent_rss: status_kib(agent_pid, "VmRSS")? as f64,
            agent_cpu: pct.first().copied().unwrap_or_default(),
            agent_anon: status_kib(agent_pid, "RssAnon")? as f64,
            agent_file: status_kib(agent_pid, "RssFile")? as f64,
            client_anon: status_kib(c.pid(), "RssAnon")? as f64,
            client_file: status_kib(c.pid(), "RssFile")? as f64,
            client_hwm: status_kib(c.pid(), "VmHWM")? as f64,
            client_rss: status_kib(c.pid(), "VmRSS")? as f64,
            client_cpu: pct.get(1).copied().unwrap_or_default(),
            dockerd_cpu: pct.get(2).copied(),
        };
        println!(
            "footprint run {}/{runs}: agent hwm {:.0} KiB rss {:.0} KiB cpu {:.3} % | bare client hwm {:.0} KiB rss {:.0} KiB cpu {:.3} %",
            run + 1,
            f.agent_hwm,
            f.agent_rss,
            f.agent_cpu,
            f.client_hwm,
            f.client_rss,
            f.client_cpu
        );
        figures.push(f);
        client = Some(c);
        if stack.containers()?.len() != APPS {
            return Err(Error::Other(format!(
                "footprint: {APPS} containers expected after the window"
            )));
        }
    }
    drop(client);
    let col = |f: fn(&Figures) -> f64| figures.iter().map(f).collect::<Vec<f64>>();
    let mut t = Table::new(
        format!(
            "Footprint — agent with {APPS} running apps, idle {} s per run",
            window.as_secs()
        ),
        "bare client",
    );
    t.push(
        Row::new("peak RSS (VmHWM)", Unit::Kib, col(|f| f.agent_hwm))
            .baseline(col(|f| f.client_hwm))
            .target(Target::RatioAtMost(1.5)),
    );
    t.push(
        Row::new(
            "RSS at the end of the window",
            Unit::Kib,
            col(|f| f.agent_rss),
        )
        .baseline(col(|f| f.client_rss)),
    );
    t.push(
        Row::new(
            "… of it anonymous (heap, stacks: RssAnon)",
            Unit::Kib,
            col(|f| f.agent_anon),
        )
        .baseline(col(|f| f.client_anon)),
    );
    t.push(
        Row::new(
            "… of it file-backed (mapped code: RssFile)",
            Unit::Kib,
            col(|f| f.agent_file),
        )
        .baseline(col(|f| f.client_file)),
    );
    t.push(
        Row::new(
            "idle CPU (% of one core)",
            Unit::CpuPercent,
            col(|f| f.agent_cpu),
        )
        .baseline(col(|f| f.client_cpu))
        .target(Target::AtMost(0.1)),
    );
    let size_kib = |path: std::path::PathBuf| {
        std::fs::metadata(&path)
            .map(|m| m.len() as f64 / 1024.0)
            .map_err(|e| Error::io("stat", &path, e))
    };
    t.push(
        Row::new(
            "binary size (as the profile builds it: stripped in release)",
            Unit::Kib,
            vec![size_kib(odac_e2e::bins::bin("odac-agent")?)?],
        )
        .baseline(vec![size_kib(super::client::client_bin()?)?]),
    );
    let dockerd: Vec<f64> = figures.iter().filter_map(|f| f.dockerd_cpu).collect();
    if !dockerd.is_empty() {
        t.push(Row::new(
            "dockerd CPU in the same window (% of one core)",
            Unit::CpuPercent,
            dockerd,
        ));
        t.note(
            "dockerd's row is the whole engine over the window: the agent's polling plus anything \
             else using Docker on the machine meanwhile",
        );
    }
    t.note(format!(
        "agent: shipped defaults (heartbeat 20 s, inventory every 10 s, apps polled every 2 s, \
         info logs); restarted before each run, adopting its {APPS} containers"
    ));
    t.note(
        "bare client: `odac-bench-client` (tokio multi-thread + tokio-tungstenite + rustls/ring, \
         hello, acks, pings at the welcome's 20 s), connected to the same simulator",
    );
    t.note(format!(
        "CPU from utime+stime in /proc/<pid>/stat over the window (tick {:.0} ms)",
        1000.0 / super::procfs::clock_ticks()
    ));
    super::gpu_sample::rows(opts, &mut t)?;
    Ok(Some(t))
}
