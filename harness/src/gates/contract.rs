//! The contract's version: what a record certifies (SPEC's rules, the gates' checks, the case
//! corpus), versioned apart from the bundle (the scripts) and the harness, so a record made last
//! month can say which contract it holds. The one source is SPEC §12's changelog: the version is
//! its newest entry, and the rules each entry added or changed are read from it, so `check` can
//! name what an older record was never judged on. The catalogue's digest ties a record to the
//! exact rule catalogue it was judged by; a test pins it, so the catalogue cannot change without
//! someone deciding whether the contract changed.

use std::collections::BTreeSet;

use crate::gates::rules::{CATALOGUE, SPEC};

/// The heading SPEC's changelog begins with.
const SECTION: &str = "## 12. The contract's versions";
/// Each version's heading: `### Contract <n>`.
const VERSION_HEADING: &str = "### Contract ";

/// The version a record without one is taken to hold: it was made before the contract had a
/// version, under contract 1 or an earlier text of it.
pub const UNVERSIONED: u32 = 1;

/// One changelog entry: the rules a contract version added and changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub version: u32,
    pub added: Vec<String>,
    pub changed: Vec<String>,
}

/// A changelog SPEC's text does not spell as §12 says.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChangelogError {
    #[error("spec has no section {SECTION:?}")]
    NoSection,
    #[error("changelog heading {0:?} is not `### Contract <n>`")]
    BadHeading(String),
    #[error("changelog versions are not n, n-1, …, 1 from the top: {0:?}")]
    NotConsecutive(Vec<u32>),
    #[error("changelog line {0:?} is neither `- added: R…` nor `- R<n>.<m> changed: …`")]
    BadLine(String),
}

/// SPEC §12's changelog, newest first. Pure: `spec` is the text.
pub fn parse(spec: &str) -> Result<Vec<Entry>, ChangelogError> {
    let at = spec.find(SECTION).ok_or(ChangelogError::NoSection)?;
    let body = &spec[at + SECTION.len()..];
    let body = body.find("\n## ").map_or(body, |end| &body[..end]);
    let mut entries: Vec<Entry> = Vec::new();
    // Inside an `added:` list, which may wrap: its indented continuation lines carry ids too.
    let mut in_added = false;
    for line in body.lines() {
        if let Some(rest) = line.strip_prefix(VERSION_HEADING) {
            let version = rest
                .trim()
                .parse()
                .map_err(|_| ChangelogError::BadHeading(line.into()))?;
            entries.push(Entry {
                version,
                added: Vec::new(),
                changed: Vec::new(),
            });
            in_added = false;
            continue;
        }
        let Some(entry) = entries.last_mut() else {
            continue; // the section's prose, before the first version
        };
        if line.starts_with('#') {
            return Err(ChangelogError::BadHeading(line.into()));
        }
        let Some(item) = line.strip_prefix("- ") else {
            if in_added && line.starts_with("  ") {
                entry.added.extend(rule_ids(line));
            } else {
                in_added = false;
            }
            continue; // a bullet's continuation, or a blank line
        };
        in_added = false;
        if let Some(list) = item.strip_prefix("added:") {
            entry.added.extend(rule_ids(list));
            in_added = true;
            continue;
        }
        match item.split_once(' ') {
            Some((id, rest)) if is_rule_id(id) && rest.starts_with("changed:") => {
                entry.changed.push(id.into());
            }
            Some((id, rest)) if is_rule_id(id) && rest.starts_with("added:") => {
                entry.added.push(id.into());
            }
            _ => return Err(ChangelogError::BadLine(line.into())),
        }
    }
    let versions: Vec<u32> = entries.iter().map(|e| e.version).collect();
    let want: Vec<u32> = (1..=versions.len() as u32).rev().collect();
    if versions != want {
        return Err(ChangelogError::NotConsecutive(versions));
    }
    Ok(entries)
}

