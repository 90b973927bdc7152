//! Self-update: the launcher's boot counting. A pending version gets one start, counted and
//! persisted before it is executed; the start after it finds the attempt spent and runs the
//! previous version, with the failure recorded (the new version never has to cooperate). A
//! committed version keeps running; a packaged binary at least as new supersedes it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use odac_agent::update::launch::{Decision, Exec, decide, launch};
use odac_agent::update::state::{self, CurrentUpdate, Slot, UpdateState};

fn staged(dir: &Path, version: &str) -> Slot {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(format!("update/versions/{version}/odac-agent"));
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, "#!/bin/sh\nexit 1\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    Slot {
        version: version.to_owned(),
        path,
    }
}

/// One exec asked for: binary, arguments, version, and the record on disk at that moment.
type ExecCall = (PathBuf, Vec<OsString>, String, Option<CurrentUpdate>);

/// Records what it was asked to execute and the record on disk at that moment.
struct RecordingExec {
    state_dir: PathBuf,
    calls: Mutex<Vec<ExecCall>>,
}

impl Exec for RecordingExec {
    fn exec(&self, path: &Path, args: &[OsString], version: &str) -> std::io::Error {
        let on_disk = state::load(&self.state_dir).unwrap();
        self.calls.lock().unwrap().push((
            path.to_owned(),
            args.to_vec(),
            version.to_owned(),
            on_disk,
        ));
        std::io::Error::other("recorded, not executed")
    }
}

#[test]
fn without_a_record_the_packaged_binary_runs() {
    assert_eq!(decide(&mut None, "0.1.0"), Decision::RunSelf);
}

#[test]
fn a_pending_version_gets_one_start_then_the_previous_version_runs() {
    let dir = tempfile::tempdir().unwrap();
    let v2 = staged(dir.path(), "0.2.0");
    let mut record = Some(CurrentUpdate::staged(v2.clone(), None, Vec::new()));
    assert_eq!(decide(&mut record, "0.1.0"), Decision::Exec(v2.clone()));
    let r = record.as_ref().unwrap();
    assert_eq!((r.state, r.attempts), (UpdateState::Pending, 1));
    // it never committed: the next start runs the packaged binary and says why
    assert_eq!(decide(&mut record, "0.1.0"), Decision::RunSelf);
    let r = record.as_ref().unwrap();
    assert_eq!(r.state, UpdateState::Failed);
    assert_eq!(r.failed, ["0.2.0"]);
    let cause = r.cause.clone().unwrap();
    assert!(
        cause.contains("version 0.2.0 did not commit after 1 start(s)"),
        "{cause}"
    );
    assert!(cause.contains("last reached: started"), "{cause}");
    // and it stays that way
    assert_eq!(decide(&mut record, "0.1.0"), Decision::RunSelf);
}

#[test]
fn a_failed_version_goes_back_to_the_previous_committed_one() {
    let dir = tempfile::tempdir().unwrap();
    let v2 = staged(dir.path(), "0.2.0");
    let v3 = staged(dir.path(), "0.3.0");
    let mut record = Some(CurrentUpdate::staged(
        v3.clone(),
        Some(v2.clone()),
        Vec::new(),
    ));
    assert_eq!(decide(&mut record, "0.1.0"), Decision::Exec(v3));
    assert_eq!(decide(&mut record, "0.1.0"), Decision::Exec(v2.clone()));
    assert_eq!(record.as_ref().unwrap().state, UpdateState::Failed);
    assert_eq!(decide(&mut record, "0.1.0"), Decision::Exec(v2));
}

#[test]
fn a_committed_version_keeps_running_until_a_newer_package_supersedes_it() {
    let dir = tempfile::tempdir().unwrap();
    let v2 = staged(dir.path(), "0.2.0");
    let mut record = Some(CurrentUpdate {
        state: UpdateState::Committed,
        ..CurrentUpdate::staged(v2.clone(), None, Vec::new())
    });
    for _ in 0..3 {
        assert_eq!(decide(&mut record, "0.1.0"), Decision::Exec(v2.clone()));
    }
    assert_eq!(
        record.as_ref().unwrap().attempts,
        0,
        "a committed version is not counted"
    );
    // apt installed 0.2.0 (or newer) as the package: it runs, the staged copy is dropped
    assert_eq!(decide(&mut record, "0.2.0"), Decision::RunSelf);
    assert_eq!(record.as_ref().unwrap().state, UpdateState::Superseded);
    assert_eq!(decide(&mut record, "0.1.0"), Decision::RunSelf);
}

#[test]
fn a_missing_staged_binary_is_a_failure_not_a_broken_host() {
    let dir = tempfile::tempdir().unwrap();
    let v2 = staged(dir.path(), "0.2.0");
    std::fs::remove_file(&v2.path).unwrap();
    let mut record = Some(CurrentUpdate::staged(v2, None, Vec::new()));
    assert_eq!(decide(&mut record, "0.1.0"), Decision::RunSelf);
    let r = record.unwrap();
    assert_eq!(r.state, UpdateState::Failed);
    assert!(r.cause.unwrap().contains("is missing"));
}

#[test]
fn the_attempt_is_on_disk_before_the_staged_version_is_executed() {
    let dir = tempfile::tempdir().unwrap();
    let v2 = staged(dir.path(), "0.2.0");
    state::save(
        dir.path(),
        &CurrentUpdate::staged(v2.clone(), None, Vec::new()),
    )
    .unwrap();
    let exec = RecordingExec {
        state_dir: dir.path().to_owned(),
        calls: Mutex::default(),
    };
    let args: Vec<OsString> = vec![
        "run".into(),
        "--config".into(),
        "/etc/odac/agent.toml".into(),
    ];
    launch(dir.path(), "0.1.0", &args, &exec);
    let calls = exec.calls.lock().unwrap();
    assert_eq!(calls.len(), 1);
    let (path, got_args, version, on_disk) = &calls[0];
    assert_eq!(
        (path, got_args, version.as_str()),
        (&v2.path, &args, "0.2.0")
    );
    let on_disk = on_disk.clone().unwrap();
    assert_eq!((on_disk.state, on_disk.attempts), (UpdateState::Pending, 1));
    drop(calls);
    // the exec failed (the fake returns): that is recorded as the version's failure
    let after = state::load(dir.path()).unwrap().unwrap();
    assert_eq!(after.state, UpdateState::Failed);
    assert!(after.cause.unwrap().contains("cannot execute"));
}

#[test]
fn an_unreadable_record_runs_the_packaged_binary() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("update")).unwrap();
    std::fs::write(state::current_path(dir.path()), "{not json").unwrap();
    let exec = RecordingExec {
        state_dir: dir.path().to_owned(),
        calls: Mutex::default(),
    };
    launch(dir.path(), "0.1.0", &[], &exec);
    assert!(exec.calls.lock().unwrap().is_empty());
}
