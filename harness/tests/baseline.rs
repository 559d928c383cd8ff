//! `--baseline` and the reproduce line through the built `emq-gate`: a bad baseline is refused
//! in one line before any engine boots; on doubles that really fail a gate (`--double`, built
//! with the `doubles` feature the tests turn on), an expected failure exits 5, an unexpected
//! pass is said, a new failure exits 1; a failing case's YAML is written beside the record and
//! its reproduce line, run as printed, judges that case again. The reruns use the committed
//! reference record's engine by name (valkey-9.1, from ci/provision's settings).

use std::process::Command;

mod common;

use common::gate;

fn reports() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../reports")
}

/// A baseline naming an unknown id is one line naming `file:line`, exit 2, before any engine
/// boots (the url here is unreachable: a later refusal would be exit 3).
#[test]
fn a_bad_baseline_is_refused_in_one_line() {
    let t = tempfile::tempdir().unwrap();
    let file = t.path().join("baseline.yaml");
    std::fs::write(
        &file,
        "expected:\n  - id: G1\n    reason: a\n  - id: G9\n    reason: b\n",
    )
    .unwrap();
    let file = file.display().to_string();
    let unreachable = ["--engine", "url", "--url", "redis://127.0.0.1:1/0"];
    for command in ["run", "record", "check"] {
        let mut args = vec!["-q", command, "--baseline", &file];
        args.extend(unreachable);
        let (code, text) = gate(&args);
        assert_eq!(code, Some(2), "{command}: {text}");
        assert_eq!(text.lines().count(), 1, "{command}: one line: {text}");
        assert!(
            text.contains(&format!("{file}:4:9: unknown gate or rule id \"G9\"")),
            "{command}: {text}"
        );
    }
}

/// The committed reference record with `failed` FAILed and seed 5, as `--rerun-failed` input.
fn record_failing(dir: &std::path::Path, failed: &[&str]) -> String {
    let mut r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(reports().join("reference.json")).unwrap())
            .unwrap();
    for g in r["gates"].as_array_mut().unwrap() {
        if failed.iter().any(|f| g["id"] == *f) {
            g["verdict"] = "FAIL".into();
        }
    }
    r["header"]["seed"] = 5.into();
    let path = dir.join("failed.json");
    std::fs::write(&path, r.to_string()).unwrap();
    path.display().to_string()
}

