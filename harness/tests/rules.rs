//! The harness certifies itself: the rule catalogue (`emq::gates::rules`) is in step with
//! `bundle/SPEC.md`, every breakable rule has a double, and the kill matrix runs each double
//! through each gate its rule names and requires FAIL there. A rule without a killing double
//! fails this test.
//!
//! Each (double, gate) pair is judged live once per CI run, where its gate's self-test lives
//! (`tests/gates.rs`, `tests/case_doubles.rs`, `tests/interleavings.rs`); this file checks that
//! every pair is covered there and judges the child fixtures, which nothing else runs: G6 on the
//! rule's own cases, G7 on a short run of histories, the other gates whole.

mod common;

use std::collections::{BTreeSet, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use emq::connector::ConnectorFactory;
use emq::connector::child::{ChildFactory, ChildSpec};
use emq::doubles::{Double, TABLE};
use emq::engine::Engine;
use emq::gates::GateId;
use emq::gates::rules::{CATALOGUE, Rule, spec_ids};
use emq::gates::{GateContext, Verdict};
use emq::protocol::bundle::Bundle;
use emq::suites::cases::format::{Case, default_dir, load_dir};
use emq::suites::cases::runner::{Mode, run_case};

const SPEC: &str = include_str!("../../bundle/SPEC.md");

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// Every must of SPEC is a rule: a sentence that says *must* or *never* declares or cites an id
/// (and every id is in the catalogue, with a check and a double or a reason: the tests below).
#[test]
fn every_must_in_spec_has_a_rule() {
    let loose = emq::gates::rules::musts_without_rule(SPEC);
    assert!(
        loose.is_empty(),
        "SPEC says must/never without a rule id here (give it an id with a check and a double, or \
         cite the rule it restates):\n{}",
        loose.join("\n---\n")
    );
}

/// Every rule lists its ways to break it (two at least for a breakable rule), and each way names
/// the doubles or fixtures that take it, or the reason none does; every double a way names is a
/// double of the table and every fixture a file.
#[test]
fn every_way_has_a_double_or_a_reason() {
    let loose = emq::gates::rules::ways::loose(&CATALOGUE);
    assert!(
        loose.is_empty(),
        "ways without a double or a reason:\n{}",
        loose.join("\n")
    );
    let tabled: HashSet<Double> = TABLE.iter().map(|e| e.double).collect();
    for r in CATALOGUE.iter() {
        for w in r.ways {
            for d in w.doubles {
                assert!(
                    tabled.contains(d),
                    "{} {}: {d:?} is no double of the table",
                    r.id,
                    w.how.as_str()
                );
            }
            for f in w.fixtures {
                assert!(
                    fixture(f).is_file(),
                    "{} {}: no fixture {f}",
                    r.id,
                    w.how.as_str()
                );
            }
        }
    }
}

/// Every trigger a rule's SPEC text lists has a way, mechanically: for each rule of
/// `emq::gates::rules::triggers::TRIGGERS`, each word is in the rule's SPEC text and some way of
/// the rule names it (a double takes it, or a reason says why none needs to).
#[test]
fn every_trigger_a_rule_lists_has_a_way() {
    let gaps = emq::gates::rules::triggers::gaps(SPEC, &CATALOGUE);
    assert!(
        gaps.is_empty(),
        "triggers without a way, or not in SPEC:\n{}",
        gaps.join("\n")
    );
}

/// SPEC §6's list of the ways each gate judges is the catalogue's (`EMQ_BLESS=1` rewrites it).
#[test]
fn spec_lists_the_ways_each_gate_judges_as_the_catalogue_does() {
    use emq::gates::rules::ways::{spec_copy, spec_section, with_spec_copy};
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../bundle/SPEC.md");
    let spec = std::fs::read_to_string(&path).unwrap();
    let want = spec_section();
    let got = spec_copy(&spec).expect("SPEC §6 has the generated list's markers");
    if emq::settings::bless() {
        std::fs::write(&path, with_spec_copy(&spec, &want).unwrap()).unwrap();
        return;
    }
    assert_eq!(
        got,
        want.trim_matches('\n'),
        "SPEC §6's ways per gate differ from the catalogue's: EMQ_BLESS=1 to rewrite them"
    );
}

#[test]
fn catalogue_and_spec_name_the_same_rules() {
    let in_spec = spec_ids(SPEC);
    let in_catalogue: Vec<String> = CATALOGUE.iter().map(|r| r.id.to_string()).collect();
    let spec_set: BTreeSet<&String> = in_spec.iter().collect();
    let cat_set: BTreeSet<&String> = in_catalogue.iter().collect();
    let missing: Vec<_> = spec_set.difference(&cat_set).collect();
    let extra: Vec<_> = cat_set.difference(&spec_set).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "SPEC ids not in the catalogue: {missing:?}; catalogue ids not in SPEC: {extra:?}"
    );
    assert_eq!(
        in_catalogue.len(),
        cat_set.len(),
        "an id appears twice in the catalogue"
    );
    assert_eq!(in_spec, in_catalogue, "the catalogue keeps SPEC's order");
}

