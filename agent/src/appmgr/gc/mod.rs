//! Image clean-up after each pass ([`image_gc`]): the images the agent pulled or built (its
//! image book, `images/image_book.rs`) removed once no app uses them nor could roll back to
//! them, or at once, oldest unused first, when the engine's data root runs short of space.

pub(super) mod image_gc;
