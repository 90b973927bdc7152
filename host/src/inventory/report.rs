//! The readable `odac-agent inventory` table: host, engine, GPUs, other display devices,
//! per-vendor verdicts and scan problems.

use super::assess::Assessment;
use super::verdict::gpu_passable;

/// Render the assessment as a plain-text table.
pub fn render_table(a: &Assessment) -> String {
    let mut out = String::new();
    let h = &a.scan.host;
    let unknown = "?";
    out.push_str(&format!(
        "host     {}  {}  kernel {}  {}  {} cpus  {}\n",
        h.hostname.as_deref().unwrap_or(unknown),
        h.os.as_deref().unwrap_or(unknown),
        h.kernel.as_deref().unwrap_or(unknown),
        h.arch,
        h.cpus.map_or(unknown.to_owned(), |c| c.to_string()),
        h.memory_bytes.map_or(unknown.to_owned(), gib),
    ));
    let e = &a.engine;
    if e.reachable {
        out.push_str(&format!(
            "engine   docker {} (api {})  runtimes [{}]  default {}  cdi {}\n",
            e.server_version.as_deref().unwrap_or(unknown),
            e.api_version.as_deref().unwrap_or(unknown),
            e.runtimes.join(", "),
            e.default_runtime.as_deref().unwrap_or(unknown),
            if e.cdi_enabled() {
                format!(
                    "on [{}] devices [{}]",
                    e.cdi_spec_dirs.join(", "),
                    e.cdi_devices.join(", ")
                )
            } else {
                "off".to_owned()
            },
        ));
    } else {
        out.push_str(&format!(
            "engine   unreachable: {}\n",
            e.error.as_deref().unwrap_or(unknown)
        ));
    }

    out.push_str("\nGPUS\n");
    if a.scan.gpus.is_empty() {
        out.push_str("  (none)\n");
    } else {
        let mut rows = vec![
            [
                "ADDRESS", "VENDOR", "#", "ID", "MODEL", "DRIVER", "CARD", "RENDER", "PASSABLE",
                "CDI",
            ]
            .map(str::to_owned),
        ];
        for g in &a.scan.gpus {
            let passable = a
                .verdicts
                .get(&g.vendor)
                .is_some_and(|v| gpu_passable(&a.scan, g, v));
            rows.push([
                g.id(),
                g.vendor.to_string(),
                g.index.to_string(),
                format!(
                    "{:04x}:{}",
                    g.pci.vendor_id,
                    g.pci
                        .device_id
                        .map_or("?".to_owned(), |d| format!("{d:04x}"))
                ),
                g.model.clone().unwrap_or_else(|| "-".to_owned()),
                g.driver.clone().unwrap_or_else(|| "-".to_owned()),
                node(g.card.as_ref()),
                node(g.render.as_ref()),
                if passable { "yes" } else { "no" }.to_owned(),
                if g.cdi_ids.is_empty() {
                    "-".to_owned()
                } else {
                    g.cdi_ids.join(",")
                },
            ]);
        }
        out.push_str(&columns(&rows));
    }

    if !a.scan.other_devices.is_empty() {
        out.push_str("\nOTHER DISPLAY DEVICES (not passable)\n");
        let mut rows = vec![["ADDRESS", "ID", "DRIVER", "WHY"].map(str::to_owned)];
        for d in &a.scan.other_devices {
            rows.push([
                d.pci_address.clone().unwrap_or_else(|| "?".to_owned()),
                format!(
                    "{:04x}:{}",
                    d.pci.vendor_id,
                    d.pci
                        .device_id
                        .map_or("?".to_owned(), |x| format!("{x:04x}"))
                ),
                d.driver.clone().unwrap_or_else(|| "-".to_owned()),
                d.why.clone(),
            ]);
        }
        out.push_str(&columns(&rows));
    }

    out.push_str("\nACCELERATORS\n");
    let mut rows = vec![["VENDOR", "SCHEDULABLE", "MECHANISM/REASON", "DETAIL"].map(str::to_owned)];
    for (vendor, v) in &a.verdicts {
        let how = match (v.mechanism, v.reason) {
            (Some(m), _) => m.to_string(),
            (None, Some(r)) => r.to_string(),
            (None, None) => "-".to_owned(),
        };
        rows.push([
            vendor.to_string(),
            if v.schedulable { "yes" } else { "no" }.to_owned(),
            how,
            v.detail.clone(),
        ]);
    }
    out.push_str(&columns(&rows));

    if !a.scan.problems.is_empty() {
        out.push_str("\nSCAN PROBLEMS\n");
        for p in &a.scan.problems {
            out.push_str(&format!("  {}: {}\n", p.path, p.problem));
        }
    }
    out
}

fn node(n: Option<&super::model::DeviceNode>) -> String {
    match n {
        Some(n) if n.present => n.path.clone(),
        Some(n) => format!("{} (missing)", n.path),
        None => "-".to_owned(),
    }
}

fn gib(bytes: u64) -> String {
    // Display only: precision loss on huge values is irrelevant.
    #[allow(clippy::cast_precision_loss)]
    let g = bytes as f64 / (1024.0 * 1024.0 * 1024.0);
    format!("{g:.1} GiB")
}

/// Left-aligned columns, two spaces apart, indented by two.
fn columns<const N: usize>(rows: &[[String; N]]) -> String {
    let mut widths = [0usize; N];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row.iter()) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in rows {
        let mut line = String::from("  ");
        for (i, (w, cell)) in widths.iter().zip(row.iter()).enumerate() {
            if i + 1 == N {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<w$}  "));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}
