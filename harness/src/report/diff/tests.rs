use super::*;
use crate::report::grid::tests::record;

fn side(name: &str, r: Record) -> Side {
    Side::record(name, r)
}

#[test]
fn the_same_record_twice_changes_nothing() {
    let a = record("echomq-python", "valkey", "9.1.2", false);
    let d = diff(&side("a.json", a.clone()), &side("b.json", a));
    assert!(!d.verdict_changed());
    assert_eq!(d.cells.len(), 1);
    assert!(d.cells[0].figures.is_empty());
    let t = d.text();
    assert!(
        t.ends_with("1 cell (rust×valkey-9.1) compared: 0 with a verdict changed, 0 figures moved (noise: a figure moved when one side is at least twice the other and they differ by 10 or more)\n"),
        "{t}"
    );
}

#[test]
fn a_failed_gate_names_the_gate_and_the_rules_it_judges() {
    let a = record("echomq-python", "valkey", "9.1.2", false);
    let b = record("echomq-python", "valkey", "9.1.2", true);
    let d = diff(&side("old.json", a), &side("new.json", b));
    assert!(d.verdict_changed());
    let c = &d.cells[0];
    assert_eq!((c.old.as_str(), c.new.as_str()), ("PASS 8/8", "FAIL 7/8"));
    assert_eq!(c.gates.len(), 1, "{:?}", c.gates);
    assert_eq!(c.gates[0].id, "G8 atomicity");
    assert_eq!(
        (c.gates[0].old, c.gates[0].new),
        (Some(Verdict::Pass), Some(Verdict::Fail))
    );
    // R1.2 is judged by G4 and G8: it fails with G8, and says so.
    let r12 = c
        .rules
        .iter()
        .find(|r| r.id == "R1.2")
        .expect("R1.2 changed");
    assert_eq!(r12.new, Some(Verdict::Fail));
    assert_eq!(r12.via, "G4; G8");
    // A rule no check of G8 names stays as it was.
    assert!(!c.rules.iter().any(|r| r.id == "R4.11"), "{:?}", c.rules);
    let t = d.text();
    assert!(t.contains("rust×valkey-9.1: PASS 8/8 → FAIL 7/8\n"), "{t}");
    assert!(t.contains("  gate G8 atomicity: PASS → FAIL\n"), "{t}");
    assert!(t.contains("  rule R1.2: PASS → FAIL (G4; G8)\n"), "{t}");
}

#[test]
fn a_case_that_fails_is_named_and_judges_its_rules_in_place_of_g6() {
    let a = record("echomq-python", "valkey", "9.1.2", false);
    let mut b = a.clone();
    let g6 = b.gates.iter_mut().find(|g| g.id == GateId::G6).unwrap();
    g6.verdict = Verdict::Fail;
    let case = g6
        .cases
        .iter_mut()
        .find(|c| c.id == "enqueue-first-id")
        .expect("the corpus has enqueue-first-id");
    case.verdict = Verdict::Fail;
    let d = diff(&side("a", a), &side("b", b));
    let c = &d.cells[0];
    assert_eq!(c.cases.len(), 1);
    assert_eq!(c.cases[0].id, "enqueue-first-id");
    let r13 = c
        .rules
        .iter()
        .find(|r| r.id == "R1.3")
        .expect("R1.3 changed");
    assert!(r13.via.starts_with("G6: enqueue-first-id"), "{}", r13.via);
    // R1.1's cases all passed: G6's failure elsewhere is not R1.1's.
    assert!(!c.rules.iter().any(|r| r.id == "R1.1"), "{:?}", c.rules);
}

