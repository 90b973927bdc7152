//! Where app images come from, in the background so a long job never holds up a pass: the
//! one job table of builds and pulls ([`jobs`]), apps built from a git URL ([`build`]),
//! images pulled from registries on demand ([`pull`]) with their credentials
//! ([`registry_auth`]) and the disk check before a pull ([`pull_disk`]), and the book of the
//! images this agent pulled or built ([`image_book`], `images.json`), which is all the image
//! clean-up may remove. How a pass reads an app's image is `reconcile/image.rs`'s and
//! `reconcile/source.rs`'s.

pub mod build;
pub(super) mod image_book;
pub(super) mod jobs;
pub(super) mod pull;
pub(super) mod pull_disk;
pub mod registry_auth;
