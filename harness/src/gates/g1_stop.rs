//! G1's last look at the session lifecycle (R5.9): how a connector ends. The harness ends every
//! process it started with `stop`; a connector that answers it, exits non-zero, or ignores it
//! breaks a promise an operator's supervisor relies on (a clean exit is the only sign that it
//! flushed and closed), so G1 stops one process of its own and judges the ending. The process
//! group is ended either way, so nothing is left running.

use std::time::{Duration, Instant};

use crate::connector::Verbs;
use crate::gates::{GateContext, GateError, GateOutcome};

const SESSION: &str = "st1";

/// The least time a connector is given to exit after `stop`; the bound is stretched to ten times
/// the slowest request of the check (a `connect`, a `disconnect`), so a slow machine waits longer.
const EXIT_MIN: Duration = Duration::from_secs(2);

/// Connects and disconnects a session on a connector of its own (as a process ends a run: idle,
/// holding no session), then stops it and judges the ending. In process there is nothing to stop.
pub fn check(
    ctx: &GateContext<'_>,
    out: &mut GateOutcome,
    url: &crate::engine::Target,
) -> Result<(), GateError> {
    if !ctx.factory.killable() {
        return Ok(());
    }
    (ctx.progress)("G1: stop gets no response and the connector exits 0");
    let mut c = ctx.factory.make()?;
    let mut slowest = Duration::ZERO;
    for step in ["connect", "disconnect"] {
        let t0 = Instant::now();
        let r = match step {
            "connect" => c.connect(SESSION, url),
            _ => c.disconnect(SESSION),
        };
        slowest = slowest.max(t0.elapsed());
        if let Err(e) = r {
            out.fail(format!(
                "{step} of session {SESSION} before stop failed ({})",
                e.evidence()
            ));
            return Ok(());
        }
    }
    let within = EXIT_MIN.max(slowest * 10);
    out.figure("stop_within_ms", within.as_millis() as u64);
    match c.stop(within) {
        None => {}
        Some(Ok(())) => out.pass(format!(
            "on stop the connector sent nothing and exited 0 within {} ms (R5.9)",
            within.as_millis()
        )),
        Some(Err(why)) => out.fail(why),
    }
    Ok(())
}
