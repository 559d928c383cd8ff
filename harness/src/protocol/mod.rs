//! L1–L2, pure: the key grammar, the engine url, the script bundle, and the keyspace model with
//! its invariants.
//! Nothing here talks to an engine; everything above builds on it.

pub mod bundle;
pub mod commands;
pub mod embedded;
pub mod gate;
pub mod grammar;
pub mod keyspace;
pub mod sentinel;
pub mod url;
