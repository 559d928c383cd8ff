//! The gate: eight checks, each a [`Verdict`] with evidence, run against one connector on one engine.
//! The checks live in `gates/`; this module holds what they share and the order they run in.

pub mod acl;
pub mod beside;
pub mod contract;
pub mod g1_fence;
pub mod g1_release;
mod g1_sentinel;
mod g1_stop;
pub mod g1_tls;
mod g1_tls_nodes;
pub mod g2_sha1;
pub mod g3_evalsha;
pub mod g4_keys;
pub mod g5_pipeline;
pub mod g6_cases;
pub mod g7_interleavings;
pub mod g8;
pub mod lanes;
mod outcome;
pub mod rules;
pub mod sequence;

use std::sync::Arc;
use std::time::Instant;

pub use crate::connector::ConnectorFactory;
use crate::connector::{Connector, Verbs};
use crate::engine::Engine;
use crate::engine::admin::Admin;
use crate::protocol::bundle::Bundle;
pub use crate::protocol::gate::GateId;

pub use outcome::{CaseOutcome, Evidence, GateError, GateOutcome, Severity, Verdict};

/// What every gate gets.
pub struct GateContext<'a> {
    pub engine: &'a Engine,
    pub bundle: &'a Arc<Bundle>,
    /// The case corpus G6 replays (the one `emq-gate` chose: `--cases`, or the embedded one).
    pub cases: crate::suites::cases::format::Corpus,
    pub factory: &'a dyn ConnectorFactory,
    pub seed: u64,
    /// G7's history count.
    pub histories: u32,
    /// G5's batch size (≥ 100 000 for a certifying run).
    pub batch: i64,
    /// Progress lines for people (the printer decides whether to show them).
    pub progress: &'a (dyn Fn(&str) + Sync),
}

/// A gate's own database: flushed, with the harness's admin connection on it.
pub struct GateDb {
    pub db: u32,
    /// Where a connector connects for this database (a cluster's seed, flagged, SPEC R8.1).
    pub url: crate::engine::Target,
    pub admin: Admin,
}

impl GateContext<'_> {
    /// The database gate `id` owns: its own on a single engine ([`GateId::db`]); on a cluster,
    /// the one database the connector's user may use (SPEC R8.5), flushed by each gate.
    pub fn db_of(&self, id: GateId) -> u32 {
        self.engine.db_for(id.db())
    }

    /// The database gate `id` owns, flushed, with an admin on it: every gate's first step.
    pub fn database(&self, id: GateId) -> Result<GateDb, GateError> {
        let db = self.db_of(id);
        Ok(GateDb {
            db,
            url: self.engine.target(db),
            admin: self.engine.prepare_db(db)?,
        })
    }

    /// A fault proxy of the gate's own in front of a single engine, and `url` pointed through it
    /// (G5's withheld replies, G8's faults and late reply). Behind Sentinel the primary's own
    /// proxy, and `url` as it is: the Sentinels name that proxy, so a session reaches the primary
    /// through it and no other way (SPEC §11).
    pub fn proxied(
        &self,
        url: &crate::engine::Target,
    ) -> Result<(GateProxy<'_>, crate::engine::Target), GateError> {
        if self.engine.kind == crate::engine::EngineKind::Sentinel {
            let p = self.engine.proxy_of(self.engine.seed())?;
            return Ok((GateProxy::Node(p), url.clone()));
        }
        let (host, port) = (&self.engine.host, self.engine.port);
        let upstream = format!("{host}:{port}");
        let proxy = match self.engine.tls() {
            Some(run) => crate::faults::Proxy::start_tls(&upstream, run),
            None => crate::faults::Proxy::start(&upstream),
        }
        .map_err(|e| GateError::instrument(format!("the fault proxy did not start: {e}")))?;
        let through = url.at(proxy.url_for(&url.url, host, port));
        Ok((GateProxy::Own(proxy), through))
    }

    /// A fresh connector with `session` connected to `url`; a refused connect is recorded as a
    /// FAIL and gives `None` (the gate has nothing more to judge).
    pub fn connected(
        &self,
        session: &str,
        url: &crate::engine::Target,
        out: &mut GateOutcome,
    ) -> Result<Option<Box<dyn Connector + Send>>, GateError> {
        let mut c = self.factory.make()?;
        match c.connect(session, url) {
            Ok(()) => Ok(Some(c)),
            Err(e) => {
                out.fail(format!("connect failed (kind {}: {})", e.kind, e.message));
                Ok(None)
            }
        }
    }
}

/// The fault proxy a check arms ([`GateContext::proxied`]): its own, stopped when dropped, or
/// a node's, which outlives the check (its unfired rules are disarmed and its rewrite ended when
/// this is dropped, so no later gate meets them).
pub enum GateProxy<'a> {
    Own(crate::faults::Proxy),
    Node(&'a crate::faults::Proxy),
}

impl std::ops::Deref for GateProxy<'_> {
    type Target = crate::faults::Proxy;
    fn deref(&self) -> &crate::faults::Proxy {
        match self {
            Self::Own(p) => p,
            Self::Node(p) => p,
        }
    }
}

impl Drop for GateProxy<'_> {
    fn drop(&mut self) {
        if let Self::Node(p) = self {
            p.disarm();
            p.end_rewrite();
        }
    }
}

