//! The outbox: reports waiting for the control plane's `ack`. Every report gets its `seq`
//! when it is queued and keeps it until it is acked or replaced, so a resend after a
//! reconnect carries the same `seq`, and `seq` never goes back (with a [`SeqMark`], not even
//! across agent restarts): `(agent_id, seq)` names one report. Statuses are coalesced to the
//! latest per app and the inventory to the latest one (the newer report takes a new `seq`; the
//! older one is never sent again), diagnostic events are a bounded queue whose overflow drops
//! the oldest and reports the count (`dropped`) on the next event. The outbox outlives
//! sessions: after a reconnect everything unacked is resent, in `seq` order. With a state dir,
//! unacked `removed` statuses also outlive the agent ([`RemovalLog`]): a restarted agent
//! resends them with their `seq`.

use std::collections::{BTreeMap, HashMap, VecDeque};

use odac_protocol::{
    AgentMessage, AppStatus, AppStatusReport, Event, EventLevel, GpuStats, GpuStatsReport,
    ImageRemoved, Inventory, InventoryReport, UpdateStatusReport,
};

use super::removal_log::RemovalLog;
use super::seqmark::SeqMark;
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
    Event,
    GpuStats,
    Update,
}

#[derive(Debug, Clone)]
struct Entry<T> {
    item: T,
    /// Its `seq`, for good.
    seq: u64,
    /// Sent in this session.
    sent: bool,
    /// Update counter, for evicting the least recently updated status.
    touched: u64,
}

#[derive(Debug, Clone)]
struct PendingEvent {
    seq: u64,
    level: EventLevel,
    app: Option<String>,
    message: String,
    dropped: Option<u64>,
    image_removed: Option<ImageRemoved>,
    sent: bool,
}

/// Reports not yet acknowledged.
#[derive(Debug, Default)]
pub struct Outbox {
    limits: OutboxLimits,
    next_seq: u64,
    mark: Option<SeqMark>,
    clock: u64,
    inventory: Option<Entry<Inventory>>,
    statuses: BTreeMap<String, Entry<AppStatus>>,
    events: VecDeque<PendingEvent>,
    /// Events dropped that no queued event reports yet.
    carry_dropped: u64,
    /// Statuses evicted because of `max_statuses` (for logs).
    evicted_statuses: u64,
    /// What each pending `seq` names.
    by_seq: HashMap<u64, Key>,
    /// Unacked `removed` statuses on disk (with a state dir).
    removals: Option<RemovalLog>,
    /// The latest GPU sample (older ones are never sent again).
    gpu_stats: Option<Entry<GpuStats>>,
    /// The latest agent-update report (an update's state: only the latest matters).
    update: Option<Entry<UpdateStatusReport>>,
    /// Reports handed to a session to send, resends included (metrics).
    sent_total: u64,
    /// Reports the control plane acknowledged (metrics).
    acked_total: u64,
}

impl Outbox {
    /// An empty outbox whose seqs start at 1 (kept in memory only).
    pub fn new(limits: OutboxLimits) -> Self {
        Self {
            limits,
            next_seq: 1,
            ..Self::default()
        }
    }

    /// An empty outbox whose seqs continue from the high-water mark in `state_dir`.
    /// Unacked `removed` statuses persisted by an earlier run are pending again, with their
    /// `seq`.
    pub fn persistent(limits: OutboxLimits, state_dir: &std::path::Path) -> Self {
        let (mark, first) = SeqMark::open(state_dir);
        let (log, removals) = RemovalLog::open(state_dir);
        let mut outbox = Self {
            limits,
            next_seq: first,
            mark: Some(mark),
            ..Self::default()
        };
        for r in removals {
            outbox.clock += 1;
            outbox.next_seq = outbox.next_seq.max(r.seq.saturating_add(1));
            outbox
                .by_seq
                .insert(r.seq, Key::Status(r.status.name.clone()));
            outbox.statuses.insert(
                r.status.name.clone(),
                Entry {
                    item: r.status,
                    seq: r.seq,
                    sent: false,
                    touched: outbox.clock,
                },
            );
        }
        outbox.removals = Some(log);
        outbox
    }

