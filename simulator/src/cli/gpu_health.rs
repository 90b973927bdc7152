//! The GPU health part of `odac host show`: the HEALTH cell of each GPU row (`ok`, or
//! `unhealthy` with its Xid), and one line per GPU with a history under the table (since when,
//! the last critical error, how many, and the fix), from the inventory's `gpus[].health`.

use odac_protocol::{GpuHealthState, GpuInfo, Inventory};

use crate::clock::rfc3339;

/// The HEALTH cell: `ok`, `unhealthy` or `unhealthy:xid79`.
pub fn cell(info: Option<&GpuInfo>) -> String {
    let Some(health) = info.and_then(|i| i.health.as_ref()) else {
        return "ok".to_owned();
    };
    match health.state {
        GpuHealthState::Healthy => "ok".to_owned(),
        GpuHealthState::Unhealthy => match health.last_error.as_ref().and_then(|e| e.xid) {
            Some(xid) => format!("unhealthy:xid{xid}"),
            None => "unhealthy".to_owned(),
        },
    }
}

/// One line per GPU with a health history, unhealthy ones first; nothing when there is none.
pub fn lines(inventory: &Inventory) -> String {
    let mut gpus: Vec<&GpuInfo> = inventory
        .gpus
        .iter()
        .filter(|g| g.health.is_some())
        .collect();
    gpus.sort_by_key(|g| g.health.as_ref().map(|h| h.is_healthy()));
    let mut out = String::new();
    for g in gpus {
        let Some(health) = &g.health else { continue };
        let since = health
            .since_ms
            .map(|ms| format!(" since {}", rfc3339(ms)))
            .unwrap_or_default();
        let state = if health.is_healthy() {
            "healthy again"
        } else {
            "unhealthy"
        };
        out.push_str(&format!("gpu {} {state}{since}", g.pci_address));
        if let Some(e) = &health.last_error {
            let times = if e.count == 1 {
                "once".to_owned()
            } else {
                format!("{} times", e.count)
            };
            out.push_str(&format!(
                "; last error {} at {} ({times})",
                e.summary,
                rfc3339(e.at_ms)
            ));
            if let (false, Some(fix)) = (health.is_healthy(), &e.fix) {
                out.push_str(&format!("; fix: {fix}"));
            }
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use odac_protocol::{GpuError, GpuHealth, Vendor};

    use super::*;

    fn gpu(id: &str, health: Option<GpuHealth>) -> GpuInfo {
        GpuInfo {
            vendor: Vendor::Nvidia,
            pci_address: id.into(),
            vendor_id: "0x10de".into(),
            device_id: "0x2204".into(),
            model: "RTX 3090".into(),
            driver: None,
            driver_version: None,
            vram_bytes: None,
            card_node: None,
            render_node: None,
            uuid: None,
            passable: false,
            health,
        }
    }

    fn health(state: GpuHealthState, count: u32) -> GpuHealth {
        GpuHealth {
            state,
            since_ms: Some(1_764_946_800_000),
            last_error: Some(GpuError {
                at_ms: 1_764_946_800_000,
                xid: Some(79),
                summary: "xid 79: GPU has fallen off the bus".into(),
                fix: Some("reboot the host".into()),
                count,
            }),
        }
    }

    #[test]
    fn cells_and_lines_say_what_and_since_when() {
        let bad = gpu("0000:01:00.0", Some(health(GpuHealthState::Unhealthy, 2)));
        let back = gpu("0000:02:00.0", Some(health(GpuHealthState::Healthy, 1)));
        let fine = gpu("0000:03:00.0", None);
        assert_eq!(cell(Some(&bad)), "unhealthy:xid79");
        assert_eq!(cell(Some(&back)), "ok");
        assert_eq!(cell(Some(&fine)), "ok");
        assert_eq!(cell(None), "ok");
        let inv = Inventory {
            gpus: vec![back, fine, bad],
            ..Inventory::default()
        };
        let text = lines(&inv);
        let l: Vec<&str> = text.lines().collect();
        assert_eq!(l.len(), 2, "{text}");
        assert_eq!(
            l[0],
            "gpu 0000:01:00.0 unhealthy since 2025-12-05T15:00:00.000Z; last error xid 79: GPU has \
             fallen off the bus at 2025-12-05T15:00:00.000Z (2 times); fix: reboot the host"
        );
        assert!(
            l[1].starts_with("gpu 0000:02:00.0 healthy again since"),
            "{text}"
        );
        assert!(!l[1].contains("fix"), "{text}");
        assert!(lines(&Inventory::default()).is_empty());
    }
}