/// SPEC R5.8, for every gate: a request that outlived its timeout (the harness's own holds
/// added) is the connector's failure, in whichever step it fell; one the gate needed to set up
/// ERRORs beside it, and cannot hide it. Said once: a FAIL line that quotes it is enough.
fn judge_timeout(ctx: &GateContext<'_>, out: &mut GateOutcome) {
    let Some(first) = ctx.factory.timed_out() else {
        return;
    };
    let said = out
        .evidence
        .iter()
        .any(|e| e.severity == Severity::Fail && e.text.contains(&first));
    if !said {
        out.fail(format!(
            "{}: {first}",
            rules::cited::cite(rules::RuleId::new(5, 8))
        ));
    }
}

/// SPEC R10.2 on a TLS engine, for every gate: no connection may begin in plaintext at any TLS
/// front (the engine's own, or a proxy's the gate started).
fn judge_plaintext(ctx: &GateContext<'_>, out: &mut GateOutcome) {
    let Some(run) = ctx.engine.tls() else {
        return;
    };
    let seen = run.take_plaintext();
    if let Some(first) = seen.first() {
        out.fail(format!(
            "{} connection(s) to the TLS engine began in plaintext {}; the first, at {}",
            seen.len(),
            rules::cited::cite(rules::RuleId::new(10, 2)),
            first.describe()
        ));
    }
}

/// One gate: id, name, and its check.
pub struct Gate {
    pub id: GateId,
    pub name: &'static str,
    /// Its check: evidence goes into the outcome; an `Err` is why the gate could not be judged
    /// further, recorded as its ERROR by [`run_gate`] ([`GateOutcome::judged`]).
    pub run: fn(&GateContext<'_>, &mut GateOutcome) -> Result<(), GateError>,
    /// No part of another gate may run beside it: it judges what the whole engine holds, which
    /// is not shared out by database (the command counters, a script cache it empties or needs
    /// empty). See `gates/sequence.rs`.
    pub alone: bool,
}

/// Runs one gate, timing it; a panic inside a check becomes ERROR, never a silent PASS. A part
/// the gate left to go on beside later gates runs now, in line: run alone, a gate is whole.
pub fn run_gate(gate: &Gate, ctx: &GateContext<'_>) -> GateOutcome {
    let mut out = run_gate_leaving(gate, ctx);
    if let Some(left) = out.left.take() {
        // The gate waits for the part, as it waits for a part beside it.
        let t0 = Instant::now();
        beside::run_left(ctx, &mut out, left);
        out.wall += t0.elapsed();
        out.waited += t0.elapsed();
    }
    out
}

/// [`run_gate`], but a part the gate left is in [`GateOutcome::left`], for the run to start
/// beside later gates (`gates/sequence.rs`).
pub fn run_gate_leaving(gate: &Gate, ctx: &GateContext<'_>) -> GateOutcome {
    let mut out = GateOutcome::new(gate.id, gate.name);
    let t0 = Instant::now();
    // A connector that timed out in an earlier gate (or in the header's hello) is judged afresh.
    ctx.factory.reset();
    ctx.factory.enter(gate.id.as_str());
    ctx.engine.mark_health();
    let result =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (gate.run)(ctx, &mut out)));
    // The check's own error first: it was the last thing the check did.
    let result = result.map(|r| out.judged(r));
    judge_timeout(ctx, &mut out);
    let events = ctx.engine.health_events();
    if !events.is_empty() {
        out.engine_event(events.join("; "));
    }
    judge_plaintext(ctx, &mut out);
    acl::judge_acl(ctx, &mut out);
    if let Err(p) = result {
        out.error(format!("the check panicked: {}", panic_text(p.as_ref())));
    }
    if out.evidence.is_empty() && out.left.is_none() {
        out.error("the check recorded no evidence");
    }
    out.wall = t0.elapsed();
    // Processes started for this gate (issue #24); absent for an in-process connector.
    if let Some(starts) = ctx.factory.starts() {
        let by_reason = starts.in_gate(gate.id.as_str());
        out.figure("connector_starts", by_reason.values().sum::<u64>());
        out.figure("connector_starts_by_reason", serde_json::json!(by_reason));
    }
    out
}

/// What a panic said.
fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "panic".into())
}

/// G1–G8, in the order the record lists them.
pub const ALL: [Gate; 8] = [
    Gate {
        id: GateId::G1,
        name: "fence",
        run: g1_fence::check,
        alone: false,
    },
    Gate {
        id: GateId::G2,
        name: "sha1",
        run: g2_sha1::check,
        alone: true,
    },
    Gate {
        id: GateId::G3,
        name: "evalsha-first",
        run: g3_evalsha::check,
        alone: true,
    },
    Gate {
        id: GateId::G4,
        name: "declared-keys",
        run: g4_keys::check,
        alone: false,
    },
    Gate {
        id: GateId::G5,
        name: "pipeline",
        run: g5_pipeline::check,
        alone: true,
    },
    Gate {
        id: GateId::G6,
        name: "cases",
        run: g6_cases::check,
        alone: false,
    },
    Gate {
        id: GateId::G7,
        name: "interleavings",
        run: g7_interleavings::check,
        alone: false,
    },
    Gate {
        id: GateId::G8,
        name: "atomicity",
        run: g8::check,
        alone: true,
    },
];
