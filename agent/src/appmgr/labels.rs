//! The labels (their names are in [`odac_host::names`]) that mark the agent's own containers and
//! carry what reconcile needs to know about them after an agent restart: the app, the spec hash
//! (everything but the GPU intent and the restart token), the GPU-intent hash, the restart token,
//! the GPUs held (for allocations), the vendor attached, and the fallback taken. Containers without
//! [`INSTANCE`](odac_host::names::INSTANCE) set to this agent's instance are never touched, nor are
//! those whose [`OWNER`](odac_host::names::OWNER) is another agent (see
//! [`ownership`](super::policy::ownership)).

use std::collections::BTreeMap;

use odac_host::names::{
    ACCESS_HASH, APP, GPU_DEVICES, GPU_FALLBACK, GPU_HASH, GPU_VENDOR, INSTANCE, OWNER,
    RESTART_TOKEN, SPEC_HASH,
};
use odac_protocol::{AppSpec, Fallback, GpuRequest, Vendor};
use sha2::{Digest, Sha256};

fn short_hash(bytes: &[u8]) -> String {
    hex::encode(&Sha256::digest(bytes)[..16])
}

/// Hash of everything in the spec except the GPU intent, the host-access fields, the restart
/// token and secrets: a change here recreates the container.
pub fn spec_hash(spec: &AppSpec) -> String {
    // A rotated access token is not a new spec.
    let mut bare = spec.without_secrets();
    bare.gpu = None;
    bare.restart_token = None;
    // like the GPU intent, host access is bound at creation: a change waits for a restart
    bare.shm_size = None;
    bare.caps = Vec::new();
    bare.sysctls = BTreeMap::new();
    bare.devices = Vec::new();
    // how a change is rolled out is not what the container is made of
    bare.update = None;
    // Serialising a plain struct with BTreeMaps cannot fail and is deterministic.
    short_hash(&serde_json::to_vec(&bare).unwrap_or_default())
}

/// Hash of the GPU intent as sent; `none` when there is none.
pub fn gpu_hash(gpu: Option<&GpuRequest>) -> String {
    match gpu {
        None => "none".into(),
        Some(g) => short_hash(&serde_json::to_vec(g).unwrap_or_default()),
    }
}

/// Hash of the host-access fields as sent; `none` when the spec has none (as for a container
/// made before this label existed).
pub fn access_hash(spec: &AppSpec) -> String {
    if spec.shm_size.is_none()
        && spec.caps.is_empty()
        && spec.sysctls.is_empty()
        && spec.devices.is_empty()
    {
        return "none".into();
    }
    let fields = (&spec.shm_size, &spec.caps, &spec.sysctls, &spec.devices);
    short_hash(&serde_json::to_vec(&fields).unwrap_or_default())
}

/// What a container of an app must carry to count as up to date.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Identity {
    /// [`spec_hash`].
    pub spec_hash: String,
    /// [`gpu_hash`].
    pub gpu_hash: String,
    /// [`access_hash`].
    pub access_hash: String,
    /// The restart token, empty without one.
    pub restart_token: String,
}

impl Identity {
    /// The identity the spec asks for.
    pub fn of(spec: &AppSpec) -> Self {
        Self {
            spec_hash: spec_hash(spec),
            gpu_hash: gpu_hash(spec.gpu.as_ref()),
            access_hash: access_hash(spec),
            restart_token: spec.restart_token.clone().unwrap_or_default(),
        }
    }

    /// The identity a container was created with.
    pub fn from_labels(labels: &BTreeMap<String, String>) -> Self {
        let get = |k: &str| labels.get(k).cloned().unwrap_or_default();
        Self {
            spec_hash: get(SPEC_HASH),
            gpu_hash: get(GPU_HASH),
            access_hash: labels
                .get(ACCESS_HASH)
                .cloned()
                .unwrap_or_else(|| "none".into()),
            restart_token: get(RESTART_TOKEN),
        }
    }
}

/// The labels of a new container of `app`.
pub fn container_labels(
    instance: &str,
    app: &str,
    identity: &Identity,
    extra: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut labels = extra.clone();
    labels.insert(INSTANCE.into(), instance.into());
    labels.insert(APP.into(), app.into());
    labels.insert(SPEC_HASH.into(), identity.spec_hash.clone());
    labels.insert(GPU_HASH.into(), identity.gpu_hash.clone());
    labels.insert(ACCESS_HASH.into(), identity.access_hash.clone());
    labels.insert(RESTART_TOKEN.into(), identity.restart_token.clone());
    labels
}

/// Record the owning agent (nothing when `owner` is empty).
pub fn set_owner(labels: &mut BTreeMap<String, String>, owner: &str) {
    if !owner.is_empty() {
        labels.insert(OWNER.into(), owner.into());
    }
}

