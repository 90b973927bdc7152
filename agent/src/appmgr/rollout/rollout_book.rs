//! What the agent must remember to take an app back to its previous version, kept in
//! `rollouts.json` in the state directory (written atomically, [`write_atomic`], after a pass
//! that changed it), so an agent restart in the middle of a rollout does not lose the way
//! back. Per app: the last version that proved itself ([`Good`]: its spec without secrets,
//! the image id it ran, the generation it came with), the rollout under way ([`Pending`]:
//! the new version's identity and generation, when its container was first seen running),
//! and the rollout that failed ([`Failed`]: its identity, not tried again until a newer spec
//! or restart token arrives, and the report the status carries). A file that does not parse
//! is logged and ignored: the next version to prove itself becomes the way back.

use std::collections::BTreeMap;
use std::path::Path;

use odac_protocol::{AppSpec, PullPolicy, RolloutReport};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::appmgr::labels::Identity;
use crate::appmgr::state::store::{off_the_executor, state_json, write_atomic_bytes};

/// File name of the rollout records.
pub const ROLLOUTS_FILE: &str = "rollouts.json";

/// The last version of an app that proved itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Good {
    /// Its spec, without secrets.
    pub spec: AppSpec,
    /// Its identity.
    pub identity: Identity,
    /// The image (`sha256:…`) its container ran, read back from the engine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_id: Option<String>,
    /// The desired-state generation it came with.
    pub generation: u64,
}

impl Good {
    /// The spec that brings this version back: its own image by id (never pulled again, so a
    /// tag moved since cannot change it), no git source to build again, no update policy.
    pub fn revert_spec(&self) -> AppSpec {
        let mut spec = self.spec.clone();
        if let Some(id) = &self.image_id {
            spec.image = Some(id.clone());
            spec.source = None;
            spec.pull = PullPolicy::Never;
        }
        spec.update = None;
        spec
    }
}

/// A rollout under way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Pending {
    /// The new version's identity.
    pub identity: Identity,
    /// The generation it came with.
    pub generation: u64,
    /// Its container, once seen running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_id: Option<String>,
    /// When that container was first seen running, Unix milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seen_at_ms: Option<u64>,
    /// The wait for the app's update lock was told (an event, once).
    #[serde(default)]
    pub lock_seen: bool,
    /// The lock outlived `update.max_lock_secs` and was overridden (warned once).
    #[serde(default)]
    pub lock_expired: bool,
}

/// A rollout that failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Failed {
    /// The failed version's identity: not tried again while the spec and token are the same.
    pub identity: Identity,
    /// What the status says about it.
    pub report: RolloutReport,
}

/// What is kept of one app.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Record {
    /// The way back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub good: Option<Good>,
    /// The rollout under way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<Pending>,
    /// The rollout that failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<Failed>,
}

/// Per app name.
pub(crate) type Book = BTreeMap<String, Record>;

/// The rollout records of every app, read from the state directory at the first pass, saved
/// when a pass changed them; and when each app's rollout wants the next pass.
#[derive(Debug, Default)]
pub(crate) struct Rollouts {
    book: Option<Book>,
    /// A fingerprint of the records as last read or written: a second copy of them (each
    /// app's spec) would double what they cost to keep.
    saved: Option<u64>,
    wake: BTreeMap<String, Instant>,
}

/// A fingerprint of a state file's bytes (no attacker chooses them: a change detector).
fn fingerprint(bytes: &[u8]) -> u64 {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let mut h = DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

impl Rollouts {
    /// The records, read from `dir` the first time.
    pub(crate) fn book(&mut self, dir: &Path) -> &mut Book {
        self.book.get_or_insert_with(|| {
            let book = load(dir);
            self.saved = state_json(&dir.join(ROLLOUTS_FILE), &book)
                .ok()
                .map(|b| fingerprint(&b));
            book
        })
    }

    /// Forget the apps not in `names`.
    pub(crate) fn retain(&mut self, names: &[&str]) {
        if let Some(book) = self.book.as_mut() {
            book.retain(|name, _| names.contains(&name.as_str()));
        }
        self.wake.retain(|name, _| names.contains(&name.as_str()));
    }

    /// Ask for a pass at `at` for `app` (none: no rollout deadline).
    pub(crate) fn wake_at(&mut self, app: &str, at: Option<Instant>) {
        match at {
            Some(at) => self.wake.insert(app.to_owned(), at),
            None => self.wake.remove(app),
        };
    }

    /// The earliest pass a rollout asks for.
    pub(crate) fn next_wake(&self) -> Option<Instant> {
        self.wake.values().min().copied()
    }

    /// The images apps could roll back to (each app's way back), by id.
    pub(crate) fn rollback_images(&self) -> std::collections::BTreeSet<String> {
        self.book
            .iter()
            .flat_map(|b| b.values())
            .filter_map(|r| r.good.as_ref()?.image_id.clone())
            .collect()
    }

    /// Write the records to `dir` when they changed since the last save.
    pub(crate) fn save(&mut self, dir: &Path) {
        let Some(book) = self.book.as_ref() else {
            return;
        };
        let path = dir.join(ROLLOUTS_FILE);
        let written = state_json(&path, book).and_then(|bytes| {
            let print = fingerprint(&bytes);
            if self.saved != Some(print) {
                off_the_executor(|| write_atomic_bytes(&path, &bytes))?;
                self.saved = Some(print);
            }
            Ok(())
        });
        if let Err(e) = written {
            tracing::warn!(error = %e, "could not persist the rollout records");
        }
    }
}

/// The records in `dir` (none when there is no file or it does not parse).
fn load(dir: &Path) -> Book {
    let path = dir.join(ROLLOUTS_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Book::new(),
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "rollout records not read; no way back until a version proves itself");
            return Book::new();
        }
    };
    odac_protocol::decode_document(&bytes).unwrap_or_else(|e| {
        tracing::warn!(path = %path.display(), error = %e.reply_text(), "rollout records are not valid json; no way back until a version proves itself");
        Book::new()
    })
}

