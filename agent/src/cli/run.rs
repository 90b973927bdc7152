//! `odac-agent run`: the subcommand around [`crate::run::run`]: configuration (exit 78 on a
//! bad one), logging, the runtime, SIGTERM/SIGINT, and the shutdown bound. Exit codes: 0 ok,
//! 1 runtime failure, 2 usage (clap), 78 bad configuration. A staged agent version
//! (`crate::update::launch`) takes over right after the configuration is read.

use std::path::PathBuf;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use super::{EXIT_CONFIG, EXIT_FAILURE, EXIT_OK};
use crate::config::Config;
use crate::run::{RunError, run};

/// How long shutdown may take from the signal to the exit.
pub const SHUTDOWN_BOUND: Duration = Duration::from_millis(4_500);

/// Flags of `odac-agent run`.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// Configuration file (default /etc/odac/agent.toml, which may be absent when the
    /// environment carries the configuration).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

/// Most runtime workers the agent starts, whatever the host's size.
const MAX_WORKERS: usize = 2;

/// The runtime's workers: one per core up to [`MAX_WORKERS`]. A worker per core grew the agent
/// with the host (a thread, its stack and, once it allocates, a malloc arena each: 16 workers
/// held 0.4 MiB more than two here) for work that waits on sockets and timers; two keep a slow
/// disk's save (`block_in_place`) or a burst of decoding from holding up the uplink (one
/// thread for every task made a crash's status 1.4–2.9× later in `odac-bench events`).
fn worker_threads() -> usize {
    std::thread::available_parallelism()
        .map_or(1, std::num::NonZeroUsize::get)
        .clamp(1, MAX_WORKERS)
}

/// The body of `odac-agent run`; returns the exit code.
pub fn run_command(args: &RunArgs) -> i32 {
    let config = match Config::load(args.config.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("odac-agent: {e}");
            return EXIT_CONFIG;
        }
    };
    if let Err(e) = crate::logging::init(&config.log_level, config.log_format) {
        eprintln!("odac-agent: {e}");
        return EXIT_CONFIG;
    }
    // before anything else starts: a staged version replaces this process here
    let argv: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    crate::update::launch::launch(
        &config.state_dir,
        crate::AGENT_VERSION,
        &argv,
        &crate::update::launch::RealExec,
    );
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(worker_threads())
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            error!("cannot start the async runtime: {e}");
            return EXIT_FAILURE;
        }
    };
    let code = runtime.block_on(async {
        let shutdown = CancellationToken::new();
        if let Err(e) = spawn_signal_handler(shutdown.clone()) {
            error!("cannot install signal handlers: {e}");
            return EXIT_FAILURE;
        }
        let agent = run(config, shutdown.clone());
        tokio::pin!(agent);
        let result = tokio::select! {
            r = &mut agent => r,
            () = shutdown.cancelled() => {
                match tokio::time::timeout(SHUTDOWN_BOUND, &mut agent).await {
                    Ok(r) => r,
                    Err(_) => {
                        warn!("shutdown did not finish within {}s; exiting", SHUTDOWN_BOUND.as_secs_f32());
                        Ok(())
                    }
                }
            }
        };
        match result {
            Ok(()) => EXIT_OK,
            Err(e) => {
                error!("{e}");
                exit_code(&e)
            }
        }
    });
    runtime.shutdown_timeout(Duration::from_millis(300));
    code
}

fn spawn_signal_handler(shutdown: CancellationToken) -> std::io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::spawn(async move {
        let name = tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        };
        info!("{name} received; shutting down");
        crate::notify::stopping();
        shutdown.cancel();
    });
    Ok(())
}

/// The process exit code for a [`RunError`].
pub fn exit_code(e: &RunError) -> i32 {
    match e {
        RunError::Config(_) => EXIT_CONFIG,
        RunError::Runtime(_) => EXIT_FAILURE,
    }
}
