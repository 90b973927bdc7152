//! Figures a scenario measured (durations, counts, peak RSS). Each is printed as
//! `FIGURE <scenario> <name> = <value>` (shown with `cargo test -p odac-e2e -- --nocapture`)
//! and appended to `target/e2e-figures.txt`, so a CI log or a person can read them after the run.

use std::io::Write;
use std::time::Duration;

/// Records one figure.
pub fn figure(scenario: &str, name: &str, value: impl std::fmt::Display) {
    let line = format!("FIGURE {scenario} {name} = {value}");
    println!("{line}");
    if let Ok(dir) = crate::bins::profile_dir()
        && let Some(target) = dir.parent()
        && let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(target.join("e2e-figures.txt"))
    {
        let _ = writeln!(f, "{line}");
    }
}

/// A duration as seconds with millisecond precision, e.g. `3.042s`.
pub fn secs(d: Duration) -> String {
    format!("{:.3}s", d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_seconds() {
        assert_eq!(secs(Duration::from_millis(3042)), "3.042s");
    }
}
