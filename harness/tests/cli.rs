//! `emq-gate`'s documented exit codes for bad input, and a manual in `--help`.

mod common;

use common::gate;

#[test]
fn a_connector_that_cannot_start_is_bad_input() {
    let (code, text) = gate(&[
        "-q",
        "run",
        "--engine",
        "binary",
        "--",
        "/nonexistent/connector",
    ]);
    assert_eq!(code, Some(2), "{text}");
    assert_eq!(text.lines().count(), 1, "one line: {text}");
    assert!(text.contains("cannot start the connector"), "{text}");
}

#[test]
fn a_missing_engine_is_bad_input_and_names_the_fix() {
    let (code, text) = gate(&["-q", "run", "--engine", "url"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("--url"), "{text}");
    let (code, text) = gate(&[
        "-q",
        "run",
        "--engine",
        "binary",
        "--valkey-server",
        "/nope",
    ]);
    assert_eq!(code, Some(2), "{text}");
}

#[test]
fn an_unreachable_engine_is_infrastructure() {
    let (code, text) = gate(&[
        "-q",
        "run",
        "--engine",
        "url",
        "--url",
        "redis://127.0.0.1:1/0",
    ]);
    assert_eq!(code, Some(3), "{text}");
}

#[test]
fn help_reads_like_a_manual() {
    let (code, text) = gate(&["--help"]);
    assert_eq!(code, Some(0));
    for needle in [
        "run",
        "record",
        "check",
        "smoke",
        "bench",
        "diff",
        "EXIT CODES",
        "EMQ_ENGINE",
    ] {
        assert!(text.contains(needle), "--help lacks {needle}: {text}");
    }
}

#[test]
fn rules_prints_the_catalogue() {
    let (code, text) = gate(&["rules"]);
    assert_eq!(code, Some(0), "{text}");
    let head = format!(
        "contract {} (catalogue {};",
        emq::gates::contract::current(),
        emq::gates::contract::catalogue_digest()
    );
    assert!(text.starts_with(&head), "{text}");
    for needle in ["R1.1", "R4.11", "Unpipelined", "R5.10", "unbreakable:"] {
        assert!(text.contains(needle), "rules lacks {needle}: {text}");
    }
}

/// The embedded corpus is unpacked to a temp directory that is gone when the run ends: a case
/// that fails, even at its set-up (the connector dies at `connect`), is named `cases/<file>`.
#[test]
fn a_failing_embedded_case_is_named_by_the_corpus_not_a_temp_path() {
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/exit_after_hello.py")
        .display()
        .to_string();
    let (code, text) = gate(&[
        "-q", "cases", "--engine", "binary", "--", "python3", &fixture,
    ]);
    assert_ne!(code, Some(0), "{text}");
    assert!(
        text.contains("cases/batch-large.yaml:1: case batch-large, step 0 (setup)"),
        "{text}"
    );
    assert!(!text.contains("emq-gate-"), "a temp path leaked: {text}");
}

/// `matrix --partition K/N --out DIR` judges a share; `matrix merge` writes the whole from the
/// shares and checks it; a share left out is an error naming a cell it held (exit 2).
#[test]
fn matrix_shares_merge_into_the_whole_and_a_missing_share_is_named() {
    let t = tempfile::tempdir().unwrap();
    let dir = |s: &str| t.path().join(s).display().to_string();
    let small = [
        "--connectors",
        "reference",
        "--engines",
        "valkey-9.1,valkey-8.1",
        "--histories",
        "4",
        "--batch",
        "1000",
    ];
    let mut cells = Vec::new();
    for k in ["1/3", "2/3", "3/3"] {
        let out = dir(&format!("share-{}", &k[..1]));
        let mut args = vec!["-q", "matrix", "--partition", k, "--out", &out];
        args.extend(small);
        let (code, text) = gate(&args);
        assert_eq!(code, Some(0), "{k}: {text}");
        let share: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(format!("{out}/matrix.json")).unwrap())
                .unwrap();
        assert_eq!(share["share"]["selection"], format!("--partition {k}"));
        cells.extend(
            share["cells"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| format!("{}×{}", c["connector"], c["engine"])),
        );
    }
    cells.sort();
    assert_eq!(cells.len(), 2, "each cell in exactly one share: {cells:?}");
    let reports = dir("reports");
    let shares = [dir("share-1"), dir("share-2"), dir("share-3")];
    let merge = |check: bool, shares: &[String]| {
        let mut args = vec!["-q", "matrix", "merge", "--reports", &reports];
        if check {
            args.push("--check");
        }
        args.extend(shares.iter().map(String::as_str));
        gate(&args)
    };
    let (code, text) = merge(false, &shares);
    assert_eq!(code, Some(0), "{text}");
    let whole: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(format!("{reports}/matrix.json")).unwrap())
            .unwrap();
    assert!(whole.get("share").is_none(), "the merge is whole");
    assert_eq!(whole["cells"].as_array().unwrap().len(), 2);
    assert!(
        std::path::Path::new(&format!("{reports}/reference.json")).is_file(),
        "the pinned engine's cell is the committed record"
    );
    let (code, text) = merge(true, &shares);
    assert_eq!(code, Some(0), "{text}");
    // Leave out a share that judged a cell.
    let holding = shares
        .iter()
        .position(|s| {
            std::fs::read_to_string(format!("{s}/matrix.json"))
                .unwrap()
                .contains("\"record\"")
        })
        .unwrap();
    let rest: Vec<String> = shares
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != holding)
        .map(|(_, s)| s.clone())
        .collect();
    let (code, text) = merge(true, &rest);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("judged by no share"), "{text}");
    assert_eq!(text.lines().count(), 1, "one line: {text}");
}

