//! The gate: eight checks, each a [`Verdict`] with evidence, run against one connector on one engine.
//! The checks live in `gates/`; this module holds what they share and the order they run in.

pub mod acl;
pub mod contract;
pub mod g1_fence;
pub mod g1_release;
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
pub mod rules;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

pub use crate::connector::ConnectorFactory;
use crate::connector::{Connector, Verbs};
use crate::engine::Engine;
use crate::engine::admin::Admin;
use crate::error::HarnessError;
use crate::protocol::bundle::Bundle;
pub use crate::protocol::gate::GateId;

// Its one spelling (`PASS`, its `Display`), also its JSON and its schema, is report/spelling.rs.
/// PASS, FAIL, ERROR (could not be judged: the harness or the engine failed, or not built), or
/// NOT RUN (left out of this run: `--gates`, `--rerun-failed`, `--fail-fast`; no verdict at all,
/// so neither a pass nor a failure, and not counted in `n/m`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    Fail,
    Error,
    NotRun,
}

/// The exit code of a run, a check or a matrix whose one verdict this is. NOT RUN as a whole
/// (nothing was judged) is no verdict: 4.
impl From<Verdict> for crate::error::ExitCode {
    fn from(v: Verdict) -> Self {
        match v {
            Verdict::Pass => Self::Pass,
            Verdict::Fail => Self::GateFailed,
            Verdict::Error | Verdict::NotRun => Self::NoVerdict,
        }
    }
}

impl Verdict {
    /// Every verdict, in the schema's order.
    pub const ALL: [Verdict; 4] = [
        Verdict::Pass,
        Verdict::Fail,
        Verdict::Error,
        Verdict::NotRun,
    ];

    /// The one precedence, for every place verdicts combine: a gate's checks (its evidence
    /// lines), a run's gates, a rule's gates, a matrix's cells. A proven breach wins: FAIL when
    /// any is FAIL, whatever else could not be judged (those stay beside it as ERROR lines);
    /// ERROR when nothing failed but something could not be judged; PASS only when every one
    /// judged passed. NOT RUN ones are left out; when nothing was judged at all the whole is
    /// ERROR (nothing proven either way), never PASS.
    pub fn of_all(verdicts: impl IntoIterator<Item = Verdict>) -> Verdict {
        let (mut any, mut fail, mut error) = (false, false, false);
        for v in verdicts {
            any |= v != Verdict::NotRun;
            fail |= v == Verdict::Fail;
            error |= v == Verdict::Error;
        }
        match (any, fail, error) {
            (_, true, _) => Verdict::Fail,
            (true, false, false) => Verdict::Pass,
            _ => Verdict::Error,
        }
    }

    /// True for PASS, FAIL and ERROR: the gate was run.
    pub fn was_run(self) -> bool {
        self != Verdict::NotRun
    }
}

/// What a line of evidence says: a fact that held, a violation (the gate fails), or why the gate
/// could not judge (ERROR).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Severity {
    Held,
    Fail,
    Error,
}

impl Severity {
    /// True for a violation or an error.
    pub fn is_violation(self) -> bool {
        self != Self::Held
    }

    /// The verdict one line stands for: a fact that held passes.
    pub fn verdict(self) -> Verdict {
        match self {
            Self::Held => Verdict::Pass,
            Self::Fail => Verdict::Fail,
            Self::Error => Verdict::Error,
        }
    }
}

/// One line of evidence: its severity and its text. The record spells it as one line, the
/// severity as a prefix (`FAIL: ...`; its `Display`, `Serialize` and `Deserialize`):
/// `report/spelling.rs`, the one place a prefix is written or read.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Evidence {
    pub severity: Severity,
    /// The text, without a prefix.
    pub text: String,
}

impl Evidence {
    pub fn new(severity: Severity, text: impl Into<String>) -> Self {
        Self {
            severity,
            text: text.into(),
        }
    }

    /// A fact that held.
    pub fn held(text: impl Into<String>) -> Self {
        Self::new(Severity::Held, text)
    }

    /// The first line of the text, without the prefix.
    pub fn headline(&self) -> &str {
        self.text.lines().next().unwrap_or("")
    }
}

impl From<&str> for Evidence {
    fn from(s: &str) -> Self {
        Self::held(s)
    }
}

/// One gate's result. `evidence` is stable (committed, compared in CI); `figures` are volatile.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GateOutcome {
    pub id: GateId,
    pub name: String,
    pub verdict: Verdict,
    pub evidence: Vec<Evidence>,
    pub figures: BTreeMap<String, serde_json::Value>,
    /// Per-case results of a gate made of cases (G6), in order; empty for the others.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cases: Vec<CaseOutcome>,
    #[serde(skip)]
    pub wall: Duration,
    /// An engine event voided the gate: ERROR whatever its evidence says (the verdict, serialized,
    /// already says so).
    #[serde(skip)]
    pub voided: bool,
    /// Of `wall`, the time the check spent waiting on purpose (a held reply, a quiet window, a
    /// settle, a failover's gossip) rather than working: what overlapping waits could save.
    #[serde(skip)]
    pub waited: Duration,
}

