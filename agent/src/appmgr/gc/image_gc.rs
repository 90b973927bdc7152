//! Image clean-up: the images this agent pulled or built
//! ([`image_book`](crate::appmgr::images::image_book), and only those) are removed once no app of
//! its instance uses them for `apps.image_gc_delay_secs`; an image an app could roll back to (the
//! previous version while a rollout is under way, the version running after a rollback) counts as
//! used. When the engine's data root has less than `apps.image_gc_min_free_mb` free, unused images
//! go at once, the one unused longest first, until there is enough again. Removal goes through the
//! engine without force: an image a container still uses (another agent's, the user's) or one
//! the user tagged as well is refused by the engine, which is "in use", not an error, and it
//! is tried again after another delay. Each removal is an event naming the image, the space it
//! gave back and why (`delay` or `low_disk`).
//!
//! A sweep follows every pass. The delay is kept on the monotonic clock (from the record's
//! wall-clock times after a restart); the data root's free space is read at most every
//! [`DISK_EVERY`].

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use odac_protocol::AppStatus;
use tokio::time::Instant;

use crate::appmgr::crash::diagnosis::wall_ms;
use crate::appmgr::images::image_book::{self, Book, Kept, Origin};
use crate::appmgr::images::pull_disk::free_bytes;
use crate::appmgr::pass::Pass;
use crate::appmgr::settings::AppManagerConfig;
use crate::appmgr::state::events::{EventTx, ImageRemoved, RemovalReason};
use odac_host::engine::{ContainerEngine, EngineError};

/// How often the data root's free space is read.
pub(crate) const DISK_EVERY: Duration = Duration::from_secs(30);

/// How often a data root that could not be read is asked for again.
pub(crate) const ROOT_RETRY: Duration = Duration::from_secs(600);

/// How stale a used image's `last_used_ms` may get before it is written again.
const LAST_USED_EVERY_MS: u64 = 60_000;

/// The data root as far as the low-disk trigger knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DataRoot {
    /// Not asked yet.
    Unknown,
    /// Its path.
    At(PathBuf),
    /// The low-disk trigger is off, and why (for `doctor`).
    Unreadable(String),
}

/// The clean-up's state between passes.
#[derive(Debug)]
pub(crate) struct ImageGc {
    book: Option<Book>,
    saved: Book,
    /// Since when each unused image of the record has been unused.
    unused_since: BTreeMap<String, Instant>,
    /// The images in use at the last sweep.
    in_use: BTreeSet<String>,
    /// The image each app ran when its status last named one: a status without one (a new
    /// image being pulled or built while the previous container runs) keeps it in use.
    app_images: BTreeMap<String, String>,
    root: DataRoot,
    /// When the data root was last asked for.
    root_asked: Option<Instant>,
    next_disk_check: Option<Instant>,
}

impl Default for ImageGc {
    fn default() -> Self {
        Self {
            book: None,
            saved: Book::new(),
            unused_since: BTreeMap::new(),
            in_use: BTreeSet::new(),
            app_images: BTreeMap::new(),
            root: DataRoot::Unknown,
            root_asked: None,
            next_disk_check: None,
        }
    }
}

/// What a sweep needs from the pass.
pub(crate) struct SweepInput<'a> {
    pub config: &'a AppManagerConfig,
    pub engine: &'a dyn ContainerEngine,
    pub events: &'a EventTx,
    /// The statuses of the pass (the images apps run).
    pub statuses: &'a [AppStatus],
    /// Images apps could roll back to.
    pub rollback: BTreeSet<String>,
    /// Images the agent pulled since the last sweep: (app, reference, id).
    pub pulled: Vec<(String, String, String)>,
}

