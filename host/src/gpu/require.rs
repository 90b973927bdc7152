//! An image's NVIDIA requirements, evaluated as the container toolkit's hook does at start,
//! but before any container exists. Every `NVIDIA_REQUIRE_*` variable of the environment must
//! hold (`NVIDIA_DISABLE_REQUIRE` set to a true value turns them all off); a value is
//! space-separated alternatives (OR) of comma-separated conditions (AND), each
//! `key OP version` with key `cuda`, `driver`, `arch` or `brand` and OP one of `>=`, `>`,
//! `<=`, `<`, `=`, `!=`. A condition on a fact this host does not know (the GPU's compute
//! capability, its brand) is left to the hook: pre-flight refuses only what is certain.

use crate::inventory::cuda::{CudaVersion, min_branch_for};

/// What the host's NVIDIA driver offers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostNvidia {
    /// Driver version, e.g. `535.183.01`.
    pub driver: Option<String>,
    /// CUDA driver API version, e.g. 12.2.
    pub cuda: Option<CudaVersion>,
}

/// A requirement the host cannot meet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unmet {
    /// The variable, e.g. `NVIDIA_REQUIRE_CUDA`.
    pub variable: String,
    /// Its value, e.g. `cuda>=12.4`.
    pub requirement: String,
    /// The evidence: what the image wants and what the host has.
    pub detail: String,
    /// The way out, e.g. `install NVIDIA driver ≥ 550 for CUDA 12.4 …`.
    pub fix: String,
}

const PREFIX: &str = "NVIDIA_REQUIRE_";

/// The first `NVIDIA_REQUIRE_*` of `env` (`KEY=VALUE`, later entries win) the host cannot
/// meet; `None` when all hold, are unknown, or are disabled.
pub fn unmet(env: &[String], host: &HostNvidia) -> Option<Unmet> {
    let mut vars: Vec<(&str, &str)> = Vec::new();
    for kv in env {
        let Some((k, v)) = kv.split_once('=') else {
            continue;
        };
        vars.retain(|(key, _)| *key != k);
        vars.push((k, v));
    }
    if vars
        .iter()
        .any(|(k, v)| *k == "NVIDIA_DISABLE_REQUIRE" && is_true(v))
    {
        return None;
    }
    vars.into_iter()
        .filter(|(k, v)| k.starts_with(PREFIX) && !v.trim().is_empty())
        .find(|(_, v)| !holds(v, host))
        .map(|(k, v)| explain(k, v.trim(), host))
}

/// Go's `strconv.ParseBool` true values, as the toolkit reads the switch.
fn is_true(v: &str) -> bool {
    matches!(v.trim(), "1" | "t" | "T" | "true" | "TRUE" | "True")
}

/// Whether one variable's value holds: any alternative whose every condition holds.
fn holds(value: &str, host: &HostNvidia) -> bool {
    value.split_whitespace().any(|alternative| {
        alternative
            .split(',')
            .filter(|c| !c.is_empty())
            .all(|c| condition(c, host) != Some(false))
    })
}

/// One condition: `Some(true|false)` when the host's fact is known, `None` otherwise (and
/// for a condition the toolkit would not parse: the hook says so in its own words).
fn condition(c: &str, host: &HostNvidia) -> Option<bool> {
    let at = c.find(['<', '>', '=', '!'])?;
    let (key, rest) = c.split_at(at);
    let op_len = if rest.get(1..2) == Some("=") { 2 } else { 1 };
    let (op, want) = rest.split_at(op_len);
    let ordering = match key.trim().to_ascii_lowercase().as_str() {
        "cuda" => host.cuda?.cmp(&CudaVersion::parse(want)?),
        "driver" => compare_versions(host.driver.as_deref()?, want)?,
        _ => return None,
    };
    use std::cmp::Ordering::{Equal, Greater, Less};
    Some(match op {
        ">=" => ordering != Less,
        ">" => ordering == Greater,
        "<=" => ordering != Greater,
        "<" => ordering == Less,
        "=" | "==" => ordering == Equal,
        "!=" => ordering != Equal,
        _ => return None,
    })
}

/// Compares dotted numeric versions component by component (missing ones are 0).
fn compare_versions(have: &str, want: &str) -> Option<std::cmp::Ordering> {
    let parse =
        |s: &str| -> Option<Vec<u64>> { s.trim().split('.').map(|p| p.parse().ok()).collect() };
    let (mut a, mut b) = (parse(have)?, parse(want)?);
    let n = a.len().max(b.len());
    a.resize(n, 0);
    b.resize(n, 0);
    Some(a.cmp(&b))
}

