//! G8 on a cluster (SPEC R8.6, R8.7): a live migration of a queue's slot in the middle of a
//! worker loop, the way `valkey-cli --cluster reshard` moves it ([`SlotMove`]).
//!
//! Deterministic by construction: the harness drives every call itself and moves the keys
//! between two calls, so each call below meets the state it is meant to meet:
//! - with the keys on the target and the slot still the source's, every verb on the queue gets
//!   `ASK` from the source; its declared keys all exist on the target (the queue holds a pending,
//!   an active, a delayed and a dead job), so `ASKING` and the call there must succeed. The
//!   target's script cache is flushed first: its `NOSCRIPT` must be answered by `SCRIPT LOAD` on
//!   the target (R8.2), then `ASKING` and the call again;
//! - a claim on a second queue of the same slot that holds pending jobs only: the target has
//!   `pending` but not `active`, so it answers `TRYAGAIN` (the call did not run). The connector
//!   may retry until the migration ends (it ends one second later) or report kind `engine`;
//! - after the slot is the target's, a session idle throughout follows `MOVED` at once.
//!
//! Then the accounting: every acknowledged job completed exactly once, the parked jobs where they
//! were parked, nothing left behind. The slot is moved back afterwards (no connector running).

use std::sync::mpsc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

mod atomic;

use super::ledger::Ledger;
use crate::connector::{Claimed, Connector, Verbs};
use crate::engine::admin::{Admin, shards};
use crate::engine::migration::SlotMove;
use crate::engine::topology::NodeId;
use crate::error::{ConnectorError, ErrorKind};
use crate::gates::{GateContext, GateDb, GateError, GateId, GateOutcome};
use crate::protocol::grammar::{FENCE_KEY, job_root, key};

const SESSION: &str = "m";
const HOUR_MS: i64 = 3_600_000;
/// Worker rounds before the migration and after it.
const ROUNDS: u32 = 30;
/// How long the `TRYAGAIN` window stays open while a call is in flight.
const TRYAGAIN_WINDOW: Duration = Duration::from_secs(1);

type Conn = Box<dyn Connector + Send>;

/// The phase's books: the jobs' ledger, and the jobs parked on purpose (a long lease, a far
/// delay, dead) with the set that holds each: they must survive the move where they were.
#[derive(Default)]
struct Books {
    jobs: Ledger,
    parked: Vec<(String, String, &'static str)>,
}

impl Books {
    fn park(&mut self, q: &str, id: String, set: &'static str) {
        self.jobs.exempt(q, &id);
        self.parked.push((q.to_string(), id, set));
    }

