//! The simulator's log subscriber: the `ODAC_SIM_LOG` filter (default `warn`), with the caps
//! on dependencies it shares with the agent ([`odac_host::log_caps::CAPS`]) applied whatever
//! the filter says: at `trace`, tungstenite would print every desired-state frame it carries (each
//! app's `registry_auth` and env values) and the agents' bearer tokens, hyper the REST
//! bodies. No `ODAC_SIM_LOG` level shows a secret.

use tracing::Subscriber;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// The subscriber for `directives` (an `EnvFilter` string) writing to `writer`.
pub fn subscriber<W>(directives: &str, writer: W) -> impl Subscriber + Send + Sync + use<W>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let filter = EnvFilter::try_new(directives).unwrap_or_else(|_| EnvFilter::new("warn"));
    let caps = filter_fn(|meta| odac_host::log_caps::within_caps(meta.target(), meta.level()));
    tracing_subscriber::registry()
        .with(filter)
        .with(caps)
        .with(tracing_subscriber::fmt::layer().with_writer(writer))
}

/// Installs [`subscriber`] for `ODAC_SIM_LOG` on stderr (once; later calls do nothing).
pub fn init() {
    let directives = std::env::var("ODAC_SIM_LOG").unwrap_or_else(|_| "warn".to_owned());
    // also bridges the `log` records of dependencies (tungstenite logs through `log`)
    let _ = subscriber(&directives, std::io::stderr).try_init();
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Capture(Arc<Mutex<Vec<u8>>>);

    impl Write for Capture {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn trace_never_shows_the_frames_a_dependency_carries() {
        let capture = Capture::default();
        let sink = capture.clone();
        let frame =
            r#"{"type":"desired_state","apps":[{"registry_auth":{"password":"s3cret-reg-pw"}}]}"#;
        tracing::subscriber::with_default(subscriber("trace", move || sink.clone()), || {
            tracing::trace!(target: "tungstenite::protocol", "received frame {frame}");
            tracing::trace!(target: "hyper::proto::h1::io", "read body {frame}");
            tracing::debug!(target: "tungstenite::protocol", "connection closed");
            tracing::trace!(target: "odac_simulator::server::ws", "session tick");
        });
        let text = String::from_utf8(capture.0.lock().unwrap().clone()).unwrap();
        assert!(!text.contains("s3cret-reg-pw"), "{text}");
        assert!(text.contains("connection closed"), "{text}");
        assert!(text.contains("session tick"), "{text}");
    }
}
