//! `odac-agent doctor`: one line per check (engine; for each vendor present: device, driver,
//! device nodes, toolkit or CDI, groups), each failing check with its reason code and the
//! exact fix. The exit code says whether present hardware is unusable.

use odac_protocol::Reason;
use odac_protocol::{Compute, NodeRule};
use serde::Serialize;

use super::assess::Assessment;
use super::model::{DeviceNode, Gpu, Vendor};
use super::verdict::gpu_problem;

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckStatus {
    Ok,
    /// Worth knowing, not blocking.
    Warn,
    /// Blocks GPU passthrough for something present.
    Fail,
    /// Context (nothing to check, or a check that was skipped).
    Info,
}

/// One doctor line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    pub name: String,
    pub status: CheckStatus,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<Reason>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

/// The whole report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DoctorReport {
    pub checks: Vec<Check>,
    /// 0: nothing present is broken; 1: present hardware is unusable (or the engine is down).
    pub exit_code: i32,
}

fn check(name: &str, status: CheckStatus, message: impl Into<String>) -> Check {
    Check {
        name: name.to_owned(),
        status,
        message: message.into(),
        reason: None,
        fix: None,
    }
}

fn fail(name: &str, reason: Reason, vendor: Option<Vendor>, message: impl Into<String>) -> Check {
    Check {
        name: name.to_owned(),
        status: CheckStatus::Fail,
        message: message.into(),
        reason: Some(reason),
        fix: reason.fix(vendor).map(str::to_owned),
    }
}

/// Run every check. `engine_asked` is false under `--no-engine` or `--docker-info`'s absence
/// of a live engine: an unreachable engine is then context, not a failure.
pub fn doctor(a: &Assessment, engine_asked: bool) -> DoctorReport {
    let mut checks = Vec::new();
    let e = &a.engine;
    if e.reachable {
        let cdi = if e.cdi_enabled() {
            format!("cdi on ({})", e.cdi_spec_dirs.join(", "))
        } else {
            "cdi off".to_owned()
        };
        checks.push(check(
            "engine",
            CheckStatus::Ok,
            format!(
                "docker {} reachable, api {}, runtimes [{}], {cdi}",
                e.server_version.as_deref().unwrap_or("(unknown version)"),
                e.api_version.as_deref().unwrap_or("(unknown)"),
                e.runtimes.join(", ")
            ),
        ));
    } else if engine_asked {
        checks.push(fail(
            "engine",
            Reason::EngineUnavailable,
            None,
            format!(
                "docker not reachable: {}",
                e.error.as_deref().unwrap_or("no answer")
            ),
        ));
    } else {
        checks.push(check(
            "engine",
            CheckStatus::Info,
            format!(
                "not asked ({})",
                e.error.as_deref().unwrap_or("--no-engine")
            ),
        ));
    }

    let present: Vec<Vendor> = Vendor::ALL
        .into_iter()
        .filter(|v| a.scan.gpus.iter().any(|g| g.vendor == *v))
        .collect();
    if present.is_empty() {
        let others: Vec<String> = a
            .scan
            .other_devices
            .iter()
            .map(|d| format!("{} {}", d.pci_address.as_deref().unwrap_or("?"), d.why))
            .collect();
        let seen = if others.is_empty() {
            "no display or accelerator devices on the pci bus".to_owned()
        } else {
            format!("only {}", others.join("; "))
        };
        checks.push(Check {
            name: "gpu".to_owned(),
            status: CheckStatus::Info,
            message: format!(
                "gpu passthrough unavailable: no nvidia, amd or intel gpu on this host ({seen})"
            ),
            reason: Some(Reason::NoDevice),
            fix: None,
        });
    }
    for vendor in present {
        vendor_checks(a, vendor, &mut checks);
    }
    for p in &a.scan.problems {
        checks.push(check(
            "scan",
            CheckStatus::Warn,
            format!("{}: {}", p.path, p.problem),
        ));
    }

    let engine_broken = engine_asked && !e.reachable;
    let vendor_broken = a
        .verdicts
        .iter()
        .any(|(v, verdict)| !verdict.schedulable && a.scan.gpus.iter().any(|g| g.vendor == *v));
    let exit_code = i32::from(engine_broken || vendor_broken);
    DoctorReport { checks, exit_code }
}

