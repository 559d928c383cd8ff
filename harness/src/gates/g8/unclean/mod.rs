//! G8 on a cluster and behind Sentinel: two unclean failovers (SPEC R8.10, R8.11; R11.3), after
//! the graceful one, while a crew of the connector's sessions (a producer, two workers, a reaper:
//! [`crew`]) runs throughout (behind Sentinel the graceful one too):
//! - **graceful** (behind Sentinel): a coordinated `SENTINEL FAILOVER` to a seeded replica; the
//!   old primary pauses its writes, hands over and is a replica at once;
//! - **kill**: SIGKILL to the primary of a seeded random shard (behind Sentinel, the primary);
//!   its replica (a seeded one of two behind Sentinel) is promoted (automatic failover on for
//!   this scenario only, with a short node timeout; behind Sentinel the one replica with a
//!   priority: [`tuning::Tuning`]); then the node is started again and rejoins as a replica (the
//!   Sentinels turn it);
//! - **stall**: SIGSTOP to the primary past the node timeout (`down-after-milliseconds`); once
//!   its replica is promoted, SIGCONT: a zombie that runs what was waiting in its sockets as a
//!   primary, then answers as the replica it became. Its proxy answers `-READONLY` on every
//!   connection opened before the stall, as an endpoint that kept pointing at the demoted node
//!   would.
//!
//! Every acknowledged job is then attributed ([`attribution`]): what the engine lost in its
//! asynchronous replication window is counted and reported, never a FAIL; what the connector
//! lost, duplicated or left behind, and a worker that stopped claiming, FAIL with the job's calls.

pub mod attribution;
pub mod crew;
mod evidence;
pub(super) mod tuning;

use std::cell::Cell;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use self::attribution::Facts;
use self::crew::{ROLES, Role, Shared};
use self::tuning::{Tuning, wait_for};
use crate::connector::Verbs;
use crate::connector::starts::StartReason;
use crate::engine::Admin;
use crate::engine::nodes::TakeOver;
use crate::engine::topology::{ENGINE_WITHIN, NodeId, Role as NodeRole};
use crate::gates::{GateContext, GateDb, GateError, GateId, GateOutcome};
use crate::protocol::grammar::key;

/// Enqueues the kill scenario's primary acknowledges after its replica is cut off.
const BURST: u64 = 10;
/// The crew's workers.
const WORKERS: usize = 2;

/// The scenarios.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Behind Sentinel only: the cluster's graceful failover is [`super::failover`]'s.
    Graceful,
    Kill,
    Stall,
}

impl Kind {
    pub fn tag(self) -> &'static str {
        match self {
            Self::Graceful => "graceful",
            Self::Kill => "kill",
            Self::Stall => "stall",
        }
    }

    /// The seed's share for this scenario's choice of primary and replica.
    fn salt(self) -> u64 {
        match self {
            Self::Graceful => 0x9ace,
            Self::Kill => 0xdead,
            Self::Stall => 0x5709,
        }
    }
}

/// The phase: the scenarios, one after the other (behind Sentinel the graceful one first).
pub fn run(ctx: &GateContext<'_>, out: &mut GateOutcome) -> Result<(), GateError> {
    let GateDb {
        url, mut admin, db, ..
    } = ctx.database(GateId::G8)?;
    let t0 = Instant::now();
    let graceful = (!ctx.engine.is_cluster()).then_some(Kind::Graceful);
    for kind in graceful.into_iter().chain([Kind::Kill, Kind::Stall]) {
        scenario(ctx, out, &url, (&mut admin, db), kind)?;
    }
    out.figure("unclean_phase_ms", t0.elapsed().as_millis() as u64);
    Ok(())
}

/// What the scenario saw happen, in ms since the crew began.
struct Timeline {
    fault_ms: u64,
    /// Until when the old primary could acknowledge a write the new one never gets: its death
    /// (kill), or its demotion (stall; a forced graceful failover). A coordinated failover
    /// hands over everything acknowledged: the fault.
    lossy_until_ms: u64,
    promoted_ms: u64,
    announced_ms: u64,
    bound_ms: u64,
    take_over: TakeOver,
    /// `-READONLY` replies the zombie's proxy gave (stall).
    readonly: u64,
    /// Spent waiting on the engine's promotion and its gossip (the crew works meanwhile).
    waited: Duration,
}

