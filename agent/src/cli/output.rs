//! What every command shares: the process exit codes (defined here only) and the output
//! helpers — text to stdout that a closed pipe cannot turn into a panic, and `odac-agent: ...`
//! error lines on stderr.

use std::io::Write;

/// Exit code: success.
pub const EXIT_OK: i32 = 0;
/// Exit code: runtime failure (an app failed, the engine is down, the instance is held, the
/// control plane refused).
pub const EXIT_FAILURE: i32 = 1;
/// Exit code: usage error (bad flags or arguments, an unreadable or invalid input file; clap
/// uses it too).
pub const EXIT_USAGE: i32 = 2;
/// Exit code: bad configuration (systemd: `RestartPreventExitStatus=78`).
pub const EXIT_CONFIG: i32 = 78;

/// Writes `text` to stdout. A closed stdout (e.g. `| head`) is not worth a panic or an error
/// code.
pub fn emit(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

/// Prints `odac-agent: {message}` on stderr; returns `code`.
pub fn fail(message: impl std::fmt::Display, code: i32) -> i32 {
    eprintln!("odac-agent: {message}");
    code
}

/// A current-thread runtime for a local command's engine calls (every command but `run`).
pub fn local_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}