    /// The `seq` the next report will get.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    fn take_seq(&mut self) -> u64 {
        let seq = self.next_seq;
        if let Some(mark) = &mut self.mark {
            mark.ensure(seq);
        }
        self.next_seq = seq.saturating_add(1);
        seq
    }

    /// Replaces the pending inventory. The same inventory as the one pending keeps its
    /// `seq` (it is the same report).
    pub fn put_inventory(&mut self, inventory: Inventory) {
        self.clock += 1;
        if let Some(e) = &mut self.inventory
            && e.item == inventory
        {
            e.touched = self.clock;
            return;
        }
        let seq = self.take_seq();
        if let Some(old) = &self.inventory {
            self.by_seq.remove(&old.seq);
        }
        self.by_seq.insert(seq, Key::Inventory);
        self.inventory = Some(Entry {
            item: inventory,
            seq,
            sent: false,
            touched: self.clock,
        });
    }

    /// Replaces the pending GPU sample: like the inventory, only the latest one is ever
    /// pending, so a reconnect resends no history.
    pub fn put_gpu_stats(&mut self, stats: GpuStats) {
        self.clock += 1;
        let seq = self.take_seq();
        if let Some(old) = &self.gpu_stats {
            self.by_seq.remove(&old.seq);
        }
        self.by_seq.insert(seq, Key::GpuStats);
        self.gpu_stats = Some(Entry {
            item: stats,
            seq,
            sent: false,
            touched: self.clock,
        });
    }

    /// Replaces the pending agent-update report (its `seq` is set here).
    pub fn put_update_status(&mut self, mut report: UpdateStatusReport) {
        self.clock += 1;
        report.seq = self.take_seq();
        if let Some(old) = &self.update {
            self.by_seq.remove(&old.seq);
        }
        self.by_seq.insert(report.seq, Key::Update);
        let (seq, touched) = (report.seq, self.clock);
        self.update = Some(Entry {
            item: report,
            seq,
            sent: false,
            touched,
        });
    }

    /// Replaces the pending status of `status.name`; the same status as the one pending keeps
    /// its `seq` (it is the same report). Returns false when an older status was evicted to
    /// stay within [`OutboxLimits::max_statuses`].
    pub fn put_status(&mut self, status: AppStatus) -> bool {
        self.clock += 1;
        if let Some(e) = self.statuses.get_mut(&status.name)
            && e.item == status
        {
            e.touched = self.clock;
            return true;
        }
        let seq = self.take_seq();
        if let Some(log) = &mut self.removals {
            log.queued(seq, &status);
        }
        let name = status.name.clone();
        self.by_seq.insert(seq, Key::Status(name.clone()));
        let old = self.statuses.insert(
            name,
            Entry {
                item: status,
                seq,
                sent: false,
                touched: self.clock,
            },
        );
        if let Some(old) = old {
            self.by_seq.remove(&old.seq);
        }
        if self.statuses.len() <= self.limits.max_statuses.max(1) {
            return true;
        }
        let oldest = self
            .statuses
            .iter()
            .min_by_key(|(_, e)| e.touched)
            .map(|(k, _)| k.clone());
        if let Some(k) = oldest
            && let Some(e) = self.statuses.remove(&k)
        {
            self.by_seq.remove(&e.seq);
            self.evicted_statuses += 1;
            if let Some(log) = &mut self.removals {
                log.done(&k, e.seq);
            }
        }
        false
    }

    /// Queues a diagnostic event; when full, the oldest event is dropped and counted.
    pub fn push_event(&mut self, level: EventLevel, app: Option<String>, message: String) {
        self.push_event_with(level, app, message, None);
    }

    /// [`Self::push_event`] with the event's `image_removed` part.
    pub fn push_event_with(
        &mut self,
        level: EventLevel,
        app: Option<String>,
        message: String,
        image_removed: Option<ImageRemoved>,
    ) {
        if self.events.len() >= self.limits.max_events.max(1)
            && let Some(old) = self.events.pop_front()
        {
            self.by_seq.remove(&old.seq);
            self.carry_dropped += 1 + old.dropped.unwrap_or(0);
        }
        let dropped = (self.carry_dropped > 0).then_some(self.carry_dropped);
        self.carry_dropped = 0;
        let seq = self.take_seq();
        self.by_seq.insert(seq, Key::Event);
        self.events.push_back(PendingEvent {
            seq,
            level,
            app,
            message,
            dropped,
            image_removed,
            sent: false,
        });
    }

    /// Forgets what was sent in the previous session, so everything pending is sent again
    /// (with the same seqs).
    pub fn new_session(&mut self) {
        if let Some(inv) = &mut self.inventory {
            inv.sent = false;
        }
        for e in self.statuses.values_mut() {
            e.sent = false;
        }
        for e in &mut self.events {
            e.sent = false;
        }
        if let Some(e) = &mut self.gpu_stats {
            e.sent = false;
        }
        if let Some(e) = &mut self.update {
            e.sent = false;
        }
    }

    /// Every pending report not yet sent in this session, in `seq` order, each with its own
    /// `seq`.
    pub fn take_unsent(&mut self) -> Vec<AgentMessage> {
        let mut out = Vec::new();
        if let Some(inv) = &mut self.inventory
            && !inv.sent
        {
            inv.sent = true;
            out.push(AgentMessage::Inventory(InventoryReport {
                seq: inv.seq,
                inventory: inv.item.clone(),
            }));
        }
        for e in self.statuses.values_mut() {
            if !e.sent {
                e.sent = true;
                out.push(AgentMessage::AppStatus(AppStatusReport {
                    seq: e.seq,
                    status: e.item.clone(),
                }));
            }
        }
        for e in &mut self.events {
            if !e.sent {
                e.sent = true;
                out.push(AgentMessage::Event(Event {
                    seq: e.seq,
                    level: e.level,
                    app: e.app.clone(),
                    message: e.message.clone(),
                    dropped: e.dropped,
                    image_removed: e.image_removed.clone(),
                }));
            }
        }
        if let Some(e) = &mut self.gpu_stats
            && !e.sent
        {
            e.sent = true;
            out.push(AgentMessage::GpuStats(GpuStatsReport {
                seq: e.seq,
                stats: e.item.clone(),
            }));
        }
        if let Some(e) = &mut self.update
            && !e.sent
        {
            e.sent = true;
            out.push(AgentMessage::UpdateStatus(e.item.clone()));
        }
        out.sort_by_key(|m| m.seq().unwrap_or_default());
        self.sent_total += out.len() as u64;
        out
    }

    /// The control plane acknowledged `seq`: drop that report. An ack of a `seq` no longer
    /// pending (replaced by a newer report, or acked before) is ignored. Returns true when
    /// something was removed.
    pub fn ack(&mut self, seq: u64) -> bool {
        let acked = self.drop_acked(seq);
        if acked {
            self.acked_total += 1;
        }
        acked
    }

    fn drop_acked(&mut self, seq: u64) -> bool {
        let Some(key) = self.by_seq.remove(&seq) else {
            return false;
        };
        match key {
            Key::Inventory => {
                if self.inventory.as_ref().is_some_and(|e| e.seq == seq) {
                    self.inventory = None;
                    return true;
                }
            }
            Key::Status(name) => {
                if self.statuses.get(&name).is_some_and(|e| e.seq == seq) {
                    self.statuses.remove(&name);
                    if let Some(log) = &mut self.removals {
                        log.done(&name, seq);
                    }
                    return true;
                }
            }
            Key::Event => {
                if let Some(pos) = self.events.iter().position(|e| e.seq == seq) {
                    self.events.remove(pos);
                    return true;
                }
            }
            Key::GpuStats => {
                if self.gpu_stats.as_ref().is_some_and(|e| e.seq == seq) {
                    self.gpu_stats = None;
                    return true;
                }
            }
            Key::Update => {
                if self.update.as_ref().is_some_and(|e| e.seq == seq) {
                    self.update = None;
                    return true;
                }
            }
        }
        false
    }

    /// Reports waiting for an ack (sent or not).
    pub fn pending(&self) -> usize {
        usize::from(self.inventory.is_some())
            + self.statuses.len()
            + self.events.len()
            + usize::from(self.gpu_stats.is_some())
            + usize::from(self.update.is_some())
    }

    /// Apps with an unacked status.
    pub fn pending_status_names(&self) -> Vec<String> {
        self.statuses.keys().cloned().collect()
    }

    /// Statuses evicted so far because of the bound.
    pub fn evicted_statuses(&self) -> u64 {
        self.evicted_statuses
    }

    /// Reports sent so far (resends counted again) and reports acknowledged so far.
    pub fn sent_and_acked(&self) -> (u64, u64) {
        (self.sent_total, self.acked_total)
    }
}

#[cfg(test)]
mod tests;
