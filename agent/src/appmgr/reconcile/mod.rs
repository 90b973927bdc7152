//! One reconcile pass and its parts, on top of the pass's shared state (`appmgr/pass.rs`):
//! [`reconciler`] (the pass: make the engine's containers match the desired state), the
//! policy verdict of an app ([`admit`]), an up-to-date container ([`existing`]), a missing
//! one made ([`create`], with its named [`volumes`]), an app's image as the pass sees it
//! ([`image`]: pulled; [`source`]: built from git), the crash counters a pass keeps across
//! agent restarts ([`crashbook`]), an app on an unhealthy GPU ([`unhealthy`]), and the apps
//! that left the desired state ([`removal`]).

pub(super) mod admit;
pub(super) mod crashbook;
pub(super) mod create;
pub(super) mod existing;
pub(super) mod image;
pub(super) mod reconciler;
pub(super) mod removal;
pub(super) mod source;
pub(super) mod unhealthy;
pub(super) mod volumes;