impl ImageGc {
    /// Record new images, mark the used ones, remove what is due; see the module
    /// documentation. Only an unreachable engine is an error.
    pub(crate) async fn sweep(&mut self, input: SweepInput<'_>) -> Result<(), EngineError> {
        let dir = input.config.state_dir.clone();
        let now = Instant::now();
        let wall = wall_ms();
        let instance = input.config.instance.clone();
        let book = self.book.get_or_insert_with(|| {
            let book = image_book::load(&dir);
            self.saved = book.clone();
            book
        });
        let new = |app: &str, reference: &str, origin| Kept {
            app: app.to_owned(),
            reference: reference.to_owned(),
            instance: instance.clone(),
            origin,
            first_used_ms: wall,
            last_used_ms: wall,
        };
        for (app, reference, id) in &input.pulled {
            book.entry(id.clone())
                .or_insert_with(|| new(app, reference, Origin::Pulled));
        }
        self.app_images
            .retain(|app, _| input.statuses.iter().any(|s| &s.name == app));
        for s in input.statuses {
            let Some(id) = &s.image_id else { continue };
            self.app_images.insert(s.name.clone(), id.clone());
            if s.commit.is_some() {
                let reference = s.image.clone().unwrap_or_else(|| id.clone());
                book.entry(id.clone())
                    .or_insert_with(|| new(&s.name, &reference, Origin::Built));
            }
        }
        let mut used = input.rollback.clone();
        used.extend(self.app_images.values().cloned());
        for (id, kept) in book.iter_mut() {
            if used.contains(id) {
                self.unused_since.remove(id);
                self.in_use.insert(id.clone());
                if wall.saturating_sub(kept.last_used_ms) >= LAST_USED_EVERY_MS {
                    kept.last_used_ms = wall;
                }
            } else if self.in_use.remove(id) {
                // unused from now on
                kept.last_used_ms = wall;
                self.unused_since.insert(id.clone(), now);
            } else {
                // unused since before this agent started: as its record says
                let ago = Duration::from_millis(wall.saturating_sub(kept.last_used_ms));
                self.unused_since
                    .entry(id.clone())
                    .or_insert_with(|| now.checked_sub(ago).unwrap_or(now));
            }
        }
        self.unused_since.retain(|id, _| book.contains_key(id));
        self.in_use.retain(|id| book.contains_key(id));
        let result = self.remove_due(&input, now).await;
        self.save(&dir);
        result
    }

    /// The unused images of this instance, the one unused longest first.
    fn unused(&self, instance: &str) -> Vec<(String, Instant)> {
        let book = self.book.as_ref();
        let mut out: Vec<(String, Instant)> = self
            .unused_since
            .iter()
            .filter(|(id, _)| {
                book.and_then(|b| b.get(*id))
                    .is_some_and(|k| k.instance == instance)
            })
            .map(|(id, at)| (id.clone(), *at))
            .collect();
        out.sort_by_key(|(id, at)| (*at, id.clone()));
        out
    }

    async fn remove_due(
        &mut self,
        input: &SweepInput<'_>,
        now: Instant,
    ) -> Result<(), EngineError> {
        let delay = Duration::from_secs(input.config.image_gc_delay_secs);
        let unused = self.unused(&input.config.instance);
        for (id, since) in &unused {
            if now.saturating_duration_since(*since) >= delay {
                self.remove(input, id, RemovalReason::Delay, now).await?;
            }
        }
        let min_free = input.config.image_gc_min_free_mb.saturating_mul(1_000_000);
        if min_free == 0 || self.next_disk_check.is_some_and(|at| now < at) {
            return Ok(());
        }
        self.next_disk_check = Some(now + DISK_EVERY);
        let Some(root) = self.root(input.engine, now).await? else {
            return Ok(());
        };
        for (id, _) in self.unused(&input.config.instance) {
            match free_bytes(&root) {
                Ok(free) if free >= min_free => return Ok(()),
                Ok(_) => {}
                Err(e) => {
                    self.root = DataRoot::Unreadable(format!(
                        "the engine's data root cannot be read from here ({e}): no image clean-up on low disk"
                    ));
                    return Ok(());
                }
            }
            self.remove(input, &id, RemovalReason::LowDisk, now).await?;
        }
        Ok(())
    }

    /// The engine's data root, asked once (again every [`ROOT_RETRY`] while it cannot be
    /// read); `None` (logged) when the engine names none or it cannot be read from here.
    async fn root(
        &mut self,
        engine: &dyn ContainerEngine,
        now: Instant,
    ) -> Result<Option<PathBuf>, EngineError> {
        let retry = matches!(self.root, DataRoot::Unreadable(_))
            && self.root_asked.is_none_or(|at| now >= at + ROOT_RETRY);
        if self.root == DataRoot::Unknown || retry {
            self.root_asked = Some(now);
            self.root = read_root(engine).await?;
            if let DataRoot::Unreadable(why) = &self.root {
                tracing::info!("{why}");
            }
        }
        Ok(match &self.root {
            DataRoot::At(root) => Some(root.clone()),
            _ => None,
        })
    }

