//! G7 end to end on a binary engine: the reference connector agrees with the model over hundreds
//! of histories and survives the soak; three broken doubles are each caught, and each is shrunk to
//! a short counterexample whose YAML case parses and replays (passing on the reference).

mod common;

use std::sync::Arc;
use std::time::Duration;

use emq::connector::Connector;
use emq::connector::reference::Reference;
use emq::doubles::build::skewed_factory;
use emq::doubles::time::TimeSkew;
use emq::doubles::{Double, TABLE};

use emq::error::HarnessError;
use emq::gates::g7_interleavings::{self, regressions};
use emq::gates::{ConnectorFactory, GateContext, GateId, Verdict, run_gate};
use emq::protocol::bundle::Bundle;
use emq::suites::cases::runner::{Mode, run_case};
use emq::suites::model::runner::{self, Breach, Env, Options, run_history};
use emq::suites::model::soak::{SoakOptions, soak};

use common::{binary_engine as engine, bundle};

fn reference(
    bundle: &Arc<Bundle>,
) -> impl Fn() -> Result<Box<dyn Connector + Send>, HarnessError> + Send + Sync + use<> {
    let b = bundle.clone();
    move || Ok(Reference::boxed(&b))
}

#[test]
fn reference_passes_the_gate() {
    let e = engine();
    let b = bundle();
    let f = reference(&b);
    let ctx = GateContext {
        seed: 0x6507,
        histories: 256,
        batch: 0,
        ..common::gate_context(&e, &b, &f)
    };
    let gate = emq::gates::ALL.iter().find(|g| g.id == GateId::G7).unwrap();
    let out = run_gate(gate, &ctx);
    eprintln!("G7 evidence: {:#?}", out.evidence);
    eprintln!(
        "G7 figures: {:?} ({:.1} s)",
        out.figures,
        out.wall.as_secs_f64()
    );
    assert_eq!(out.verdict, Verdict::Pass, "{:#?}", out.evidence);
    eprintln!(
        "reference: {} histories/s, {} calls/s",
        out.figures["histories_per_s"], out.figures["calls_per_s"]
    );
}

#[test]
fn regressions_parse_and_replay() {
    let e = engine();
    let b = bundle();
    let f = reference(&b);
    let env = Env {
        engine: &e,
        factory: &f,
        db: GateId::G7.db(),
    };
    let mut admin = e.prepare_db(env.db).unwrap();
    for h in regressions() {
        run_history(&env, &mut admin, &h).unwrap_or_else(|b| panic!("{h:?}: {b:?}"));
    }
}

fn caught(double: Double) {
    assert!(
        emq::gates::rules::gates_failing(double).contains(&GateId::G7),
        "{double:?}: its rules (or its table entry) must name G7"
    );
    let b = bundle();
    caught_with(&format!("{double:?}"), double.factory(&b).as_ref(), &b);
}

/// Every double the table says G7 catches has a test here.
#[test]
fn every_interleavings_double_has_a_test() {
    let src = include_str!("interleavings.rs");
    for e in TABLE
        .iter()
        .filter(|e| emq::gates::rules::gates_failing(e.double).contains(&GateId::G7))
    {
        assert!(
            src.contains(&format!("caught(Double::{:?})", e.double))
                || src.contains(&format!("time_caught(TimeSkew::{:?})", e.double)),
            "{:?} has no test",
            e.double
        );
    }
}

fn caught_with(breakage: &str, broken: &dyn ConnectorFactory, b: &Arc<Bundle>) {
    caught_with_message(breakage, broken, b);
}

