//! G8's fault phase: every mutating verb, under every fault of the harness's proxy, judged by the
//! accounting of indeterminate calls ([`super::accounting`]). Each call's outcome and the breaches
//! found in it go into the phase's [`Ledger`].
//!
//! The connector is handed the url of a [`Proxy`] in front of the engine. Each trial has a queue
//! of its own: a setup through the proxy with no fault armed (a few jobs enqueued, claimed,
//! retried or leased out, as the verb needs), the state read, one call with one fault armed on
//! that verb's `EVALSHA` (for a batch, on a seeded one of its enqueues), the state read again, and
//! the accounting. The connection is then reopened (every fourth trial, a fresh connector). The
//! schedule is [`schedule`]: every verb × every fault × [`ROUNDS`], in a seeded order, plus a reset
//! on connect. Nothing depends on timing: the proxy acts on one exact command and the engine's state
//! is settled when the call returns, so a breakage fails on every run and with every seed.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::accounting::{Job, Outcome, Record, Snapshot, account};
use super::ledger::Ledger;
use super::{MAX_ATTEMPTS, SESSION, fresh};
use crate::connector::{Cmd, Connector, Request, Verbs};
use crate::engine::Admin;
use crate::error::{ConnectorError, ErrorKind};
use crate::faults::{Fault, Matcher, Proxy, Rule};
use crate::gates::{GateContext, GateDb, GateError, GateId, GateOutcome};
use crate::observe::stable;
use crate::protocol::grammar::Set;

mod proxies;
mod verdict;

use proxies::Proxies;
use verdict::verdict;

/// How many times each (verb, fault) pair is hit.
pub const ROUNDS: usize = 2;
/// The delay fault holds a reply this long.
pub const DELAY: Duration = Duration::from_millis(150);
/// A faulted batch: `BATCH_N` enqueues, `BATCH_DEPTH` per pipeline.
const BATCH_N: i64 = 8;
const BATCH_DEPTH: i64 = 4;
/// The mutating verbs (those that run a script), in the order evidence lists them.
pub fn verbs() -> Vec<Cmd> {
    Cmd::mutating().collect()
}
/// The faults every verb meets.
pub const FAULTS: [Fault; 4] = [
    Fault::LostReply,
    Fault::DropBefore,
    Fault::CutReply,
    Fault::Delay(DELAY),
];

/// One trial: a verb and the fault its call meets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trial {
    pub verb: Cmd,
    pub fault: Fault,
}

/// The seeded schedule: every verb × every fault, [`ROUNDS`] times, shuffled by `seed`.
pub fn schedule(seed: u64) -> Vec<Trial> {
    let mut all: Vec<Trial> = (0..ROUNDS)
        .flat_map(|_| {
            verbs()
                .into_iter()
                .flat_map(|v| FAULTS.iter().map(move |f| Trial { verb: v, fault: *f }))
        })
        .collect();
    let mut rng = StdRng::seed_from_u64(seed ^ 0x6738_fa17);
    for i in (1..all.len()).rev() {
        let j = rng.random_range(0..=i);
        all.swap(i, j);
    }
    all
}

/// The state of queue `q`, with `due` from the server's clock; and every §3 violation seen.
fn snapshot(admin: &mut Admin, q: &str) -> Result<(Snapshot, Vec<String>), GateError> {
    let ks = admin.keyspace()?;
    let now = admin.time_ms()?;
    let st = ks.queues.get(q).cloned().unwrap_or_default();
    let mut snap = Snapshot {
        seq: st.seq.unwrap_or(0),
        ..Snapshot::default()
    };
    for set in Set::ALL {
        for (id, score) in st.set(set) {
            let h = st.jobs.get(id);
            let field = |f: &str| h.and_then(|h| h.get(f)).cloned().unwrap_or_default();
            snap.jobs.insert(
                id.clone(),
                Job {
                    payload: field("payload"),
                    set,
                    attempts: field("attempts").parse().unwrap_or(-1),
                    due: matches!(set, Set::Active | Set::Delayed) && *score <= now,
                },
            );
        }
    }
    Ok((snap, ks.violations()))
}

