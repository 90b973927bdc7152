//! What each app uses of each NVIDIA GPU: NVML's processes per GPU ([`NvmlGpuProcesses`])
//! mapped to containers through `/proc/<pid>/cgroup` under the host root (docker's
//! `/docker/<id>` in cgroup v1, `docker-<id>.scope` in v2), and containers to apps through the
//! apps' statuses (`container_id`). Processes of no container, or of a container that is not
//! one of ours, are left out. An app that holds an NVIDIA GPU NVML knows but runs nothing on
//! it gets zeros, so "attached but unused" is visible.

use std::collections::BTreeMap;

use odac_protocol::{AppGpuUsage, AppGpus, AppStatus};

use super::nvml::NvmlGpuProcesses;
use super::sysfs::mib;
use odac_host::inventory::fsread::Reader;

/// A docker container id: 64 lowercase hex digits.
fn is_container_id(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The docker container a process runs in, from its `/proc/<pid>/cgroup` text: the first
/// line whose path has `/docker/<id>` (cgroup v1, or v2 with the cgroupfs driver) or a
/// `docker-<id>.scope` segment (v2 with the systemd driver).
pub fn container_of(cgroup: &str) -> Option<String> {
    cgroup.lines().find_map(|line| {
        let path = line.splitn(3, ':').nth(2)?;
        let mut previous = "";
        for segment in path.split('/') {
            if previous == "docker" && is_container_id(segment) {
                return Some(segment.to_owned());
            }
            if let Some(id) = segment
                .strip_prefix("docker-")
                .and_then(|s| s.strip_suffix(".scope"))
                .filter(|id| is_container_id(id))
            {
                return Some(id.to_owned());
            }
            previous = segment;
        }
        None
    })
}

/// The app whose container has id `container` (statuses may carry the id in full or
/// shortened to at least 12 digits).
fn app_of<'a>(container: &str, statuses: &'a [AppStatus]) -> Option<&'a str> {
    statuses.iter().find_map(|s| {
        let id = s.container_id.as_deref()?;
        (id == container || (id.len() >= 12 && container.starts_with(id))).then_some(&*s.name)
    })
}

#[derive(Default)]
struct Sum {
    bytes: u64,
    util: Option<u32>,
}

