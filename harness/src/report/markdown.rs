//! The record as Markdown, for people reading a review.

use crate::gates::Verdict;
use crate::report::{Header, Record};

/// One evidence line as a list item. Multi-line evidence (a G7 counterexample: a summary line,
/// then a YAML case) keeps its first line as the item and the rest as a fenced YAML block, so the
/// case can be copied as it is.
fn evidence_item(e: &str) -> String {
    match e.split_once('\n') {
        None => format!("- {e}\n"),
        Some((first, rest)) => {
            let body = rest.trim_end_matches('\n');
            let fence = if body.contains("```") { "````" } else { "```" };
            let lang = if first.starts_with("counterexample") || first.trim_end().ends_with(':') {
                "yaml"
            } else {
                "text"
            };
            let indented: String = body.lines().map(|l| format!("  {l}\n")).collect();
            format!("- {first}\n\n  {fence}{lang}\n{indented}  {fence}\n\n")
        }
    }
}

impl Record {
    /// The Markdown record, shaped like the published one.
    pub fn markdown(&self) -> String {
        let h = &self.header;
        let mut s = String::new();
        s.push_str("# EchoMQ connector gate record\n\n");
        facts_table(&mut s, h);
        s.push_str("\n## Scripts\n\n| script | sha1 |\n|---|---|\n");
        for name in crate::protocol::bundle::SCRIPT_ORDER {
            if let Some(sha) = h.scripts.get(name) {
                s.push_str(&format!("| {name} | `{sha}` |\n"));
            }
        }
        self.gate_sections(&mut s);
        s.push_str("\n## Figures (volatile; not compared)\n\n```\n");
        s.push_str(&figures(self));
        s.push_str("```\n");
        s.push_str(&format!(
            "\n**{}** — ended {}\n",
            self.headline(),
            self.footer.ended
        ));
        s
    }

    /// `FAIL 6/8`, and with a baseline how many failures it expected: the verdict is never
    /// softened, only explained.
    pub fn headline(&self) -> String {
        match &self.baseline {
            Some(b) => b.headline(&self.footer.summary),
            None => self.footer.summary.clone(),
        }
    }
}

/// `2 (catalogue `f68e7143…`)`, or what an unversioned record is taken as.
pub fn contract_label(h: &Header) -> String {
    match (&h.contract_version, &h.catalogue_digest) {
        (Some(v), Some(d)) => format!("{v} (catalogue `{}`)", d.get(..8).unwrap_or(d)),
        (Some(v), None) => v.to_string(),
        (None, _) => format!(
            "{} (the record names none: made before the contract had a version)",
            crate::gates::contract::UNVERSIONED
        ),
    }
}

/// The header as a two-column table: schema, harness, bundle, engine, connector, seed, start.
fn facts_table(s: &mut String, h: &Header) {
    s.push_str("| | |\n|---|---|\n");
    let rows = [
        ("record schema", h.schema.clone()),
        ("harness", h.harness_version.clone()),
        ("contract", contract_label(h)),
        (
            "bundle",
            format!(
                "{} (protocol {}, digest `{}`)",
                h.bundle_version, h.bundle_protocol, h.bundle_digest
            ),
        ),
        (
            "engine",
            if h.engine_kind == "cluster" {
                format!(
                    "cluster ({} primaries, {} replicas), {} (`{}`)",
                    crate::engine::cluster::PRIMARIES,
                    crate::engine::cluster::PRIMARIES
                        * crate::engine::cluster::REPLICAS_PER_PRIMARY,
                    h.engine_label(),
                    h.engine_image
                )
            } else {
                format!(
                    "{} ({} `{}`{})",
                    h.engine_label(),
                    h.engine_kind,
                    h.engine_image,
                    if h.engine_tls {
                        ", TLS only: every connect rediss:// with the run's CA"
                    } else {
                        ""
                    }
                )
            },
        ),
        (
            "engine build",
            if h.engine_source.is_empty() {
                "unknown".to_string()
            } else {
                h.engine_source.clone()
            },
        ),
        (
            "connector",
            format!(
                "{} {} ({})",
                h.connector_name, h.connector_version, h.connector_language
            ),
        ),
        (
            "seed",
            format!("{} ({} histories, batch {})", h.seed, h.histories, h.batch),
        ),
        ("started", h.started.clone()),
    ];
    for (k, v) in rows {
        s.push_str(&format!("| {k} | {v} |\n"));
    }
}

