//! `emq-gate diff OLD NEW`'s logic: what changed between two records or two matrices. Pure (no
//! engine, no files): the command reads the files and prints [`Diff::text`].
//!
//! Verdicts are compared exactly: gates, the rules judged by them (a rule's verdict is that of
//! its own checks: the lines of the gates that judge it which cite it or cite no rule, and its
//! own cases in place of G6's whole verdict), and G6's cases. Figures (times, rates and counts in `volatile`) vary from run to run, so only a move
//! beyond [`NOISE`] is reported: a verdict change is what the exit code says.

mod text;

use std::collections::{BTreeMap, BTreeSet};

use crate::gates::rules::CATALOGUE;
use crate::gates::{GateId, Verdict};
use crate::report::Record;

/// The noise rule, as printed: a figure moved when one side is at least [`FACTOR`] times the
/// other and the two differ by at least [`FLOOR`] (in the figure's own unit). A factor of two
/// is beyond what a shared two-core machine does to a rate or a time between runs; the floor
/// keeps small counts (3 → 7 connections) and short times (4 → 9 ms) quiet.
pub const NOISE: &str = "a figure moved when one side is at least twice the other and they \
                         differ by 10 or more";
pub const FACTOR: f64 = 2.0;
pub const FLOOR: f64 = 10.0;

/// One side of a diff: its cells, `connector×engine` → the record (or why there is none).
#[derive(Debug, Clone, Default)]
pub struct Side {
    /// The file, as the user named it.
    pub name: String,
    pub cells: Vec<(String, Result<Record, String>)>,
    /// A record file (one cell), not a matrix: against a matrix, only its cell is compared.
    pub from_record: bool,
}

impl Side {
    /// A side holding one record.
    pub fn record(name: &str, r: Record) -> Self {
        Self {
            name: name.into(),
            cells: vec![(key_of(&r), Ok(r))],
            from_record: true,
        }
    }

    /// The contract versions of its records, each once, in order.
    pub fn contracts(&self) -> Vec<u32> {
        let set: BTreeSet<u32> = self
            .cells
            .iter()
            .filter_map(|(_, r)| r.as_ref().ok())
            .map(|r| r.header.contract())
            .collect();
        set.into_iter().collect()
    }

    /// True when some record on this side names no contract (made before it had a version).
    fn unversioned(&self) -> bool {
        self.cells
            .iter()
            .filter_map(|(_, r)| r.as_ref().ok())
            .any(|r| r.header.contract_version.is_none())
    }
}

/// A record's cell: `<connector>×<engine>`, the connector labelled as a matrix labels it.
pub fn key_of(r: &Record) -> String {
    crate::report::matrix::cell_key(&r.header.row_label(), &r.header.engine_column())
}

/// A verdict that changed: of a gate, a rule or a case. `None`: absent on that side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub id: String,
    pub old: Option<Verdict>,
    pub new: Option<Verdict>,
    /// For a rule, what judged it on the new side (`G5`, `G6: case-a, case-b`).
    pub via: String,
}

/// A figure that moved beyond [`NOISE`].
#[derive(Debug, Clone, PartialEq)]
pub struct Moved {
    /// `G5.batch_ops_per_s`, `G7.wall_ms`.
    pub name: String,
    pub old: f64,
    pub new: f64,
}

/// One cell on both sides (or on one).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CellDiff {
    /// `python×valkey-9.1`; `old → new` when two records of different cells were compared.
    pub key: String,
    /// `PASS 8/8`, `ERROR (no record: why)`, or `absent`.
    pub old: String,
    pub new: String,
    pub gates: Vec<Change>,
    pub rules: Vec<Change>,
    pub cases: Vec<Change>,
    pub figures: Vec<Moved>,
}

impl CellDiff {
    /// True when any verdict changed: the cell's own, a gate's, a rule's or a case's.
    pub fn verdict_changed(&self) -> bool {
        self.old != self.new
            || !self.gates.is_empty()
            || !self.rules.is_empty()
            || !self.cases.is_empty()
    }
}

/// The whole diff.
#[derive(Debug, Clone, Default)]
pub struct Diff {
    pub old_name: String,
    pub new_name: String,
    pub old_contracts: Vec<u32>,
    pub new_contracts: Vec<u32>,
    pub old_unversioned: bool,
    pub new_unversioned: bool,
    pub cells: Vec<CellDiff>,
}

