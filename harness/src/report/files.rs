//! A record on disk: read back, and written as JSON, Markdown and JUnit XML, rewritten only when
//! its stable fields changed so committed records keep their dates. Its own concept: the only
//! part of a record that touches the file system.

use std::path::Path;

use super::Record;
use crate::error::HarnessError;

/// Reads a committed JSON file (a record, a matrix); a parse error names `path:line:col` and
/// says it is not `what`.
pub(crate) fn load_json<T: serde::de::DeserializeOwned>(
    path: &Path,
    what: &str,
) -> Result<T, HarnessError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| HarnessError::io(path.display().to_string(), e))?;
    serde_json::from_str(&text).map_err(|e| {
        HarnessError::located(
            path,
            e.line() as u64,
            e.column() as u64,
            format!("not {what}: {e}"),
        )
    })
}

/// Lines `key  value`, the values in one column after the longest key.
pub(crate) fn aligned(rows: &[(String, String)]) -> String {
    let width = rows
        .iter()
        .map(|(k, _)| k.chars().count())
        .max()
        .unwrap_or(0)
        + 2;
    rows.iter()
        .map(|(k, v)| format!("{k}{}{v}\n", " ".repeat(width - k.chars().count())))
        .collect()
}

impl Record {
    /// Reads a committed record.
    pub fn load(path: &Path) -> Result<Self, HarnessError> {
        load_json(path, "a gate record")
    }

    /// Writes the record unless `dir` already holds one with the same stable fields and the same
    /// baseline outcome (then the committed files, figures and dates included, stay as they
    /// are); `refresh` writes anyway.
    /// True when it wrote.
    pub fn write_if_changed(
        &self,
        dir: &Path,
        stem: &str,
        refresh: bool,
    ) -> Result<bool, HarnessError> {
        let existing = dir.join(format!("{stem}.json"));
        let same = !refresh
            && existing.is_file()
            && Record::load(&existing).is_ok_and(|old| {
                self.stable_differences(&old).is_empty()
                    && !self.names_more_than(&old)
                    && self.baseline == old.baseline
            });
        if same {
            return Ok(false);
        }
        self.write(dir, stem)?;
        Ok(true)
    }

    /// Writes `<stem>.json`, `<stem>.md` and `<stem>.junit.xml` into `dir`.
    pub fn write(&self, dir: &Path, stem: &str) -> Result<(), HarnessError> {
        std::fs::create_dir_all(dir).map_err(|e| HarnessError::io(dir.display().to_string(), e))?;
        let json = serde_json::to_string_pretty(self).expect("records serialize") + "\n";
        for (ext, body) in [
            ("json", json),
            ("md", self.markdown()),
            ("junit.xml", self.junit()),
        ] {
            let path = dir.join(format!("{stem}.{ext}"));
            std::fs::write(&path, body)
                .map_err(|e| HarnessError::io(path.display().to_string(), e))?;
        }
        Ok(())
    }
}