/// The node the scenario kills or stops, and the replica that takes over from it; started or
/// woken again when dropped, whatever happened.
struct Victim<'a> {
    ctx: &'a GateContext<'a>,
    kind: Kind,
    node: NodeId,
    replica: NodeId,
    killed: Cell<bool>,
    stopped: Cell<bool>,
    /// The graceful failover was coordinated (the engine's own fallback is forced).
    coordinated: Cell<bool>,
}

impl Victim<'_> {
    fn heal(&self) -> Result<(), GateError> {
        let e = self.ctx.engine;
        let proxy = e.proxy_of(self.node)?;
        if self.stopped.get() {
            self.pause(false)?;
        }
        if self.killed.replace(false) {
            e.restart_node(self.node)?;
        }
        proxy.end_readonly();
        Ok(())
    }

    /// SIGSTOP (`stop`) or SIGCONT to the node. The connectors' requests in flight meanwhile get
    /// the held time on top of their timeout (R5.8): the stall is the harness's, not theirs.
    fn pause(&self, stop: bool) -> Result<(), GateError> {
        let (e, factory) = (self.ctx.engine, self.ctx.factory);
        if stop {
            factory.hold(true);
            self.stopped.set(true);
            return Ok(e.pause_node(self.node, true)?);
        }
        self.stopped.set(false);
        let woken = e.pause_node(self.node, false);
        factory.hold(false);
        Ok(woken?)
    }
}

impl Drop for Victim<'_> {
    fn drop(&mut self) {
        let _ = self.heal();
        if let Ok(p) = self.ctx.engine.proxy_of(self.node) {
            p.refuse(false);
        }
    }
}

fn scenario(
    ctx: &GateContext<'_>,
    out: &mut GateOutcome,
    url: &crate::engine::Target,
    (admin, db): (&mut Admin, u32),
    kind: Kind,
) -> Result<(), GateError> {
    let tag = kind.tag();
    let Strike {
        place,
        primary,
        replica,
        queues,
        victim,
    } = strike(ctx, admin, kind)?;
    (ctx.progress)(&format!(
        "G8: {tag}: {place} (port {}) under a crew of {} sessions",
        ctx.engine.port_of(primary),
        ROLES.len()
    ));
    let Some(members) = connect_crew(ctx, out, url, tag)? else {
        return Ok(());
    };
    let shared = Shared::new(tag, queues.clone(), victim, ctx.engine.node_url(primary));
    let node = Victim {
        ctx,
        kind,
        node: primary,
        replica,
        killed: Cell::new(false),
        stopped: Cell::new(false),
        coordinated: Cell::new(false),
    };
    let tuning = Tuning::apply(ctx, replica)?;
    let timeline = std::thread::scope(|sc| {
        for (role, c) in members {
            let s = &shared;
            sc.spawn(move || crew::run(role, c, &role.name(), s));
        }
        let r = node.drive(&shared);
        shared.stop.store(true, Ordering::SeqCst);
        r
    });
    let healed = node.heal();
    drop(tuning);
    drop(node);
    let timeline = timeline?;
    healed?;
    out.waited += timeline.waited;
    // The engine as the scenario left it: the old primary a replica of the new one, in sync.
    out.waited += ctx.engine.wait_whole(
        &format!("{tag}: the engine settling after the rejoin"),
        replica,
        primary,
    )?;
    // Both failovers are the gate's doing: later changes are judged from here.
    ctx.engine.mark_health();
    if ctx.engine.is_cluster() {
        ctx.engine.refresh(admin)?;
    } else {
        // Behind Sentinel the admin's connection went to the old primary.
        *admin = ctx.engine.admin(db)?;
    }
    let drained = drain(ctx, url, admin, &queues)?;
    judge(out, kind, &shared, &timeline, drained, admin, &queues)
}

