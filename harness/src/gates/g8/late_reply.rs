//! G8's late-reply check (R4.18): a reply that arrives after the connector gave up on its call
//! must never be read as the reply to a later command. Through the fault proxy (one engine), the
//! reply to one `enqueue` is held [`HOLD`]; whatever the connector answers for that call (a
//! success after waiting, or kind `engine` after its own timeout), the next verb on the same
//! session, `pending_size`, must answer what the engine holds. A connector that timed out and
//! kept its connection reads the held enqueue's id there.

use std::time::Duration;

use super::SESSION;
use crate::connector::Verbs;
use crate::faults::Matcher;
use crate::gates::{GateContext, GateError, GateOutcome};
use crate::protocol::grammar::key;

/// How long the proxy holds the reply: past a short connector timeout, well within the harness's.
const HOLD: Duration = Duration::from_millis(1500);
const QUEUE: &str = "g8late";

/// The check, on database `db`, flushed; on a cluster it does not run (the proxy fronts one
/// node). It mostly waits, so it runs beside G8's other phases (`gates/beside.rs`).
pub fn run(ctx: &GateContext<'_>, out: &mut GateOutcome, db: u32) -> Result<(), GateError> {
    let url = ctx.engine.target(db);
    let mut admin = ctx.engine.prepare_db(db)?;
    for s in &ctx.bundle.scripts {
        admin.script_load(&s.source)?;
    }
    let (proxy, through) = ctx.proxied(&url)?;
    (ctx.progress)("G8: a late reply, then the next verb on the same session");
    let Some(mut c) = ctx.connected(SESSION, &through, out)? else {
        return Ok(());
    };
    c.enqueue(SESSION, QUEUE, "before", 0)?;
    // Judged once the held reply has gone out, on whatever connection it was sent.
    let enqueue = Matcher::evalsha(&ctx.bundle.script("enqueue").entry.sha1);
    let late = out
        .waiting(|| proxy.with_late_reply(enqueue, HOLD, || c.enqueue(SESSION, QUEUE, "late", 0)));
    out.figure(
        "late_reply_call",
        match &late {
            Ok(id) => format!("ok {id}"),
            Err(e) => format!("error {}", e.kind),
        },
    );
    let next = c.pending_size(SESSION, QUEUE);
    let held: i64 = admin.query(&["ZCARD", &key(QUEUE, "pending")])?;
    let rule = "a reply that came after its call ended was never read as the reply to the next \
                verb on the same session (R4.18)";
    match next {
        Ok(n) if n == held => out.pass(rule),
        Ok(n) => out.fail(format!(
            "{rule}: pending_size answered {n}, the engine holds {held}"
        )),
        // Failing the next verb (kind engine: the connection was dropped) is allowed.
        Err(e) if e.kind == crate::error::ErrorKind::Engine => out.pass(rule),
        Err(e) => out.fail(format!(
            "{rule}: pending_size failed with kind {}: {}",
            e.kind, e.message
        )),
    }
    Ok(())
}
