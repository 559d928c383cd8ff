//! Doubles that each break one numbered rule of `bundle/SPEC.md` (the rule catalogue,
//! `crate::gates::rules`, names them): unpipelined traffic, a session that outlives its
//! `disconnect`, wrong error kinds, a validation rule skipped, a fence judged wrongly, one shared
//! connection for every session, wrong read results. One module for each thing they break: a
//! request's arguments, the fence, a session, a call's replies.

mod args;
mod fence;
mod replies;
mod session;

pub use args::{Check, DollarAnchored, Lenient, Strict, Strictness};
pub use fence::{FenceAsEngine, FenceHset, FenceIgnoresProtocol, FenceRefusesOtherDigest};
pub use replies::{BrowseReversed, EngineAsInternal, PendingSizeCountsActive, Unpipelined};
pub use session::{FallbackSession, HelloAnyProtocol, SharedConnection, ZombieSession};