/// Where a scenario strikes: the primary it fails over and the replica that takes over, caught
/// up, on an engine nothing else changed yet; the crew's queues, and which live on that primary.
struct Strike {
    /// The primary, in words for the progress line.
    place: String,
    primary: NodeId,
    replica: NodeId,
    queues: Vec<String>,
    victim: Vec<bool>,
}

/// The seeded shard whose primary the scenario fails over (a queue on each shard), or behind
/// Sentinel the primary and a seeded one of its replicas (two queues, both on it).
fn strike(ctx: &GateContext<'_>, admin: &mut Admin, kind: Kind) -> Result<Strike, GateError> {
    let e = ctx.engine;
    let tag = kind.tag();
    let mut rng = StdRng::seed_from_u64(ctx.seed ^ kind.salt());
    let s = if e.is_cluster() {
        e.refresh(admin)?;
        let primaries = e.primaries(admin);
        let shard = rng.random_range(0..primaries.len().max(1));
        let primary = primaries[shard];
        let queues = admin.one_name_per_primary(&format!("g8{tag}"));
        let victim = queues
            .iter()
            .map(|q| admin.shard_of(&key(q, "pending")) == shard)
            .collect();
        Strike {
            place: format!("the primary of shard {shard}"),
            primary,
            replica: e.replica_of(primary)?,
            queues,
            victim,
        }
    } else {
        let primary = e.seed();
        let replicas: Vec<NodeId> = e.nodes().into_iter().filter(|n| *n != primary).collect();
        for r in &replicas {
            e.wait_in_sync(primary, *r)?;
        }
        Strike {
            place: format!("the primary {primary}"),
            primary,
            replica: replicas[rng.random_range(0..replicas.len())],
            queues: vec![format!("g8{tag}-0"), format!("g8{tag}-1")],
            victim: vec![true, true],
        }
    };
    e.wait_in_sync(s.primary, s.replica)?;
    let events = e.health_events();
    if !events.is_empty() {
        return Err(GateError::instrument(format!(
            "the engine changed during the gate, before its {} failover: {}",
            kind.tag(),
            events.join("; ")
        )));
    }
    Ok(s)
}

/// A member of the crew: its role and its connected session.
type Member = (Role, Box<dyn crate::connector::Connector + Send>);

/// The crew, each member connected; `None` (and `out` failed) when one could not connect.
fn connect_crew(
    ctx: &GateContext<'_>,
    out: &mut GateOutcome,
    url: &crate::engine::Target,
    tag: &str,
) -> Result<Option<Vec<Member>>, GateError> {
    ctx.factory.warm(ROLES.len(), StartReason::Concurrent);
    let mut members = Vec::new();
    for role in ROLES {
        let mut c = ctx.factory.make()?;
        if let Err(e) = c.connect(&role.name(), url) {
            out.fail(format!(
                "{tag}: the {} could not connect ({})",
                role.name(),
                e.evidence()
            ));
            return Ok(None);
        }
        members.push((role, c));
    }
    Ok(Some(members))
}

