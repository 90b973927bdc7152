//! One build of a git-sourced app: fetch the commit, reuse the image when this commit was
//! built already (same app, instance and Dockerfile), else build `odac/<app>:<short-commit>`
//! through the engine, labelled with the app, the instance and the commit; then prune the
//! app's older images, keeping the newest `keep_images`. Progress and failure are events.

use std::collections::BTreeMap;
use std::path::PathBuf;

use odac_protocol::GitSource;
use tokio::time::Instant;

use super::git::{self, FetchRequest};
use crate::appmgr::settings::BuildConfig;
use crate::appmgr::state::clip::clip;
use crate::appmgr::state::events::EventTx;
use odac_host::engine::{BuildOutput, ContainerEngine, EngineError, ImageSummary};

/// Length of the commit prefix in image tags.
pub const SHORT_COMMIT: usize = 12;
/// Lines of build output put in events (the status keeps more).
const EVENT_TAIL_LINES: usize = 5;

/// Everything one build needs.
#[derive(Debug, Clone)]
pub struct BuildRequest {
    /// App name.
    pub app: String,
    /// The manager's instance.
    pub instance: String,
    /// The source (validated).
    pub source: GitSource,
    /// Scratch directory for the fetch.
    pub dir: PathBuf,
    /// Bounds and pruning.
    pub config: BuildConfig,
    /// Extra labels for the image.
    pub extra_labels: BTreeMap<String, String>,
}

/// A built (or reused) image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Built {
    /// The tag to run, `odac/<app>:<short-commit>`.
    pub image: String,
    /// Image id.
    pub image_id: String,
    /// Full commit id.
    pub commit: String,
}

/// A failed build: one line of why, and the build output's tail when the builder ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildFailure {
    /// Why (names the URL, ref or Dockerfile; never a secret).
    pub message: String,
    /// The last lines of the build output.
    pub log_tail: Option<String>,
}

/// First `SHORT_COMMIT` characters of a commit id.
pub fn short(commit: &str) -> &str {
    commit.get(..SHORT_COMMIT).unwrap_or(commit)
}

/// The image tag of an app at a commit.
pub fn image_tag(app: &str, commit: &str) -> String {
    format!("odac/{app}:{}", short(commit))
}

fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Run one build; see the module documentation.
pub(crate) async fn run(
    req: &BuildRequest,
    engine: &dyn ContainerEngine,
    events: &EventTx,
) -> Result<Built, BuildFailure> {
    let result = build(req, engine, events).await;
    if let Err(f) = &result {
        let message = match &f.log_tail {
            Some(tail) if !tail.is_empty() => {
                format!("{}\n{}", f.message, last_lines(tail, EVENT_TAIL_LINES))
            }
            _ => f.message.clone(),
        };
        events.error(&req.app, clip(format!("build failed: {message}")));
    }
    result
}

async fn build(
    req: &BuildRequest,
    engine: &dyn ContainerEngine,
    events: &EventTx,
) -> Result<Built, BuildFailure> {
    let source = &req.source;
    let fetched = fetch_source(req, events).await?;
    let commit = fetched.commit;
    let tag = image_tag(&req.app, &commit);
    let dockerfile = source
        .dockerfile
        .as_deref()
        .unwrap_or("Dockerfile")
        .to_owned();
    if let Some(image) = reusable(req, engine, &commit, &tag, &dockerfile).await {
        events.info(
            &req.app,
            format!("commit {} unchanged: reusing image {tag}", short(&commit)),
        );
        return Ok(Built {
            image: tag,
            image_id: image.id,
            commit,
        });
    }
    events.info(
        &req.app,
        format!(
            "building image {tag} from commit {} ({} KiB context)",
            short(&commit),
            fetched.context.len() / 1024
        ),
    );
    let labels = image_labels(req, &commit, &dockerfile);
    let built = build_image(req, engine, &tag, fetched.context, &dockerfile, &labels).await?;
    events.info(
        &req.app,
        format!("built image {tag} from commit {}", short(&commit)),
    );
    prune(req, engine, events, &built.image_id).await;
    Ok(Built {
        image: tag,
        image_id: built.image_id,
        commit,
    })
}

/// Fetches the source's commit and build context within the configured git timeout.
async fn fetch_source(req: &BuildRequest, events: &EventTx) -> Result<git::Fetched, BuildFailure> {
    let source = &req.source;
    let what = match (&source.rev, &source.branch) {
        (Some(rev), _) => format!("rev {rev}"),
        (None, Some(branch)) => format!("branch {branch}"),
        (None, None) => "default branch".to_owned(),
    };
    events.info(
        &req.app,
        format!("fetching {} ({what})", source.display_url()),
    );
    let fetch = FetchRequest {
        source,
        git: &req.config.git,
        dir: &req.dir,
        deadline: Instant::now() + req.config.git_timeout(),
        timeout_secs: req.config.git_timeout().as_secs(),
        max_context_bytes: req.config.max_context_bytes,
    };
    git::fetch(&fetch).await.map_err(|e| BuildFailure {
        message: git::redact(&e.to_string(), source),
        log_tail: None,
    })
}

