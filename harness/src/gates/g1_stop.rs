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
/// the slowest request of the check (a `connect`, a `disconnect`) and to [`STARTUP_TIMES`] its
/// process's start-up, so a slow or busy machine waits longer.
const EXIT_MIN: Duration = Duration::from_secs(2);

/// How many of its own start-ups a process is given to exit: ending a runtime (an interpreter's
/// teardown, a VM's shutdown) costs the same kind of work as starting it, and on a machine busy
/// with other lanes' engines a Python connector that answered `connect` in 30 ms took over 2 s
/// to exit, while its start-up had grown with it.
const STARTUP_TIMES: u32 = 3;

/// The bound on the exit: the largest of [`EXIT_MIN`], ten times the slowest request and
/// [`STARTUP_TIMES`] the start-up. Pure.
pub fn exit_bound(slowest: Duration, startup: Option<Duration>) -> Duration {
    EXIT_MIN
        .max(slowest * 10)
        .max(startup.unwrap_or_default() * STARTUP_TIMES)
}

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
    let startup = c.startup();
    let within = exit_bound(slowest, startup);
    out.figure("stop_within_ms", within.as_millis() as u64);
    if let Some(s) = startup {
        out.figure("stop_startup_ms", s.as_millis() as u64);
    }
    match c.stop(within) {
        None => {}
        // The bound is a figure, not evidence: it moves with the machine.
        Some(Ok(())) => out.pass(
            "on stop the connector sent nothing and exited 0 within its bound (R5.9: figure \
             stop_within_ms)",
        ),
        Some(Err(why)) => out.fail(why),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exit_bound_is_the_largest_of_its_three_measures() {
        let ms = Duration::from_millis;
        assert_eq!(exit_bound(ms(30), None), ms(2000));
        assert_eq!(exit_bound(ms(30), Some(ms(400))), ms(2000));
        assert_eq!(exit_bound(ms(300), Some(ms(400))), ms(3000));
        assert_eq!(exit_bound(ms(30), Some(ms(1500))), ms(4500));
    }
}