/// Readies queue `q` for `verb` with no fault armed; returns the call to fault.
fn setup(
    c: &mut (dyn Connector + Send),
    q: &str,
    verb: Cmd,
    pending: usize,
    token: &str,
) -> Result<Request, ConnectorError> {
    for j in 0..pending {
        c.enqueue(SESSION, q, &format!("{token}.setup{j}"), 0)?;
    }
    let claimed = |c: &mut (dyn Connector + Send), lease| {
        c.claim(SESSION, q, lease)?
            .ok_or_else(|| ConnectorError::internal("setup: claim found nothing"))
    };
    let (session, queue) = (SESSION.to_string(), q.to_string());
    Ok(match verb {
        Cmd::Enqueue => Request::Enqueue {
            session,
            queue,
            payload: token.into(),
            delay_ms: 0,
        },
        Cmd::Batch => Request::Batch {
            session,
            queue,
            n: BATCH_N,
            depth: BATCH_DEPTH,
            payload: token.into(),
            queues: None,
        },
        Cmd::Claim => Request::Claim {
            session,
            queue,
            lease_ms: 60_000,
        },
        Cmd::Complete => {
            let j = claimed(c, 60_000)?;
            Request::Complete {
                session,
                queue,
                id: j.id,
                attempts: j.attempts,
            }
        }
        Cmd::Retry => {
            let j = claimed(c, 60_000)?;
            Request::Retry {
                session,
                queue,
                id: j.id,
                attempts: j.attempts,
                backoff_ms: 0,
                max_attempts: MAX_ATTEMPTS,
            }
        }
        Cmd::Promote => {
            for _ in 0..2 {
                let j = claimed(c, 60_000)?;
                c.retry(SESSION, q, &j.id, j.attempts, 0, MAX_ATTEMPTS)?;
            }
            Request::Promote {
                session,
                queue,
                limit: 100,
            }
        }
        Cmd::Reap => {
            claimed(c, 0)?;
            claimed(c, 0)?;
            Request::Reap {
                session,
                queue,
                max_attempts: MAX_ATTEMPTS,
                limit: 100,
            }
        }
        other => unreachable!("{other} runs no script"),
    })
}

fn fault_name(f: Fault) -> String {
    match f {
        Fault::Delay(d) => format!("reply delayed {} ms", d.as_millis()),
        other => other.name().into(),
    }
}

/// The phase's instruments: the gate's database, the proxies its faults are armed on, and the
/// seeded draws (setup depth, faulted enqueue of a batch); its books: the ledger of its calls, and
/// the §3 violations the keyspace showed around them.
struct Phase<'a> {
    ctx: &'a GateContext<'a>,
    admin: Admin,
    proxies: Proxies<'a>,
    purl: crate::engine::Target,
    rng: StdRng,
    ledger: Ledger,
    violations: BTreeSet<String>,
}

/// The phase: runs the schedule and records one verdict line (and the breaches, if any).
pub fn run(ctx: &GateContext<'_>, out: &mut GateOutcome) -> Result<(), GateError> {
    let mut phase = Phase::open(ctx)?;
    let (conns0, commands0) = phase.proxies.counts(&phase.admin);
    let trials = schedule(ctx.seed);
    let reset_at = phase.rng.random_range(0..trials.len());
    (ctx.progress)(&format!(
        "G8: fault phase, {} faulted calls through the proxy",
        trials.len()
    ));
    let t0 = Instant::now();
    let mut c = fresh(ctx, &phase.purl)?;
    for (i, t) in trials.iter().enumerate() {
        if i == reset_at {
            phase.reset(&mut *c)?;
        }
        if !phase.trial(&mut *c, (i, trials.len()), *t, out)? {
            return Ok(());
        }
        // Reopen the session: the connector's own way, and every fourth trial a fresh instance.
        let _ = c.disconnect(SESSION);
        if i % 4 == 3 || c.connect(SESSION, &phase.purl).is_err() {
            c = fresh(ctx, &phase.purl)?;
        }
    }
    let (conns, commands) = phase.proxies.counts(&phase.admin);
    let (conns, commands) = (conns - conns0, commands - commands0);
    out.figure("fault_phase_ms", t0.elapsed().as_millis() as u64);
    out.figure("fault_calls", trials.len() as u64);
    out.figure("fault_calls_failed", phase.ledger.errors());
    out.figure("fault_calls_answered", phase.ledger.answered());
    out.figure("fault_proxy_connections", conns);
    out.figure("fault_proxy_commands", commands);
    verdict(
        ctx.seed,
        ctx.engine.is_cluster(),
        trials.len(),
        &phase.ledger,
        phase.violations,
        out,
    );
    Ok(())
}

impl<'a> Phase<'a> {
    /// The gate's database with every script cached, and the proxies disarmed.
    fn open(ctx: &'a GateContext<'a>) -> Result<Self, GateError> {
        let GateDb { url, mut admin, .. } = ctx.database(GateId::G8)?;
        // Every script cached first (on every primary), so a NOSCRIPT reply never takes the place
        // of a faulted one.
        for s in &ctx.bundle.scripts {
            admin.script_load_each(&s.source)?;
        }
        let (proxies, purl) = if ctx.engine.is_cluster() {
            // The gate's url is already the seed's proxy: every node announces its own.
            (Proxies::Cluster(ctx.engine), url.clone())
        } else {
            let (proxy, purl) = ctx.proxied(&url)?;
            (Proxies::Single(proxy), purl)
        };
        proxies.disarm(&admin);
        Ok(Self {
            ctx,
            admin,
            proxies,
            purl,
            rng: StdRng::seed_from_u64(ctx.seed),
            ledger: Ledger::default(),
            violations: BTreeSet::new(),
        })
    }

