//! Whether `update.order = start_first` can work for an app ([`AppSpec::check_update_order`]):
//! the old and the new container run side by side during the hand-over, so neither may bind a
//! host port, and the GPUs asked for must be there twice.

use crate::app::AppSpec;
use crate::gpu::GpuCount;
use crate::rollout::UpdateOrder;
use crate::validation::ValidationError;

impl AppSpec {
    /// Checks that `update.order = start_first` can work for this app: the old and the new
    /// container run side by side for a while, so neither may bind a host port, and the GPUs
    /// asked for must be there twice among the `host_gpus` (`None`: the host is not known
    /// yet, the GPU part is checked once it is). Not part of [`validate`](Self::validate):
    /// the agent fails that app alone; a control plane calls both.
    pub fn check_update_order(&self, host_gpus: Option<usize>) -> Result<(), ValidationError> {
        if self.update.unwrap_or_default().order() != UpdateOrder::StartFirst {
            return Ok(());
        }
        let refuse = |m: String| Err(ValidationError::new("update.order", m));
        if let Some(port) = self.ports.iter().find_map(|p| p.host) {
            return refuse(format!(
                "start_first cannot be used with host port {port}: the old and new container would both bind it (use stop_first, or drop the host port)"
            ));
        }
        if let (Some(gpu), Some(host)) = (&self.gpu, host_gpus) {
            let twice = match gpu.count() {
                GpuCount::N(n) => usize::try_from(n).unwrap_or(usize::MAX).saturating_mul(2),
                GpuCount::All => usize::MAX,
            };
            if twice > host {
                return refuse(format!(
                    "start_first cannot be used with gpu.count {}: the host has {host} gpus and the old and new container would each hold theirs (use stop_first)",
                    gpu.count()
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_first_is_refused_with_a_host_port_or_gpus_the_host_lacks_twice() {
        let mut spec: AppSpec = serde_json::from_str(
            r#"{"name":"web","image":"busybox","update":{"order":"start_first"},
                "ports":[{"container":80},{"container":8080,"host":8080}]}"#,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let err = spec.check_update_order(None).map_err(|e| e.to_string());
        assert_eq!(
            err.unwrap_err(),
            "update.order: start_first cannot be used with host port 8080: the old and new container would both bind it (use stop_first, or drop the host port)"
        );
        spec.ports.pop();
        assert!(spec.check_update_order(None).is_ok());
        spec.gpu = Some(crate::GpuRequest::default().with_count(2));
        assert!(spec.check_update_order(None).is_ok(), "host unknown");
        assert!(spec.check_update_order(Some(4)).is_ok());
        let err = spec.check_update_order(Some(3)).map_err(|e| e.to_string());
        assert!(
            err.unwrap_err()
                .contains("gpu.count 2: the host has 3 gpus")
        );
        spec.update = None;
        assert!(spec.check_update_order(Some(0)).is_ok(), "stop_first");
    }
}
