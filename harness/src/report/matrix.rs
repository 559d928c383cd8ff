//! The engine matrix: chosen connectors × engines, one gate record per cell, written as
//! `matrix.json` (machines), `matrix.md` (review) and `index.html` (people).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::HarnessError;
use crate::gates::Verdict;
use crate::report::Record;
use crate::report::grid::{Entry, Grid};

/// The matrix file's schema name.
pub const MATRIX_SCHEMA: &str = "emq-gate-matrix/1";

/// One connector × engine run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MatrixCell {
    /// The connector's label: `reference`, `python`, `node`.
    pub connector: String,
    /// The engine's name: `valkey-9.1`.
    pub engine: String,
    /// The record, when the run could judge anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<Record>,
    /// Why there is no record (the engine did not boot, the connector did not start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Times: recorded, never compared.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MatrixVolatile {
    pub started: String,
    pub ended: String,
    /// The whole matrix, engines' boots included.
    pub wall_ms: u64,
    /// Each cell, `connector×engine` → ms, boot included.
    pub cell_wall_ms: BTreeMap<String, u64>,
}

/// What a share's `matrix.json` says of itself (`crate::report::shares`): how its cells were
/// chosen, and which they are.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Share {
    pub selection: String,
    pub cells: Vec<String>,
}

/// A whole matrix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Matrix {
    pub schema: String,
    pub harness_version: String,
    /// `binary`, `container` or `auto`: how each engine was booted.
    pub engine_kind: String,
    pub seed: u64,
    pub histories: u32,
    pub batch: i64,
    /// Row order.
    pub connectors: Vec<String>,
    /// Column order.
    pub engines: Vec<String>,
    pub cells: Vec<MatrixCell>,
    /// Set on a share of a matrix (`--partition`, `--cells`, `--skip-cells`): which cells it
    /// judged. A committed matrix is whole and has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share: Option<Share>,
    pub volatile: MatrixVolatile,
}

/// `reference×valkey-9.1`.
pub fn cell_key(connector: &str, engine: &str) -> String {
    format!("{connector}×{engine}")
}

/// The committed record that is this cell, when there is one: `reports/<connector>.json` on the
/// pinned engine (the first of the default engines), `<connector>-cluster.json` on its cluster,
/// `<connector>-tls.json` over TLS and `<connector>-tls-cluster.json` on its TLS cluster.
/// The records and the matrix are one set of cells, judged once: `matrix --check` compares
/// both, and `matrix` writes both.
pub fn record_stem(connector: &str, engine: &str) -> Option<String> {
    use crate::engine::named::{CLUSTER_SUFFIX, DEFAULT_NAMES, SENTINEL_SUFFIX, TLS_SUFFIX};
    let suffix = engine.strip_prefix(DEFAULT_NAMES[0])?;
    [
        "".to_string(),
        CLUSTER_SUFFIX.to_string(),
        TLS_SUFFIX.to_string(),
        format!("{TLS_SUFFIX}{CLUSTER_SUFFIX}"),
        SENTINEL_SUFFIX.to_string(),
        format!("{TLS_SUFFIX}{SENTINEL_SUFFIX}"),
    ]
    .contains(&suffix.to_string())
    .then(|| format!("{connector}{suffix}"))
}

impl Matrix {
    /// The grid of the cells, rows and columns in the matrix's order.
    pub fn grid(&self) -> Grid {
        let mut entries = Vec::new();
        for c in &self.connectors {
            for e in &self.engines {
                if let Some(cell) = self.cell(c, e) {
                    entries.push(Entry {
                        row: c.clone(),
                        col: e.clone(),
                        outcome: match (&cell.record, &cell.error) {
                            (Some(r), _) => Ok(r),
                            (None, Some(err)) => Err(err.as_str()),
                            (None, None) => Err("no record"),
                        },
                    });
                }
            }
        }
        Grid::build(entries)
    }

