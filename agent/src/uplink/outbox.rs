//! The outbox: reports waiting for the control plane's `ack`. Every report gets a fresh `seq`
//! when it is sent; an `ack` removes it only if that is still the version last sent. Statuses
//! are coalesced to the latest per app, the inventory to the latest one, diagnostic events are
//! a bounded queue whose overflow drops the oldest and reports the count (`dropped`) on the
//! next event. The outbox outlives sessions: after a reconnect everything unacked is resent.

use std::collections::{BTreeMap, HashMap, VecDeque};

use odac_protocol::{
    AgentMessage, AppStatus, AppStatusReport, Event, EventLevel, Inventory, InventoryReport,
};

/// Bounds of the outbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutboxLimits {
    /// Most apps with an unacked status; beyond it the least recently updated is dropped.
    pub max_statuses: usize,
    /// Most unacked events; beyond it the oldest is dropped and counted.
    pub max_events: usize,
}

impl Default for OutboxLimits {
    fn default() -> Self {
        Self {
            max_statuses: 1024,
            max_events: 256,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Inventory,
    Status(String),
    Event(u64),
}

#[derive(Debug, Clone)]
struct Entry<T> {
    item: T,
    /// `seq` it was last sent with in this session.
    sent: Option<u64>,
    /// Update counter, for evicting the least recently updated status.
    touched: u64,
}

#[derive(Debug, Clone)]
struct PendingEvent {
    id: u64,
    level: EventLevel,
    app: Option<String>,
    message: String,
    dropped: Option<u64>,
    sent: Option<u64>,
}

/// Reports not yet acknowledged.
#[derive(Debug, Default)]
pub struct Outbox {
    limits: OutboxLimits,
    next_seq: u64,
    clock: u64,
    inventory: Option<Entry<Inventory>>,
    statuses: BTreeMap<String, Entry<AppStatus>>,
    events: VecDeque<PendingEvent>,
    next_event_id: u64,
    /// Events dropped that no queued event reports yet.
    carry_dropped: u64,
    /// Statuses evicted because of `max_statuses` (for logs).
    evicted_statuses: u64,
    inflight: HashMap<u64, Key>,
}

impl Outbox {
    /// An empty outbox.
    pub fn new(limits: OutboxLimits) -> Self {
        Self {
            limits,
            next_seq: 1,
            ..Self::default()
        }
    }

    /// Replaces the pending inventory.
    pub fn put_inventory(&mut self, inventory: Inventory) {
        self.clock += 1;
        self.inventory = Some(Entry {
            item: inventory,
            sent: None,
            touched: self.clock,
        });
    }

    /// Replaces the pending status of `status.name`. Returns false when an older status was
    /// evicted to stay within [`OutboxLimits::max_statuses`].
    pub fn put_status(&mut self, status: AppStatus) -> bool {
        self.clock += 1;
        let name = status.name.clone();
        self.statuses.insert(
            name,
            Entry {
                item: status,
                sent: None,
                touched: self.clock,
            },
        );
        if self.statuses.len() <= self.limits.max_statuses.max(1) {
            return true;
        }
        let oldest = self
            .statuses
            .iter()
            .min_by_key(|(_, e)| e.touched)
            .map(|(k, _)| k.clone());
        if let Some(k) = oldest {
            self.statuses.remove(&k);
            self.evicted_statuses += 1;
        }
        false
    }

    /// Queues a diagnostic event; when full, the oldest event is dropped and counted.
    pub fn push_event(&mut self, level: EventLevel, app: Option<String>, message: String) {
        if self.events.len() >= self.limits.max_events.max(1)
            && let Some(old) = self.events.pop_front()
        {
            self.carry_dropped += 1 + old.dropped.unwrap_or(0);
        }
        let dropped = (self.carry_dropped > 0).then_some(self.carry_dropped);
        self.carry_dropped = 0;
        self.next_event_id += 1;
        self.events.push_back(PendingEvent {
            id: self.next_event_id,
            level,
            app,
            message,
            dropped,
            sent: None,
        });
    }

    /// Forgets what was sent in the previous session, so everything pending is sent again.
    pub fn new_session(&mut self) {
        self.inflight.clear();
        if let Some(inv) = &mut self.inventory {
            inv.sent = None;
        }
        for e in self.statuses.values_mut() {
            e.sent = None;
        }
        for e in &mut self.events {
            e.sent = None;
        }
    }

    /// Every pending report not yet sent in this session, each with a fresh `seq`, in order:
    /// inventory, statuses (by app name), events (oldest first).
    pub fn take_unsent(&mut self) -> Vec<AgentMessage> {
        let mut out = Vec::new();
        if let Some(inv) = &mut self.inventory
            && inv.sent.is_none()
        {
            let seq = bump(&mut self.next_seq);
            inv.sent = Some(seq);
            self.inflight.insert(seq, Key::Inventory);
            out.push(AgentMessage::Inventory(InventoryReport {
                seq,
                inventory: inv.item.clone(),
            }));
        }
        for (name, e) in &mut self.statuses {
            if e.sent.is_none() {
                let seq = bump(&mut self.next_seq);
                e.sent = Some(seq);
                self.inflight.insert(seq, Key::Status(name.clone()));
                out.push(AgentMessage::AppStatus(AppStatusReport {
                    seq,
                    status: e.item.clone(),
                }));
            }
        }
        for e in &mut self.events {
            if e.sent.is_none() {
                let seq = bump(&mut self.next_seq);
                e.sent = Some(seq);
                self.inflight.insert(seq, Key::Event(e.id));
                out.push(AgentMessage::Event(Event {
                    seq,
                    level: e.level,
                    app: e.app.clone(),
                    message: e.message.clone(),
                    dropped: e.dropped,
                }));
            }
        }
        out
    }

    /// The control plane acknowledged `seq`: drop that report unless a newer one replaced it.
    /// Returns true when something was removed.
    pub fn ack(&mut self, seq: u64) -> bool {
        let Some(key) = self.inflight.remove(&seq) else {
            return false;
        };
        match key {
            Key::Inventory => {
                if self.inventory.as_ref().is_some_and(|e| e.sent == Some(seq)) {
                    self.inventory = None;
                    return true;
                }
            }
            Key::Status(name) => {
                if self
                    .statuses
                    .get(&name)
                    .is_some_and(|e| e.sent == Some(seq))
                {
                    self.statuses.remove(&name);
                    return true;
                }
            }
            Key::Event(id) => {
                if let Some(pos) = self
                    .events
                    .iter()
                    .position(|e| e.id == id && e.sent == Some(seq))
                {
                    self.events.remove(pos);
                    return true;
                }
            }
        }
        false
    }

    /// Reports waiting for an ack (sent or not).
    pub fn pending(&self) -> usize {
        usize::from(self.inventory.is_some()) + self.statuses.len() + self.events.len()
    }

    /// Apps with an unacked status.
    pub fn pending_status_names(&self) -> Vec<String> {
        self.statuses.keys().cloned().collect()
    }

    /// Statuses evicted so far because of the bound.
    pub fn evicted_statuses(&self) -> u64 {
        self.evicted_statuses
    }
}

fn bump(seq: &mut u64) -> u64 {
    let s = *seq;
    *seq = seq.wrapping_add(1).max(1);
    s
}

#[cfg(test)]
mod tests {
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
                assert_eq!((r.seq, r.status.state), (2, AppState::Stopped));
            }
            other => panic!("{other:?}"),
        }
        assert!(o.take_unsent().is_empty(), "sent once per session");
        assert!(o.ack(2));
        assert_eq!(o.pending(), 0);
    }

    #[test]
    fn unacked_reports_are_resent_after_a_new_session() {
        let mut o = Outbox::new(OutboxLimits::default());
        o.put_inventory(Inventory::default());
        o.put_status(status("b", AppState::Running));
        o.put_status(status("a", AppState::Running));
        o.push_event(EventLevel::Warn, Some("a".into()), "fell back".into());
        let sent = o.take_unsent();
        let types: Vec<_> = sent.iter().map(AgentMessage::type_name).collect();
        assert_eq!(types, ["inventory", "app_status", "app_status", "event"]);
        assert!(o.ack(2)); // status a
        o.new_session();
        let again = o.take_unsent();
        assert_eq!(again.len(), 3);
        assert_eq!(seqs(&again), vec![5, 6, 7]);
        assert!(!o.ack(1), "acks of the previous session are void");
        assert_eq!(o.pending_status_names(), vec!["b".to_owned()]);
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
}