    /// Remove image `id` of the record (no force). Gone: forgotten. In use or tagged by
    /// someone else (the engine's conflict): tried again after another delay.
    async fn remove(
        &mut self,
        input: &SweepInput<'_>,
        id: &str,
        reason: RemovalReason,
        now: Instant,
    ) -> Result<(), EngineError> {
        let Some(kept) = self.book.as_ref().and_then(|b| b.get(id)).cloned() else {
            return Ok(());
        };
        let bytes = match input.engine.image_info(id).await {
            Ok(info) => info.size,
            Err(e) if e.is_unavailable() => return Err(e),
            Err(e) if e.is_not_found() => {
                self.forget(id);
                return Ok(());
            }
            Err(_) => 0,
        };
        match input.engine.remove_image(id, false).await {
            Ok(()) => {
                self.forget(id);
                input.events.image_removed(
                    &kept.app,
                    ImageRemoved {
                        image: id.to_owned(),
                        reference: kept.reference.clone(),
                        bytes,
                        reason,
                    },
                );
                Ok(())
            }
            Err(e) if e.is_unavailable() => Err(e),
            Err(e) if e.is_not_found() => {
                self.forget(id);
                Ok(())
            }
            Err(e) => {
                if matches!(e, EngineError::Conflict(_)) {
                    tracing::info!(image = %id, reference = %kept.reference, error = %e, "image kept: a container uses it or it has other tags");
                } else {
                    tracing::warn!(image = %id, reference = %kept.reference, error = %e, "could not remove the image");
                }
                // tried again after another delay
                self.unused_since.insert(id.to_owned(), now);
                Ok(())
            }
        }
    }

    fn forget(&mut self, id: &str) {
        if let Some(book) = self.book.as_mut() {
            book.remove(id);
        }
        self.unused_since.remove(id);
    }

    fn save(&mut self, dir: &std::path::Path) {
        let Some(book) = self.book.as_ref() else {
            return;
        };
        if *book != self.saved && image_book::save(dir, book) {
            self.saved = book.clone();
        }
    }
}

/// The engine's data root (`DockerRootDir`) if its free space can be read from here, else
/// why the low-disk clean-up is off; only an unreachable engine is an error.
pub(crate) async fn read_root(engine: &dyn ContainerEngine) -> Result<DataRoot, EngineError> {
    Ok(match engine.data_root().await {
        Ok(Some(root)) => match free_bytes(std::path::Path::new(&root)) {
            Ok(_) => DataRoot::At(PathBuf::from(root)),
            Err(e) => DataRoot::Unreadable(format!(
                "the engine's data root cannot be read from here ({e}): no image clean-up on low disk"
            )),
        },
        Ok(None) => DataRoot::Unreadable(
            "the engine names no data root: no image clean-up on low disk".into(),
        ),
        Err(e) if e.is_unavailable() => return Err(e),
        Err(e) => DataRoot::Unreadable(format!(
            "the engine did not name its data root ({e}): no image clean-up on low disk"
        )),
    })
}

impl Pass<'_> {
    /// Remove the images built for an app that is no longer desired (best effort).
    pub(in crate::appmgr) async fn remove_built_images(
        &mut self,
        app: &str,
    ) -> Result<(), EngineError> {
        let filter = format!("{}={app}", odac_host::names::APP);
        let images = match self.engine.list_images_by_label(&filter).await {
            Ok(images) => images,
            Err(e) if e.is_unavailable() => return Err(e),
            Err(_) => return Ok(()),
        };
        for image in images.iter().filter(|i| {
            i.labels.get(odac_host::names::INSTANCE) == Some(&self.config.instance)
                && i.labels.contains_key(odac_host::names::GIT_COMMIT)
        }) {
            match self.engine.remove_image(&image.id, false).await {
                Ok(()) => {
                    tracing::info!(app = %app, image = %image.id, "removed the image of an app no longer desired")
                }
                Err(e) if e.is_unavailable() => return Err(e),
                Err(e) => {
                    tracing::warn!(app = %app, image = %image.id, error = %e, "could not remove the image of an app no longer desired")
                }
            }
        }
        Ok(())
    }
}
