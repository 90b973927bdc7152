//! Self-update: an offer is verified, downloaded and checked before anything is written where
//! it could run. A bad signature, a wrong hash, a truncated or failed download and a full disk
//! are each refused with one clear `refused` report, and nothing executable is left under the
//! state dir; a good release lands in `update/versions/<version>/odac-agent` (0755) and is
//! recorded as pending, to be started by the launcher.

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;

use odac_agent::update::UpdateConfig;
use odac_agent::update::fetch::Fetch;
use odac_agent::update::stage::DiskSpace;
use odac_agent::update::state::{self, UpdateState};
use odac_agent::update::task::UpdateTask;
use odac_protocol::{UpdateOffer, UpdatePhase};

use super::self_update_support::{Disk, FixedFetch, Key, Reports, executables, manifest};

const BINARY: &[u8] = b"#!/bin/sh\necho agent v2\n";

struct Case {
    dir: tempfile::TempDir,
    key: Key,
    reports: Arc<Reports>,
}

impl Case {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
            key: Key::new(),
            reports: Arc::default(),
        }
    }

    fn task(&self, fetch: Arc<dyn Fetch>, disk: Arc<dyn DiskSpace>) -> UpdateTask {
        UpdateTask {
            state_dir: self.dir.path().to_owned(),
            config: UpdateConfig {
                public_keys: vec![self.key.public()],
                ..UpdateConfig::default()
            },
            running: "0.1.0".to_owned(),
            launched: false,
            fetch,
            disk,
            reports: self.reports.clone(),
        }
    }

    fn offer(&self, signed: odac_protocol::SignedRelease) -> UpdateOffer {
        UpdateOffer {
            seq: 1,
            release: signed,
        }
    }

    /// One refusal, its message, and nothing that could run.
    fn assert_refused_once(&self, contains: &str) {
        let refused: Vec<_> = self
            .reports
            .0
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.phase == UpdatePhase::Refused)
            .cloned()
            .collect();
        assert_eq!(refused.len(), 1, "{refused:?}");
        let why = refused[0].message.clone().unwrap();
        assert!(why.contains(contains), "{why:?} should say {contains:?}");
        assert!(
            executables(self.dir.path()).is_empty(),
            "{:?}",
            executables(self.dir.path())
        );
        assert!(state::load(self.dir.path()).unwrap().is_none());
    }
}

#[tokio::test]
async fn a_good_release_is_staged_executable_and_recorded_pending() {
    let c = Case::new();
    let fetch = FixedFetch::serving(BINARY);
    let task = c.task(fetch.clone(), Arc::new(Disk(u64::MAX)));
    let m = manifest("0.2.0", BINARY);
    assert!(task.take_offer(c.offer(c.key.sign(&m))).await);
    let path = c.dir.path().join("update/versions/0.2.0/odac-agent");
    assert_eq!(std::fs::read(&path).unwrap(), BINARY);
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o755);
    assert_eq!(executables(c.dir.path()), vec![path.clone()]);
    let record = state::load(c.dir.path()).unwrap().unwrap();
    assert_eq!(record.state, UpdateState::Pending);
    assert_eq!(record.attempts, 0);
    assert_eq!(record.slot.path, path);
    assert_eq!(
        record.previous, None,
        "the packaged binary is the one to go back to"
    );
    assert_eq!(
        c.reports.phases(),
        [
            UpdatePhase::Downloading,
            UpdatePhase::Downloading,
            UpdatePhase::Staged
        ]
    );
    let progress: Vec<_> = c.reports.0.lock().unwrap()[..2]
        .iter()
        .map(|r| (r.bytes, r.total))
        .collect();
    let n = Some(BINARY.len() as u64);
    assert_eq!(
        progress,
        [(Some(0), n), (n, n)],
        "progress from 0 to the whole"
    );
    assert_eq!(fetch.asked(), 1);
}

