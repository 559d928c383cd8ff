//! A connector that hangs costs seconds, not minutes: for each verb in turn, a full gate run (the
//! header's `hello`, then G1–G8) against the real Python connector behind `hang_on.py VERB` (which
//! never answers VERB) must end with a FAIL within [`BOUND`] (times [`common::slowness`] on a
//! shared machine), every timeout must be on VERB, and
//! nothing may be left running. Each run's wall time is printed.
//!
//! The verbs run [`PARALLEL`] at a time, each on a binary engine of its own, with the default base
//! timeout (a shorter one cuts off the Python connector's start on a loaded machine), 32 G7
//! histories and a G5 batch of 20 000 (100 000 when the hang is on `batch` or `pipeline_probe`,
//! where it is never run): the whole test takes a few minutes.

mod common;

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use emq::cmd::run::run_gates;
use emq::connector::child::{ChildFactory, ChildSpec};
use emq::connector::{Connector, Verbs};
use emq::error::HarnessError;
use emq::gates::{ConnectorFactory, GateContext, GateOutcome, Verdict};
use emq::protocol::bundle::Bundle;
use emq::report::output::{Progress, set_quiet};

/// Every verb with a reply: the schema's list, so a new verb is judged here too.
const VERBS: &[&str] = &emq::connector::schema::CMDS;

/// The verbs judged on every run.
const CI_VERBS: [&str; 4] = ["hello", "claim", "pipeline_probe", "batch"];

/// A full run with a hang must be judged within this.
const BOUND: Duration = Duration::from_secs(120);
/// The base per-request timeout of these runs: the default, as `emq-gate run` uses it.
const BASE: Duration = emq::connector::child::DEFAULT_TIMEOUT;
const PARALLEL: usize = 4;

fn python_connector() -> Option<PathBuf> {
    let found = emq::settings::python_connector();
    assert!(
        found.is_some() || !emq::settings::in_ci(),
        "CI is set but EMQ_PYTHON_CONNECTOR names no connector: run ci/provision"
    );
    found
}

/// A [`ChildFactory`] that notes each gate's timeout before the next gate's reset forgets it.
struct Watched {
    inner: ChildFactory,
    timeouts: Mutex<Vec<String>>,
}

impl Watched {
    fn note(&self) {
        if let Some(t) = self.inner.timed_out() {
            self.timeouts.lock().unwrap().push(t);
        }
    }
}

impl ConnectorFactory for Watched {
    fn make(&self) -> Result<Box<dyn Connector + Send>, HarnessError> {
        self.inner.make()
    }
    fn killable(&self) -> bool {
        true
    }
    fn reset(&self) {
        self.note();
        self.inner.reset();
    }
    fn hold(&self, stopped: bool) {
        self.inner.hold(stopped);
    }
    fn timed_out(&self) -> Option<String> {
        self.inner.timed_out()
    }
}

struct Judged {
    verb: &'static str,
    wall: Duration,
    outcomes: Vec<GateOutcome>,
    timeouts: Vec<String>,
}

/// The header's `hello`, then every gate, as `emq-gate run` does.
fn judge(verb: &'static str, program: &Path, marker: &str) -> Judged {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hang_on.py");
    let bundle_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../bundle");
    let spec = ChildSpec::new([
        "python3".to_string(),
        fixture.display().to_string(),
        verb.to_string(),
        program.display().to_string(),
    ])
    .with_timeout(BASE)
    .with_env("PYTHONDONTWRITEBYTECODE", "1")
    .with_env("EMQ_BUNDLE_DIR", bundle_dir.display().to_string())
    .with_env("EMQ_HANGS_TEST", marker);
    let factory = Watched {
        inner: ChildFactory::new(spec),
        timeouts: Mutex::default(),
    };
    let bundle = Arc::new(Bundle::load_default().unwrap());
    let t0 = Instant::now();
    let engine = common::binary_engine();
    {
        let mut c = factory.make().expect("start the connector");
        let _ = c.hello();
    }
    let big = matches!(verb, "batch" | "pipeline_probe");
    let ctx = GateContext {
        seed: 1,
        histories: 32,
        batch: if big { 100_000 } else { 20_000 },
        ..common::gate_context(&engine, &bundle, &factory)
    };
    let outcomes = run_gates(
        &ctx,
        &emq::gates::lanes::every_gate(),
        None,
        false,
        &Progress::new(),
    );
    factory.note();
    drop(engine);
    Judged {
        verb,
        wall: t0.elapsed(),
        outcomes,
        timeouts: factory.timeouts.into_inner().unwrap(),
    }
}