/// Whether going from `from` to `to` puts a new version in place: another spec, or a restart
/// (another token) that applies another GPU intent or other host access (a change of either
/// alone waits for a restart) or
/// that may bring another image (`image_may_change`: a git source's next commit, a pull
/// policy `always`). A plain restart of the same version is no rollout.
pub(crate) fn recreates(from: &Identity, to: &Identity, image_may_change: bool) -> bool {
    from.spec_hash != to.spec_hash
        || (from.restart_token != to.restart_token
            && (from.gpu_hash != to.gpu_hash
                || from.access_hash != to.access_hash
                || image_may_change))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(spec: &str, gpu: &str, token: &str) -> Identity {
        Identity {
            spec_hash: spec.into(),
            gpu_hash: gpu.into(),
            access_hash: "none".into(),
            restart_token: token.into(),
        }
    }

    #[test]
    fn only_a_new_spec_or_an_applied_gpu_change_is_a_rollout() {
        assert!(recreates(&id("a", "g", ""), &id("b", "g", ""), false));
        assert!(
            !recreates(&id("a", "g", ""), &id("a", "g", "t1"), false),
            "a plain restart"
        );
        assert!(
            !recreates(&id("a", "g", ""), &id("a", "h", ""), true),
            "restart required"
        );
        assert!(recreates(&id("a", "g", ""), &id("a", "h", "t1"), false));
        assert!(
            recreates(&id("a", "g", ""), &id("a", "g", "t1"), true),
            "the next commit"
        );
    }

    #[test]
    fn records_survive_a_restart_and_a_bad_file_is_no_way_back() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = Rollouts::default();
        r.book(dir.path()).insert(
            "web".into(),
            Record {
                good: Some(Good {
                    spec: AppSpec::new("web", "busybox:1"),
                    identity: id("a", "none", ""),
                    image_id: Some(format!("sha256:{}", "a".repeat(64))),
                    generation: 3,
                }),
                ..Record::default()
            },
        );
        r.save(dir.path());
        let mut again = Rollouts::default();
        let good = again.book(dir.path())["web"].good.clone().unwrap();
        assert_eq!(good.generation, 3);
        let back = good.revert_spec();
        assert_eq!(back.image, good.image_id);
        assert_eq!(back.pull, PullPolicy::Never);
        std::fs::write(dir.path().join(ROLLOUTS_FILE), b"{").unwrap();
        assert!(Rollouts::default().book(dir.path()).is_empty());
    }

    #[test]
    fn records_are_written_only_when_they_changed() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(ROLLOUTS_FILE);
        let inode = || std::fs::metadata(&file).map(|m| m.ino()).ok();
        let mut r = Rollouts::default();
        r.book(dir.path());
        r.save(dir.path());
        assert_eq!(inode(), None, "no records, nothing read: no file");
        let record = |generation| Record {
            pending: Some(Pending {
                identity: id("a", "none", ""),
                generation,
                container_id: None,
                seen_at_ms: None,
                lock_seen: false,
                lock_expired: false,
            }),
            ..Record::default()
        };
        r.book(dir.path()).insert("web".into(), record(1));
        r.save(dir.path());
        let first = inode().expect("written");
        r.save(dir.path());
        assert_eq!(inode(), Some(first), "unchanged: not written again");
        // a restarted agent reads them back and does not write what it read
        let mut again = Rollouts::default();
        again.book(dir.path());
        again.save(dir.path());
        assert_eq!(inode(), Some(first));
        again.book(dir.path()).insert("web".into(), record(2));
        again.save(dir.path());
        assert_ne!(
            inode(),
            Some(first),
            "changed: written (a new file renamed over)"
        );
    }
}
