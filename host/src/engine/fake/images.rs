//! The fake's image store: removing an image as a real engine does (by id or tag; one a
//! container uses is a conflict unless forced), image sizes, and what it knows of a built
//! image.

use super::{State, fake_image_id};
use crate::engine::error::EngineError;
use crate::engine::pull::ImageInfo;

/// The size of an image without one set ([`super::FakeEngine::set_image_size`]).
pub(super) const DEFAULT_SIZE: u64 = 5_000_000;

/// The size of image `reference` (a tag or an id).
pub(super) fn size_of(state: &State, reference: &str) -> u64 {
    state
        .image_sizes
        .get(reference)
        .copied()
        .unwrap_or(DEFAULT_SIZE)
}

/// What the engine knows of a built image, by id or tag.
pub(super) fn built_info(state: &State, image: &str) -> Option<ImageInfo> {
    let built = state
        .built
        .values()
        .find(|i| i.id == image || i.tags.iter().any(|t| t == image))?;
    Some(ImageInfo {
        id: built.id.clone(),
        size: built
            .tags
            .first()
            .map_or(DEFAULT_SIZE, |t| size_of(state, t)),
        ..ImageInfo::default()
    })
}

/// Remove `image` (an id or a tag) from `state`.
pub(super) fn remove(state: &mut State, image: &str, force: bool) -> Result<(), EngineError> {
    let id = state
        .built
        .values()
        .find(|i| i.id == image || i.tags.iter().any(|t| t == image))
        .map(|i| i.id.clone());
    let tags: Vec<String> = match &id {
        Some(id) => state
            .built
            .get(id)
            .map(|i| i.tags.clone())
            .unwrap_or_default(),
        None if state.images.contains(image) => vec![image.to_owned()],
        // a pulled image by its id
        None if pulled_tags(state, image).len() > 1 => {
            return Err(EngineError::Conflict(format!(
                "conflict: unable to delete {image} (must be forced) - image is referenced in multiple repositories"
            )));
        }
        None if !pulled_tags(state, image).is_empty() => pulled_tags(state, image),
        None => return Err(EngineError::NotFound(format!("No such image: {image}"))),
    };
    let in_use = state.containers.values().any(|c| {
        tags.contains(&c.spec.image)
            || id.as_deref() == Some(c.spec.image.as_str())
            || c.spec.image == image
            || c.details.image_id == image
    });
    if in_use && !force {
        return Err(EngineError::Conflict(format!(
            "conflict: unable to remove repository reference \"{image}\" (must force) - container is using its referenced image"
        )));
    }
    if let Some(id) = id {
        state.built.remove(&id);
    }
    for tag in tags {
        state.images.remove(&tag);
    }
    Ok(())
}

/// The references on the host whose image id is `id`.
fn pulled_tags(state: &State, id: &str) -> Vec<String> {
    state
        .images
        .iter()
        .filter(|r| fake_image_id(r, state.digests.get(*r)) == id)
        .cloned()
        .collect()
}