/// Per-app usage of every GPU in `gpus`, sorted by app then GPU: the apps' processes found
/// through their cgroups, plus zeros for each GPU an app holds (`held`) with none of its
/// processes on it.
pub(crate) fn app_usage(
    r: &mut Reader,
    gpus: &[NvmlGpuProcesses],
    statuses: &[AppStatus],
    held: &[AppGpus],
) -> Vec<AppGpuUsage> {
    let mut sums: BTreeMap<(String, String), Sum> = BTreeMap::new();
    for gpu in gpus {
        let zero = || Sum {
            bytes: 0,
            util: gpu.util_known.then_some(0),
        };
        for a in held.iter().filter(|a| a.gpus.contains(&gpu.pci_address)) {
            sums.entry((a.app.clone(), gpu.pci_address.clone()))
                .or_insert_with(zero);
        }
        for p in &gpu.processes {
            let path = r.host(&format!("/proc/{}/cgroup", p.pid));
            let Some(app) = r
                .text(&path)
                .and_then(|text| container_of(&text))
                .and_then(|c| app_of(&c, statuses))
            else {
                continue;
            };
            let sum = sums
                .entry((app.to_owned(), gpu.pci_address.clone()))
                .or_insert_with(zero);
            sum.bytes = sum.bytes.saturating_add(p.used_bytes.unwrap_or(0));
            if let Some(util) = &mut sum.util {
                *util = util.saturating_add(u32::from(p.util.unwrap_or(0)));
            }
        }
    }
    sums.into_iter()
        .map(|((app, gpu), sum)| AppGpuUsage {
            app,
            gpu,
            vram_used_mib: mib(sum.bytes),
            util: sum.util.map(|u| u.min(100) as u8),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::nvml::NvmlProcess;

    const OURS: &str = "4b1d3c0ffee0c0de4b1d3c0ffee0c0de4b1d3c0ffee0c0de4b1d3c0ffee0c0de";
    const V2: &str = "a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf";
    const THEIRS: &str = "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff";

    #[test]
    fn cgroup_lines_name_docker_containers() {
        let v1 = format!(
            "12:memory:/docker/{OURS}\n11:devices:/docker/{OURS}\n0::/system.slice/containerd.service\n"
        );
        assert_eq!(container_of(&v1).as_deref(), Some(OURS));
        let v2 = format!("0::/system.slice/docker-{V2}.scope\n");
        assert_eq!(container_of(&v2).as_deref(), Some(V2));
        let nested = format!("0::/kubepods.slice/kubepods-pod1.slice/docker-{V2}.scope\n");
        assert_eq!(container_of(&nested).as_deref(), Some(V2));
        assert_eq!(
            container_of("0::/user.slice/user-1000.slice/session-2.scope\n"),
            None
        );
        assert_eq!(container_of("0::/docker/not-an-id\n"), None);
        assert_eq!(container_of(""), None);
    }

    fn status(name: &str, container: &str) -> AppStatus {
        AppStatus {
            name: name.into(),
            container_id: Some(container.into()),
            ..AppStatus::default()
        }
    }

    fn proc_cgroup(root: &std::path::Path, pid: u32, text: &str) {
        let dir = root.join(format!("proc/{pid}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("cgroup"), text).unwrap();
    }

    fn process(pid: u32, mib: u64, util: Option<u8>) -> NvmlProcess {
        NvmlProcess {
            pid,
            used_bytes: Some(mib << 20),
            util,
        }
    }

    #[test]
    fn processes_map_to_apps_through_their_cgroups() {
        let dir = tempfile::tempdir().unwrap();
        proc_cgroup(dir.path(), 100, &format!("12:memory:/docker/{OURS}\n"));
        proc_cgroup(dir.path(), 101, &format!("0::/docker/{OURS}\n"));
        proc_cgroup(
            dir.path(),
            200,
            &format!("0::/system.slice/docker-{V2}.scope\n"),
        );
        proc_cgroup(
            dir.path(),
            300,
            "0::/user.slice/user-0.slice/session-1.scope\n",
        );
        proc_cgroup(dir.path(), 400, &format!("0::/docker/{THEIRS}\n"));
        // pid 500 has gone: no /proc entry
        let gpus = [
            NvmlGpuProcesses {
                pci_address: "0000:3b:00.0".into(),
                processes: vec![
                    process(100, 1000, Some(30)),
                    process(101, 24, Some(5)),
                    process(300, 512, Some(50)),
                    process(400, 2048, Some(10)),
                    process(500, 64, Some(1)),
                ],
                util_known: true,
            },
            NvmlGpuProcesses {
                pci_address: "0000:5e:00.0".into(),
                processes: vec![process(200, 300, None)],
                util_known: false,
            },
            NvmlGpuProcesses {
                pci_address: "0000:86:00.0".into(),
                processes: vec![],
                util_known: true,
            },
        ];
        let statuses = [
            status("llm", OURS),
            status("vision", &V2[..12]),
            status("idle", "0123456789ab"),
            AppStatus {
                name: "stopped".into(),
                ..AppStatus::default()
            },
        ];
        let held = [
            AppGpus {
                app: "idle".into(),
                gpus: vec!["0000:86:00.0".into(), "0000:99:00.0".into()],
            },
            AppGpus {
                app: "llm".into(),
                gpus: vec!["0000:3b:00.0".into()],
            },
        ];
        let mut r = Reader::new(dir.path());
        let usage = app_usage(&mut r, &gpus, &statuses, &held);
        let usage: Vec<(&str, &str, u64, Option<u8>)> = usage
            .iter()
            .map(|u| (u.app.as_str(), u.gpu.as_str(), u.vram_used_mib, u.util))
            .collect();
        assert_eq!(
            usage,
            [
                // holds it, runs nothing on it: zeros; 0000:99:00.0 is not NVML's, left out
                ("idle", "0000:86:00.0", 0, Some(0)),
                // two processes of one container (v1 and v2 style lines) add up
                ("llm", "0000:3b:00.0", 1024, Some(35)),
                // v2 systemd scope, a shortened id in the status, no per-process utilisation
                ("vision", "0000:5e:00.0", 300, None),
            ]
        );
    }
}