/// One case of a gate made of cases (G6): its id, verdict and, when it failed, the first line of why.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CaseOutcome {
    pub id: String,
    pub verdict: Verdict,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(skip)]
    pub wall: Duration,
}

impl GateOutcome {
    /// Starts an outcome with no evidence yet.
    pub fn new(id: GateId, name: &str) -> Self {
        Self {
            id,
            name: name.into(),
            verdict: Verdict::Pass,
            evidence: Vec::new(),
            figures: BTreeMap::new(),
            cases: Vec::new(),
            wall: Duration::ZERO,
            voided: false,
            waited: Duration::ZERO,
        }
    }

    /// Runs `wait` (a deliberate wait: a held reply, a window, a settle) and counts its time as
    /// waiting in [`GateOutcome::waited`].
    pub fn waiting<R>(&mut self, wait: impl FnOnce() -> R) -> R {
        let t0 = Instant::now();
        let r = wait();
        self.waited += t0.elapsed();
        r
    }

    /// A gate left out of this run: NOT RUN, saying why (`--gates`, `--fail-fast`).
    pub fn not_run(id: GateId, name: &str, why: impl Into<String>) -> Self {
        let mut o = Self::new(id, name);
        o.evidence.push(Evidence::held(why));
        o.verdict = Verdict::NotRun;
        o
    }

    /// The verdict, from the evidence by [`Verdict::of_all`] (a FAIL with ERROR lines beside it
    /// is FAIL), unless an engine event voided it ([`GateOutcome::engine_event`]).
    fn settle(&mut self) {
        if self.verdict.was_run() && !self.voided {
            self.verdict = Verdict::of_all(self.evidence.iter().map(|e| e.severity.verdict()));
        }
    }

    /// Records a fact that holds.
    pub fn pass(&mut self, fact: impl Into<String>) {
        self.evidence.push(Evidence::held(fact));
        self.settle();
    }

    /// Records a violation: the gate fails, whatever it could not judge beside it.
    pub fn fail(&mut self, fact: impl Into<String>) {
        self.evidence.push(Evidence::new(Severity::Fail, fact));
        self.settle();
    }

    /// Records that the gate could not be judged further: ERROR unless a FAIL is proven, before
    /// or after it (the connector was caught; what broke beside it often follows from it, e.g. a
    /// dead connector that sent nothing more).
    pub fn error(&mut self, why: impl Into<String>) {
        self.evidence.push(Evidence::new(Severity::Error, why));
        self.settle();
    }

    /// Records an engine event the gate did not cause: the verdict is ERROR whatever the
    /// connector did (a FAIL included), since what it saw may follow from the event. The one
    /// exception to [`Verdict::of_all`]'s precedence: not a check that could not judge, but
    /// an engine that voids every check of the gate.
    pub fn engine_event(&mut self, what: impl Into<String>) {
        self.evidence.push(Evidence::new(
            Severity::Error,
            format!(
                "the engine changed during the gate, not by the gate's doing, so its verdict \
                 cannot judge the connector: {}",
                what.into()
            ),
        ));
        self.voided = true;
        self.verdict = Verdict::Error;
    }

    /// Checks `ok`, recording `fact` as held or violated.
    pub fn check(&mut self, ok: bool, fact: impl Into<String>) -> bool {
        if ok {
            self.pass(fact)
        } else {
            self.fail(fact)
        }
        ok
    }

    /// Checks that `items` (the violations of `rule`) is empty; the evidence names them if not:
    /// `"<rule>; <label> [..]"`.
    pub fn none_of<C>(&mut self, items: &C, rule: &str, label: &str) -> bool
    where
        C: std::fmt::Debug + ?Sized,
        for<'c> &'c C: IntoIterator,
    {
        if items.into_iter().next().is_none() {
            self.check(true, rule)
        } else {
            self.check(false, format!("{rule}; {label} {items:?}"))
        }
    }

    /// Records a check's ending: an `Err` (the gate could not be judged further) is an ERROR
    /// line with the error's text ([`GateOutcome::error`]).
    pub fn judged(&mut self, ended: Result<(), GateError>) {
        if let Err(e) = ended {
            self.error(e.to_string());
        }
    }

    /// A volatile figure (time, rate): recorded apart from the verdict.
    pub fn figure(&mut self, name: &str, value: impl Into<serde_json::Value>) {
        self.figures.insert(name.into(), value.into());
    }
}

