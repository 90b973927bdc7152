//! Golden examples: every file under `protocol/examples/` decodes in its direction, validates,
//! and re-encodes to the same JSON; every message type of both directions has one.

use std::collections::BTreeSet;
use std::path::PathBuf;

use odac_protocol::{
    AGENT_TYPES, AgentMessage, CONTROL_TYPES, ControlMessage, DecodeError, Encode, decode_agent,
    decode_control, encode,
};
use serde_json::Value;

const AGENT: [&str; 12] = [
    "hello",
    "inventory",
    "app_status",
    "event",
    "agent_ack",
    "agent_error",
    "resync",
    "logs_chunk",
    "logs_end",
    "gpu_stats",
    "update_status",
    "exec_refused",
];
const CONTROL: [&str; 10] = [
    "welcome",
    "desired_state",
    "app_upsert",
    "app_delete",
    "control_ack",
    "control_error",
    "logs_request",
    "logs_cancel",
    "update_offer",
    "exec_request",
];

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples")
}

fn read(name: &str) -> (Vec<u8>, Value) {
    let path = dir().join(format!("{name}.json"));
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let value = serde_json::from_slice(&bytes).unwrap();
    (bytes, value)
}

/// Every example file `names` decodes with `decode`, encodes back to the same JSON and decodes
/// again to the same message; returns the message types seen (`type_name` of each).
fn round_trip_examples<M: Encode + PartialEq + std::fmt::Debug>(
    names: &[&str],
    decode: impl Fn(&[u8]) -> Result<M, DecodeError>,
    type_name: impl Fn(&M) -> &'static str,
) -> BTreeSet<&'static str> {
    let mut types = BTreeSet::new();
    for name in names {
        let (bytes, value) = read(name);
        let msg = decode(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        types.insert(type_name(&msg));
        let back: Value = serde_json::from_str(&encode(&msg)).unwrap();
        assert_eq!(back, value, "{name} did not round-trip");
        assert_eq!(decode(encode(&msg).as_bytes()).unwrap(), msg);
    }
    types
}

#[test]
fn agent_examples_round_trip() {
    let types = round_trip_examples(&AGENT, decode_agent, AgentMessage::type_name);
    assert_eq!(types, AGENT_TYPES.into_iter().collect());
}

#[test]
fn control_examples_round_trip() {
    let types = round_trip_examples(&CONTROL, decode_control, ControlMessage::type_name);
    assert_eq!(types, CONTROL_TYPES.into_iter().collect());
}

#[test]
fn every_example_file_is_listed() {
    let listed: BTreeSet<String> = AGENT
        .iter()
        .chain(CONTROL.iter())
        .map(|n| format!("{n}.json"))
        .collect();
    let on_disk: BTreeSet<String> = std::fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect();
    assert_eq!(on_disk, listed);
}

#[test]
fn examples_do_not_decode_in_the_wrong_direction() {
    // `ack` and `error` exist both ways; the others belong to one side only.
    for name in ["hello", "inventory", "app_status", "event"] {
        let (bytes, _) = read(name);
        assert!(decode_control(&bytes).is_err(), "{name}");
    }
    for name in ["welcome", "desired_state", "app_upsert", "app_delete"] {
        let (bytes, _) = read(name);
        assert!(decode_agent(&bytes).is_err(), "{name}");
    }
}
