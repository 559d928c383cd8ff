//! The diff as people read it: each side's contract, then each cell that changed, verdicts first.

use std::fmt::Write;

use super::{Change, Diff, NOISE};
use crate::gates::Verdict;

fn plural(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

fn word(v: Option<Verdict>) -> String {
    v.map_or("absent".into(), |v| v.to_string())
}

fn contracts(versions: &[u32], unversioned: bool) -> String {
    let list: Vec<String> = versions.iter().map(u32::to_string).collect();
    let list = if list.is_empty() {
        "none (no record)".to_string()
    } else {
        list.join(", ")
    };
    if unversioned {
        format!("{list}; unversioned: made before the contract had a version, taken as 1")
    } else {
        list
    }
}

fn change_line(s: &mut String, what: &str, c: &Change) {
    let _ = write!(s, "  {what} {}: {} → {}", c.id, word(c.old), word(c.new));
    if !c.via.is_empty() {
        let _ = write!(s, " ({})", c.via);
    }
    s.push('\n');
}

impl Diff {
    /// The report `emq-gate diff` prints.
    pub fn text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "old: {} (contract {})",
            self.old_name,
            contracts(&self.old_contracts, self.old_unversioned)
        );
        let _ = writeln!(
            s,
            "new: {} (contract {})",
            self.new_name,
            contracts(&self.new_contracts, self.new_unversioned)
        );
        if let (Some(&old), Some(&new)) = (self.old_contracts.first(), self.new_contracts.last())
            && old < new
        {
            let since = crate::gates::contract::between(old, new);
            let list = |ids: &[String]| {
                if ids.is_empty() {
                    "none".to_string()
                } else {
                    ids.join(", ")
                }
            };
            let _ = writeln!(
                s,
                "contract {old} → {new}: rules added since (the old side was never judged on \
                 them): {}; changed since: {}",
                list(&since.added),
                list(&since.changed)
            );
        }
        let (mut verdicts, mut figures) = (0, 0);
        for c in &self.cells {
            if !c.verdict_changed() && c.figures.is_empty() {
                continue;
            }
            if c.old == c.new {
                let _ = writeln!(s, "{}: {}", c.key, c.new);
            } else {
                let _ = writeln!(s, "{}: {} → {}", c.key, c.old, c.new);
            }
            for g in &c.gates {
                change_line(&mut s, "gate", g);
            }
            for r in &c.rules {
                change_line(&mut s, "rule", r);
            }
            for k in &c.cases {
                change_line(&mut s, "case", k);
            }
            for f in &c.figures {
                let ratio = if f.old == 0.0 {
                    "from 0".to_string()
                } else {
                    format!("×{:.2}", f.new / f.old)
                };
                let _ = writeln!(s, "  figure {}: {} → {} ({ratio})", f.name, f.old, f.new);
            }
            verdicts += usize::from(c.verdict_changed());
            figures += c.figures.len();
        }
        let which = match self.cells.as_slice() {
            [one] => format!(" ({})", one.key),
            _ => String::new(),
        };
        let _ = writeln!(
            s,
            "{}{which} compared: {verdicts} with a verdict changed, {} moved (noise: {NOISE})",
            plural(self.cells.len(), "cell"),
            plural(figures, "figure")
        );
        s
    }
}