fn vendor_checks(a: &Assessment, vendor: Vendor, checks: &mut Vec<Check>) {
    let gpus: Vec<&Gpu> = a.scan.gpus.iter().filter(|g| g.vendor == vendor).collect();
    let name = |what: &str| format!("{vendor} {what}");

    let list: Vec<String> = gpus
        .iter()
        .map(|g| match &g.model {
            Some(m) => format!("{} {m}", g.id()),
            None => format!(
                "{} {:04x}:{}",
                g.id(),
                g.pci.vendor_id,
                g.pci
                    .device_id
                    .map_or("?".to_owned(), |d| format!("{d:04x}"))
            ),
        })
        .collect();
    checks.push(check(
        &name("device"),
        CheckStatus::Ok,
        format!("{} gpu(s): {}", gpus.len(), list.join(", ")),
    ));

    // driver
    for gpu in &gpus {
        match gpu_problem(&a.scan, gpu) {
            Some(p) if p.reason == Reason::NoDriver => {
                checks.push(fail(
                    &name("driver"),
                    Reason::NoDriver,
                    Some(vendor),
                    p.detail,
                ));
            }
            _ => {
                let version = (vendor.facts().compute == Compute::Cuda)
                    .then(|| a.scan.nvidia.driver_version.clone())
                    .flatten()
                    .map(|v| format!(" {v}"))
                    .unwrap_or_default();
                checks.push(check(
                    &name("driver"),
                    CheckStatus::Ok,
                    format!(
                        "{}: {}{version}",
                        gpu.id(),
                        gpu.driver.as_deref().unwrap_or("?")
                    ),
                ));
            }
        }
    }

    // device nodes
    let mut nodes: Vec<&DeviceNode> = Vec::new();
    match vendor.facts().nodes {
        NodeRule::PerGpuControl => {
            nodes.push(&a.scan.nvidia.control_node);
            nodes.extend(
                gpus.iter()
                    .filter_map(|g| g.nvidia.as_ref()?.device_node.as_ref()),
            );
            let missing: Vec<&str> = nodes
                .iter()
                .filter(|n| !n.present)
                .map(|n| n.path.as_str())
                .collect();
            if missing.is_empty() {
                checks.push(check(
                    &name("device nodes"),
                    CheckStatus::Ok,
                    node_list(&nodes),
                ));
            } else {
                checks.push(check(
                    &name("device nodes"),
                    CheckStatus::Warn,
                    format!("missing {} (created on first use by nvidia-modprobe; run `nvidia-smi` once)", missing.join(", ")),
                ));
            }
        }
        NodeRule::Dri { shared } => {
            if shared.is_some() {
                nodes.push(&a.scan.amd.kfd_node);
            }
            nodes.extend(
                gpus.iter()
                    .flat_map(|g| g.card.iter().chain(g.render.iter())),
            );
            let render_problem = gpus
                .iter()
                .filter_map(|g| gpu_problem(&a.scan, g))
                .find(|p| p.reason == Reason::NoRenderNode);
            if let Some(p) = render_problem {
                checks.push(fail(
                    &name("device nodes"),
                    Reason::NoRenderNode,
                    Some(vendor),
                    p.detail,
                ));
            } else if let Some(node) = shared.filter(|_| !a.scan.amd.kfd_node.present) {
                checks.push(fail(
                    &name("device nodes"),
                    Reason::NoDriver,
                    Some(vendor),
                    format!("{node} is missing"),
                ));
            } else {
                checks.push(check(
                    &name("device nodes"),
                    CheckStatus::Ok,
                    node_list(&nodes),
                ));
            }
        }
    }

    // toolkit or CDI: the verdict itself
    if let Some(verdict) = a.verdicts.get(&vendor) {
        let label = if vendor.facts().runtime.is_some() {
            "toolkit/cdi"
        } else {
            "mechanism"
        };
        match (verdict.schedulable, verdict.reason, verdict.mechanism) {
            (true, _, Some(m)) => checks.push(check(
                &name(label),
                CheckStatus::Ok,
                format!("{m}: {}", verdict.detail),
            )),
            (false, Some(Reason::NoContainerRuntime), _) => checks.push(fail(
                &name(label),
                Reason::NoContainerRuntime,
                Some(vendor),
                verdict.detail.clone(),
            )),
            (false, Some(Reason::EngineUnavailable), _) => checks.push(fail(
                &name(label),
                Reason::EngineUnavailable,
                Some(vendor),
                verdict.detail.clone(),
            )),
            _ => {}
        }
    }

    // groups
    let gids: Vec<String> = nodes
        .iter()
        .filter(|n| n.present)
        .filter_map(|n| {
            Some(format!(
                "{} gid {} mode {:04o}",
                n.path,
                n.gid?,
                n.mode.unwrap_or(0)
            ))
        })
        .collect();
    if !gids.is_empty() {
        checks.push(check(&name("groups"), CheckStatus::Ok, gids.join(", ")));
    }
}

fn node_list(nodes: &[&DeviceNode]) -> String {
    let names: Vec<&str> = nodes.iter().map(|n| n.path.as_str()).collect();
    if names.is_empty() {
        "none needed".to_owned()
    } else {
        format!("present: {}", names.join(", "))
    }
}

/// Render the report as text, one line per check (fixes indented below failures).
pub fn render(report: &DoctorReport) -> String {
    let mut out = String::new();
    for c in &report.checks {
        let tag = match c.status {
            CheckStatus::Ok => "[ ok ]",
            CheckStatus::Warn => "[warn]",
            CheckStatus::Fail => "[FAIL]",
            CheckStatus::Info => "[info]",
        };
        let reason = c.reason.map(|r| format!(" ({r})")).unwrap_or_default();
        out.push_str(&format!("{tag} {}: {}{reason}\n", c.name, c.message));
        if let Some(fix) = &c.fix {
            out.push_str(&format!("       fix: {fix}\n"));
        }
    }
    out
}
