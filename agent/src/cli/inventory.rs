//! `odac-agent inventory`: the flags `inventory` and `doctor` share, where the engine's
//! capabilities come from (the live engine, a captured `GET /info` file, or nothing), the
//! scan and assessment both commands make, and the inventory output (a table or the protocol
//! `Inventory` as JSON). Exit 0, or 2 on usage errors.

use std::path::{Path, PathBuf};

use super::output::{EXIT_OK, EXIT_USAGE, emit, fail};
use odac_host::engine::EngineCapabilities;
use odac_host::inventory::report::render_table;
use odac_host::inventory::{Assessment, scan};

/// Flags shared by `inventory` and `doctor`.
#[derive(Debug, Clone, clap::Args)]
pub struct ScanArgs {
    /// Print JSON (the protocol `Inventory` for `inventory`, the checks for `doctor`).
    #[arg(long)]
    pub json: bool,
    /// Read every host path under this directory instead of `/`.
    #[arg(long, value_name = "DIR", default_value = "/")]
    pub root: PathBuf,
    /// Use a captured `GET /info` JSON body instead of asking the engine.
    #[arg(long, value_name = "FILE", conflicts_with = "no_engine")]
    pub docker_info: Option<PathBuf>,
    /// Do not ask the engine (it is reported unreachable, reason engine_unavailable).
    #[arg(long)]
    pub no_engine: bool,
    /// Docker endpoint (default: DOCKER_HOST or the local socket).
    #[arg(long, value_name = "URL", env = "DOCKER_HOST")]
    pub docker_host: Option<String>,
}

/// Why the command could not run.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("cannot read docker info file {path}: {source}")]
    ReadInfo {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("docker info file {path} is not json: {source}")]
    ParseInfo {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("scan root {0} is not a directory")]
    Root(PathBuf),
    #[error("cannot start the async runtime to ask the engine: {0}")]
    Runtime(std::io::Error),
    #[error("cannot serialise output: {0}")]
    Json(serde_json::Error),
}

/// Capabilities from a captured `GET /info` body. The API version is not in the body.
pub fn engine_from_info_file(path: &Path) -> Result<EngineCapabilities, CliError> {
    let text = std::fs::read_to_string(path).map_err(|source| CliError::ReadInfo {
        path: path.to_path_buf(),
        source,
    })?;
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|source| CliError::ParseInfo {
            path: path.to_path_buf(),
            source,
        })?;
    // A `docker info` capture taken while the daemon was down has no ServerVersion.
    if value.get("ServerVersion").is_none() {
        let why = value
            .get("ServerErrors")
            .and_then(|e| e.as_array())
            .and_then(|e| e.first())
            .and_then(|e| e.as_str())
            .unwrap_or("captured info has no ServerVersion");
        return Ok(EngineCapabilities::unreachable(why));
    }
    Ok(EngineCapabilities::from_info_json(&value, None))
}

/// Where the capabilities come from, and whether a live engine was asked.
fn engine_for(args: &ScanArgs) -> Result<(EngineCapabilities, bool), CliError> {
    if args.no_engine {
        return Ok((
            EngineCapabilities::unreachable("not asked (--no-engine)"),
            false,
        ));
    }
    if let Some(path) = &args.docker_info {
        return Ok((engine_from_info_file(path)?, true));
    }
    Ok((probe_live(args.docker_host.as_deref())?, true))
}

/// Ask the live engine (bounded by the engine module's own timeouts).
fn probe_live(docker_host: Option<&str>) -> Result<EngineCapabilities, CliError> {
    let rt = super::output::local_runtime().map_err(CliError::Runtime)?;
    Ok(rt.block_on(odac_host::engine::probe_capabilities(docker_host)))
}

/// Scan and assess, as both commands do.
pub fn assess(args: &ScanArgs) -> Result<(Assessment, bool), CliError> {
    if !args.root.is_dir() {
        return Err(CliError::Root(args.root.clone()));
    }
    let (engine, asked) = engine_for(args)?;
    Ok((Assessment::new(scan(&args.root), engine), asked))
}

/// Prints `err`; the usage exit code.
pub fn usage_error(err: &CliError) -> i32 {
    fail(err, EXIT_USAGE)
}

/// `odac-agent inventory`: prints the table or the JSON inventory; exit 0, or 2 on usage
/// errors.
pub fn inventory_command(args: &ScanArgs) -> i32 {
    let (a, _) = match assess(args) {
        Ok(x) => x,
        Err(e) => return usage_error(&e),
    };
    if args.json {
        let inventory = crate::telemetry::NvmlFacts::default().fill(a.inventory());
        match serde_json::to_string_pretty(&inventory) {
            Ok(json) => emit(&format!("{json}\n")),
            Err(e) => return usage_error(&CliError::Json(e)),
        }
    } else {
        emit(&render_table(&a));
    }
    EXIT_OK
}
