//! Polling with deadlines instead of fixed sleeps: [`poll`] retries a probe until it yields a
//! value or the deadline passes, and the timeout error carries the probe's last observation so
//! a failure says what the test saw, not only that it waited.

use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// Default pause between two probes.
pub const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// Calls `probe` until it returns `Ok`, every [`POLL_INTERVAL`], for at most `timeout`.
/// `Err(observation)` means "not yet"; the last observation ends up in the timeout error.
pub fn poll<T>(
    what: &str,
    timeout: Duration,
    probe: impl FnMut() -> std::result::Result<T, String>,
) -> Result<T> {
    poll_every(what, timeout, POLL_INTERVAL, probe)
}

/// [`poll`] with a chosen interval.
pub fn poll_every<T>(
    what: &str,
    timeout: Duration,
    interval: Duration,
    mut probe: impl FnMut() -> std::result::Result<T, String>,
) -> Result<T> {
    let start = Instant::now();
    loop {
        match probe() {
            Ok(v) => return Ok(v),
            Err(last) => {
                let waited = start.elapsed();
                if waited >= timeout {
                    return Err(Error::Timeout {
                        what: what.to_owned(),
                        waited,
                        last,
                    });
                }
                std::thread::sleep(interval.min(timeout.saturating_sub(waited)));
            }
        }
    }
}

/// Checks that `probe` keeps returning `Ok` for the whole of `period` (sampled every
/// [`POLL_INTERVAL`]): for properties that must hold over time, such as "no second container
/// appears". Fails with the first violation.
pub fn holds_for(
    what: &str,
    period: Duration,
    mut probe: impl FnMut() -> std::result::Result<(), String>,
) -> Result<()> {
    let start = Instant::now();
    loop {
        if let Err(seen) = probe() {
            return Err(Error::Other(format!(
                "{what} stopped holding after {:?}: {seen}",
                start.elapsed()
            )));
        }
        if start.elapsed() >= period {
            return Ok(());
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn poll_returns_the_first_value() {
        let mut n = 0;
        let v = poll("n reaches 3", Duration::from_secs(5), || {
            n += 1;
            if n >= 3 { Ok(n) } else { Err(format!("n={n}")) }
        })
        .unwrap();
        assert_eq!(v, 3);
    }

    #[test]
    fn poll_times_out_with_the_last_observation() {
        let start = Instant::now();
        let err = poll_every(
            "never",
            Duration::from_millis(150),
            Duration::from_millis(10),
            || Err::<(), _>("still no".to_owned()),
        )
        .unwrap_err();
        assert!(start.elapsed() >= Duration::from_millis(150));
        let msg = err.to_string();
        assert!(msg.contains("waiting for never"), "{msg}");
        assert!(msg.contains("still no"), "{msg}");
    }

    #[test]
    fn holds_for_reports_the_first_violation() {
        let mut n = 0;
        let err = holds_for("n stays small", Duration::from_secs(5), || {
            n += 1;
            if n < 3 { Ok(()) } else { Err(format!("n={n}")) }
        })
        .unwrap_err();
        assert!(err.to_string().contains("n=3"), "{err}");
        holds_for("always", Duration::from_millis(50), || Ok(())).unwrap();
    }
}
