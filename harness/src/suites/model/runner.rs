//! Runs histories against a real connector on a live engine and judges them by the model: every
//! reply, then the final keyspace. Many histories are drawn and shrunk by proptest's
//! [`TestRunner`], seeded from the gate's seed so a run is reproducible.

use std::cell::{Cell, RefCell};
use std::time::{Duration, Instant};

use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};

use crate::connector::ConnectorFactory;
use crate::connector::{Connector, Request, Verbs};
use crate::engine::{Admin, Engine};
use crate::error::HarnessError;
use crate::suites::model::case::yaml_case;
pub use crate::suites::model::diff::{CallTime, Timing, diff_keyspace};
use crate::suites::model::history::{History, histories, resolve};
pub use crate::suites::model::history::{parse_regressions, seed_bytes};
use crate::suites::model::state::{Model, agrees, show, show_predicted, show_req};

/// Where histories run: the engine, the database they own, and fresh connectors.
pub struct Env<'a> {
    pub engine: &'a Engine,
    pub factory: &'a dyn ConnectorFactory,
    pub db: u32,
}

/// Why a history did not agree.
#[derive(Debug)]
pub enum Breach {
    /// The connector disagreed with the model (a verdict: FAIL).
    Mismatch(String),
    /// The harness or the engine failed (no verdict: ERROR).
    Harness(HarnessError),
    /// The history ran so long that a positive lease, backoff or delay could have come due, so the
    /// model (which holds them not due) cannot judge it. Never leaves [`run_history_timed`]: the
    /// history is re-run, and after [`VOID_TRIES`] such runs it is an ERROR.
    Void(String),
}

/// How often a history is re-run when it lasted too long to be judged.
pub const VOID_TRIES: u32 = 3;

impl From<HarnessError> for Breach {
    fn from(e: HarnessError) -> Self {
        Self::Harness(e)
    }
}

/// Time-writing calls are kept this far apart (wall clock, reply to next send), so the engine
/// stamps them in distinct milliseconds and its score order is the model's tick order.
const TIME_GAP: Duration = Duration::from_micros(1100);

/// Runs one history on a fresh connector and a flushed database. `Ok(calls)` when every reply and
/// the final keyspace agree with the model.
pub fn run_history(env: &Env<'_>, admin: &mut Admin, h: &History) -> Result<u64, Breach> {
    run_history_on(env, admin, &mut None, h)
}

/// What a run read of the engine's clock, over many histories.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClockStats {
    /// The widest engine-time bracket of a time-writing call, ms.
    pub widest_bracket_ms: i64,
    /// Histories run again because they lasted until a positive lease, backoff or delay could
    /// have come due ([`Breach::Void`]).
    pub void_reruns: u64,
}

/// [`run_history_on`], also keeping what it read of the engine's clock in `clock`.
pub fn run_history_timed(
    env: &Env<'_>,
    admin: &mut Admin,
    slot: &mut Option<Box<dyn Connector + Send>>,
    h: &History,
    clock: &mut ClockStats,
) -> Result<u64, Breach> {
    let mut tries = 0;
    loop {
        admin.flushdb()?;
        let mut con = match slot.take() {
            Some(c) => c,
            None => env.factory.make()?,
        };
        let mut timing = Timing::default();
        let result = judge(env, admin, &mut *con, h, &mut timing);
        clock.widest_bracket_ms = clock.widest_bracket_ms.max(timing.widest_ms);
        let calls = match result {
            Err(Breach::Void(why)) => {
                tries += 1;
                clock.void_reruns += 1;
                if tries >= VOID_TRIES {
                    return Err(Breach::Harness(HarnessError::Engine(format!(
                        "{why}, in {VOID_TRIES} runs of one history: too slow to judge"
                    ))));
                }
                continue;
            }
            other => other?,
        };
        for s in h.session_names() {
            con.disconnect(&s)
                .map_err(|e| Breach::Mismatch(format!("disconnect of session {s} failed: {e}")))?;
        }
        *slot = Some(con);
        return Ok(calls);
    }
}