/// Like [`caught_with`]; returns the shrunk counterexample's message.
fn caught_with_message(breakage: &str, broken: &dyn ConnectorFactory, b: &Arc<Bundle>) -> String {
    let e = engine();
    let broken = || broken.make();
    let env = Env {
        engine: &e,
        factory: &broken,
        db: GateId::G7.db(),
    };
    let report = runner::run(
        &env,
        &Options {
            histories: 256,
            seed: 0x6507,
            // The "shrunk to at most 6 steps" below is a promise for a machine of its own.
            max_shrink_time: common::scaled_bound(
                &format!("{breakage}: shrinking"),
                Duration::from_secs(60),
            ),
            max_shrink_iters: 2048,
            regressions: Vec::new(),
        },
    )
    .unwrap();
    eprintln!(
        "{breakage}: {} runs, {} calls in {:.2} s: {:.0} histories/s, {:.0} calls/s",
        report.runs,
        report.calls,
        report.elapsed.as_secs_f64(),
        report.histories_per_s(),
        report.calls_per_s()
    );
    let f = report
        .failure
        .unwrap_or_else(|| panic!("{breakage} was not caught"));
    eprintln!("{breakage} counterexample:\n{}", f.yaml);
    assert!(!f.regression);
    assert!(
        f.history.calls.len() <= 6,
        "{breakage}: shrunk to {} steps: {:?}",
        f.history.calls.len(),
        f.history
    );
    assert!(f.case_id.starts_with("g7-regression-"), "{}", f.case_id);
    let parsed: serde_json::Value = serde_saphyr::from_str(&f.yaml).expect("the case is YAML");
    assert_eq!(parsed["id"], f.case_id.as_str());
    assert!(parsed["steps"].as_array().unwrap().len() >= f.history.calls.len());

    // The minimal history fails on the double and passes on the reference.
    let mut admin = e.prepare_db(env.db).unwrap();
    assert!(matches!(
        run_history(&env, &mut admin, &f.history),
        Err(Breach::Mismatch(_))
    ));
    let good = reference(b);
    let env_ok = Env {
        engine: &e,
        factory: &good,
        db: GateId::G7.db(),
    };
    run_history(&env_ok, &mut admin, &f.history)
        .expect("the counterexample passes on the reference");
    // The YAML case, run by G6's case runner: fails on the double, passes on the reference.
    let case = emq::suites::cases::format::parse(std::path::Path::new("g7.yaml"), &f.yaml)
        .expect("the counterexample is a well-formed case");
    assert_eq!(case.id, f.case_id);
    let mut bad = broken().unwrap();
    let r = run_case(&case, &e, GateId::G7.db(), &mut bad, Mode::Check);
    assert!(r.failure.is_some(), "the case passes on {breakage}");
    let mut ok = good().unwrap();
    let r = run_case(&case, &e, GateId::G7.db(), &mut ok, Mode::Check);
    assert!(r.failure.is_none(), "{}", r.failure.unwrap());
    // Its history line round-trips through the regressions format.
    let line = serde_json::to_string(&f.history).unwrap();
    assert_eq!(
        runner::parse_regressions(&line).unwrap(),
        vec![f.history.clone()]
    );
    f.message
}

/// A time double is caught by the final keyspace, to the millisecond: the message names the call
/// that wrote the score, its engine-time bracket, the interval wanted and the score found.
fn time_caught(skew: TimeSkew) {
    let b = bundle();
    let name = format!("{skew:?}");
    let message = caught_with_message(&name, &skewed_factory(&b, skew), &b);
    eprintln!("{name}: {message}");
    for part in [
        "keyspace differs",
        ": score ",
        "ran at engine ms [",
        " ms wide), so now+",
        "wants [",
    ] {
        assert!(message.contains(part), "{name}: {part:?} not in {message}");
    }
}

#[test]
fn adding_grace_to_time_is_caught() {
    time_caught(TimeSkew::AddsGrace);
}

#[test]
fn rounding_time_up_to_seconds_is_caught() {
    time_caught(TimeSkew::RoundsUpToSeconds);
}

#[test]
fn backoff_read_as_seconds_is_caught() {
    time_caught(TimeSkew::BackoffInSeconds);
}

/// Time too early (R1.6 from the other side): a margin taken off, not a grace added.
#[test]
fn a_margin_taken_off_time_is_caught() {
    time_caught(TimeSkew::SubtractsMargin);
}

