//! The rule catalogue: every numbered rule of `bundle/SPEC.md` (**R<section>.<n>**), the gate
//! checks and cases that enforce it, and the ways to break it ([`ways`]): each with the
//! deliberately broken connectors ("doubles") that break it that way and that the named gates
//! must FAIL — or why no connector plausibly takes that way, or no gate can see it.
//!
//! `tests/rules.rs` keeps this table and SPEC in step (every id in one is in the other), checks
//! that every named case, double and fixture exists and that every way has a double or a
//! reason, and runs the kill matrix: each double through each gate its rule names, which must
//! FAIL. `emq-gate rules` prints it.

use crate::doubles::Double;
use crate::gates::GateId;

/// A rule's id: **R<section>.<n>** of SPEC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RuleId {
    pub section: u8,
    pub n: u8,
}

impl RuleId {
    pub const fn new(section: u8, n: u8) -> Self {
        Self { section, n }
    }
}

impl std::fmt::Display for RuleId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "R{}.{}", self.section, self.n)
    }
}

/// SPEC's section of the cluster rules.
pub const CLUSTER_SECTION: u8 = 8;

/// SPEC's section of the TLS rules.
pub const TLS_SECTION: u8 = 10;

/// SPEC's section of the Sentinel rules.
pub const SENTINEL_SECTION: u8 = 11;

/// One rule of SPEC.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    /// `R<section>.<n>`, as bold in SPEC.
    pub id: RuleId,
    /// The rule in a line.
    pub summary: &'static str,
    /// The gate checks that enforce it, in words (`G5: ...`).
    pub checks: &'static [&'static str],
    /// Case ids (G6) that enforce it; where G6 is in `gates`, a double must fail one of them.
    pub cases: &'static [&'static str],
    /// The gates that must FAIL each double and fixture of its `ways`.
    pub gates: &'static [GateId],
    /// The ways to break it, each with the doubles that take it or why none does.
    pub ways: &'static [Way],
    /// Empty for a breakable rule; otherwise why no connector can break it.
    pub unbreakable: &'static str,
}

impl Rule {
    /// True for the cluster rules (SPEC §8): their doubles are judged on `--engine cluster`,
    /// and each must also PASS the same gates on a single engine (it breaks only §8).
    pub fn on_cluster(&self) -> bool {
        self.id.section == CLUSTER_SECTION
    }

    /// True for the TLS rules (SPEC §10): their doubles are judged on a TLS engine, and each
    /// must PASS every gate on an engine without TLS (no `rediss://` url reaches it there).
    pub fn on_tls(&self) -> bool {
        self.id.section == TLS_SECTION
    }

    /// True for the Sentinel rules (SPEC §11): their doubles are judged on a Sentinel engine,
    /// and each must PASS every gate on an engine without Sentinels (no `sentinel` reaches it).
    pub fn on_sentinel(&self) -> bool {
        self.id.section == SENTINEL_SECTION
    }

    /// True when some connector can break it (it then needs a double).
    pub fn breakable(&self) -> bool {
        self.unbreakable.is_empty()
    }

    /// The doubles that break it, any way, each once, in the order its ways name them.
    pub fn doubles(&self) -> Vec<Double> {
        let mut out: Vec<Double> = Vec::new();
        for d in self.ways.iter().flat_map(|w| w.doubles) {
            if !out.contains(d) {
                out.push(*d);
            }
        }
        out
    }

    /// The child fixtures (`harness/tests/fixtures/`) that break it, any way, each once.
    pub fn fixtures(&self) -> Vec<&'static str> {
        let mut out: Vec<&'static str> = Vec::new();
        for f in self.ways.iter().flat_map(|w| w.fixtures) {
            if !out.contains(f) {
                out.push(f);
            }
        }
        out
    }

    /// The gates its checks name (`G5: …` → G5), in order, each once: the gates whose verdict
    /// is this rule's (with its own cases in place of G6's whole verdict), for `diff` and for a
    /// baseline's rule entries alike.
    pub fn judged_by(&self) -> Vec<GateId> {
        let mut out: Vec<GateId> = Vec::new();
        for c in self.checks {
            let id = c.split(':').next().unwrap_or("").trim();
            if let Ok(g) = id.parse::<GateId>()
                && !out.contains(&g)
            {
                out.push(g);
            }
        }
        out
    }

    /// What breaks it, as `emq-gate rules` names them: doubles, then `fixture:<file>`.
    pub fn breakers(&self) -> Vec<String> {
        self.doubles()
            .iter()
            .map(|d| format!("{d:?}"))
            .chain(self.fixtures().iter().map(|f| format!("fixture:{f}")))
            .collect()
    }
}

