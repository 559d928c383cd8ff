//! The record as Markdown, for people reading a review.

use crate::report::Record;

impl Record {
    /// The Markdown record, shaped like the published one.
    pub fn markdown(&self) -> String {
        let h = &self.header;
        let mut s = String::new();
        s.push_str("# EchoMQ connector gate record\n\n");
        s.push_str("| | |\n|---|---|\n");
        let rows = [
            ("record schema", h.schema.clone()),
            ("harness", h.harness_version.clone()),
            (
                "bundle",
                format!(
                    "{} (protocol {}, digest `{}`)",
                    h.bundle_version, h.bundle_protocol, h.bundle_digest
                ),
            ),
            (
                "engine",
                format!(
                    "{} `{}`, valkey {}",
                    h.engine_kind, h.engine_image, h.valkey_version
                ),
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
        s.push_str("\n## Scripts\n\n| script | sha1 |\n|---|---|\n");
        for name in crate::protocol::bundle::SCRIPT_ORDER {
            if let Some(sha) = h.scripts.get(name) {
                s.push_str(&format!("| {name} | `{sha}` |\n"));
            }
        }
        s.push_str("\n## Gates\n\n| gate | check | verdict |\n|---|---|---|\n");
        for g in &self.gates {
            s.push_str(&format!("| {} | {} | **{}** |\n", g.id, g.name, g.verdict));
        }
        for g in &self.gates {
            s.push_str(&format!("\n### {} {} — {}\n\n", g.id, g.name, g.verdict));
            for e in &g.evidence {
                s.push_str(&format!("- {}\n", e.replace('\n', " ")));
            }
        }
        s.push_str("\n## Figures (volatile; not compared)\n\n```\n");
        s.push_str(&figures(self));
        s.push_str("```\n");
        s.push_str(&format!(
            "\n**{}** — ended {}\n",
            self.footer.summary, self.footer.ended
        ));
        s
    }
}

/// The volatile figures as aligned `label  value` lines, the labels padded to the longest.
fn figures(r: &Record) -> String {
    let mut rows: Vec<(String, String)> = vec![(
        "engine boot".into(),
        format!("{} ms", r.volatile.engine_boot_ms),
    )];
    for (id, ms) in &r.volatile.gate_wall_ms {
        rows.push((format!("{id} wall"), format!("{ms} ms")));
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
    let width = rows
        .iter()
        .map(|(k, _)| k.chars().count())
        .max()
        .unwrap_or(0)
        + 2;
    rows.iter()
        .map(|(k, v)| format!("{k:<width$}{v}\n"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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