#[test]
fn catalogue_names_real_cases_doubles_and_gates() {
    let cases = load_dir(&default_dir()).unwrap();
    let ids: BTreeSet<&str> = cases.iter().map(|c| c.id.as_str()).collect();
    let mut named = HashSet::new();
    for r in CATALOGUE.iter() {
        for c in r.cases {
            assert!(ids.contains(c), "{}: no case {c}", r.id);
        }
        assert!(!r.checks.is_empty(), "{}: name the checks", r.id);
        if r.breakable() {
            assert!(
                !r.breakers().is_empty() && !r.gates.is_empty(),
                "{}: a breakable rule needs a double and the gates that kill it",
                r.id
            );
            if r.gates.contains(&GateId::G6) {
                assert!(!r.cases.is_empty(), "{}: G6 kills it, so name cases", r.id);
            }
        } else {
            assert!(
                r.breakers().is_empty() && r.gates.is_empty(),
                "{}: an unbreakable rule names no double",
                r.id
            );
        }
        for file in r.fixtures() {
            assert!(fixture(file).is_file(), "{}: no fixture {file}", r.id);
        }
        named.extend(r.doubles());
    }
    for e in TABLE {
        assert!(
            named.contains(&e.double),
            "{:?} breaks no rule of the catalogue",
            e.double
        );
    }
}

fn python() -> String {
    emq::settings::python_connector()
        .map(|p| p.display().to_string())
        .expect(
            "the wire-rule doubles forward to the Python connector: run ci/provision and set \
             EMQ_PYTHON_CONNECTOR (set -a; . ~/.cache/emq/env; set +a)",
        )
}

/// What breaks a rule: a double, or a child fixture under `harness/tests/fixtures/`.
#[derive(Clone, Copy)]
enum Breaker {
    Double(Double),
    Fixture(&'static str),
}

impl Breaker {
    fn all_of(rule: &Rule) -> Vec<Breaker> {
        rule.doubles()
            .into_iter()
            .map(Breaker::Double)
            .chain(rule.fixtures().into_iter().map(Breaker::Fixture))
            .collect()
    }

