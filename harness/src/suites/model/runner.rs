//! Runs histories against a real connector on a live engine and judges them by the model: every
//! reply, then the final keyspace. Many histories are drawn and shrunk by proptest's
//! [`TestRunner`], seeded from the gate's seed so a run is reproducible.

use std::cell::{Cell, RefCell};
use std::time::{Duration, Instant};

use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};

use crate::connector::ConnectorFactory;
use crate::connector::{Connector, Reply, Request, Verbs};
use crate::engine::{Admin, Engine};
use crate::error::{ConnectorError, HarnessError};
use crate::protocol::grammar::Set;
use crate::protocol::keyspace::{Keyspace, QueueState};
use crate::suites::model::case::yaml_case;
use crate::suites::model::history::{History, histories, resolve};
use crate::suites::model::state::{Model, Predicted, Queue, Stamp, ordered};

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
}

impl From<HarnessError> for Breach {
    fn from(e: HarnessError) -> Self {
        Self::Harness(e)
    }
}

/// Time-writing calls are kept this far apart (wall clock, reply to next send), so the engine
/// stamps them in distinct milliseconds and its score order is the model's tick order.
const TIME_GAP: Duration = Duration::from_micros(1100);

fn show_req(r: &Request) -> String {
    serde_json::to_string(r).unwrap_or_else(|_| format!("{r:?}"))
}

fn show(p: &Result<Reply, ConnectorError>) -> String {
    match p {
        Ok(r) => format!("ok {}", r.to_json()),
        Err(e) => format!("error {} ({})", e.kind, e.message),
    }
}

fn show_predicted(p: &Predicted) -> String {
    match p {
        Ok(r) => format!("ok {}", r.to_json()),
        Err(k) => format!("error {k}"),
    }
}

fn agrees(want: &Predicted, got: &Result<Reply, ConnectorError>) -> bool {
    match (want, got) {
        (Ok(a), Ok(b)) => a == b,
        (Err(k), Err(e)) => *k == e.kind,
        _ => false,
    }
}

/// Runs one history on a fresh connector and a flushed database. `Ok(calls)` when every reply and
/// the final keyspace agree with the model.
pub fn run_history(env: &Env<'_>, admin: &mut Admin, h: &History) -> Result<u64, Breach> {
    run_history_on(env, admin, &mut None, h)
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
    admin.flushdb()?;
    let mut con = match slot.take() {
        Some(c) => c,
        None => env.factory.make()?,
    };
    let calls = judge(env, admin, &mut *con, h)?;
    for s in h.session_names() {
        con.disconnect(&s)
            .map_err(|e| Breach::Mismatch(format!("disconnect of session {s} failed: {e}")))?;
    }
    *slot = Some(con);
    Ok(calls)
}

