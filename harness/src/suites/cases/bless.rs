//! `--bless`: rewrites each step's expectation with what the reference connector answered, through
//! a temp file in the same directory (an interrupted bless never leaves half a file).

use std::io::Write;

use crate::error::HarnessError;
use crate::suites::cases::expect::matches;
use crate::suites::cases::format::{Case, Expect};
use crate::suites::cases::runner::Observed;

fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// The new text of `case`'s file given what each step answered; `None` when nothing changes.
pub fn rewrite(case: &Case, text: &str, observed: &[Option<Observed>]) -> Option<String> {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let mut changed = false;
    // Walk steps backwards so earlier line numbers stay valid while later ranges change.
    for (i, step) in case.steps.iter().enumerate().rev() {
        let Some(seen) = &observed[i] else { continue };
        let still_true = match (&step.expect, seen) {
            (Expect::Success, _) => true,
            (Expect::Ok(want), Observed::Ok(got)) => {
                want.to_string().contains('$') || matches(want, got)
            }
            (Expect::Error(k), Observed::Error(g)) => k == g,
            _ => false,
        };
        if still_true {
            continue;
        }
        let start = step.line as usize - 1;
        let end = case
            .steps
            .get(i + 1)
            .map_or(lines.len(), |s| s.line as usize - 1);
        let Some(at) = (start..end.min(lines.len())).find(|&l| {
            let t = lines[l].trim_start().trim_start_matches("- ");
            t.starts_with("ok:") || t.starts_with("error:")
        }) else {
            continue;
        };
        let base = indent(&lines[at]);
        let mut stop = at + 1;
        while stop < end.min(lines.len())
            && (lines[stop].trim().is_empty() || indent(&lines[stop]) > base)
        {
            stop += 1;
        }
        let prefix = &lines[at][..base];
        let new = match seen {
            Observed::Ok(v) => format!("{prefix}ok: {v}"),
            Observed::Error(k) => format!("{prefix}error: {k}"),
        };
        lines.splice(at..stop, [new]);
        changed = true;
    }
    changed.then(|| lines.join("\n") + "\n")
}

/// Writes `text` over `case.file` through a temp file.
pub fn write(case: &Case, text: &str) -> Result<(), HarnessError> {
    let dir = case.file.parent().unwrap_or(std::path::Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .map_err(|e| HarnessError::io(dir.display().to_string(), e))?;
    tmp.write_all(text.as_bytes())
        .map_err(|e| HarnessError::io(case.file.display().to_string(), e))?;
    tmp.persist(&case.file)
        .map_err(|e| HarnessError::io(case.file.display().to_string(), e.error))?;
    Ok(())
}
