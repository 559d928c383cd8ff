//! G8's crash phase (c): a seeded worker loop while connector connections are killed on the
//! engine (`CLIENT KILL`) before and during calls, and, for a child connector, the process too;
//! then a drain and the accounting. `MONITOR` watches the whole loop: every connection the
//! connector opens, by itself included, must read the fence first (R3.5).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::plan::{CRASHES, Crash, Plan};
use super::{MAX_ATTEMPTS, SESSION};
use crate::connector::{Connector, Reply, Request, Verbs};
use crate::engine::Admin;
use crate::error::{ConnectorError, ErrorKind};
use crate::gates::{GateContext, GateDb, GateError, GateOutcome};
use crate::observe::reconnect::{
    CALL_MARK, KILL_MARK, unfenced_connections, unfenced_replacements,
};
use crate::observe::{Watch, connector_clients, stable};
use crate::protocol::grammar::{Set, job_id, key};

/// Jobs enqueued before the crash phase.
const JOBS: usize = 300;
const QUEUE: &str = "g8c";
/// The crash loop's bound: it takes seconds; past this the gate is an ERROR, never a hang.
const CRASH_PHASE_WITHIN: Duration = Duration::from_secs(90);

/// What the worker learned from the replies.
#[derive(Default)]
struct Ledger {
    /// Complete replies `true`, per id.
    completed: BTreeMap<String, u32>,
    /// Completes sent whose reply was lost to a crash.
    unsure: BTreeSet<String>,
    /// Error kinds the caller saw other than `engine`/`internal` (a crash shows as those).
    odd_kinds: BTreeSet<&'static str>,
}

