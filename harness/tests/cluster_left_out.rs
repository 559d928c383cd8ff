//! SPEC P8.5 through the command line: a connector that answers a `"cluster": true` connect with
//! kind `unsupported` gets cluster records that say "cluster not certified" (no verdict, exit 4),
//! on the plain cluster and on the TLS cluster (where a single `rediss://` connection to the
//! seed tells it from a connector without TLS), and the same connector still passes on one
//! engine. Before this, such a connector FAILed G1 on the plain cluster: a false FAIL of a
//! connector that follows SPEC to the letter.

mod common;

#[test]
fn a_connector_without_cluster_support_is_not_certified_on_clusters_and_judged_without() {
    let Some(python) = common::python_connector() else {
        return;
    };
    let run = |engine: &str| common::g1_of_fixture(&python, "no_cluster.py", engine);
    for engine in ["valkey-9.1-cluster", "valkey-9.1-tls-cluster"] {
        let (code, text) = run(engine);
        assert_eq!(code, Some(4), "{engine}: no verdict: {text}");
        assert!(text.contains("cluster not certified"), "{engine}: {text}");
        assert!(
            text.contains(
                "with kind unsupported (SPEC P8.5): this connector has no cluster support"
            ),
            "{engine}: {text}"
        );
        assert!(!text.contains("FAIL"), "{engine}: not a failure: {text}");
        assert!(!text.contains("TLS not certified"), "{engine}: {text}");
    }
    let (code, text) = run("valkey-9.1");
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("PASS 1/1 (7 not run)"), "{text}");
    assert!(!text.contains("not certified"), "{text}");
}
