//! One ledger of jobs and calls for G8's phases (the fault phase, the crash loop and its drain,
//! the graceful failover, the slot migration): what each call told the caller about a job, and the
//! one accounting that judges it (SPEC §3, R8.4). A job is named `queue/id` everywhere, so a phase
//! over one queue and one over a queue per shard are judged alike. A phase that judges each call
//! on its own against the engine's state (the fault phase) records its calls' outcomes here too,
//! with the breaches found in each, in the order found; one whose calls are judged together
//! afterwards (the unclean failovers' crew, [`super::unclean::attribution`]) records each [`Call`]
//! in full.
//!
//! The rules are the Jepsen-style ones of [`super::accounting`], for whole jobs: an acknowledged
//! enqueue must end completed exactly once; a complete whose reply was lost is indeterminate, so
//! its job may be gone (it is never "lost"); a job parked on purpose is exempt. The judging is
//! pure ([`Ledger::lost`], [`Ledger::twice`]) and unit-tested without an engine.

use std::collections::{BTreeMap, BTreeSet};

use crate::connector::{Cmd, Connector, Verbs};
use crate::engine::nodes::ReplPosition;
use crate::error::{ConnectorError, ErrorKind};
use crate::gates::GateOutcome;

/// A job's name in the ledger: `queue/id`.
pub(super) fn job(queue: &str, id: &str) -> String {
    format!("{queue}/{id}")
}

/// One call, and what came of it, in full: what the unclean failovers' attribution reads of its
/// crew's calls (who, which job, the reply, when, and where the old primary stood).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// Who made it: `producer`, `worker-1`, `reaper`.
    pub member: String,
    pub verb: Cmd,
    pub queue: String,
    /// The queue lives on the shard that failed over.
    pub victim: bool,
    /// The job's payload: sent (enqueue), returned (claim), or the claimed job's (complete).
    pub payload: Option<String>,
    /// The job id: returned (enqueue, claim) or sent (complete).
    pub id: Option<String>,
    /// The reply in words, or the error (shown `kind: message`).
    pub reply: Result<String, ConnectorError>,
    /// For a complete, whether the engine said it completed the job.
    pub done: bool,
    /// Milliseconds since the phase began.
    pub start_ms: u64,
    pub end_ms: u64,
    /// The old primary's position read right after the acknowledgement (victim queues only).
    pub pos: Option<ReplPosition>,
}

impl Call {
    /// One line of evidence.
    pub fn describe(&self) -> String {
        let what = match (&self.payload, &self.id) {
            (Some(p), Some(id)) => format!("{p} {id}"),
            (Some(p), None) => p.clone(),
            (None, Some(id)) => id.clone(),
            (None, None) => String::new(),
        };
        let reply = match &self.reply {
            Ok(r) => format!("→ {r}"),
            Err(e) => format!("→ error {e}"),
        };
        let pos = self.pos.as_ref().map_or(String::new(), |p| {
            format!(
                " (old primary at {}:{})",
                p.replid.get(..8).unwrap_or(&p.replid),
                p.offset
            )
        });
        format!(
            "{} {}({}, {what}) {reply} at {}–{} ms{pos}",
            self.member,
            self.verb.name(),
            self.queue,
            self.start_ms,
            self.end_ms
        )
    }
}

/// What a phase's calls told the caller about its jobs.
#[derive(Debug, Default)]
pub(super) struct Ledger {
    /// Enqueues the engine acknowledged.
    acked: BTreeSet<String>,
    /// Completes answered `true`, per job.
    completed: BTreeMap<String, u32>,
    /// Completes sent whose reply was lost (a kill, a failover): they may have happened.
    unsure: BTreeSet<String>,
    /// Jobs parked on purpose (a long lease, a far delay, dead): not owed a complete.
    exempt: BTreeSet<String>,
    /// Calls that returned an error, and the kinds other than `engine` among them (a killed
    /// connection or a failover shows to the caller as `engine` only, R5.4).
    errors: u32,
    odd: BTreeSet<&'static str>,
    /// Calls answered, where a phase counts them ([`Ledger::told`]).
    answered: u32,
    /// What the calls judged one by one broke, call by call, in the order found.
    breaches: Vec<String>,
    /// The calls recorded in full, in the order made.
    calls: Vec<Call>,
}

impl Ledger {
    /// An enqueue on `session`; an acknowledged one is owed a complete.
    pub(super) fn enqueue(
        &mut self,
        c: &mut (dyn Connector + Send),
        session: &str,
        queue: &str,
        payload: &str,
    ) -> Result<String, ConnectorError> {
        let id = c.enqueue(session, queue, payload, 0)?;
        self.acked.insert(job(queue, &id));
        Ok(id)
    }

    /// A complete on `session`: `true` is counted, an error leaves the job indeterminate.
    pub(super) fn complete(
        &mut self,
        c: &mut (dyn Connector + Send),
        session: &str,
        queue: &str,
        id: &str,
        attempts: i64,
    ) -> Result<bool, ConnectorError> {
        match c.complete(session, queue, id, attempts) {
            Ok(done) => {
                if done {
                    *self.completed.entry(job(queue, id)).or_default() += 1;
                }
                Ok(done)
            }
            Err(e) => {
                self.unsure.insert(job(queue, id));
                Err(e)
            }
        }
    }

