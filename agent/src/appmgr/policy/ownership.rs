//! Which containers of this agent's instance are its own. Every container and volume the
//! agent creates carries `odac.owner=<agent id>` ([`odac_host::names::OWNER`]); a reconcile pass adopts,
//! restarts or removes only:
//!
//! - containers with its instance label and its own owner label;
//! - containers with its instance label and no owner label (made by an agent version before
//!   owner labels) whose app its desired state names: the upgrade path. Such a container
//!   stays adopted for the life of the process, so deleting the app still removes it.
//!
//! Everything else carrying the instance label — another agent's container, or an unowned
//! one whose app this agent's desired state does not name — is left alone and reported once
//! per container as a **conflict**: a warning in the agent's log and an `event` (level
//! `warn`, message starting `conflict: `) to the control plane. GPUs such a container holds
//! still count as taken.

use std::collections::{BTreeMap, BTreeSet};

use crate::appmgr::labels;
use odac_host::engine::ContainerSummary;

/// A container of this instance that is not this agent's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// Container id.
    pub id: String,
    /// Container name.
    pub name: String,
    /// Its `odac.app` label.
    pub app: String,
    /// Its `odac.owner` label (`None`: a container made before owner labels).
    pub owner: Option<String>,
}

impl Conflict {
    /// One line for the log, the event and `odac-agent doctor`.
    pub fn message(&self, instance: &str) -> String {
        let whose = match &self.owner {
            Some(o) => format!("belongs to agent {o}"),
            None => {
                "has no owner label and this agent's desired state does not name its app".to_owned()
            }
        };
        format!(
            "conflict: container {} (app {}, instance {instance}) {whose}; left alone",
            self.name, self.app
        )
    }
}

/// A listing of the instance, split.
#[derive(Debug, Default)]
pub(in crate::appmgr) struct Split {
    /// This agent's containers (own, or adopted).
    pub(in crate::appmgr) ours: Vec<ContainerSummary>,
    /// Everything else, untouched.
    pub(in crate::appmgr) conflicts: Vec<Conflict>,
    /// GPUs held by the untouched containers.
    pub(in crate::appmgr) foreign_gpus: Vec<String>,
}

/// What the passes remember: adopted unowned containers, conflicts already reported.
#[derive(Debug, Default)]
pub(in crate::appmgr) struct Ownership {
    adopted: BTreeSet<String>,
    reported: BTreeSet<String>,
}

impl Ownership {
    /// Split `containers` (all carrying this instance's label) for agent `me` whose desired
    /// state names `desired`.
    pub(in crate::appmgr) fn split(
        &mut self,
        containers: Vec<ContainerSummary>,
        me: &str,
        desired: &BTreeSet<&str>,
    ) -> Split {
        let mut split = Split::default();
        for c in containers {
            let app = c
                .labels
                .get(odac_host::names::APP)
                .cloned()
                .unwrap_or_default();
            let ours = match labels::owner(&c.labels) {
                Some(o) => o == me,
                None if desired.contains(app.as_str()) => {
                    if self.adopted.insert(c.id.clone()) {
                        tracing::info!(app = %app, container = %c.id, "adopting a container made before owner labels: the desired state names its app");
                    }
                    true
                }
                None => self.adopted.contains(&c.id),
            };
            if ours {
                split.ours.push(c);
            } else {
                split.foreign_gpus.extend(labels::gpus(&c.labels));
                split.conflicts.push(Conflict {
                    owner: labels::owner(&c.labels).map(str::to_owned),
                    id: c.id,
                    name: c.name,
                    app,
                });
            }
        }
        let ids: BTreeSet<&str> = split.conflicts.iter().map(|c| c.id.as_str()).collect();
        self.reported.retain(|id| ids.contains(id.as_str()));
        split
    }

    /// Conflicts not reported yet (each is reported once while it lasts).
    pub(in crate::appmgr) fn unreported<'a>(
        &mut self,
        conflicts: &'a [Conflict],
    ) -> Vec<&'a Conflict> {
        conflicts
            .iter()
            .filter(|c| self.reported.insert(c.id.clone()))
            .collect()
    }
}

/// The conflicts in a listing of an instance for agent `me`, as `odac-agent doctor` sees
/// them: other owners' containers, and unowned ones whose app `desired` does not name.
pub fn conflicts(
    containers: Vec<ContainerSummary>,
    me: &str,
    desired: &BTreeSet<&str>,
) -> Vec<Conflict> {
    Ownership::default()
        .split(containers, me, desired)
        .conflicts
}

/// Group containers by their `odac.app` label (unlabelled ones are dropped).
pub(in crate::appmgr) fn by_app(
    containers: Vec<ContainerSummary>,
) -> BTreeMap<String, Vec<ContainerSummary>> {
    let mut out: BTreeMap<String, Vec<ContainerSummary>> = BTreeMap::new();
    for c in containers {
        if let Some(app) = c.labels.get(odac_host::names::APP).cloned() {
            out.entry(app).or_default().push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(id: &str, app: &str, owner: Option<&str>) -> ContainerSummary {
        let mut labels = BTreeMap::from([
            (odac_host::names::INSTANCE.to_owned(), "odac".to_owned()),
            (odac_host::names::APP.to_owned(), app.to_owned()),
        ]);
        if let Some(o) = owner {
            labels.insert(odac_host::names::OWNER.into(), o.into());
        }
        ContainerSummary {
            id: id.into(),
            name: format!("odac_{app}"),
            labels,
            ..ContainerSummary::default()
        }
    }

    #[test]
    fn own_and_named_unowned_are_ours_others_conflict_once() {
        let mut o = Ownership::default();
        let desired = BTreeSet::from(["web", "db"]);
        let list = vec![
            c("1", "web", Some("me")),
            c("2", "db", None),
            c("3", "web", Some("them")),
            c("4", "cache", None),
            c("5", "gone", Some("me")),
        ];
        let split = o.split(list.clone(), "me", &desired);
        let ours: Vec<&str> = split.ours.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ours, ["1", "2", "5"]);
        let theirs: Vec<&str> = split.conflicts.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(theirs, ["3", "4"]);
        assert_eq!(o.unreported(&split.conflicts).len(), 2);
        assert!(o.unreported(&split.conflicts).is_empty(), "reported once");
        let m = split.conflicts[0].message("odac");
        assert!(
            m.starts_with(
                "conflict: container odac_web (app web, instance odac) belongs to agent them"
            ),
            "{m}"
        );

        // the adopted unowned container stays ours once its app is no longer desired
        let split = o.split(list, "me", &BTreeSet::from(["web"]));
        let ours: Vec<&str> = split.ours.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ours, ["1", "2", "5"]);
        // a fresh process without the app in its desired state does not adopt it
        let fresh = conflicts(vec![c("2", "db", None)], "me", &BTreeSet::new());
        assert_eq!(fresh.len(), 1);
        assert!(fresh[0].message("odac").contains("has no owner label"));
    }
}
