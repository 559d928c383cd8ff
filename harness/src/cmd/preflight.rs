//! What `emq-gate` refuses before the first gate, once, with one line: unknown `--gates` ids
//! (bad input) and an engine that cannot be used — a `url` database holding keys the harness
//! did not make without `--allow-flush` (bad input, nothing flushed). An unreachable engine or
//! a wrong password is refused by [`crate::engine::Engine::start`] already (infrastructure).

use crate::engine::{Engine, EngineKind};
use crate::error::HarnessError;

/// Every id in `only` must name a gate (`G1`..`G8`, any case).
pub fn gate_ids(only: Option<&[String]>) -> Result<(), HarnessError> {
    let known: Vec<&str> = crate::gates::ALL.iter().map(|g| g.id.as_str()).collect();
    for id in only.unwrap_or_default() {
        if id.parse::<crate::gates::GateId>().is_err() {
            return Err(HarnessError::BadInput(format!(
                "--gates: unknown gate {id:?} (known: {})",
                known.join(", ")
            )));
        }
    }
    Ok(())
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_gate_ids_are_refused() {
        assert!(gate_ids(Some(&["g1".into(), "G8".into()])).is_ok());
        let e = gate_ids(Some(&["G1".into(), "G9".into()])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "bad input: --gates: unknown gate \"G9\" (known: G1, G2, G3, G4, G5, G6, G7, G8)"
        );
    }
}
