//! The gate record (SPEC §6): JSON for machines, Markdown for people, JUnit XML for CI systems.
//! Verdicts and evidence are stable; times and rates live apart, in `volatile`, so `check` can
//! compare a fresh run with the committed record.

pub mod badge;
pub mod baseline;
mod count;
pub mod diff;
pub mod grid;
pub mod header;
pub mod html;
pub mod junit;
pub mod markdown;
pub mod matrix;
pub mod output;
pub mod schema;
pub mod shares;
pub mod spelling;
pub mod summary;

use std::collections::BTreeMap;
use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::HarnessError;
use crate::gates::{GateOutcome, Verdict};
pub use count::Count;
pub use header::{ConnectorName, Header};

/// The record's schema name; bumped when a field changes meaning.
pub const SCHEMA: &str = "emq-gate-record/2";

/// One gate's verdict and stable evidence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct GateVerdict {
    pub id: crate::gates::GateId,
    pub name: String,
    pub verdict: Verdict,
    pub evidence: Vec<crate::gates::Evidence>,
    /// Per-case verdicts of a gate made of cases (G6), in order; absent for the others.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cases: Vec<CaseVerdict>,
    /// For a gate that did not pass: the one command line that judges it again as this run did
    /// (`cmd::reproduce`). Never compared: it names paths of the machine that ran it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reproduce: Option<String>,
    /// For G6: where this run wrote the failing cases' YAML, and the files (`--cases` of the
    /// reproduce line). Never compared, like `reproduce`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_cases: Option<String>,
}

/// One case's verdict (stable).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CaseVerdict {
    pub id: String,
    pub verdict: Verdict,
    /// The first line of why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl GateVerdict {
    /// The first violation (`FAIL:` or `ERROR:` evidence), first line only, without its prefix.
    pub fn first_violation(&self) -> Option<String> {
        self.evidence
            .iter()
            .find(|e| e.severity.is_violation())
            .map(|e| e.headline().to_string())
    }
}

/// The last thing written: a record without it was truncated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Footer {
    pub passed: usize,
    /// The gates judged (and any missing): 8 for a full run; the gates NOT RUN are not counted.
    pub total: usize,
    /// `PASS n/8`; a partial run says what it left out: `PASS 1/1 (7 not run)`.
    pub summary: String,
    /// Volatile: when the run ended.
    pub ended: String,
}

/// Times and rates: recorded, never compared.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Volatile {
    pub engine_boot_ms: u64,
    pub gate_wall_ms: BTreeMap<String, u64>,
    /// Per-case wall times of G6, by case id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub case_wall_ms: BTreeMap<String, u64>,
    pub figures: BTreeMap<String, BTreeMap<String, serde_json::Value>>,
    /// Connector processes the run started, by gate and reason; absent for the in-process
    /// reference, which starts none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connector_starts: Option<crate::connector::starts::Starts>,
}

/// A whole record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Record {
    pub header: Header,
    pub gates: Vec<GateVerdict>,
    pub volatile: Volatile,
    /// What `--baseline` made of the run: which failures were expected, which are new, which
    /// entries passed. Absent without one (and in every record made before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<baseline::BaselineOutcome>,
    pub footer: Footer,
}

/// Now as RFC 3339 UTC, from the system clock (no time crate needed for one format).
pub fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

impl Record {
    /// Assembles a record from the gates' outcomes.
    pub fn new(header: Header, outcomes: &[GateOutcome], engine_boot_ms: u64) -> Self {
        let count = Count::of(outcomes.iter().map(|o| (o.id, o.verdict)));
        let mut volatile = Volatile {
            engine_boot_ms,
            ..Volatile::default()
        };
        for o in outcomes {
            volatile
                .gate_wall_ms
                .insert(o.id.to_string(), o.wall.as_millis() as u64);
            if !o.figures.is_empty() {
                volatile.figures.insert(o.id.to_string(), o.figures.clone());
            }
            for c in &o.cases {
                volatile
                    .case_wall_ms
                    .insert(c.id.clone(), c.wall.as_millis() as u64);
            }
        }
        Self {
            header,
            gates: outcomes
                .iter()
                .map(|o| GateVerdict {
                    id: o.id,
                    name: o.name.clone(),
                    verdict: o.verdict,
                    evidence: o.evidence.clone(),
                    cases: o
                        .cases
                        .iter()
                        .map(|c| CaseVerdict {
                            id: c.id.clone(),
                            verdict: c.verdict,
                            message: c.message.clone(),
                        })
                        .collect(),
                    reproduce: None,
                    failed_cases: None,
                })
                .collect(),
            volatile,
            baseline: None,
            footer: Footer {
                passed: count.passed,
                total: count.total,
                summary: count.headline(),
                ended: now_rfc3339(),
            },
        }
    }

