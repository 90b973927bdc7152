//! `GET /api/reasons`: the closed set of reason codes (the GPU and image reasons, then the
//! crash reasons of an app's last run) with the operator's explanation and fix (generic and per
//! vendor), from the protocol's own texts, so that the dashboard can say what to do about the
//! reasons it shows without carrying a copy of them.

use std::collections::BTreeMap;

use axum::Json;
use odac_protocol::{CrashReason, Reason, Vendor};
use serde::Serialize;

/// One reason code as the API describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReasonInfo {
    /// The code, e.g. `no_container_runtime` (a [`Reason`]) or `crash_loop` (a
    /// [`CrashReason`]).
    pub code: &'static str,
    /// What it means, one line.
    pub explanation: &'static str,
    /// The fix when the vendor is not known, if there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<&'static str>,
    /// Vendor-specific fixes, where they differ from the generic one.
    pub fix_by_vendor: BTreeMap<Vendor, &'static str>,
}

/// Every reason code: the GPU and image reasons, then the crash reasons.
pub fn all() -> Vec<ReasonInfo> {
    let crashes = CrashReason::ALL.iter().map(|c| ReasonInfo {
        code: c.as_str(),
        explanation: c.explanation(),
        fix: Some(c.fix()),
        fix_by_vendor: BTreeMap::new(),
    });
    Reason::ALL
        .iter()
        .map(|r| ReasonInfo {
            code: r.as_str(),
            explanation: r.explanation(),
            fix: r.fix(None),
            fix_by_vendor: Vendor::ALL
                .iter()
                .filter_map(|v| r.fix(Some(*v)).map(|f| (*v, f)))
                .filter(|(_, f)| Some(*f) != r.fix(None))
                .collect(),
        })
        .chain(crashes)
        .collect()
}

/// `GET /api/reasons`.
pub async fn list_reasons() -> Json<Vec<ReasonInfo>> {
    Json(all())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_with_vendor_fixes_where_they_differ() {
        let all = all();
        assert_eq!(all.len(), Reason::ALL.len() + CrashReason::ALL.len());
        let codes: std::collections::BTreeSet<_> = all.iter().map(|r| r.code).collect();
        assert_eq!(codes.len(), all.len(), "no code twice");
        let ncr = all
            .iter()
            .find(|r| r.code == "no_container_runtime")
            .map(|r| r.fix_by_vendor.get(&Vendor::Nvidia).copied());
        assert!(
            ncr.flatten()
                .is_some_and(|f| f.contains("nvidia-ctk runtime configure")),
            "{ncr:?}"
        );
        let none = all.iter().find(|r| r.code == "no_device");
        assert!(none.is_some_and(|r| r.fix.is_none() && r.fix_by_vendor.is_empty()));
        let looping = all.iter().find(|r| r.code == "crash_loop");
        assert!(looping.is_some_and(|r| r.fix.is_some_and(|f| f.contains("last output"))));
    }
}
