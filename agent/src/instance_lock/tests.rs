//! Tests of the instance lock: one holder at a time, canonical endpoints, and nothing planted
//! by another user (a symlink, a hard link, a shared fallback directory) is followed.
#![allow(clippy::unwrap_used)]
use super::*;

#[test]
fn second_holder_is_refused_and_named_until_the_first_drops() {
    let dir = tempfile::tempdir().unwrap();
    let engine = "unix:///nowhere/docker.sock";
    let first = InstanceLock::acquire(dir.path(), engine, "odac", "agent a-1").unwrap();
    let text = std::fs::read_to_string(first.path()).unwrap();
    assert_eq!(text, format!("pid {}, agent a-1\n", std::process::id()));
    let err = InstanceLock::acquire(dir.path(), engine, "odac", "agent b-2").unwrap_err();
    let message = err.to_string();
    assert!(message.contains("agent a-1"), "{message}");
    assert!(
        message.contains(&format!("pid {}", std::process::id())),
        "{message}"
    );
    assert!(!message.contains('\n'), "one line: {message}");
    assert_eq!(
        InstanceLock::holder(dir.path(), engine, "odac").as_deref(),
        Some(text.trim())
    );
    // another instance, or another engine, is another lock
    let other = InstanceLock::acquire(dir.path(), engine, "odac-demo", "agent b-2").unwrap();
    let tcp = InstanceLock::acquire(dir.path(), "tcp://127.0.0.1:2375", "odac", "b").unwrap();
    drop(first);
    assert_eq!(InstanceLock::holder(dir.path(), engine, "odac"), None);
    let again = InstanceLock::acquire(dir.path(), engine, "odac", "agent b-2").unwrap();
    let text = std::fs::read_to_string(again.path()).unwrap();
    assert!(text.ends_with("agent b-2\n"), "{text}");
    drop((other, tcp));
}

#[test]
fn a_planted_symlink_or_hard_link_is_never_followed() {
    let dir = tempfile::tempdir().unwrap();
    let engine = "unix:///nowhere/docker.sock";
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "root:secret-hash:19000:0:99999:7:::\n").unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).unwrap();
    let locks = dir.path().join("locks");
    std::fs::create_dir(&locks).unwrap();
    let path = lock_path(&locks, engine, "odac");
    std::os::unix::fs::symlink(&victim, &path).unwrap();
    let err = InstanceLock::acquire(&locks, engine, "odac", "agent a").unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("symbolic link") && message.contains("apps.lock_dir"),
        "{message}"
    );
    let intact = |what: &str| {
        let text = std::fs::read_to_string(&victim).unwrap();
        assert_eq!(text, "root:secret-hash:19000:0:99999:7:::\n", "{what}");
        let mode = std::fs::metadata(&victim).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{what}");
    };
    intact("symlink");
    assert_eq!(InstanceLock::holder(&locks, engine, "odac"), None);
    std::fs::remove_file(&path).unwrap();
    std::fs::hard_link(&victim, &path).unwrap();
    let message = InstanceLock::acquire(&locks, engine, "odac", "agent a")
        .unwrap_err()
        .to_string();
    assert!(message.contains("hard links"), "{message}");
    intact("hard link");
    // a plain lock file is still taken
    std::fs::remove_file(&path).unwrap();
    InstanceLock::acquire(&locks, engine, "odac", "agent a").unwrap();
}

#[test]
fn the_fallback_directory_must_be_this_users_own() {
    let dir = tempfile::tempdir().unwrap();
    let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().mode() & 0o7777;
    // absent: created 0700
    let fresh = dir.path().join("odac-agent-1");
    own_dir(&fresh).unwrap();
    assert_eq!(mode(&fresh), 0o700);
    own_dir(&fresh).unwrap();
    // open to others: refused, and left as it is
    let open = dir.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let message = own_dir(&open).unwrap_err().to_string();
    assert!(
        message.contains("0777") && message.contains("apps.lock_dir"),
        "{message}"
    );
    assert_eq!(mode(&open), 0o777);
    // a symlink to a directory of ours: refused
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&fresh, &link).unwrap();
    let message = own_dir(&link).unwrap_err().to_string();
    assert!(message.contains("symbolic link"), "{message}");
    // another user's directory (needs root to make one)
    if our_uid() == 0 {
        let theirs = dir.path().join("theirs");
        std::fs::create_dir(&theirs).unwrap();
        std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
        let message = own_dir(&theirs).unwrap_err().to_string();
        assert!(message.contains("uid 65534"), "{message}");
    }
}

#[test]
fn endpoints_are_canonical() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("docker.sock");
    std::fs::write(&sock, "").unwrap();
    let link = dir.path().join("link.sock");
    std::os::unix::fs::symlink(&sock, &link).unwrap();
    let a = engine_endpoint(Some(&format!("unix://{}", sock.display())));
    let b = engine_endpoint(Some(&format!("unix://{}", link.display())));
    assert_eq!(a, b);
    assert_eq!(engine_endpoint(Some(&sock.display().to_string())), a);
    assert_eq!(
        engine_endpoint(Some("tcp://127.0.0.1:2375/")),
        "tcp://127.0.0.1:2375"
    );
    assert_ne!(
        lock_path(dir.path(), &a, "odac"),
        lock_path(dir.path(), &a, "odac2")
    );
}
