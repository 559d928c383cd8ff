//! Jepsen-style accounting of calls whose outcome the caller could not know (pure: no engine).
//!
//! The rules:
//! - a call that returned **success** happened exactly once, and its reply is what the scripts
//!   would have answered at that point;
//! - a call that returned an **error** is *indeterminate*: it may or may not have happened (a
//!   batch: any prefix of its enqueues happened);
//! - a job that no successful or indeterminate call can explain (more jobs carry a call's unique
//!   payload token than the call could have made) is a **duplicate**;
//! - a job whose successful enqueue was acknowledged but that is gone without a successful or
//!   indeterminate complete is **lost**.
//!
//! [`account`] enumerates every world the history allows (two per indeterminate call, `n + 1` per
//! indeterminate batch) by applying the scripts' semantics (SPEC §2) to the state read before the
//! calls, and accepts the state read after them if one world matches it with every successful
//! reply. Otherwise it explains why, in stable words that name the call and the jobs.

use std::collections::BTreeMap;

use crate::connector::{Claimed, Reply, Request, RetryOutcome};
use crate::protocol::grammar::{Set, job_id};

/// One job as the engine holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    pub payload: String,
    pub set: Set,
    pub attempts: i64,
    /// Active or delayed with a score ≤ the server's time: reap or promote would move it.
    pub due: bool,
}

/// One queue's jobs and counter.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Snapshot {
    pub seq: i64,
    pub jobs: BTreeMap<String, Job>,
}

/// The payload token of an enqueue or batch, and how many jobs it makes.
fn token(call: &Request) -> Option<(&str, i64)> {
    match call {
        Request::Enqueue { payload, .. } => Some((payload, 1)),
        Request::Batch { n, payload, .. } => Some((payload, *n)),
        _ => None,
    }
}

/// What the caller got back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Ok(Reply),
    /// An error of this kind: the call is indeterminate.
    Failed(String),
}

/// One call of the history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// How evidence names the call: `enqueue (fault trial 3 of 56, lost reply)`.
    pub label: String,
    /// A mutating request on the snapshot's one queue (a batch without `queues`).
    pub call: Request,
    pub outcome: Outcome,
}

/// A reply in evidence's words.
pub fn show(r: &Reply) -> String {
    match r {
        Reply::Id(id) => id.clone(),
        Reply::Claim(None) => "null".into(),
        Reply::Claim(Some(c)) => format!("{} (attempts {})", c.id, c.attempts),
        Reply::Done(b) => b.to_string(),
        Reply::Retry(o) => format!("{o:?}").to_lowercase(),
        Reply::Count(n) => n.to_string(),
        other => format!("{other:?}"),
    }
}

fn enqueue(s: &mut Snapshot, payload: &str) -> String {
    enqueue_after(s, payload, 0)
}

/// An enqueue with a delay: pending at once when 0, else delayed (and not yet due).
fn enqueue_after(s: &mut Snapshot, payload: &str, delay_ms: i64) -> String {
    s.seq += 1;
    let id = job_id(s.seq as u64);
    s.jobs.insert(
        id.clone(),
        Job {
            payload: payload.to_string(),
            set: if delay_ms > 0 {
                Set::Delayed
            } else {
                Set::Pending
            },
            attempts: 0,
            due: false,
        },
    );
    id
}

/// Moves up to `limit` due jobs of `from` (claim order) through `to`; returns the count.
fn move_due(s: &mut Snapshot, from: Set, limit: i64, to: impl Fn(&Job) -> Set) -> i64 {
    let ids: Vec<String> = s
        .jobs
        .iter()
        .filter(|(_, j)| j.set == from && j.due)
        .map(|(id, _)| id.clone())
        .take(limit.max(0) as usize)
        .collect();
    for id in &ids {
        let j = s.jobs.get_mut(id).expect("listed above");
        j.set = to(j);
        j.due = false;
    }
    ids.len() as i64
}

