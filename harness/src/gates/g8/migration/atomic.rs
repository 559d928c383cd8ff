//! G8's migration phase, the atomic way (SPEC R8.6; Valkey 9's `CLUSTER MIGRATESLOTS`), after the
//! legacy one, then home:
//!
//! - The worker and a crew of [`CREW`] sessions of their own go on working the queue while the
//!   engine copies its slot to a third primary, pauses writes for the cut-over and answers
//!   `MOVED` from then on (no `ASK`, no `TRYAGAIN`): every call of every session succeeds, before,
//!   during and after (a call held by the pause is answered when it ends), and every job one of
//!   them was told was enqueued is completed exactly once (the phase's accounting).
//! - A session that read its slot map before that move calls once while the slot goes home the
//!   legacy way, its keys already there: the node its map names answers `MOVED` to the third
//!   primary, which answers `ASK` home (R8.12: a chain of redirects is followed). Deterministic:
//!   every node agrees who owns the slot, nothing else moves it, and the session sends nothing in
//!   between.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::super::ledger::Ledger;
use super::{Books, Conn, SESSION, errorstat};
use crate::connector::Verbs;
use crate::engine::Target;
use crate::engine::admin::Admin;
use crate::engine::migration::{AtomicMove, SlotMove, has_atomic, migrate_atomic};
use crate::engine::topology::NodeId;
use crate::gates::{GateContext, GateError, GateOutcome};

/// A round that failed after this long may have met the engine's write pause past P4.11's
/// shortest request timeout: its error is then the engine's doing (an ERROR), not a FAIL. It only
/// turns a FAIL into an ERROR, so a slower machine never makes a false FAIL of it.
const PAUSE_PAST_TIMEOUT: Duration = crate::connector::reference::PERMITTED_SHORTEST;

/// The sessions beside the worker on the moving queue, each with a connector of its own: the
/// cut-over meets calls in flight on several connections at once, as a hot queue's would.
const CREW: usize = 3;

/// The queue, where its slot is and where it goes: the legacy move left it on `at`; it passes
/// through `via` and ends `home`.
pub(super) struct Route<'a> {
    pub queue: &'a str,
    pub slot: u16,
    pub at: NodeId,
    pub via: NodeId,
    pub home: NodeId,
}

/// The phase; `Ok(false)` (a figure says why) when the engine has no atomic migration, and the
/// slot is still on `at`; else the slot is home.
pub(super) fn run(
    ctx: &GateContext<'_>,
    url: &Target,
    admin: &mut Admin,
    c: &mut Conn,
    r: &Route<'_>,
    l: &mut Books,
    out: &mut GateOutcome,
) -> Result<bool, GateError> {
    let q = r.queue;
    if !has_atomic(admin)? {
        out.figure(
            "atomic_migration",
            "not run: the engine has no CLUSTER MIGRATESLOTS",
        );
        return Ok(false);
    }
    (ctx.progress)(&format!(
        "G8: an atomic migration of slot {} under the worker and a crew of {CREW}, then home",
        r.slot
    ));
    // Its slot map names `at`, and it sends nothing more until the slot is on its way home.
    let mut stale = ctx.factory.make()?;
    stale.connect(SESSION, url.clone())?;
    stale.pending_size(SESSION, q)?;
    let moved0 = errorstat(ctx.engine, r.at, "MOVED")?;
    let crew = (0..CREW)
        .map(|i| {
            let mut m = ctx.factory.make()?;
            m.connect(&member(i), url.clone())?;
            Ok(m)
        })
        .collect::<Result<Vec<Conn>, GateError>>()?;
    let (moved, slowest, failed) = under_worker(ctx, c, crew, r, l)?;
    let after = super::rounds(c, &[q], 1_000, l);
    out.figure("atomic_migration_ms", moved.took.as_millis() as u64);
    out.figure("atomic_keys_moved", moved.keys);
    out.figure("atomic_slowest_round_ms", slowest.as_millis() as u64);
    let moved1 = errorstat(ctx.engine, r.at, "MOVED")?;
    out.figure("atomic_moved_replies", moved1 - moved0);
    let held: Vec<&String> = failed
        .iter()
        .filter(|(t, _)| *t >= PAUSE_PAST_TIMEOUT)
        .map(|(_, e)| e)
        .collect();
    if !held.is_empty() {
        return Err(GateError::instrument(format!(
            "the engine's atomic migration of slot {} held the worker's calls past P4.11's \
             shortest request timeout ({} s), and these rounds failed after so long: {held:?}",
            r.slot,
            PAUSE_PAST_TIMEOUT.as_secs()
        )));
    }
    let errors: Vec<&String> = failed.iter().map(|(_, e)| e).collect();
    out.none_of(
        &errors,
        "while the engine moved the queue's slot atomically (CLUSTER MIGRATESLOTS: the source \
         serves it while it copies, pauses writes for the cut-over, then answers MOVED), every \
         call of the worker and of a crew of 3 sessions on the queue succeeded (R8.6)",
        "failed",
    );
    out.none_of(
        &after,
        "after the atomic migration the worker followed MOVED and went on without an error (R8.1)",
        "errors",
    );
    home_by_chain(ctx, &mut *stale, r, moved1, l, out)?;
    ctx.engine.refresh(admin)?;
    Ok(true)
}