fn is_rule_id(s: &str) -> bool {
    let Some(rest) = s.strip_prefix('R') else {
        return false;
    };
    let mut parts = rest.splitn(2, '.');
    let digits =
        |p: Option<&str>| p.is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    digits(parts.next()) && digits(parts.next())
}

/// The rule ids in a comma-separated list.
fn rule_ids(list: &str) -> impl Iterator<Item = String> + '_ {
    list.split(',')
        .map(str::trim)
        .filter(|s| is_rule_id(s))
        .map(String::from)
}

/// The changelog of the SPEC built into `emq-gate` (the one the catalogue describes).
fn changelog() -> Vec<Entry> {
    // SPEC is built in; a test parses it, so a bad changelog never ships.
    parse(SPEC).unwrap_or_default()
}

/// The contract this `emq-gate` judges by: the newest version in SPEC §12.
pub fn current() -> u32 {
    changelog().first().map_or(UNVERSIONED, |e| e.version)
}

/// What changed in the contract after version `old`, up to `current()`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Since {
    pub old: u32,
    pub now: u32,
    /// Rules added after `old`: a record of `old` was never judged on them.
    pub added: Vec<String>,
    /// Rules whose requirement changed after `old` (and were not added after it).
    pub changed: Vec<String>,
}

/// The rules added and changed in `entries` after version `old`. Pure.
pub fn since_in(entries: &[Entry], old: u32) -> Since {
    let newer: Vec<&Entry> = entries.iter().filter(|e| e.version > old).collect();
    let added: BTreeSet<&String> = newer.iter().flat_map(|e| &e.added).collect();
    let mut changed: Vec<String> = Vec::new();
    for e in newer.iter().rev() {
        for id in &e.changed {
            if !added.contains(id) && !changed.contains(id) {
                changed.push(id.clone());
            }
        }
    }
    Since {
        old,
        now: entries.first().map_or(old, |e| e.version),
        added: newer
            .iter()
            .rev()
            .flat_map(|e| e.added.iter().cloned())
            .collect(),
        changed,
    }
}

/// What changed since `old` in the built-in SPEC's changelog.
pub fn since(old: u32) -> Since {
    since_in(&changelog(), old)
}

/// What changed after `old` up to `new` (two records' contracts), in the built-in changelog:
/// a diff of contract 1 against 2 says nothing of what 3 added.
pub fn between(old: u32, new: u32) -> Since {
    let entries: Vec<Entry> = changelog()
        .into_iter()
        .filter(|e| e.version <= new)
        .collect();
    since_in(&entries, old)
}

impl Since {
    /// True when the record is of an older contract than this `emq-gate`'s.
    pub fn is_older(&self) -> bool {
        self.old < self.now
    }

    /// The one line `check` says of a record of another contract (`None` when it is current).
    pub fn line(&self, what: &str, versioned: bool) -> Option<String> {
        if self.old > self.now {
            return Some(format!(
                "{what} was made under contract {}, newer than this emq-gate's {}: judge it with \
                 the emq-gate that made it, or a later one",
                self.old, self.now
            ));
        }
        if !self.is_older() {
            return None;
        }
        let list = |ids: &[String]| {
            if ids.is_empty() {
                "none".to_string()
            } else {
                ids.join(", ")
            }
        };
        Some(format!(
            "{what} was made under contract {}{}, this emq-gate judges contract {}: never judged \
             on the rules added since ({}); judged on an older text of {}",
            self.old,
            if versioned { "" } else { " (it names none)" },
            self.now,
            list(&self.added),
            list(&self.changed)
        ))
    }
}

