//! G8 on a Sentinel deployment (SPEC R11.3): a session follows the primary after `READONLY` and
//! after a failover, never re-sending the call that failed, reading the fence on each new
//! connection before its first script.
//!
//! - **READONLY**: the primary's proxy answers each script on the session's open connections
//!   `READONLY` (what a client meets through an endpoint that kept pointing at a demoted
//!   primary). Within three calls one must succeed, on a new connection, and every call after.
//! - **Failover**: `SENTINEL FAILOVER` while two sessions are connected, one that worked and one
//!   that sat idle; Sentinel closes the old primary's clients as it demotes it. Once every
//!   Sentinel names the new primary and the old one follows it, each session must succeed
//!   within three calls and on every call after; `MONITOR` on the new primary sees each new
//!   connection read the fence before its first script; every acknowledged job is there.
//!
//! Three calls, not one: the first call after a loss may fail (it met the loss); a second may
//! still meet a Sentinel's stale answer in a connector that learns the failover from a Sentinel
//! that has not yet heard of it. A connector that never finds the new primary fails every call.

use crate::connector::{Connector, Verbs};
use crate::error::ConnectorError;
use crate::gates::rules::{RuleId, cited::cite};
use crate::gates::{GateContext, GateError, GateId, GateOutcome};
use crate::observe::Watch;
use crate::observe::reconnect::unfenced_connections;
use crate::protocol::grammar::key;

/// Calls a session may fail after a loss before it must have found the primary again.
const WITHIN: usize = 3;
/// Calls after the first success that must all succeed.
const AFTER: usize = 10;
/// Jobs the working session enqueues before the failover.
const BEFORE: usize = 20;

/// Both checks, behind Sentinel (the caller runs them on that engine only).
pub fn run(ctx: &GateContext<'_>, out: &mut GateOutcome) -> Result<(), GateError> {
    readonly(ctx, out)?;
    failover(ctx, out)
}

/// What a session's calls after a loss did: how many failed before the first success, and the
/// calls that failed after it. Pure.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Recovery {
    /// The failures before the first success (all of them when none succeeded).
    pub before: Vec<String>,
    /// Whether a call succeeded.
    pub found: bool,
    /// The failures after the first success.
    pub after: Vec<String>,
}

impl Recovery {
    /// Records one call's outcome.
    pub fn note(&mut self, r: Result<(), String>) {
        match (r, self.found) {
            (Ok(()), _) => self.found = true,
            (Err(e), false) => self.before.push(e),
            (Err(e), true) => self.after.push(e),
        }
    }

    /// `None` when it held: a success within [`WITHIN`] calls and none failed after it.
    pub fn breach(&self) -> Option<String> {
        if !self.found {
            return Some(format!(
                "no call of {} succeeded (the first failed with {})",
                self.before.len(),
                self.before.first().map_or("nothing", String::as_str)
            ));
        }
        if self.before.len() >= WITHIN {
            return Some(format!(
                "{} calls failed before one succeeded, past {WITHIN} (the first: {})",
                self.before.len(),
                self.before[0]
            ));
        }
        self.after.first().map(|e| {
            format!(
                "{} of the calls after the first success failed (the first: {e})",
                self.after.len()
            )
        })
    }
}

/// `enqueue`s on `queue` until one succeeded and [`AFTER`] more were made, or [`WITHIN`] failed
/// first; the payloads acknowledged.
fn recover(c: &mut (dyn Connector + Send), session: &str, queue: &str) -> (Recovery, Vec<String>) {
    let mut rec = Recovery::default();
    let mut acked = Vec::new();
    for i in 0..WITHIN + AFTER {
        if !rec.found && rec.before.len() >= WITHIN {
            break;
        }
        let payload = format!("{session}-after-{i}");
        let r = c.enqueue(session, queue, &payload, 0);
        if r.is_ok() {
            acked.push(payload);
        }
        rec.note(r.map(drop).map_err(|e: ConnectorError| e.evidence()));
        if rec.found && acked.len() > AFTER {
            break;
        }
    }
    (rec, acked)
}

/// The payloads pending on `queue` in the gate's database, on the primary now.
fn pending(ctx: &GateContext<'_>, db: u32, queue: &str) -> Result<usize, GateError> {
    let mut admin = ctx.engine.admin(db)?;
    let n: usize = admin.query(&["ZCARD", &key(queue, "pending")])?;
    Ok(n)
}

/// READONLY from the primary's proxy on the session's open connections.
fn readonly(ctx: &GateContext<'_>, out: &mut GateOutcome) -> Result<(), GateError> {
    (ctx.progress)("G8: READONLY on the session's connections to the primary");
    let gate = ctx.database(GateId::G8)?;
    let (db, url) = (gate.db, gate.url);
    let queue = "g8-readonly";
    let Some(mut c) = ctx.connected("ro", &url, out)? else {
        return Ok(());
    };
    if let Err(e) = c.enqueue("ro", queue, "ro-before", 0) {
        out.fail(format!(
            "an enqueue before READONLY failed ({})",
            e.evidence()
        ));
        return Ok(());
    }
    let proxy = ctx.engine.proxy_of(ctx.engine.seed())?;
    proxy.readonly_before_now();
    let (rec, acked) = recover(c.as_mut(), "ro", queue);
    let given = proxy.end_readonly();
    let _ = c.disconnect("ro");
    out.figure("sentinel_readonly_given", given);
    if given == 0 {
        return Err(GateError::instrument(
            "the primary's proxy answered no script READONLY: the session opened a new connection before its first call",
        ));
    }
    judge(out, "after READONLY from the primary's proxy", &rec);
    let n = pending(ctx, db, queue)?;
    judge_jobs(out, "after READONLY", n, 1 + acked.len());
    Ok(())
}

