//! SPEC P11.2 through the command line: a connector that answers a `connect` naming a Sentinel
//! deployment with kind `unsupported` gets a Sentinel record that says "Sentinel not certified"
//! (no verdict, exit 4), and the same connector still passes on an engine without Sentinels.

mod common;

#[test]
fn a_connector_without_sentinel_is_not_certified_behind_sentinel_and_judged_without() {
    let Some(python) = common::python_connector() else {
        return;
    };
    let run = |engine: &str| common::g1_of_fixture(&python, "no_sentinel.py", engine);
    let (code, text) = run("valkey-9.1-sentinel");
    assert_eq!(code, Some(4), "no verdict: {text}");
    assert!(text.contains("Sentinel not certified"), "{text}");
    assert!(
        text.contains("answers a connect that names a Sentinel deployment with kind unsupported (SPEC P11.2): this connector has no Sentinel support"),
        "{text}"
    );
    assert!(!text.contains("FAIL"), "not a failure: {text}");
    let (code, text) = run("valkey-9.1");
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("PASS 1/1 (7 not run)"), "{text}");
    assert!(!text.contains("Sentinel not certified"), "{text}");
}
