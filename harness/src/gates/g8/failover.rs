//! G8 on a cluster (SPEC R8.4): a graceful `CLUSTER FAILOVER` of a seeded random shard while a
//! worker loop runs over one queue per shard. Acknowledged writes survive a graceful failover,
//! so the accounting is the crash phase's: no acknowledged job lost, none completed twice, none
//! left behind. The connector must follow the old primary's `MOVED` (R8.1): after the failover
//! its calls succeed again.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::ledger::Ledger;
use crate::connector::Verbs;
use crate::engine::topology::{NodeId, Role, try_wait_until};
use crate::gates::{GateContext, GateDb, GateError, GateId, GateOutcome};
use crate::protocol::grammar::key;

const SESSION: &str = "w";
/// Steps of the worker loop before the failover starts, and after it has finished.
const BEFORE: u32 = 200;
const AFTER: u32 = 300;
/// A claim's lease: short, so the drain reaps what a failed call left claimed.
const LEASE_MS: i64 = 1_000;

/// Fails over the shard at `index`: `CLUSTER FAILOVER` on its replica, then waits until the
/// replica is a primary and every primary reports the cluster ok.
fn fail_over(ctx: &GateContext<'_>, index: usize) -> Result<(NodeId, NodeId), GateError> {
    let e = ctx.engine;
    let old = *e
        .primaries(&e.admin(0)?)
        .get(index)
        .ok_or_else(|| GateError::instrument("the cluster has no such shard"))?;
    let new = e.replica_of(old)?;
    let mut replica = e.node_admin(new)?;
    // The baseline is about to move on purpose: an event before it is still the engine's.
    let events = e.health_events();
    if !events.is_empty() {
        return Err(GateError::instrument(format!(
            "the engine changed during the gate, before its own failover: {}",
            events.join("; ")
        )));
    }
    // A replica still in its first sync would be promoted without the data (a loaded machine
    // did that once): the graceful failover's premise is a replica that has caught up.
    e.wait_in_sync(old, new)?;
    replica.query::<()>(&["CLUSTER", "FAILOVER"])?;
    // Every node sees `new` as a primary and `old` as a replica, and all agree on the epoch,
    // so the new health baseline is the cluster after the failover, not half-way through its
    // gossip.
    let what = format!(
        "the failover of port {} to its replica {}",
        e.port_of(old),
        e.port_of(new)
    );
    try_wait_until(&what, || {
        let role = Role::from_info(&replica.info("replication")?);
        let state: String = replica.query(&["CLUSTER", "INFO"])?;
        Ok(role == Some(Role::Primary)
            && crate::engine::cluster::info_ready(&state)
            && e.agreed(new, old, Some(Role::Replica), None))
    })?;
    // The failover is the gate's doing: later changes are judged from here.
    e.mark_health();
    Ok((old, new))
}

/// The phase: runs on a cluster after the fault phase (R8.4).
pub fn run(ctx: &GateContext<'_>, out: &mut GateOutcome) -> Result<(), GateError> {
    let GateDb { url, mut admin, .. } = ctx.database(GateId::G8)?;
    let queues = admin.one_name_per_primary("g8f");
    let mut rng = StdRng::seed_from_u64(ctx.seed ^ 0xfa11);
    let shard = rng.random_range(0..admin.primaries().len().max(1));
    (ctx.progress)(&format!(
        "G8: a worker loop over {} queues with a graceful failover of shard {shard}",
        queues.len()
    ));
    let mut c = ctx.factory.make()?;
    if let Err(e) = c.connect(SESSION, &url) {
        out.fail(format!(
            "connect before the failover failed ({})",
            e.evidence()
        ));
        return Ok(());
    }
    // A second session, connected now and idle through the failover: its slot map goes stale,
    // so its first call afterwards meets the old primary's MOVED (R8.1, R8.4).
    let mut idle = ctx.factory.make()?;
    idle.connect("idle", &url)?;
    for q in &queues {
        idle.pending_size("idle", q)?;
    }
    let mut w = Worker::default();
    let t0 = Instant::now();
    let failover = w.through_failover(ctx, &mut *c, &url, &queues, shard);
    let (old, new) = failover?;
    let moved_queue = queues
        .iter()
        .find(|q| admin.shard_of(&key(q, "pending")) == shard)
        .cloned()
        .unwrap_or_else(|| queues[0].clone());
    match w
        .ledger
        .enqueue(&mut *idle, "idle", &moved_queue, "after-failover")
    {
        Ok(_) => {
            out.pass(
                "a session idle through the failover enqueued on the failed-over shard at once (it followed MOVED)",
            );
        }
        Err(e) => {
            out.fail(format!(
                "a session idle through the failover could not enqueue on the failed-over shard ({}): it did not follow MOVED",
                e.evidence()
            ));
            out.figure("failover_idle_error", e.message);
        }
    }
    out.figure("failover_phase_ms", t0.elapsed().as_millis() as u64);
    out.figure("failover_steps", w.steps);
    out.figure("failover_caller_errors", w.ledger.errors());
    out.pass(format!(
        "a graceful CLUSTER FAILOVER of a seeded random shard (seed {}) ran in the middle of a worker loop over {} queues, one per shard",
        ctx.seed,
        queues.len()
    ));
    out.figure(
        "failover_ports",
        format!("{} -> {}", ctx.engine.port_of(old), ctx.engine.port_of(new)),
    );
    out.check(
        w.errors_after == 0,
        format!(
            "after the failover the connector followed MOVED: {AFTER} more rounds without an error"
        ),
    );
    w.ledger.judge_kinds("a failover", out);

    ctx.engine.refresh(&mut admin)?;
    w.drain_and_account(ctx, &url, &mut admin, &queues, out)
}