#[tokio::test]
async fn a_bad_signature_is_refused_before_any_download() {
    let c = Case::new();
    let fetch = FixedFetch::serving(BINARY);
    let task = c.task(fetch.clone(), Arc::new(Disk(u64::MAX)));
    let signed = Key::new().sign(&manifest("0.2.0", BINARY));
    assert!(!task.take_offer(c.offer(signed)).await);
    c.assert_refused_once("does not verify");
    assert_eq!(
        fetch.asked(),
        0,
        "nothing is fetched for an unverified release"
    );
}

#[tokio::test]
async fn a_wrong_hash_is_refused_and_nothing_is_staged() {
    let c = Case::new();
    let mut tampered = BINARY.to_vec();
    tampered[0] ^= 1;
    let task = c.task(FixedFetch::serving(&tampered), Arc::new(Disk(u64::MAX)));
    assert!(
        !task
            .take_offer(c.offer(c.key.sign(&manifest("0.2.0", BINARY))))
            .await
    );
    c.assert_refused_once("has sha256");
}

#[tokio::test]
async fn a_truncated_download_is_refused_and_nothing_is_staged() {
    let c = Case::new();
    let task = c.task(FixedFetch::serving(&BINARY[..10]), Arc::new(Disk(u64::MAX)));
    assert!(
        !task
            .take_offer(c.offer(c.key.sign(&manifest("0.2.0", BINARY))))
            .await
    );
    c.assert_refused_once(&format!("is 10 bytes, the manifest says {}", BINARY.len()));
}

#[tokio::test]
async fn a_failed_download_is_refused_and_the_next_offer_starts_over() {
    let c = Case::new();
    let task = c.task(
        FixedFetch::failing("connection reset"),
        Arc::new(Disk(u64::MAX)),
    );
    let signed = c.key.sign(&manifest("0.2.0", BINARY));
    assert!(!task.take_offer(c.offer(signed.clone())).await);
    c.assert_refused_once("connection reset");
    // the same offer again, now served: a fresh download, staged
    let task = c.task(FixedFetch::serving(BINARY), Arc::new(Disk(u64::MAX)));
    assert!(task.take_offer(c.offer(signed)).await);
    assert_eq!(executables(c.dir.path()).len(), 1);
}

#[tokio::test]
async fn a_full_disk_is_refused_before_the_download() {
    let c = Case::new();
    let fetch = FixedFetch::serving(BINARY);
    let task = c.task(fetch.clone(), Arc::new(Disk(1024)));
    assert!(
        !task
            .take_offer(c.offer(c.key.sign(&manifest("0.2.0", BINARY))))
            .await
    );
    c.assert_refused_once("not enough disk space");
    assert_eq!(fetch.asked(), 0);
}

#[tokio::test]
async fn a_version_that_failed_before_is_not_installed_again() {
    let c = Case::new();
    let task = c.task(FixedFetch::serving(BINARY), Arc::new(Disk(u64::MAX)));
    let signed = c.key.sign(&manifest("0.2.0", BINARY));
    assert!(task.take_offer(c.offer(signed.clone())).await);
    let mut record = state::load(c.dir.path()).unwrap().unwrap();
    record.fail("did not commit".to_owned());
    state::save(c.dir.path(), &record).unwrap();
    c.reports.0.lock().unwrap().clear();
    assert!(!task.take_offer(c.offer(signed)).await);
    let last = c.reports.last();
    assert_eq!(last.phase, UpdatePhase::Refused);
    assert!(
        last.message.unwrap().contains("failed on this host before"),
        "{:?}",
        c.reports.0.lock().unwrap()
    );
    // a newer version is taken
    let v3 = c.key.sign(&manifest("0.3.0", BINARY));
    assert!(task.take_offer(c.offer(v3)).await);
    let record = state::load(c.dir.path()).unwrap().unwrap();
    assert_eq!(record.slot.version, "0.3.0");
    assert_eq!(record.failed, ["0.2.0"]);
}
