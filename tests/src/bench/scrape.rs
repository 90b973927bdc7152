//! What a Prometheus scrape costs the agent: an agent on the 8-GPU AMD fixture (copied, with
//! counters) with `[metrics] listen` on loopback, measured over equal windows without
//! scraping, scraped every 15 s (a usual Prometheus interval) and scraped every second (to
//! make one scrape's cost visible above the CPU tick). Reported: idle CPU and RSS per window,
//! the time one scrape takes (request to last byte, from the bench) and the body size.
//! Target: scraping every 15 s adds ≤ 0.1 % of a core (the footprint's idle-CPU target).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use odac_e2e::gpu_counters::{copy_fixture, set_amd};
use odac_e2e::ports::free_port;
use odac_e2e::stack::{Stack, fixture_host};
use odac_e2e::{Error, Result};

use super::procfs::{CpuWindow, status_kib};
use super::{Opts, Row, Table, Target, Unit, docker_or_skip, production};

/// One `GET /metrics`: the body's size in bytes and the time it took, ms.
fn scrape(port: u16) -> Result<(usize, f64)> {
    let t0 = Instant::now();
    let mut s = TcpStream::connect(("127.0.0.1", port))
        .map_err(|e| Error::Other(format!("metrics endpoint: {e}")))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| Error::Other(e.to_string()))?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .map_err(|e| Error::Other(format!("metrics endpoint: {e}")))?;
    let mut out = Vec::new();
    s.read_to_end(&mut out)
        .map_err(|e| Error::Other(format!("metrics endpoint: {e}")))?;
    let took = t0.elapsed().as_secs_f64() * 1e3;
    let text = String::from_utf8_lossy(&out);
    if !text.starts_with("HTTP/1.1 200") || !text.contains("DCGM_FI_DEV_GPU_UTIL") {
        return Err(Error::Other(format!("metrics endpoint answered: {text}")));
    }
    let body = text.split_once("\r\n\r\n").map_or(0, |(_, b)| b.len());
    Ok((body, took))
}

/// Runs the suite.
pub fn run(opts: Opts) -> Result<Option<Table>> {
    if !docker_or_skip("scrape")? {
        return Ok(None);
    }
    let scratch =
        tempfile::tempdir().map_err(|e| Error::Other(format!("cannot create a temp dir: {e}")))?;
    let root = copy_fixture(&fixture_host("amd-kfd-mi210-8gpu"), scratch.path())?;
    for i in 0..8u8 {
        let id = odac_e2e::gpu_counters::MI210_GPUS[usize::from(i)];
        set_amd(&root, id, 10 + i, 1024, 40, 100)?;
    }
    let port = free_port()?;
    let mut stack = Stack::builder("bench-scrape")
        .no_agent()
        .host_root(root)
        .start()?;
    production(&mut stack.options);
    stack.options.env.push((
        "ODAC_AGENT__METRICS__LISTEN".to_owned(),
        format!("127.0.0.1:{port}"),
    ));
    stack.start_agent()?;
    stack.wait_connected(Duration::from_secs(60))?;
    // the first GPU sample is taken at start; wait until it is served
    let deadline = Instant::now() + Duration::from_secs(60);
    while scrape(port).is_err() {
        if Instant::now() > deadline {
            return Err(Error::Other(
                "the metrics endpoint never served GPU series".into(),
            ));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    std::thread::sleep(Duration::from_secs(3));
    let pid = stack.agent()?.process()?.pid();
    let window = Duration::from_secs(opts.pick(60, 5));
    let runs = opts.pick(2, 1);
    let (mut quiet, mut every15, mut every1) = (Vec::new(), Vec::new(), Vec::new());
    let (mut rss_quiet, mut rss_scraped) = (Vec::new(), Vec::new());
    let (mut times, mut sizes) = (Vec::new(), Vec::new());
    let mut measure = |every: Option<Duration>| -> Result<(f64, f64)> {
        let cpu = CpuWindow::start(&[pid])?;
        let t0 = Instant::now();
        let mut next = t0;
        while t0.elapsed() < window {
            if let Some(every) = every
                && Instant::now() >= next
            {
                let (size, ms) = scrape(port)?;
                times.push(ms);
                sizes.push(size as f64);
                next += every;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let pct = cpu.percent()?.first().copied().unwrap_or_default();
        Ok((pct, status_kib(pid, "VmRSS")? as f64))
    };
    for run in 0..runs {
        let (q, rq) = measure(None)?;
        let (s15, _) = measure(Some(Duration::from_secs(15)))?;
        let (s1, r1) = measure(Some(Duration::from_secs(1)))?;
        println!(
            "scrape run {}/{runs}: idle cpu {q:.3} %, scraped every 15 s {s15:.3} %, every 1 s {s1:.3} %; rss {rq:.0} → {r1:.0} KiB",
            run + 1
        );
        quiet.push(q);
        every15.push(s15);
        every1.push(s1);
        rss_quiet.push(rq);
        rss_scraped.push(r1);
    }
    let mut t = Table::new(
        format!(
            "Scrape cost — agent on the 8-GPU AMD fixture, {} s windows",
            window.as_secs()
        ),
        "not scraped",
    );
    let added: Vec<f64> = every15
        .iter()
        .zip(&quiet)
        .map(|(s, q)| (s - q).max(0.0))
        .collect();
    t.push(
        Row::new(
            "CPU with /metrics scraped every 15 s (% of one core)",
            Unit::CpuPercent,
            every15,
        )
        .baseline(quiet.clone()),
    );
    t.push(
        Row::new(
            "… added by scraping every 15 s (% of one core)",
            Unit::CpuPercent,
            added,
        )
        .target(Target::AtMost(0.1)),
    );
    t.push(
        Row::new(
            "CPU with /metrics scraped every second (% of one core)",
            Unit::CpuPercent,
            every1,
        )
        .baseline(quiet),
    );
    t.push(
        Row::new(
            "RSS after the windows scraped every second",
            Unit::Kib,
            rss_scraped,
        )
        .baseline(rss_quiet),
    );
    t.push(Row::new(
        "one scrape, request to last byte",
        Unit::Ms,
        times,
    ));
    t.push(Row::new("scrape body, 8 GPUs", Unit::Bytes, sizes));
    t.note(format!(
        "scrape: agent on the 8-GPU AMD fixture with [metrics] listen on loopback, {} s windows: \
         not scraped (baseline), scraped every 15 s, scraped every second",
        window.as_secs()
    ));
    Ok(Some(t))
}