    /// The reset on connect, through the seed's proxy.
    fn reset(&mut self, c: &mut (dyn Connector + Send)) -> Result<(), GateError> {
        let seed = self
            .proxies
            .seed()
            .ok_or_else(|| GateError::Instrument("no fault proxy at the seed node".into()))?;
        reset_on_connect(seed, c, &self.purl, &mut self.ledger);
        self.proxies.disarm(&self.admin);
        Ok(())
    }

    /// Trial `i`: setup, state, the faulted call, state, accounting. False when the setup failed
    /// (recorded in `out`: the phase stops there).
    fn trial(
        &mut self,
        c: &mut (dyn Connector + Send),
        (i, of): (usize, usize),
        t: Trial,
        out: &mut GateOutcome,
    ) -> Result<bool, GateError> {
        let q = format!("g8f{i}");
        let (proxy, node) = self.proxies.of(&self.admin, &q)?;
        let label = match node {
            // "trial i" alone did not say what it counted: the fault phase's calls, 1 to `of`.
            None => format!(
                "{} (fault trial {} of {of}, {})",
                t.verb,
                i + 1,
                fault_name(t.fault)
            ),
            // The node as the connector knows it: the port it announces.
            Some((node, slot)) => format!(
                "{} (fault trial {} of {of}, {}, on node {}, slot {slot})",
                t.verb,
                i + 1,
                fault_name(t.fault),
                self.ctx.engine.announced_port(node)
            ),
        };
        let token = format!("t{i}");
        let call = match setup(c, &q, t.verb, self.rng.random_range(2..=4), &token) {
            Ok(call) => call,
            Err(e) => {
                out.fail(format!(
                    "{label}: the setup, with no fault armed, failed ({})",
                    e.evidence()
                ));
                out.figure("fault_setup_error", e.message);
                return Ok(false);
            }
        };
        let (pre, v) = snapshot(&mut self.admin, &q)?;
        self.violations.extend(v.iter().map(|v| stable(v)));
        let skip = if t.verb == Cmd::Batch {
            self.rng.random_range(0..BATCH_N as u32)
        } else {
            0
        };
        proxy.arm(Rule {
            matcher: Matcher::evalsha(&self.ctx.bundle.script(script(t.verb)).entry.sha1),
            skip,
            fault: t.fault,
        });
        let result = c.call(&call);
        let unfired = self.proxies.disarm(&self.admin);
        let (post, v) = snapshot(&mut self.admin, &q)?;
        self.violations.extend(v.iter().map(|v| stable(v)));
        self.ledger.told(&label, &result);
        let outcome = match result {
            Ok(reply) => Outcome::Ok(reply),
            Err(e) => Outcome::Failed(e.kind.as_str().to_string()),
        };
        if unfired {
            self.ledger.breach(format!(
                "{label}: the call sent no EVALSHA of the {} script, so the fault never fired",
                script(t.verb)
            ));
        }
        let record = Record {
            label: label.clone(),
            call,
            outcome,
        };
        for b in account(&pre, &[record], &post) {
            self.ledger.breach(b);
        }
        Ok(true)
    }
}

/// The script a mutating verb runs.
fn script(verb: Cmd) -> &'static str {
    verb.script().expect("a mutating verb runs a script")
}

/// Connect while the proxy closes the connection it is opening: kind engine (or a success of
/// the connector's own retry), then a plain connect works. Not one of the counted calls: only
/// its breaches go into `ledger`.
fn reset_on_connect(
    proxy: &Proxy,
    c: &mut (dyn Connector + Send),
    url: &crate::engine::Target,
    ledger: &mut Ledger,
) {
    let _ = c.disconnect(SESSION);
    proxy.arm(Rule {
        matcher: Matcher::default(),
        skip: 0,
        fault: Fault::ResetOnConnect,
    });
    let r = c.connect(SESSION, url);
    let unfired = proxy.disarm();
    proxy.take_fired();
    if !unfired.is_empty() {
        ledger.breach("connect (reset on connect): the connect opened no connection");
    }
    match r {
        Ok(()) => {}
        Err(e) if e.kind == ErrorKind::Engine => {
            if let Err(e) = c.connect(SESSION, url) {
                ledger.breach(format!(
                    "connect (reset on connect): the next connect, with no fault, failed ({})",
                    e.evidence()
                ));
            }
        }
        Err(e) => ledger.breach(format!(
            "connect (reset on connect): failed with kind {}, not engine",
            e.kind
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schedule_hits_every_verb_with_every_fault_and_is_seeded() {
        for seed in [1, 7, 42] {
            let s = schedule(seed);
            assert_eq!(s.len(), verbs().len() * FAULTS.len() * ROUNDS);
            for v in verbs() {
                for f in FAULTS {
                    let n = s.iter().filter(|t| t.verb == v && t.fault == f).count();
                    assert_eq!(n, ROUNDS, "{v} {f:?}");
                }
            }
            assert_eq!(s, schedule(seed));
        }
        assert_ne!(schedule(1), schedule(7));
    }
}
