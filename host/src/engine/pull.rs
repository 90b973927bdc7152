//! Domain types of image pulls: the registry credentials handed to the engine
//! ([`RegistryAuth`], a secret: its `Debug` shows the user and host only), the progress of a
//! pull summed over its layers ([`PullProgress`], [`LayerProgress`]), what an image is
//! ([`ImageInfo`]: id and repo digests) and how a reference splits into repository and tag
//! ([`split_reference`]; the engine pulls every tag of a repository given without one).

use std::collections::BTreeMap;

/// Credentials for one registry host: the protocol's type (never logged: `Debug` redacts the
/// password), so what the control plane sends is what the engine is handed.
pub use odac_protocol::RegistryAuth;

/// Bytes of a pull so far, summed over the layers the engine reported.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PullProgress {
    /// Layers downloaded (or already present).
    pub layers_done: u32,
    /// Layers seen.
    pub layers_total: u32,
    /// Bytes downloaded.
    pub bytes_done: u64,
    /// Compressed size of the layers whose size is known.
    pub bytes_total: u64,
}

/// Per-layer bookkeeping behind [`PullProgress`].
#[derive(Debug, Default)]
pub struct LayerProgress {
    layers: BTreeMap<String, (bool, u64, u64)>,
}

impl LayerProgress {
    /// One line of the engine's pull stream: layer `id`, its `status` word and the
    /// `current`/`total` bytes of a download. Lines without a layer id are ignored.
    pub fn update(
        &mut self,
        id: Option<&str>,
        status: &str,
        current: Option<i64>,
        total: Option<i64>,
    ) {
        let Some(id) = id.filter(|i| !i.is_empty()) else {
            return;
        };
        // The first line of a pull names the tag, not a layer.
        if status.starts_with("Pulling from") {
            return;
        }
        let entry = self.layers.entry(id.to_owned()).or_default();
        let to_u64 = |v: Option<i64>| v.and_then(|v| u64::try_from(v).ok());
        match status {
            "Downloading" => {
                if let Some(t) = to_u64(total) {
                    entry.2 = t;
                }
                if let Some(c) = to_u64(current) {
                    entry.1 = c;
                }
            }
            "Download complete" | "Pull complete" | "Already exists" => {
                entry.0 = true;
                entry.1 = entry.1.max(entry.2);
            }
            _ => {}
        }
    }

    /// The totals so far.
    pub fn progress(&self) -> PullProgress {
        let mut p = PullProgress::default();
        for (done, current, total) in self.layers.values() {
            p.layers_total = p.layers_total.saturating_add(1);
            if *done {
                p.layers_done = p.layers_done.saturating_add(1);
            }
            p.bytes_done = p.bytes_done.saturating_add(*current);
            p.bytes_total = p.bytes_total.saturating_add(*total);
        }
        p
    }
}

/// What the engine knows of a local image.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageInfo {
    /// Image id (`sha256:…`).
    pub id: String,
    /// Repo digests (`repo@sha256:…`); empty for images never pulled or pushed.
    pub repo_digests: Vec<String>,
    /// The image's environment (`KEY=VALUE`, from its config).
    pub env: Vec<String>,
    /// Its size on disk as the engine reports it, bytes (0 when it does not say).
    pub size: u64,
}

/// Split an image reference into repository and tag-or-digest: `a/b:1` → (`a/b`, `1`),
/// `a/b@sha256:…` → (`a/b`, `sha256:…`), `host:5000/a` → (`host:5000/a`, `latest`).
pub fn split_reference(reference: &str) -> (&str, &str) {
    if let Some((repo, digest)) = reference.split_once('@') {
        return (repo, digest);
    }
    let slash = reference.rfind('/').map_or(0, |i| i + 1);
    match reference[slash..].rfind(':') {
        Some(i) => (&reference[..slash + i], &reference[slash + i + 1..]),
        None => (reference, "latest"),
    }
}

/// The registry host an image reference names: the protocol's rule, so that the credentials
/// the control plane sends for a host and the image the engine pulls always agree.
pub use odac_protocol::registry_host;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_split_and_name_their_registry() {
        assert_eq!(split_reference("busybox"), ("busybox", "latest"));
        assert_eq!(split_reference("a/b:1"), ("a/b", "1"));
        assert_eq!(split_reference("h:5000/a"), ("h:5000/a", "latest"));
        assert_eq!(split_reference("h:5000/a:2"), ("h:5000/a", "2"));
        assert_eq!(split_reference("h/a@sha256:ab"), ("h/a", "sha256:ab"));
        assert_eq!(
            registry_host("127.0.0.1:5000/ollama/ollama:1"),
            "127.0.0.1:5000"
        );
        assert_eq!(registry_host("ollama/ollama"), "docker.io");
        assert_eq!(registry_host("localhost/x"), "localhost");
        assert_eq!(registry_host("busybox"), "docker.io");
    }

    #[test]
    fn progress_sums_layers() {
        let mut p = LayerProgress::default();
        p.update(Some("1"), "Pulling from a/b", None, None);
        p.update(Some("l1"), "Pulling fs layer", None, None);
        p.update(Some("l2"), "Already exists", None, None);
        p.update(Some("l1"), "Downloading", Some(10), Some(100));
        assert_eq!(
            p.progress(),
            PullProgress {
                layers_done: 1,
                layers_total: 2,
                bytes_done: 10,
                bytes_total: 100
            }
        );
        p.update(Some("l1"), "Pull complete", None, None);
        assert_eq!(p.progress().bytes_done, 100);
        assert_eq!(p.progress().layers_done, 2);
    }

    #[test]
    fn debug_redacts_the_password() {
        let a = RegistryAuth {
            server: "h".into(),
            username: "u".into(),
            password: "s3cret-pw".into(),
        };
        assert!(!format!("{a:?}").contains("s3cret-pw"));
    }
}
