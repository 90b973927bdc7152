//! An app already running on a GPU that the health watch finds unhealthy keeps running (the
//! agent never stops an app on its own), but its status says so: `restart_required`, and a
//! `last_error` naming the GPU and its error, until it is restarted, when the GPU decision
//! moves it to a healthy GPU, to the CPU (optional intent) or refuses it (`gpu_unhealthy`).

use std::collections::BTreeMap;

use odac_protocol::AppStatus;

use crate::appmgr::labels;
use crate::appmgr::pass::Pass;

impl Pass<'_> {
    /// Marks `status` when the container (by its labels) holds an unhealthy GPU; true then.
    pub(in crate::appmgr) fn on_unhealthy_gpu(
        &self,
        container_labels: &BTreeMap<String, String>,
        status: &mut AppStatus,
    ) -> bool {
        let bad: Vec<String> = labels::gpus(container_labels)
            .into_iter()
            .filter_map(|id| {
                let error = self.assessment.unhealthy.get(&id)?;
                Some(format!("{id} ({error})"))
            })
            .collect();
        if bad.is_empty() {
            return false;
        }
        status.restart_required = true;
        if status.last_error.is_none() {
            status.last_error = Some(format!(
                "gpu_unhealthy: the app's gpu {} is unhealthy; restart the app to move it to a \
                 healthy gpu (or the cpu, if its gpu is optional)",
                bad.join(", ")
            ));
        }
        true
    }
}
