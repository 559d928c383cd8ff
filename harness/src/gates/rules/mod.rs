//! The rule catalogue: every numbered rule of `bundle/SPEC.md` (**R<section>.<n>**), the gate
//! checks and cases that enforce it, and the deliberately broken connectors ("doubles") that break
//! it and that the named gates must FAIL — or why no connector can break it.
//!
//! `tests/rules.rs` keeps this table and SPEC in step (every id in one is in the other), checks
//! that every named case and double exists, and runs the kill matrix: each double through each
//! gate its rule names, which must FAIL. `emq-gate rules` prints it.

/// One rule of SPEC.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    /// `R<section>.<n>`, as bold in SPEC.
    pub id: &'static str,
    /// The rule in a line.
    pub summary: &'static str,
    /// The gate checks that enforce it, in words (`G5: ...`).
    pub checks: &'static [&'static str],
    /// Case ids (G6) that enforce it; where G6 is in `gates`, a double must fail one of them.
    pub cases: &'static [&'static str],
    /// The gates that must FAIL each of `doubles`.
    pub gates: &'static [&'static str],
    /// The doubles that break it: an `emq::doubles::Double` name, or `fixture:<file>` for a child
    /// process under `harness/tests/fixtures/`.
    pub doubles: &'static [&'static str],
    /// Empty for a breakable rule; otherwise why no connector can break it.
    pub unbreakable: &'static str,
}

impl Rule {
    /// True for the cluster rules (SPEC §8): their doubles are judged on `--engine cluster`,
    /// and each must also PASS the same gates on a single engine (it breaks only §8).
    pub fn on_cluster(&self) -> bool {
        self.id.starts_with("R8.")
    }

    /// True when some connector can break it (it then needs a double).
    pub fn breakable(&self) -> bool {
        self.unbreakable.is_empty()
    }
}

mod catalogue;
pub use catalogue::CATALOGUE;

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

/// The catalogue as text, for `emq-gate rules`.
pub fn text() -> String {
    let mut s = String::new();
    let breakable = CATALOGUE.iter().filter(|r| r.breakable()).count();
    s.push_str(&format!(
        "{} rules in bundle/SPEC.md; {breakable} breakable, each with a double the gate must FAIL\n",
        CATALOGUE.len()
    ));
    for r in CATALOGUE {
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
                r.doubles.join(", "),
                r.gates.join(", ")
            ));
        } else {
            s.push_str(&format!("  unbreakable: {}\n", r.unbreakable));
        }
    }
    s
}
