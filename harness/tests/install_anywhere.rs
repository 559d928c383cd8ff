//! The install-anywhere proof: from an empty directory outside the checkout, the built `emq-gate`
//! records the Python and the Node connector (binary engine, `--reports <tmp>/out`, names from
//! their `hello`), both PASS 8/8, the files land there, and the checkout's `reports/` is
//! untouched. Outside CI it is skipped with a line when a connector is not provisioned; with
//! `CI` set, that is a failure. Slow (about one to two minutes): one test function.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

fn hashes(dir: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_file() {
            let bytes = std::fs::read(&p).unwrap();
            out.insert(
                p.file_name().unwrap().to_string_lossy().to_string(),
                emq::protocol::bundle::sha1_hex(&bytes),
            );
        }
    }
    out
}

#[test]
fn an_installed_gate_records_other_connectors_from_anywhere() {
    let (Some(python), Some(node)) = (
        common::python_connector(),
        common::provisioned("EMQ_NODE_CONNECTOR"),
    ) else {
        return;
    };
    let checkout_reports = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../reports");
    let before = hashes(&checkout_reports);
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    for (connector, stem) in [(&python, "echomq-python"), (&node, "echomq-node")] {
        let t0 = Instant::now();
        let o = Command::new(env!("CARGO_BIN_EXE_emq-gate"))
            .current_dir(tmp.path())
            // Nothing may lead the binary back to the checkout.
            .env_remove("EMQ_BUNDLE_DIR")
            .env_remove("EMQ_CASES_DIR")
            .env_remove("EMQ_REPORTS_DIR")
            .env_remove("EMQ_ENGINE_URL")
            // Fewer histories and a smaller batch: what is proved is where the bundle, the
            // cases and the record come from; the matrix judges these connectors in full.
            .args(["-q", "record", "--engine", "binary", "--histories", "16"])
            .args(["--batch", "2000", "--reports"])
            .arg(&out)
            .arg("--")
            .arg(connector)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&o.stdout);
        let stderr = String::from_utf8_lossy(&o.stderr);
        eprintln!(
            "{stem}: exit {:?} in {:.1} s; {}",
            o.status.code(),
            t0.elapsed().as_secs_f64(),
            stdout.lines().find(|l| l.contains("/8")).unwrap_or("")
        );
        assert_eq!(o.status.code(), Some(0), "{stdout}\n{stderr}");
        assert!(stdout.contains("PASS 8/8"), "{stdout}");
        for ext in ["json", "md", "junit.xml"] {
            let f = out.join(format!("{stem}.{ext}"));
            assert!(f.is_file(), "{} missing; {stderr}", f.display());
        }
        let badge = std::fs::read_to_string(out.join(format!("badges/{stem}.svg")))
            .unwrap_or_else(|e| panic!("{stem}'s badge: {e}; {stderr}"));
        assert!(badge.contains(">PASS 8/8</text>"), "{badge}");
    }
    // Nothing was written beside the temp directory's out/.
    let entries: Vec<String> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    assert_eq!(entries, ["out"]);
    assert_eq!(
        hashes(&checkout_reports),
        before,
        "the checkout's reports/ changed"
    );
}