/// The rules `double` breaks.
pub fn broken_by(double: Double) -> impl Iterator<Item = &'static Rule> {
    CATALOGUE
        .iter()
        .filter(move |r| r.ways.iter().any(|w| w.doubles.contains(&double)))
}

/// Every gate that must FAIL `double` (on a cluster, for a double of §8): the gates of the rules
/// it breaks and its table entry's [`crate::doubles::Entry::also`], in gate order. Every other
/// gate must PASS it.
pub fn gates_failing(double: Double) -> Vec<GateId> {
    let mut gates: Vec<GateId> = broken_by(double)
        .flat_map(|r| r.gates.iter().copied())
        .chain(double.entry().also.iter().copied())
        .collect();
    gates.sort();
    gates.dedup();
    gates
}

/// True for a double of SPEC §8 (it breaks a cluster rule): judged on `--engine cluster`, and on
/// a single engine it passes every gate.
pub fn is_cluster_double(double: Double) -> bool {
    broken_by(double).any(Rule::on_cluster)
}

/// True for a double of SPEC §11 (it breaks a Sentinel rule), or one the table judges on a TLS
/// Sentinel engine: judged on a Sentinel engine, and on any other it passes every gate.
pub fn is_sentinel_double(double: Double) -> bool {
    double.on_tls_sentinel() || broken_by(double).any(Rule::on_sentinel)
}

/// True for a double of SPEC §10 (it breaks a TLS rule): judged on a TLS engine, and on an
/// engine without TLS it passes every gate.
pub fn is_tls_double(double: Double) -> bool {
    broken_by(double).any(Rule::on_tls)
}

pub mod cited;
mod cluster;
mod connector;
pub mod permits;
mod protocol;
mod sentinel;
mod tls;
pub mod triggers;
mod url;
pub mod ways;
mod wire;

pub use ways::{How, Way};

/// Every rule of SPEC, in SPEC's order: §1–§3 (the protocol), §4 (the connector), §5 (the wire),
/// §8 (a cluster), §9 (the url), §10 (over TLS), then §11 (behind Sentinel), one file per part
/// of SPEC.
pub static CATALOGUE: std::sync::LazyLock<Vec<Rule>> = std::sync::LazyLock::new(|| {
    protocol::PROTOCOL
        .iter()
        .chain(connector::CONNECTOR)
        .chain(wire::WIRE)
        .chain(cluster::CLUSTER)
        .chain(url::URL)
        .chain(tls::TLS)
        .chain(sentinel::SENTINEL)
        .copied()
        .collect()
});

/// The sentences of SPEC's normative sections (§1 on) that say *must* or *never* and name no
/// rule: each bullet or paragraph holding such a word must declare or cite an `R<n>.<m>`, so
/// every must has a rule, and every rule a check and a double (or a reason). Headings, tables,
/// code and quoted text (between backticks) do not count. Returns the offending units.
pub fn musts_without_rule(spec: &str) -> Vec<String> {
    prose_units(spec)
        .into_iter()
        .filter(|u| says_any(u, &["must", "never"]) && !cites_rule(u))
        .collect()
}

/// SPEC's normative text (§1 on) cut into units: each bullet, table row, heading or paragraph.
/// Headings, tables and code blocks are left out: what is left is prose that states a rule.
pub(crate) fn prose_units(spec: &str) -> Vec<String> {
    let body = spec.find("## 1.").map_or(spec, |i| &spec[i..]);
    let mut units: Vec<String> = Vec::new();
    for block in body.split("\n\n") {
        let mut cur: Vec<&str> = Vec::new();
        for line in block.lines() {
            let t = line.trim_start();
            if t.starts_with("- ") || t.starts_with('|') || t.starts_with('#') {
                if !cur.is_empty() {
                    units.push(cur.join("\n"));
                }
                cur = vec![line];
            } else {
                cur.push(line);
            }
        }
        if !cur.is_empty() {
            units.push(cur.join("\n"));
        }
    }
    units
        .into_iter()
        .filter(|u| {
            let t = u.trim_start();
            !t.starts_with('#') && !t.starts_with('|') && !t.starts_with("```")
        })
        .collect()
}

