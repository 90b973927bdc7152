//! The app catalog: ODAC's payload names an app (`"app": "ollama"`) that the control plane
//! resolves to an image with its ports, named volumes, env and default GPU intent. The entries
//! are data (`simulator/catalog.json`, embedded in the binary): each with a pinned tag. With
//! `odac-sim serve --catalog-registry HOST[:PORT]` the images of registry entries are pulled
//! from that mirror instead (`HOST[:PORT]/ollama/ollama:<tag>`), for air-gapped hosts and
//! tests; `local` entries (the `demo` image `odac-sim demo` builds) are never rewritten.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use odac_protocol::{AppSpec, GpuRequest, PortMapping, RestartPolicy, ShmSize, VolumeMount};
use serde::{Deserialize, Serialize};

/// Image tag of the demo app, built locally by `odac-sim demo`.
pub const DEMO_IMAGE: &str = "odac-demo:latest";

/// The catalog's source, embedded.
const CATALOG_JSON: &str = include_str!("../catalog.json");

/// One catalog entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogEntry {
    /// Name used in `"app"`.
    pub name: String,
    /// Image it resolves to, with a pinned tag.
    pub image: String,
    /// What it is.
    pub description: String,
    /// Ports it publishes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<PortMapping>,
    /// Named volumes it keeps its data in.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<VolumeMount>,
    /// Environment.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Default GPU intent, used when the app asks for none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuRequest>,
    /// A locally built image: never pulled, never rewritten to a mirror.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub local: bool,
    /// Command and arguments, used when the app gives none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// Restart policy, used when the app gives none (`never` for one-shot examples).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart: Option<RestartPolicy>,
    /// Size of `/dev/shm`, used when the app gives none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shm_size: Option<ShmSize>,
    /// Host devices the app can use when the host has them (a Coral TPU): never added on
    /// their own, since the host's `[apps.policy] allowed_device_prefixes` must allow them;
    /// the app's `devices` names the ones to map.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub optional_devices: Vec<String>,
}

/// Every catalog entry (an unreadable embedded catalog is empty; a unit test keeps it valid).
pub fn entries() -> &'static [CatalogEntry] {
    static ENTRIES: OnceLock<Vec<CatalogEntry>> = OnceLock::new();
    ENTRIES.get_or_init(|| match serde_json::from_str(CATALOG_JSON) {
        Ok(entries) => entries,
        Err(e) => {
            tracing::error!(error = %e, "the embedded catalog.json does not parse");
            Vec::new()
        }
    })
}

/// The entry called `name`.
pub fn lookup(name: &str) -> Option<&'static CatalogEntry> {
    entries().iter().find(|e| e.name == name)
}

