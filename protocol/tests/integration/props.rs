//! Property tests: decoding never panics, whatever the input — arbitrary bytes, arbitrary JSON
//! frames built from the protocol's own keys and values, and golden examples with a random
//! spot replaced — 10,000 cases each. A frame that does decode must re-encode to itself. Plus
//! a stable smoke run of the decoders' fuzz target (`protocol/fuzz`, cargo-fuzz on nightly):
//! 100,000 byte-level mutations of the golden examples (flips, inserts, deletions, duplicated
//! slices that repeat keys, truncations) from a fixed seed.

use std::path::PathBuf;

use odac_protocol::*;
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{Map, Value};

const NEVER_PANIC_CASES: u32 = 10_000;

const WORDS: &[&str] = &[
    "nvidia",
    "rocm",
    "amd",
    "intel",
    "auto",
    "cuda",
    "all",
    "ALL",
    "some",
    "true",
    "false",
    "yes",
    "on",
    "off",
    "no",
    "0",
    "1",
    "64",
    "65",
    "-1",
    "app",
    "ollama-app",
    "busybox",
    "running",
    "crash_loop",
    "cdi",
    "nvidia_runtime",
    "device_nodes",
    "preflight",
    "engine",
    "no_device",
    "engine_rejected",
    "warn",
    "/srv/data",
    "data",
    "/data",
    "tcp",
    "udp",
    "",
    "Bad_Name",
    "https://github.com/o/r.git",
];

const KEYS: &[&str] = &[
    "type",
    "seq",
    "generation",
    "apps",
    "app",
    "name",
    "image",
    "source",
    "url",
    "branch",
    "rev",
    "dockerfile",
    "env",
    "command",
    "ports",
    "host",
    "container",
    "protocol",
    "volumes",
    "target",
    "read_only",
    "resources",
    "memory_bytes",
    "cpus",
    "restart_token",
    "gpu",
    "runtime",
    "vendor",
    "count",
    "optional",
    "host_id",
    "session_id",
    "heartbeat_secs",
    "code",
    "message",
    "ref_seq",
    "agent_id",
    "hostname",
    "agent_version",
    "protocol_version",
    "last_generation",
    "inventory",
    "status",
    "level",
    "dropped",
    "state",
    "requested",
    "attached",
    "fallback",
    "tier",
    "reason",
    "detail",
    "gpus",
    "accelerators",
    "engine",
    "reachable",
    "nvidia",
    "amd",
    "intel",
    "x",
];

const TYPES: &[&str] = &[
    "hello",
    "inventory",
    "app_status",
    "event",
    "ack",
    "error",
    "welcome",
    "desired_state",
    "app_upsert",
    "app_delete",
    "bogus",
    "",
];

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-100i64..100).prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        select(WORDS).prop_map(|s| Value::String(s.to_owned())),
        "\\PC{0,12}".prop_map(Value::String),
    ]
}

fn json_of_depth(depth: u32) -> impl Strategy<Value = Value> {
    leaf().prop_recursive(depth, 24, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(select(KEYS), inner, 0..6).prop_map(|m| {
                Value::Object(m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
            }),
        ]
    })
}

fn frame() -> impl Strategy<Value = Value> {
    (
        select(TYPES),
        prop::collection::btree_map(select(KEYS), json_of_depth(3), 0..7),
    )
        .prop_map(|(t, m)| {
            let mut obj: Map<String, Value> =
                m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
            obj.insert("type".into(), Value::String(t.to_owned()));
            Value::Object(obj)
        })
}

fn golden() -> &'static [Value] {
    static GOLDEN: std::sync::OnceLock<Vec<Value>> = std::sync::OnceLock::new();
    GOLDEN.get_or_init(load_golden)
}

fn load_golden() -> Vec<Value> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut out: Vec<Value> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| serde_json::from_slice(&std::fs::read(e.unwrap().path()).unwrap()).unwrap())
        .collect();
    out.sort_by_key(|v| v.to_string());
    out
}

fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, c) in m {
                pointers(c, format!("{at}/{k}"), out);
            }
        }
        Value::Array(a) => {
            for (i, c) in a.iter().enumerate() {
                pointers(c, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
    out.push(at);
}

/// Decodes in both directions; a frame that decodes must re-encode to itself.
fn check_decode(bytes: &[u8]) {
    if let Ok(msg) = decode_agent(bytes) {
        assert_eq!(decode_agent(encode(&msg).as_bytes()), Ok(msg));
    }
    if let Ok(msg) = decode_control(bytes) {
        assert_eq!(decode_control(encode(&msg).as_bytes()), Ok(msg));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(NEVER_PANIC_CASES))]

    #[test]
    fn decoding_arbitrary_bytes_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        check_decode(&bytes);
    }

    #[test]
    fn decoding_arbitrary_json_frames_never_panics(v in frame()) {
        check_decode(v.to_string().as_bytes());
    }

    #[test]
    fn decoding_mutated_golden_examples_never_panics(
        pick in any::<prop::sample::Index>(),
        spot in any::<prop::sample::Index>(),
        replacement in json_of_depth(2),
    ) {
        let examples = golden();
        let mut v = pick.get(examples).clone();
        let mut spots = Vec::new();
        pointers(&v, String::new(), &mut spots);
        let spot = spot.get(&spots).clone();
        if let Some(slot) = v.pointer_mut(&spot) {
            *slot = replacement;
        }
        check_decode(v.to_string().as_bytes());
    }
}

/// xorshift64*: a fixed, dependency-free byte source for the smoke run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// One to four byte-level mutations of `bytes`.
fn mutate(rng: &mut Rng, mut bytes: Vec<u8>) -> Vec<u8> {
    for _ in 0..=rng.below(4) {
        let at = rng.below(bytes.len() + 1);
        match rng.below(5) {
            0 if at < bytes.len() => bytes[at] ^= 1 << rng.below(8),
            1 => {
                let alphabet = b"{}[]\",:0aA\x01\xff";
                bytes.insert(at, alphabet[rng.below(alphabet.len())]);
            }
            2 => {
                let end = (at + rng.below(16)).min(bytes.len());
                bytes.drain(at..end);
            }
            3 => {
                // repeat a slice in place: often the same key twice in one object
                let end = (at + rng.below(40)).min(bytes.len());
                let slice = bytes[at..end].to_vec();
                bytes.splice(at..at, slice);
            }
            _ => bytes.truncate(at),
        }
    }
    bytes
}

#[test]
fn smoke_run_of_the_fuzz_target_over_100_000_mutated_frames() {
    let examples: Vec<Vec<u8>> = golden()
        .iter()
        .map(|v| v.to_string().into_bytes())
        .collect();
    let mut rng = Rng(0x0dac_2026_1205_0032);
    let mut decoded = 0u32;
    for _ in 0..100_000 {
        let base = examples[rng.below(examples.len())].clone();
        let bytes = mutate(&mut rng, base);
        check_decode(&bytes);
        decoded += u32::from(decode_agent(&bytes).is_ok() || decode_control(&bytes).is_ok());
    }
    // the mutations are small: some frames still decode, so both paths ran
    assert!(decoded > 100, "{decoded} of 100000 decoded");
}
