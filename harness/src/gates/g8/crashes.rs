//! G8's crash phase (c): a seeded worker loop while connector connections are killed on the
//! engine (`CLIENT KILL`) before and during calls, and, for a child connector, the process too;
//! then a drain and the accounting. `MONITOR` watches the whole loop: every connection the
//! connector opens, by itself included, must read the fence first (R3.5).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::drain::QUEUE;
use super::ledger::Ledger;
use super::plan::{CRASHES, Crash, Plan};
use super::{MAX_ATTEMPTS, SESSION, fresh};
use crate::connector::{Connector, Reply, Request, Verbs};
use crate::engine::Admin;
use crate::error::ConnectorError;
use crate::gates::{GateContext, GateDb, GateError, GateId, GateOutcome};
use crate::observe::reconnect::{
    CALL_MARK, kept_mark, kill_mark, unfenced_connections, unfenced_replacements,
};
use crate::observe::{Watch, connector_clients};
use crate::protocol::grammar::key;

/// Jobs enqueued before the crash phase.
const JOBS: usize = 300;
/// The crash loop's bound on a stall: no kill landed for this long, nor for twenty of the loop's
/// slowest steps so far, makes the gate an ERROR, never a hang. A bound on the whole loop was a
/// false ERROR on a loaded machine that was still making progress (69 of 100 kills in 90 s).
const CRASH_STALL: Duration = Duration::from_secs(30);

/// One seeded step of the worker.
fn step(
    c: &mut (dyn Connector + Send),
    rng: &mut StdRng,
    ledger: &mut Ledger,
) -> Result<(), ConnectorError> {
    match rng.random_range(0..100) {
        0..50 => {
            let lease = if rng.random_bool(0.7) { 0 } else { 50 };
            match c.claim(SESSION, QUEUE, lease)? {
                Some(j) => match rng.random_range(0..10) {
                    0..6 => ledger
                        .complete(c, SESSION, QUEUE, &j.id, j.attempts)
                        .map(drop),
                    6..9 => c
                        .retry(SESSION, QUEUE, &j.id, j.attempts, 0, MAX_ATTEMPTS)
                        .map(|_| ()),
                    _ => Ok(()), // abandoned: the reaper's job
                },
                None => {
                    for i in 0..20 {
                        c.enqueue(SESSION, QUEUE, &format!("more-{i}"), 0)?;
                    }
                    Ok(())
                }
            }
        }
        50..65 => c.reap(SESSION, QUEUE, MAX_ATTEMPTS, 50).map(|_| ()),
        65..80 => c.promote(SESSION, QUEUE, 50).map(|_| ()),
        80..90 => c.pending_size(SESSION, QUEUE).map(|_| ()),
        _ => c.browse(SESSION, QUEUE, 0, 5).map(|_| ()),
    }
}

/// Marks each connector call in the `MONITOR` stream (keyless `ECHO`s from the harness's own
/// connection, on every node), so a connection is named with the call that opened it.
struct Marker {
    admin: Admin,
    calls: u64,
}

impl Marker {
    fn mark(&mut self, cmd: &str) {
        self.calls += 1;
        let mark = format!("{CALL_MARK}{} {cmd}", self.calls);
        // A mark that cannot be sent only makes the evidence vaguer; it judges nothing.
        // `query_each` reaches every node of a cluster, or the one engine.
        let _ = self.admin.query_each::<String>(&["ECHO", &mark]);
    }
}

/// A connector whose every call is marked first.
struct Marked<'a> {
    inner: &'a mut (dyn Connector + Send),
    marker: &'a mut Marker,
}

impl Connector for Marked<'_> {
    fn call(&mut self, request: &Request) -> Result<Reply, ConnectorError> {
        self.marker.mark(request.cmd());
        self.inner.call(request)
    }
}

