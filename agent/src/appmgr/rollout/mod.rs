//! Updates that cannot take an app down. A spec change that recreates the container, or a
//! restart that may bring a new image (a git source's next commit), ([`recreates`]) is a
//! *rollout* once a previous version has proven itself: the new container
//! must keep running `update.min_healthy_secs` (and, with a health check, be healthy within
//! `update.healthy_deadline_secs` of being seen running); the status meanwhile carries
//! `rollout.state = rolling_out` with the deadline. When the new version exits, crash-loops, is
//! OOM-killed, cannot be created or is not healthy by the deadline, the agent records the
//! failure (cause: the crash part of its last run, or its health) and brings the previous
//! version back ([`Good::revert_spec`]: its image by id, its env, GPUs resolved again); the
//! status then says `rolled_back`, the failing generation, the cause and when, and
//! `running_generation` names the generation that runs. The failed spec is not tried again
//! until a newer spec or restart token arrives. `update.auto_revert = false` leaves the failed
//! version as it is (`rollout.state = failed`). With `update.order = start_first` the previous
//! container keeps serving beside the new one until it has proven itself
//! ([`hand_over`]). Everything needed for the way back is in
//! [`rollout_book`], on disk.
//!
//! The folder is everything an update goes through: this module (the rollout rules, its
//! verdict in `verdict.rs`), [`rollout_book`] (the way back, in `rollouts.json`),
//! [`hand_over`] (`update.order = start_first`) and [`update_lock`] (an app deferring its
//! updates while it is busy).

use odac_protocol::{
    AppSpec, AppState, AppStatus, HealthState, RolloutReport, RolloutState, UpdateOrder,
    UpdatePolicy,
};
use tokio::time::Instant;

use self::rollout_book::{Failed, Good, Pending, Record, recreates};
use self::update_lock::Lock;
use super::crash::diagnosis::{self, instant_of, wall_ms};
use super::labels::Identity;
use super::pass::{AppMemory, HandOver, Pass};
use odac_host::engine::{ContainerState, ContainerSummary, EngineError};
use verdict::{Verdict, verdict};