    fn name(self) -> String {
        match self {
            Breaker::Double(d) => format!("{d:?}"),
            Breaker::Fixture(f) => format!("fixture:{f}"),
        }
    }
}

fn factory(breaker: Breaker, bundle: &Arc<Bundle>) -> Box<dyn ConnectorFactory> {
    match breaker {
        Breaker::Fixture(file) => {
            let spec = ChildSpec::new(["python3".to_string(), fixture(file).display().to_string()])
                .with_env("EMQ_PYTHON_CONNECTOR", python())
                .with_timeout(Duration::from_secs(2));
            Box::new(ChildFactory::new(spec))
        }
        Breaker::Double(d) => d.factory(bundle),
    }
}

/// Runs `case` against a fresh connector of `make` in database `db`: true when it fails.
fn case_fails(case: &Case, engine: &Engine, db: u32, make: &dyn ConnectorFactory) -> bool {
    let mut c = make.make().unwrap();
    run_case(case, engine, db, c.as_mut(), Mode::Check)
        .failure
        .is_some()
}

/// The verdict of gate `gate` on double `name`, in words; `None` when it FAILs as it must.
fn survives(
    rule: &Rule,
    breaker: Breaker,
    gate: GateId,
    engine: &Engine,
    bundle: &Arc<Bundle>,
    cases: &[Case],
) -> Option<String> {
    let name = breaker.name();
    let make = factory(breaker, bundle);
    if gate == GateId::G6 {
        let caught: Vec<&str> = rule
            .cases
            .iter()
            .enumerate()
            .filter(|(i, id)| {
                let case = cases.iter().find(|c| c.id == **id).unwrap();
                case_fails(case, engine, 1 + *i as u32, make.as_ref())
            })
            .map(|(_, id)| *id)
            .collect();
        eprintln!("{} {name} G6: fails {caught:?}", rule.id);
        return caught
            .is_empty()
            .then(|| format!("passes every case of {:?}", rule.cases));
    }
    let ctx = GateContext {
        histories: 100,
        ..common::gate_context(engine, bundle, make.as_ref())
    };
    let out = common::run(&ctx, gate);
    eprintln!("{} {name} {gate}: {}", rule.id, out.verdict);
    (out.verdict != Verdict::Fail).then(|| {
        format!(
            "{gate} says {}\n    {}",
            out.verdict,
            out.evidence
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\n    ")
        )
    })
}

/// Where a double's FAIL at a gate is judged live, once per CI run: the gate self-tests for
/// G1–G5 and G8 (`tests/gates.rs`, `<double>_fails_<gate>`, on a cluster for §8 doubles, with
/// `<double>_passes_every_gate_on_one_engine`), `tests/case_doubles.rs` for G6 (the double fails
/// exactly the cases of its reviewed list) and `tests/interleavings.rs` for G7. The kill matrix
/// judged the same pairs a second time; now it proves they are covered there (pure) and judges
/// live only what nothing else runs: the child fixtures.
fn covered_elsewhere(rule: &Rule, d: Double, gate: GateId) -> Result<(), String> {
    let name = format!("{d:?}");
    if !emq::gates::rules::gates_failing(d).contains(&gate) {
        return Err(format!(
            "{} {name} at {gate}: gates_failing does not name it",
            rule.id
        ));
    }
    match gate {
        GateId::G6 => {
            let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("tests/case_doubles")
                .join(format!("{name}.txt"));
            let listed = std::fs::read_to_string(&path)
                .map_err(|e| format!("{} {name} at G6: {}: {e}", rule.id, path.display()))?;
            let fails: BTreeSet<&str> = listed.lines().map(str::trim).collect();
            if rule.cases.iter().any(|c| fails.contains(c)) {
                Ok(())
            } else {
                Err(format!(
                    "{} {name} at G6: it fails none of the rule's cases {:?} ({} lists what it fails)",
                    rule.id,
                    rule.cases,
                    path.display()
                ))
            }
        }
        GateId::G7 => {
            let src = include_str!("interleavings.rs");
            if src.contains(&format!("caught(Double::{name})"))
                || src.contains(&format!("time_caught(TimeSkew::{name})"))
            {
                Ok(())
            } else {
                Err(format!(
                    "{} {name} at G7: no test in tests/interleavings.rs",
                    rule.id
                ))
            }
        }
        // tests/gates.rs generates one trial per gate of gates_failing (checked above).
        _ => Ok(()),
    }
}

/// Every breakable rule has a breaker, and each of its doubles FAILs each gate the rule names
/// (judged where [`covered_elsewhere`] says); each child fixture FAILs them here, live.
#[test]
fn kill_matrix() {
    let engine = common::binary_engine();
    let bundle = Arc::new(Bundle::load_default().unwrap());
    let cases = load_dir(&default_dir()).unwrap();
    // EMQ_RULES=R4.11,R5.4 narrows the run while working on a rule.
    let only = emq::settings::var(emq::settings::RULES).unwrap_or_default();
    let mut survivors = Vec::new();
    let (mut killed, mut elsewhere) = (0, 0);
    for rule in CATALOGUE
        .iter()
        .filter(|r| r.breakable() && !r.on_cluster())
    {
        if !only.is_empty() && !only.split(',').any(|o| o == rule.id.to_string()) {
            continue;
        }
        let breakers = Breaker::all_of(rule);
        if breakers.is_empty() {
            survivors.push(format!("{}: no double breaks it", rule.id));
        }
        for breaker in breakers {
            for &gate in rule.gates {
                if let Breaker::Double(d) = breaker {
                    match covered_elsewhere(rule, d, gate) {
                        Ok(()) => elsewhere += 1,
                        Err(why) => survivors.push(why),
                    }
                    continue;
                }
                match survives(rule, breaker, gate, &engine, &bundle, &cases) {
                    None => killed += 1,
                    Some(why) => {
                        survivors.push(format!("{} {} at {gate}: {why}", rule.id, breaker.name()))
                    }
                }
            }
        }
    }
    eprintln!(
        "kill matrix: {killed} fixture kills here, {elsewhere} double kills judged elsewhere"
    );
    assert!(
        survivors.is_empty(),
        "doubles the gate did not kill:\n{}",
        survivors.join("\n")
    );
}

/// The cluster rules (SPEC §8): each double FAILs its gates on a cluster and PASSes them on a
/// single engine, where it is the reference connector (it breaks §8 and nothing else): both are
/// `tests/gates.rs` trials; a §8 rule naming a gate those trials do not run would be judged here.
#[test]
fn cluster_kill_matrix() {
    let mut wrong = Vec::new();
    let mut covered = 0;
    for rule in CATALOGUE.iter().filter(|r| r.breakable() && r.on_cluster()) {
        let breakers = Breaker::all_of(rule);
        assert!(!breakers.is_empty(), "{}: no double breaks it", rule.id);
        for breaker in breakers {
            let Breaker::Double(d) = breaker else {
                wrong.push(format!(
                    "{} {}: a child fixture on a cluster is not judged anywhere; add it here",
                    rule.id,
                    breaker.name()
                ));
                continue;
            };
            assert!(emq::gates::rules::is_cluster_double(d), "{d:?}");
            for &gate in rule.gates {
                if matches!(gate, GateId::G6 | GateId::G7) {
                    wrong.push(format!(
                        "{} {d:?} at {gate} on a cluster: tests/gates.rs does not run {gate}; \
                         judge it here",
                        rule.id
                    ));
                    continue;
                }
                match covered_elsewhere(rule, d, gate) {
                    Ok(()) => covered += 1,
                    Err(why) => wrong.push(why),
                }
            }
        }
    }
    eprintln!("cluster kill matrix: {covered} kills judged by tests/gates.rs");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
