//! Unit tests of the outbox: seqs kept on resend, statuses coalesced and bounded, events
//! bounded, removals and the seq mark kept across restarts, the sent and acked counts, the
//! latest GPU sample and agent-update report only.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use super::*;
use odac_protocol::AppState;

fn status(name: &str, state: AppState) -> AppStatus {
    AppStatus {
        name: name.into(),
        state,
        ..Default::default()
    }
}

fn seqs(msgs: &[AgentMessage]) -> Vec<u64> {
    msgs.iter().filter_map(AgentMessage::seq).collect()
}

#[test]
fn statuses_coalesce_and_stale_acks_keep_the_newer_one() {
    let mut o = Outbox::new(OutboxLimits::default());
    o.put_status(status("a", AppState::Creating));
    let first = o.take_unsent();
    assert_eq!(seqs(&first), vec![1]);
    // a newer status replaces the in-flight one; the old ack must not remove it
    o.put_status(status("a", AppState::Running));
    o.put_status(status("a", AppState::Stopped));
    assert!(!o.ack(1));
    let second = o.take_unsent();
    assert_eq!(second.len(), 1);
    match &second[0] {
        AgentMessage::AppStatus(r) => {
            assert_eq!((r.seq, r.status.state), (3, AppState::Stopped));
        }
        other => panic!("{other:?}"),
    }
    assert!(o.take_unsent().is_empty(), "sent once per session");
    assert!(!o.ack(2), "a replaced report's seq is void");
    assert!(o.ack(3));
    assert!(!o.ack(3), "acked twice");
    assert_eq!(o.pending(), 0);
}

#[test]
fn unacked_reports_are_resent_with_their_seq_after_a_new_session() {
    let mut o = Outbox::new(OutboxLimits::default());
    o.put_inventory(Inventory::default());
    o.put_status(status("b", AppState::Running));
    o.put_status(status("a", AppState::Running));
    o.push_event(EventLevel::Warn, Some("a".into()), "fell back".into());
    let sent = o.take_unsent();
    let types: Vec<_> = sent.iter().map(AgentMessage::type_name).collect();
    assert_eq!(types, ["inventory", "app_status", "app_status", "event"]);
    assert_eq!(seqs(&sent), vec![1, 2, 3, 4]);
    assert!(o.ack(3)); // status a
    o.new_session();
    let again = o.take_unsent();
    assert_eq!(seqs(&again), vec![1, 2, 4], "a resend keeps its seq");
    assert_eq!(again, [&sent[..2], &sent[3..]].concat());
    assert_eq!(o.pending_status_names(), vec!["b".to_owned()]);
    // the same status queued again (a new session sends every app's status) is the same
    // report: same seq, and not sent twice in a session
    o.put_status(status("b", AppState::Running));
    assert!(o.take_unsent().is_empty());
    // acks of the previous session still count: the seq names the same report
    assert!(o.ack(2));
    o.put_status(status("c", AppState::Running));
    assert_eq!(seqs(&o.take_unsent()), vec![5], "seq never goes back");
}

#[test]
fn an_unacked_removal_is_pending_again_after_a_restart_with_its_seq() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = Outbox::persistent(OutboxLimits::default(), dir.path());
    o.put_status(status("web", AppState::Running));
    o.put_status(status("web", AppState::Removed));
    o.put_status(status("api", AppState::Running));
    let sent = o.take_unsent();
    let removed_seq = sent
        .iter()
        .find_map(|m| match m {
            AgentMessage::AppStatus(r) if r.status.state == AppState::Removed => Some(r.seq),
            _ => None,
        })
        .unwrap();
    drop(o); // killed before the ack
    let mut o = Outbox::persistent(OutboxLimits::default(), dir.path());
    assert_eq!(o.pending_status_names(), vec!["web".to_owned()]);
    o.put_inventory(Inventory::default());
    let again = o.take_unsent();
    assert_eq!(seqs(&again)[0], removed_seq);
    assert!(seqs(&again)[1] > removed_seq);
    assert!(o.ack(removed_seq));
    drop(o);
    let o = Outbox::persistent(OutboxLimits::default(), dir.path());
    assert_eq!(o.pending(), 0, "an acked removal is not resent");
}

#[test]
fn only_the_latest_gpu_sample_is_pending_and_resent() {
    let mut o = Outbox::new(OutboxLimits::default());
    let stats = |interval_secs| GpuStats {
        interval_secs,
        ..GpuStats::default()
    };
    o.put_gpu_stats(stats(60));
    assert_eq!(seqs(&o.take_unsent()), [1]);
    o.put_gpu_stats(stats(61));
    assert!(!o.ack(1), "the replaced sample's ack is stale");
    o.new_session();
    let resent = o.take_unsent();
    assert_eq!(seqs(&resent), [2]);
    assert!(matches!(&resent[0], AgentMessage::GpuStats(r) if r.stats.interval_secs == 61));
    assert!(o.ack(2));
    assert_eq!(o.pending(), 0);
}

#[test]
fn only_the_latest_agent_update_report_is_pending_and_resent() {
    use odac_protocol::{UpdatePhase, UpdateStatusReport};
    let mut o = Outbox::new(OutboxLimits::default());
    let report = |phase| UpdateStatusReport {
        version: "0.2.0".into(),
        phase,
        ..UpdateStatusReport::default()
    };
    o.put_update_status(report(UpdatePhase::Downloading));
    assert_eq!(seqs(&o.take_unsent()), [1]);
    o.put_update_status(report(UpdatePhase::UpdateFailed));
    assert!(!o.ack(1), "the replaced report's ack is stale");
    o.new_session();
    let resent = o.take_unsent();
    assert_eq!(seqs(&resent), [2]);
    assert!(
        matches!(&resent[0], AgentMessage::UpdateStatus(r) if r.phase == UpdatePhase::UpdateFailed)
    );
    assert!(o.ack(2));
    assert_eq!(o.pending(), 0);
}