/// Pids of processes whose environment carries `marker`.
fn marked(marker: &str) -> Vec<u32> {
    common::marked("EMQ_HANGS_TEST", marker)
}

#[test]
fn a_hang_on_any_verb_is_judged_fail_in_seconds() {
    let Some(program) = python_connector() else {
        eprintln!(
            "skipped: no Python connector (set EMQ_PYTHON_CONNECTOR; ci/provision installs it)"
        );
        return;
    };
    set_quiet(true);
    let marker = format!("{}-{}", std::process::id(), rand_suffix());
    // CI judges the verbs whose timeouts differ (the header's hello, a plain verb, the two with a
    // per-command allowance); EMQ_HANGS_ALL=1 judges them all (about 4 minutes on 2 cores).
    let all = emq::settings::flag(emq::settings::HANGS_ALL);
    let verbs: Vec<&str> = VERBS
        .iter()
        .copied()
        .filter(|v| all || CI_VERBS.contains(v))
        .collect();
    let bound = common::scaled_bound("a hang's verdict", BOUND);
    let queue = Arc::new(Mutex::new(verbs.iter().copied().collect::<VecDeque<_>>()));
    let results = Arc::new(Mutex::new(Vec::new()));
    let t0 = Instant::now();
    let workers: Vec<_> = (0..PARALLEL)
        .map(|_| {
            let (queue, results, program, marker) = (
                queue.clone(),
                results.clone(),
                program.clone(),
                marker.clone(),
            );
            std::thread::spawn(move || {
                loop {
                    let Some(verb) = queue.lock().unwrap().pop_front() else {
                        return;
                    };
                    let j = judge(verb, &program, &marker);
                    eprintln!(
                        "hang on {:<14} judged in {:>5.1} s",
                        verb,
                        j.wall.as_secs_f64()
                    );
                    results.lock().unwrap().push(j);
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let total = t0.elapsed();

    let mut results = std::mem::take(&mut *results.lock().unwrap());
    results.sort_by_key(|j| VERBS.iter().position(|v| *v == j.verb));
    let mut bad = Vec::new();
    eprintln!("verb            wall    verdicts                  first timeout");
    for j in &results {
        let verdicts: String = j
            .outcomes
            .iter()
            .map(|o| match o.verdict {
                Verdict::Pass => 'P',
                Verdict::Fail => 'F',
                Verdict::Error => 'E',
                Verdict::NotRun => '-',
            })
            .collect();
        eprintln!(
            "{:<14} {:>6.1} s  {verdicts}  {}",
            j.verb,
            j.wall.as_secs_f64(),
            j.timeouts.first().map_or("-", String::as_str)
        );
        for o in j.outcomes.iter().filter(|o| o.verdict == Verdict::Error) {
            let why = o
                .evidence
                .iter()
                .find(|e| e.severity == emq::gates::Severity::Error);
            let why: String = why
                .map(ToString::to_string)
                .unwrap_or_default()
                .chars()
                .take(160)
                .collect();
            eprintln!("    {} {why}", o.id);
        }
        if j.wall > bound {
            bad.push(format!(
                "{}: judged in {:?}, bound {bound:.0?} ({BOUND:?} scaled to the machine)",
                j.verb, j.wall
            ));
        }
        if !j.outcomes.iter().any(|o| o.verdict == Verdict::Fail) {
            bad.push(format!("{}: no gate FAILs ({verdicts})", j.verb));
        }
        let want = format!("no answer to {} (seq ", j.verb);
        if j.timeouts.is_empty() || j.timeouts.iter().any(|t| !t.starts_with(&want)) {
            bad.push(format!("{}: timeouts {:?}", j.verb, j.timeouts));
        }
    }
    eprintln!(
        "all {} verbs in {:.1} s ({PARALLEL} at a time)",
        verbs.len(),
        total.as_secs_f64()
    );
    // Nothing is left running: the fixtures and the real connectors behind them.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut left = marked(&marker);
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        left = marked(&marker);
    }
    if !left.is_empty() {
        bad.push(format!("left running: pids {left:?}"));
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

fn rand_suffix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos().into())
}