    /// One worker round on `queue`: enqueue `payload`, claim with `lease_ms`, complete.
    pub(super) fn round(
        &mut self,
        c: &mut (dyn Connector + Send),
        session: &str,
        queue: &str,
        payload: &str,
        lease_ms: i64,
    ) -> Result<(), ConnectorError> {
        self.enqueue(c, session, queue, payload)?;
        if let Some(j) = c.claim(session, queue, lease_ms)? {
            self.complete(c, session, queue, &j.id, j.attempts)?;
        }
        Ok(())
    }

    /// Takes in what another session's calls told (a crew member's own ledger, kept apart while
    /// its thread ran).
    pub(super) fn absorb(&mut self, other: Ledger) {
        self.acked.extend(other.acked);
        for (j, n) in other.completed {
            *self.completed.entry(j).or_default() += n;
        }
        self.unsure.extend(other.unsure);
        self.exempt.extend(other.exempt);
        self.errors += other.errors;
        self.odd.extend(other.odd);
        self.answered += other.answered;
        self.breaches.extend(other.breaches);
        self.calls.extend(other.calls);
    }

    /// A call that returned `e`.
    pub(super) fn failed(&mut self, e: &ConnectorError) {
        self.errors += 1;
        if e.kind != ErrorKind::Engine {
            self.odd.insert(e.kind.as_str());
        }
    }

    /// What call `label` told the caller, counted; a failure of a kind other than engine is a
    /// breach of the call's own (R5.4), named with it.
    pub(super) fn told<T>(&mut self, label: &str, r: &Result<T, ConnectorError>) {
        match r {
            Ok(_) => self.answered += 1,
            Err(e) => {
                self.failed(e);
                if e.kind != ErrorKind::Engine {
                    self.breach(format!("{label}: failed with kind {}, not engine", e.kind));
                }
            }
        }
    }

    /// A breach found in the call judged last.
    pub(super) fn breach(&mut self, b: impl Into<String>) {
        self.breaches.push(b.into());
    }

    /// Every breach found, in the order found.
    pub(super) fn breaches(&self) -> &[String] {
        &self.breaches
    }

    pub(super) fn answered(&self) -> u32 {
        self.answered
    }

    /// A call made, in full.
    pub(super) fn call(&mut self, c: Call) {
        self.calls.push(c);
    }

    /// Every call recorded in full, in the order made.
    pub(super) fn calls(&self) -> &[Call] {
        &self.calls
    }

    /// `queue/id` was parked on purpose: it is not owed a complete.
    pub(super) fn exempt(&mut self, queue: &str, id: &str) {
        self.exempt.insert(job(queue, id));
    }

    pub(super) fn acked(&self) -> usize {
        self.acked.len()
    }

    pub(super) fn errors(&self) -> u32 {
        self.errors
    }

    /// Completes answered `true` for `queue/id`.
    pub(super) fn times_completed(&self, queue: &str, id: &str) -> u32 {
        self.completed.get(&job(queue, id)).copied().unwrap_or(0)
    }

    /// Jobs completed at least once.
    pub(super) fn completed(&self) -> usize {
        self.completed.len()
    }

    /// A complete of `queue/id` lost its reply.
    pub(super) fn is_unsure(&self, queue: &str, id: &str) -> bool {
        self.unsure.contains(&job(queue, id))
    }

    /// The jobs whose complete lost its reply and that the engine no longer holds anywhere
    /// (`held`): they were completed, as far as anyone can tell.
    pub(super) fn unsure_gone(&self, held: impl Fn(&str) -> bool) -> usize {
        self.unsure
            .iter()
            .filter(|j| !self.completed.contains_key(*j) && !held(j))
            .count()
    }

    /// Acknowledged jobs never completed, with no complete in doubt, not parked.
    pub(super) fn lost(&self) -> Vec<&String> {
        self.acked
            .iter()
            .filter(|j| {
                !self.completed.contains_key(*j)
                    && !self.unsure.contains(*j)
                    && !self.exempt.contains(*j)
            })
            .collect()
    }

    /// Jobs completed more than once.
    pub(super) fn twice(&self) -> Vec<&String> {
        self.completed
            .iter()
            .filter(|(_, n)| **n > 1)
            .map(|(j, _)| j)
            .collect()
    }

    /// Across `what` (the failover, the migration): every acknowledged job but the parked ones
    /// was completed, none twice.
    pub(super) fn judge_exactly_once(&self, what: &str, out: &mut GateOutcome) {
        out.none_of(
            &self.lost(),
            &format!("no acknowledged enqueue was lost across the {what}"),
            "lost",
        );
        out.none_of(
            &self.twice(),
            &format!("no job was completed twice across the {what}"),
            "completed twice",
        );
    }

    /// Across `what`: the caller saw its errors as kind `engine` only (R5.4).
    pub(super) fn judge_kinds(&self, what: &str, out: &mut GateOutcome) {
        out.none_of(
            &self.odd,
            &format!("{what} shows to the caller only as kind engine"),
            "kinds seen",
        );
    }

