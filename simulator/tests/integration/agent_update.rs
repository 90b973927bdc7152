//! Agent self-update from the control plane's side: `odac-sim release keygen/sign` make a
//! release the agent's own verifier accepts, the simulator serves its artefact, and
//! `odac agent update` rolls it out over fake agents in waves of `--max-parallel`, halting at
//! the first failed host (later waves are never offered it); `odac host list` shows each
//! host's agent version and update state.

use crate::common;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{Sim, stderr, stdout};
use odac_agent::update::manifest::{Policy, verify};
use odac_agent::update::{TrustedKeys, target};
use odac_protocol::{
    Ack, AgentMessage, ControlMessage, ReleaseManifest, SignedRelease, UpdatePhase,
    UpdateStatusReport,
};
use odac_simulator::fake_agent::agent_conn::Incoming;
use odac_simulator::fake_agent::inventories::profile;
use odac_simulator::release::{self, ReleaseInfo};

const ARTEFACT: &[u8] = b"#!/bin/sh\necho odac-agent 0.2.0\n";

/// A releases dir with 0.2.0 signed by a fresh key; returns the public key.
fn releases(dir: &Path) -> String {
    let key = dir.join("release.key");
    let public = release::keygen(&key).unwrap();
    let releases = dir.join("releases");
    std::fs::create_dir_all(&releases).unwrap();
    let file = releases.join("odac-agent-0.2.0");
    std::fs::write(&file, ARTEFACT).unwrap();
    let info = ReleaseInfo {
        version: "0.2.0".to_owned(),
        target: target(),
        url: "https://127.0.0.1:9/releases/odac-agent-0.2.0".to_owned(),
        allow_downgrade: false,
    };
    release::sign_file(
        &key,
        &file,
        &info,
        &releases.join("odac-agent-0.2.0.release.json"),
    )
    .unwrap();
    public
}

/// A fake agent `id` that answers an `update_offer` with `downloading` then `outcome`;
/// returns how many offers it got.
fn fake_host(sim: &Sim, id: &str, outcome: UpdatePhase) -> Arc<AtomicUsize> {
    let mut conn = sim.agent(id, profile(3, id));
    let offers = Arc::new(AtomicUsize::new(0));
    let seen = offers.clone();
    sim.rt.spawn(async move {
        let mut seq = 100;
        while let Ok(m) = conn.recv().await {
            let Incoming::Message(ControlMessage::UpdateOffer(offer)) = m else {
                continue;
            };
            seen.fetch_add(1, Ordering::SeqCst);
            let manifest: ReleaseManifest = serde_json::from_str(&offer.release.manifest).unwrap();
            conn.send(&AgentMessage::Ack(Ack { seq: offer.seq }))
                .await
                .unwrap();
            for (phase, message) in [
                (UpdatePhase::Downloading, None),
                (
                    outcome,
                    (outcome != UpdatePhase::Committed)
                        .then(|| "version 0.2.0 did not commit: exited 1 at start".to_owned()),
                ),
            ] {
                seq += 1;
                let report = UpdateStatusReport {
                    seq,
                    version: manifest.version.clone(),
                    phase,
                    message,
                    ..UpdateStatusReport::default()
                };
                conn.send(&AgentMessage::UpdateStatus(report))
                    .await
                    .unwrap();
            }
        }
    });
    offers
}