/// Names of every entry, comma-separated (for error messages).
pub fn names() -> String {
    entries()
        .iter()
        .map(|e| e.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Checks a `--catalog-registry` value: `HOST[:PORT]`, host letters, digits, `.` and `-`,
/// port 1..=65535, no scheme or path.
pub fn check_registry(value: &str) -> Result<String, String> {
    let bad = |why: &str| {
        Err(format!(
            "--catalog-registry {value:?}: {why}; expected HOST[:PORT], e.g. 127.0.0.1:5000"
        ))
    };
    let (host, port) = match value.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (value, None),
    };
    if host.is_empty()
        || !host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
    {
        return bad("not a host name or address");
    }
    if let Some(p) = port
        && !p.parse::<u16>().is_ok_and(|p| p > 0)
    {
        return bad("the port must be 1 to 65535");
    }
    Ok(value.to_owned())
}

impl CatalogEntry {
    /// The image to run: on `mirror` (a checked `HOST[:PORT]`) when one is given and the entry
    /// is not local.
    pub fn image_on(&self, mirror: Option<&str>) -> String {
        match mirror {
            Some(m) if !self.local => format!("{m}/{}", self.image),
            _ => self.image.clone(),
        }
    }

    /// Fill what `spec` leaves out from the entry: image (when neither image nor source is
    /// given), ports, volumes, env entries, command, restart policy, `/dev/shm` size and the
    /// GPU intent (into a request of the spec's own: the entry's driver capabilities and
    /// `min_vram_mib` where it gives none). Optional devices are not added.
    pub fn apply(&self, spec: &mut AppSpec, mirror: Option<&str>) {
        if spec.image.is_none() && spec.source.is_none() {
            spec.image = Some(self.image_on(mirror));
        }
        if spec.ports.is_empty() {
            spec.ports.clone_from(&self.ports);
        }
        if spec.volumes.is_empty() {
            spec.volumes.clone_from(&self.volumes);
        }
        for (k, v) in &self.env {
            spec.env.entry(k.clone()).or_insert_with(|| v.clone());
        }
        match (spec.gpu.as_mut(), &self.gpu) {
            (None, _) => spec.gpu.clone_from(&self.gpu),
            // a request of its own (the seed's `--nvidia --optional`) still gets what the app
            // needs of a GPU: its driver capabilities and VRAM, unless it says otherwise
            (Some(own), Some(entry)) => {
                if own.capabilities.is_none() {
                    own.capabilities.clone_from(&entry.capabilities);
                }
                if own.min_vram_mib.is_none() {
                    own.min_vram_mib.clone_from(&entry.min_vram_mib);
                }
            }
            (Some(_), None) => {}
        }
        if spec.command.is_empty() {
            spec.command.clone_from(&self.command);
        }
        if spec.restart.is_none() {
            spec.restart = self.restart;
        }
        if spec.shm_size.is_none() {
            spec.shm_size.clone_from(&self.shm_size);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_catalog_parses_and_validates() {
        let parsed: Vec<CatalogEntry> = serde_json::from_str(CATALOG_JSON).unwrap_or_default();
        assert!(parsed.len() >= 3, "{parsed:?}");
        for e in entries() {
            let mut spec = AppSpec::new("x", "y");
            spec.image = None;
            spec.app = Some(e.name.clone());
            e.apply(&mut spec, None);
            assert_eq!(spec.validate(), Ok(()), "{}", e.name);
            assert!(spec.host_access().is_ok(), "{}", e.name);
            // the optional devices pass the protocol's device rules (never a GPU)
            spec.devices.clone_from(&e.optional_devices);
            assert!(spec.host_access().is_ok(), "{}", e.name);
            assert!(
                e.local || e.image.contains(':'),
                "{} has a pinned tag",
                e.name
            );
        }
        let ollama = lookup("ollama").map(|e| e.image.clone());
        assert_eq!(ollama.as_deref(), Some("ollama/ollama:0.6.2"));
        assert_eq!(lookup("demo").map(|e| e.image.as_str()), Some(DEMO_IMAGE));
        assert!(lookup("nope").is_none());
        assert_eq!(names(), "ollama, jellyfin, demo, frigate, ffmpeg");
    }

    #[test]
    fn ollama_has_its_port_volume_and_an_optional_gpu() {
        let e = lookup("ollama").cloned().unwrap_or_else(|| unreachable!());
        assert_eq!(e.ports.first().map(|p| p.container), Some(11434));
        assert_eq!(
            e.volumes.first().map(|v| v.target.as_str()),
            Some("/root/.ollama")
        );
        assert!(e.gpu.as_ref().is_some_and(|g| g.is_optional()));
        assert_eq!(
            e.image_on(Some("127.0.0.1:5000")),
            "127.0.0.1:5000/ollama/ollama:0.6.2"
        );
        let demo = lookup("demo").cloned().unwrap_or_else(|| unreachable!());
        assert_eq!(demo.image_on(Some("127.0.0.1:5000")), DEMO_IMAGE);
    }

    #[test]
    fn frigate_and_ffmpeg_bring_what_they_need() {
        let mut spec = AppSpec::new("nvr", "x");
        spec.image = None;
        let frigate = lookup("frigate").cloned().unwrap_or_else(|| unreachable!());
        frigate.apply(&mut spec, None);
        let access = spec.host_access().unwrap_or_default();
        assert_eq!(access.shm_size_bytes, Some(512 << 20));
        assert!(
            access.devices.is_empty(),
            "a Coral device is never added on its own"
        );
        assert_eq!(frigate.optional_devices, ["/dev/apex_0", "/dev/bus/usb"]);
        assert!(spec.gpu.as_ref().is_some_and(|g| g.is_optional()));
        assert_eq!(
            spec.image.as_deref(),
            Some("ghcr.io/blakeblackshear/frigate:0.14.1")
        );
        // the app's own shm_size wins
        let mut own = AppSpec::new("nvr", "x");
        own.shm_size = Some(ShmSize("2g".into()));
        frigate.apply(&mut own, None);
        assert_eq!(own.shm_size, Some(ShmSize("2g".into())));

        let ffmpeg = lookup("ffmpeg").cloned().unwrap_or_else(|| unreachable!());
        let mut job = AppSpec::new("transcode", "x");
        job.image = None;
        ffmpeg.apply(&mut job, None);
        assert!(job.command.iter().any(|a| a == "h264_nvenc"), "{job:?}");
        assert_eq!(job.restart, Some(RestartPolicy::Never));
        let gpu = job.gpu.clone().unwrap_or_default();
        assert!(
            !gpu.is_optional(),
            "a required NVIDIA GPU: refused before any start"
        );
        assert_eq!(gpu.effective_vendor(), Some(odac_protocol::Vendor::Nvidia));
        assert!(
            gpu.driver_capabilities()
                .is_some_and(|c| c.to_string().contains("video"))
        );
    }

    #[test]
    fn media_apps_ask_for_video_in_their_gpu_request_even_under_the_payloads_own() {
        let jellyfin = lookup("jellyfin")
            .cloned()
            .unwrap_or_else(|| unreachable!());
        let mut seed = AppSpec::new("jf", "x");
        seed.gpu = serde_json::from_str(r#"{"runtime":"nvidia","optional":true}"#).ok();
        jellyfin.apply(&mut seed, None);
        let gpu = seed.gpu.clone().unwrap_or_default();
        let caps = gpu.driver_capabilities().map(|c| c.to_string());
        assert!(
            caps.as_deref().is_some_and(|c| c.contains("video")),
            "{gpu:?}"
        );
        assert_eq!(gpu.effective_vendor(), Some(odac_protocol::Vendor::Nvidia));
        assert!(gpu.is_optional());
        assert!(
            seed.env.keys().all(|k| k != "NVIDIA_DRIVER_CAPABILITIES"),
            "{seed:?}"
        );
        // a request that names its own capabilities keeps them
        let mut own = AppSpec::new("jf2", "x");
        own.gpu = serde_json::from_str(r#"{"runtime":"nvidia","capabilities":"compute"}"#).ok();
        jellyfin.apply(&mut own, None);
        let caps = own
            .gpu
            .and_then(|g| g.driver_capabilities())
            .map(|c| c.to_string());
        assert_eq!(caps.as_deref(), Some("compute"));
    }

    #[test]
    fn registry_values_are_checked() {
        assert!(check_registry("127.0.0.1:5000").is_ok());
        assert!(check_registry("mirror.example.com").is_ok());
        for bad in ["", "http://h:1", "h/x", "h:0", "h:99999", "h:", "h p"] {
            let e = check_registry(bad).unwrap_err();
            assert!(e.contains("--catalog-registry"), "{e}");
        }
    }
}