    /// The error kinds other than `engine` the caller saw.
    pub(super) fn odd_kinds(&self) -> &BTreeSet<&'static str> {
        &self.odd
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ledger() -> Ledger {
        let mut l = Ledger::default();
        for id in ["1", "2", "3", "4"] {
            l.acked.insert(job("q", id));
        }
        l
    }

    #[test]
    fn a_job_is_lost_unless_completed_in_doubt_or_parked() {
        let mut l = ledger();
        l.completed.insert(job("q", "1"), 1);
        l.unsure.insert(job("q", "2"));
        l.exempt("q", "3");
        assert_eq!(l.lost(), vec![&job("q", "4")]);
        assert!(l.twice().is_empty());
    }

    #[test]
    fn a_job_completed_twice_is_named_and_an_unsure_one_gone_is_counted() {
        let mut l = ledger();
        l.completed.insert(job("q", "1"), 2);
        l.unsure.insert(job("q", "2"));
        l.unsure.insert(job("q", "3"));
        assert_eq!(l.twice(), vec![&job("q", "1")]);
        assert_eq!(l.unsure_gone(|j| j == "q/3"), 1);
        assert_eq!(l.times_completed("q", "1"), 2);
        assert!(l.is_unsure("q", "2") && !l.is_unsure("q", "1"));
    }

    #[test]
    fn a_crew_members_ledger_absorbed_is_judged_with_the_rest() {
        // The worker acknowledged 1-4; a member completed 1 and 4, once each, and 1 again.
        let mut l = ledger();
        l.completed.insert(job("q", "2"), 1);
        let mut member = Ledger::default();
        member.completed.insert(job("q", "1"), 1);
        member.completed.insert(job("q", "4"), 1);
        member.acked.insert(job("q", "5"));
        member.unsure.insert(job("q", "3"));
        member.errors = 1;
        l.absorb(member);
        assert!(l.lost().iter().any(|j| *j == &job("q", "5")));
        assert!(l.twice().is_empty());
        assert_eq!((l.acked(), l.errors()), (5, 1));
        let mut again = Ledger::default();
        again.completed.insert(job("q", "1"), 1);
        l.absorb(again);
        assert_eq!(l.twice(), vec![&job("q", "1")]);
    }

    #[test]
    fn only_kinds_other_than_engine_are_odd() {
        let mut l = Ledger::default();
        l.failed(&ConnectorError::new(ErrorKind::Engine, "killed"));
        l.failed(&ConnectorError::new(ErrorKind::Internal, "garbage"));
        assert_eq!(l.errors(), 2);
        assert_eq!(
            l.odd_kinds().iter().copied().collect::<Vec<_>>(),
            ["internal"]
        );
    }

    #[test]
    fn a_call_told_is_counted_and_an_odd_kind_is_its_breach() {
        let mut l = Ledger::default();
        l.told("claim (trial 1)", &Ok::<_, ConnectorError>(()));
        l.told::<()>(
            "claim (trial 2)",
            &Err(ConnectorError::new(ErrorKind::Engine, "cut")),
        );
        l.told::<()>(
            "claim (trial 3)",
            &Err(ConnectorError::new(ErrorKind::Internal, "?")),
        );
        l.breach("claim (trial 3): the fault never fired");
        assert_eq!((l.answered(), l.errors()), (1, 2));
        assert_eq!(
            l.breaches(),
            [
                "claim (trial 3): failed with kind internal, not engine",
                "claim (trial 3): the fault never fired"
            ]
        );
    }

    #[test]
    fn a_call_is_described_in_one_line() {
        let mut c = Call {
            member: "worker-1".into(),
            verb: Cmd::Complete,
            queue: "q".into(),
            victim: true,
            payload: Some("a".into()),
            id: Some("j1".into()),
            reply: Ok("true".into()),
            done: true,
            start_ms: 300,
            end_ms: 301,
            pos: Some(ReplPosition {
                replid: "0123456789abcdef".into(),
                offset: 999,
            }),
        };
        assert_eq!(
            c.describe(),
            "worker-1 complete(q, a j1) → true at 300–301 ms (old primary at 01234567:999)"
        );
        (c.reply, c.pos, c.id) = (
            Err(ConnectorError::new(ErrorKind::Engine, "cut")),
            None,
            None,
        );
        assert_eq!(
            c.describe(),
            "worker-1 complete(q, a) → error engine: cut at 300–301 ms"
        );
    }

    #[test]
    fn the_verdict_lines_name_what_broke() {
        let mut l = ledger();
        l.completed.insert(job("q", "1"), 2);
        let mut out = GateOutcome::new(crate::protocol::gate::GateId::G8, "crash");
        l.judge_exactly_once("failover", &mut out);
        let shown: Vec<&str> = out.evidence.iter().map(|e| e.text.as_str()).collect();
        assert_eq!(
            shown,
            [
                r#"no acknowledged enqueue was lost across the failover; lost ["q/2", "q/3", "q/4"]"#,
                r#"no job was completed twice across the failover; completed twice ["q/1"]"#,
            ]
        );
    }
}