/// The worker through the failover: its ledger, and what it saw after the failover finished.
#[derive(Default)]
struct Worker {
    ledger: Ledger,
    errors_after: u32,
    steps: u32,
}

impl Worker {
    /// Rounds of enqueue, claim, complete over `queues` while another thread fails over `shard`;
    /// [`AFTER`] rounds more once it is done.
    fn through_failover(
        &mut self,
        ctx: &GateContext<'_>,
        c: &mut (dyn crate::connector::Connector + Send),
        url: &crate::engine::Target,
        queues: &[String],
        shard: usize,
    ) -> Result<(NodeId, NodeId), GateError> {
        let done = AtomicBool::new(false);
        let t0 = Instant::now();
        std::thread::scope(|s| {
            let h = s.spawn(|| {
                while !done.load(Ordering::SeqCst) && t0.elapsed() < Duration::from_millis(50) {
                    std::thread::sleep(Duration::from_millis(5));
                }
                let r = fail_over(ctx, shard);
                done.store(true, Ordering::SeqCst);
                r
            });
            let mut after = 0;
            while after < AFTER {
                self.steps += 1;
                let finished = done.load(Ordering::SeqCst) && self.steps > BEFORE;
                if finished {
                    after += 1;
                }
                let q = &queues[self.steps as usize % queues.len()];
                let payload = format!("job-{}", self.steps);
                let r = self.ledger.round(c, SESSION, q, &payload, LEASE_MS);
                if let Err(e) = r {
                    self.ledger.failed(&e);
                    if finished {
                        self.errors_after += 1;
                    }
                    let _ = c.disconnect(SESSION);
                    let _ = c.connect(SESSION, url.clone());
                }
                if self.steps > 20_000 {
                    break;
                }
            }
            done.store(true, Ordering::SeqCst);
            h.join().expect("the failover thread does not panic")
        })
    }

    /// Drains every queue, then: every acknowledged job completed exactly once, none left.
    fn drain_and_account(
        &mut self,
        ctx: &GateContext<'_>,
        url: &crate::engine::Target,
        admin: &mut crate::engine::Admin,
        queues: &[String],
        out: &mut GateOutcome,
    ) -> Result<(), GateError> {
        let mut d = ctx.factory.make()?;
        d.connect(SESSION, url.clone())?;
        let deadline = Instant::now() + Duration::from_secs(60);
        for q in queues {
            loop {
                if Instant::now() > deadline {
                    return Err(GateError::instrument(
                        "the drain after the failover did not finish in 60 s",
                    ));
                }
                d.reap(SESSION, q, 1_000_000, 1000)?;
                match d.claim(SESSION, q, 60_000)? {
                    Some(j) => {
                        self.ledger
                            .complete(&mut *d, SESSION, q, &j.id, j.attempts)?;
                    }
                    None => {
                        let active: u64 = admin.query(&["ZCARD", &key(q, "active")])?;
                        if active == 0 {
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(50));
                    }
                }
            }
        }
        out.figure("failover_jobs_acked", self.ledger.acked());
        self.ledger.judge_exactly_once("failover", out);
        let left = super::left_in_sets(admin, queues)?;
        out.none_of(
            &left,
            "after the drain no job is left in any set (no orphan)",
            "left",
        );
        Ok(())
    }
}
