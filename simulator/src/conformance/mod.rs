//! `odac-sim conformance`: a scripted protocol-level agent that checks a control plane against
//! the rules of PROTOCOL.md the control plane must keep, and prints one line per rule:
//! `PASS <rule>: <evidence>` or `FAIL <rule>: <evidence>`. The checks themselves live in
//! [`rules`] (and the exec-socket rule in `exec.rs`); this module holds the configuration, the outcome type and the report.

mod closing;
mod exec;
mod reports;
pub mod rules;

/// What to check and how to reach it.
#[derive(Debug, Clone)]
pub struct ConformanceConfig {
    /// Agent URL of the control plane, e.g. `wss://127.0.0.1:7443/agent/v1`.
    pub url: String,
    /// Agent bearer token.
    pub token: String,
    /// CA certificate (PEM) the control plane's certificate chains to; empty: the public web
    /// PKI roots.
    pub ca_pem: Vec<u8>,
    /// Agent id the scripted agent uses (a fresh one per run by default).
    pub agent_id: String,
}

impl ConformanceConfig {
    /// A configuration with a fresh agent id.
    pub fn new(url: impl Into<String>, token: impl Into<String>, ca_pem: Vec<u8>) -> Self {
        Self {
            url: url.into(),
            token: token.into(),
            ca_pem,
            agent_id: format!(
                "conformance-{}",
                &uuid::Uuid::new_v4().simple().to_string()[..12]
            ),
        }
    }
}

/// The verdict on one rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Rule name, e.g. `acks_every_report`.
    pub rule: &'static str,
    /// Kept.
    pub pass: bool,
    /// What was seen.
    pub evidence: String,
}

impl Outcome {
    /// The report line.
    pub fn line(&self) -> String {
        format!(
            "{} {}: {}",
            if self.pass { "PASS" } else { "FAIL" },
            self.rule,
            self.evidence
        )
    }
}

/// Every line of the report, then a summary line.
pub fn report(outcomes: &[Outcome]) -> String {
    let mut out: Vec<String> = outcomes.iter().map(Outcome::line).collect();
    let failed = outcomes.iter().filter(|o| !o.pass).count();
    out.push(format!(
        "{} rules, {} passed, {failed} failed",
        outcomes.len(),
        outcomes.len() - failed
    ));
    out.join("\n") + "\n"
}

/// Whether every rule passed.
pub fn all_passed(outcomes: &[Outcome]) -> bool {
    outcomes.iter().all(|o| o.pass)
}

pub use rules::run;