/// True when `unit`'s prose (outside backticks) holds one of `words`, as a whole word.
pub(crate) fn says_any(unit: &str, words: &[&str]) -> bool {
    let prose: String = unit.split('`').step_by(2).collect::<Vec<_>>().join(" ");
    prose
        .split(|c: char| !c.is_ascii_alphabetic())
        .any(|w| words.iter().any(|x| w.eq_ignore_ascii_case(x)))
}

/// The words that grant a choice: a unit of SPEC whose prose (outside backticks) holds one
/// declares a permission (`**P<section>.<n>**`), or is rephrased so it grants nothing.
pub const GRANTING: [&str; 5] = ["may", "allowed", "fine", "either", "optional"];

/// SPEC's units (§1 on: list items, table rows, paragraphs) that say a [`GRANTING`] word and
/// declare no permission, then the permission ids out of place: each section's `**P<s>.<n>**`
/// are declared once, numbered 1, 2, … in document order, `<s>` being the section's number.
/// Headings and code do not count. Pure.
pub fn grants_without_permission(spec: &str) -> Vec<String> {
    let body = spec.find("## 1.").map_or(spec, |i| &spec[i..]);
    let mut out = Vec::new();
    for section in body.split("\n## ") {
        let number: String = section
            .trim_start_matches("## ")
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        let mut next = 1;
        for part in section.split("**P").skip(1) {
            let Some(id) = part.split("**").next() else {
                continue;
            };
            if id.split_once('.').is_some_and(|(a, b)| {
                !a.is_empty() && a.bytes().all(|c| c.is_ascii_digit()) && b.parse::<u32>().is_ok()
            }) {
                let want = format!("{number}.{next}");
                if id != want {
                    out.push(format!("P{id} where P{want} is due"));
                }
                next += 1;
            }
        }
        let mut in_code = false;
        for block in section.split("\n\n") {
            let mut units: Vec<Vec<&str>> = Vec::new();
            for line in block.lines() {
                let t = line.trim_start();
                if t.starts_with("```") {
                    in_code = !in_code;
                    continue;
                }
                if in_code {
                    continue;
                }
                if t.starts_with("- ") || t.starts_with('|') || t.starts_with('#') {
                    units.push(vec![t]);
                } else if let Some(u) = units.last_mut() {
                    u.push(t);
                } else {
                    units.push(vec![t]);
                }
            }
            for u in units {
                let text = u.join(" ");
                if text.starts_with('#') {
                    continue;
                }
                let prose: String = text.split('`').step_by(2).collect::<Vec<_>>().join(" ");
                let grants = prose
                    .split(|c: char| !c.is_ascii_alphabetic())
                    .any(|w| GRANTING.iter().any(|g| w.eq_ignore_ascii_case(g)));
                if grants && !text.contains("**P") {
                    out.push(text);
                }
            }
        }
    }
    out
}

/// True when `text` holds an `R<n>.<m>`.
fn cites_rule(text: &str) -> bool {
    text.match_indices('R').any(|(i, _)| {
        let rest = &text[i + 1..];
        let digits = |s: &str| s.bytes().take_while(u8::is_ascii_digit).count();
        let a = digits(rest);
        a > 0 && rest[a..].starts_with('.') && digits(&rest[a + 1..]) > 0
    })
}

