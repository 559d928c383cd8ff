//! The record's unit tests: building, comparing, storing and rendering one sample record.

use super::*;

fn sample() -> Record {
    let header = Header {
        schema: SCHEMA.into(),
        harness_version: "0.1.0".into(),
        contract_version: Some(2),
        catalogue_digest: Some("c".into()),
        bundle_version: "1.0.0".into(),
        bundle_protocol: 1,
        bundle_digest: "d".into(),
        scripts: BTreeMap::from([("claim".into(), "2319".into())]),
        engine_kind: "binary".into(),
        engine_image: "/bin/valkey-server".into(),
        engine_tls: false,
        engine_product: "valkey".into(),
        engine_version: "9.1.2".into(),
        engine_source: "Debian valkey 9.1.2-1".into(),
        connector_name: "c".into(),
        connector_version: "1".into(),
        connector_language: "rust".into(),
        seed: 1,
        histories: 256,
        batch: 100_000,
        started: now_rfc3339(),
    };
    let mut g = GateOutcome::new(crate::gates::GateId::G1, "fence");
    g.pass("the fence was read first");
    g.figure("ms", 12);
    Record::new(header, &[g], 40)
}

#[test]
fn check_ignores_volatile_and_catches_the_rest() {
    let committed = sample();
    let mut fresh = sample();
    fresh.header.started = "2030-01-01T00:00:00Z".into();
    fresh.header.engine_kind = "container".into();
    fresh.header.engine_source = "another build".into();
    fresh.volatile.engine_boot_ms = 999;
    fresh.footer.ended = "later".into();
    assert_eq!(fresh.stable_differences(&committed), Vec::<String>::new());

    let mut drifted = sample();
    drifted.gates[0].evidence[0] = "the fence was skipped".into();
    drifted.header.engine_version = "9.0.0".into();
    let diffs = drifted.stable_differences(&committed);
    // The version, the evidence's diff, and the new line whole.
    assert_eq!(diffs.len(), 3, "{diffs:?}");
    assert!(diffs.iter().any(|d| d.contains("engine_version")));
    assert!(
        diffs
            .iter()
            .any(|d| d.contains("-  \"the fence was read first\""))
    );
}

#[test]
fn a_record_round_trips_and_renders() {
    let r = sample();
    let back: Record = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
    assert_eq!(back, r);
    assert!(r.markdown().contains("| G1 | fence | **PASS** |"));
    assert!(r.junit().contains("name=\"G1 fence\""), "{}", r.junit());
    // Only one of eight gates: the summary must not claim a pass, nor a failure.
    assert_eq!(r.footer.summary, "ERROR 1/8");
    assert_eq!(r.verdict(), Verdict::Error);
}

#[test]
fn an_unchanged_record_is_not_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    let first = sample();
    assert!(first.write_if_changed(dir.path(), "x", false).unwrap());
    let written = std::fs::read_to_string(dir.path().join("x.json")).unwrap();
    let mut again = sample();
    again.volatile.engine_boot_ms = 7777;
    again.header.started = "2031-01-01T00:00:00Z".into();
    assert!(!again.write_if_changed(dir.path(), "x", false).unwrap());
    let kept = std::fs::read_to_string(dir.path().join("x.json")).unwrap();
    assert_eq!(kept, written, "figures alone must not rewrite the record");
    assert!(again.write_if_changed(dir.path(), "x", true).unwrap());
    // A committed record without a contract is rewritten to name it, though it still holds.
    let mut unversioned = sample();
    unversioned.header.contract_version = None;
    assert!(unversioned.write_if_changed(dir.path(), "x", true).unwrap());
    assert!(sample().write_if_changed(dir.path(), "x", false).unwrap());
    assert!(!sample().write_if_changed(dir.path(), "x", false).unwrap());
    let mut changed = sample();
    changed.gates[0].evidence.push(crate::gates::Evidence::new(
        crate::gates::Severity::Fail,
        "something",
    ));
    assert!(changed.write_if_changed(dir.path(), "x", false).unwrap());
    // What a baseline made of the run rewrites; a reproduce line (a path) alone does not.
    assert!(sample().write_if_changed(dir.path(), "x", true).unwrap());
    let mut known = sample();
    known.baseline = Some(baseline::BaselineOutcome {
        file: "b.yaml".into(),
        ..Default::default()
    });
    assert!(known.write_if_changed(dir.path(), "x", false).unwrap());
    known.gates[0].reproduce = Some("emq-gate run --gates G1".into());
    assert!(!known.write_if_changed(dir.path(), "x", false).unwrap());
    assert!(known.stable_differences(&sample()).is_empty());
}

#[test]
fn a_record_without_a_contract_holds_and_one_of_another_contract_does_not() {
    let fresh = sample();
    let mut unversioned = sample();
    unversioned.header.contract_version = None;
    unversioned.header.catalogue_digest = None;
    assert_eq!(fresh.stable_differences(&unversioned), Vec::<String>::new());
    assert_eq!(unversioned.header.contract(), 1);
    let mut older = sample();
    older.header.contract_version = Some(1);
    older.header.catalogue_digest = Some("old".into());
    let d = fresh.stable_differences(&older);
    assert_eq!(d.len(), 2, "{d:?}");
    assert!(
        d[0].starts_with("contract_version: committed Some(1), now Some(2)"),
        "{d:?}"
    );
    // A record of today's records without the fields loads (the committed ones predate them).
    let mut v = serde_json::to_value(&unversioned).unwrap();
    assert!(v["header"].get("contract_version").is_none());
    v["header"]["contract_version"] = 2.into();
    let r: Record = serde_json::from_value(v).unwrap();
    assert_eq!(r.header.contract(), 2);
}

#[test]
fn a_v1_record_still_loads() {
    let mut v: serde_json::Value =
        serde_json::from_str(&serde_json::to_string(&sample()).unwrap()).unwrap();
    let h = v["header"].as_object_mut().unwrap();
    let version = h.remove("engine_version").unwrap();
    h.remove("engine_product");
    h.remove("engine_source");
    h.insert("valkey_version".into(), version);
    let r: Record = serde_json::from_value(v).unwrap();
    assert_eq!(r.header.engine_label(), "valkey 9.1.2");
}

#[test]
fn a_cluster_record_is_the_cluster_column() {
    let mut r = sample();
    assert_eq!(r.header.engine_column(), "valkey-9.1");
    r.header.engine_kind = "cluster".into();
    assert_eq!(r.header.engine_column(), "valkey-9.1-cluster");
    assert_eq!(r.header.engine_name(), "valkey-9.1");
}

#[test]
fn dates_are_civil() {
    let s = now_rfc3339();
    assert_eq!(s.len(), 20, "{s}");
    assert!(s.starts_with("20"), "{s}");
}