    /// True when the run passed: every gate it ran passed, and no gate is missing.
    pub fn passed(&self) -> bool {
        self.verdict() == Verdict::Pass
    }

    /// The run's one verdict, on the gates it ran ([`Count::verdict`]).
    pub fn verdict(&self) -> Verdict {
        self.count().verdict()
    }

    /// How its gates came out: passed, judged, not run, missing.
    pub fn count(&self) -> Count {
        Count::of(self.gates.iter().map(|g| (g.id, g.verdict)))
    }

    /// The gates left out of this run (NOT RUN).
    pub fn not_run(&self) -> Vec<crate::gates::GateId> {
        self.gates
            .iter()
            .filter(|g| !g.verdict.was_run())
            .map(|g| g.id)
            .collect()
    }

    /// Reads a committed record.
    pub fn load(path: &Path) -> Result<Self, HarnessError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| HarnessError::io(path.display().to_string(), e))?;
        serde_json::from_str(&text).map_err(|e| {
            HarnessError::located(
                path,
                e.line() as u64,
                e.column() as u64,
                format!("not a gate record: {e}"),
            )
        })
    }

    /// Differences in what `check` compares: the schema, versions, SHAs, verdicts, evidence and
    /// per-case verdicts; never times, rates, dates, the engine's kind, path or build source.
    pub fn stable_differences(&self, committed: &Record) -> Vec<String> {
        let mut out = header_differences(&committed.header, &self.header);
        for (c, n) in committed.gates.iter().zip(&self.gates) {
            gate_differences(c, n, &mut out);
        }
        if committed.gates.len() != self.gates.len() {
            out.push(format!(
                "gate count: committed {}, now {}",
                committed.gates.len(),
                self.gates.len()
            ));
        }
        if committed.footer.summary != self.footer.summary {
            out.push(format!(
                "summary: committed {}, now {}",
                committed.footer.summary, self.footer.summary
            ));
        }
        out
    }

    /// True when this record names its contract and `old` names none: the same verdicts, but
    /// `check` does not fail `old` for it, so only a rewrite gives the committed record its
    /// contract.
    pub fn names_more_than(&self, old: &Record) -> bool {
        old.header.contract_version.is_none() && self.header.contract_version.is_some()
    }

    /// Writes the record unless `dir` already holds one with the same stable fields and the same
    /// baseline outcome (then the committed files, figures and dates included, stay as they
    /// are); `refresh` writes anyway.
    /// True when it wrote.
    pub fn write_if_changed(
        &self,
        dir: &Path,
        stem: &str,
        refresh: bool,
    ) -> Result<bool, HarnessError> {
        let existing = dir.join(format!("{stem}.json"));
        let same = !refresh
            && existing.is_file()
            && Record::load(&existing).is_ok_and(|old| {
                self.stable_differences(&old).is_empty()
                    && !self.names_more_than(&old)
                    && self.baseline == old.baseline
            });
        if same {
            return Ok(false);
        }
        self.write(dir, stem)?;
        Ok(true)
    }

    /// Writes `<stem>.json`, `<stem>.md` and `<stem>.junit.xml` into `dir`.
    pub fn write(&self, dir: &Path, stem: &str) -> Result<(), HarnessError> {
        std::fs::create_dir_all(dir).map_err(|e| HarnessError::io(dir.display().to_string(), e))?;
        let json = serde_json::to_string_pretty(self).expect("records serialize") + "\n";
        for (ext, body) in [
            ("json", json),
            ("md", self.markdown()),
            ("junit.xml", self.junit()),
        ] {
            let path = dir.join(format!("{stem}.{ext}"));
            std::fs::write(&path, body)
                .map_err(|e| HarnessError::io(path.display().to_string(), e))?;
        }
        Ok(())
    }
}

