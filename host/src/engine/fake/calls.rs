//! The call record of [`super::FakeEngine`]: [`Op`] names an operation (to aim
//! `fail_next` at or filter calls), [`EngineCall`] is one recorded call with its arguments.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::engine::types::ContainerSpec;

/// An engine operation, to aim [`FakeEngine::fail_next`] at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// `capabilities`
    Capabilities,
    /// `image_exists`
    ImageExists,
    /// `import_image`
    ImportImage,
    /// `create`
    Create,
    /// `start`
    Start,
    /// `stop`
    Stop,
    /// `remove`
    Remove,
    /// `rename`
    Rename,
    /// `inspect`
    Inspect,
    /// `list_by_label`
    ListByLabel,
    /// `list_all`
    ListAll,
    /// `ensure_volume`
    EnsureVolume,
    /// `volume_labels`
    InspectVolume,
    /// `remove_volume`
    RemoveVolume,
    /// `logs_tail`
    LogsTail,
    /// `build_image`
    BuildImage,
    /// `list_images_by_label`
    ListImagesByLabel,
    /// `remove_image`
    RemoveImage,
    /// `log_stream`
    LogStream,
    /// `pull_image`
    PullImage,
    /// `image_info`
    ImageInfo,
    /// `exec`
    Exec,
}

/// One recorded call, with its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineCall {
    /// `capabilities()`
    Capabilities,
    /// `image_exists(image)`
    ImageExists(String),
    /// `import_image(tag, ..)` with the tarball's size and the changes.
    ImportImage {
        /// Image tag.
        tag: String,
        /// Tarball size in bytes.
        bytes: usize,
        /// Dockerfile instructions.
        changes: Vec<String>,
    },
    /// `create(spec)`
    Create(Box<ContainerSpec>),
    /// `start(id)`
    Start(String),
    /// `stop(id, timeout)`
    Stop(String, Duration),
    /// `remove(id, force)`
    Remove(String, bool),
    /// `rename(id, name)`
    Rename(String, String),
    /// `inspect(id)`
    Inspect(String),
    /// `list_by_label(label)`
    ListByLabel(String),
    /// `list_all()`
    ListAll,
    /// `ensure_volume(name, labels)`
    EnsureVolume(String, BTreeMap<String, String>),
    /// `volume_labels(name)`
    InspectVolume(String),
    /// `remove_volume(name)`
    RemoveVolume(String),
    /// `logs_tail(id, lines)`
    LogsTail(String, usize),
    /// `build_image(tag, context, dockerfile, labels)` with the paths in the context.
    BuildImage {
        /// Image tag.
        tag: String,
        /// Paths in the context tarball, in order.
        files: Vec<String>,
        /// Dockerfile path.
        dockerfile: String,
        /// Image labels.
        labels: BTreeMap<String, String>,
    },
    /// `list_images_by_label(label)`
    ListImagesByLabel(String),
    /// `remove_image(image, force)`
    RemoveImage(String, bool),
    /// `log_stream(id, options)`
    LogStream(String, crate::engine::log_stream::LogStreamOptions),
    /// `pull_image(image, auth, ..)` with the credentials' user name (never the password).
    PullImage {
        /// Image reference.
        image: String,
        /// User name of the credentials given, if any.
        username: Option<String>,
    },
    /// `image_info(image)`
    ImageInfo(String),
    /// `exec(container, spec)`
    Exec(String, crate::engine::exec::ExecSpec),
}

impl EngineCall {
    /// The operation of this call.
    pub fn op(&self) -> Op {
        match self {
            Self::Capabilities => Op::Capabilities,
            Self::ImageExists(_) => Op::ImageExists,
            Self::ImportImage { .. } => Op::ImportImage,
            Self::Create(_) => Op::Create,
            Self::Start(_) => Op::Start,
            Self::Stop(..) => Op::Stop,
            Self::Remove(..) => Op::Remove,
            Self::Rename(..) => Op::Rename,
            Self::Inspect(_) => Op::Inspect,
            Self::ListByLabel(_) => Op::ListByLabel,
            Self::ListAll => Op::ListAll,
            Self::EnsureVolume(..) => Op::EnsureVolume,
            Self::InspectVolume(_) => Op::InspectVolume,
            Self::RemoveVolume(_) => Op::RemoveVolume,
            Self::LogsTail(..) => Op::LogsTail,
            Self::BuildImage { .. } => Op::BuildImage,
            Self::ListImagesByLabel(_) => Op::ListImagesByLabel,
            Self::RemoveImage(..) => Op::RemoveImage,
            Self::LogStream(..) => Op::LogStream,
            Self::PullImage { .. } => Op::PullImage,
            Self::ImageInfo(_) => Op::ImageInfo,
            Self::Exec(..) => Op::Exec,
        }
    }
}
