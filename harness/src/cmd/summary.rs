//! `emq-gate summary FILE...`: gate records and matrices as one connectors × engines grid.

use std::path::PathBuf;

use crate::cmd::cli::Format;
use crate::error::{ExitCode as Code, HarnessError};
use crate::report::Record;
use crate::report::grid::{Entry, Grid};
use crate::report::matrix::Matrix;
use crate::report::output;

/// Reads each file as a record or a matrix (a JSON Schema or other JSON is skipped with a note)
/// and prints the grid: text (coloured on a terminal) or `json`.
pub fn summary(files: &[PathBuf], format: Format) -> Result<Code, HarnessError> {
    let mut records: Vec<Record> = Vec::new();
    let mut matrices: Vec<Matrix> = Vec::new();
    for f in files {
        let text =
            std::fs::read_to_string(f).map_err(|e| HarnessError::io(f.display().to_string(), e))?;
        let value: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| HarnessError::located(f, e.line() as u64, e.column() as u64, e))?;
        if value.get("cells").is_some() {
            matrices.push(Matrix::load(f)?);
        } else if value.get("header").is_some() {
            records.push(Record::load(f)?);
        } else {
            output::note(&format!(
                "{}: neither a gate record nor a matrix; skipped",
                f.display()
            ));
        }
    }
    let mut entries = Vec::new();
    for m in &matrices {
        for c in &m.cells {
            entries.push(Entry {
                row: c.connector.clone(),
                col: c.engine.clone(),
                outcome: match (&c.record, &c.error) {
                    (Some(r), _) => Ok(r),
                    (None, e) => Err(e.as_deref().unwrap_or("no record")),
                },
            });
        }
    }
    for r in &records {
        entries.push(Entry {
            row: r.header.row_label(),
            col: r.header.engine_column(),
            outcome: Ok(r),
        });
    }
    if entries.is_empty() {
        return Err(HarnessError::BadInput(
            "no gate record or matrix among the files".into(),
        ));
    }
    let grid = Grid::build(entries);
    output::result(&if format == Format::Json {
        crate::report::summary::json(&grid)
    } else {
        crate::report::summary::text(&grid, output::stdout_color())
    });
    Ok(grid.verdict().into())
}