/// The unmet requirement in words, with the driver to install for the CUDA it wants.
fn explain(variable: &str, requirement: &str, host: &HostNvidia) -> Unmet {
    let wanted_cuda = requirement
        .split([' ', ','])
        .filter_map(|c| c.trim().strip_prefix("cuda"))
        .filter_map(|r| CudaVersion::parse(r.trim_start_matches(['>', '<', '=', '!'])))
        .min();
    let driver = host.driver.as_deref().unwrap_or("unknown");
    let cuda = host.cuda.map_or_else(
        || "an unknown CUDA version".to_owned(),
        |c| format!("CUDA {c}"),
    );
    let detail = format!(
        "the image requires {requirement} ({variable}); this host's NVIDIA driver {driver} supports {cuda}"
    );
    let fix = match wanted_cuda.map(|c| (c, min_branch_for(c))) {
        Some((c, Some(branch))) => format!(
            "install NVIDIA driver ≥ {branch} for CUDA {c}, or use an image built for CUDA {}",
            host.cuda
                .map_or_else(|| "this driver's".to_owned(), |c| c.to_string())
        ),
        Some((c, None)) => format!("install an NVIDIA driver that supports CUDA {c}"),
        None => format!("install an NVIDIA driver that meets {requirement}, or use another image"),
    };
    Unmet {
        variable: variable.to_owned(),
        requirement: requirement.to_owned(),
        detail,
        fix,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(driver: &str) -> HostNvidia {
        HostNvidia {
            driver: Some(driver.to_owned()),
            cuda: crate::inventory::cuda::cuda_for_driver(driver),
        }
    }

    fn env(kv: &[&str]) -> Vec<String> {
        kv.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn cuda_requirements_follow_the_toolkit() {
        let old = host("535.183.01");
        let new = host("550.54.14");
        let req = env(&["NVIDIA_REQUIRE_CUDA=cuda>=12.4"]);
        let u = unmet(&req, &old).map(|u| (u.detail, u.fix));
        assert_eq!(
            u,
            Some((
                "the image requires cuda>=12.4 (NVIDIA_REQUIRE_CUDA); this host's NVIDIA driver 535.183.01 supports CUDA 12.2".to_owned(),
                "install NVIDIA driver ≥ 550 for CUDA 12.4, or use an image built for CUDA 12.2".to_owned()
            ))
        );
        assert_eq!(unmet(&req, &new), None);
        let mut disabled = req.clone();
        disabled.push("NVIDIA_DISABLE_REQUIRE=1".into());
        assert_eq!(unmet(&disabled, &old), None, "disabled");
        disabled.push("NVIDIA_DISABLE_REQUIRE=false".into());
        assert!(unmet(&disabled, &old).is_some(), "the last value wins");
    }

    #[test]
    fn alternatives_conditions_and_unknown_facts() {
        let old = host("535.183.01");
        // the CUDA images' forward-compatibility clause: OR of AND groups
        let compat = env(&[
            "NVIDIA_REQUIRE_CUDA=cuda>=12.4 brand=tesla,driver>=535,driver<536 brand=unknown,driver>=470,driver<471",
        ]);
        assert_eq!(
            unmet(&compat, &old),
            None,
            "unknown brand is left to the hook"
        );
        let strict = env(&["NVIDIA_REQUIRE_CUDA=cuda>=12.4 driver>=470,driver<471"]);
        assert!(unmet(&strict, &old).is_some());
        let driver = env(&["NVIDIA_REQUIRE_DRIVER=driver>=550.54"]);
        let u = unmet(&driver, &old).unwrap_or_else(|| unreachable!());
        assert_eq!(u.variable, "NVIDIA_REQUIRE_DRIVER");
        assert!(
            u.fix
                .starts_with("install an NVIDIA driver that meets driver>=550.54"),
            "{}",
            u.fix
        );
        assert_eq!(unmet(&env(&["NVIDIA_REQUIRE_ARCH=arch>=8.0"]), &old), None);
        assert_eq!(unmet(&env(&["NVIDIA_REQUIRE_CUDA=cuda=12.2"]), &old), None);
        assert!(unmet(&env(&["NVIDIA_REQUIRE_CUDA=cuda>12.2"]), &old).is_some());
        assert_eq!(unmet(&env(&["NVIDIA_REQUIRE_CUDA=cuda<=12.2"]), &old), None);
        assert_eq!(unmet(&env(&["NVIDIA_REQUIRE_CUDA="]), &old), None);
        assert_eq!(
            unmet(
                &env(&["NVIDIA_REQUIRE_CUDA=cuda>=12.4"]),
                &HostNvidia::default()
            ),
            None,
            "a host whose versions are unknown is left to the hook"
        );
    }
}