/// R3.5 through the kills: on one engine every connection the connector opened read the fence
/// before its first script. On a cluster a session's node connections open lazily and its fence
/// is read once (R8.1), so what is judged there is each connection opened on a node after the
/// harness killed the connector's connections on it (a replacement): a fence read made after
/// the kill comes before its first script. A pool that reconnects by itself fails either way.
fn judge_reconnects(obs: &crate::observe::Observed, ctx: &GateContext<'_>, out: &mut GateOutcome) {
    let cluster = ctx.engine.is_cluster();
    let (bad, working) = if cluster {
        unfenced_replacements(obs, ctx.bundle)
    } else {
        unfenced_connections(obs, ctx.bundle)
    };
    let rule = if cluster {
        "every connection the connector opened on a node after its connections there were killed \
         came after a fence read made since the kill (R8.9, R3.5: a replacement is a connect, \
         also one a cluster client opens by itself)"
    } else {
        "every connection the connector opened through the kills read the fence before its \
         first script (R3.5: a new connection is a connect, also one a client library opens by \
         itself; the reads of a read verb may come before the fence read, P3.1)"
    };
    out.figure("crash_connections_judged", working);
    if bad.is_empty() {
        out.pass(rule);
    } else {
        let shown: Vec<String> = bad.iter().take(3).map(ToString::to_string).collect();
        out.fail(format!(
            "{rule}: {} connections did not; {}",
            bad.len(),
            shown.join("; ")
        ));
    }
}

/// The killer thread ended early (it panicked or its admin connection failed).
const KILLER_GONE: &str = "the killer thread is gone";

/// The killer: on each request, waits the given µs and kills every connector connection of `db`.
fn killer(
    mut admin: Admin,
    db: u32,
    harness: Vec<BTreeSet<String>>,
    rx: mpsc::Receiver<u64>,
    ack: mpsc::Sender<Result<bool, GateError>>,
) {
    for (round, delay) in rx.into_iter().enumerate() {
        if delay > 0 {
            std::thread::sleep(Duration::from_micros(delay));
        }
        let r = connector_clients(&mut admin, db, &harness)
            .and_then(|ids| {
                // Marked just before the kills (R8.9 is judged from the mark): a connector that
                // replaces a connection and reads the fence at once does both after the mark,
                // however fast it reacts; marked after, its fence read could precede the mark.
                // Each mark names the connections the kill found: they opened before it.
                let mut found: BTreeMap<usize, Vec<&str>> = BTreeMap::new();
                for c in &ids {
                    found.entry(c.node).or_default().push(&c.addr);
                }
                for (n, addrs) in &found {
                    admin.query_each::<String>(&["ECHO", &kill_mark(round, *n, addrs)])?;
                }
                for id in &ids {
                    admin.client_kill(id)?;
                }
                // A connection opened between the listing and the kills survives them: it is no
                // replacement, though its first line may come after the mark. Named as kept.
                for kept in connector_clients(&mut admin, db, &harness)? {
                    if !ids.iter().any(|k| k.addr == kept.addr) {
                        admin.query_each::<String>(&[
                            "ECHO",
                            &kept_mark(round, kept.node, &kept.addr),
                        ])?;
                    }
                }
                Ok(!ids.is_empty())
            })
            .map_err(GateError::from);
        if ack.send(r).is_err() {
            return;
        }
    }
}

/// What the crash loop did, for the figures (its failed calls are the ledger's:
/// [`Ledger::errors`]).
#[derive(Default)]
struct Counts {
    conn_kills: u32,
    proc_kills: u32,
    steps: u64,
}

