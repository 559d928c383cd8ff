//! Connectors × engines at a glance: the grid the matrix page, its Markdown and `emq-gate summary`
//! all show, built from records alone (pure; no engine).

use serde::Serialize;

use crate::gates::Verdict;
use crate::report::Record;

/// One cell's source: a record, or why there is none (the engine did not boot, ...).
pub struct Entry<'a> {
    /// The row: a connector label (`reference`, `python`) or name.
    pub row: String,
    /// The column: an engine name (`valkey-9.1`).
    pub col: String,
    pub outcome: Result<&'a Record, &'a str>,
}

/// What a cell shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cell {
    pub row: String,
    pub col: String,
    /// PASS when every gate passed; FAIL when any failed; ERROR otherwise (or no record).
    pub verdict: Verdict,
    /// `PASS 8/8`, `FAIL 7/8`, `ERROR`.
    pub summary: String,
    pub passed: usize,
    pub total: usize,
    /// Each gate's verdict, in order: `("G1", PASS)`.
    pub gates: Vec<(crate::gates::GateId, Verdict)>,
    /// `G8 atomicity: <the first violation>`, or the infrastructure error.
    pub first_violation: Option<String>,
    /// `echomq-python 0.1.0`.
    pub connector: String,
    /// `valkey 9.1.2`.
    pub engine: String,
    /// Sum of the gates' wall times.
    pub wall_ms: u64,
    pub seed: Option<u64>,
}

/// Rows × columns, in the order they first appear.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Grid {
    pub rows: Vec<String>,
    pub cols: Vec<String>,
    /// The engine each column ran (`valkey 9.1.2`), from its first record.
    pub col_labels: Vec<String>,
    pub cells: Vec<Cell>,
}

impl Cell {
    fn of(row: String, col: String, outcome: Result<&Record, &str>) -> Self {
        match outcome {
            Err(why) => Self {
                row,
                col,
                verdict: Verdict::Error,
                summary: Verdict::Error.to_string(),
                passed: 0,
                total: crate::gates::ALL.len(),
                gates: Vec::new(),
                first_violation: Some(why.lines().next().unwrap_or("").to_string()),
                connector: String::new(),
                engine: String::new(),
                wall_ms: 0,
                seed: None,
            },
            Ok(r) => {
                let verdict = r.verdict();
                let first_violation = r
                    .gates
                    .iter()
                    .filter(|g| g.verdict != Verdict::Pass)
                    .find_map(|g| {
                        g.first_violation()
                            .map(|v| format!("{} {}: {v}", g.id, g.name))
                    });
                Self {
                    row,
                    col,
                    verdict,
                    // A footer that is no count (`TLS not certified`) is said as it is; a
                    // partial run says what it left out (`PASS 1/1 (7 not run)`).
                    summary: if r.footer.summary.contains('/') {
                        r.count().headline()
                    } else {
                        r.footer.summary.clone()
                    },
                    passed: r.footer.passed,
                    total: r.footer.total,
                    gates: r.gates.iter().map(|g| (g.id, g.verdict)).collect(),
                    first_violation,
                    connector: format!(
                        "{} {}",
                        r.header.connector_name, r.header.connector_version
                    ),
                    engine: r.header.engine_label(),
                    wall_ms: r.volatile.gate_wall_ms.values().sum(),
                    seed: Some(r.header.seed),
                }
            }
        }
    }
}

impl Grid {
    /// The grid of `entries`; a second entry for a cell already filled is dropped.
    pub fn build(entries: Vec<Entry<'_>>) -> Self {
        let mut g = Self {
            rows: Vec::new(),
            cols: Vec::new(),
            col_labels: Vec::new(),
            cells: Vec::new(),
        };
        for e in entries {
            if g.get(&e.row, &e.col).is_some() {
                continue;
            }
            if !g.rows.contains(&e.row) {
                g.rows.push(e.row.clone());
            }
            if !g.cols.contains(&e.col) {
                g.cols.push(e.col.clone());
                g.col_labels.push(String::new());
            }
            let cell = Cell::of(e.row, e.col, e.outcome);
            let ci = g.cols.iter().position(|c| *c == cell.col).unwrap_or(0);
            if g.col_labels[ci].is_empty() {
                g.col_labels[ci] = cell.engine.clone();
            }
            g.cells.push(cell);
        }
        g
    }