/// The owner recorded on a container or volume, if any.
pub fn owner(labels: &BTreeMap<String, String>) -> Option<&str> {
    labels.get(OWNER).map(String::as_str)
}

/// Record the GPUs held and their vendor.
pub fn set_gpus(labels: &mut BTreeMap<String, String>, vendor: Vendor, gpu_ids: &[String]) {
    labels.insert(GPU_DEVICES.into(), gpu_ids.join(","));
    labels.insert(GPU_VENDOR.into(), vendor.as_str().into());
}

/// Forget the GPUs (a CPU container).
pub fn clear_gpus(labels: &mut BTreeMap<String, String>) {
    labels.remove(GPU_DEVICES);
    labels.remove(GPU_VENDOR);
}

/// Record the fallback taken.
pub fn set_fallback(labels: &mut BTreeMap<String, String>, fallback: &Fallback) {
    if let Ok(json) = serde_json::to_string(fallback) {
        labels.insert(GPU_FALLBACK.into(), json);
    }
}

/// The GPUs a container holds.
pub fn gpus(labels: &BTreeMap<String, String>) -> Vec<String> {
    labels
        .get(GPU_DEVICES)
        .map(|v| {
            v.split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// The vendor recorded on a container.
pub fn vendor(labels: &BTreeMap<String, String>) -> Option<Vendor> {
    labels.get(GPU_VENDOR).and_then(|v| Vendor::from_wire(v))
}

/// The fallback recorded on a container.
pub fn fallback(labels: &BTreeMap<String, String>) -> Option<Fallback> {
    labels
        .get(GPU_FALLBACK)
        .and_then(|v| serde_json::from_str(v).ok())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use odac_protocol::{FallbackTier, GpuRuntime, Reason};

    #[test]
    fn gpu_and_token_are_outside_the_spec_hash() {
        let mut a = AppSpec::new("web", "busybox");
        let base = Identity::of(&a);
        a.gpu = Some(GpuRequest::new(GpuRuntime::Nvidia).with_count(1));
        a.restart_token = Some("t1".into());
        let changed = Identity::of(&a);
        assert_eq!(base.spec_hash, changed.spec_hash);
        assert_ne!(base.gpu_hash, changed.gpu_hash);
        assert_eq!(base.gpu_hash, "none");
        assert_eq!(changed.restart_token, "t1");
        a.env.insert("A".into(), "1".into());
        assert_ne!(Identity::of(&a).spec_hash, base.spec_hash);
    }

    #[test]
    fn host_access_has_its_own_hash_apart_from_the_spec_hash() {
        let plain = AppSpec::new("web", "busybox");
        assert_eq!(access_hash(&plain), "none");
        let base = access_hash(&plain);
        let changed = |f: &dyn Fn(&mut AppSpec)| {
            let mut a = plain.clone();
            f(&mut a);
            assert_eq!(
                spec_hash(&a),
                spec_hash(&plain),
                "bound at creation, like the GPU"
            );
            access_hash(&a)
        };
        let shm = changed(&|a| a.shm_size = Some(odac_protocol::ShmSize("512m".into())));
        assert_ne!(shm, base);
        assert_ne!(
            changed(&|a| a.shm_size = Some(odac_protocol::ShmSize("1g".into()))),
            shm
        );
        assert_ne!(changed(&|a| a.caps = vec!["NET_ADMIN".into()]), base);
        assert_ne!(changed(&|a| a.devices = vec!["/dev/null".into()]), base);
        assert_ne!(
            changed(&|a| {
                a.sysctls.insert(
                    "net.ipv4.ip_forward".into(),
                    odac_protocol::SysctlValue(true.into()),
                );
            }),
            base
        );
    }

    #[test]
    fn labels_round_trip() {
        let spec = AppSpec::new("web", "busybox");
        let id = Identity::of(&spec);
        let mut labels = container_labels("odac", "web", &id, &BTreeMap::new());
        assert_eq!(Identity::from_labels(&labels), id);
        set_gpus(
            &mut labels,
            Vendor::Amd,
            &["0000:03:00.0".into(), "0000:04:00.0".into()],
        );
        assert_eq!(gpus(&labels).len(), 2);
        assert_eq!(vendor(&labels), Some(Vendor::Amd));
        let fb = Fallback {
            tier: FallbackTier::Engine,
            reason: Reason::EngineRejected,
            detail: Some("could not select device driver \"\"".into()),
        };
        set_fallback(&mut labels, &fb);
        assert_eq!(fallback(&labels), Some(fb));
        clear_gpus(&mut labels);
        assert!(gpus(&labels).is_empty());
    }
}