/// Runs one history on the connector in `slot` (a fresh one when empty) and a flushed database.
/// On agreement the history's sessions are disconnected and the connector goes back into the slot
/// for the next history (a child process is not restarted per history); on any failure it is
/// dropped, so the next history starts fresh.
pub fn run_history_on(
    env: &Env<'_>,
    admin: &mut Admin,
    slot: &mut Option<Box<dyn Connector + Send>>,
    h: &History,
) -> Result<u64, Breach> {
    run_history_timed(env, admin, slot, h, &mut ClockStats::default())
}

/// `Err(Void)` when the engine's clock (`now`) has reached the earliest time a positive lease,
/// backoff or delay of this history could come due.
fn check_not_void(timing: &Timing, now: i64) -> Result<(), Breach> {
    match timing.earliest_due {
        Some(due) if now >= due => Err(Breach::Void(format!(
            "the history reached engine ms {now}, when a lease, backoff or delay it wrote could \
             come due ({due}), and the model holds every positive one not due"
        ))),
        _ => Ok(()),
    }
}

fn judge(
    env: &Env<'_>,
    admin: &mut Admin,
    con: &mut (dyn Connector + Send),
    h: &History,
    timing: &mut Timing,
) -> Result<u64, Breach> {
    let url = env.engine.target(env.db);
    let mut model = Model::new();
    for s in h.session_names() {
        con.connect(&s, &url)
            .map_err(|e| Breach::Mismatch(format!("connect of session {s} failed: {e}")))?;
        let _ = model.apply(&Request::Connect {
            session: s,
            url: url.url.clone(),
            cluster: url.cluster,
        });
    }
    // Ticks of recent time-writing calls and when their replies arrived.
    let mut recent: Vec<(u64, Instant)> = Vec::new();
    let n = h.calls.len();
    for (i, call) in h.calls.iter().enumerate() {
        let req = resolve(h, call, &model);
        let want = model.apply(&req);
        let timed = model.wrote_time();
        if timed {
            space_out(&model, &mut recent);
        }
        let before = if timed { Some(admin.time_ms()?) } else { None };
        let got = con.call(&req);
        if let Some(before) = before {
            recent.push((model.tick(), Instant::now()));
            let after = admin.time_ms()?;
            timing.widest_ms = timing.widest_ms.max(after - before);
            for (q, set, id) in model.written() {
                if let Some(s) = model.stamp_of(q, *set, id).filter(|s| s.ms > 0) {
                    let due = before + s.ms;
                    timing.earliest_due = Some(timing.earliest_due.map_or(due, |d| d.min(due)));
                }
            }
            timing.calls.insert(
                model.tick(),
                CallTime {
                    before,
                    after,
                    step: i + 1,
                    call: show_req(&req),
                },
            );
        }
        if !agrees(&want, &got) {
            check_not_void(timing, admin.time_ms()?)?;
            return Err(Breach::Mismatch(format!(
                "step {} of {n}: {}: the model says {}, the connector said {}",
                i + 1,
                show_req(&req),
                show_predicted(&want),
                show(&got)
            )));
        }
    }
    let ks = admin.keyspace()?;
    check_not_void(timing, admin.time_ms()?)?;
    let diffs = diff_keyspace(&model, &ks, timing);
    if !diffs.is_empty() {
        return Err(Breach::Mismatch(format!(
            "after all {n} steps the keyspace differs from the model: {}",
            diffs.join("; ")
        )));
    }
    Ok(n as u64)
}

/// Waits until no member the last model call wrote can share a server millisecond with a recently
/// stamped member of its set whose order against it would then flip (equal scores order by id;
/// the model orders by tick). Most calls need no wait: ids usually grow with time.
fn space_out(model: &Model, recent: &mut Vec<(u64, Instant)>) {
    let now = Instant::now();
    recent.retain(|(_, t)| now.duration_since(*t) < TIME_GAP);
    if recent.is_empty() {
        return;
    }
    let mut until: Option<Instant> = None;
    for (q, set, id) in model.written() {
        for tick in model.order_hazards(q, *set, id) {
            if let Some((_, t)) = recent.iter().find(|(k, _)| *k == tick) {
                let free = *t + TIME_GAP;
                until = Some(until.map_or(free, |u| u.max(free)));
            }
        }
    }
    if let Some(u) = until {
        let now = Instant::now();
        if u > now {
            std::thread::sleep(u - now);
        }
    }
}

