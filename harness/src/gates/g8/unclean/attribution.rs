//! Who lost what across an unclean failover (SPEC R8.10): every acknowledged job of the crew
//! sorted into Jepsen's categories, each anomaly attributed to the engine (the asynchronous
//! replication window) or to the connector. Pure: the crew's calls (the ledger's [`Call`]s), what
//! the drain found and what the promoted replica took over go in, a [`Verdict`] comes out; the
//! unit tests need no engine.
//!
//! A job is its payload: every enqueue call sends a payload of its own, so a job id the engine
//! hands out twice (a lost enqueue rolls the queue's counter back) never joins two jobs.
//! - **lost**: an acknowledged enqueue whose job no complete acknowledged and the drain did not
//!   find. The engine's when the acknowledgement's position (the old primary's
//!   `master_repl_offset`, read right after it: an upper bound of the write's own position) lies
//!   beyond what the promoted replica took over (`master_replid2` up to `second_repl_offset - 1`),
//!   or could not be read on the old history while the old primary could still acknowledge, or
//!   its id was handed out again (a lost enqueue rolls the counter back) and completed by the
//!   worker of the other job; else the connector's.
//! - **completed twice**: two acknowledged completes of one job. The engine's when an earlier
//!   complete's position lies beyond what the replica took over (the replica never saw it, so
//!   the job was leased again); else the connector's.
//! - **duplicated**: one payload under two job ids: an enqueue that ran twice (a re-send). Always
//!   the connector's: the engine never copies a job.
//! - **unexpected**: a payload no enqueue call sent. Always the connector's.
//! - **recovered**: an enqueue that failed (indeterminate) whose job exists: allowed, counted.
//!   Likewise a job gone after a complete that failed (it may have run) is not lost.
//! - **no progress**: a worker that claimed nothing on the failed-over queue within the bound
//!   after the new primary was announced. The connector's.

use std::collections::{BTreeMap, BTreeSet};

use crate::connector::Cmd;
use crate::engine::nodes::{ReplPosition, TakeOver};
use crate::gates::g8::ledger::Call;

/// What the run knows besides the calls.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// Payloads the drain completed, with the id each was claimed under.
    pub drained: Vec<(String, String)>,
    /// What the promoted replica took over.
    pub take_over: Option<TakeOver>,
    /// When the fault was injected, and when the new topology was announced (settled).
    pub fault_ms: u64,
    /// Until when a call whose acknowledgement's position could not be read on the old history
    /// may have been run by the old primary (sent by then; its reply may arrive later): the kill
    /// (after it, only the new primary runs calls), or the zombie's demotion.
    pub lossy_until_ms: u64,
    pub announced_ms: u64,
    /// The workers of the crew, and how long after `announced_ms` each must have claimed on the
    /// failed-over queue again.
    pub workers: Vec<String>,
    pub bound_ms: u64,
}

/// One anomaly, with the calls that concern its job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Anomaly {
    /// `lost`, `completed twice`, `duplicated`, `unexpected`, `no progress`.
    pub kind: &'static str,
    /// The payload (or the worker, for no progress).
    pub subject: String,
    pub calls: Vec<String>,
}

/// The accounting of one scenario.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verdict {
    pub acked: usize,
    pub engine: Vec<Anomaly>,
    pub connector: Vec<Anomaly>,
    pub recovered: usize,
    /// Acknowledged jobs gone after a complete that failed (it may have run): not lost.
    pub completed_unacknowledged: usize,
    /// The replication the replica lacked: the last position read on the old primary's history
    /// minus what the replica took over, in bytes; and from the first engine-lost
    /// acknowledgement to the last, in ms, and both relative to the fault (negative: before).
    pub window_bytes: u64,
    pub window_ms: u64,
    pub window_from_fault_ms: Option<(i64, i64)>,
    /// Calls that failed after the fault.
    pub refused: usize,
    /// From the fault to the first claim on the failed-over queue that succeeded after the
    /// announcement (none: `None`).
    pub first_claim_ms: Option<u64>,
}

