//! What `run`, `record` and `check` do with a fresh record before they write and print it: the
//! failing cases' YAML and each non-PASS gate's reproduce line (`cmd::reproduce`), and what the
//! baseline makes of it; then the exit code and the baseline's lines. One place, so the three
//! commands cannot drift apart on what a failure leaves behind.

use std::path::Path;

use crate::cmd::cli::Common;
use crate::cmd::reproduce::{
    Invocation, annotate, cases_dir_beside, temp_cases_dir, write_failed_cases,
};
use crate::cmd::run::RunOptions;
use crate::error::{ExitCode, HarnessError};
use crate::gates::GateId;
use crate::report::Record;
use crate::report::baseline::Baseline;
use crate::report::output;

/// `--baseline`'s file, read before any engine boots: a bad one is bad input at once (exit 2).
pub fn baseline(common: &Common) -> Result<Option<Baseline>, HarnessError> {
    common.baseline.as_deref().map(Baseline::load).transpose()
}

/// Annotates `record`: the failing cases written to `cases_to`, the reproduce lines of the
/// gates `opts` judged, and the baseline's outcome over them. Cases that cannot be written are
/// said in a line: the verdict matters more than its leftovers.
pub fn annotate_record(
    record: &mut Record,
    common: &Common,
    opts: &RunOptions,
    baseline: Option<&Baseline>,
    cases_to: &Path,
) {
    let judged = opts.only.clone().unwrap_or_else(|| GateId::ALL.to_vec());
    let written = match write_failed_cases(record, &opts.dirs.cases, cases_to) {
        Ok(w) => w,
        Err(e) => {
            output::note(&format!("the failing cases' YAML was not written: {e}"));
            None
        }
    };
    annotate(
        record,
        &Invocation::of(common),
        &judged,
        written.as_deref(),
        cases_to,
    );
    if let Some(b) = baseline {
        record.baseline = Some(b.account(record, opts.only.as_deref()));
    }
}

/// Where a run's failing cases go: beside the record in `dir` when it is written, else under
/// the temp dir ([`temp_cases_dir`]).
pub fn cases_to(dir: Option<&Path>, stem: Option<&str>) -> std::path::PathBuf {
    let stem = stem.unwrap_or("connector");
    dir.map_or_else(|| temp_cases_dir(stem), |d| cases_dir_beside(d, stem))
}

/// The run's exit code: the baseline's when there is one (5: only expected failures), else the
/// verdict's. `rerun`: the gates a `--rerun-failed` judged, whose verdicts alone count.
pub fn exit_code(record: &Record, rerun: Option<&[GateId]>) -> ExitCode {
    match (&record.baseline, rerun) {
        (Some(b), scope) => b.exit_code(record, scope),
        (None, Some(gates)) => crate::cmd::rerun::verdict(record, gates).into(),
        (None, None) => record.verdict().into(),
    }
}

/// Says what the baseline made of the run: the headline, each new failure, each entry that
/// passed (the author removes it).
pub fn say_baseline(record: &Record) {
    if let Some(b) = &record.baseline {
        output::note(&record.headline());
        for line in b.lines() {
            output::note(&line);
        }
    }
}

/// Each non-PASS gate's reproduce line, for a command that prints no record (`check`).
pub fn say_reproduce(record: &Record) {
    for g in &record.gates {
        if let Some(line) = &g.reproduce {
            output::note(&format!("{} {}: reproduce: {line}", g.id, g.verdict));
        }
    }
}
