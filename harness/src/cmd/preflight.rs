//! What `emq-gate` refuses before the first gate, once, with one line: an engine that cannot be
//! used (unknown `--gates` ids are refused by clap, [`crate::cmd::cli::parse_gate`]) — a `url` database holding keys the harness
//! did not make without `--allow-flush` (bad input, nothing flushed). An unreachable engine or
//! a wrong password is refused by [`crate::engine::Engine::start`] already (infrastructure).

use crate::engine::{Engine, EngineKind};
use crate::error::HarnessError;

/// A `url` engine's database must be empty unless the user allowed flushing it (the same rule
/// each gate's `prepare_db` applies, checked once up front).
pub fn engine_usable(engine: &Engine) -> Result<(), HarnessError> {
    if engine.kind != EngineKind::Url || engine.allow_flush {
        return Ok(());
    }
    let keys = engine.admin(0)?.dbsize()?;
    if keys > 0 {
        return Err(HarnessError::BadInput(format!(
            "{} holds {keys} keys the harness did not make; nothing was flushed. Use an empty \
             database, or pass --allow-flush to let the harness flush it",
            engine.source
        )));
    }
    Ok(())
}
