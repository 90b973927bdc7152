//! The policy's verdict on an app in a pass: the spec's own checks ([`policy`]: host access,
//! devices, binds), whether its `update.order` can work on this host (`start_first` needs
//! no host port and its GPUs twice among the host's), then its
//! host binds against the writable binds of every container of the engine and of the other
//! desired apps ([`binds::conflicts`](crate::appmgr::policy::binds::conflicts)), read once per
//! pass.

use odac_protocol::AppSpec;

use crate::appmgr::error::PolicyViolation;
use crate::appmgr::pass::Pass;
use crate::appmgr::policy::binds::{HostUse, conflicts, uses_of};
use crate::appmgr::policy::{self, Admitted};
use odac_host::engine::EngineError;

impl Pass<'_> {
    /// The policy's verdict on `spec` with its binds resolved and its host access checked;
    /// the outer error is an unreachable engine.
    pub(in crate::appmgr) async fn check_policy(
        &mut self,
        spec: &AppSpec,
    ) -> Result<Result<Admitted, PolicyViolation>, EngineError> {
        let admitted = match policy::check(spec, &self.config.policy) {
            Ok(admitted) => admitted,
            Err(v) => return Ok(Err(v)),
        };
        let host_gpus = self.assessment.scan.gpus.len();
        if let Err(e) = spec.check_update_order(Some(host_gpus)) {
            return Ok(Err(PolicyViolation {
                field: e.field,
                message: e.message,
            }));
        }
        let binds = &admitted.binds;
        if binds.is_empty() {
            return Ok(Ok(admitted));
        }
        if self.engine_binds.is_none() {
            let listed = match self.engine.list_all().await {
                Ok(listed) => listed,
                Err(e) if e.is_unavailable() => return Err(e),
                Err(e) => {
                    return Ok(Err(PolicyViolation {
                        field: format!("volumes[{}].source", binds[0].index),
                        message: format!(
                            "cannot tell which host directories containers can write ({e}): host binds refused"
                        ),
                    }));
                }
            };
            self.engine_binds = Some(listed.iter().flat_map(uses_of).collect());
        }
        let mut others: Vec<HostUse> = self.engine_binds.clone().unwrap_or_default();
        others.extend(
            self.desired_binds
                .iter()
                .filter(|(app, _)| *app != spec.name)
                .map(|(_, u)| u.clone()),
        );
        Ok(conflicts(binds, &others).map(|()| admitted))
    }
}
