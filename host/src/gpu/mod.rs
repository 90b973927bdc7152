//! The GPU decision: which GPUs an app gets and how they reach its container. Pure functions
//! of the host assessment, so every host fixture × intent combination can be table-tested.
//!
//! [`resolve()`] turns an app's intent plus the [`Assessment`](crate::inventory::Assessment) and
//! the current [`Allocations`] into a [`Plan`]: run on the CPU (optional intent, with the
//! reason), attach (vendor, mechanism, concrete devices) or refuse (required intent, with the
//! reason and the fix). [`allocate()`] picks concrete GPUs, [`attach`] turns an attachment into
//! engine requests and reads back what a container really holds, [`reason`] phrases the fixes,
//! [`from_inventory`] rebuilds an assessment from a wire inventory (for fake agents), and
//! [`image`] completes a plan with what the image's environment says (driver capabilities,
//! and its `NVIDIA_REQUIRE_*` constraints evaluated by [`require`]).

pub mod allocate;
pub mod attach;
pub mod from_inventory;
pub mod image;
pub mod reason;
pub mod require;
pub mod resolve;

pub use allocate::{Allocations, Insufficient, allocate};
pub use attach::{Attachment, attached_from};
pub use from_inventory::assessment_from_inventory;
pub use resolve::{DEFAULT_VENDOR_ORDER, Plan, ResolveOptions, resolve, resolve_with};