impl Diff {
    /// True when any verdict changed (the command's exit 1).
    pub fn verdict_changed(&self) -> bool {
        self.cells.iter().any(CellDiff::verdict_changed)
    }
}

/// `old` against `new`, cell by cell (by key; two records are compared whatever their cells, and
/// a record against a matrix on its own cell only). Cells in the order they first appear, old
/// side first.
pub fn diff(old: &Side, new: &Side) -> Diff {
    let mut cells = Vec::new();
    // A record against a matrix: the record's cell is the only one both sides speak of.
    let only: Option<&str> = match (old.from_record, new.from_record) {
        (true, false) => old.cells.first().map(|(k, _)| k.as_str()),
        (false, true) => new.cells.first().map(|(k, _)| k.as_str()),
        _ => None,
    };
    if old.from_record && new.from_record && old.cells.len() == 1 && new.cells.len() == 1 {
        let ((ka, a), (kb, b)) = (&old.cells[0], &new.cells[0]);
        let key = if ka == kb {
            ka.clone()
        } else {
            format!("{ka} → {kb}")
        };
        cells.push(cell(key, Some(a), Some(b)));
    } else {
        let olds: BTreeMap<&str, &Result<Record, String>> =
            old.cells.iter().map(|(k, r)| (k.as_str(), r)).collect();
        let news: BTreeMap<&str, &Result<Record, String>> =
            new.cells.iter().map(|(k, r)| (k.as_str(), r)).collect();
        let mut seen = BTreeSet::new();
        for (k, _) in old.cells.iter().chain(&new.cells) {
            if only.is_none_or(|o| o == k) && seen.insert(k.as_str()) {
                cells.push(cell(
                    k.clone(),
                    olds.get(k.as_str()).copied(),
                    news.get(k.as_str()).copied(),
                ));
            }
        }
    }
    Diff {
        old_name: old.name.clone(),
        new_name: new.name.clone(),
        old_contracts: old.contracts(),
        new_contracts: new.contracts(),
        old_unversioned: old.unversioned(),
        new_unversioned: new.unversioned(),
        cells,
    }
}

type CellSide<'a> = Option<&'a Result<Record, String>>;

fn ok<'a>(side: CellSide<'a>) -> Option<&'a Record> {
    side.and_then(|r| r.as_ref().ok())
}

fn outcome(side: CellSide<'_>) -> String {
    match side {
        None => "absent".into(),
        Some(Ok(r)) => r.footer.summary.clone(),
        Some(Err(e)) => format!("ERROR (no record: {})", e.lines().next().unwrap_or("")),
    }
}

fn cell(key: String, old: CellSide<'_>, new: CellSide<'_>) -> CellDiff {
    let mut d = CellDiff {
        key,
        old: outcome(old),
        new: outcome(new),
        ..CellDiff::default()
    };
    let (a, b) = (ok(old), ok(new));
    // A cell with no record on one side changed as a whole: its line says so, and listing every
    // gate, rule and case as absent would bury it.
    let (Some(rec_a), Some(rec_b)) = (a, b) else {
        return d;
    };
    let (a, b) = (Some(rec_a), Some(rec_b));
    let gates = |r: Option<&Record>| -> BTreeMap<String, Verdict> {
        r.map(|r| {
            r.gates
                .iter()
                .map(|g| (format!("{} {}", g.id, g.name), g.verdict))
                .collect()
        })
        .unwrap_or_default()
    };
    d.gates = changes(&gates(a), &gates(b), &BTreeMap::new());
    let (ra, rb) = (rules(a), rules(b));
    let via: BTreeMap<String, String> = rb
        .iter()
        .map(|(k, (_, v))| (k.clone(), v.clone()))
        .collect();
    let plain = |m: &BTreeMap<String, (Verdict, String)>| -> BTreeMap<String, Verdict> {
        m.iter().map(|(k, (v, _))| (k.clone(), *v)).collect()
    };
    d.rules = changes(&plain(&ra), &plain(&rb), &via);
    d.cases = changes(&cases(a), &cases(b), &BTreeMap::new());
    d.figures = moved(&figures(rec_a), &figures(rec_b));
    d
}

/// Each id whose verdict differs between `a` and `b` (or that is on one side only), in id order.
fn changes(
    a: &BTreeMap<String, Verdict>,
    b: &BTreeMap<String, Verdict>,
    via: &BTreeMap<String, String>,
) -> Vec<Change> {
    let ids: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    ids.into_iter()
        .filter_map(|id| {
            let (old, new) = (a.get(id).copied(), b.get(id).copied());
            (old != new).then(|| Change {
                id: id.clone(),
                old,
                new,
                via: via.get(id).cloned().unwrap_or_default(),
            })
        })
        .collect()
}

