//! The agent's reconnect schedule as its log shows it. Every retry is logged as
//! `reconnecting to the control plane in Xs attempt=N delay_ms=D ceiling_ms=C`; a scenario
//! reads those lines and checks them against the full-jitter envelope of the configuration it
//! gave the agent: `C = min(cap, base · 2^(N-1))` and `0 ≤ D ≤ C` (after a refused token the
//! delay is the long auth delay instead, which [`check_envelope`] does not cover).

/// One logged reconnect decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    /// Retry number since the last reset (1-based).
    pub attempt: u32,
    /// The chosen delay, ms.
    pub delay_ms: u64,
    /// The envelope it was drawn from, ms.
    pub ceiling_ms: u64,
}

/// The log line's marker.
pub const RETRY_LINE: &str = "reconnecting to the control plane in";

fn field(line: &str, key: &str) -> Option<u64> {
    let at = line.find(&format!("{key}="))? + key.len() + 1;
    let digits: String = line[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// Parses one retry line.
pub fn parse_retry(line: &str) -> Option<Retry> {
    if !line.contains(RETRY_LINE) {
        return None;
    }
    Some(Retry {
        attempt: u32::try_from(field(line, "attempt")?).ok()?,
        delay_ms: field(line, "delay_ms")?,
        ceiling_ms: field(line, "ceiling_ms")?,
    })
}

/// Every retry among `lines`.
pub fn retries<S: AsRef<str>>(lines: &[S]) -> Vec<Retry> {
    lines
        .iter()
        .filter_map(|l| parse_retry(l.as_ref()))
        .collect()
}

/// Checks each retry against `min(cap, base · 2^(attempt-1))`; returns the first violation.
pub fn check_envelope(retries: &[Retry], base_ms: u64, cap_ms: u64) -> Result<(), String> {
    for r in retries {
        let shift = r.attempt.saturating_sub(1).min(40);
        let ceiling = base_ms.saturating_mul(1u64 << shift).min(cap_ms);
        if r.ceiling_ms != ceiling {
            return Err(format!("{r:?}: ceiling should be {ceiling} ms"));
        }
        if r.delay_ms > r.ceiling_ms {
            return Err(format!("{r:?}: delay above its ceiling"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn parses_and_checks() {
        let lines = [
            " INFO odac_agent::uplink: reconnecting to the control plane in 0.3s attempt=1 delay_ms=300 ceiling_ms=500",
            " INFO odac_agent::uplink: something else",
            " INFO odac_agent::uplink: reconnecting to the control plane in 0.9s attempt=2 delay_ms=900 ceiling_ms=1000",
            " INFO odac_agent::uplink: reconnecting to the control plane in 4.9s attempt=5 delay_ms=4900 ceiling_ms=5000",
        ];
        let r = retries(&lines);
        assert_eq!(r.len(), 3);
        assert_eq!(
            r[0],
            Retry {
                attempt: 1,
                delay_ms: 300,
                ceiling_ms: 500
            }
        );
        check_envelope(&r, 500, 5000).unwrap();
        assert!(
            check_envelope(&r, 500, 4000).is_err(),
            "attempt 5 is capped at 4000"
        );
        let over = [Retry {
            attempt: 1,
            delay_ms: 600,
            ceiling_ms: 500,
        }];
        assert!(check_envelope(&over, 500, 5000).is_err());
    }
}