#[test]
fn figures_move_only_beyond_the_noise() {
    assert!(beyond_noise(50_000.0, 20_000.0));
    assert!(!beyond_noise(50_000.0, 30_000.0), "a 40% swing is noise");
    assert!(!beyond_noise(4.0, 9.0), "under the floor");
    assert!(beyond_noise(0.0, 10.0));
    assert!(!beyond_noise(0.0, 0.0));
    let a = record("echomq-python", "valkey", "9.1.2", false);
    let mut b = a.clone();
    let g5 = b.volatile.figures.get_mut("G5").unwrap();
    let rate = g5["batch_ops_per_s"].as_f64().unwrap();
    g5.insert("batch_ops_per_s".into(), serde_json::json!(rate / 3.0));
    g5.insert(
        "probe_ms".into(),
        serde_json::json!(g5["probe_ms"].as_f64().unwrap() * 1.3),
    );
    let d = diff(&side("a", a), &side("b", b));
    assert!(!d.verdict_changed(), "a figure is not a verdict");
    let names: Vec<&str> = d.cells[0].figures.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["G5.batch_ops_per_s"]);
    assert!(
        d.text().contains("  figure G5.batch_ops_per_s: "),
        "{}",
        d.text()
    );
}

#[test]
fn each_side_says_its_contract_and_an_older_one_what_came_since() {
    let mut a = record("echomq-python", "valkey", "9.1.2", false);
    a.header.contract_version = None;
    a.header.catalogue_digest = None;
    let mut b = a.clone();
    b.header.contract_version = Some(2);
    let d = diff(&side("old.json", a), &side("new.json", b));
    assert_eq!(
        (d.old_contracts.clone(), d.new_contracts.clone()),
        (vec![1], vec![2])
    );
    let t = d.text();
    assert!(
        t.starts_with(
            "old: old.json (contract 1; unversioned: made before the contract had a version, taken as 1)\n\
             new: new.json (contract 2)\n\
             contract 1 → 2: rules added since (the old side was never judged on them): R5.13; \
             changed since: R3.1,"
        ),
        "{t}"
    );
}

#[test]
fn matrices_are_compared_cell_by_cell_and_a_missing_cell_is_a_change() {
    let m = crate::report::matrix::tests::sample();
    let cells = |m: &crate::report::matrix::Matrix| -> Vec<(String, Result<Record, String>)> {
        m.cells
            .iter()
            .map(|c| {
                (
                    crate::report::matrix::cell_key(&c.connector, &c.engine),
                    c.record
                        .clone()
                        .ok_or_else(|| c.error.clone().unwrap_or_default()),
                )
            })
            .collect()
    };
    let old = Side {
        name: "old/matrix.json".into(),
        cells: cells(&m),
        from_record: false,
    };
    let mut newer = m.clone();
    newer
        .cells
        .retain(|c| c.connector != "reference" || c.engine != "redis-7.0");
    let py = newer
        .cells
        .iter_mut()
        .find(|c| c.connector == "python" && c.engine == "valkey-9.1")
        .unwrap();
    py.record = None;
    py.error = Some("the connector did not start\nsecond line".into());
    let new = Side {
        name: "new/matrix.json".into(),
        cells: cells(&newer),
        from_record: false,
    };
    let d = diff(&old, &new);
    assert!(d.verdict_changed());
    let changed: Vec<(&str, &str, &str)> = d
        .cells
        .iter()
        .filter(|c| c.verdict_changed())
        .map(|c| (c.key.as_str(), c.old.as_str(), c.new.as_str()))
        .collect();
    assert_eq!(
        changed,
        [
            ("reference×redis-7.0", "PASS 8/8", "absent"),
            (
                "python×valkey-9.1",
                "PASS 8/8",
                "ERROR (no record: the connector did not start)"
            ),
        ]
    );
    assert!(
        !d.cells
            .iter()
            .any(|c| c.key == "python×redis-7.0" && c.verdict_changed())
    );
    // A cell gone or without a record is one line, not every gate, rule and case.
    let gone = d
        .cells
        .iter()
        .find(|c| c.key == "reference×redis-7.0")
        .unwrap();
    assert!(gone.gates.is_empty() && gone.rules.is_empty() && gone.cases.is_empty());
    let t = d.text();
    assert!(
        t.contains(
            "reference×redis-7.0: PASS 8/8 → absent\n\
             python×valkey-9.1: PASS 8/8 → ERROR (no record: the connector did not start)\n"
        ),
        "{t}"
    );
}

