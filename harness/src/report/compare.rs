//! What `check` compares between a fresh record and the committed one: the stable fields only
//! (verdicts, evidence, versions, SHAs), never times, rates or dates. Its own concept: the
//! definition of "the same record", apart from how a record is built or stored.

use std::collections::BTreeMap;

use super::{CaseVerdict, GateVerdict, Header, Record};

impl Record {
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
        // The diff shortens long lines to their head; a new line (a FAIL's why) is what a CI
        // log must show whole, since the fresh record is gone with the CI machine.
        for line in n.evidence.iter().filter(|l| !c.evidence.contains(l)) {
            out.push(format!("{} {}: now: {line}", c.id, c.name));
        }
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

    #[test]
    fn a_new_evidence_line_is_shown_whole_beside_the_diff() {
        use crate::gates::{Evidence, GateId, Severity, Verdict};
        let long = "x".repeat(400);
        let gate = |evidence: Vec<Evidence>| GateVerdict {
            id: GateId::G8,
            name: "atomicity".into(),
            verdict: Verdict::Pass,
            evidence,
            cases: vec![],
            reproduce: None,
            failed_cases: None,
        };
        let was = gate(vec!["kept".into(), "gone".into()]);
        let now = gate(vec!["kept".into(), Evidence::new(Severity::Fail, &long)]);
        let mut out = Vec::new();
        gate_differences(&was, &now, &mut out);
        assert!(
            out.iter()
                .any(|l| l.ends_with(&format!("now: FAIL: {long}"))),
            "{out:?}"
        );
        assert!(!out.iter().any(|l| l.ends_with("now: kept")), "{out:?}");
    }
}