#[test]
fn retry_ignoring_max_attempts_is_caught() {
    caught(Double::RetryIgnoresMaxAttempts);
}

#[test]
fn reap_ignoring_limit_is_caught() {
    caught(Double::ReapIgnoresLimit);
}

#[test]
fn complete_ignoring_the_token_is_caught() {
    caught(Double::CompleteIgnoresToken);
}

#[test]
fn enqueue_twice_is_caught() {
    caught(Double::EnqueueTwice);
}

#[test]
fn the_soak_accounts_for_every_job() {
    let e = engine();
    let b = bundle();
    let opts = SoakOptions {
        workers: 3,
        duration: Duration::from_millis(1500),
        seed: 9,
    };
    let good = reference(&b);
    let env = Env {
        engine: &e,
        factory: &good,
        db: GateId::G7.db(),
    };
    let r = soak(&env, &opts).unwrap();
    eprintln!(
        "soak (reference): {} jobs, {} claims, {} completed, {} calls in {:.2} s",
        r.jobs,
        r.claims,
        r.completed,
        r.calls,
        r.elapsed.as_secs_f64()
    );
    assert!(r.violations.is_empty(), "{:#?}", r.violations);
    assert!(r.completed > 0 && r.claims > r.completed, "{r:?}");

    let twice = Double::EnqueueTwice.factory(&b);
    let env = Env {
        engine: &e,
        factory: twice.as_ref(),
        db: GateId::G7.db(),
    };
    let r = soak(&env, &opts).unwrap();
    assert!(
        r.violations.iter().any(|v| v.contains("never enqueued")),
        "{:#?}",
        r.violations
    );
}

#[test]
fn the_gate_fails_a_double_with_the_case_in_evidence() {
    let e = engine();
    let b = bundle();
    let f = Double::ReapIgnoresLimit.factory(&b);
    let ctx = GateContext {
        seed: 1,
        histories: 64,
        batch: 0,
        ..common::gate_context(&e, &b, f.as_ref())
    };
    let mut out = emq::gates::GateOutcome::new(GateId::G7, "interleavings");
    let ended = g7_interleavings::check(&ctx, &mut out);
    out.judged(ended);
    assert_eq!(out.verdict, Verdict::Fail, "{:#?}", out.evidence);
    assert!(
        out.evidence
            .iter()
            .any(|l| l.text.contains("id: g7-regression-")),
        "{:#?}",
        out.evidence
    );
}

/// The Python connector (a child process, wire protocol v1), when provisioned.
#[test]
fn python_connector_agrees_with_the_model() {
    let Some(program) = common::python_connector() else {
        return;
    };
    let e = engine();
    let f =
        emq::connector::child::ChildFactory::new(emq::connector::child::ChildSpec::new([program
            .display()
            .to_string()]));
    let env = Env {
        engine: &e,
        factory: &f,
        db: GateId::G7.db(),
    };
    let report = runner::run(
        &env,
        &Options {
            histories: 64,
            seed: 0x6507,
            max_shrink_time: Duration::from_secs(60),
            max_shrink_iters: 512,
            regressions: regressions(),
        },
    )
    .unwrap();
    eprintln!(
        "python: {} histories, {} calls in {:.2} s: {:.1} histories/s, {:.0} calls/s",
        report.runs,
        report.calls,
        report.elapsed.as_secs_f64(),
        report.histories_per_s(),
        report.calls_per_s()
    );
    if let Some(f) = report.failure {
        panic!("the Python connector disagreed:\n{}", f.yaml);
    }
}

