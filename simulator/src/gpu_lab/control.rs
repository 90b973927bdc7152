//! `odac-sim gpu-lab engine stop|start --dir DIR`: stops the running lab's private engine (as
//! a host's dockerd stops: its containers stop with it and stay, exited) or starts it again on
//! the same data, for tests of an agent across an engine restart. Only the lab's own engine is
//! touched, never the machine's dockerd. The command writes its request to
//! `DIR/engine-request`; the running lab looks for it every 100 ms, acts, writes the outcome to
//! `DIR/engine-state` (`stopped`, `running PID`, or `error: …`) and then removes the request;
//! the command waits for that and prints the outcome.

use std::path::Path;
use std::time::{Duration, Instant};

use super::engine::LabEngine;
use super::error::LabError;

/// The pending request.
pub const REQUEST_FILE: &str = "engine-request";
/// The outcome of the last request.
pub const STATE_FILE: &str = "engine-state";
/// How long the command waits for the lab (a stop waits for the containers to stop, a start
/// for the engine to answer).
const WAIT: Duration = Duration::from_secs(90);

/// What to do with the lab's engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EngineAction {
    /// Stop it (SIGTERM), keeping its data.
    Stop,
    /// Start it again and wait until it answers.
    Start,
}

impl EngineAction {
    fn as_str(self) -> &'static str {
        match self {
            EngineAction::Stop => "stop",
            EngineAction::Start => "start",
        }
    }
}

/// The command's side: asks the lab at `dir` and waits for its outcome (one line).
pub async fn request(dir: &Path, action: EngineAction) -> Result<String, LabError> {
    let socket = dir.join("docker.sock");
    if !dir.join("engine.sh").is_file() {
        return Err(LabError::Engine {
            socket,
            message: format!("{} is not a running lab's dir", dir.display()),
        });
    }
    let req = dir.join(REQUEST_FILE);
    let tmp = dir.join(format!("{REQUEST_FILE}.tmp"));
    std::fs::write(&tmp, action.as_str()).map_err(|e| LabError::io("write", &tmp, e))?;
    std::fs::rename(&tmp, &req).map_err(|e| LabError::io("write", &req, e))?;
    let deadline = Instant::now() + WAIT;
    while req.exists() {
        if Instant::now() > deadline {
            let _ = std::fs::remove_file(&req);
            return Err(LabError::Engine {
                socket,
                message: format!(
                    "the lab did not act on `engine {}` within {} s (is it running?)",
                    action.as_str(),
                    WAIT.as_secs()
                ),
            });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let state = dir.join(STATE_FILE);
    let outcome = std::fs::read_to_string(&state).map_err(|e| LabError::io("read", &state, e))?;
    let outcome = outcome.trim();
    match outcome.strip_prefix("error: ") {
        Some(message) => Err(LabError::Engine {
            socket,
            message: message.to_owned(),
        }),
        None => Ok(format!("engine {outcome}")),
    }
}

/// The lab's side: acts on a pending request, if any.
pub async fn serve(dir: &Path, engine: &mut LabEngine) {
    let req = dir.join(REQUEST_FILE);
    let Ok(text) = std::fs::read_to_string(&req) else {
        return;
    };
    let outcome = match text.trim() {
        "stop" => {
            engine.pause().await;
            "stopped".to_owned()
        }
        "start" => match engine.resume().await {
            Ok(()) => format!("running {}", engine.pid()),
            Err(e) => format!("error: {e}"),
        },
        other => format!("error: unknown request {other:?} (stop or start)"),
    };
    let state = dir.join(STATE_FILE);
    if let Err(e) = std::fs::write(&state, format!("{outcome}\n")) {
        eprintln!("gpu-lab: cannot write {}: {e}", state.display());
    }
    let _ = std::fs::remove_file(&req);
    println!("engine {outcome}");
}