/// `SENTINEL FAILOVER` with a working and an idle session connected.
fn failover(ctx: &GateContext<'_>, out: &mut GateOutcome) -> Result<(), GateError> {
    (ctx.progress)("G8: SENTINEL FAILOVER with a working and an idle session");
    let gate = ctx.database(GateId::G8)?;
    let (db, url) = (gate.db, gate.url);
    let queue = "g8-failover";
    let (Some(mut work), Some(mut idle)) = (
        ctx.connected("work", &url, out)?,
        ctx.connected("idle", &url, out)?,
    ) else {
        return Ok(());
    };
    let mut acked = 0;
    for i in 0..BEFORE {
        match work.enqueue("work", queue, &format!("before-{i}"), 0) {
            Ok(_) => acked += 1,
            Err(e) => {
                out.fail(format!(
                    "an enqueue before the failover failed ({})",
                    e.evidence()
                ));
                return Ok(());
            }
        }
    }
    let old = ctx.engine.seed();
    for replica in ctx.engine.nodes().into_iter().filter(|n| *n != old) {
        ctx.engine.wait_in_sync(old, replica)?;
    }
    let t0 = std::time::Instant::now();
    ctx.engine.sentinel_failover()?;
    let new = ctx.engine.wait_for_new_primary(old)?;
    ctx.engine.wait_following(old, new)?;
    ctx.engine.set_primary(new);
    ctx.engine.mark_health();
    out.figure("sentinel_failover_ms", t0.elapsed().as_millis() as u64);
    out.figure("sentinel_failover", format!("{old} to {new}"));
    out.pass(
        "the Sentinels failed the primary over to a replica (SENTINEL FAILOVER; the gate's own, not an engine event)",
    );
    let mut admin = ctx.engine.admin(db)?;
    let watch = Watch::start(&mut admin, db, &[])?;
    let (w, w_acked) = recover(work.as_mut(), "work", queue);
    let (i, i_acked) = recover(idle.as_mut(), "idle", queue);
    let obs = watch.stop()?;
    let _ = work.disconnect("work");
    let _ = idle.disconnect("idle");
    judge(out, "after SENTINEL FAILOVER, the session that worked", &w);
    judge(
        out,
        "after SENTINEL FAILOVER, the session that sat idle",
        &i,
    );
    let (unfenced, judged) = unfenced_connections(&obs, ctx.bundle);
    out.figure("sentinel_new_connections_judged", judged as u64);
    match unfenced.first() {
        None => out.pass(
            "R11.3: every connection the sessions opened to the new primary read the fence before its first script",
        ),
        Some(u) => out.fail(format!(
            "{}: a connection to the new primary sent a script before reading the fence: {u}",
            cite(RuleId::new(11, 3))
        )),
    }
    let n = pending(ctx, db, queue)?;
    judge_jobs(
        out,
        "after SENTINEL FAILOVER",
        n,
        acked + w_acked.len() + i_acked.len(),
    );
    Ok(())
}

fn judge(out: &mut GateOutcome, when: &str, rec: &Recovery) {
    out.figure(
        &format!("sentinel_failed_first: {when}"),
        rec.before.len() as u64,
    );
    match rec.breach() {
        None => out.pass(format!(
            "R11.3: {when}, a call succeeded within {WITHIN} and every call after it"
        )),
        Some(b) => out.fail(format!("{}: {when}, {b}", cite(RuleId::new(11, 3)))),
    }
}

/// Every acknowledged enqueue is there once; a job more is a call sent again (R4.17).
fn judge_jobs(out: &mut GateOutcome, when: &str, pending: usize, acked: usize) {
    if pending == acked {
        out.pass(format!(
            "R11.3: {when}, the queue holds the {acked} acknowledged jobs, no more, no fewer"
        ));
    } else {
        out.fail(format!(
            "{}: {when}, the queue holds {pending} jobs where {acked} enqueues were acknowledged ({})",
            cite(RuleId::new(11, 3)),
            if pending > acked {
                "a failed call was sent again"
            } else {
                "an acknowledged job is gone"
            }
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(calls: &[bool]) -> Recovery {
        let mut r = Recovery::default();
        for (i, ok) in calls.iter().enumerate() {
            r.note(if *ok { Ok(()) } else { Err(format!("e{i}")) });
        }
        r
    }

    #[test]
    fn a_session_finds_the_primary_within_three_calls_and_keeps_it() {
        assert_eq!(rec(&[true, true]).breach(), None);
        assert_eq!(rec(&[false, true, true]).breach(), None);
        assert_eq!(rec(&[false, false, true]).breach(), None);
        assert!(
            rec(&[false, false, false])
                .breach()
                .unwrap()
                .contains("no call of 3")
        );
        assert!(
            rec(&[false, false, false, true])
                .breach()
                .unwrap()
                .contains("past 3")
        );
        assert!(
            rec(&[false, true, false])
                .breach()
                .unwrap()
                .contains("after the first success")
        );
    }
}