    pub fn cell(&self, connector: &str, engine: &str) -> Option<&MatrixCell> {
        self.cells
            .iter()
            .find(|c| c.connector == connector && c.engine == engine)
    }

    /// True when every cell passed.
    pub fn passed(&self) -> bool {
        self.grid().all_pass()
    }

    /// True when a cell's record names its contract and `old`'s same cell names none (see
    /// [`Record::names_more_than`]): the committed matrix is rewritten to name it.
    pub fn names_more_than(&self, old: &Matrix) -> bool {
        self.cells.iter().any(|c| {
            let was = old
                .cell(&c.connector, &c.engine)
                .and_then(|o| o.record.as_ref());
            matches!((&c.record, was), (Some(n), Some(o)) if n.names_more_than(o))
        })
    }

    /// Reads a committed matrix.
    pub fn load(path: &Path) -> Result<Self, HarnessError> {
        crate::report::files::load_json(path, "a gate matrix")
    }

    /// What `matrix --check` compares: the shape, and each cell's stable record fields.
    pub fn stable_differences(&self, committed: &Matrix) -> Vec<String> {
        let mut out = Vec::new();
        for (name, want, got) in [
            ("schema", &committed.schema, &self.schema),
            (
                "harness_version",
                &committed.harness_version,
                &self.harness_version,
            ),
        ] {
            if want != got {
                out.push(format!("{name}: committed {want:?}, now {got:?}"));
            }
        }
        if committed.connectors != self.connectors || committed.engines != self.engines {
            out.push(format!(
                "shape: committed {:?} × {:?}, now {:?} × {:?}",
                committed.connectors, committed.engines, self.connectors, self.engines
            ));
        }
        for c in &committed.cells {
            let key = cell_key(&c.connector, &c.engine);
            let Some(n) = self.cell(&c.connector, &c.engine) else {
                out.push(format!("{key}: not run now"));
                continue;
            };
            match (&c.record, &n.record) {
                (Some(a), Some(b)) => {
                    for d in b.stable_differences(a) {
                        out.push(format!("{key}: {d}"));
                    }
                }
                (None, None) => {
                    if c.error != n.error {
                        out.push(format!(
                            "{key}: committed error {:?}, now {:?}",
                            c.error, n.error
                        ));
                    }
                }
                (Some(_), None) => out.push(format!(
                    "{key}: committed a record, now none: {}",
                    n.error.as_deref().unwrap_or("")
                )),
                (None, Some(_)) => out.push(format!("{key}: committed no record, now one")),
            }
        }
        out
    }

    /// The Markdown page: the grid, each cell's gates, the violations with their evidence, the
    /// wall times.
    pub fn markdown(&self) -> String {
        let grid = self.grid();
        let mut s = String::from("# EchoMQ engine matrix\n\n");
        s.push_str(&format!(
            "Schema {}, harness {}, {} engines, seed {} ({} histories, batch {}). \
             Regenerate with `emq-gate matrix`; CI runs `emq-gate matrix --check`.\n\n",
            self.schema,
            self.harness_version,
            self.engine_kind,
            self.seed,
            self.histories,
            self.batch
        ));
        grid_table(&mut s, &grid);
        gates_per_cell(&mut s, &grid);
        self.engines_table(&mut s);
        self.not_passing(&mut s, &grid);
        self.wall_times(&mut s);
        s
    }

    /// The engines the matrix ran on: label and server build.
    fn engines_table(&self, s: &mut String) {
        s.push_str("\n## Engines\n\n| engine | server | build |\n|---|---|---|\n");
        for e in &self.engines {
            if let Some(r) = self
                .cells
                .iter()
                .filter(|c| &c.engine == e)
                .find_map(|c| c.record.as_ref())
            {
                s.push_str(&format!(
                    "| {e} | {} | {} |\n",
                    r.header.engine_label(),
                    if r.header.engine_source.is_empty() {
                        "unknown"
                    } else {
                        &r.header.engine_source
                    }
                ));
            }
        }
    }

