//! G6 is only as good as the cases that catch a broken connector. Each double G6 must fail (by
//! its rules or its table entry, `emq::gates::rules::gates_failing`) must fail exactly the cases listed in `tests/case_doubles/<double>.txt` — a
//! reviewed snapshot (`EMQ_BLESS=1` rewrites it) — and, where one verb is broken, every case it
//! fails must exercise that verb.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use emq::connector::Connector;
use emq::doubles::{Double, TABLE};
use emq::protocol::bundle::Bundle;
use emq::suites::cases::format::{Action, Case, default_dir, load_dir};
use emq::suites::cases::runner::{Mode, run_case};

/// The one verb a double breaks, when it breaks one.
fn verb_of(d: Double) -> Option<&'static str> {
    match d {
        Double::RetryIgnoresMaxAttempts => Some("retry"),
        Double::ReapIgnoresLimit | Double::ReapCapsAt100 => Some("reap"),
        Double::PromoteCapsAt100 => Some("promote"),
        Double::BrowseCapsAt1000 => Some("browse"),
        Double::CompleteIgnoresToken => Some("complete"),
        Double::ShortBatch => Some("batch"),
        Double::EnqueueTwice => Some("enqueue"),
        _ => None,
    }
}

#[test]
fn each_double_fails_exactly_its_cases() {
    let engine = common::binary_engine();
    let bundle = Arc::new(Bundle::load_default().unwrap());
    let cases = load_dir(&default_dir()).unwrap();
    let bless = emq::settings::bless();
    let mut problems = Vec::new();
    for b in TABLE
        .iter()
        .map(|e| e.double)
        .filter(|d| emq::gates::rules::gates_failing(*d).contains(&emq::gates::GateId::G6))
    {
        let name = format!("{b:?}");
        let make = b.factory(&bundle);
        let failed = failures(&name, &engine, &cases, || make.make().unwrap());
        if let Some(broken) = verb_of(b) {
            assert_each_calls(&name, &cases, &failed, &[broken]);
        }
        problems.extend(snapshot(&name, &failed, bless));
    }
    assert!(
        problems.is_empty(),
        "EMQ_BLESS=1 to accept:\n{}",
        problems.join("\n")
    );
}

/// Each time double (`emq::doubles::time`) fails exactly the cases of its list, each calling a verb
/// whose time it skews, and is caught by an exact score: some failure names the writing step, its
/// engine-time bracket, the interval wanted and the score found.
#[test]
fn each_time_double_fails_exactly_its_cases() {
    use emq::doubles::{build::skewed_factory, time::TimeSkew};
    let engine = common::binary_engine();
    let bundle = Arc::new(Bundle::load_default().unwrap());
    let cases = load_dir(&default_dir()).unwrap();
    let bless = emq::settings::bless();
    let mut problems = Vec::new();
    for skew in TimeSkew::ALL {
        let name = format!("{skew:?}");
        let make = skewed_factory(&bundle, skew);
        let failed = failures(&name, &engine, &cases, || make().unwrap());
        assert_each_calls(&name, &cases, &failed, skew.verbs());
        let evidence = failed.values().find(|m| {
            let first = m.lines().next().unwrap_or_default();
            [
                "keyspace differs",
                ": score ",
                "ran at engine ms [",
                " ms wide), so $now",
                "wants [",
            ]
            .iter()
            .all(|part| first.contains(part))
        });
        let Some(evidence) = evidence else {
            panic!("{name}: no failure names the bracket and the score: {failed:#?}");
        };
        eprintln!("{name}, e.g.: {}", evidence.lines().next().unwrap());
        problems.extend(snapshot(&name, &failed, bless));
    }
    assert!(
        problems.is_empty(),
        "EMQ_BLESS=1 to accept:\n{}",
        problems.join("\n")
    );
}

/// Each case a connector of `make` fails, by id, with its failure (at least one: the double
/// `name` is caught).
fn failures(
    name: &str,
    engine: &emq::engine::Engine,
    cases: &[Case],
    make: impl Fn() -> Box<dyn Connector + Send>,
) -> BTreeMap<String, String> {
    let mut failed = BTreeMap::new();
    for (i, case) in cases.iter().enumerate() {
        let mut c = make();
        if let Some(f) = run_case(case, engine, 1 + i as u32, c.as_mut(), Mode::Check).failure {
            failed.insert(case.id.clone(), f.to_string());
        }
    }
    assert!(!failed.is_empty(), "{name}: no case catches it");
    eprintln!("{name}: {} of {} cases fail", failed.len(), cases.len());
    failed
}

/// Each failed case calls one of `verbs`, the verbs the double breaks.
fn assert_each_calls(
    name: &str,
    cases: &[Case],
    failed: &BTreeMap<String, String>,
    verbs: &[&str],
) {
    for id in failed.keys() {
        let case = cases.iter().find(|c| &c.id == id).unwrap();
        let uses = case.steps.iter().any(
            |s| matches!(&s.action, Action::Call { verb, .. } if verbs.contains(&verb.as_str())),
        );
        assert!(uses, "{name} failed {id}, which never calls {verbs:?}");
    }
}

/// The failed ids against the reviewed snapshot `tests/case_doubles/<name>.txt` (rewritten under
/// `bless`): the diff, if they differ.
fn snapshot(name: &str, failed: &BTreeMap<String, String>, bless: bool) -> Option<String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("tests/case_doubles/{name}.txt"));
    let got: String = failed.keys().map(|id| format!("{id}\n")).collect();
    if bless {
        std::fs::write(&path, &got).unwrap();
        return None;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    (want != got).then(|| {
        format!(
            "{name}:\n{}",
            similar::TextDiff::from_lines(&want, &got)
                .unified_diff()
                .header("expected", "actual")
        )
    })
}
