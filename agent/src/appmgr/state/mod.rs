//! What the app manager keeps and tells: its state files ([`store`]: the desired state as last
//! accepted and the last statuses, written atomically), its diagnostic events ([`events`]:
//! build progress, GPU fallbacks, OOM kills, images removed, broadcast to subscribers), and
//! the engine, registry and builder texts those carry, cut to a bound ([`clip`]).

pub mod clip;
pub mod events;
pub mod store;
