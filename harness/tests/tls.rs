//! SPEC §10 through the command line: a connector that answers `rediss://` with kind
//! `unsupported` gets a TLS record that says "TLS not certified" (no verdict, exit 4), and the
//! same connector still passes on an engine without TLS.

mod common;

fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn a_connector_without_tls_is_not_certified_on_tls_and_judged_without() {
    let Some(python) = common::python_connector() else {
        assert!(
            !emq::settings::in_ci(),
            "CI provisions the Python connector"
        );
        return;
    };
    let no_tls = fixture("no_tls.py");
    let run = |engine: &str| {
        common::gate_with(
            &[
                "-q",
                "run",
                "--engine-name",
                engine,
                "--engine",
                "binary",
                "--gates",
                "G1",
                // A busy machine starts Python slowly; the point here is not its speed.
                "--timeout",
                "60",
                "--",
                "python3",
                &no_tls,
            ],
            &[("EMQ_PYTHON_CONNECTOR", python.as_os_str())],
        )
    };
    let (code, text) = run("valkey-9.1-tls");
    assert_eq!(code, Some(4), "no verdict: {text}");
    assert!(
        text.contains("**TLS not certified**") || text.contains("TLS not certified"),
        "{text}"
    );
    assert!(
        text.contains("answers a rediss:// connect with kind unsupported (SPEC R10.1): this connector has no TLS"),
        "{text}"
    );
    assert!(!text.contains("FAIL"), "not a failure: {text}");
    let (code, text) = run("valkey-9.1");
    // G1 alone: the other gates are not selected, so no verdict either (exit 4), but G1 passes.
    assert_eq!(code, Some(4), "{text}");
    assert!(
        text.contains("| G1 | fence | **PASS** |"),
        "G1 without TLS passes: {text}"
    );
    assert!(!text.contains("TLS not certified"), "{text}");
}
