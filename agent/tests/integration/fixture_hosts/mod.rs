//! Shared by the fixture table tests: where the host fixtures live, their names, and the
//! assessment of one fixture (its tree scanned, the engine taken from its `docker-info.json`),
//! and the GPU intents every fixture is resolved with.

use std::path::{Path, PathBuf};

use odac_agent::cli::inventory::engine_from_info_file;
use odac_host::engine::EngineCapabilities;
use odac_host::inventory::{Assessment, scan};

/// The GPU intents every fixture is resolved with (one per vendor, auto, optional, too many).
pub const INTENTS: &[&str] = &[
    r#"{"runtime":"nvidia","count":1}"#,
    r#"{"runtime":"nvidia","count":2,"optional":true}"#,
    r#"{"runtime":"rocm","count":1}"#,
    r#"{"runtime":"amd","count":"all","optional":true}"#,
    r#"{"runtime":"intel","count":1,"optional":true}"#,
    r#"{"optional":true,"count":1}"#,
    r#"{"runtime":"auto","optional":true}"#,
    r#"{"runtime":"nvidia","count":64}"#,
];

/// `tests/fixtures/hosts/` at the workspace root.
pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/hosts")
}

/// The fixture host `name`'s tree.
pub fn host(name: &str) -> PathBuf {
    fixtures_dir().join(name)
}

/// The host without any GPU, the plain tree most app-manager tests run on.
pub fn no_gpu() -> PathBuf {
    host("no-gpu")
}

/// Every fixture host, sorted.
pub fn fixture_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(fixtures_dir())
        .unwrap()
        .filter_map(|e| {
            let e = e.unwrap();
            e.file_type()
                .unwrap()
                .is_dir()
                .then(|| e.file_name().into_string().unwrap())
        })
        .collect();
    names.sort();
    names
}

/// The fixture's tree scanned, paired with the engine of its `docker-info.json`.
pub fn assess(name: &str) -> Assessment {
    let root = fixtures_dir().join(name);
    let info = root.join("docker-info.json");
    let engine = if info.exists() {
        engine_from_info_file(&info).unwrap()
    } else {
        EngineCapabilities::unreachable("no docker-info.json")
    };
    Assessment::new(scan(&root), engine)
}