    /// The cell at `row` × `col`.
    pub fn get(&self, row: &str, col: &str) -> Option<&Cell> {
        self.cells.iter().find(|c| c.row == row && c.col == col)
    }

    /// Cells that did not pass, in row-major order.
    pub fn not_passing(&self) -> Vec<&Cell> {
        let mut out = Vec::new();
        for r in &self.rows {
            for c in &self.cols {
                if let Some(cell) = self.get(r, c).filter(|x| x.verdict != Verdict::Pass) {
                    out.push(cell);
                }
            }
        }
        out
    }

    /// True when every cell is filled and passed.
    pub fn all_pass(&self) -> bool {
        self.verdict() == Verdict::Pass
    }

    /// The grid's one verdict: PASS when every cell is there and passed, FAIL when a cell
    /// failed, else ERROR (a cell missing or not judged).
    pub fn verdict(&self) -> Verdict {
        let complete = self.cells.len() == self.rows.len() * self.cols.len();
        match Verdict::of_all(self.cells.iter().map(|c| c.verdict)) {
            Verdict::Pass if !complete => Verdict::Error,
            v => v,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The committed reference record, with `engine` and the G8 verdict changed.
    pub(crate) fn record(connector: &str, product: &str, version: &str, g8_fail: bool) -> Record {
        let mut r: Record =
            serde_json::from_str(include_str!("../../../reports/reference.json")).unwrap();
        r.header.connector_name = connector.into();
        r.header.engine_product = product.into();
        r.header.engine_version = version.into();
        if g8_fail {
            r.gates[7].verdict = Verdict::Fail;
            r.gates[7].evidence.insert(
                1,
                crate::gates::Evidence::new(
                    crate::gates::Severity::Fail,
                    "a job was lost <j1> & \"j2\"",
                ),
            );
            r.footer.passed = 7;
            r.footer.summary = "FAIL 7/8".into();
        }
        r
    }

    #[test]
    fn cells_land_in_order_with_their_verdicts() {
        let a = record("ref", "valkey", "9.1.2", false);
        let b = record("ref", "redis", "7.0.15", true);
        let c = record("py", "valkey", "9.1.2", false);
        let grid = Grid::build(vec![
            Entry {
                row: "ref".into(),
                col: "valkey-9.1".into(),
                outcome: Ok(&a),
            },
            Entry {
                row: "ref".into(),
                col: "redis-7.0".into(),
                outcome: Ok(&b),
            },
            Entry {
                row: "py".into(),
                col: "valkey-9.1".into(),
                outcome: Ok(&c),
            },
            Entry {
                row: "py".into(),
                col: "redis-7.0".into(),
                outcome: Err("engine: redis-server exited"),
            },
            Entry {
                row: "py".into(),
                col: "redis-7.0".into(),
                outcome: Ok(&c),
            },
        ]);
        assert_eq!(grid.rows, ["ref", "py"]);
        assert_eq!(grid.cols, ["valkey-9.1", "redis-7.0"]);
        assert_eq!(grid.col_labels, ["valkey 9.1.2", "redis 7.0.15"]);
        assert_eq!(grid.cells.len(), 4, "the duplicate is dropped");
        assert_eq!(grid.get("ref", "valkey-9.1").unwrap().summary, "PASS 8/8");
        let fail = grid.get("ref", "redis-7.0").unwrap();
        assert_eq!(fail.summary, "FAIL 7/8");
        assert_eq!(
            fail.first_violation.as_deref(),
            Some("G8 atomicity: a job was lost <j1> & \"j2\"")
        );
        let err = grid.get("py", "redis-7.0").unwrap();
        assert_eq!(
            (err.verdict, err.summary.as_str()),
            (Verdict::Error, "ERROR")
        );
        assert_eq!(grid.not_passing().len(), 2);
        assert!(!grid.all_pass());
    }
}