#[test]
fn a_record_against_a_matrix_is_compared_on_its_own_cell() {
    let m = crate::report::matrix::tests::sample();
    let matrix = Side {
        name: "matrix.json".into(),
        cells: m
            .cells
            .iter()
            .map(|c| {
                (
                    crate::report::matrix::cell_key(&c.connector, &c.engine),
                    Ok(c.record.clone().unwrap()),
                )
            })
            .collect(),
        from_record: false,
    };
    // The sample's python cells are records of connector `echomq-python` in language rust:
    // relabel this record so that it is the python×redis-7.0 cell, which FAILs in the matrix.
    let mut r = record("echomq-python", "redis", "7.0.15", false);
    r.header.connector_language = "python".into();
    let d = diff(&side("python.json", r), &matrix);
    assert_eq!(
        d.cells.len(),
        1,
        "{:?}",
        d.cells.iter().map(|c| &c.key).collect::<Vec<_>>()
    );
    assert_eq!(d.cells[0].key, "python×redis-7.0");
    assert_eq!(
        (d.cells[0].old.as_str(), d.cells[0].new.as_str()),
        ("PASS 8/8", "FAIL 7/8")
    );
}

/// Issue item 5: a record that broke only R5.13 (a FAIL line of G1 citing it) changes R5.13
/// alone, not every rule G1 judges (R3.1, R3.2, R3.4, R4.19 stay PASS).
#[test]
fn a_fail_line_changes_the_rule_it_cites_alone() {
    let a = record("echomq-python", "valkey", "9.1.2", false);
    let mut b = a.clone();
    b.gates[0].evidence.push(crate::gates::Evidence::new(
        crate::gates::Severity::Fail,
        "a connect of the connected session s left 1 of the 2 connections open (R5.13: a connect \
         of a connected session closes the old connections)",
    ));
    b.gates[0].verdict = Verdict::Fail;
    let d = diff(&side("old.json", a.clone()), &side("new.json", b));
    let c = &d.cells[0];
    let changed: Vec<&str> = c.rules.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(changed, ["R5.13"], "{:?}", c.rules);
    assert!(
        d.text().contains("  rule R5.13: PASS → FAIL (G1)\n"),
        "{}",
        d.text()
    );
    // A FAIL line naming no rule falls back to every rule of the gate.
    let mut b = a.clone();
    b.gates[0].evidence.push(crate::gates::Evidence::new(
        crate::gates::Severity::Fail,
        "the first connect on a fresh database failed (kind engine)",
    ));
    b.gates[0].verdict = Verdict::Fail;
    let d = diff(&side("old.json", a), &side("new.json", b));
    let changed: Vec<&str> = d.cells[0].rules.iter().map(|r| r.id.as_str()).collect();
    for id in ["R3.1", "R5.13"] {
        assert!(changed.contains(&id), "{id}: {changed:?}");
    }
}

/// A partial run (`--gates G2`): the gates left out are NOT RUN, and so are the rules only they
/// judge; a rule G2 judges keeps its verdict.
#[test]
fn a_partial_run_leaves_its_rules_not_run() {
    let a = record("echomq-python", "valkey", "9.1.2", false);
    let mut b = a.clone();
    for g in &mut b.gates {
        if g.id != GateId::G2 {
            g.verdict = Verdict::NotRun;
        }
    }
    let rules = rules(Some(&b));
    let g2 = CATALOGUE
        .iter()
        .find(|r| r.judged_by() == [GateId::G2])
        .expect("a rule of G2 alone");
    assert_eq!(rules[&g2.id.to_string()].0, Verdict::Pass);
    let g8 = CATALOGUE
        .iter()
        .find(|r| r.judged_by() == [GateId::G8])
        .expect("a rule of G8 alone");
    assert_eq!(
        rules[&g8.id.to_string()],
        (Verdict::NotRun, "G8".to_string())
    );
    let d = diff(&side("a.json", a), &side("b.json", b));
    assert!(
        d.text()
            .contains(&format!("  rule {}: PASS → NOT RUN", g8.id)),
        "{}",
        d.text()
    );
}
