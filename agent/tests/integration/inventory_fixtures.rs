//! Table test over every host fixture in `tests/fixtures/hosts/`: scan the tree, take the
//! engine from its `docker-info.json`, and compare the per-vendor verdicts, the GPU list and
//! the other display devices with the hand-checked `expected.json`. Run with
//! `ODAC_BLESS=1` to (re)write an expected.json, then review the diff before committing.

use crate::fixture_hosts;

use fixture_hosts::{assess, fixture_names, fixtures_dir};

use odac_host::inventory::{Assessment, inventory_hash};
use serde_json::{Value, json};

/// The parts of an assessment a fixture pins down.
fn summary(a: &Assessment) -> Value {
    let inv = a.inventory();
    let accelerators: serde_json::Map<String, Value> = a
        .verdicts
        .iter()
        .map(|(v, verdict)| {
            (
                v.to_string(),
                json!({
                    "schedulable": verdict.schedulable,
                    "reason": verdict.reason.map(|r| r.to_string()),
                    "mechanism": verdict.mechanism.map(|m| m.to_string()),
                }),
            )
        })
        .collect();
    let gpus: Vec<Value> = a
        .scan
        .gpus
        .iter()
        .zip(inv.gpus.iter())
        .map(|(g, w)| {
            json!({
                "id": g.id(),
                "vendor": g.vendor.to_string(),
                "index": g.index,
                "device_id": w.device_id,
                "driver": g.driver,
                "model": g.model,
                "card": g.card.as_ref().map(|n| n.path.clone()),
                "render": g.render.as_ref().map(|n| n.path.clone()),
                "passable": w.passable,
                "nvidia_minor": g.nvidia.as_ref().and_then(|n| n.minor),
                "uuid": g.nvidia.as_ref().and_then(|n| n.uuid.clone()),
                "kfd_nodes": g.amd.as_ref().map(|x| x.kfd_nodes.len()),
                "partition_render_nodes": g.amd.as_ref().map(|x| x.partition_render_nodes.len()),
                "vram_bytes": w.vram_bytes,
                "driver_version": w.driver_version,
                "cdi_ids": g.cdi_ids,
            })
        })
        .collect();
    let others: Vec<Value> = a
        .scan
        .other_devices
        .iter()
        .map(|d| {
            json!(format!(
                "{} {:04x}:{}",
                d.pci_address.as_deref().unwrap_or("?"),
                d.pci.vendor_id,
                d.pci
                    .device_id
                    .map_or("?".to_owned(), |x| format!("{x:04x}"))
            ))
        })
        .collect();
    let problems: Vec<Value> = a.scan.problems.iter().map(|p| json!(p.path)).collect();
    json!({
        "host": {
            "hostname": inv.host.hostname,
            "os": inv.host.os,
            "kernel": inv.host.kernel,
            "cpus": inv.host.cpus,
            "memory_bytes": inv.host.memory_bytes,
        },
        "accelerators": accelerators,
        "gpus": gpus,
        "other_devices": others,
        "problem_paths": problems,
        "cdi_device_ids": a.scan.cdi.device_ids(),
    })
}

fn expected(name: &str) -> Option<Value> {
    let path = fixtures_dir().join(name).join("expected.json");
    let text = std::fs::read_to_string(path).ok()?;
    Some(serde_json::from_str(&text).unwrap())
}

#[test]
fn every_fixture_yields_its_expected_verdicts() {
    let names = fixture_names();
    assert!(names.len() >= 12, "only {} fixtures", names.len());
    let bless = std::env::var_os("ODAC_BLESS").is_some();
    let mut failures = Vec::new();
    for name in &names {
        let got = summary(&assess(name));
        if bless {
            let path = fixtures_dir().join(name).join("expected.json");
            std::fs::write(path, serde_json::to_string_pretty(&got).unwrap() + "\n").unwrap();
            continue;
        }
        match expected(name) {
            None => failures.push(format!("{name}: no expected.json")),
            Some(want) if want != got => failures.push(format!(
                "{name}:\n  expected {}\n  got      {}",
                serde_json::to_string(&want).unwrap(),
                serde_json::to_string(&got).unwrap()
            )),
            Some(_) => {}
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn changing_one_expected_value_is_detected() {
    let got = summary(&assess("nvidia-driver-no-toolkit"));
    let mut want = expected("nvidia-driver-no-toolkit").unwrap();
    assert_eq!(want, got);
    want["accelerators"]["nvidia"]["reason"] = json!("no_driver");
    assert_ne!(want, got);
}

#[test]
fn every_fixture_inventory_validates_and_hashes_stably() {
    for name in fixture_names() {
        let a = assess(&name);
        let inv = a.inventory();
        inv.validate().unwrap_or_else(|e| panic!("{name}: {e}"));
        let again = assess(&name).inventory();
        assert_eq!(inventory_hash(&inv), inventory_hash(&again), "{name}");
    }
}

#[test]
fn fixtures_differ_in_hash() {
    let a = inventory_hash(&assess("nvidia-toolkit-runtime").inventory());
    let b = inventory_hash(&assess("nvidia-cdi").inventory());
    assert_ne!(a, b);
}