/// The scripts' semantics (SPEC §2): the state after `call` and what it answers.
///
/// # Panics
/// On a verb that runs no script (G8 faults only the mutating verbs, `Cmd::mutating`).
pub fn apply(before: &Snapshot, call: &Request) -> (Snapshot, Reply) {
    let mut s = before.clone();
    let reply = match call {
        Request::Enqueue {
            payload, delay_ms, ..
        } => Reply::Id(enqueue_after(&mut s, payload, *delay_ms)),
        Request::Batch { n, payload, .. } => {
            for _ in 0..*n {
                enqueue(&mut s, payload);
            }
            Reply::Count(*n)
        }
        Request::Claim { lease_ms, .. } => Reply::Claim(claim(&mut s, *lease_ms)),
        Request::Complete { id, attempts, .. } => {
            let held = s
                .jobs
                .get(id)
                .is_some_and(|j| j.set == Set::Active && j.attempts == *attempts);
            if held {
                s.jobs.remove(id);
            }
            Reply::Done(held)
        }
        Request::Retry {
            id,
            attempts,
            backoff_ms,
            max_attempts,
            ..
        } => Reply::Retry(retry(&mut s, id, *attempts, *backoff_ms, *max_attempts)),
        Request::Promote { limit, .. } => {
            Reply::Count(move_due(&mut s, Set::Delayed, *limit, |_| Set::Pending))
        }
        Request::Reap {
            max_attempts,
            limit,
            ..
        } => Reply::Count(move_due(&mut s, Set::Active, *limit, |j| {
            if j.attempts >= *max_attempts {
                Set::Dead
            } else {
                Set::Pending
            }
        })),
        other => unreachable!("{} runs no script", other.cmd()),
    };
    (s, reply)
}

/// The first pending job, claimed.
fn claim(s: &mut Snapshot, lease_ms: i64) -> Option<Claimed> {
    s.jobs
        .iter_mut()
        .find(|(_, j)| j.set == Set::Pending)
        .map(|(id, j)| {
            j.set = Set::Active;
            j.attempts += 1;
            j.due = lease_ms == 0;
            Claimed {
                id: id.clone(),
                payload: j.payload.clone(),
                attempts: j.attempts,
            }
        })
}

/// A held job delayed again, or dead past `max_attempts`; else stale.
fn retry(s: &mut Snapshot, id: &str, attempts: i64, backoff_ms: i64, max: i64) -> RetryOutcome {
    match s.jobs.get_mut(id) {
        Some(j) if j.set == Set::Active && j.attempts == attempts => {
            if j.attempts >= max {
                j.set = Set::Dead;
                j.due = false;
                RetryOutcome::Dead
            } else {
                j.set = Set::Delayed;
                j.due = backoff_ms == 0;
                RetryOutcome::Delayed
            }
        }
        _ => RetryOutcome::Stale,
    }
}

/// One world the history allows, and the successful replies it cannot explain.
#[derive(Debug, Clone)]
struct World {
    snap: Snapshot,
    wrong_replies: Vec<String>,
}

fn worlds(pre: &Snapshot, records: &[Record]) -> Vec<World> {
    let mut all = vec![World {
        snap: pre.clone(),
        wrong_replies: Vec::new(),
    }];
    for r in records {
        let mut next = Vec::new();
        for w in all {
            match &r.outcome {
                Outcome::Ok(got) => {
                    let (snap, want) = apply(&w.snap, &r.call);
                    let mut wrong = w.wrong_replies.clone();
                    if *got != want {
                        wrong.push(wrong_reply(&r.label, &r.call, &snap, got, &want));
                    }
                    next.push(World {
                        snap,
                        wrong_replies: wrong,
                    });
                }
                Outcome::Failed(_) => {
                    if let Request::Batch { n, payload, .. } = &r.call {
                        let mut s = w.snap.clone();
                        next.push(World {
                            snap: s.clone(),
                            wrong_replies: w.wrong_replies.clone(),
                        });
                        for _ in 0..*n {
                            enqueue(&mut s, payload);
                            next.push(World {
                                snap: s.clone(),
                                wrong_replies: w.wrong_replies.clone(),
                            });
                        }
                    } else {
                        next.push(w.clone());
                        next.push(World {
                            snap: apply(&w.snap, &r.call).0,
                            wrong_replies: w.wrong_replies.clone(),
                        });
                    }
                }
            }
        }
        all = next;
    }
    all
}