/// The rule catalogue's digest: SHA-1 of every rule's id, summary, checks, cases and gates, one
/// field a line, in the catalogue's order. A rule's ways to break it (with their doubles and
/// reasons) and the reason a rule is unbreakable are left out: they are how the harness tests
/// itself, not what it asks of a connector, so a new double or a reworded way moves no record.
/// A way that needs a new check or case moves the digest through that check or case.
pub fn catalogue_digest() -> String {
    let mut text = String::new();
    for r in CATALOGUE.iter() {
        let gates: Vec<&str> = r.gates.iter().map(|g| g.as_str()).collect();
        text.push_str(&format!(
            "{}\n{}\n{}\n{}\n{}\n\n",
            r.id,
            r.summary,
            r.checks.join("\n"),
            r.cases.join(","),
            gates.join(",")
        ));
    }
    crate::protocol::bundle::sha1_hex(text.as_bytes())
}

/// The digest of SPEC's rule texts: SHA-1 of every unit of §1–§11 (all but §12's changelog,
/// the last section, which names rules without declaring them) that declares a rule
/// (`**R<n>.<m>**`: a bullet with its continuation lines, a table row, or a paragraph), its
/// whitespace collapsed, in SPEC's order. It is pinned beside the catalogue's, so a rule's words
/// in SPEC cannot change either without someone deciding whether the contract did. Pure.
pub fn spec_rules_digest(spec: &str) -> String {
    let start = spec.find("## 1.").unwrap_or(0);
    let end = spec.find(SECTION).unwrap_or(spec.len()).max(start);
    let text = &spec[start..end];
    let mut units: Vec<String> = Vec::new();
    for block in text.split("\n\n") {
        let mut cur: Vec<&str> = Vec::new();
        for line in block.lines() {
            let t = line.trim_start();
            if (t.starts_with("- ") || t.starts_with('|') || t.starts_with('#')) && !cur.is_empty()
            {
                units.push(cur.join(" "));
                cur.clear();
            }
            cur.push(t);
        }
        if !cur.is_empty() {
            units.push(cur.join(" "));
        }
    }
    let declaring: Vec<String> = units
        .into_iter()
        .filter(|u| !crate::gates::rules::spec_ids(u).is_empty())
        .map(|u| u.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    crate::protocol::bundle::sha1_hex(declaring.join("\n").as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The digest of the catalogue contract [`current`] was written for. A change to a rule's
    /// summary, checks, cases or gates changes it: then decide whether a rule now asks for, or
    /// is judged on, something new (add a `### Contract <n+1>` entry to SPEC §12) or only reads
    /// better (keep the version), and pin the new digest here. Either way the committed records
    /// name the old digest and `check` asks for them to be regenerated.
    /// The same goes for SPEC's rule texts ([`spec_rules_digest`]), the third figure.
    const PINNED: (u32, &str, &str) = (
        15,
        "dbd23675f3ebca2eacc74727607dd46131b51b45",
        "34c80f9b622bf5da8cae46efa7a01306ce8a4e75",
    );

    /// README's table of versions names the contract SPEC's changelog is at (it said 7 at 10).
    #[test]
    fn the_readme_names_the_current_contract() {
        let readme = include_str!("../../../README.md");
        let row = format!("| contract | `{}` |", current());
        assert!(
            readme.contains(&row),
            "README's versions table lacks {row:?}"
        );
    }

    #[test]
    fn the_catalogue_has_not_changed_without_a_decision_on_the_contract() {
        assert_eq!(
            (
                current(),
                catalogue_digest().as_str(),
                spec_rules_digest(SPEC).as_str()
            ),
            PINNED,
            "the rule catalogue, a rule's text in SPEC, or SPEC §12 changed: see PINNED's comment"
        );
    }

    #[test]
    fn a_rule_text_changes_the_spec_digest_and_other_prose_does_not() {
        let spec = "## 1. A\n\n- **R1.1** a name is short,\n  over two lines\n- **R1.2** ids\n\n\
                    Prose that names no rule.\n\n| **R5.1** | row |\n\n## 10. Last\n\n- **R10.1** tls\n\n\
                    ## 12. The contract's versions\n\n### Contract 1\n\n- added: R1.1, R1.2, R5.1\n";
        let d = spec_rules_digest(spec);
        assert_ne!(d, spec_rules_digest(&spec.replace("short", "long")));
        assert_ne!(d, spec_rules_digest(&spec.replace("| row |", "| rows |")));
        assert_ne!(d, spec_rules_digest(&spec.replace("tls", "tls, all of it")));
        assert_eq!(
            d,
            spec_rules_digest(&spec.replace("R1.2, R5.1", "R1.2,\n  R5.1")),
            "the changelog is not a rule text"
        );
        assert_eq!(
            d,
            spec_rules_digest(&spec.replace("Prose that", "Other prose that"))
        );
        assert_eq!(
            d,
            spec_rules_digest(&spec.replace(",\n  over", ", over")),
            "rewrapped"
        );
    }

    #[test]
    fn the_built_in_changelog_parses_and_names_every_rule_of_the_catalogue_once() {
        let entries = parse(SPEC).unwrap();
        assert_eq!(entries.last().unwrap().version, 1);
        let added: Vec<&String> = entries.iter().flat_map(|e| &e.added).collect();
        let catalogue: Vec<String> = CATALOGUE.iter().map(|r| r.id.to_string()).collect();
        for id in &catalogue {
            assert_eq!(
                added.iter().filter(|a| a == &&id).count(),
                1,
                "{id} is added by no contract version, or by several: SPEC §12"
            );
        }
        for e in &entries {
            for id in e.added.iter().chain(&e.changed) {
                assert!(catalogue.contains(id), "SPEC §12 names {id}, no rule");
            }
        }
    }

    const SAMPLE: &str = "intro\n\n## 12. The contract's versions\n\nProse with R1.1.\n\n\
        ### Contract 3\n\n- R2.1 added: a new rule\n- R1.1 changed: asks more\n\n\
        ### Contract 2\n\n- R1.1 changed: asks more,\n  over two lines\n- R1.2 changed: x\n\n\
        ### Contract 1\n\n- added: R1.1,\n  R1.2\n\n## 12. After\n\n- not a changelog line\n";

    #[test]
    fn a_changelog_reads_newest_first_with_wrapped_lists() {
        let e = parse(SAMPLE).unwrap();
        assert_eq!(e.len(), 3);
        assert_eq!(e[0].added, ["R2.1"]);
        assert_eq!(e[0].changed, ["R1.1"]);
        assert_eq!(e[2].added, ["R1.1", "R1.2"]);
    }

    #[test]
    fn since_names_what_was_added_and_changed_after_a_version() {
        let e = parse(SAMPLE).unwrap();
        let s = since_in(&e, 1);
        assert_eq!((s.old, s.now), (1, 3));
        assert_eq!(s.added, ["R2.1"]);
        assert_eq!(s.changed, ["R1.1", "R1.2"]);
        let line = s.line("x.json", false).unwrap();
        assert!(line.contains("contract 1 (it names none)"), "{line}");
        assert!(
            line.contains("never judged on the rules added since (R2.1)"),
            "{line}"
        );
        let s = since_in(&e, 3);
        assert!(!s.is_older());
        assert_eq!(s.line("x.json", true), None);
        assert_eq!(since_in(&e, 2).changed, ["R1.1"]);
        let newer = since_in(&e, 4).line("x.json", true).unwrap();
        assert!(
            newer.contains("contract 4, newer than this emq-gate's 3"),
            "{newer}"
        );
    }

    #[test]
    fn a_misspelled_changelog_is_refused() {
        let bad = SAMPLE.replace("- R1.2 changed: x", "- R1.2 was changed");
        assert!(matches!(parse(&bad), Err(ChangelogError::BadLine(_))));
        let gap = SAMPLE.replace("### Contract 2", "### Contract 5");
        assert!(matches!(
            parse(&gap),
            Err(ChangelogError::NotConsecutive(_))
        ));
        assert_eq!(parse("no changelog"), Err(ChangelogError::NoSection));
    }
}