/// How a run draws and shrinks.
#[derive(Debug, Clone)]
pub struct Options {
    pub histories: u32,
    pub seed: u64,
    pub max_shrink_time: Duration,
    pub max_shrink_iters: u32,
    /// Replayed before any drawn history.
    pub regressions: Vec<History>,
}

/// A history that disagreed, shrunk, with the case that reproduces it.
#[derive(Debug, Clone)]
pub struct Failure {
    pub history: History,
    pub message: String,
    /// `g7-regression-<hash>`.
    pub case_id: String,
    /// The ready-to-commit YAML case (expectations from the model).
    pub yaml: String,
    /// True when a committed regression (not a drawn history) failed.
    pub regression: bool,
    /// The history as it first failed, before any shrinking, and its message.
    pub original: History,
    pub original_message: String,
    /// How the original history did when replayed [`REPLAYS`] times on fresh connectors:
    /// `(passed, replayed)`. A failure that passes on replay did not reproduce.
    pub replays: (u32, u32),
}

/// How often the original failing history is replayed to tell a reproducible failure from one
/// that depends on timing or load.
pub const REPLAYS: u32 = 5;

/// Replays `h` [`REPLAYS`] times on fresh connectors: `(passed, replayed)`. A replay the harness
/// or the engine could not run is not counted.
pub fn replay(env: &Env<'_>, admin: &mut Admin, h: &History) -> (u32, u32) {
    let (mut passed, mut replayed) = (0, 0);
    for _ in 0..REPLAYS {
        match run_history(env, admin, h) {
            Ok(_) => {
                passed += 1;
                replayed += 1;
            }
            Err(Breach::Mismatch(_)) => replayed += 1,
            Err(Breach::Harness(_) | Breach::Void(_)) => {}
        }
    }
    (passed, replayed)
}

/// What a run did.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Histories run to completion in agreement (regressions included, shrink steps excluded).
    pub agreed: u64,
    /// Every history run, shrinking included.
    pub runs: u64,
    /// Every verb call sent.
    pub calls: u64,
    pub elapsed: Duration,
    pub failure: Option<Failure>,
    /// The widest engine-time bracket of a time-writing call, and the histories re-run because
    /// they lasted too long to judge (regressions, drawn histories and proptest's shrinking; not
    /// the final [`minimize`] pass).
    pub clock: ClockStats,
}