fn reports() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../reports")
}

/// `diff OLD NEW`: 0 when no verdict changed (figures may move), 1 when one did, 2 for a file
/// that is neither a record nor a matrix, or is not there.
#[test]
fn diff_exits_by_whether_a_verdict_changed() {
    let t = tempfile::tempdir().unwrap();
    let committed = reports().join("python.json");
    let mut r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&committed).unwrap()).unwrap();
    // The old side names no contract (a record from before contracts: contract 1).
    let mut old = r.clone();
    if let Some(h) = old["header"].as_object_mut() {
        h.remove("contract_version");
        h.remove("catalogue_digest");
    }
    let python = t.path().join("old.json");
    std::fs::write(&python, old.to_string()).unwrap();
    r["header"]["contract_version"] = 2.into();
    let fig = &mut r["volatile"]["figures"]["G5"]["batch_ops_per_s"];
    *fig = (fig.as_f64().unwrap() * 3.0).into();
    let moved = t.path().join("moved.json");
    std::fs::write(&moved, r.to_string()).unwrap();
    let (code, text) = gate(&[
        "diff",
        &python.display().to_string(),
        &moved.display().to_string(),
    ]);
    assert_eq!(code, Some(0), "a figure alone is not a verdict: {text}");
    assert!(text.contains("  figure G5.batch_ops_per_s: "), "{text}");
    assert!(text.contains("contract 1 → 2: rules added since"), "{text}");

    let g8 = r["gates"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|g| g["id"] == "G8")
        .unwrap();
    g8["verdict"] = "FAIL".into();
    r["footer"]["summary"] = "FAIL 7/8".into();
    let failed = t.path().join("failed.json");
    std::fs::write(&failed, r.to_string()).unwrap();
    let (code, text) = gate(&[
        "diff",
        &python.display().to_string(),
        &failed.display().to_string(),
    ]);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("  gate G8 atomicity: PASS → FAIL\n"),
        "{text}"
    );
    assert!(
        text.contains("python×valkey-9.1: PASS 8/8 → FAIL 7/8\n"),
        "{text}"
    );

    let matrix = reports().join("matrix.json").display().to_string();
    let (code, text) = gate(&["diff", &matrix, &matrix]);
    assert_eq!(code, Some(0), "{text}");
    let schema = reports().join("record.schema.json").display().to_string();
    let (code, text) = gate(&["diff", &schema, &matrix]);
    assert_eq!(code, Some(2), "{text}");
    let (code, text) = gate(&["diff", "/nonexistent.json", &matrix]);
    assert_eq!(code, Some(2), "{text}");
    let (_, help) = gate(&["diff", "--help"]);
    assert!(
        help.contains("Exit 0: no verdict changed; 1: one did"),
        "{help}"
    );
}

/// `matrix --render` draws every cell's badge and each record's from the committed matrix.json,
/// with verdict words only: rendering again changes no byte.
#[test]
fn matrix_render_draws_the_badges_from_the_matrix() {
    let t = tempfile::tempdir().unwrap();
    std::fs::copy(reports().join("matrix.json"), t.path().join("matrix.json")).unwrap();
    let dir = t.path().display().to_string();
    let (code, text) = gate(&["matrix", "--render", "--reports", &dir]);
    assert_eq!(code, Some(0), "{text}");
    let python = std::fs::read_to_string(t.path().join("badges/python.svg")).unwrap();
    assert!(
        python.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""),
        "{python}"
    );
    assert!(python.contains(">PASS 8/8</text>"), "{python}");
    assert!(!python.contains("2026-"), "no date in a badge: {python}");
    assert!(
        t.path()
            .join("badges/python-valkey-9.1-cluster.svg")
            .is_file()
    );
    let first = std::fs::read(t.path().join("badges/python.svg")).unwrap();
    let (code, text) = gate(&["matrix", "--render", "--reports", &dir]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("and 0 changed badges"), "{text}");
    assert_eq!(
        std::fs::read(t.path().join("badges/python.svg")).unwrap(),
        first
    );
    let page = std::fs::read_to_string(t.path().join("index.html")).unwrap();
    assert!(
        page.contains("<img src=\"badges/python.svg\""),
        "the page embeds it"
    );
}

