//! G8's crash phase, after the crashes: a drain with no kills, then the accounting of every
//! minted job (lost, duplicated, orphaned) and the keyspace (SPEC §3).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use super::ledger::Ledger;
use super::{MAX_ATTEMPTS, SESSION, fresh};
use crate::connector::Verbs;
use crate::engine::Admin;
use crate::gates::{GateContext, GateError, GateOutcome};
use crate::observe::stable;
use crate::protocol::grammar::{Set, job_id, key};

/// The crash phase's queue.
pub(super) const QUEUE: &str = "g8c";

/// Drains the queue, then accounts for every job.
pub(super) fn drain_and_account(
    ctx: &GateContext<'_>,
    url: &crate::engine::Target,
    admin: &mut Admin,
    ledger: &mut Ledger,
    out: &mut GateOutcome,
) -> Result<(), GateError> {
    if drain(ctx, url, admin, ledger, out)? {
        account(admin, ledger, out)?;
    }
    Ok(())
}

/// Reaps, promotes and completes until only dead jobs are left; false when a call failed (the
/// FAIL is recorded: there is nothing more to judge).
fn drain(
    ctx: &GateContext<'_>,
    url: &crate::engine::Target,
    admin: &mut Admin,
    ledger: &mut Ledger,
    out: &mut GateOutcome,
) -> Result<bool, GateError> {
    (ctx.progress)("G8: drain and account");
    let mut d = fresh(ctx, url)?;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if Instant::now() > deadline {
            return Err(GateError::instrument("the drain did not finish in 60 s"));
        }
        let moved = d
            .reap(SESSION, QUEUE, MAX_ATTEMPTS, 1000)
            .and_then(|r| Ok(r + d.promote(SESSION, QUEUE, 1000)?));
        let moved = match moved {
            Ok(m) => m,
            Err(e) => {
                out.fail(format!("the drain saw an error ({})", e.evidence()));
                out.figure("drain_error", e.message);
                return Ok(false);
            }
        };
        match d.claim(SESSION, QUEUE, 60_000) {
            Ok(Some(j)) => {
                if let Err(e) = ledger.complete(&mut *d, SESSION, QUEUE, &j.id, j.attempts) {
                    out.fail(format!("the drain saw an error ({})", e.evidence()));
                    out.figure("drain_error", e.message);
                    return Ok(false);
                }
            }
            Ok(None) if moved == 0 => {
                let busy = ["active", "delayed"]
                    .iter()
                    .map(|s| admin.query::<u64>(&["ZCARD", &key(QUEUE, s)]))
                    .sum::<Result<u64, _>>()?;
                if busy == 0 {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Ok(None) => {}
            Err(e) => {
                out.fail(format!("the drain saw an error ({})", e.evidence()));
                out.figure("drain_error", e.message);
                return Ok(false);
            }
        }
    }

    Ok(true)
}

/// Every minted id completed, sent a complete, or still in exactly one set; no orphan; §3 holds.
/// The breaches of the accounting, by kind (pure): lost ids, duplicated and orphaned ones by
/// kind, and how many completes whose reply was lost left their job gone.
struct Breaches {
    lost: Vec<String>,
    dup: BTreeMap<&'static str, Vec<String>>,
    orphan: BTreeMap<&'static str, Vec<String>>,
    unsure_gone: usize,
}

fn breaches(q: &crate::protocol::keyspace::QueueState, ledger: &Ledger) -> Breaches {
    let minted = q.seq.unwrap_or(0);
    let mut home: BTreeMap<&str, Vec<Set>> = BTreeMap::new();
    for set in Set::ALL {
        for (id, _) in q.set(set) {
            home.entry(id.as_str()).or_default().push(set);
        }
    }
    // Evidence names the kinds of breach (stable); the ids go to figures (they vary by crash timing).
    let mut lost: Vec<String> = Vec::new();
    let mut dup: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let mut orphan: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for n in 1..=minted.max(0) as u64 {
        let id = job_id(n);
        let sets = home.get(id.as_str()).map_or(0, Vec::len);
        let done = ledger.times_completed(QUEUE, &id);
        if sets == 0 && done == 0 && !ledger.is_unsure(QUEUE, &id) && !q.jobs.contains_key(&id) {
            lost.push(id.clone());
        }
        if sets > 1 {
            dup.entry("in two sets").or_default().push(id.clone());
        }
        if done > 1 {
            dup.entry("completed twice").or_default().push(id.clone());
        }
        if done >= 1 && sets >= 1 {
            dup.entry("completed yet still in a set")
                .or_default()
                .push(id.clone());
        }
    }
    for id in q.jobs.keys() {
        if !home.contains_key(id.as_str()) {
            orphan.entry("hash in no set").or_default().push(id.clone());
        }
    }
    for id in home.keys() {
        if !q.jobs.contains_key(*id) {
            orphan
                .entry("member without hash")
                .or_default()
                .push((*id).to_string());
        }
    }
    let unsure_gone = ledger.unsure_gone(|job| {
        job.strip_prefix(QUEUE)
            .and_then(|j| j.strip_prefix('/'))
            .is_some_and(|id| home.contains_key(id))
    });
    Breaches {
        lost,
        dup,
        orphan,
        unsure_gone,
    }
}

fn account(admin: &mut Admin, ledger: &Ledger, out: &mut GateOutcome) -> Result<(), GateError> {
    let ks = admin.keyspace()?;
    let q = ks.queues.get(QUEUE).cloned().unwrap_or_default();
    let minted = q.seq.unwrap_or(0);
    let Breaches {
        lost,
        dup,
        orphan,
        unsure_gone,
    } = breaches(&q, ledger);
    out.figure("jobs_minted", minted);
    out.figure("jobs_completed", ledger.completed() as u64);
    out.figure("jobs_dead", q.dead.len() as u64);
    out.figure("completes_with_lost_reply_then_gone", unsure_gone as u64);
    let left: usize = [Set::Pending, Set::Active, Set::Delayed]
        .into_iter()
        .map(|s| q.set(s).len())
        .sum();
    out.check(
        left == 0,
        "drained: pending, active and delayed are empty (what remains is dead)",
    );
    let mut show = |name: &str, v: &[String]| {
        out.figure(name, v.iter().take(10).cloned().collect::<Vec<_>>());
    };
    if !lost.is_empty() {
        show("lost_ids", &lost);
    }
    for (kind, ids) in dup.iter().chain(orphan.iter()) {
        show(&format!("ids_{}", kind.replace(' ', "_")), ids);
    }
    out.check(
        lost.is_empty(),
        format!(
            "no job lost: every minted id was completed, had a complete sent, or is still in a set{}",
            if lost.is_empty() { String::new() } else { "; some were lost (ids in the figures)".into() }
        ),
    );
    out.check(
        dup.is_empty(),
        format!(
            "no job duplicated: none in two sets, none completed twice, none completed yet present{}",
            if dup.is_empty() { String::new() } else { format!("; found: {:?}", dup.keys().collect::<Vec<_>>()) }
        ),
    );
    out.check(
        orphan.is_empty(),
        format!(
            "no orphan: every job hash is in a set and every member has its hash{}",
            if orphan.is_empty() {
                String::new()
            } else {
                format!("; found: {:?}", orphan.keys().collect::<Vec<_>>())
            }
        ),
    );
    let violations: Vec<String> = ks.violations().iter().map(|v| stable(v)).collect();
    let mut violations: Vec<String> = violations
        .into_iter()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    violations.truncate(5);
    out.none_of(
        &violations,
        "keyspace after the crashes: no violation of §3",
        "",
    );
    Ok(())
}