impl Report {
    pub fn histories_per_s(&self) -> f64 {
        self.runs as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
    pub fn calls_per_s(&self) -> f64 {
        self.calls as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

fn failure(
    h: &History,
    message: String,
    regression: bool,
    original: (History, String),
    replays: (u32, u32),
) -> Failure {
    let (case_id, yaml) = yaml_case(h, &message);
    Failure {
        history: h.clone(),
        message,
        case_id,
        yaml,
        regression,
        original: original.0,
        original_message: original.1,
        replays,
    }
}

/// Replays the regressions, then draws `histories` histories; the first disagreement is shrunk.
/// `Err` only when the harness or the engine failed.
pub fn run(env: &Env<'_>, opts: &Options) -> Result<Report, HarnessError> {
    let t0 = Instant::now();
    let mut admin = env.engine.prepare_db(env.db)?;
    let mut report = Report::default();
    let mut slot = None;
    let mut clock = ClockStats::default();
    if run_regressions(env, opts, &mut admin, &mut slot, &mut clock, &mut report)? {
        report.elapsed = t0.elapsed();
        return Ok(report);
    }
    let drawn = Drawn {
        env,
        admin: RefCell::new(admin),
        slot: RefCell::new(slot),
        shrinking: Cell::new(false),
        harness_error: RefCell::new(None),
        first_failure: RefCell::new(None),
        agreed: Cell::new(0),
        runs: Cell::new(0),
        calls: Cell::new(0),
        clock: Cell::new(clock),
    };
    let result = drawn.draw(opts);
    if let Some(e) = drawn.harness_error.take() {
        return Err(e);
    }
    report.agreed += drawn.agreed.get();
    report.runs += drawn.runs.get();
    report.calls += drawn.calls.get();
    report.clock = drawn.clock.get();
    match result {
        Ok(()) => {}
        Err(TestError::Fail(reason, h)) => {
            let message = reason.message().to_string();
            drawn.shrink_failure(opts, t0, h, message, &mut report);
        }
        Err(TestError::Abort(reason)) => {
            return Err(HarnessError::Engine(format!(
                "the history runner aborted: {}",
                reason.message()
            )));
        }
    }
    report.elapsed = t0.elapsed();
    Ok(report)
}

/// Runs the regressions in order; `true` when one disagreed (its failure is then in `report`).
fn run_regressions(
    env: &Env<'_>,
    opts: &Options,
    admin: &mut Admin,
    slot: &mut Option<Box<dyn Connector + Send>>,
    clock: &mut ClockStats,
    report: &mut Report,
) -> Result<bool, HarnessError> {
    for h in &opts.regressions {
        report.runs += 1;
        let result = run_history_timed(env, admin, slot, h, clock);
        report.clock = *clock;
        match result {
            Ok(calls) => {
                report.calls += calls;
                report.agreed += 1;
            }
            Err(Breach::Harness(e)) => return Err(e),
            Err(Breach::Void(why)) => return Err(HarnessError::Engine(why)),
            Err(Breach::Mismatch(m)) => {
                report.calls += h.calls.len() as u64;
                let replays = replay(env, admin, h);
                report.failure = Some(failure(h, m.clone(), true, (h.clone(), m), replays));
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// What the drawn histories share; in cells, as proptest's test closure is `Fn`.
struct Drawn<'e, 'a> {
    env: &'e Env<'a>,
    admin: RefCell<Admin>,
    slot: RefCell<Option<Box<dyn Connector + Send>>>,
    /// After the first disagreement every run (shrinking) gets a fresh connector.
    shrinking: Cell<bool>,
    harness_error: RefCell<Option<HarnessError>>,
    /// The first history that failed, whole, before proptest shrinks it.
    first_failure: RefCell<Option<(History, String)>>,
    agreed: Cell<u64>,
    runs: Cell<u64>,
    calls: Cell<u64>,
    clock: Cell<ClockStats>,
}

impl Drawn<'_, '_> {
    /// Draws `opts.histories` histories from the gate's seed; proptest shrinks a disagreement.
    fn draw(&self, opts: &Options) -> Result<(), TestError<History>> {
        let config = Config {
            cases: opts.histories,
            max_shrink_time: u32::try_from(opts.max_shrink_time.as_millis()).unwrap_or(u32::MAX),
            max_shrink_iters: opts.max_shrink_iters,
            failure_persistence: None,
            ..Config::default()
        };
        let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes(opts.seed));
        let mut runner = TestRunner::new_with_rng(config, rng);
        runner.run(&histories(), |h| self.try_history(&h))
    }

    /// One drawn (or shrunk) history; a harness error stops the rest from running.
    fn try_history(&self, h: &History) -> Result<(), TestCaseError> {
        if self.harness_error.borrow().is_some() {
            return Ok(());
        }
        self.runs.set(self.runs.get() + 1);
        let mut w = self.clock.get();
        let mut admin = self.admin.borrow_mut();
        let result = if self.shrinking.get() {
            run_history_timed(self.env, &mut admin, &mut None, h, &mut w)
        } else {
            run_history_timed(self.env, &mut admin, &mut self.slot.borrow_mut(), h, &mut w)
        };
        self.clock.set(w);
        match result {
            Ok(n) => {
                self.calls.set(self.calls.get() + n);
                self.agreed.set(self.agreed.get() + 1);
                Ok(())
            }
            Err(Breach::Mismatch(m)) => {
                self.calls.set(self.calls.get() + h.calls.len() as u64);
                self.shrinking.set(true);
                self.first_failure
                    .borrow_mut()
                    .get_or_insert_with(|| (h.clone(), m.clone()));
                Err(TestCaseError::fail(m))
            }
            Err(Breach::Harness(e)) => {
                *self.harness_error.borrow_mut() = Some(e);
                Ok(())
            }
            Err(Breach::Void(why)) => {
                *self.harness_error.borrow_mut() = Some(HarnessError::Engine(why));
                Ok(())
            }
        }
    }

    /// Minimizes what proptest shrank, within the shrink time, then replays the original.
    fn shrink_failure(
        self,
        opts: &Options,
        t0: Instant,
        h: History,
        reason: String,
        report: &mut Report,
    ) {
        let deadline = t0.elapsed() + opts.max_shrink_time;
        let mut admin = self.admin.into_inner();
        let (h, message, runs, calls) =
            minimize(self.env, &mut admin, h, reason, || t0.elapsed() < deadline);
        report.runs += runs;
        report.calls += calls;
        let original = self
            .first_failure
            .into_inner()
            .unwrap_or_else(|| (h.clone(), message.clone()));
        let replays = replay(self.env, &mut admin, &original.0);
        report.runs += u64::from(replays.1);
        report.failure = Some(failure(&h, message, false, original, replays));
    }
}

/// A second shrinking stage after proptest's: proptest deletes each call once and then simplifies
/// calls, but a simplification (a claim turned into an enqueue) can make an earlier deletion
/// possible. This pass deletes calls, sessions and queues greedily until nothing more can go and
/// the history still disagrees. Returns the history, its message, and the runs and calls it cost.
pub fn minimize(
    env: &Env<'_>,
    admin: &mut Admin,
    mut h: History,
    mut message: String,
    more_time: impl Fn() -> bool,
) -> (History, String, u64, u64) {
    let (mut runs, mut calls) = (0u64, 0u64);
    let mut still_fails = |cand: &History, message: &mut String| -> Option<bool> {
        runs += 1;
        calls += cand.calls.len() as u64;
        match run_history(env, admin, cand) {
            Ok(_) => Some(false),
            Err(Breach::Mismatch(m)) => {
                *message = m;
                Some(true)
            }
            Err(Breach::Harness(_) | Breach::Void(_)) => None,
        }
    };
    // Confirm on a fresh connector first: a drawn history ran on one reused across histories.
    match still_fails(&h, &mut message) {
        Some(true) | None => {}
        Some(false) => {
            message = format!(
                "{message} (only on a connector reused from earlier histories, whose sessions were \
                 disconnected: a fresh connector agrees, so state leaked between histories)"
            );
            return (h, message, runs, calls);
        }
    }
    'outer: loop {
        let mut changed = false;
        let mut i = h.calls.len();
        while i > 0 {
            i -= 1;
            if h.calls.len() <= 1 || !more_time() {
                break 'outer;
            }
            let mut cand = h.clone();
            cand.calls.remove(i);
            match still_fails(&cand, &mut message) {
                Some(true) => {
                    h = cand;
                    changed = true;
                }
                Some(false) => {}
                None => break 'outer,
            }
        }
        for shrink in [0, 1] {
            let mut cand = h.clone();
            let n = if shrink == 0 {
                &mut cand.sessions
            } else {
                &mut cand.queues
            };
            if *n <= 1 || !more_time() {
                continue;
            }
            *n -= 1;
            match still_fails(&cand, &mut message) {
                Some(true) => {
                    h = cand;
                    changed = true;
                }
                Some(false) => {}
                None => break 'outer,
            }
        }
        if !changed {
            break;
        }
    }
    (h, message, runs, calls)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suites::model::diff::tests::timing;

    #[test]
    fn a_history_that_reached_a_due_time_is_void() {
        let mut t = timing();
        assert!(check_not_void(&t, i64::MAX).is_ok());
        t.earliest_due = Some(1_750);
        assert!(check_not_void(&t, 1_749).is_ok());
        assert!(matches!(check_not_void(&t, 1_750), Err(Breach::Void(_))));
    }
}
