//! Engine-free tests of the baseline: its file format and errors, and what it makes of a record.

use super::*;
use crate::gates::rules::CATALOGUE;
use crate::report::grid::tests::record;

fn parse(text: &str) -> Result<Baseline, HarnessError> {
    Baseline::parse("b.yaml", text)
}

fn error(text: &str) -> String {
    let e = parse(text).unwrap_err();
    assert_eq!(e.exit_code(), ExitCode::BadInput, "{e}");
    let s = e.to_string();
    assert_eq!(s.lines().count(), 1, "one line: {s}");
    s
}

/// The committed reference record (PASS 8/8) with `fail` FAILed.
fn failing(fail: &[GateId]) -> Record {
    let mut r = record("echomq-rust-reference", "valkey", "9.1.2", false);
    for g in &mut r.gates {
        if fail.contains(&g.id) {
            g.verdict = Verdict::Fail;
        }
    }
    r.footer.passed = 8 - fail.len();
    r.footer.summary = format!("{} {}/8", r.verdict(), r.footer.passed);
    r
}

/// A rule judged by G6 (its own cases) and by no other gate, and one of its cases.
fn case_rule() -> (&'static crate::gates::rules::Rule, &'static str) {
    let rule = CATALOGUE
        .iter()
        .find(|r| r.judged_by() == [GateId::G6] && !r.cases.is_empty())
        .expect("a rule judged by G6 alone");
    (rule, rule.cases[0])
}

#[test]
fn a_baseline_names_gates_and_rules_with_their_lines() {
    let b = parse(
        "# known failures\nexpected:\n  - id: G5\n    reason: INCRBY in the probe\n  - id: r1.2\n    reason: untagged\n",
    )
    .unwrap();
    assert_eq!(b.file, "b.yaml");
    assert_eq!(
        b.entries,
        [
            Entry {
                target: Target::Gate(GateId::G5),
                reason: "INCRBY in the probe".into(),
                line: 3,
            },
            Entry {
                target: Target::Rule(RuleId::new(1, 2)),
                reason: "untagged".into(),
                line: 5,
            },
        ]
    );
    assert!(parse("# nothing known\n\n").unwrap().entries.is_empty());
    assert!(parse("expected: []\n").unwrap().entries.is_empty());
}

#[test]
fn a_bad_baseline_is_one_line_naming_file_and_line() {
    assert_eq!(
        error("expected:\n  - id: G5\n    reason: x\n  - id: G9\n    reason: y\n"),
        "bad input: b.yaml:4:9: unknown gate or rule id \"G9\": a gate is G1 to G8, a rule is \
         one `emq-gate rules` lists"
    );
    assert!(
        error("expected:\n  - id: R99.1\n    reason: y\n")
            .starts_with("bad input: b.yaml:2:9: unknown gate or rule id \"R99.1\""),
    );
    assert_eq!(
        error("expected:\n  - id: G5\n    reason: \"  \"\n"),
        "bad input: b.yaml:3:13: the entry for G5 gives no reason: say why it is expected to fail"
    );
    assert_eq!(
        error("expected:\n  - id: G5\n    reason: a\n  - id: g5\n    reason: b\n"),
        "bad input: b.yaml:4:9: G5 is listed twice (first at line 2)"
    );
    let missing = error("expected:\n  - id: G5\n");
    assert!(missing.starts_with("bad input: b.yaml:2:"), "{missing}");
    assert!(missing.contains("reason"), "{missing}");
    let unknown = error("expected:\n  - id: G5\n    reason: a\n    why: b\n");
    assert!(unknown.starts_with("bad input: b.yaml:"), "{unknown}");
    assert!(unknown.contains("why"), "{unknown}");
    let missing_file = Baseline::load(Path::new("/nonexistent/b.yaml")).unwrap_err();
    assert_eq!(
        missing_file.to_string(),
        "bad input: --baseline /nonexistent/b.yaml: no such file"
    );
    assert_eq!(missing_file.exit_code(), ExitCode::BadInput);
}