    /// Each cell that did not pass, with its failed gates' violations.
    fn not_passing(&self, s: &mut String, grid: &Grid) {
        let bad = grid.not_passing();
        s.push_str("\n## Cells that did not pass\n\n");
        if bad.is_empty() {
            s.push_str("None: every cell passed every gate.\n");
        }
        for c in bad {
            s.push_str(&format!(
                "### {} — {}\n\n",
                cell_key(&c.row, &c.col),
                c.summary
            ));
            match self.cell(&c.row, &c.col).and_then(|m| m.record.as_ref()) {
                None => s.push_str(&format!(
                    "- {}\n\n",
                    crate::gates::Evidence::new(
                        crate::gates::Severity::Error,
                        c.first_violation.as_deref().unwrap_or("no record")
                    )
                )),
                Some(r) => {
                    for g in r.gates.iter().filter(|g| g.verdict != Verdict::Pass) {
                        s.push_str(&format!("**{} {} — {}**\n\n", g.id, g.name, g.verdict));
                        for e in g.evidence.iter().filter(|e| e.severity.is_violation()) {
                            s.push_str(&format!(
                                "- {}\n",
                                e.to_string().lines().next().unwrap_or("")
                            ));
                        }
                        s.push('\n');
                    }
                }
            }
        }
    }

    /// Each cell's wall time and the whole matrix's, aligned, then when it ran.
    fn wall_times(&self, s: &mut String) {
        s.push_str("\n## Wall times (volatile; not compared)\n\n```\n");
        let mut rows: Vec<(String, String)> = self
            .volatile
            .cell_wall_ms
            .iter()
            .map(|(k, v)| (k.clone(), format!("{:.1} s", *v as f64 / 1000.0)))
            .collect();
        rows.push((
            "whole matrix".into(),
            format!("{:.1} s", self.volatile.wall_ms as f64 / 1000.0),
        ));
        s.push_str(&crate::report::files::aligned(&rows));
        s.push_str(&format!(
            "```\n\nStarted {}, ended {}.\n",
            self.volatile.started, self.volatile.ended
        ));
    }
}

/// The verdict grid: connectors down, engines across.
fn grid_table(s: &mut String, grid: &Grid) {
    s.push_str("| connector |");
    for (col, label) in grid.cols.iter().zip(&grid.col_labels) {
        s.push_str(&format!(" {col} ({label}) |"));
    }
    s.push_str("\n|---|");
    s.push_str(&"---|".repeat(grid.cols.len()));
    s.push('\n');
    for row in &grid.rows {
        let who = grid
            .cells
            .iter()
            .find(|c| &c.row == row && !c.connector.is_empty())
            .map_or(String::new(), |c| format!(" ({})", c.connector));
        s.push_str(&format!("| {row}{who} |"));
        for col in &grid.cols {
            match grid.get(row, col) {
                Some(c) => s.push_str(&format!(" **{}** |", c.summary)),
                None => s.push_str(" — |"),
            }
        }
        s.push('\n');
    }
}