/// Why a gate could not be judged (its verdict becomes ERROR): the harness, the engine or the
/// instrument failed. A connector's wrong answer is never a `GateError`; the gate records it as
/// a FAIL with evidence.
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error(transparent)]
    Harness(#[from] HarnessError),
    /// A connector call the gate needed in order to set up (not the behaviour under judgement).
    #[error("connector: {0}")]
    Connector(#[from] crate::error::ConnectorError),
    /// MONITOR showed none of what the gate judges (`what`: "nothing", "no script from the
    /// connector", ...): a broken instrument, not a connector that did nothing wrong.
    #[error("MONITOR {0}")]
    Unobserved(&'static str),
    /// The gate's database, just flushed, still holds something.
    #[error("database {db} still holds {what} after the flush")]
    Dirty { db: u32, what: &'static str },
    /// The instrument saw something else it cannot judge.
    #[error("{0}")]
    Instrument(String),
}

impl GateError {
    pub fn instrument(why: impl Into<String>) -> Self {
        Self::Instrument(why.into())
    }
}

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
    /// database 0 (the only one, SPEC §8), flushed by each gate.
    pub fn db_of(&self, id: GateId) -> u32 {
        if self.engine.is_cluster() { 0 } else { id.db() }
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
    /// (G5's withheld replies, G8's faults and late reply).
    pub fn proxied(
        &self,
        url: &crate::engine::Target,
    ) -> Result<(crate::faults::Proxy, crate::engine::Target), GateError> {
        let (host, port) = (&self.engine.host, self.engine.port);
        let upstream = format!("{host}:{port}");
        let proxy = match self.engine.tls() {
            Some(run) => crate::faults::Proxy::start_tls(&upstream, run),
            None => crate::faults::Proxy::start(&upstream),
        }
        .map_err(|e| GateError::instrument(format!("the fault proxy did not start: {e}")))?;
        let through = url.at(proxy.url_for(&url.url, host, port));
        Ok((proxy, through))
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
}

/// Runs one gate, timing it; a panic inside a check becomes ERROR, never a silent PASS.
pub fn run_gate(gate: &Gate, ctx: &GateContext<'_>) -> GateOutcome {
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
    let events = ctx.engine.health_events();
    if !events.is_empty() {
        out.engine_event(events.join("; "));
    }
    judge_plaintext(ctx, &mut out);
    acl::judge_acl(ctx, &mut out);
    if let Err(p) = result {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "panic".into());
        out.error(format!("the check panicked: {msg}"));
    }
    if out.evidence.is_empty() {
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

/// G1–G8, in the order the record lists them.
pub const ALL: [Gate; 8] = [
    Gate {
        id: GateId::G1,
        name: "fence",
        run: g1_fence::check,
    },
    Gate {
        id: GateId::G2,
        name: "sha1",
        run: g2_sha1::check,
    },
    Gate {
        id: GateId::G3,
        name: "evalsha-first",
        run: g3_evalsha::check,
    },
    Gate {
        id: GateId::G4,
        name: "declared-keys",
        run: g4_keys::check,
    },
    Gate {
        id: GateId::G5,
        name: "pipeline",
        run: g5_pipeline::check,
    },
    Gate {
        id: GateId::G6,
        name: "cases",
        run: g6_cases::check,
    },
    Gate {
        id: GateId::G7,
        name: "interleavings",
        run: g7_interleavings::check,
    },
    Gate {
        id: GateId::G8,
        name: "atomicity",
        run: g8::check,
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_one_precedence_fail_over_error_over_pass() {
        use Verdict::{Error, Fail, NotRun, Pass};
        assert_eq!(Verdict::of_all([Fail, Error]), Fail);
        assert_eq!(Verdict::of_all([Error, Fail, Pass]), Fail);
        assert_eq!(Verdict::of_all([Error, Pass]), Error);
        assert_eq!(Verdict::of_all([Error]), Error);
        assert_eq!(Verdict::of_all([Pass, Pass]), Pass);
        assert_eq!(Verdict::of_all([Pass, NotRun]), Pass);
        assert_eq!(Verdict::of_all([NotRun]), Error, "nothing judged");
        assert_eq!(Verdict::of_all([]), Error, "nothing judged");
    }

    /// The G1 bug: an ERROR line first (the TLS front's count), the R10.2 FAIL after it (the
    /// plaintext check runs last): FAIL, the ERROR line kept beside it; in either order.
    #[test]
    fn a_gate_with_a_proven_breach_is_fail_whatever_came_first() {
        let mut o = GateOutcome::new(GateId::G1, "fence");
        o.pass("the fence was read first");
        o.error("the TLS front saw 1 of the 2 connections it was given end");
        assert_eq!(o.verdict, Verdict::Error);
        o.fail("1 connection(s) to the TLS engine began in plaintext (R10.2)");
        assert_eq!(o.verdict, Verdict::Fail);
        assert_eq!(o.evidence.len(), 3, "the ERROR line stays beside the FAIL");
        o.error("and something else could not be judged");
        assert_eq!(o.verdict, Verdict::Fail);
        // An engine event voids the gate: ERROR whatever was proven.
        o.engine_event("a node restarted");
        assert_eq!(o.verdict, Verdict::Error);
        o.fail("another breach");
        assert_eq!(o.verdict, Verdict::Error);
        let left_out = GateOutcome::not_run(GateId::G2, "sha1", "not selected in this run");
        assert_eq!(left_out.verdict, Verdict::NotRun);
    }
}