/// The header fields `check` compares, and the script SHAs.
fn header_differences(a: &Header, b: &Header) -> Vec<String> {
    let mut out = Vec::new();
    let fields = [
        ("schema", &a.schema, &b.schema),
        ("harness_version", &a.harness_version, &b.harness_version),
        ("bundle_version", &a.bundle_version, &b.bundle_version),
        ("bundle_digest", &a.bundle_digest, &b.bundle_digest),
        ("engine_product", &a.engine_product, &b.engine_product),
        ("engine_version", &a.engine_version, &b.engine_version),
        (
            "connector_name",
            &a.connector_name.to_string(),
            &b.connector_name.to_string(),
        ),
        (
            "connector_version",
            &a.connector_version,
            &b.connector_version,
        ),
        (
            "connector_language",
            &a.connector_language,
            &b.connector_language,
        ),
    ];
    for (name, want, got) in fields {
        if want != got {
            out.push(format!("{name}: committed {want:?}, now {got:?}"));
        }
    }
    // A record made before the contract had a version names none: that alone is no difference
    // (`check` says in a line which contract it is taken as, and what it was never judged on).
    if a.contract_version.is_some() && a.contract_version != b.contract_version {
        out.push(format!(
            "contract_version: committed {:?}, now {:?}",
            a.contract_version, b.contract_version
        ));
    }
    if a.catalogue_digest.is_some() && a.catalogue_digest != b.catalogue_digest {
        out.push(format!(
            "catalogue_digest: committed {:?}, now {:?}",
            a.catalogue_digest, b.catalogue_digest
        ));
    }
    if a.scripts != b.scripts {
        out.push(format!(
            "scripts: committed {:?}, now {:?}",
            a.scripts, b.scripts
        ));
    }
    out
}

/// One gate, committed `c` against now `n`: verdict, evidence, per-case verdicts.
fn gate_differences(c: &GateVerdict, n: &GateVerdict, out: &mut Vec<String>) {
    if c.verdict != n.verdict {
        out.push(format!(
            "{} {}: committed {:?}, now {:?}",
            c.id, c.name, c.verdict, n.verdict
        ));
    }
    if c.evidence != n.evidence {
        let d = crate::suites::cases::expect::diff(
            &serde_json::json!(c.evidence),
            &serde_json::json!(n.evidence),
        );
        out.push(format!("{} {}: evidence differs {d}", c.id, c.name));
    }
    if c.cases != n.cases {
        out.push(format!(
            "{} {}: cases differ: {}",
            c.id,
            c.name,
            case_changes(&c.cases, &n.cases).join(", ")
        ));
    }
}

/// Each case whose verdict changed, went or came, by id.
fn case_changes(c: &[CaseVerdict], n: &[CaseVerdict]) -> Vec<String> {
    let was: BTreeMap<&str, &CaseVerdict> = c.iter().map(|x| (x.id.as_str(), x)).collect();
    let now: BTreeMap<&str, &CaseVerdict> = n.iter().map(|x| (x.id.as_str(), x)).collect();
    let mut changed: Vec<String> = Vec::new();
    for id in was
        .keys()
        .chain(now.keys())
        .collect::<std::collections::BTreeSet<_>>()
    {
        match (was.get(id), now.get(id)) {
            (Some(w), Some(x)) if w == x => {}
            (Some(w), Some(x)) => changed.push(format!("{id} {} → {}", w.verdict, x.verdict)),
            (Some(_), None) => changed.push(format!("{id} gone")),
            (None, Some(x)) => changed.push(format!("{id} new ({})", x.verdict)),
            (None, None) => {}
        }
    }
    changed
}

#[cfg(test)]
mod tests {
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
        assert_eq!(diffs.len(), 2, "{diffs:?}");
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
}