/// Home the legacy way, the keys moved first, while the late session `stale` enqueues once:
/// the node its map names answers `MOVED` to `via`, which answers `ASK` home (R8.12). Every node
/// agrees `via` owns the slot, so the chain does not depend on how fast the cluster gossips.
/// `moved1`: the `MOVED` replies `at` had given before.
fn home_by_chain(
    ctx: &GateContext<'_>,
    stale: &mut (dyn crate::connector::Connector + Send),
    r: &Route<'_>,
    moved1: u64,
    l: &mut Books,
    out: &mut GateOutcome,
) -> Result<(), GateError> {
    let q = r.queue;
    let asked1 = errorstat(ctx.engine, r.via, "ASK")?;
    let mut home = SlotMove::begin(ctx.engine, r.slot, r.via, r.home)?;
    home.move_keys()?;
    let hop = l.jobs.enqueue(stale, SESSION, q, "chain");
    let hops = errorstat(ctx.engine, r.at, "MOVED")? - moved1
        + errorstat(ctx.engine, r.via, "ASK")?
        - asked1;
    home.finish(ctx.engine)?;
    ctx.engine.mark_health();
    out.figure("chain_redirects", hops);
    match hop {
        Ok(_) => out.pass(
            "a session whose slot map was two moves old enqueued on the moving queue at once: \
             it followed MOVED to the slot's owner, then its ASK to the target (R8.12)",
        ),
        Err(e) => out.fail(format!(
            "a session whose slot map was two moves old could not enqueue on the moving queue \
             (kind {}: {}) after {hops} redirects: a redirect from the node a MOVED named is \
             followed too (R8.12)",
            e.kind, e.message
        )),
    }
    Ok(())
}

/// A round that failed: how long it took, and what the caller saw.
type Failed = (Duration, String);

/// Failed rounds of one session shown one by one; the rest are counted.
const SHOWN: usize = 3;

/// A crew member's session name.
fn member(i: usize) -> String {
    format!("{SESSION}-crew-{i}")
}

/// Rounds on `r.queue` by one session until `done` was set before a round began (so at least
/// one round after the move), each told to `l`: the slowest round and the failed ones.
fn work(
    c: &mut Conn,
    session: &str,
    r: &Route<'_>,
    done: &AtomicBool,
    started: &std::sync::mpsc::Sender<()>,
    l: &mut Ledger,
) -> (Duration, Vec<Failed>) {
    let (mut slowest, mut errors, mut n) = (Duration::ZERO, Vec::new(), 0u32);
    // Past [`SHOWN`] failed rounds only their count and the longest is kept, and a failed round
    // is followed by a short pause: a dead session would otherwise spin through the migration.
    let (mut more, mut more_took) = (0u32, Duration::ZERO);
    loop {
        let last = done.load(Ordering::SeqCst);
        let t0 = Instant::now();
        let got = l.round(
            &mut **c,
            session,
            r.queue,
            &format!("{session}-{}", 500 + n),
            60_000,
        );
        let took = t0.elapsed();
        if let Err(e) = got {
            if errors.len() < SHOWN {
                errors.push((
                    took,
                    format!("{session} round {n}: kind {}: {}", e.kind, e.message),
                ));
            } else {
                (more, more_took) = (more + 1, more_took.max(took));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        slowest = slowest.max(took);
        if n == 0 {
            let _ = started.send(());
        }
        n += 1;
        if last {
            if more > 0 {
                errors.push((more_took, format!("{session}: {more} more rounds failed")));
            }
            return (slowest, errors);
        }
    }
}

/// Sets its flag when dropped: the sessions stop even if the migration's thread unwinds.
struct SetOnDrop<'a>(&'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// The worker's and the crew's rounds on `q` while the engine moves its slot from `at` to
/// `via`: the move, the slowest round, and the rounds that failed. The crew's calls go to `l`
/// once their threads are done.
fn under_worker(
    ctx: &GateContext<'_>,
    c: &mut Conn,
    crew: Vec<Conn>,
    r: &Route<'_>,
    l: &mut Books,
) -> Result<(AtomicMove, Duration, Vec<Failed>), GateError> {
    let done = AtomicBool::new(false);
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let jobs = &mut l.jobs;
    let (moved, slowest, errors, owns) = std::thread::scope(|s| {
        let members: Vec<_> = crew
            .into_iter()
            .enumerate()
            .map(|(i, mut m)| {
                let (done, started) = (&done, started_tx.clone());
                s.spawn(move || {
                    let mut own = Ledger::default();
                    let got = work(&mut m, &member(i), r, done, &started, &mut own);
                    (got, own)
                })
            })
            .collect();
        let worker = {
            let (done, started) = (&done, started_tx.clone());
            s.spawn(move || work(c, SESSION, r, done, &started, jobs))
        };
        // The move starts once every session has one round behind it (each says so once).
        drop(started_tx);
        for _ in 0..=CREW {
            if started_rx.recv().is_err() {
                break;
            }
        }
        let stop = SetOnDrop(&done);
        let moved = migrate_atomic(ctx.engine, r.slot, r.at, r.via);
        drop(stop);
        let (mut slowest, mut errors) = worker.join().expect("the worker thread does not panic");
        let mut owns = Vec::new();
        for m in members {
            let ((took, failed), own) = m.join().expect("a crew thread does not panic");
            slowest = slowest.max(took);
            errors.extend(failed);
            owns.push(own);
        }
        (moved, slowest, errors, owns)
    });
    for own in owns {
        l.jobs.absorb(own);
    }
    ctx.engine.mark_health();
    Ok((moved?, slowest, errors))
}
