//! Runs histories against a real connector on a live engine and judges them by the model: every
//! reply, then the final keyspace. Many histories are drawn and shrunk by proptest's
//! [`TestRunner`], seeded from the gate's seed so a run is reproducible.

use std::cell::{Cell, RefCell};
use std::time::{Duration, Instant};

use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};

use crate::connector::Connector;
use crate::engine::Admin;
use crate::error::HarnessError;
use crate::suites::model::case::yaml_case;
pub use crate::suites::model::diff::{CallTime, Timing, diff_keyspace};
use crate::suites::model::history::{History, TimeScale, histories};
pub use crate::suites::model::history::{parse_regressions, seed_bytes};
pub use crate::suites::model::judge::{
    Breach, ClockStats, Env, VOID_TRIES, run_history, run_history_at, run_history_on,
    run_history_timed,
};
use crate::suites::model::shrink::minimize;

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
pub fn replay(env: &Env<'_>, admin: &mut Admin, h: &History, scale: TimeScale) -> (u32, u32) {
    let (mut passed, mut replayed) = (0, 0);
    for _ in 0..REPLAYS {
        match run_history_at(env, admin, h, scale) {
            Ok(_) => {
                passed += 1;
                replayed += 1;
            }
            Err(Breach::Mismatch(_)) => replayed += 1,
            Err(Breach::Harness(_) | Breach::Void { .. }) => {}
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
            Err(Breach::Void { why, .. }) => return Err(HarnessError::Engine(why)),
            Err(Breach::Mismatch(m)) => {
                report.calls += h.calls.len() as u64;
                let replays = replay(env, admin, h, clock.scale);
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
            Err(Breach::Void { why, .. }) => {
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
        let scale = self.clock.get().scale;
        let (h, message, runs, calls) = minimize(self.env, &mut admin, h, reason, scale, || {
            t0.elapsed() < deadline
        });
        report.runs += runs;
        report.calls += calls;
        let original = self
            .first_failure
            .into_inner()
            .unwrap_or_else(|| (h.clone(), message.clone()));
        let replays = replay(self.env, &mut admin, &original.0, scale);
        report.runs += u64::from(replays.1);
        report.failure = Some(failure(&h, message, false, original, replays));
    }
}