#[test]
fn agent_update_waves_halt_at_the_first_failed_host() {
    let dir = tempfile::tempdir().unwrap();
    releases(dir.path());
    let sim = Sim::start_with(|c| c.releases = Some(dir.path().join("releases")));
    let hosts = ["h1", "h2", "h3", "h4", "h5"];
    let offers: Vec<_> = hosts
        .iter()
        .map(|h| {
            let outcome = if *h == "h3" {
                UpdatePhase::UpdateFailed
            } else {
                UpdatePhase::Committed
            };
            fake_host(&sim, h, outcome)
        })
        .collect();
    let out = sim.odac(&[
        "agent",
        "update",
        "--version",
        "0.2.0",
        "--all",
        "--max-parallel",
        "2",
        "--timeout-secs",
        "60",
    ]);
    let (so, se) = (stdout(&out), stderr(&out));
    assert_eq!(out.status.code(), Some(1), "{so}\n{se}");
    assert!(so.contains("wave 1/3: h1, h2"), "{so}");
    assert!(so.contains("host h1: committed 0.2.0"), "{so}");
    assert!(so.contains("wave 2/3: h3, h4"), "{so}");
    assert!(
        !so.contains("wave 3/3"),
        "the third wave never starts: {so}"
    );
    assert!(
        se.contains("rollout of 0.2.0 halted at wave 2: host h3 failed (update_failed: version 0.2.0 did not commit: exited 1 at start); hosts not offered the update: h5"),
        "{se}"
    );
    let got: Vec<usize> = offers.iter().map(|o| o.load(Ordering::SeqCst)).collect();
    assert_eq!(got, [1, 1, 1, 1, 0], "offers per host");
    // the fleet view shows each host's update state
    let list = stdout(&sim.odac(&["host", "list"]));
    assert!(list.contains("AGENT") && list.contains("UPDATE"), "{list}");
    let line = |h: &str| {
        list.lines()
            .find(|l| l.starts_with(&format!("{h} (")))
            .unwrap_or_else(|| panic!("no {h} in {list}"))
            .to_owned()
    };
    assert!(line("h1").contains("0.2.0 committed"), "{list}");
    assert!(
        line("h3").contains("0.2.0 update_failed: version 0.2.0 did not commit"),
        "{list}"
    );
    assert!(line("h5").trim_end().ends_with('-'), "{list}");
}