    /// One worker round: enqueue, claim, complete.
    fn round(&mut self, c: &mut Conn, q: &str, n: u32) -> Result<(), ConnectorError> {
        self.jobs
            .round(&mut **c, SESSION, q, &format!("round-{n}"), 60_000)
    }
}

/// Two distinct primaries picked by `seed` (`salt` keeps phases apart): the source's index
/// among the primaries, the source and the target.
pub(super) fn seeded_pair(primaries: &[NodeId], seed: u64, salt: u64) -> (usize, NodeId, NodeId) {
    let mut rng = StdRng::seed_from_u64(seed ^ salt);
    let from = rng.random_range(0..primaries.len());
    let to = (from + 1 + rng.random_range(0..primaries.len() - 1)) % primaries.len();
    (from, primaries[from], primaries[to])
}

/// The hash slot of a queue's keys.
pub(super) fn slot_of(q: &str) -> shards::Slot {
    shards::slot(key(q, "pending").as_bytes())
}

/// The queue to move (on a seeded primary, not in the fence's slot), a second queue in the same
/// slot, the slot, and the source and target primaries.
fn choose(
    engine: &crate::engine::Engine,
    admin: &Admin,
    seed: u64,
) -> (String, String, shards::Slot, NodeId, NodeId) {
    let (from, source, target) = seeded_pair(&engine.primaries(admin), seed, 0x5107);
    let fence_slot = shards::slot(FENCE_KEY.as_bytes());
    let q = (0..)
        .map(|i| format!("g8m-{i}"))
        .find(|q| admin.shard_of(&key(q, "pending")) == from && slot_of(q) != fence_slot)
        .expect("some name lands on every primary");
    let slot = slot_of(&q);
    let t = (0..)
        .map(|i| format!("g8m-t{i}"))
        .find(|t| slot_of(t) == slot)
        .expect("every slot has names");
    (q, t, slot, source, target)
}

/// Fills `q` so that every declared key of every verb exists (a pending, an active, a delayed and
/// a dead job), and `t` with pending jobs only.
fn park(c: &mut Conn, q: &str, t: &str, l: &mut Books) -> Result<(), ConnectorError> {
    c.enqueue(SESSION, q, "parked-active", 0)?;
    let active = c.claim(SESSION, q, HOUR_MS)?.ok_or_else(|| {
        ConnectorError::internal("claim on a queue with one pending job returned none")
    })?;
    l.park(q, active.id.clone(), "active");
    let delayed = c.enqueue(SESSION, q, "parked-delayed", HOUR_MS)?;
    l.park(q, delayed, "delayed");
    c.enqueue(SESSION, q, "parked-dead", 0)?;
    let dead = c.claim(SESSION, q, HOUR_MS)?.ok_or_else(|| {
        ConnectorError::internal("claim on a queue with one pending job returned none")
    })?;
    c.retry(SESSION, q, &dead.id, dead.attempts, 0, 1)?;
    l.park(q, dead.id, "dead");
    for i in 0..5 {
        l.jobs
            .enqueue(&mut **c, SESSION, q, &format!("pending-{i}"))?;
        l.jobs.enqueue(&mut **c, SESSION, t, &format!("t-{i}"))?;
    }
    Ok(())
}

/// A node's `INFO errorstats` count of error replies starting with `code`.
fn errorstat(engine: &crate::engine::Engine, node: NodeId, code: &str) -> Result<u64, GateError> {
    let mut a = engine.node_admin(node)?;
    let stats = a.info("errorstats")?;
    Ok(stats
        .get(&format!("errorstat_{code}"))
        .and_then(|v| v.split(',').next()?.strip_prefix("count=")?.parse().ok())
        .unwrap_or(0))
}

/// Every verb on `q` while its keys are on the target and the slot is still the source's.
fn under_ask(c: &mut Conn, q: &str, l: &mut Books) -> Vec<String> {
    let mut failed = Vec::new();
    let mut note = |verb: &str, r: Result<(), ConnectorError>| {
        if let Err(e) = r {
            failed.push(format!("{verb} (kind {}: {})", e.kind, e.message));
        }
    };
    note(
        "enqueue",
        l.jobs.enqueue(&mut **c, SESSION, q, "during").map(|_| ()),
    );
    let claimed = c.claim(SESSION, q, 60_000);
    match claimed {
        Ok(Some(j)) => {
            let r = l
                .jobs
                .complete(&mut **c, SESSION, q, &j.id, j.attempts)
                .and_then(|done| {
                    done.then_some(()).ok_or_else(|| {
                        ConnectorError::internal("complete of a fresh claim returned false")
                    })
                });
            note("complete", r);
        }
        Ok(None) => note("claim", Err(ConnectorError::internal("returned no job"))),
        Err(e) => note("claim", Err(e)),
    }
    note("promote", c.promote(SESSION, q, 10).map(|_| ()));
    note("reap", c.reap(SESSION, q, 5, 10).map(|_| ()));
    note("pending_size", c.pending_size(SESSION, q).map(|_| ()));
    note("browse", c.browse(SESSION, q, 0, 5).map(|_| ()));
    failed
}

/// A claim on `t` in flight while the target answers `TRYAGAIN`; the migration ends meanwhile.
fn under_tryagain(
    ctx: &GateContext<'_>,
    c: &mut Conn,
    t: &str,
    mv: SlotMove,
) -> Result<Result<Option<Claimed>, ConnectorError>, GateError> {
    std::thread::scope(|s| {
        let (tx, rx) = mpsc::channel();
        let call = s.spawn(move || {
            let r = c.claim(SESSION, t, 60_000);
            let _ = tx.send(());
            r
        });
        // Ends the migration once the call returned or the window closed, whichever is first.
        let _ = rx.recv_timeout(TRYAGAIN_WINDOW);
        let finished = mv.finish(ctx.engine);
        let r = call.join().expect("the call thread does not panic");
        finished?;
        Ok(r)
    })
}

/// The legacy migration of `slot` from `from` to `to` under the worker: every verb under `ASK`,
/// then a claim under `TRYAGAIN` (returned, for [`judge_tryagain`]); its figures and the `ASK`
/// verdict. A scenario that did not happen as planned is an `Err`.
fn under_migration(
    ctx: &GateContext<'_>,
    admin: &mut Admin,
    c: &mut Conn,
    (q, t, slot): (&str, &str, shards::Slot),
    (from, to): (NodeId, NodeId),
    l: &mut Books,
    out: &mut GateOutcome,
) -> Result<Result<Option<Claimed>, ConnectorError>, GateError> {
    let (ask0, try0) = (
        errorstat(ctx.engine, from, "ASK")?,
        errorstat(ctx.engine, to, "TRYAGAIN")?,
    );
    let t0 = Instant::now();
    let mut mv = SlotMove::begin(ctx.engine, slot, from, to)?;
    let moved = mv.move_keys()?;
    mv.target().script_flush()?;
    let failed = under_ask(c, q, l);
    let tried = under_tryagain(ctx, c, t, mv)?;
    ctx.engine.mark_health();
    ctx.engine.refresh(admin)?;
    let (asks, tryagains) = (
        errorstat(ctx.engine, from, "ASK")? - ask0,
        errorstat(ctx.engine, to, "TRYAGAIN")? - try0,
    );
    out.figure("migration_keys_moved", moved);
    out.figure("migration_asks", asks);
    out.figure("migration_tryagains", tryagains);
    out.figure("migration_ms", t0.elapsed().as_millis() as u64);
    // Every call reaches the source first, so ASK is the harness's doing; TRYAGAIN needs a
    // connector that reached the target, i.e. one that followed ASK.
    if asks == 0 || (failed.is_empty() && tryagains == 0) {
        return Err(GateError::instrument(format!(
            "the migration of slot {slot} produced {asks} ASK and {tryagains} TRYAGAIN replies; \
             the scenario did not happen as planned"
        )));
    }
    out.none_of(
        &failed,
        "while a queue's keys sat on the migration's target, every verb on it followed ASK \
         (ASKING and the call on the target; a NOSCRIPT there answered by SCRIPT LOAD there) \
         and succeeded (R8.6, R8.8)",
        "failed",
    );
    Ok(tried)
}

/// The phase: runs on a cluster after the failover.
pub fn run(ctx: &GateContext<'_>, out: &mut GateOutcome) -> Result<(), GateError> {
    let GateDb { url, mut admin, .. } = ctx.database(GateId::G8)?;
    let (q, t, slot, from, to) = choose(ctx.engine, &admin, ctx.seed);
    (ctx.progress)(&format!(
        "G8: a live migration of slot {slot} (queues {q}, {t}) from port {from} to {to}"
    ));
    let Some(mut c) = ctx.connected(SESSION, &url, out)? else {
        return Ok(());
    };
    // A session idle throughout: its slot map goes stale, so its next call meets MOVED.
    let mut idle = ctx.factory.make()?;
    idle.connect(SESSION, &url)?;
    idle.pending_size(SESSION, &q)?;
    let mut l = Books::default();
    park(&mut c, &q, &t, &mut l)?;
    for n in 0..ROUNDS {
        l.round(&mut c, &q, n)?;
    }
    let events = ctx.engine.health_events();
    if !events.is_empty() {
        return Err(GateError::instrument(format!(
            "the engine changed during the gate, before its slot migration: {}",
            events.join("; ")
        )));
    }
    let tried = under_migration(
        ctx,
        &mut admin,
        &mut c,
        (&q, &t, slot),
        (from, to),
        &mut l,
        out,
    )?;
    judge_tryagain(&mut admin, &t, tried, &mut l, out)?;
    after(&mut c, &mut idle, (&q, &t), &mut l, out)?;
    settles(ctx, &mut c, &[&q, &t], from, &mut l, out)?;
    let via = ctx
        .engine
        .primaries(&admin)
        .into_iter()
        .find(|p| *p != from && *p != to)
        .expect("a cluster has three primaries");
    let route = atomic::Route {
        queue: &q,
        slot,
        at: to,
        via,
        home: from,
    };
    let home = atomic::run(ctx, &url, &mut admin, &mut c, &route, &mut l, out)?;
    account(ctx, &url, &mut admin, (&q, &t), &mut l, out)?;
    if !home {
        // Home again, with no connector running, so later runs on this cluster meet its usual
        // layout.
        let mut back = SlotMove::begin(ctx.engine, slot, to, from)?;
        back.move_keys()?;
        back.finish(ctx.engine)?;
        ctx.engine.mark_health();
    }
    Ok(())
}

/// R8.7: the claim that met `TRYAGAIN` either waited for the migration's end and claimed, or
/// reported kind `engine` having claimed nothing.
fn judge_tryagain(
    admin: &mut Admin,
    t: &str,
    tried: Result<Option<Claimed>, ConnectorError>,
    l: &mut Books,
    out: &mut GateOutcome,
) -> Result<(), GateError> {
    let pending: u64 = admin.query(&["ZCARD", &key(t, "pending")])?;
    let rule = "a call answered TRYAGAIN during the migration either was retried after it and \
                succeeded once, or showed to the caller as kind engine having changed nothing (R8.7)";
    match tried {
        Ok(Some(j)) if pending == 4 => {
            out.figure("migration_tryagain", "retried until the migration ended");
            l.park(t, j.id, "active");
            out.pass(rule);
        }
        Err(e) if e.kind == ErrorKind::Engine && pending == 5 => {
            out.figure("migration_tryagain", format!("kind engine: {}", e.message));
            out.pass(rule);
        }
        Ok(None) => out.fail(format!(
            "{rule}: the claim answered no job on a queue with 5 pending"
        )),
        Ok(Some(_)) | Err(_) => out.fail(format!(
            "{rule}: the claim answered {} and the queue holds {pending} pending of 5",
            match tried {
                Ok(_) => "a job".to_string(),
                Err(e) => format!("kind {} ({})", e.kind, e.message),
            }
        )),
    }
    Ok(())
}

/// After the migration: the idle session follows `MOVED`; the worker goes on without an error.
fn after(
    c: &mut Conn,
    idle: &mut Conn,
    (q, t): (&str, &str),
    l: &mut Books,
    out: &mut GateOutcome,
) -> Result<(), GateError> {
    match l.jobs.enqueue(&mut **idle, SESSION, q, "after-migration") {
        Ok(_) => out.pass(
            "a session idle through the migration enqueued on the moved queue at once (it followed MOVED)",
        ),
        Err(e) => out.fail(format!(
            "a session idle through the migration could not enqueue on the moved queue (kind {}: {}): it did not follow MOVED (R8.1)",
            e.kind, e.message
        )),
    }
    let errors = rounds(c, &[q, t], 0, l);
    out.none_of(
        &errors,
        "after the migration the worker went on without an error",
        "errors",
    );
    Ok(())
}

/// [`ROUNDS`] worker rounds on each of `queues`, numbered from `first`: the first three errors.
fn rounds(c: &mut Conn, queues: &[&str], first: u32, l: &mut Books) -> Vec<String> {
    rounds_of(c, queues, first..first + ROUNDS, l)
}

/// The rounds `ns` on each of `queues`: the first three errors.
fn rounds_of(
    c: &mut Conn,
    queues: &[&str],
    ns: std::ops::Range<u32>,
    l: &mut Books,
) -> Vec<String> {
    let mut errors = Vec::new();
    for n in ns {
        for queue in queues {
            if let Err(e) = l.round(c, queue, n) {
                errors.push(format!(
                    "round {n} on {queue}: kind {}: {}",
                    e.kind, e.message
                ));
            }
        }
    }
    errors.truncate(3);
    errors
}

/// Batches of rounds after the migration, at most this many, until one meets no `MOVED`.
const SETTLE_BATCHES: u32 = 10;
/// Rounds in one such batch.
const SETTLE_ROUNDS: u32 = 10;

/// R8.11: a `MOVED` makes the session's slot map stale and it is read again, so the worker's
/// calls on the moved slot stop meeting `MOVED` at the source. Counted in batches until one
/// meets none: a connector that patches its map, or reloads it in the background (go-redis's
/// `LazyReload`), has one soon; one that keeps its map meets `MOVED` on every call of every
/// batch. Counts, not time: a busy machine changes neither.
fn settles(
    ctx: &GateContext<'_>,
    c: &mut Conn,
    queues: &[&str],
    source: NodeId,
    l: &mut Books,
    out: &mut GateOutcome,
) -> Result<(), GateError> {
    let mut met = Vec::new();
    let mut errors = Vec::new();
    for b in 0..SETTLE_BATCHES {
        let before = errorstat(ctx.engine, source, "MOVED")?;
        let first = 2_000 + b * SETTLE_ROUNDS;
        errors.extend(rounds_of(c, queues, first..first + SETTLE_ROUNDS, l));
        met.push(errorstat(ctx.engine, source, "MOVED")? - before);
        if met.last() == Some(&0) {
            break;
        }
    }
    errors.truncate(3);
    out.none_of(
        &errors,
        "the worker's rounds after the migration went on without an error",
        "errors",
    );
    out.figure("moved_per_settle_batch", format!("{met:?}"));
    if met.last() == Some(&0) {
        out.pass(
            "after the migration the worker's calls on the moved slot stopped meeting MOVED: a MOVED made its slot map stale and it was read again (R8.11)",
        );
    } else {
        out.fail(format!(
            "after the migration the worker's calls on the moved slot met MOVED in each of {SETTLE_BATCHES} batches of {SETTLE_ROUNDS} rounds ({met:?} MOVED replies from the old owner): a MOVED makes the slot map stale, and the next call reads it again (R8.11)"
        ));
    }
    Ok(())
}

/// Drains both queues and accounts for every job.
fn account(
    ctx: &GateContext<'_>,
    url: &crate::engine::Target,
    admin: &mut Admin,
    (q, t): (&str, &str),
    l: &mut Books,
    out: &mut GateOutcome,
) -> Result<(), GateError> {
    let mut d = ctx.factory.make()?;
    d.connect(SESSION, url.clone())?;
    for queue in [q, t] {
        while let Some(j) = d.claim(SESSION, queue, 60_000)? {
            l.jobs
                .complete(&mut *d, SESSION, queue, &j.id, j.attempts)?;
        }
    }
    out.figure("migration_jobs_acked", l.jobs.acked());
    l.jobs.judge_exactly_once("migration", out);
    let mut misplaced = Vec::new();
    for (queue, id, set) in &l.parked {
        let hash = format!("{}{id}", job_root(queue));
        let state: Option<String> = admin.query(&["HGET", &hash, "state"])?;
        let member: Option<String> = admin.query(&["ZSCORE", &key(queue, set), id])?;
        if member.is_none() || state.as_deref() != Some(*set) {
            misplaced.push(format!("{id} not {set}"));
        }
    }
    for queue in [q, t] {
        let pending: u64 = admin.query(&["ZCARD", &key(queue, "pending")])?;
        if pending > 0 {
            misplaced.push(format!("{} holds {pending}", key(queue, "pending")));
        }
    }
    out.none_of(
        &misplaced,
        "after the drain every parked job (a long lease, a far delay, a dead one) is where it was \
         parked, with its hash, and no job is left pending (nothing orphaned by the move)",
        "misplaced",
    );
    Ok(())
}
