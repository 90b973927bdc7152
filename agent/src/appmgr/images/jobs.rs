//! The background-job table shared by builds ([`build`](super::build)) and pulls
//! ([`pull`](super::pull)): at most one job per app, for one key (what the job is for). A
//! poll for the key of the app's job answers "running" (with what the job shows while it
//! runs), "ready" or the failure — handed out once, so the caller acts on it once; a poll
//! for another key (or with no job) starts a new job, aborting a running one.

use odac_host::lock::lock;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tokio::task::AbortHandle;

/// The answer of [`Jobs::poll`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::appmgr) enum Polled<T, E, P> {
    /// A job is running (or was just started); what it shows so far.
    Running(P),
    /// The job succeeded.
    Ready(T),
    /// The job failed; handed out once.
    Failed(E),
}

enum State<T, E, P> {
    Running(AbortHandle, P),
    Done(Result<T, E>),
}

struct Job<K, T, E, P> {
    key: K,
    state: State<T, E, P>,
}

/// The jobs by app.
type Table<K, T, E, P> = Arc<Mutex<BTreeMap<String, Job<K, T, E, P>>>>;

/// The jobs of one kind, by app; see the module documentation. Cheap to clone: all clones
/// share one table.
pub(in crate::appmgr) struct Jobs<K, T, E, P = ()> {
    table: Table<K, T, E, P>,
    /// What a replaced running job is called in the log.
    what: &'static str,
}

impl<K, T, E, P> Clone for Jobs<K, T, E, P> {
    fn clone(&self) -> Self {
        Self {
            table: Arc::clone(&self.table),
            what: self.what,
        }
    }
}

impl<K: PartialEq, T: Clone, E, P: Clone> Jobs<K, T, E, P> {
    /// An empty table of jobs called `what` (`build`, `pull`) in the log.
    pub(in crate::appmgr) fn new(what: &'static str) -> Self {
        Self {
            table: Arc::new(Mutex::new(BTreeMap::new())),
            what,
        }
    }

    /// The job of `app` at `key`. When none is running or done for that key, `start` runs
    /// (a running job for another key is aborted first) and returns the new job's abort
    /// handle and what it shows while it runs; the job reports with [`Jobs::finish`].
    pub(in crate::appmgr) fn poll(
        &self,
        app: &str,
        key: K,
        start: impl FnOnce() -> (AbortHandle, P),
    ) -> Polled<T, E, P> {
        let mut table = lock(&self.table);
        if let Some(job) = table.get(app).filter(|j| j.key == key) {
            match &job.state {
                State::Running(_, shown) => return Polled::Running(shown.clone()),
                State::Done(Ok(done)) => return Polled::Ready(done.clone()),
                State::Done(Err(_)) => {
                    if let Some(Job {
                        state: State::Done(Err(failure)),
                        ..
                    }) = table.remove(app)
                    {
                        return Polled::Failed(failure);
                    }
                }
            }
        }
        if let Some(Job {
            state: State::Running(handle, _),
            ..
        }) = table.remove(app)
        {
            tracing::info!(app = %app, "spec, image or restart token changed: abandoning the running {}", self.what);
            handle.abort();
        }
        let (handle, shown) = start();
        table.insert(
            app.to_owned(),
            Job {
                key,
                state: State::Running(handle, shown.clone()),
            },
        );
        Polled::Running(shown)
    }

    /// The job of `app` at `key` ended with `result` (ignored when another job replaced it).
    pub(in crate::appmgr) fn finish(&self, app: &str, key: &K, result: Result<T, E>) {
        if let Some(job) = lock(&self.table).get_mut(app).filter(|j| j.key == *key) {
            job.state = State::Done(result);
        }
    }

    /// Forget the success of `app`'s job (its result is gone): the next poll starts again.
    pub(in crate::appmgr) fn forget_done(&self, app: &str) {
        let mut table = lock(&self.table);
        if matches!(
            table.get(app),
            Some(Job {
                state: State::Done(Ok(_)),
                ..
            })
        ) {
            table.remove(app);
        }
    }

    /// Drop the jobs of apps not in `apps`, aborting running ones.
    pub(in crate::appmgr) fn retain(&self, apps: &[&str]) {
        lock(&self.table).retain(|name, job| {
            let keep = apps.contains(&name.as_str());
            if let (false, State::Running(handle, _)) = (keep, &job.state) {
                handle.abort();
            }
            keep
        });
    }
}

#[cfg(test)]
impl<K: PartialEq, T: Clone, E, P: Clone> Jobs<K, T, E, P> {
    /// Put a job for `app` at `key` in the table (tests): running until aborted, showing
    /// `shown` (`result` `None`), or done.
    pub(in crate::appmgr) fn stage(
        &self,
        app: &str,
        key: K,
        shown: P,
        result: Option<Result<T, E>>,
    ) {
        lock(&self.table).remove(app);
        let handle = tokio::spawn(std::future::pending::<()>()).abort_handle();
        let state = match result {
            None => State::Running(handle, shown),
            Some(result) => State::Done(result),
        };
        lock(&self.table).insert(app.to_owned(), Job { key, state });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending() -> AbortHandle {
        tokio::spawn(std::future::pending::<()>()).abort_handle()
    }

    #[tokio::test]
    async fn one_job_per_key_failures_once_other_keys_replace() {
        let jobs: Jobs<u32, &str, &str, u8> = Jobs::new("test");
        let started = std::cell::Cell::new(0);
        let start = || {
            started.set(started.get() + 1);
            (pending(), 7)
        };
        assert_eq!(jobs.poll("a", 1, start), Polled::Running(7));
        assert_eq!(jobs.poll("a", 1, start), Polled::Running(7));
        assert_eq!(started.get(), 1, "a running job is not started twice");
        jobs.finish("a", &1, Err("boom"));
        assert_eq!(jobs.poll("a", 1, start), Polled::Failed("boom"));
        assert_eq!(jobs.poll("a", 1, start), Polled::Running(7));
        assert_eq!(
            started.get(),
            2,
            "a failure is handed out once, then retried"
        );
        jobs.finish("a", &2, Ok("stale"));
        jobs.finish("a", &1, Ok("img"));
        assert_eq!(jobs.poll("a", 1, start), Polled::Ready("img"));
        jobs.forget_done("a");
        assert_eq!(jobs.poll("a", 2, start), Polled::Running(7));
        assert_eq!(started.get(), 3);
        jobs.retain(&[]);
        assert_eq!(jobs.poll("a", 2, start), Polled::Running(7));
        assert_eq!(started.get(), 4, "a dropped job is gone");
    }
}
