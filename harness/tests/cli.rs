//! `emq-gate`'s documented exit codes for bad input, and a manual in `--help`.

use std::process::Command;

fn gate(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_emq-gate"))
        .args(args)
        .env_remove("EMQ_ENGINE_URL")
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code(), text)
}

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
