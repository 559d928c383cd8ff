//! G6 is only as good as the cases that catch a broken connector. Each double G6 must fail (by
//! its rules or its table entry, `emq::gates::rules::gates_failing`) must fail exactly the cases listed in `tests/case_doubles/<double>.txt` — a
//! reviewed snapshot (`EMQ_BLESS=1` rewrites it) — and, where one verb is broken, every case it
//! fails must exercise that verb.

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;

use emq::doubles::{Double, TABLE};
use emq::protocol::bundle::Bundle;
use emq::suites::cases::format::{default_dir, load_dir};
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
        let make = b.factory(&bundle);
        let mut failed = BTreeSet::new();
        for (i, case) in cases.iter().enumerate() {
            let mut c = make.make().unwrap();
            if run_case(case, &engine, 1 + i as u32, c.as_mut(), Mode::Check)
                .failure
                .is_some()
            {
                failed.insert(case.id.clone());
            }
        }
        let name = format!("{b:?}");
        assert!(!failed.is_empty(), "{name}: no case catches it");
        for id in &failed {
            let case = cases.iter().find(|c| &c.id == id).unwrap();
            let Some(broken) = verb_of(b) else { continue };
            let uses = case.steps.iter().any(|s| {
                matches!(&s.action, emq::suites::cases::format::Action::Call { verb, .. } if verb == broken)
            });
            assert!(uses, "{name} failed {id}, which never calls {broken}");
        }
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("tests/case_doubles/{name}.txt"));
        let got: String = failed.iter().map(|id| format!("{id}\n")).collect();
        if bless {
            std::fs::write(&path, &got).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&path).unwrap_or_default();
        if want != got {
            problems.push(format!(
                "{name}:\n{}",
                similar::TextDiff::from_lines(&want, &got)
                    .unified_diff()
                    .header("expected", "actual")
            ));
        }
        eprintln!("{name}: {} of {} cases fail", failed.len(), cases.len());
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
    use emq::doubles::time::{TimeSkew, factory};
    use emq::suites::cases::format::Action;
    let engine = common::binary_engine();
    let bundle = Arc::new(Bundle::load_default().unwrap());
    let cases = load_dir(&default_dir()).unwrap();
    let bless = emq::settings::bless();
    let mut problems = Vec::new();
    for skew in TimeSkew::ALL {
        let name = format!("{skew:?}");
        let make = factory(&bundle, skew);
        let mut failed = std::collections::BTreeMap::new();
        for (i, case) in cases.iter().enumerate() {
            let mut c = make().unwrap();
            if let Some(f) = run_case(case, &engine, 1 + i as u32, c.as_mut(), Mode::Check).failure
            {
                failed.insert(case.id.clone(), f.to_string());
            }
        }
        assert!(!failed.is_empty(), "{name}: no case catches it");
        for id in failed.keys() {
            let case = cases.iter().find(|c| &c.id == id).unwrap();
            let uses = case.steps.iter().any(|s| {
                matches!(&s.action, Action::Call { verb, .. } if skew.verbs().contains(&verb.as_str()))
            });
            assert!(
                uses,
                "{name} failed {id}, which never calls {:?}",
                skew.verbs()
            );
        }
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
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("tests/case_doubles/{name}.txt"));
        let got: String = failed.keys().map(|id| format!("{id}\n")).collect();
        if bless {
            std::fs::write(&path, &got).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&path).unwrap_or_default();
        if want != got {
            problems.push(format!(
                "{name}:\n{}",
                similar::TextDiff::from_lines(&want, &got)
                    .unified_diff()
                    .header("expected", "actual")
            ));
        }
        eprintln!("{name}: {} of {} cases fail", failed.len(), cases.len());
    }
    assert!(
        problems.is_empty(),
        "EMQ_BLESS=1 to accept:\n{}",
        problems.join("\n")
    );
}