/// The scenario's phases, on its victim.
impl Victim<'_> {
    /// The fault, the promotion, the progress and the rejoin, while the crew runs.
    fn drive(&self, s: &Shared) -> Result<Timeline, GateError> {
        let (e, primary, replica, kind) = (self.ctx.engine, self.node, self.replica, self.kind);
        // Warm-up: the crew works on the shard before the fault.
        wait_for("the crew's first jobs on the failed-over shard", || {
            s.victim_acks.load(Ordering::SeqCst) >= 20 && s.claimed_since(0) == WORKERS
        })?;
        let slowest = s
            .calls()
            .iter()
            .filter(|c| c.reply.is_ok())
            .map(|c| c.end_ms - c.start_ms)
            .max()
            .unwrap_or(1)
            .max(1);
        let fault_ms = self.inject(s)?;
        let mut waited = wait_for("the replica's promotion", || {
            e.role(replica) == Some(NodeRole::Primary)
        })?;
        let promoted_ms = s.ms();
        let take_over = e.take_over(replica)?;
        waited += e.wait_promotion(replica, primary)?;
        match kind {
            Kind::Stall => self.wake(s)?,
            // Coordinated, the old primary is a replica already; forced, once the Sentinels turn it.
            Kind::Graceful => {
                waited += e.wait_demotion("the old primary's demotion", primary, replica)?;
            }
            Kind::Kill => {}
        }
        let announced_ms = s.ms();
        // Every worker claims on the shard again within a bound scaled to what this run measured:
        // twice the failover itself, and twenty of the crew's slowest calls before it.
        let bound_ms = 2 * (announced_ms - fault_ms) + 20 * slowest;
        let _ = wait_for("progress", || {
            s.claimed_since(announced_ms) == WORKERS || s.ms() > announced_ms + bound_ms
        });
        let readonly = self.rejoin()?;
        // A few more rounds on the healed cluster (bounded as the progress was).
        let healed_ms = s.ms();
        let _ = wait_for("work after the rejoin", || {
            s.claimed_since(healed_ms) == WORKERS || s.ms() > healed_ms + bound_ms
        });
        let lossy_until_ms = match kind {
            Kind::Kill => fault_ms,
            Kind::Graceful if self.coordinated.get() => fault_ms,
            Kind::Graceful | Kind::Stall => announced_ms,
        };
        Ok(Timeline {
            fault_ms,
            lossy_until_ms,
            promoted_ms,
            announced_ms,
            bound_ms,
            take_over,
            readonly,
            waited,
        })
    }

    /// The fault itself; when it struck (the crew's clock).
    fn inject(&self, s: &Shared) -> Result<u64, GateError> {
        let (ctx, e, primary, replica) = (self.ctx, self.ctx.engine, self.node, self.replica);
        match self.kind {
            Kind::Kill => {
                // The replica is cut off first (its link closed, and it cannot authenticate to come
                // back), so a burst the primary acknowledges is one the replica never has: the
                // engine's loss on every run, which the accounting must tell from the connector's.
                let burst_from = s.victim_acks.load(Ordering::SeqCst);
                tuning::cut_off(ctx, primary, replica)?;
                wait_for("a burst acknowledged past the cut-off replica", || {
                    s.victim_acks.load(Ordering::SeqCst) >= burst_from + BURST
                })?;
                // Clients reach the node again only once it has rejoined as a replica. Not behind
                // Sentinel: the Sentinels reach it through its proxy to turn it into one.
                if e.is_cluster() {
                    e.proxy_of(primary)?.refuse(true);
                }
                self.killed.set(true);
                let fault_ms = s.ms();
                e.kill_node(primary)?;
                tuning::reconnect(ctx, replica)?;
                Ok(fault_ms)
            }
            Kind::Stall => {
                let fault_ms = s.ms();
                self.pause(true)?;
                Ok(fault_ms)
            }
            Kind::Graceful => {
                let fault_ms = s.ms();
                self.coordinated.set(e.sentinel_failover()?);
                Ok(fault_ms)
            }
        }
    }

    /// The stalled primary wakes: what waited in its sockets runs, then it learns it was replaced.
    fn wake(&self, s: &Shared) -> Result<(), GateError> {
        let (e, primary, replica) = (self.ctx.engine, self.node, self.replica);
        e.proxy_of(primary)?.readonly_before_now();
        self.pause(false)?;
        s.side_generation.fetch_add(1, Ordering::SeqCst);
        e.wait_demotion("the woken primary's demotion", primary, replica)?;
        Ok(())
    }

    /// The killed node started again and rejoined as a replica, or the woken one's `-READONLY`
    /// window closed; the `-READONLY` replies its proxy gave (stall).
    fn rejoin(&self) -> Result<u64, GateError> {
        let (e, primary, replica) = (self.ctx.engine, self.node, self.replica);
        let proxy = e.proxy_of(primary)?;
        match self.kind {
            Kind::Stall => return Ok(proxy.end_readonly()),
            Kind::Graceful => return Ok(0),
            Kind::Kill => {}
        }
        self.killed.set(false);
        e.restart_node(primary)?;
        e.wait_demotion("the killed node's rejoin as a replica", primary, replica)?;
        proxy.refuse(false);
        Ok(0)
    }
}