/// The rule ids SPEC's text declares (`**R<n>.<m>**`), in order of first appearance.
pub fn spec_ids(spec: &str) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    for part in spec.split("**R").skip(1) {
        let Some(end) = part.find("**") else { continue };
        let id = &part[..end];
        let mut nums = id.splitn(2, '.');
        let ok = |s: Option<&str>| {
            s.is_some_and(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
        };
        if ok(nums.next()) && ok(nums.next()) {
            let id = format!("R{id}");
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
    }
    ids
}

/// The catalogue as text, for `emq-gate rules`: each rule with its checks, cases and gates, then
/// its ways, each with the doubles that take it or why none does.
pub fn text() -> String {
    let mut s = String::new();
    let loose = musts_without_rule(SPEC);
    let unbacked = ways::loose(&CATALOGUE);
    let breakable = CATALOGUE.iter().filter(|r| r.breakable()).count();
    let all_ways: Vec<&Way> = CATALOGUE.iter().flat_map(|r| r.ways).collect();
    let broken = all_ways.iter().filter(|w| w.broken()).count();
    s.push_str(&format!(
        "{} rules in bundle/SPEC.md; {breakable} breakable, each with a double the gate must FAIL\n\
         {} ways to break them: {broken} taken by a double the gate must FAIL, {} with the reason \
         none is needed\n",
        CATALOGUE.len(),
        all_ways.len(),
        all_ways.len() - broken
    ));
    for r in CATALOGUE.iter() {
        s.push_str(&format!("\n{} {}\n", r.id, r.summary));
        for c in r.checks {
            s.push_str(&format!("  check: {c}\n"));
        }
        if !r.cases.is_empty() {
            s.push_str(&format!("  cases: {}\n", r.cases.join(", ")));
        }
        if r.breakable() {
            s.push_str(&format!(
                "  killed by: {} at {}\n",
                r.breakers().join(", "),
                r.gates
                    .iter()
                    .map(|g| g.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        } else {
            s.push_str(&format!("  unbreakable: {}\n", r.unbreakable));
        }
        for w in r.ways {
            s.push_str(&format!(
                "  way {}: {}; {}\n",
                w.how.as_str(),
                w.what,
                w.behind()
            ));
        }
    }
    s.push_str(&permits::text());
    if loose.is_empty() {
        s.push_str("\nevery must and never of SPEC names a rule\n");
    } else {
        let fail = crate::gates::Evidence::new(
            crate::gates::Severity::Fail,
            format!(
                "{} places in SPEC say must or never without a rule:",
                loose.len()
            ),
        );
        s.push_str(&format!("\n{fail}\n"));
        for u in &loose {
            s.push_str(&format!("  {}\n", u.lines().next().unwrap_or("").trim()));
        }
    }
    if unbacked.is_empty() {
        s.push_str("every way names a double or the reason none is needed\n");
    } else {
        let fail = crate::gates::Evidence::new(
            crate::gates::Severity::Fail,
            format!("{} ways are not accounted for:", unbacked.len()),
        );
        s.push_str(&format!("{fail}\n"));
        for u in &unbacked {
            s.push_str(&format!("  {u}\n"));
        }
    }
    s
}

/// The SPEC this catalogue describes (the bundle built into the binary).
pub const SPEC: &str = include_str!("../../../../bundle/SPEC.md");

/// True when every must of [`SPEC`] names a rule ([`musts_without_rule`]) and every way of
/// every rule names a double or a reason ([`ways::loose`]).
pub fn complete() -> bool {
    musts_without_rule(SPEC).is_empty() && ways::loose(&CATALOGUE).is_empty()
}

#[cfg(test)]
mod audit_tests {
    use super::{SPEC, grants_without_permission, musts_without_rule};

    #[test]
    fn spec_says_may_only_to_grant_and_numbers_every_permission() {
        let loose = grants_without_permission(SPEC);
        assert!(
            loose.is_empty(),
            "SPEC grants without a permission id (**P<section>.<n>**), or numbers one out of \
             order; give it one or rephrase (might, can, whether or not):\n{}",
            loose.join("\n---\n")
        );
    }

    #[test]
    fn a_grant_without_a_permission_id_is_found() {
        let spec = "## 1. A\n\n- a connector may do it\n- **P1.1** it may do that\n\n`may` in code\n\n\
                    | row | optional |\n\n## 2. B\n\n**P2.2** a gap\n";
        let found = grants_without_permission(spec);
        assert_eq!(found.len(), 3, "{found:#?}");
        assert!(found[0].starts_with("- a connector may"));
        assert!(found[1].starts_with("| row |"));
        assert!(found[2].starts_with("P2.2 where P2.1"));
    }

    #[test]
    fn a_must_without_a_rule_is_found_and_one_with_a_rule_is_not() {
        let spec = "intro: a connector must be nice\n\n## 1. Grammar\n\n- **R1.1** a name must be short\n- ids must be long\n  over two lines\n\nA paragraph that never cites.\n\n| a | must |\n\n`must` in code\n\nA paragraph citing (R2.3) must pass.\n";
        let found = musts_without_rule(spec);
        assert_eq!(found.len(), 2, "{found:#?}");
        assert!(found[0].starts_with("- ids must be long"));
        assert!(found[1].starts_with("A paragraph that never cites."));
    }
}