fn cases(r: Option<&Record>) -> BTreeMap<String, Verdict> {
    r.map(|r| {
        r.gates
            .iter()
            .flat_map(|g| &g.cases)
            .map(|c| (c.id.clone(), c.verdict))
            .collect()
    })
    .unwrap_or_default()
}

/// Each rule of the (built-in) catalogue that `r` judged, with its verdict and what judged it:
/// the gates its checks name and the gates whose lines cite it, each by the lines that concern
/// the rule ([`crate::gates::rules::cited`]: a FAIL citing R5.13 fails R5.13 alone, a line
/// citing no rule every rule of its gate), and its own cases where G6 is among them (G6's whole
/// verdict when the record has none of them). A gate NOT RUN says nothing of a rule; a rule
/// whose every gate was NOT RUN is NOT RUN; one no gate speaks of is left out.
pub fn rules(r: Option<&Record>) -> BTreeMap<String, (Verdict, String)> {
    use crate::gates::rules::cited;
    let Some(r) = r else {
        return BTreeMap::new();
    };
    let case_verdicts = cases(Some(r));
    let mut out = BTreeMap::new();
    for rule in CATALOGUE.iter() {
        let judged_by = rule.judged_by();
        let mut verdicts = Vec::new();
        let mut via = Vec::new();
        let mut left_out = Vec::new();
        for gate in &r.gates {
            let judges = judged_by.contains(&gate.id);
            if judges && !gate.verdict.was_run() {
                left_out.push(gate.id.to_string());
            }
            let own: Vec<(&str, Verdict)> = rule
                .cases
                .iter()
                .filter_map(|c| case_verdicts.get(*c).map(|v| (*c, *v)))
                .collect();
            if gate.id == GateId::G6 && judges && gate.verdict.was_run() && !own.is_empty() {
                verdicts.extend(own.iter().map(|(_, v)| *v));
                via.push(format!(
                    "G6: {}",
                    own.iter().map(|(c, _)| *c).collect::<Vec<_>>().join(", ")
                ));
            } else if let Some(v) =
                cited::verdict_for(gate.verdict, &gate.evidence, rule.id, judges)
            {
                verdicts.push(v);
                via.push(gate.id.to_string());
            }
        }
        if !verdicts.is_empty() {
            out.insert(
                rule.id.to_string(),
                (Verdict::of_all(verdicts), via.join("; ")),
            );
        } else if !left_out.is_empty() {
            // Every gate that judges it was left out of the run: NOT RUN, said as such.
            out.insert(rule.id.to_string(), (Verdict::NotRun, left_out.join("; ")));
        }
    }
    out
}

/// A record's numeric figures, `gate.name` (one level of nesting: `gate.name.key`), and each
/// gate's wall time as `gate.wall_ms`.
fn figures(r: &Record) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for (gate, figs) in &r.volatile.figures {
        for (name, v) in figs {
            match v {
                serde_json::Value::Number(n) => {
                    if let Some(x) = n.as_f64() {
                        out.insert(format!("{gate}.{name}"), x);
                    }
                }
                serde_json::Value::Object(o) => {
                    for (k, v) in o {
                        if let Some(x) = v.as_f64() {
                            out.insert(format!("{gate}.{name}.{k}"), x);
                        }
                    }
                }
                _ => {}
            }
        }
    }
    for (gate, ms) in &r.volatile.gate_wall_ms {
        out.insert(format!("{gate}.wall_ms"), *ms as f64);
    }
    out
}

/// True when `a` → `b` is beyond [`NOISE`].
pub fn beyond_noise(a: f64, b: f64) -> bool {
    let (lo, hi) = if a.abs() <= b.abs() {
        (a.abs(), b.abs())
    } else {
        (b.abs(), a.abs())
    };
    (a - b).abs() >= FLOOR && hi >= FACTOR * lo
}

/// The figures on both sides that moved beyond [`NOISE`], by name.
fn moved(a: &BTreeMap<String, f64>, b: &BTreeMap<String, f64>) -> Vec<Moved> {
    a.iter()
        .filter_map(|(name, &old)| {
            let &new = b.get(name)?;
            beyond_noise(old, new).then(|| Moved {
                name: name.clone(),
                old,
                new,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests;