/// Reaps, claims and completes everything left, with the connector under test: each job's
/// payload and the id it was claimed under.
fn drain(
    ctx: &GateContext<'_>,
    url: &crate::engine::Target,
    admin: &mut Admin,
    queues: &[String],
) -> Result<Vec<(String, String)>, GateError> {
    let mut d = ctx.factory.make()?;
    d.connect("drain", url)?;
    let deadline = Instant::now() + ENGINE_WITHIN;
    let mut out = Vec::new();
    for q in queues {
        loop {
            if Instant::now() > deadline {
                return Err(GateError::instrument(format!(
                    "the drain after the unclean failover did not finish in {} s",
                    ENGINE_WITHIN.as_secs()
                )));
            }
            d.reap("drain", q, 1_000_000, 1000)?;
            match d.claim("drain", q, 60_000)? {
                Some(j) => {
                    if d.complete("drain", q, &j.id, j.attempts)? {
                        out.push((j.payload, j.id));
                    }
                }
                None => {
                    let active: u64 = admin.query(&["ZCARD", &key(q, "active")])?;
                    if active == 0 {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(crew::LEASE_MS as u64 / 10));
                }
            }
        }
    }
    let _ = d.disconnect("drain");
    Ok(out)
}

/// The accounting, its evidence and its figures.
fn judge(
    out: &mut GateOutcome,
    kind: Kind,
    s: &Shared,
    t: &Timeline,
    drained: Vec<(String, String)>,
    admin: &mut Admin,
    queues: &[String],
) -> Result<(), GateError> {
    let tag = kind.tag();
    let calls = s.calls();
    let facts = Facts {
        drained,
        take_over: Some(t.take_over.clone()),
        fault_ms: t.fault_ms,
        lossy_until_ms: t.lossy_until_ms,
        announced_ms: t.announced_ms,
        workers: ROLES
            .iter()
            .filter(|r| matches!(r, Role::Worker(_)))
            .map(|r| r.name())
            .collect(),
        bound_ms: t.bound_ms,
    };
    let v = attribution::attribute(&calls, &facts);
    evidence::record(out, tag, &v, t.bound_ms, &t.take_over);
    let f = |name: &str| format!("unclean_{tag}_{name}");
    out.figure(&f("calls"), calls.len());
    out.figure(&f("jobs_acked"), v.acked);
    out.figure(&f("engine_lost"), v.engine.len());
    out.figure(&f("engine_window_ms"), v.window_ms);
    out.figure(&f("engine_window_bytes"), v.window_bytes);
    out.figure(&f("connector_anomalies"), v.connector.len());
    out.figure(&f("recovered"), v.recovered);
    out.figure(&f("writes_refused"), v.refused);
    out.figure(&f("promotion_ms"), t.promoted_ms - t.fault_ms);
    out.figure(&f("announced_ms"), t.announced_ms - t.fault_ms);
    out.figure(&f("progress_bound_ms"), t.bound_ms);
    if let Some(ms) = v.first_claim_ms {
        out.figure(&f("first_claim_ms"), ms);
    }
    if kind == Kind::Stall {
        out.figure(&f("readonly_replies"), t.readonly);
    }
    // What the crew met, by the first words of each error: what "refused" was.
    let mut seen = std::collections::BTreeMap::<String, u64>::new();
    for c in &calls {
        if let Err(e) = &c.reply {
            *seen
                .entry(e.to_string().chars().take(60).collect())
                .or_default() += 1;
        }
    }
    out.figure(
        &f("errors_seen"),
        serde_json::to_value(&seen).unwrap_or_default(),
    );
    let left = super::left_in_sets(admin, queues)?;
    out.none_of(
        &left,
        &format!("{tag}: after the drain no job is left in any set (no orphan)"),
        "left",
    );
    Ok(())
}