impl Pass<'_> {
    /// Reconcile one app under the rollout rules (see the module documentation); the status,
    /// and when its rollout wants the next pass.
    pub(super) async fn rolled_out(
        &mut self,
        rec: &mut AppMemory,
        r: &mut Record,
        spec: &AppSpec,
        existing: Vec<ContainerSummary>,
    ) -> Result<(AppStatus, Option<Instant>), EngineError> {
        let policy = spec.update.unwrap_or_default();
        let desired = Identity::of(spec);
        rec.hand_over = HandOver::Off;
        if r.failed.as_ref().is_some_and(|f| f.identity != desired) {
            // a newer spec or restart token: the failed version is behind us
            r.failed = None;
        }
        if let Some(failed) = r.failed.clone() {
            let status = self.after_failure(rec, r, spec, &failed, existing).await?;
            return Ok((status, None));
        }
        match &r.good {
            Some(good) if recreates(&good.identity, &desired, image_may_change(spec)) => {
                if r.pending.as_ref().map(|p| &p.identity) != Some(&desired) {
                    tracing::info!(app = %spec.name, generation = self.generation, "rolling out a new version");
                    r.pending = Some(Pending {
                        identity: desired.clone(),
                        generation: self.generation,
                        container_id: None,
                        seen_at_ms: None,
                        lock_seen: false,
                        lock_expired: false,
                    });
                }
            }
            _ => r.pending = None,
        }
        if let Some(waiting) = self.waiting_for_lock(rec, r, spec, &existing).await? {
            return Ok((waiting, None));
        }
        let backup = existing.clone();
        if r.pending.is_some() && policy.order() == UpdateOrder::StartFirst {
            rec.hand_over = HandOver::Wanted;
        }
        let mut status = self.app_or_own_failure(rec, spec, existing).await?;
        let now_ms = wall_ms();
        let Some(pending) = r.pending.as_mut() else {
            // recorded at a poll tick: a scheduled pass would read every fact afresh
            self.first_version(rec, r, spec, &desired, &status, &policy);
            return Ok((status, None));
        };
        match verdict(pending, &status, &policy, spec, now_ms) {
            Verdict::Waiting(at) => {
                status.rollout = Some(RolloutReport {
                    state: RolloutState::RollingOut,
                    generation: pending.generation,
                    deadline_at_ms: at,
                    ..RolloutReport::default()
                });
                Ok((status, at.map(instant_of)))
            }
            Verdict::Good => {
                let generation = pending.generation;
                let handed_over = rec.hand_over == HandOver::Beside;
                let how = if handed_over {
                    "; the previous container served until now and is stopped"
                } else {
                    ""
                };
                self.events.info(
                    &spec.name,
                    format!(
                        "generation {generation} rolled out: the new version proved itself{how}"
                    ),
                );
                r.good = Some(good_of(spec, &desired, &status, generation));
                r.pending = None;
                if handed_over {
                    // the previous container is an extra now, and the new one takes its name
                    rec.hand_over = HandOver::Off;
                    status = self.app_or_own_failure(rec, spec, backup).await?;
                }
                Ok((status, None))
            }
            Verdict::Failed(error) => {
                let report = RolloutReport {
                    state: if policy.auto_revert() {
                        RolloutState::RolledBack
                    } else {
                        RolloutState::Failed
                    },
                    generation: pending.generation,
                    deadline_at_ms: None,
                    error: Some(error.clone()),
                    cause: cause(rec, &status),
                    health: status.health.clone(),
                    at_ms: Some(now_ms),
                };
                r.pending = None;
                let failed = Failed {
                    identity: desired,
                    report,
                };
                r.failed = Some(failed.clone());
                let back = r.good.as_ref().map_or(0, |g| g.generation);
                if policy.auto_revert() {
                    self.events.warn(
                        &spec.name,
                        format!(
                            "generation {} rolled back to generation {back}: the new version {error}",
                            failed.report.generation
                        ),
                    );
                    tracing::warn!(app = %spec.name, generation = failed.report.generation, back, error = %error, "rollout failed: rolling back");
                    // the failed container goes first (one whose start failed is in no listing),
                    // and its counters are not the previous version's
                    if let Some(id) = &status.container_id {
                        self.remove(id).await?;
                    }
                    *rec = AppMemory::default();
                    let status = self.after_failure(rec, r, spec, &failed, backup).await?;
                    return Ok((status, None));
                }
                self.events.warn(
                    &spec.name,
                    format!(
                        "generation {} failed: the new version {error}; update.auto_revert is off, it is left as it is",
                        failed.report.generation
                    ),
                );
                status.rollout = Some(failed.report);
                Ok((status, None))
            }
        }
    }

    /// After a failed rollout: the previous version runs again (its status says what failed),
    /// or, without auto-revert or a previous version, the desired one as it is.
    async fn after_failure(
        &mut self,
        rec: &mut AppMemory,
        r: &Record,
        spec: &AppSpec,
        failed: &Failed,
        existing: Vec<ContainerSummary>,
    ) -> Result<AppStatus, EngineError> {
        let good = r.good.as_ref().filter(|_| {
            failed.report.state == RolloutState::RolledBack
                && spec.update.unwrap_or_default().auto_revert()
        });
        let Some(good) = good else {
            let mut status = self.app_or_own_failure(rec, spec, existing).await?;
            let mut report = failed.report.clone();
            report.state = RolloutState::Failed;
            status.rollout = Some(report);
            return Ok(status);
        };
        // a hand-over that failed never stopped the previous container: it runs on as it is
        let previous_runs = existing.iter().any(|c| {
            let theirs = Identity::from_labels(&c.labels);
            c.state == ContainerState::Running
                && theirs.spec_hash == good.identity.spec_hash
                && theirs.restart_token == good.identity.restart_token
        });
        let revert = if previous_runs {
            good.spec.clone()
        } else {
            good.revert_spec()
        };
        let mut status = self.app_or_own_failure(rec, &revert, existing).await?;
        if good.spec.image.is_some() {
            status.image.clone_from(&good.spec.image);
        }
        status.running_generation = Some(good.generation);
        status.rollout = Some(failed.report.clone());
        Ok(status)
    }

    /// A version with nothing to go back to (the first one, or after a lost record) becomes
    /// the way back once it has run `min_healthy_secs` (healthy, with a health check). Also
    /// follows a plain restart or a GPU change waiting for one.
    fn first_version(
        &self,
        rec: &AppMemory,
        r: &mut Record,
        spec: &AppSpec,
        desired: &Identity,
        status: &AppStatus,
        policy: &UpdatePolicy,
    ) {
        if status.state != AppState::Running
            || status
                .health
                .as_ref()
                .is_some_and(|h| h.state != HealthState::Healthy)
        {
            return;
        }
        if let Some(good) = r.good.as_mut() {
            // the same version (a plain restart, a GPU change waiting for one): keep it current
            if good.spec != spec.without_secrets() || good.identity != *desired {
                good.spec = spec.without_secrets();
                good.identity = desired.clone();
            }
            if status.image_id.is_some() && good.image_id != status.image_id {
                good.image_id.clone_from(&status.image_id);
            }
            return;
        }
        let Some(since) = rec.guard.running_since else {
            return;
        };
        let proven = since + std::time::Duration::from_secs(u64::from(policy.min_healthy_secs()));
        if self.now >= proven {
            r.good = Some(good_of(spec, desired, status, self.generation));
        }
    }

    /// A rollout that has not replaced the previous version yet while the app holds its update
    /// lock: the previous version as it runs, `update_waiting_lock` with the lock's deadline.
    /// `None` when the update may go on (no lock, an expired one: warned once, or nothing of
    /// the previous version running to keep).
    async fn waiting_for_lock(
        &mut self,
        rec: &mut AppMemory,
        r: &mut Record,
        spec: &AppSpec,
        existing: &[ContainerSummary],
    ) -> Result<Option<AppStatus>, EngineError> {
        let (Some(good), Some(pending)) = (r.good.as_ref(), r.pending.as_mut()) else {
            return Ok(None);
        };
        let previous_runs = pending.container_id.is_none()
            && existing.iter().any(|c| {
                let theirs = Identity::from_labels(&c.labels);
                theirs.spec_hash == good.identity.spec_hash
                    && theirs.restart_token == good.identity.restart_token
            });
        if !previous_runs {
            return Ok(None);
        }
        let max = spec.update.unwrap_or_default().max_lock_secs();
        let now = std::time::SystemTime::now();
        let until_ms = match update_lock::check(&self.config.state_dir, &spec.name, max, now) {
            Lock::Free => return Ok(None),
            Lock::Expired { age_secs } => {
                if !pending.lock_expired {
                    pending.lock_expired = true;
                    self.events.warn(
                        &spec.name,
                        format!("the app has held /run/odac/update.lock for {age_secs} s, more than update.max_lock_secs ({max} s): updating anyway"),
                    );
                }
                return Ok(None);
            }
            Lock::Held { until_ms } => until_ms,
        };
        if !pending.lock_seen {
            pending.lock_seen = true;
            self.events.info(
                &spec.name,
                format!(
                    "generation {} waits: the app holds /run/odac/update.lock",
                    pending.generation
                ),
            );
        }
        let generation = pending.generation;
        let previous = good.spec.clone();
        let running = good.generation;
        let mut status = self
            .app_or_own_failure(rec, &previous, existing.to_vec())
            .await?;
        status.running_generation = Some(running);
        status.rollout = Some(RolloutReport {
            state: RolloutState::UpdateWaitingLock,
            generation,
            deadline_at_ms: Some(until_ms),
            ..RolloutReport::default()
        });
        Ok(Some(status))
    }

    /// [`Pass::app`], an engine error about this app's request being its own failure.
    async fn app_or_own_failure(
        &mut self,
        rec: &mut AppMemory,
        spec: &AppSpec,
        existing: Vec<ContainerSummary>,
    ) -> Result<AppStatus, EngineError> {
        match self.app(rec, spec, existing).await {
            Ok(status) => Ok(status),
            Err(e) => self.own_failure(rec, spec, e).await,
        }
    }
}

/// Whether a restart of `spec` may bring another image: the next commit of a git source, or
/// a pull that may find a re-pushed tag.
fn image_may_change(spec: &AppSpec) -> bool {
    spec.source.is_some() || spec.pull == odac_protocol::PullPolicy::Always
}

/// The way back made of `spec` as it runs now.
fn good_of(spec: &AppSpec, identity: &Identity, status: &AppStatus, generation: u64) -> Good {
    Good {
        spec: spec.without_secrets(),
        identity: identity.clone(),
        image_id: status.image_id.clone(),
        generation,
    }
}

/// How the failed version's last run ended: the crash part of its status, else its last
/// exit as first seen (a crash the agent restarted from before this pass looked); never a
/// retry time, it is not retried.
fn cause(rec: &AppMemory, status: &AppStatus) -> Option<odac_protocol::CrashInfo> {
    let mut crash = status.crash.clone().or_else(|| {
        rec.last_exit
            .as_ref()
            .map(|e| diagnosis::crash_info(e, &rec.guard, None))
    })?;
    crash.next_retry_at_ms = None;
    Some(crash)
}

pub(super) mod hand_over;
pub(super) mod rollout_book;
#[cfg(test)]
mod tests;
pub(super) mod update_lock;
mod verdict;