/// One row per cell: each gate's verdict and the cell's wall time.
fn gates_per_cell(s: &mut String, grid: &Grid) {
    s.push_str("\n## Gates per cell\n\n| cell |");
    for g in &crate::gates::ALL {
        s.push_str(&format!(" {} |", g.id));
    }
    s.push_str(" wall |\n|---|");
    s.push_str(&"---|".repeat(crate::gates::ALL.len() + 1));
    s.push('\n');
    for c in &grid.cells {
        s.push_str(&format!("| {} |", cell_key(&c.row, &c.col)));
        for g in &crate::gates::ALL {
            let v = c
                .gates
                .iter()
                .find(|(id, _)| *id == g.id)
                .map_or("—".to_string(), |(_, v)| v.to_string());
            s.push_str(&format!(" {v} |"));
        }
        s.push_str(&format!(" {:.1} s |\n", c.wall_ms as f64 / 1000.0));
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::report::grid::tests::record;

    #[test]
    fn the_records_are_the_pinned_engines_cells() {
        let stem = |e: &str| record_stem("go", e);
        assert_eq!(stem("valkey-9.1").as_deref(), Some("go"));
        assert_eq!(stem("valkey-9.1-cluster").as_deref(), Some("go-cluster"));
        assert_eq!(stem("valkey-9.1-tls").as_deref(), Some("go-tls"));
        assert_eq!(
            stem("valkey-9.1-tls-cluster").as_deref(),
            Some("go-tls-cluster")
        );
        assert_eq!(stem("valkey-8.1"), None);
        assert_eq!(stem("valkey-9.1-other"), None);
    }

    pub(crate) fn sample() -> Matrix {
        let mut cells = Vec::new();
        for (conn, name) in [
            ("reference", "echomq-rust-reference"),
            ("python", "echomq-python"),
        ] {
            for (eng, product, version) in [
                ("valkey-9.1", "valkey", "9.1.2"),
                ("redis-7.0", "redis", "7.0.15"),
            ] {
                let fail = conn == "python" && product == "redis";
                cells.push(MatrixCell {
                    connector: conn.into(),
                    engine: eng.into(),
                    record: Some(record(name, product, version, fail)),
                    error: None,
                });
            }
        }
        Matrix {
            schema: MATRIX_SCHEMA.into(),
            harness_version: "0.1.0".into(),
            engine_kind: "binary".into(),
            seed: 1,
            histories: 256,
            batch: 100_000,
            connectors: vec!["reference".into(), "python".into()],
            engines: vec!["valkey-9.1".into(), "redis-7.0".into()],
            cells,
            share: None,
            volatile: MatrixVolatile {
                started: "2026-11-30T08:00:00Z".into(),
                ended: "2026-11-30T08:03:00Z".into(),
                wall_ms: 180_000,
                cell_wall_ms: BTreeMap::from([("reference×valkey-9.1".into(), 8_000)]),
            },
        }
    }

    #[test]
    fn a_matrix_whose_records_name_no_contract_is_rewritten_to_name_it() {
        let mut old = sample();
        for c in &mut old.cells {
            c.record.as_mut().unwrap().header.contract_version = None;
        }
        let mut now = old.clone();
        assert!(!now.names_more_than(&old));
        now.cells[1]
            .record
            .as_mut()
            .unwrap()
            .header
            .contract_version = Some(2);
        assert!(now.names_more_than(&old));
        assert!(
            now.stable_differences(&old).is_empty(),
            "and it still holds"
        );
        assert!(!old.names_more_than(&now));
    }

    #[test]
    fn the_markdown_shows_the_grid_and_the_evidence() {
        let md = sample().markdown();
        assert!(
            md.contains("| connector | valkey-9.1 (valkey 9.1.2) | redis-7.0 (redis 7.0.15) |"),
            "{md}"
        );
        assert!(
            md.contains("| python (echomq-python 0.1.0) | **PASS 8/8** | **FAIL 7/8** |"),
            "{md}"
        );
        assert!(md.contains("### python×redis-7.0 — FAIL 7/8"), "{md}");
        assert!(md.contains("- FAIL: a job was lost"), "{md}");
    }

    #[test]
    fn check_compares_cells_but_not_times() {
        let committed = sample();
        let mut fresh = sample();
        fresh.volatile.wall_ms = 1;
        fresh.cells[0]
            .record
            .as_mut()
            .unwrap()
            .volatile
            .engine_boot_ms = 1;
        assert_eq!(fresh.stable_differences(&committed), Vec::<String>::new());
        fresh.cells[1].record.as_mut().unwrap().gates[0].verdict = Verdict::Fail;
        let d = fresh.stable_differences(&committed);
        assert!(
            d.iter()
                .any(|x| x.starts_with("reference×redis-7.0: G1 fence")),
            "{d:?}"
        );
        fresh.engines.pop();
        assert!(
            fresh
                .stable_differences(&committed)
                .iter()
                .any(|x| x.starts_with("shape"))
        );
    }
}
