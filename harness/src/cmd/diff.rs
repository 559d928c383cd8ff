//! `emq-gate diff OLD NEW`: two records, or two matrices, compared (see [`crate::report::diff`]).

use std::path::Path;

use crate::error::{ExitCode as Code, HarnessError};
use crate::report::Record;
use crate::report::diff::{Side, diff};
use crate::report::matrix::{Matrix, cell_key};
use crate::report::output;

/// Reads both files, prints the diff; exit 1 when a verdict changed (a gate's, a rule's, a
/// case's or a cell's), 0 when none did (figures alone never fail it).
pub fn run(old: &Path, new: &Path) -> Result<Code, HarnessError> {
    let d = diff(&side(old)?, &side(new)?);
    output::result(&d.text());
    Ok(if d.verdict_changed() {
        Code::GateFailed
    } else {
        Code::Pass
    })
}

/// A record file (one cell) or a matrix file (its cells); anything else is bad input.
fn side(path: &Path) -> Result<Side, HarnessError> {
    // A file that is not there is the user's typo, not the machine's failure: bad input.
    let text = std::fs::read_to_string(path)
        .map_err(|e| HarnessError::BadInput(format!("cannot read {}: {e}", path.display())))?;
    let value: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| HarnessError::located(path, e.line() as u64, e.column() as u64, e))?;
    let name = path.display().to_string();
    if value.get("cells").is_some() {
        let m = Matrix::load(path)?;
        return Ok(Side {
            name,
            cells: m
                .cells
                .into_iter()
                .map(|c| {
                    let key = cell_key(&c.connector, &c.engine);
                    let outcome = c
                        .record
                        .ok_or_else(|| c.error.unwrap_or_else(|| "no record".into()));
                    (key, outcome)
                })
                .collect(),
            from_record: false,
        });
    }
    if value.get("header").is_some() {
        return Ok(Side::record(&name, Record::load(path)?));
    }
    Err(HarnessError::BadInput(format!(
        "{name}: neither a gate record nor a matrix"
    )))
}