#[test]
fn seqs_continue_after_a_restart_with_a_state_dir() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = Outbox::persistent(OutboxLimits::default(), dir.path());
    for i in 0..3 {
        o.push_event(EventLevel::Info, None, format!("e{i}"));
    }
    let last = *seqs(&o.take_unsent()).last().unwrap();
    drop(o);
    let mut o = Outbox::persistent(OutboxLimits::default(), dir.path());
    o.push_event(EventLevel::Info, None, "after restart".into());
    let first = seqs(&o.take_unsent())[0];
    assert!(first > last, "{first} after {last}");
}

#[test]
fn events_are_bounded_and_drops_are_counted() {
    let mut o = Outbox::new(OutboxLimits {
        max_statuses: 8,
        max_events: 3,
    });
    for i in 0..10 {
        o.push_event(EventLevel::Info, None, format!("e{i}"));
    }
    assert_eq!(o.pending(), 3);
    let sent = o.take_unsent();
    let got: Vec<_> = sent
        .iter()
        .map(|m| match m {
            AgentMessage::Event(e) => (e.message.clone(), e.dropped),
            other => panic!("{other:?}"),
        })
        .collect();
    // 7 dropped in total; the count travels with the surviving events
    let total: u64 = got.iter().filter_map(|(_, d)| *d).sum();
    assert_eq!(total, 7);
    assert_eq!(got.last().map(|(m, _)| m.as_str()), Some("e9"));
    assert_eq!(seqs(&sent), vec![8, 9, 10]);
    assert!(!o.ack(1), "a dropped event's seq is void");
}

#[test]
fn statuses_are_bounded_by_evicting_the_least_recently_updated() {
    let mut o = Outbox::new(OutboxLimits {
        max_statuses: 2,
        max_events: 1,
    });
    assert!(o.put_status(status("a", AppState::Running)));
    assert!(o.put_status(status("b", AppState::Running)));
    assert!(o.put_status(status("a", AppState::Stopped)));
    assert!(!o.put_status(status("c", AppState::Running)));
    assert_eq!(
        o.pending_status_names(),
        vec!["a".to_owned(), "c".to_owned()]
    );
    assert_eq!(o.evicted_statuses(), 1);
}

/// PROTOCOL.md 2 step 4, as `session::open` does it: after `welcome` the current inventory
/// and every current status are put again; one equal to an unacked report is that report
/// (its old seq), one that changed gets a new seq and the unacked one is never sent; other
/// unacked reports keep their seqs; everything goes out in seq order.
#[test]
fn after_welcome_current_reports_resend_equal_ones_and_replace_changed_ones() {
    let mut o = Outbox::new(OutboxLimits::default());
    o.put_inventory(Inventory::default());
    o.put_status(status("api", AppState::Running));
    o.put_status(status("web", AppState::Running));
    o.push_event(EventLevel::Info, None, "note".into());
    assert_eq!(seqs(&o.take_unsent()), vec![1, 2, 3, 4]);
    assert!(o.ack(1), "the inventory was acked");
    // the session ends; web crashed while the agent was away
    o.new_session();
    o.put_inventory(Inventory::default());
    o.put_status(status("api", AppState::Running));
    o.put_status(status("web", AppState::CrashLoop));
    let sent = o.take_unsent();
    let kinds: Vec<(&str, u64)> = sent
        .iter()
        .map(|m| (m.type_name(), m.seq().unwrap_or_default()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("app_status", 2),
            ("event", 4),
            ("inventory", 5),
            ("app_status", 6)
        ],
        "api resent as seq 2, the event kept, a fresh inventory, web replaced: {sent:?}"
    );
    assert!(
        matches!(&sent[3], AgentMessage::AppStatus(r) if r.status.state == AppState::CrashLoop)
    );
    assert!(!o.ack(3), "web's seq 3 was replaced: void");
}

#[test]
fn sent_and_acked_count_resends_and_real_acks_only() {
    let mut o = Outbox::new(OutboxLimits::default());
    o.put_status(status("a", AppState::Running));
    o.put_status(status("b", AppState::Running));
    assert_eq!(o.take_unsent().len(), 2);
    assert!(o.ack(1));
    assert!(!o.ack(1), "a second ack of the same seq");
    assert!(!o.ack(99), "an ack of no report");
    // a new session resends what is unacked
    o.new_session();
    assert_eq!(o.take_unsent().len(), 1);
    assert_eq!(o.sent_and_acked(), (3, 1));
    assert_eq!(o.pending(), 1);
}

#[test]
fn an_image_removed_event_keeps_its_part_on_the_wire_and_on_resend() {
    let mut o = Outbox::new(OutboxLimits::default());
    let removed = odac_protocol::ImageRemoved {
        image: "sha256:aa".into(),
        reference: "web:1".into(),
        bytes: 5_000_000,
        reason: odac_protocol::ImageRemovalReason::LowDisk,
    };
    o.push_event_with(
        EventLevel::Info,
        Some("web".into()),
        "removed image web:1".into(),
        Some(removed.clone()),
    );
    let sent = o.take_unsent();
    let AgentMessage::Event(e) = &sent[0] else {
        panic!("{sent:?}")
    };
    assert_eq!(e.image_removed.as_ref(), Some(&removed));
    let json = odac_protocol::encode(&sent[0]);
    assert!(json.contains(r#""reason":"low_disk""#), "{json}");
    o.new_session();
    assert_eq!(o.take_unsent(), sent);
}