/// `--baseline` on a double that really fails G1 (SkipFence), rerunning G1 and G2 only: a
/// failure the baseline names exits 5 and the headline stays FAIL; an entry that passed is an
/// unexpected pass; a failure it does not name is new (exit 1). Each non-PASS gate ends with
/// its reproduce line.
#[test]
fn a_baseline_tells_expected_failures_from_new_ones() {
    use emq::doubles::Double;
    use emq::gates::GateId;
    let failing = emq::gates::rules::gates_failing(Double::SkipFence);
    assert!(failing.contains(&GateId::G1) && !failing.contains(&GateId::G2));
    let t = tempfile::tempdir().unwrap();
    let failed = record_failing(t.path(), &["G1", "G2"]);
    let baseline = |name: &str, body: &str| {
        let p = t.path().join(name);
        std::fs::write(&p, body).unwrap();
        p.display().to_string()
    };
    let known = baseline(
        "known.yaml",
        "# SkipFence's known failures\nexpected:\n  - id: G1\n    reason: no fence read\n  - id: G2\n    reason: once failed\n",
    );
    let out = t.path().join("out").display().to_string();
    let run = |b: &str| {
        gate(&[
            "-q",
            "run",
            "--double",
            "SkipFence",
            "--rerun-failed",
            &failed,
            "--baseline",
            b,
            "--out",
            &out,
            "--name",
            "skip",
        ])
    };
    let (code, text) = run(&known);
    assert_eq!(code, Some(5), "only expected failures: {text}");
    assert!(
        text.contains(&format!(
            "emq-gate: FAIL 1/2 (6 not run; 1 of 1 failure expected by {known})\n"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "unexpected pass: G2 passed, but {known}:5 expects it to fail (once failed): remove the entry"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "| G1 | fence | **FAIL** (expected by {known}:3) |"
        )),
        "{text}"
    );
    let reproduce = text
        .lines()
        .find(|l| l.starts_with("- reproduce: `emq-gate run "))
        .unwrap_or_else(|| panic!("no reproduce line: {text}"));
    assert!(
        reproduce
            .ends_with("--seed 5 --histories 256 --batch 100000 --gates G1 --double SkipFence`"),
        "{reproduce}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(t.path().join("out/skip.json")).unwrap())
            .unwrap();
    assert_eq!(json["baseline"]["expected"][0]["gate"], "G1");
    assert_eq!(json["baseline"]["unexpected_passes"][0]["id"], "G2");
    assert_eq!(
        json["footer"]["summary"], "FAIL 1/2 (6 not run)",
        "the verdict is never softened"
    );

    let new = baseline(
        "new.yaml",
        "expected:\n  - id: G2\n    reason: once failed\n",
    );
    let (code, text) = run(&new);
    assert_eq!(code, Some(1), "a new failure: {text}");
    assert!(
        text.contains(&format!("new failure: G1 (no entry of {new} expects it)")),
        "{text}"
    );
}

/// A failing G6 case's YAML is written beside the record, the G6 reproduce line replays it
/// (and only it) through `--cases`, and a rule entry expects a case of its own (exit 5).
#[test]
fn a_failing_case_is_written_beside_the_record_and_its_line_reproduces_it() {
    let t = tempfile::tempdir().unwrap();
    let corpus = t.path().join("corpus");
    std::fs::create_dir(&corpus).unwrap();
    let cases = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../cases");
    for f in ["invalid-enqueue-queue-name.yaml", "batch-returns-n.yaml"] {
        std::fs::copy(cases.join(f), corpus.join(f)).unwrap();
    }
    let failed = record_failing(t.path(), &["G6"]);
    let baseline = t.path().join("b.yaml");
    std::fs::write(
        &baseline,
        "expected:\n  - id: R1.1\n    reason: queue names checked late\n",
    )
    .unwrap();
    let out = t.path().join("out");
    let (code, text) = gate(&[
        "-q",
        "--cases",
        &corpus.display().to_string(),
        "run",
        "--double",
        "LenientQueue",
        "--rerun-failed",
        &failed,
        "--baseline",
        &baseline.display().to_string(),
        "--out",
        &out.display().to_string(),
        "--name",
        "lq",
    ]);
    assert_eq!(code, Some(5), "R1.1 expects its own case: {text}");
    let written: Vec<String> = std::fs::read_dir(out.join("lq.failed-cases"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(written, ["invalid-enqueue-queue-name.yaml"]);
    assert!(
        text.contains("- the failing cases' YAML is written to "),
        "{text}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("lq.json")).unwrap()).unwrap();
    let g6 = json["gates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["id"] == "G6")
        .unwrap();
    let line = g6["reproduce"].as_str().unwrap();
    assert!(
        line.starts_with(&format!(
            "emq-gate --cases {} run ",
            out.join("lq.failed-cases").display()
        )),
        "{line}"
    );
    // The line, run as it is printed, judges the failing case again, and only it.
    let line = line.replacen("emq-gate", env!("CARGO_BIN_EXE_emq-gate"), 1);
    let again = Command::new("sh")
        .args(["-c", &format!("{line} -q")])
        .env_remove("EMQ_ENGINE_URL")
        // Without --out its failing cases go under the temp dir: the test's own.
        .env("TMPDIR", t.path())
        .output()
        .unwrap();
    assert!(
        t.path()
            .join("emq-gate-failed-cases/double-LenientQueue")
            .is_dir()
    );
    let stdout = String::from_utf8_lossy(&again.stdout);
    assert_eq!(again.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("| G6 | cases | **FAIL** |"), "{stdout}");
    assert!(stdout.contains("- per case: 0 of 1 PASS"), "{stdout}");
}