/// A failure that does not reproduce (one wrong reply in the connector's whole life) is a FAIL
/// that says so, with the original history whole on disk and in the record's figures.
#[test]
fn a_failure_that_does_not_reproduce_says_so_and_keeps_its_history() {
    let e = engine();
    let b = bundle();
    let f = emq::doubles::flaky::FlakyFactory::new(&b);
    let ctx = GateContext {
        seed: 7,
        histories: 64,
        batch: 0,
        ..common::gate_context(&e, &b, &f)
    };
    let gate = emq::gates::ALL.iter().find(|g| g.id == GateId::G7).unwrap();
    let out = run_gate(gate, &ctx);
    assert_eq!(out.verdict, Verdict::Fail, "{:#?}", out.evidence);
    let line = out
        .evidence
        .iter()
        .find(|l| l.severity == emq::gates::Severity::Fail)
        .map(|l| l.text.as_str())
        .unwrap();
    assert!(
        line.contains("did not reproduce on replay: 5 of 5 replays"),
        "{line}"
    );
    let kept = line
        .split("the original history is kept in ")
        .nth(1)
        .expect("the FAIL line names the file");
    let body: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(kept).unwrap()).unwrap();
    assert_eq!(body["replays_passed"], 5);
    assert_eq!(body["history"], out.figures["failure_original_history"]);
    assert!(
        body["history"]["calls"]
            .as_array()
            .is_some_and(|c| !c.is_empty())
    );
    let _ = std::fs::remove_file(kept);
}

/// A connector as slow as a busy machine makes one: every call waits `PER_CALL` first.
struct Slow(Box<dyn Connector + Send>);

/// Slow enough that an 80-call history outlasts the 750 ms short wait at time scale 1.
const PER_CALL: Duration = Duration::from_millis(25);

impl Connector for Slow {
    fn call(
        &mut self,
        request: &emq::connector::Request,
    ) -> Result<emq::connector::Reply, emq::error::ConnectorError> {
        std::thread::sleep(PER_CALL);
        self.0.call(request)
    }
}

fn slow(
    make: impl Fn() -> Result<Box<dyn Connector + Send>, HarnessError> + Send + Sync,
) -> impl Fn() -> Result<Box<dyn Connector + Send>, HarnessError> + Send + Sync {
    move || Ok(Box::new(Slow(make()?)) as Box<dyn Connector + Send>)
}

/// Draws `histories` histories from seed 0x6507 against `make`.
fn draw(make: &dyn ConnectorFactory, histories: u32) -> runner::Report {
    let e = engine();
    let env = Env {
        engine: &e,
        factory: make,
        db: GateId::G7.db(),
    };
    runner::run(
        &env,
        &Options {
            histories,
            seed: 0x6507,
            // Only whether it is caught matters here, not how small it shrinks.
            max_shrink_time: Duration::from_secs(2),
            max_shrink_iters: 8,
            regressions: Vec::new(),
        },
    )
    .unwrap()
}

/// A machine too slow for the short waits at scale 1 gets a verdict, not "too slow to judge":
/// the histories run again with their short waits scaled, and a correct connector agrees.
#[test]
fn a_slow_but_correct_connector_is_judged_at_a_larger_time_scale() {
    let b = bundle();
    let report = draw(&slow(reference(&b)), 24);
    eprintln!("slow reference: {:?}", report.clock);
    assert!(report.failure.is_none(), "{:?}", report.failure);
    assert!(report.clock.void_reruns > 0, "{:?}", report.clock);
    assert!(
        report.clock.scale > emq::suites::model::history::TimeScale::ONE,
        "{:?}",
        report.clock
    );
}

/// At a larger time scale the judgement stays exact to the millisecond: a slow connector that
/// rounds times up to whole seconds is still caught.
#[test]
fn a_slow_connector_that_rounds_time_is_still_caught() {
    let b = bundle();
    let report = draw(&slow(skewed_factory(&b, TimeSkew::RoundsUpToSeconds)), 48);
    eprintln!("slow rounding: {:?}", report.clock);
    assert!(report.clock.scale > emq::suites::model::history::TimeScale::ONE);
    let f = report.failure.expect("rounding to seconds was not caught");
    assert!(f.message.contains("keyspace differs"), "{}", f.message);
}