/// `run --rerun-failed RECORD` judges only the gates the record did not pass, with its seed and
/// engine (the reference record's: valkey-9.1 by name, from ci/provision's settings); exit 0
/// when each of them passes now. A record that passed everything reruns nothing.
#[test]
fn rerun_failed_runs_only_what_the_record_did_not_pass() {
    let t = tempfile::tempdir().unwrap();
    let reference = reports().join("reference.json");
    let (code, text) = gate(&[
        "-q",
        "run",
        "--rerun-failed",
        &reference.display().to_string(),
    ]);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("every gate it ran passed; nothing to rerun"),
        "{text}"
    );

    let mut r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&reference).unwrap()).unwrap();
    for g in r["gates"].as_array_mut().unwrap() {
        if g["id"] == "G1" || g["id"] == "G4" {
            g["verdict"] = "FAIL".into();
        }
    }
    r["header"]["seed"] = 5.into();
    let failed = t.path().join("failed.json");
    std::fs::write(&failed, r.to_string()).unwrap();
    let out = t.path().join("out").display().to_string();
    let (code, text) = gate(&[
        "-q",
        "run",
        "--rerun-failed",
        &failed.display().to_string(),
        "--out",
        &out,
    ]);
    assert_eq!(code, Some(0), "{text}");
    // The rerun's own record says PASS 2/2 (six gates not run), and so does its badge (grey:
    // a partial run certifies only what it ran).
    let badge = std::fs::read_to_string(t.path().join("out/badges/reference.svg")).unwrap();
    assert!(badge.contains(">PASS 2/2 (6 not run)</text>"), "{badge}");
    assert!(!badge.contains("#4c1"), "not green: {badge}");
    assert!(
        text.contains("did not pass (seed 5, valkey-9.1): G1 PASS, G4 PASS"),
        "{text}"
    );
    assert!(
        text.contains("| G2 | sha1 | **NOT RUN** |"),
        "G2 is not rerun: {text}"
    );

    let (code, text) = gate(&[
        "run",
        "--rerun-failed",
        &failed.display().to_string(),
        "--gates",
        "G1",
    ]);
    assert_eq!(code, Some(2), "--gates and --rerun-failed conflict: {text}");
}

/// `check` on a record of an older contract says so in one line, before it runs, naming what the
/// record was never judged on (here the run then stops: the engine is unreachable, exit 3).
#[test]
fn check_says_when_a_record_is_of_an_older_contract() {
    let t = tempfile::tempdir().unwrap();
    let mut r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(reports().join("reference.json")).unwrap())
            .unwrap();
    r["header"]
        .as_object_mut()
        .unwrap()
        .remove("contract_version");
    std::fs::write(t.path().join("reference.json"), r.to_string()).unwrap();
    let dir = t.path().display().to_string();
    let unreachable = ["--engine", "url", "--url", "redis://127.0.0.1:1/0"];
    let mut args = vec!["-q", "check", "--reports", &dir];
    args.extend(unreachable);
    let (code, text) = gate(&args);
    assert_eq!(code, Some(3), "{text}");
    let now = emq::gates::contract::current();
    let line = text
        .lines()
        .find(|l| l.contains("was made under contract"))
        .unwrap_or_else(|| panic!("no contract line: {text}"));
    assert!(
        line.contains(&format!(
            "reference.json was made under contract 1 (it names none), this emq-gate judges \
             contract {now}: never judged on the rules added since ("
        )),
        "{line}"
    );
    assert!(line.contains("judged on an older text of R3.1"), "{line}");

    // A record of today's contract says nothing of it.
    r["header"]["contract_version"] = now.into();
    std::fs::write(t.path().join("reference.json"), r.to_string()).unwrap();
    let (code, text) = gate(&args);
    assert_eq!(code, Some(3), "{text}");
    assert!(!text.contains("was made under contract"), "{text}");
}

/// `valkey-benchmark` runs as the connector's user beside the bench and its own `CONFIG GET` is
/// refused (SPEC R4.19): that is the instrument's, so the gates after it still PASS (G1 failed
/// on the engine's ACL LOG before the bench reset it).
#[test]
fn bench_gates_judge_the_connector_not_valkey_benchmark() {
    let (code, text) = gate(&[
        "-q", "bench", "--engine", "binary", "--n", "200", "--depths", "1", "--repeat", "1",
        "--cycles", "10", "--json",
    ]);
    assert_eq!(code, Some(0), "{text}");
    let json = &text[text.find('{').expect("a JSON report")..];
    let report: serde_json::Value = serde_json::Deserializer::from_str(json)
        .into_iter()
        .next()
        .unwrap()
        .unwrap();
    assert!(
        report["valkey_benchmark"].is_object() || report["valkey_benchmark"].is_string(),
        "{text}"
    );
    let gates = report["gates"].as_array().expect("gates");
    assert_eq!(gates.len(), 8, "{text}");
    for g in gates {
        assert_eq!(g["verdict"], "PASS", "{g}");
    }
}