pub(super) fn crashes(ctx: &GateContext<'_>, out: &mut GateOutcome) -> Result<(), GateError> {
    let GateDb { db, url, mut admin } = ctx.database(GateId::G8)?;
    let mut killer_admin = ctx.engine.admin(db)?;
    let mut marker = Marker {
        admin: ctx.engine.admin(db)?,
        calls: 0,
    };
    // Watched from before the first connect: every connection the phase opens is judged (R3.5,
    // R8.9; see `judge_reconnects`).
    let watch = {
        let mut w = Watch::start(&mut admin, db, &[])?;
        w.exclude(&killer_admin.own_addrs_by_node()?)?;
        w.exclude(&marker.admin.own_addrs_by_node()?)?;
        w
    };
    let harness = watch.harness_by_node();
    let mut ledger = Ledger::default();
    (ctx.progress)(&format!(
        "G8: {JOBS} jobs, then a worker loop with {CRASHES} injected crashes"
    ));
    marker.mark("connect");
    let mut c = fresh(ctx, &url)?;
    if !fill(&mut *c, &mut admin, db, out)? {
        return Ok(());
    }
    let t0 = Instant::now();
    let killer = (killer_admin, db, harness);
    let n = crash_loop(ctx, &url, c, &mut marker, &mut ledger, killer)?;
    judge_reconnects(&watch.stop()?, ctx, out);
    out.figure("crash_phase_ms", t0.elapsed().as_millis() as u64);
    out.figure("crash_steps", n.steps);
    out.figure("crash_connection_kills", n.conn_kills);
    out.figure("crash_process_kills", n.proc_kills);
    out.figure("crash_caller_errors", ledger.errors());
    out.pass(format!(
        "{CRASHES} crashes injected: connector connections killed on the engine (CLIENT KILL) before calls and \
         while in flight, in a seeded worker loop (seed {}){}",
        ctx.seed,
        if ctx.factory.killable() {
            "; the connector process was killed at random points too"
        } else {
            "; the connector runs in-process, so only its connections were killed"
        }
    ));
    if ledger.odd_kinds().is_empty() {
        out.pass("a killed connection shows to the caller only as kind engine (R5.4)");
    } else {
        // The process is killed only between calls (`Crash::Process`), so every error here is a
        // connection killed under a call: kind engine (R5.4), never internal (R5.6 is for bugs).
        out.fail(format!(
            "a killed connection showed to the caller as kind {} where R5.4 requires engine",
            ledger
                .odd_kinds()
                .iter()
                .copied()
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    super::drain::drain_and_account(ctx, &url, &mut admin, &mut ledger, out)
}

/// The jobs the crash loop works on; false (a FAIL recorded) when they did not land in the url's
/// database.
fn fill(
    c: &mut (dyn Connector + Send),
    admin: &mut Admin,
    db: u32,
    out: &mut GateOutcome,
) -> Result<bool, GateError> {
    for i in 0..JOBS {
        if let Err(e) = c.enqueue(SESSION, QUEUE, &format!("job-{i}"), 0) {
            out.fail(format!(
                "enqueue before the crash phase failed ({})",
                e.evidence()
            ));
            return Ok(false);
        }
    }
    // The kills land on the url's database: a connector that wrote elsewhere would leave this
    // phase waiting for kills that never come (and its drain for jobs it cannot see).
    let landed: u64 = admin.query(&["ZCARD", &key(QUEUE, "pending")])?;
    if landed != JOBS as u64 {
        out.fail(format!(
            "{JOBS} acknowledged enqueues left {landed} jobs in database {db}, the one the connect url names (SPEC §5: the url's /db selects the database)"
        ));
        return Ok(false);
    }
    Ok(true)
}

/// After a failed call, in turn: nothing (the next verb goes on the same session, as a caller's
/// would: SPEC P3.2 lets the connector reconnect by itself there, and R3.5 says how, so that path
/// is crashed into too), the connector's own recovery (disconnect, connect again on the same
/// instance), and a fresh instance from the factory (a child connector is not respawned for
/// every crash). A session that keeps failing moves on to the next way at its next error.
fn recover(
    ctx: &GateContext<'_>,
    url: &crate::engine::Target,
    mut c: Box<dyn Connector + Send>,
    errors: u32,
    marker: &mut Marker,
) -> Result<Box<dyn Connector + Send>, GateError> {
    if errors % 3 == 1 {
        return Ok(c);
    }
    marker.mark("connect");
    match errors % 3 {
        2 if {
            let _ = c.disconnect(SESSION);
            c.connect(SESSION, url).is_ok()
        } =>
        {
            Ok(c)
        }
        _ => fresh(ctx, url),
    }
}

/// The crash loop's progress: when it began, when the last kill landed, its slowest step.
struct Pace {
    t0: Instant,
    last_kill: Instant,
    kills_then: u32,
    slowest: Duration,
}

impl Pace {
    fn new() -> Self {
        let t0 = Instant::now();
        Self {
            t0,
            last_kill: t0,
            kills_then: 0,
            slowest: Duration::ZERO,
        }
    }

    /// An ERROR once the loop stalls ([`CRASH_STALL`]) or runs past 50 000 steps.
    fn check(&mut self, n: &Counts) -> Result<(), GateError> {
        if n.conn_kills > self.kills_then {
            (self.last_kill, self.kills_then) = (Instant::now(), n.conn_kills);
        }
        let stalled = self.last_kill.elapsed() > CRASH_STALL.max(self.slowest * 20);
        if n.steps > 50_000 || stalled {
            return Err(GateError::instrument(format!(
                "only {} of {CRASHES} crashes injected in {} steps and {} s (none in the last {} s)",
                n.conn_kills,
                n.steps,
                self.t0.elapsed().as_secs(),
                self.last_kill.elapsed().as_secs()
            )));
        }
        Ok(())
    }
}

/// The seeded worker loop while the killer thread kills connections (and the process) at the
/// planned points, until [`CRASHES`] connection kills landed.
fn crash_loop(
    ctx: &GateContext<'_>,
    url: &crate::engine::Target,
    mut c: Box<dyn Connector + Send>,
    marker: &mut Marker,
    ledger: &mut Ledger,
    (killer_admin, db, harness): (Admin, u32, Vec<BTreeSet<String>>),
) -> Result<Counts, GateError> {
    let (tx, rx) = mpsc::channel::<u64>();
    let (ack_tx, ack_rx) = mpsc::channel();
    let mut rng = StdRng::seed_from_u64(ctx.seed);
    let mut plan = Plan::new(ctx.seed, ctx.factory.killable());
    let mut n = Counts::default();
    let mut pace = Pace::new();
    std::thread::scope(|s| -> Result<(), GateError> {
        s.spawn(move || killer(killer_admin, db, harness, rx, ack_tx));
        while n.conn_kills < CRASHES {
            n.steps += 1;
            pace.check(&n)?;
            let step_t0 = Instant::now();
            let mut pending_ack = false;
            match plan.next() {
                Crash::None => {}
                Crash::Process => {
                    c.kill();
                    n.proc_kills += 1;
                    marker.mark("connect");
                    c = fresh(ctx, url)?;
                }
                // Before the call (delay 0, acknowledged first) or while it is in flight.
                Crash::Connections(None) => {
                    tx.send(0).map_err(|_| GateError::instrument(KILLER_GONE))?;
                    if ack_rx
                        .recv()
                        .map_err(|_| GateError::instrument(KILLER_GONE))??
                    {
                        n.conn_kills += 1;
                    }
                }
                Crash::Connections(Some(delay)) => {
                    tx.send(delay)
                        .map_err(|_| GateError::instrument(KILLER_GONE))?;
                    pending_ack = true;
                }
            }
            let marked = &mut Marked {
                inner: &mut *c,
                marker,
            };
            let r = step(marked, &mut rng, ledger);
            if pending_ack
                && ack_rx
                    .recv()
                    .map_err(|_| GateError::instrument(KILLER_GONE))??
            {
                n.conn_kills += 1;
            }
            pace.slowest = pace.slowest.max(step_t0.elapsed());
            if let Err(e) = r {
                ledger.failed(&e);
                c = recover(ctx, url, c, ledger.errors(), marker)?;
            }
        }
        drop(tx);
        Ok(())
    })?;
    Ok(n)
}