impl Ledger {
    fn complete(
        &mut self,
        c: &mut (dyn Connector + Send),
        id: &str,
        attempts: i64,
    ) -> Result<(), ConnectorError> {
        match c.complete(SESSION, QUEUE, id, attempts) {
            Ok(true) => {
                *self.completed.entry(id.to_string()).or_default() += 1;
                Ok(())
            }
            Ok(false) => Ok(()),
            Err(e) => {
                self.unsure.insert(id.to_string());
                Err(e)
            }
        }
    }
}

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
                    0..6 => ledger.complete(c, &j.id, j.attempts),
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
        let _ = if self.admin.is_cluster() {
            self.admin
                .query_each::<String>(&["ECHO", &mark])
                .map(|_| ())
        } else {
            self.admin.query::<String>(&["ECHO", &mark]).map(|_| ())
        };
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
fn judge_reconnects(obs: &crate::observe::Observed, cluster: bool, out: &mut GateOutcome) {
    let (bad, working) = if cluster {
        unfenced_replacements(obs)
    } else {
        unfenced_connections(obs)
    };
    let rule = if cluster {
        "every connection the connector opened on a node after its connections there were killed \
         came after a fence read made since the kill (R8.9, R3.5: a replacement is a connect, \
         also one a cluster client opens by itself)"
    } else {
        "every connection the connector opened through the kills read the fence before its \
         first script (R3.5: a new connection is a connect, also one a client library opens by \
         itself)"
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

/// A fresh connector with `SESSION` open (kills may land during the connect: try again).
pub(super) fn fresh(
    ctx: &GateContext<'_>,
    url: &crate::engine::Target,
) -> Result<Box<dyn Connector + Send>, GateError> {
    let mut last = String::new();
    for _ in 0..50 {
        let mut c = ctx.factory.make()?;
        match c.connect(SESSION, url) {
            Ok(()) => return Ok(c),
            // A kill that landed mid-connect is an engine error; anything else will not heal.
            Err(e) if e.kind != crate::error::ErrorKind::Engine => {
                return Err(
                    format!("cannot reconnect the connector: {}: {}", e.kind, e.message).into(),
                );
            }
            Err(e) => last = format!("{}: {}", e.kind, e.message),
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    Err(format!("cannot reconnect the connector: {last}").into())
}

/// The killer: on each request, waits the given µs and kills every connector connection of `db`.
fn killer(
    mut admin: Admin,
    db: u32,
    harness: Vec<String>,
    rx: mpsc::Receiver<u64>,
    ack: mpsc::Sender<Result<bool, GateError>>,
) {
    for delay in rx {
        if delay > 0 {
            std::thread::sleep(Duration::from_micros(delay));
        }
        let r = connector_clients(&mut admin, db, &harness)
            .and_then(|ids| {
                for id in &ids {
                    admin.client_kill(id)?;
                }
                // After the kills, so a connection that appears later on that node is one
                // opened after them: a replacement (R3.5, judged on a cluster).
                let nodes: BTreeSet<usize> = ids.iter().map(|c| c.node).collect();
                for n in nodes {
                    let mark = format!("{KILL_MARK}{n}");
                    if admin.is_cluster() {
                        admin.query_each::<String>(&["ECHO", &mark])?;
                    } else {
                        admin.query::<String>(&["ECHO", &mark])?;
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

pub(super) fn crashes(ctx: &GateContext<'_>, out: &mut GateOutcome) -> Result<(), GateError> {
    let GateDb { db, url, mut admin } = ctx.database("G8")?;
    let mut killer_admin = ctx.engine.admin(db)?;
    let mut marker = Marker {
        admin: ctx.engine.admin(db)?,
        calls: 0,
    };
    // Watched from before the first connect: every connection the phase opens is judged (R3.5),
    // on one engine (see `judge_reconnects`).
    let mut harness = [killer_admin.own_addrs()?, marker.admin.own_addrs()?].concat();
    let watch = {
        let mut w = Watch::start(&mut admin, db, &[])?;
        w.exclude(harness.clone());
        harness = w.harness_addrs();
        w
    };
    let mut rng = StdRng::seed_from_u64(ctx.seed);
    let mut ledger = Ledger::default();
    (ctx.progress)(&format!(
        "G8: {JOBS} jobs, then a worker loop with {CRASHES} injected crashes"
    ));
    marker.mark("connect");
    let mut c = fresh(ctx, &url)?;
    for i in 0..JOBS {
        if let Err(e) = c.enqueue(SESSION, QUEUE, &format!("job-{i}"), 0) {
            out.fail(format!(
                "enqueue before the crash phase failed (kind {})",
                e.kind
            ));
            return Ok(());
        }
    }
    // The kills land on the url's database: a connector that wrote elsewhere would leave this
    // phase waiting for kills that never come (and its drain for jobs it cannot see).
    let landed: u64 = admin.query(&["ZCARD", &key(QUEUE, "pending")])?;
    if landed != JOBS as u64 {
        out.fail(format!(
            "{JOBS} acknowledged enqueues left {landed} jobs in database {db}, the one the connect url names (SPEC §5: the url's /db selects the database)"
        ));
        return Ok(());
    }
    let (tx, rx) = mpsc::channel::<u64>();
    let (ack_tx, ack_rx) = mpsc::channel();
    let killable = ctx.factory.killable();
    let mut plan = Plan::new(ctx.seed, killable);
    let (mut conn_kills, mut proc_kills, mut steps, mut errors) = (0u32, 0u32, 0u64, 0u64);
    let t0 = Instant::now();
    let result = std::thread::scope(|s| -> Result<(), GateError> {
        s.spawn(move || killer(killer_admin, db, harness, rx, ack_tx));
        while conn_kills < CRASHES {
            steps += 1;
            if steps > 50_000 || t0.elapsed() > CRASH_PHASE_WITHIN {
                return Err(format!(
                    "only {conn_kills} of {CRASHES} crashes injected in {steps} steps and {} s",
                    t0.elapsed().as_secs()
                )
                .into());
            }
            let mut pending_ack = false;
            match plan.next() {
                Crash::None => {}
                Crash::Process => {
                    c.kill();
                    proc_kills += 1;
                    marker.mark("connect");
                    c = fresh(ctx, &url)?;
                }
                // Before the call (delay 0, acknowledged first) or while it is in flight.
                Crash::Connections(None) => {
                    tx.send(0).map_err(|_| KILLER_GONE)?;
                    if ack_rx.recv().map_err(|_| KILLER_GONE)?? {
                        conn_kills += 1;
                    }
                }
                Crash::Connections(Some(delay)) => {
                    tx.send(delay).map_err(|_| KILLER_GONE)?;
                    pending_ack = true;
                }
            }
            let r = step(
                &mut Marked {
                    inner: &mut *c,
                    marker: &mut marker,
                },
                &mut rng,
                &mut ledger,
            );
            if pending_ack && ack_rx.recv().map_err(|_| KILLER_GONE)?? {
                conn_kills += 1;
            }
            if let Err(e) = r {
                errors += 1;
                if !matches!(e.kind, ErrorKind::Engine | ErrorKind::Internal) {
                    ledger.odd_kinds.insert(e.kind.as_str());
                }
                // Alternately the connector's own recovery (disconnect, connect again on the same
                // instance) and a fresh instance from the factory: both paths get crashed into,
                // and a child connector is not respawned for every crash.
                marker.mark("connect");
                let reused = errors % 2 == 1 && {
                    let _ = c.disconnect(SESSION);
                    c.connect(SESSION, &url).is_ok()
                };
                if !reused {
                    c = fresh(ctx, &url)?;
                }
            }
        }
        drop(tx);
        Ok(())
    });
    result?;
    judge_reconnects(&watch.stop()?, ctx.engine.is_cluster(), out);
    out.figure("crash_phase_ms", t0.elapsed().as_millis() as u64);
    out.figure("crash_steps", steps);
    out.figure("crash_connection_kills", conn_kills);
    out.figure("crash_process_kills", proc_kills);
    out.figure("crash_caller_errors", errors);
    out.pass(format!(
        "{CRASHES} crashes injected: connector connections killed on the engine (CLIENT KILL) before calls and \
         while in flight, in a seeded worker loop (seed {}){}",
        ctx.seed,
        if killable {
            "; the connector process was killed at random points too"
        } else {
            "; the connector runs in-process, so only its connections were killed"
        }
    ));
    if ledger.odd_kinds.is_empty() {
        out.pass("a crash shows to the caller only as kind engine or internal");
    } else {
        out.fail(format!(
            "a crash showed to the caller as kinds other than engine or internal: {:?}",
            ledger.odd_kinds
        ));
    }

    // Drain: no crashes now.
    (ctx.progress)("G8: drain and account");
    let mut d = fresh(ctx, &url)?;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if Instant::now() > deadline {
            return Err("the drain did not finish in 60 s".into());
        }
        let moved = d
            .reap(SESSION, QUEUE, MAX_ATTEMPTS, 1000)
            .and_then(|r| Ok(r + d.promote(SESSION, QUEUE, 1000)?));
        let moved = match moved {
            Ok(m) => m,
            Err(e) => {
                out.fail(format!("the drain saw an error (kind {})", e.kind));
                out.figure("drain_error", e.message);
                return Ok(());
            }
        };
        match d.claim(SESSION, QUEUE, 60_000) {
            Ok(Some(j)) => {
                if let Err(e) = ledger.complete(&mut *d, &j.id, j.attempts) {
                    out.fail(format!("the drain saw an error (kind {})", e.kind));
                    out.figure("drain_error", e.message);
                    return Ok(());
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
                out.fail(format!("the drain saw an error (kind {})", e.kind));
                out.figure("drain_error", e.message);
                return Ok(());
            }
        }
    }

    // Account.
    let ks = admin.keyspace()?;
    let q = ks.queues.get(QUEUE).cloned().unwrap_or_default();
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
        let done = ledger.completed.get(&id).copied().unwrap_or(0);
        if sets == 0 && done == 0 && !ledger.unsure.contains(&id) && !q.jobs.contains_key(&id) {
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
    let unsure_gone = ledger
        .unsure
        .iter()
        .filter(|id| !home.contains_key(id.as_str()) && !ledger.completed.contains_key(*id))
        .count();
    out.figure("jobs_minted", minted);
    out.figure("jobs_completed", ledger.completed.len() as u64);
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