#[test]
fn agent_update_of_named_hosts_goes_host_by_host_in_the_given_order() {
    let dir = tempfile::tempdir().unwrap();
    releases(dir.path());
    let sim = Sim::start_with(|c| c.releases = Some(dir.path().join("releases")));
    let a = fake_host(&sim, "a", UpdatePhase::Committed);
    let b = fake_host(&sim, "b", UpdatePhase::Committed);
    let out = sim.odac(&["agent", "update", "--version", "0.2.0", "--hosts", "b,a"]);
    let so = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{so}\n{}", stderr(&out));
    assert!(
        so.contains("wave 1/2: b") && so.contains("wave 2/2: a"),
        "{so}"
    );
    assert!(
        so.contains("rollout of 0.2.0 done: 2 host(s) updated"),
        "{so}"
    );
    assert_eq!((a.load(Ordering::SeqCst), b.load(Ordering::SeqCst)), (1, 1));
    // bad input is named
    let out = sim.odac(&["agent", "update", "--version", "0.2.0", "--hosts", "nope"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("--hosts: no host \"nope\""),
        "{}",
        stderr(&out)
    );
    let out = sim.odac(&["agent", "update", "--version", "9.9.9", "--hosts", "a"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("no release of version 9.9.9"),
        "{}",
        stderr(&out)
    );
    let out = sim.odac(&["agent", "update", "--version", "0.2.0"]);
    assert_eq!(out.status.code(), Some(2), "--hosts or --all is required");
}

#[test]
fn agent_update_release_sign_makes_a_release_the_agent_accepts() {
    let dir = tempfile::tempdir().unwrap();
    let sim_bin = env!("CARGO_BIN_EXE_odac-sim");
    let key = dir.path().join("k");
    let out = Command::new(sim_bin)
        .args(["release", "keygen"])
        .arg(&key)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let public = stdout(&out)
        .lines()
        .find_map(|l| l.strip_prefix("public key (for [update] public_keys): "))
        .unwrap()
        .to_owned();
    let file = dir.path().join("odac-agent-0.2.0");
    std::fs::write(&file, ARTEFACT).unwrap();
    let out = Command::new(sim_bin)
        .args(["release", "sign", "--key"])
        .arg(&key)
        .args([
            "--version",
            "0.2.0",
            "--url",
            "https://127.0.0.1:9/releases/odac-agent-0.2.0",
        ])
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let signed: SignedRelease = serde_json::from_slice(
        &std::fs::read(dir.path().join("odac-agent-0.2.0.release.json")).unwrap(),
    )
    .unwrap();
    let keys = TrustedKeys::parse(&[public]).unwrap();
    let host = target();
    let policy = Policy {
        keys: &keys,
        running: "0.1.0",
        target: &host,
        allow_downgrade: false,
    };
    let m = verify(&signed, &policy).unwrap();
    assert_eq!(
        (m.version.as_str(), m.size),
        ("0.2.0", ARTEFACT.len() as u64)
    );
    odac_agent::update::stage::check(&m, ARTEFACT).unwrap();
    // a key readable by others is refused, naming the file, not its content
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = Command::new(sim_bin)
        .args(["release", "sign", "--key"])
        .arg(&key)
        .args(["--version", "0.2.0", "--url", "https://x/y"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(stderr(&out).contains("chmod 600"), "{}", stderr(&out));
}

#[test]
fn agent_update_artefacts_are_served_by_plain_name_only() {
    let dir = tempfile::tempdir().unwrap();
    releases(dir.path());
    let sim = Sim::start_with(|c| c.releases = Some(dir.path().join("releases")));
    let (status, ct, body) = sim.get_text("/releases/odac-agent-0.2.0");
    assert_eq!((status, ct.as_str()), (200, "application/octet-stream"));
    assert_eq!(body.as_bytes(), ARTEFACT);
    assert_eq!(sim.get_text("/releases/..%2Frelease.key").0, 404);
    assert_eq!(sim.get_text("/releases/.hidden").0, 404);
}

#[test]
fn agent_update_keys_are_told_to_enrolling_agents() {
    let dir = tempfile::tempdir().unwrap();
    let public = releases(dir.path());
    let sim = Sim::start_with(|c| {
        c.release_keys = vec![public.clone()];
        c.enroll_codes = vec!["enr_rk".to_owned()];
    });
    let (status, v) = sim.call("POST", "/api/enroll", Some(r#"{"code":"enr_rk"}"#));
    assert_eq!(status, 201, "{v}");
    assert_eq!(v["release_keys"], serde_json::json!([public]));
    // without keys configured the answer has none (the field is left out)
    let sim = Sim::start_with(|c| c.enroll_codes = vec!["enr_rk2".to_owned()]);
    let (status, v) = sim.call("POST", "/api/enroll", Some(r#"{"code":"enr_rk2"}"#));
    assert_eq!(status, 201, "{v}");
    assert!(v.get("release_keys").is_none(), "{v}");
}

#[test]
fn agent_update_download_goes_in_ranges_with_progress_through_the_links_tls_trust() {
    use odac_agent::update::fetch::{CHUNK, Fetch, HttpFetch};
    use std::sync::Mutex;
    let dir = tempfile::tempdir().unwrap();
    releases(dir.path());
    let big: Vec<u8> = (0..(2 * CHUNK + 12345)).map(|i| (i % 251) as u8).collect();
    std::fs::write(dir.path().join("releases/big"), &big).unwrap();
    let sim = Sim::start_with(|c| c.releases = Some(dir.path().join("releases")));
    let tls = odac_agent::uplink::tls::client_config(&odac_agent::uplink::TlsSettings {
        ca_file: Some(sim.server().ca_path.clone()),
        client_cert: None,
        client_key: None,
    })
    .unwrap();
    let seen = Mutex::new(Vec::new());
    let progress = |n: u64| seen.lock().unwrap().push(n);
    let url = format!("{}/releases/big", sim.api());
    let got = sim
        .rt
        .block_on(HttpFetch(tls.clone()).fetch(&url, big.len() as u64, &progress))
        .unwrap();
    assert!(got == big, "the ranges put together are the file");
    assert_eq!(
        *seen.lock().unwrap(),
        [CHUNK, 2 * CHUNK, big.len() as u64],
        "progress after each range"
    );
    // a missing artefact is an error naming the range and the status
    let e = sim
        .rt
        .block_on(HttpFetch(tls).fetch(&format!("{}/releases/nope", sim.api()), 10, &progress))
        .unwrap_err();
    assert!(e.contains("status 404"), "{e}");
}
