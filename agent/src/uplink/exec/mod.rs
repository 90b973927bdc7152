//! Exec sessions (`odac app exec`, `odac app shell`): an `exec_request` on the main link is refused
//! there at once (`exec_refused`: disabled, busy, a user the policy does not allow) or served by
//! its own task, which dials the session's socket with the request's ticket
//! ([`super::Dialer::dial_exec`]), checks that the app's container is this agent's own and running
//! (else `exit` with `not_found` or `forbidden`), starts the command through the engine
//! ([`odac_host::engine::ContainerEngine::exec`]) and pumps its bytes ([`pump`]) under the bounds
//! of `[exec]` ([`config`]). Each session's start and end is audited ([`audit`]).

pub mod audit;
pub mod config;
pub mod pump;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures_util::SinkExt;
use odac_protocol::{ExecEndReason, ExecExit, ExecFrame, ExecRefused, ExecRequest};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use super::EventSink;
use super::connect::Dialer;
use audit::Ending;
pub use config::ExecConfig;
use odac_host::engine::{ContainerEngine, EngineError, ExecSpec};
use odac_host::names::container_name;

/// Serves exec sessions for one agent (across main-link sessions).
pub struct ExecService {
    engine: Arc<dyn ContainerEngine>,
    instance: String,
    agent_id: String,
    config: ExecConfig,
    dialer: Option<Dialer>,
    events: Option<EventSink>,
    open: Arc<AtomicUsize>,
    stop: CancellationToken,
}

/// Holds one of `max_sessions` places while a session lives.
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

fn refused(req: &ExecRequest, reason: ExecEndReason, message: String) -> ExecRefused {
    warn!(session = %req.session_id, principal = %req.principal, app = %req.app, %reason, "exec session refused: {message}");
    ExecRefused {
        session_id: req.session_id.clone(),
        reason,
        message,
    }
}

impl ExecService {
    /// Sessions into `instance`'s containers owned by `agent_id`, on `engine`.
    pub fn new(
        engine: Arc<dyn ContainerEngine>,
        instance: impl Into<String>,
        agent_id: impl Into<String>,
        config: ExecConfig,
    ) -> Self {
        Self {
            engine,
            instance: instance.into(),
            agent_id: agent_id.into(),
            config,
            dialer: None,
            events: None,
            open: Arc::default(),
            stop: CancellationToken::new(),
        }
    }

    /// Dials sessions with `dialer` and audits them to `events` (set by the uplink).
    pub(crate) fn attach(&mut self, dialer: Dialer, events: EventSink) {
        self.dialer = Some(dialer);
        self.events = Some(events);
    }

    /// Ends every open session (`shutdown`).
    pub fn shut_down(&self) {
        self.stop.cancel();
    }

    /// Sessions open now.
    pub fn open_sessions(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }

    /// Takes a request: refused at once, or served by a task of its own.
    pub fn request(self: &Arc<Self>, req: ExecRequest) -> Option<ExecRefused> {
        if !self.config.enabled {
            let message = "exec is disabled on this agent ([exec] enabled = false)".to_owned();
            return Some(refused(&req, ExecEndReason::Disabled, message));
        }
        if let Some(user) = &req.user
            && !self.config.allow_user
        {
            let message = format!(
                "exec as user {user:?} is not allowed on this agent ([exec] allow_user = false)"
            );
            return Some(refused(&req, ExecEndReason::Forbidden, message));
        }
        let max = self.config.max_sessions;
        let taken = self
            .open
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < max).then_some(n + 1)
            });
        if taken.is_err() {
            let message =
                format!("{max} exec sessions are already open on this agent ([exec] max_sessions)");
            return Some(refused(&req, ExecEndReason::Busy, message));
        }
        let slot = Slot(Arc::clone(&self.open));
        let this = Arc::clone(self);
        tokio::spawn(async move {
            this.serve(req).await;
            drop(slot);
        });
        None
    }

    async fn serve(&self, req: ExecRequest) {
        let started = Instant::now();
        audit::started(self.events.as_ref(), &req);
        let end = self.run(&req).await;
        audit::ended(self.events.as_ref(), &req, started.elapsed(), &end);
    }

    async fn run(&self, req: &ExecRequest) -> Ending {
        let fail = |reason, message: String| Ending {
            reason,
            code: None,
            message,
        };
        let Some(dialer) = &self.dialer else {
            return fail(
                ExecEndReason::Error,
                "this agent has no control plane to dial".into(),
            );
        };
        let mut ws = match dialer.dial_exec(&req.ticket).await {
            Ok(ws) => ws,
            Err(e) => {
                return fail(
                    ExecEndReason::Error,
                    format!("cannot dial the session socket: {e}"),
                );
            }
        };
        let container = container_name(&self.instance, &req.app);
        let spec = ExecSpec {
            cmd: req.cmd.clone(),
            tty: req.tty,
            stdin: req.tty || req.stdin,
            user: req.user.clone(),
            size: req.cols.zip(req.rows),
        };
        let started = match self.check_owned(&container, &req.app).await {
            Ok(()) => self.engine.exec(&container, &spec).await.map_err(|e| {
                fail(
                    ExecEndReason::Error,
                    format!("the engine refused the exec: {e}"),
                )
            }),
            Err(end) => Err(end),
        };
        match started {
            Ok(process) => pump::pump(ws, process, &self.config, spec.stdin, &self.stop).await,
            Err(end) => {
                let exit = ExecFrame::Exit(ExecExit {
                    reason: end.reason,
                    code: None,
                    message: end.message.clone(),
                });
                let _ = ws.send(Message::Text(exit.encode().into())).await;
                let _ = ws.close(None).await;
                end
            }
        }
    }

    /// The container must be this instance's, this agent's, the app's, and running.
    async fn check_owned(&self, container: &str, app: &str) -> Result<(), Ending> {
        let end = |reason, message: String| Ending {
            reason,
            code: None,
            message,
        };
        let details = match self.engine.inspect(container).await {
            Ok(d) => d,
            Err(EngineError::NotFound(_)) => {
                return Err(end(
                    ExecEndReason::NotFound,
                    format!("app {app:?} has no container on this host"),
                ));
            }
            Err(e) => {
                return Err(end(
                    ExecEndReason::Error,
                    format!("cannot inspect {container}: {e}"),
                ));
            }
        };
        let label = |k: &str| details.labels.get(k).map(String::as_str);
        let ours = label(odac_host::names::INSTANCE) == Some(self.instance.as_str())
            && label(odac_host::names::APP) == Some(app)
            && label(odac_host::names::OWNER).is_none_or(|o| o == self.agent_id);
        if !ours {
            return Err(end(
                ExecEndReason::Forbidden,
                format!(
                    "container {container} is not this agent's own (instance {}, owner {}): exec refused",
                    self.instance, self.agent_id
                ),
            ));
        }
        if !details.running {
            return Err(end(
                ExecEndReason::NotFound,
                format!(
                    "app {app:?} is not running (its container is {})",
                    details.status.as_str()
                ),
            ));
        }
        Ok(())
    }
}
