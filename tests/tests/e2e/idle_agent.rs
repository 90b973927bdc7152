//! An idle agent is idle: the real `odac-agent` connected to `odac-sim`, with no apps, after
//! its first reconcile pass, uses a small share of one core over a ten-second window. An agent
//! whose update task answered a closed input at once for ever burnt ~46 % of a core here; the
//! bound is generous (10 %) for this shared 2-core machine, and the real figure (≤ 0.05 % on a
//! quiet machine) is `odac-bench footprint`'s. And its runtime does not grow with the host:
//! told by tokio's own variable to start a worker per core of a 16-core host, it starts two.

use std::time::{Duration, Instant};

use odac_e2e::stack::Stack;

const SCENARIO: &str = "idle-agent";

/// `utime + stime` of `pid` in clock ticks (100 a second on Linux x86-64 and arm64).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

#[test]
fn an_idle_agent_uses_almost_no_cpu() {
    let stack = Stack::builder(SCENARIO).start().unwrap();
    stack.wait_connected(Duration::from_secs(30)).unwrap();
    // the first inventory and reconcile pass are done, and their senders gone
    std::thread::sleep(Duration::from_secs(3));
    let pid = stack.agent().unwrap().process().unwrap().pid();
    let (t0, started) = (cpu_ticks(pid), Instant::now());
    std::thread::sleep(Duration::from_secs(10));
    let used = (cpu_ticks(pid) - t0) as f64 / 100.0;
    let percent = used / started.elapsed().as_secs_f64() * 100.0;
    println!("idle agent: {percent:.2} % of one core over 10 s");
    assert!(
        percent < 10.0,
        "an idle agent used {percent:.1} % of one core over 10 s"
    );
}

/// `Threads:` of `pid`.
fn threads(pid: u32) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn the_agent_runtime_does_not_grow_with_the_host() {
    // what tokio's default would start on a 16-core host (the variable is tokio's own)
    let stack = Stack::builder("agent-workers")
        .agent_options(|o| o.env.push(("TOKIO_WORKER_THREADS".into(), "16".into())))
        .start()
        .unwrap();
    stack.wait_connected(Duration::from_secs(30)).unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let pid = stack.agent().unwrap().process().unwrap().pid();
    let n = threads(pid);
    println!("agent threads with TOKIO_WORKER_THREADS=16: {n}");
    // main, two workers, the kernel-log follower and a few blocking-pool threads; a worker per
    // core would be 16 more
    assert!(
        n < 12,
        "the agent runs {n} threads: its runtime grew with the host"
    );
}