impl Record {
    /// The gates' verdict table, then per gate its evidence and per-case count.
    fn gate_sections(&self, s: &mut String) {
        s.push_str("\n## Gates\n\n| gate | check | verdict |\n|---|---|---|\n");
        let expected = |g: crate::gates::GateId| {
            self.baseline
                .as_ref()
                .and_then(|b| b.expecting(g))
                .map_or(String::new(), |by| {
                    let file = self.baseline.as_ref().map_or("", |b| b.file.as_str());
                    let at: Vec<String> = by.iter().map(|e| format!("{file}:{}", e.line)).collect();
                    format!(" (expected by {})", at.join(", "))
                })
        };
        for g in &self.gates {
            s.push_str(&format!(
                "| {} | {} | **{}**{} |\n",
                g.id,
                g.name,
                g.verdict,
                expected(g.id)
            ));
        }
        for g in &self.gates {
            s.push_str(&format!("\n### {} {} — {}\n\n", g.id, g.name, g.verdict));
            for e in &g.evidence {
                s.push_str(&evidence_item(&e.to_string()));
            }
            if !g.cases.is_empty() {
                let passed = g
                    .cases
                    .iter()
                    .filter(|c| c.verdict == Verdict::Pass)
                    .count();
                s.push_str(&format!(
                    "- per case: {passed} of {} PASS (each case is a testcase in the JUnit file)\n",
                    g.cases.len()
                ));
            }
            if let Some(at) = &g.failed_cases {
                s.push_str(&format!(
                    "- the failing cases' YAML is written to {at}; the line below replays them\n"
                ));
            }
            if let Some(line) = &g.reproduce {
                s.push_str(&format!("- reproduce: `{line}`\n"));
            }
        }
        if let Some(b) = &self.baseline {
            baseline_section(s, b);
        }
    }
}

/// What the baseline made of the run: each expected failure with its reasons, each new one,
/// each entry that passed.
fn baseline_section(s: &mut String, b: &crate::report::baseline::BaselineOutcome) {
    s.push_str(&format!("\n## Baseline `{}`\n\n", b.file));
    for e in &b.expected {
        for by in &e.by {
            s.push_str(&format!(
                "- {} failed, as {}:{} ({}) expects: {}\n",
                e.gate, b.file, by.line, by.id, by.reason
            ));
        }
    }
    for line in b.lines() {
        s.push_str(&format!("- {line}\n"));
    }
    if b.expected.is_empty() && b.new_failures.is_empty() && b.unexpected_passes.is_empty() {
        s.push_str("- nothing failed, and no entry passed\n");
    }
}

/// The volatile figures as aligned `label  value` lines, the labels padded to the longest.
fn figures(r: &Record) -> String {
    let mut rows: Vec<(String, String)> = vec![(
        "engine boot".into(),
        format!("{} ms", r.volatile.engine_boot_ms),
    )];
    for (id, ms) in &r.volatile.gate_wall_ms {
        let waiting = match r.volatile.gate_wait_ms.get(id) {
            Some(w) => format!(" (working {} ms, waiting {w} ms)", ms.saturating_sub(*w)),
            None => String::new(),
        };
        rows.push((format!("{id} wall"), format!("{ms} ms{waiting}")));
    }
    if let Some(s) = &r.volatile.connector_starts {
        rows.push(("connector processes started".into(), s.describe()));
    }
    for (id, figs) in &r.volatile.figures {
        for (k, v) in figs {
            let shown = match v {
                serde_json::Value::String(t) => t.lines().next().unwrap_or("").to_string(),
                other => other.to_string(),
            };
            rows.push((format!("{id} {k}"), shown));
        }
    }
    rows.push(("gate record".into(), r.footer.summary.clone()));
    super::files::aligned(&rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_counterexample_stays_a_yaml_block() {
        let item = evidence_item("counterexample case g7-1:\nid: g7-1\nsteps:\n  - enqueue: {}\n");
        assert_eq!(
            item,
            "- counterexample case g7-1:\n\n  ```yaml\n  id: g7-1\n  steps:\n    - enqueue: {}\n  ```\n\n"
        );
        assert_eq!(evidence_item("one line"), "- one line\n");
    }

    #[test]
    fn long_figure_names_stay_aligned() {
        let mut r: Record =
            serde_json::from_str(include_str!("../../../reports/reference.json")).unwrap();
        r.volatile
            .figures
            .entry("G8".into())
            .or_default()
            .insert("a_rather_long_figure_name_beyond_thirty".into(), 1.into());
        let text = figures(&r);
        let starts: std::collections::BTreeSet<usize> = text
            .lines()
            .map(|l| {
                let label_end = l.find("  ").unwrap();
                label_end + l[label_end..].len() - l[label_end..].trim_start().len()
            })
            .collect();
        assert_eq!(starts.len(), 1, "values start in one column:\n{text}");
    }
}