/// Words that open a breach whose call ran twice: the connector re-sent it (R4.17). A caller
/// sorts these first, since they name the cause where the other lines name its effects.
pub const RAN_TWICE: &str = "ran twice";

/// A successful reply the scripts would not have given. When it is what a second run of the call
/// answers (`after` is the state the first run left), the engine did give it, to a re-send: say
/// so, rather than that the engine never gave it.
fn wrong_reply(label: &str, call: &Request, after: &Snapshot, got: &Reply, want: &Reply) -> String {
    if apply(after, call).1 == *got {
        format!(
            "{label} {RAN_TWICE}: it answered {}, what a second run answers, where the scripts answer {} once (the connector re-sent the call after its reply was lost, R4.17)",
            show(got),
            show(want)
        )
    } else {
        format!(
            "{label} answered {}, but the scripts would have answered {} (a reply no run of the call gives)",
            show(got),
            show(want)
        )
    }
}

fn describe(j: &Job) -> String {
    format!("{} with attempts {}", j.set, j.attempts)
}

/// How `post` differs from the world `want`, job by job.
fn diff(pre: &Snapshot, want: &Snapshot, post: &Snapshot) -> Vec<String> {
    let mut out = Vec::new();
    let ids: std::collections::BTreeSet<&String> =
        want.jobs.keys().chain(post.jobs.keys()).collect();
    for id in ids {
        match (want.jobs.get(id), post.jobs.get(id)) {
            (Some(w), None) => out.push(format!("job {id} should be {} but is gone", describe(w))),
            (None, Some(p)) if pre.jobs.contains_key(id) => {
                out.push(format!("job {id} should be gone but is {}", describe(p)))
            }
            (None, Some(p)) => out.push(format!(
                "job {id} ({}, payload {:?}) is explained by no call",
                describe(p),
                p.payload
            )),
            (Some(w), Some(p)) if (w.set, w.attempts) != (p.set, p.attempts) => out.push(format!(
                "job {id} should be {} but is {}",
                describe(w),
                describe(p)
            )),
            _ => {}
        }
    }
    out
}

/// Every breach of the rules above by `post`, the state after `records` ran from `pre`; empty
/// when some world the history allows is exactly `post`.
pub fn account(pre: &Snapshot, records: &[Record], post: &Snapshot) -> Vec<String> {
    let all = worlds(pre, records);
    if all
        .iter()
        .any(|w| w.wrong_replies.is_empty() && same_jobs(&w.snap, post))
    {
        return Vec::new();
    }
    let mut out = attribute(pre, records, post);
    explain_closest(pre, &all, post, &mut out);
    out
}

/// The same jobs, in the same sets, with the same attempts and payloads (`due` and `seq` aside).
fn same_jobs(a: &Snapshot, b: &Snapshot) -> bool {
    a.jobs.len() == b.jobs.len()
        && a.jobs.iter().zip(&b.jobs).all(|((ia, ja), (ib, jb))| {
            ia == ib && (ja.set, ja.attempts, &ja.payload) == (jb.set, jb.attempts, &jb.payload)
        })
}