fn judge(
    env: &Env<'_>,
    admin: &mut Admin,
    con: &mut (dyn Connector + Send),
    h: &History,
) -> Result<u64, Breach> {
    let url = env.engine.url(env.db);
    let mut model = Model::new();
    for s in h.session_names() {
        con.connect(&s, &url)
            .map_err(|e| Breach::Mismatch(format!("connect of session {s} failed: {e}")))?;
        let _ = model.apply(&Request::Connect {
            session: s,
            url: url.clone(),
        });
    }
    // Ticks of recent time-writing calls and when their replies arrived.
    let mut recent: Vec<(u64, Instant)> = Vec::new();
    let n = h.calls.len();
    for (i, call) in h.calls.iter().enumerate() {
        let req = resolve(h, call, &model);
        let want = model.apply(&req);
        if model.wrote_time() {
            space_out(&model, &mut recent);
        }
        let got = con.call(&req);
        if model.wrote_time() {
            recent.push((model.tick(), Instant::now()));
        }
        if !agrees(&want, &got) {
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
    let now = admin.time_ms()?;
    let diffs = diff_keyspace(&model, &ks, now);
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

fn due_word(later: bool) -> &'static str {
    if later { "not due" } else { "due" }
}

/// Every difference between the model's state and the engine's keyspace (`now`: engine ms).
pub fn diff_keyspace(model: &Model, ks: &Keyspace, now: i64) -> Vec<String> {
    let mut out: Vec<String> = ks
        .foreign
        .iter()
        .map(|k| format!("key outside the grammar: {k}"))
        .collect();
    let empty_model = Queue::default();
    let empty_ks = QueueState::default();
    let mut names: Vec<&String> = model
        .queues
        .iter()
        .filter(|(_, q)| !q.is_empty())
        .map(|(k, _)| k)
        .chain(ks.queues.keys())
        .collect();
    names.sort();
    names.dedup();
    for q in names {
        let m = model.queues.get(q).unwrap_or(&empty_model);
        let k = ks.queues.get(q).unwrap_or(&empty_ks);
        for set in Set::ALL {
            let got: Vec<&String> = k.set(set).iter().map(|(id, _)| id).collect();
            let want = m.ids(set);
            if got
                .iter()
                .map(|s| s.as_str())
                .ne(want.iter().map(String::as_str))
            {
                out.push(format!("{q} {set}: model {want:?}, engine {got:?}"));
                continue;
            }
            let stamps: Vec<(String, Option<Stamp>)> = match set {
                Set::Pending => want.iter().map(|id| (id.clone(), None)).collect(),
                Set::Active => ordered(&m.active)
                    .into_iter()
                    .map(|(a, s)| (a, Some(s)))
                    .collect(),
                Set::Delayed => ordered(&m.delayed)
                    .into_iter()
                    .map(|(a, s)| (a, Some(s)))
                    .collect(),
                Set::Dead => ordered(&m.dead)
                    .into_iter()
                    .map(|(a, s)| (a, Some(s)))
                    .collect(),
            };
            for ((id, score), (_, stamp)) in k.set(set).iter().zip(stamps) {
                match stamp {
                    None if *score != 0 => {
                        out.push(format!("{q} pending {id}: score {score}, not 0"))
                    }
                    Some(s) if (*score > now) != s.later => out.push(format!(
                        "{q} {set} {id}: the model says {}, the score {score} is {} (engine now {now})",
                        due_word(s.later),
                        due_word(*score > now)
                    )),
                    _ => {}
                }
            }
        }
        let want_jobs: std::collections::BTreeMap<
            String,
            std::collections::BTreeMap<String, String>,
        > = m
            .jobs
            .iter()
            .map(|(id, j)| {
                (
                    id.clone(),
                    [
                        ("payload".to_string(), j.payload.clone()),
                        ("attempts".to_string(), j.attempts.to_string()),
                        ("state".to_string(), j.state.to_string()),
                    ]
                    .into_iter()
                    .collect(),
                )
            })
            .collect();
        if want_jobs != k.jobs {
            for id in want_jobs.keys().chain(k.jobs.keys()) {
                let (a, b) = (want_jobs.get(id), k.jobs.get(id));
                if a != b {
                    out.push(format!("{q} job {id}: model {a:?}, engine {b:?}"));
                }
            }
            out.dedup();
        }
        if m.seq != k.seq {
            out.push(format!("{q} seq: model {:?}, engine {:?}", m.seq, k.seq));
        }
    }
    out
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
}

impl Report {
    pub fn histories_per_s(&self) -> f64 {
        self.runs as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
    pub fn calls_per_s(&self) -> f64 {
        self.calls as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

fn failure(h: &History, message: String, regression: bool) -> Failure {
    let (case_id, yaml) = yaml_case(h, &message);
    Failure {
        history: h.clone(),
        message,
        case_id,
        yaml,
        regression,
    }
}

/// The 32-byte ChaCha seed for a gate seed.
pub fn seed_bytes(seed: u64) -> [u8; 32] {
    let mut b = [0u8; 32];
    for (i, chunk) in b.chunks_mut(8).enumerate() {
        let word = seed
            .wrapping_add(i as u64)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
        chunk.copy_from_slice(&word.to_le_bytes());
    }
    b
}

/// Replays the regressions, then draws `histories` histories; the first disagreement is shrunk.
/// `Err` only when the harness or the engine failed.
pub fn run(env: &Env<'_>, opts: &Options) -> Result<Report, HarnessError> {
    let t0 = Instant::now();
    let mut admin = env.engine.prepare_db(env.db)?;
    let mut report = Report::default();
    let mut slot = None;
    for h in &opts.regressions {
        report.runs += 1;
        match run_history_on(env, &mut admin, &mut slot, h) {
            Ok(calls) => {
                report.calls += calls;
                report.agreed += 1;
            }
            Err(Breach::Harness(e)) => return Err(e),
            Err(Breach::Mismatch(m)) => {
                report.calls += h.calls.len() as u64;
                report.failure = Some(failure(h, m, true));
                report.elapsed = t0.elapsed();
                return Ok(report);
            }
        }
    }
    let config = Config {
        cases: opts.histories,
        max_shrink_time: u32::try_from(opts.max_shrink_time.as_millis()).unwrap_or(u32::MAX),
        max_shrink_iters: opts.max_shrink_iters,
        failure_persistence: None,
        ..Config::default()
    };
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes(opts.seed));
    let mut runner = TestRunner::new_with_rng(config, rng);
    let admin = RefCell::new(admin);
    let slot = RefCell::new(slot);
    // After the first disagreement every run (shrinking) gets a fresh connector.
    let shrinking = Cell::new(false);
    let harness_error: RefCell<Option<HarnessError>> = RefCell::new(None);
    let (agreed, runs, calls) = (Cell::new(0u64), Cell::new(0u64), Cell::new(0u64));
    let result = runner.run(&histories(), |h| {
        if harness_error.borrow().is_some() {
            return Ok(());
        }
        runs.set(runs.get() + 1);
        let result = if shrinking.get() {
            run_history(env, &mut admin.borrow_mut(), &h)
        } else {
            run_history_on(env, &mut admin.borrow_mut(), &mut slot.borrow_mut(), &h)
        };
        match result {
            Ok(n) => {
                calls.set(calls.get() + n);
                agreed.set(agreed.get() + 1);
                Ok(())
            }
            Err(Breach::Mismatch(m)) => {
                calls.set(calls.get() + h.calls.len() as u64);
                shrinking.set(true);
                Err(TestCaseError::fail(m))
            }
            Err(Breach::Harness(e)) => {
                *harness_error.borrow_mut() = Some(e);
                Ok(())
            }
        }
    });
    if let Some(e) = harness_error.into_inner() {
        return Err(e);
    }
    report.agreed += agreed.get();
    report.runs += runs.get();
    report.calls += calls.get();
    match result {
        Ok(()) => {}
        Err(TestError::Fail(reason, h)) => {
            let deadline = t0.elapsed() + opts.max_shrink_time;
            let mut admin = admin.into_inner();
            let (h, message, runs, calls) =
                minimize(env, &mut admin, h, reason.message().to_string(), || {
                    t0.elapsed() < deadline
                });
            report.runs += runs;
            report.calls += calls;
            report.failure = Some(failure(&h, message, false));
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
            Err(Breach::Harness(_)) => None,
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

/// Parses a regressions file: one JSON history per line; `#` comments and blank lines skipped.
pub fn parse_regressions(text: &str) -> Result<Vec<History>, HarnessError> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| {
                HarnessError::BadInput(format!("interleavings regressions line {}: {e}", i + 1))
            })
        })
        .collect()
}