/// True when an acknowledgement at `pos`, of a call sent at `start_ms`, may lie beyond what the
/// replica took over.
fn beyond(pos: Option<&ReplPosition>, t: Option<&TakeOver>, start_ms: u64, f: &Facts) -> bool {
    match (pos, t) {
        (Some(p), Some(t)) if p.replid == t.replid2 => p.offset >= t.second_repl_offset,
        // Not read on the old history (the node was gone, or already following the new
        // primary): the engine's only while the old primary could still acknowledge.
        _ => start_ms <= f.lossy_until_ms,
    }
}

/// Sorts every acknowledged job of `calls`.
pub fn attribute(calls: &[Call], f: &Facts) -> Verdict {
    let seen = Seen::of(calls, f);
    let mut v = Verdict::default();
    let w = enqueues(calls, f, &seen, &mut v);
    completes(calls, f, &seen, &mut v);
    identities(calls, &seen, &mut v);
    progress(calls, f, &mut v);
    if let (Some(t), Some(o)) = (f.take_over.as_ref(), w.last_old) {
        v.window_bytes = (o + 1).saturating_sub(t.second_repl_offset);
    }
    if let (Some(a), Some(b)) = (w.first_lost, w.last_lost) {
        v.window_ms = b - a;
        v.window_from_fault_ms = Some((a as i64 - f.fault_ms as i64, b as i64 - f.fault_ms as i64));
    }
    v.refused = calls
        .iter()
        .filter(|c| c.start_ms >= f.fault_ms && c.reply.is_err())
        .count();
    v
}

/// What the calls and the drain saw of each payload.
struct Seen<'a> {
    /// Every id each payload was seen under (claims and the drain).
    ids: BTreeMap<&'a str, BTreeSet<&'a str>>,
    /// Every acknowledged complete of each payload.
    completes: BTreeMap<&'a str, Vec<&'a Call>>,
    /// The payloads enqueued (acknowledged or not).
    sent: BTreeSet<&'a str>,
    /// How often the drain completed each payload.
    drained: BTreeMap<&'a str, usize>,
}

impl<'a> Seen<'a> {
    fn of(calls: &'a [Call], f: &'a Facts) -> Self {
        let mut s = Seen {
            ids: BTreeMap::new(),
            completes: BTreeMap::new(),
            sent: BTreeSet::new(),
            drained: BTreeMap::new(),
        };
        for c in calls {
            let (Some(p), ok) = (c.payload.as_deref(), c.reply.is_ok()) else {
                continue;
            };
            match c.verb {
                Cmd::Enqueue => {
                    s.sent.insert(p);
                }
                Cmd::Claim if ok => {
                    if let Some(id) = &c.id {
                        s.ids.entry(p).or_default().insert(id);
                    }
                }
                Cmd::Complete if ok && c.done => s.completes.entry(p).or_default().push(c),
                _ => {}
            }
        }
        for (p, id) in &f.drained {
            s.ids.entry(p.as_str()).or_default().insert(id.as_str());
            *s.drained.entry(p.as_str()).or_default() += 1;
        }
        s
    }

    /// How often `p` was completed: acknowledged, and by the drain.
    fn done(&self, p: &str) -> usize {
        self.completes.get(p).map_or(0, Vec::len) + self.drained.get(p).copied().unwrap_or(0)
    }
}

/// Every call about payload `p`, described.
fn about(calls: &[Call], p: &str) -> Vec<String> {
    calls
        .iter()
        .filter(|c| c.payload.as_deref() == Some(p))
        .map(Call::describe)
        .collect()
}

/// Where the engine's loss lies: the old history's last offset an enqueue reached, and the
/// first and last end of an enqueue lost to the engine.
#[derive(Default)]
struct Window {
    last_old: Option<u64>,
    first_lost: Option<u64>,
    last_lost: Option<u64>,
}