#[test]
fn an_expected_failure_exits_5_and_the_headline_stays_fail() {
    let r = failing(&[GateId::G8]);
    let b = parse("expected:\n  - id: G8\n    reason: loses a job on a crash\n").unwrap();
    let o = b.account(&r, None);
    assert!(o.new_failures.is_empty());
    assert_eq!(o.expecting(GateId::G8).unwrap()[0].line, 2);
    assert_eq!(o.exit_code(&r, None), ExitCode::ExpectedFailures);
    assert_eq!(ExitCode::ExpectedFailures as u8, 5);
    assert_eq!(
        o.headline(&r.footer.summary),
        "FAIL 7/8 (1 of 1 failure expected by b.yaml)"
    );
    assert!(o.lines().is_empty(), "{:?}", o.lines());
}

#[test]
fn a_listed_gate_that_passed_is_an_unexpected_pass() {
    let r = failing(&[GateId::G8]);
    let b = parse(
        "expected:\n  - id: G8\n    reason: loses a job\n  - id: G2\n    reason: foreign scripts\n",
    )
    .unwrap();
    let o = b.account(&r, None);
    assert_eq!(o.unexpected_passes.len(), 1);
    assert_eq!(
        o.lines(),
        [
            "unexpected pass: G2 passed, but b.yaml:4 expects it to fail (foreign scripts): \
          remove the entry"
        ]
    );
    // The connector got better: that alone changes no exit code.
    assert_eq!(o.exit_code(&r, None), ExitCode::ExpectedFailures);
    let clean = failing(&[]);
    let o = b.account(&clean, None);
    assert_eq!(o.unexpected_passes.len(), 2);
    assert_eq!(o.exit_code(&clean, None), ExitCode::Pass);
    assert_eq!(
        o.headline(&clean.footer.summary),
        "PASS 8/8 (nothing failed; baseline b.yaml)"
    );
}

#[test]
fn a_failure_no_entry_names_is_new_and_exits_1() {
    let r = failing(&[GateId::G5, GateId::G8]);
    let b = parse("expected:\n  - id: G8\n    reason: loses a job\n").unwrap();
    let o = b.account(&r, None);
    assert_eq!(o.new_failures, [GateId::G5]);
    assert_eq!(o.exit_code(&r, None), ExitCode::GateFailed);
    assert_eq!(
        o.headline("FAIL 6/8"),
        "FAIL 6/8 (1 of 2 failures expected by b.yaml)"
    );
    assert_eq!(
        o.headline("FAIL 0/2 (6 not run)"),
        "FAIL 0/2 (6 not run; 1 of 2 failures expected by b.yaml)"
    );
    assert_eq!(
        o.lines(),
        ["new failure: G5 (no entry of b.yaml expects it)"]
    );
}

#[test]
fn a_rule_expects_the_gates_that_judge_it_and_passes_when_they_pass() {
    // R1.2 is judged by G4 and G8: a G8 failure is its failure.
    let r = failing(&[GateId::G8]);
    let b = parse("expected:\n  - id: R1.2\n    reason: untagged root\n").unwrap();
    let o = b.account(&r, None);
    assert_eq!(o.expecting(GateId::G8).unwrap()[0].id, "R1.2");
    assert!(o.unexpected_passes.is_empty());
    let clean = failing(&[]);
    let o = b.account(&clean, None);
    assert_eq!(o.unexpected_passes[0].id, "R1.2");
    // A cluster rule passes only on a cluster: on one engine its gates say nothing of it.
    let cluster = CATALOGUE.iter().find(|r| r.on_cluster()).unwrap();
    let b = parse(&format!(
        "expected:\n  - id: {}\n    reason: no redirects\n",
        cluster.id
    ))
    .unwrap();
    assert!(b.account(&clean, None).unexpected_passes.is_empty());
    let mut on_cluster = clean.clone();
    on_cluster.header.engine_kind = "cluster".into();
    assert_eq!(b.account(&on_cluster, None).unexpected_passes.len(), 1);
}

