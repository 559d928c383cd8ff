//! A gate's result: its verdict, the evidence behind it, the volatile figures beside it. Pure: the
//! precedence of verdicts (FAIL over ERROR over PASS) and the outcome's bookkeeping, apart from
//! what runs a gate.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::error::HarnessError;
use crate::protocol::gate::GateId;
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
    /// A part the gate left to the run, to go on beside later gates (`gates/beside.rs`): its
    /// evidence is still to come, and the verdict with it.
    #[serde(skip)]
    pub left: Option<super::beside::Left>,
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
            left: None,
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

    /// Takes in what a part of the gate found while it ran beside the others (`gates/beside.rs`):
    /// its evidence at `at`, where the part stands in the gate's order (so the record reads as
    /// if it had run in line), then how it ended, its figures, and the verdict of them all. Its
    /// own waiting is not the gate's: it overlapped the gate's work.
    pub fn absorb(&mut self, at: usize, part: GateOutcome, ended: Result<(), GateError>) {
        let at = at.min(self.evidence.len());
        let mut lines = part.evidence;
        if let Err(e) = ended {
            lines.push(Evidence::new(Severity::Error, e.to_string()));
        }
        self.evidence.splice(at..at, lines);
        self.figures.extend(part.figures);
        self.settle();
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
    fn a_part_run_beside_lands_where_it_stands_in_the_order() {
        let mut gate = GateOutcome::new(GateId::G1, "fence");
        gate.pass("one");
        gate.pass("three");
        let mut part = GateOutcome::new(GateId::G1, "");
        part.pass("two");
        part.figure("held", 1);
        gate.absorb(1, part, Ok(()));
        let texts: Vec<&str> = gate.evidence.iter().map(|e| e.headline()).collect();
        assert_eq!(texts, ["one", "two", "three"]);
        assert_eq!(gate.verdict, Verdict::Pass);
        assert_eq!(gate.figures["held"], 1);
        // A breach found beside fails the gate; an ending in error follows the part's lines.
        let mut part = GateOutcome::new(GateId::G1, "");
        part.fail("a connection left open");
        gate.absorb(3, part, Err(GateError::instrument("the proxy stopped")));
        assert_eq!(gate.verdict, Verdict::Fail);
        assert_eq!(gate.evidence[4].severity, Severity::Error);
        assert!(gate.evidence[4].headline().contains("the proxy stopped"));
    }

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