/// Attribution by token: who made each new job. Duplicates and lost jobs, per call, then the new
/// jobs no call made.
fn attribute(pre: &Snapshot, records: &[Record], post: &Snapshot) -> Vec<String> {
    let mut out = Vec::new();
    let mut made: BTreeMap<&str, Vec<&String>> = BTreeMap::new();
    for (id, j) in &post.jobs {
        if !pre.jobs.contains_key(id) {
            made.entry(j.payload.as_str()).or_default().push(id);
        }
    }
    for r in records {
        let Some((token, n)) = token(&r.call) else {
            continue;
        };
        let ids = made.remove(token).unwrap_or_default();
        if let Some(d) = duplicate(r, &ids, n as usize) {
            out.push(d);
        }
        if let Outcome::Ok(reply) = &r.outcome {
            out.extend(lost(records, post, r, reply, &ids));
        }
    }
    for (token, ids) in made {
        out.push(format!(
            "job {ids:?} (payload {token:?}) was made by no call"
        ));
    }
    out
}

/// A duplicate when call `r` made more than `max` of the jobs `ids` carrying its token.
fn duplicate(r: &Record, ids: &[&String], max: usize) -> Option<String> {
    if ids.len() <= max {
        return None;
    }
    // The job a successful enqueue named is explained; the others are not.
    let named = match &r.outcome {
        Outcome::Ok(Reply::Id(id)) => Some(id),
        _ => None,
    };
    let mut extra: Vec<&String> = ids.iter().copied().filter(|i| Some(*i) != named).collect();
    if named.is_none() || !ids.contains(&named.expect("checked")) {
        extra = ids[max..].to_vec();
    }
    let extra = &extra[extra.len().saturating_sub(ids.len() - max)..];
    Some(format!(
        "duplicate: {} {RAN_TWICE} ({}): it made {} jobs carrying its token, at most {max} explainable; extra {extra:?}",
        r.label,
        match &r.outcome {
            Outcome::Ok(reply) => format!("answered {}", show(reply)),
            Outcome::Failed(kind) => format!("failed with kind {kind}"),
        },
        ids.len()
    ))
}

/// What call `r`, acknowledged with `reply`, lost: a named job gone with no complete sent, or a
/// batch with fewer of `ids` than it counted.
fn lost(
    records: &[Record],
    post: &Snapshot,
    r: &Record,
    reply: &Reply,
    ids: &[&String],
) -> Vec<String> {
    let mut out = Vec::new();
    let completed = |id: &str| {
        records.iter().any(|c| {
            matches!(&c.call, Request::Complete { id: cid, .. } if cid == id)
                && matches!(
                    c.outcome,
                    Outcome::Ok(Reply::Done(true)) | Outcome::Failed(_)
                )
        })
    };
    let acked = match reply {
        Reply::Id(id) => vec![id.clone()],
        _ => Vec::new(),
    };
    for id in acked {
        if !post.jobs.contains_key(&id) && !completed(&id) {
            out.push(format!(
                "lost: {} was acknowledged with {id}, but job {id} is gone with no complete sent",
                r.label
            ));
        }
    }
    if let (Request::Batch { n, .. }, Reply::Count(c)) = (&r.call, reply)
        && (ids.len() as i64) < *n
    {
        out.push(format!(
            "lost: {} was acknowledged with {c}, but only {} jobs carry its token",
            r.label,
            ids.len()
        ));
    }
    out
}

/// The closest world, and what tells the state apart from it: its wrong replies, and when
/// nothing was attributed, the differences of state.
fn explain_closest(pre: &Snapshot, all: &[World], post: &Snapshot, out: &mut Vec<String>) {
    let best = all
        .iter()
        .min_by_key(|w| diff(pre, &w.snap, post).len() + w.wrong_replies.len())
        .expect("at least one world");
    let attributed = !out.is_empty();
    out.extend(best.wrong_replies.iter().cloned());
    if !attributed && best.wrong_replies.is_empty() {
        for d in diff(pre, &best.snap, post) {
            if !out.contains(&d) {
                out.push(d);
            }
        }
    }
    if out.is_empty() {
        out.push("the state after the calls matches no world the history allows".into());
    }
}

#[cfg(test)]
mod tests;