#[test]
fn a_g6_rule_expects_only_its_own_cases() {
    let (rule, case) = case_rule();
    let other = CATALOGUE
        .iter()
        .flat_map(|r| r.cases.iter())
        .find(|c| !rule.cases.contains(c))
        .unwrap();
    let mut r = failing(&[GateId::G6]);
    let g6 = r.gates.iter_mut().find(|g| g.id == GateId::G6).unwrap();
    g6.cases = vec![
        crate::report::CaseVerdict {
            id: case.to_string(),
            verdict: Verdict::Fail,
            message: None,
        },
        crate::report::CaseVerdict {
            id: (*other).to_string(),
            verdict: Verdict::Pass,
            message: None,
        },
    ];
    let b = parse(&format!(
        "expected:\n  - id: {}\n    reason: lenient\n",
        rule.id
    ))
    .unwrap();
    let o = b.account(&r, None);
    assert_eq!(o.expected.len(), 1, "{o:?}");
    assert_eq!(o.exit_code(&r, None), ExitCode::ExpectedFailures);
    // Another case failing too is new, and named.
    r.gates[5].cases[1].verdict = Verdict::Fail;
    let o = b.account(&r, None);
    assert_eq!(o.new_failures, [GateId::G6]);
    assert_eq!(o.new_cases, [(*other).to_string()]);
    assert_eq!(
        o.lines(),
        [format!(
            "new failure: G6, cases no entry of b.yaml expects: {other}"
        )]
    );
    // Listing G6 itself expects every case.
    let b = parse("expected:\n  - id: G6\n    reason: all of them\n").unwrap();
    assert!(b.account(&r, None).new_failures.is_empty());
}

#[test]
fn only_the_judged_gates_count() {
    // A rerun of G8 alone: the others are NOT RUN, and no failure of this run.
    let mut r = failing(&[GateId::G8]);
    for g in &mut r.gates {
        if g.id != GateId::G8 {
            g.verdict = Verdict::NotRun;
        }
    }
    let b =
        parse("expected:\n  - id: G8\n    reason: loses a job\n  - id: G2\n    reason: foreign\n")
            .unwrap();
    let scope = [GateId::G8];
    let o = b.account(&r, Some(&scope));
    assert!(o.unexpected_passes.is_empty(), "G2 was not judged");
    assert_eq!(o.exit_code(&r, Some(&scope)), ExitCode::ExpectedFailures);
    // Gates not run are no ERROR: the whole run exits on what it ran.
    assert_eq!(
        b.account(&r, None).exit_code(&r, None),
        ExitCode::ExpectedFailures
    );
    // The whole run, with gates not judged (ERROR): no verdict, though the failure was expected.
    for g in &mut r.gates {
        if g.id != GateId::G8 {
            g.verdict = Verdict::Error;
        }
    }
    assert_eq!(b.account(&r, None).exit_code(&r, None), ExitCode::NoVerdict);
}

#[test]
fn the_outcome_is_optional_in_a_record() {
    let mut r = failing(&[GateId::G8]);
    assert!(r.baseline.is_none());
    let json = serde_json::to_value(&r).unwrap();
    assert!(json.get("baseline").is_none(), "absent without a baseline");
    let b = parse("expected:\n  - id: G8\n    reason: loses a job\n").unwrap();
    r.baseline = Some(b.account(&r, None));
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["baseline"]["expected"][0]["gate"], "G8");
    assert_eq!(
        json["baseline"]["expected"][0]["by"][0]["reason"],
        "loses a job"
    );
    let back: Record = serde_json::from_value(json).unwrap();
    assert_eq!(back, r);
}

/// A rule entry expects only the FAIL lines that concern it: those citing it, or citing no rule
/// (then any rule of the gate). A FAIL citing another rule of the same gate is a new failure.
#[test]
fn a_rule_entry_expects_the_fail_lines_that_cite_it() {
    let mut r = failing(&[GateId::G1]);
    r.gates[0].evidence.push(crate::gates::Evidence::new(
        Severity::Fail,
        "left 1 connection open (R5.13: a connect closes the old connections)",
    ));
    let r513 = parse("expected:\n  - id: R5.13\n    reason: pool kept\n").unwrap();
    let out = r513.account(&r, None);
    assert_eq!(out.new_failures, Vec::<GateId>::new(), "{out:?}");
    assert_eq!(out.expected.len(), 1);
    assert_eq!(out.expected[0].by[0].id, "R5.13");
    let r31 = parse("expected:\n  - id: R3.1\n    reason: fence\n").unwrap();
    let out = r31.account(&r, None);
    assert_eq!(out.new_failures, [GateId::G1], "R3.1 expects no R5.13 FAIL");
    // A line citing no rule: any rule of the gate expects it, as before.
    let mut r = failing(&[GateId::G1]);
    r.gates[0].evidence.push(crate::gates::Evidence::new(
        Severity::Fail,
        "the first connect on a fresh database failed (kind engine)",
    ));
    assert!(r31.account(&r, None).new_failures.is_empty());
}
