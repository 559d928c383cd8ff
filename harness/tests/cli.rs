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