/// Each enqueue: acknowledged and then lost (the engine's doing, past what the replica had, or
/// the connector's), recovered after a failed reply, or completed.
fn enqueues(calls: &[Call], f: &Facts, seen: &Seen<'_>, v: &mut Verdict) -> Window {
    let t = f.take_over.as_ref();
    let mut w = Window::default();
    for c in calls.iter().filter(|c| c.verb == Cmd::Enqueue) {
        let p = c.payload.as_deref().unwrap_or_default();
        if let (Some(pos), Some(t)) = (&c.pos, t)
            && pos.replid == t.replid2
        {
            w.last_old = Some(w.last_old.map_or(pos.offset, |o| o.max(pos.offset)));
        }
        let done = seen.done(p);
        if c.reply.is_err() {
            v.recovered += usize::from(done > 0 || seen.ids.contains_key(p));
            continue;
        }
        v.acked += 1;
        if done > 0 {
            continue;
        }
        // A complete that failed may have run (its reply was lost): the job may be gone rightly.
        if calls
            .iter()
            .any(|o| o.verb == Cmd::Complete && o.reply.is_err() && o.payload.as_deref() == Some(p))
        {
            v.completed_unacknowledged += 1;
            continue;
        }
        let lost = Anomaly {
            kind: "lost",
            subject: p.to_string(),
            calls: about(calls, p),
        };
        // A lost enqueue rolls the queue's counter back, so the engine may hand this job's id to
        // another job as well; a worker that claimed that other job then completes this one.
        let reused = calls.iter().any(|o| {
            o.verb == Cmd::Complete
                && o.done
                && o.queue == c.queue
                && o.id == c.id
                && o.payload.as_deref() != Some(p)
                && o.start_ms >= c.start_ms
        });
        if c.victim && (beyond(c.pos.as_ref(), t, c.start_ms, f) || reused) {
            w.first_lost = Some(w.first_lost.map_or(c.end_ms, |m| m.min(c.end_ms)));
            w.last_lost = Some(w.last_lost.map_or(c.end_ms, |m| m.max(c.end_ms)));
            v.engine.push(lost);
        } else {
            v.connector.push(lost);
        }
    }
    w
}

/// A payload completed twice: the engine's doing when an earlier complete was lost with the
/// old primary's history, else the connector's.
fn completes(calls: &[Call], f: &Facts, seen: &Seen<'_>, v: &mut Verdict) {
    let t = f.take_over.as_ref();
    for (p, cs) in &seen.completes {
        let n = seen.done(p);
        if n < 2 {
            continue;
        }
        let a = Anomaly {
            kind: "completed twice",
            subject: p.to_string(),
            calls: about(calls, p),
        };
        let lost_complete = cs
            .iter()
            .take(n - 1)
            .any(|c| c.victim && beyond(c.pos.as_ref(), t, c.start_ms, f));
        if lost_complete {
            v.engine.push(a);
        } else {
            v.connector.push(a);
        }
    }
}

/// A payload seen under two ids (enqueued twice), or never enqueued: the connector's.
fn identities(calls: &[Call], seen: &Seen<'_>, v: &mut Verdict) {
    for (p, set) in &seen.ids {
        if set.len() > 1 {
            v.connector.push(Anomaly {
                kind: "duplicated",
                subject: p.to_string(),
                calls: about(calls, p),
            });
        }
        if !seen.sent.contains(p) {
            v.connector.push(Anomaly {
                kind: "unexpected",
                subject: p.to_string(),
                calls: about(calls, p),
            });
        }
    }
}

/// Every worker claims on the failed-over queue again within the bound after the announcement.
fn progress(calls: &[Call], f: &Facts, v: &mut Verdict) {
    let again = |c: &&Call| {
        c.verb == Cmd::Claim && c.victim && c.reply.is_ok() && c.start_ms >= f.announced_ms
    };
    v.first_claim_ms = calls
        .iter()
        .filter(again)
        .map(|c| c.end_ms.saturating_sub(f.fault_ms))
        .min();
    for w in &f.workers {
        let first = calls
            .iter()
            .filter(again)
            .filter(|c| &c.member == w)
            .map(|c| c.end_ms)
            .min();
        if first.is_some_and(|t| t <= f.announced_ms + f.bound_ms) {
            continue;
        }
        let mut tail: Vec<String> = calls
            .iter()
            .filter(|c| &c.member == w && c.start_ms >= f.fault_ms)
            .map(Call::describe)
            .collect();
        let n = tail.len();
        if n > 6 {
            tail.drain(3..n - 3);
            tail.insert(3, format!("… {} calls …", n - 6));
        }
        v.connector.push(Anomaly {
            kind: "no progress",
            subject: w.clone(),
            calls: tail,
        });
    }
}

#[cfg(test)]
mod tests;
