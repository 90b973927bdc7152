//! The tidy checks: the architecture invariants of ARCHITECTURE.md that a reading of the source
//! tree, the manifests and the lock file can check, without a build of the product or an
//! engine (rust-analyzer's `tidy.rs`). One executable that links nothing but the standard
//! library, so it builds in seconds; `source_tree` holds the one definition of product code.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod architecture;
mod invariants;
mod source_tree;
mod test_layout;