/// The labels of an image built for `req` from `commit`.
fn image_labels(req: &BuildRequest, commit: &str, dockerfile: &str) -> BTreeMap<String, String> {
    let mut image_labels = req.extra_labels.clone();
    image_labels.insert(odac_host::names::INSTANCE.into(), req.instance.clone());
    image_labels.insert(odac_host::names::APP.into(), req.app.clone());
    image_labels.insert(odac_host::names::GIT_COMMIT.into(), commit.to_owned());
    image_labels.insert(odac_host::names::GIT_URL.into(), req.source.display_url());
    image_labels.insert(
        odac_host::names::GIT_DOCKERFILE.into(),
        dockerfile.to_owned(),
    );
    image_labels
}

/// Builds `tag` through the engine within the configured build timeout.
async fn build_image(
    req: &BuildRequest,
    engine: &dyn ContainerEngine,
    tag: &str,
    context: Vec<u8>,
    dockerfile: &str,
    labels: &BTreeMap<String, String>,
) -> Result<BuildOutput, BuildFailure> {
    let bound = req.config.build_timeout();
    tokio::time::timeout(bound, engine.build_image(tag, context, dockerfile, labels))
        .await
        .map_err(|_| BuildFailure {
            message: format!(
                "the image build of {tag} did not finish within {} s",
                bound.as_secs()
            ),
            log_tail: None,
        })?
        .map_err(|e| match e {
            EngineError::BuildFailed { message, log_tail } => BuildFailure {
                message: format!("image build of {tag} failed: {message}"),
                log_tail: Some(log_tail),
            },
            other => BuildFailure {
                message: format!("image build of {tag} failed: {}", other.engine_message()),
                log_tail: None,
            },
        })
}

/// Whether `image` is one of this app's, made by this manager instance.
fn ours(req: &BuildRequest, image: &ImageSummary) -> bool {
    image.labels.get(odac_host::names::INSTANCE) == Some(&req.instance)
        && image.labels.get(odac_host::names::APP) == Some(&req.app)
        && image.labels.contains_key(odac_host::names::GIT_COMMIT)
}

/// An image of this app already built from `commit` with the same Dockerfile and tag.
async fn reusable(
    req: &BuildRequest,
    engine: &dyn ContainerEngine,
    commit: &str,
    tag: &str,
    dockerfile: &str,
) -> Option<ImageSummary> {
    let filter = format!("{}={commit}", odac_host::names::GIT_COMMIT);
    let images = engine.list_images_by_label(&filter).await.ok()?;
    images.into_iter().find(|i| {
        ours(req, i)
            && i.labels
                .get(odac_host::names::GIT_DOCKERFILE)
                .map(String::as_str)
                == Some(dockerfile)
            && i.tags.iter().any(|t| t == tag)
    })
}

/// Remove the app's images beyond the newest `keep_images` (the one just built always
/// counts as the newest). An image a container still uses is left for the next prune.
pub(crate) async fn prune(
    req: &BuildRequest,
    engine: &dyn ContainerEngine,
    events: &EventTx,
    newest_id: &str,
) {
    let filter = format!("{}={}", odac_host::names::APP, req.app);
    let images = match engine.list_images_by_label(&filter).await {
        Ok(images) => images,
        Err(e) => {
            events.warn(&req.app, format!("could not list old images: {e}"));
            return;
        }
    };
    let mut mine: Vec<ImageSummary> = images.into_iter().filter(|i| ours(req, i)).collect();
    mine.sort_by(|a, b| {
        (b.id == newest_id)
            .cmp(&(a.id == newest_id))
            .then(b.created.cmp(&a.created))
            .then(b.id.cmp(&a.id))
    });
    for old in mine.iter().skip(req.config.keep_images.max(1)) {
        let name = old.tags.first().cloned().unwrap_or_else(|| old.id.clone());
        match engine.remove_image(&old.id, false).await {
            Ok(()) => events.info(&req.app, format!("pruned old image {name}")),
            Err(EngineError::Conflict(m)) => {
                tracing::info!(app = %req.app, image = %name, "old image still in use: kept for now ({m})");
            }
            Err(e) if e.is_not_found() => {}
            Err(e) => events.warn(&req.app, format!("could not prune old image {name}: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_use_twelve_hex_digits() {
        assert_eq!(
            image_tag("web", "0123456789abcdef0123456789abcdef01234567"),
            "odac/web:0123456789ab"
        );
        assert_eq!(short("abc"), "abc");
        assert_eq!(last_lines("a\nb\nc", 2), "b\nc");
    }
}
