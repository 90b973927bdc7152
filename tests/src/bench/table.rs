//! One table per suite: each row is a figure measured over repeated runs, printed with its
//! median and spread (min–max), the median of its baseline measured in the same run, the
//! ratio between them, and the target with a verdict (`met`, or `MISSED` and by how much).
//! Printed as Markdown so the README's "Performance" section can take it as it is.

use std::fmt::Write as _;

use super::stats::{median, spread};

/// The unit of a row's samples (also how they are printed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// KiB, printed as MiB.
    Kib,
    /// Percent of one CPU core.
    CpuPercent,
    /// Milliseconds.
    Ms,
    /// Microseconds.
    Us,
    /// Seconds.
    Secs,
    /// Bytes.
    Bytes,
    /// Bytes per minute.
    BytesPerMin,
    /// Events per second.
    PerSec,
    /// Events per minute.
    PerMin,
    /// A plain count.
    Count,
}

impl Unit {
    /// `v` in this unit, for a table cell.
    pub fn fmt(self, v: f64) -> String {
        match self {
            Unit::Kib => format!("{:.1} MiB", v / 1024.0),
            Unit::CpuPercent => format!("{v:.3} %"),
            Unit::Ms => format!("{v:.1} ms"),
            Unit::Us => format!("{v:.1} µs"),
            Unit::Secs => format!("{v:.2} s"),
            Unit::Bytes if v >= 1024.0 * 1024.0 => format!("{:.1} MiB", v / 1024.0 / 1024.0),
            Unit::Bytes if v >= 1024.0 => format!("{:.1} KiB", v / 1024.0),
            Unit::Bytes => format!("{v:.0} B"),
            Unit::BytesPerMin => format!("{v:.0} B/min"),
            Unit::PerSec => format!("{v:.0} /s"),
            Unit::PerMin => format!("{v:.1} /min"),
            Unit::Count => format!("{v:.1}"),
        }
    }
}

/// What a row must stay under.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Target {
    /// No target: for information.
    None,
    /// The median must be at most this (in the row's unit).
    AtMost(f64),
    /// The ratio to the baseline must be at most this.
    RatioAtMost(f64),
}

/// One figure.
#[derive(Debug, Clone)]
pub struct Row {
    /// What was measured.
    pub metric: String,
    /// The unit of the samples.
    pub unit: Unit,
    /// One sample per run.
    pub samples: Vec<f64>,
    /// The baseline's samples (same unit), when there is one.
    pub baseline: Option<Vec<f64>>,
    /// The target.
    pub target: Target,
}

impl Row {
    /// A row without baseline or target.
    pub fn new(metric: impl Into<String>, unit: Unit, samples: Vec<f64>) -> Row {
        Row {
            metric: metric.into(),
            unit,
            samples,
            baseline: None,
            target: Target::None,
        }
    }

    /// With a baseline.
    pub fn baseline(mut self, samples: Vec<f64>) -> Row {
        self.baseline = Some(samples);
        self
    }

    /// With a target.
    pub fn target(mut self, target: Target) -> Row {
        self.target = target;
        self
    }

    /// Median over baseline median, when there is a (non-zero) baseline.
    pub fn ratio(&self) -> Option<f64> {
        let b = median(self.baseline.as_deref()?);
        (b > 0.0).then(|| median(&self.samples) / b)
    }

    /// `met`, `MISSED (+x %)`, or empty without a target.
    pub fn verdict(&self) -> String {
        let (value, limit) = match self.target {
            Target::None => return String::new(),
            Target::AtMost(limit) => (median(&self.samples), limit),
            Target::RatioAtMost(limit) => match self.ratio() {
                Some(r) => (r, limit),
                None => return "no baseline".to_owned(),
            },
        };
        if value <= limit {
            "met".to_owned()
        } else if limit > 0.0 {
            format!("MISSED (+{:.0} %)", (value / limit - 1.0) * 100.0)
        } else {
            "MISSED".to_owned()
        }
    }

    fn target_cell(&self) -> String {
        match self.target {
            Target::None => String::new(),
            Target::AtMost(v) => format!("≤ {}", self.unit.fmt(v)),
            Target::RatioAtMost(r) => format!("≤ {r}× baseline"),
        }
    }
}

/// A suite's table.
#[derive(Debug, Clone)]
pub struct Table {
    /// The suite and what one run is.
    pub title: String,
    /// What the baseline column is.
    pub baseline_name: String,
    /// The rows.
    pub rows: Vec<Row>,
    /// Lines printed under the table (conditions, caveats).
    pub notes: Vec<String>,
}

impl Table {
    /// An empty table.
    pub fn new(title: impl Into<String>, baseline_name: impl Into<String>) -> Table {
        Table {
            title: title.into(),
            baseline_name: baseline_name.into(),
            rows: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// Adds a row.
    pub fn push(&mut self, row: Row) {
        self.rows.push(row);
    }

    /// Adds a note.
    pub fn note(&mut self, line: impl Into<String>) {
        self.notes.push(line.into());
    }

    /// The Markdown text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "#### {}\n", self.title);
        let _ = writeln!(
            out,
            "| metric | runs | median | spread (min–max) | baseline: {} | ratio | target | verdict |",
            self.baseline_name
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|---|---|");
        for r in &self.rows {
            let (lo, hi) = spread(&r.samples);
            let baseline = r
                .baseline
                .as_deref()
                .map(|b| r.unit.fmt(median(b)))
                .unwrap_or_default();
            let ratio = r.ratio().map(|x| format!("{x:.2}×")).unwrap_or_default();
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} – {} | {} | {} | {} | {} |",
                r.metric,
                r.samples.len(),
                r.unit.fmt(median(&r.samples)),
                r.unit.fmt(lo),
                r.unit.fmt(hi),
                baseline,
                ratio,
                r.target_cell(),
                r.verdict()
            );
        }
        if !self.notes.is_empty() {
            out.push('\n');
            for n in &self.notes {
                let _ = writeln!(out, "- {n}");
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_and_ratios() {
        let r = Row::new("rss", Unit::Kib, vec![3072.0, 2048.0, 4096.0])
            .baseline(vec![1024.0, 2048.0])
            .target(Target::RatioAtMost(1.5));
        assert_eq!(r.ratio(), Some(2.0));
        assert_eq!(r.verdict(), "MISSED (+33 %)");
        let ok = Row::new("cpu", Unit::CpuPercent, vec![0.05]).target(Target::AtMost(0.1));
        assert_eq!(ok.verdict(), "met");
        assert_eq!(Row::new("x", Unit::Secs, vec![1.0]).verdict(), "");
        let mut t = Table::new("footprint", "bare client");
        t.push(r);
        t.note("two cores");
        let text = t.render();
        assert!(text.contains("| rss | 3 | 3.0 MiB | 2.0 MiB – 4.0 MiB | 1.5 MiB | 2.00× | ≤ 1.5× baseline | MISSED (+33 %) |"), "{text}");
        assert!(text.ends_with("- two cores\n"), "{text}");
    }
}
