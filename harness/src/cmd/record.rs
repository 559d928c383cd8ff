//! `emq-gate record` and `check`: the record under `--reports` (see [`crate::cmd::sources`] for
//! where that is and how a record is named).

use std::path::PathBuf;
use std::sync::Arc;

use crate::cmd::cli::Common;
use crate::cmd::run::{RunOptions, Subject, factory, run};
use crate::cmd::sources::{Dirs, guard_overwrite, reports_dir, stem_of};
use crate::connector::Verbs;
use crate::error::{ExitCode, HarnessError};
use crate::report::output::{self, Progress};
use crate::report::{ConnectorName, Record};

/// The record's file stem before a run (for `check`): `--name`, `reference`, or the child's
/// `hello` name (the child is started once to ask).
fn stem_before(common: &Common, opts: &RunOptions) -> Result<String, HarnessError> {
    let subject = &opts.subject;
    if let Some(n) = &common.name {
        return Ok(n.clone());
    }
    match subject {
        Subject::Reference => Ok("reference".into()),
        #[cfg(feature = "doubles")]
        Subject::Double(d) => Ok(crate::cmd::cli::double_stem(*d)),
        Subject::Child(_) => {
            let bundle = Arc::new(opts.dirs.load_bundle()?);
            let mut c = factory(subject, &bundle)
                .make()
                .map_err(|e| HarnessError::ConnectorStart(e.to_string()))?;
            stem_of(&ConnectorName::from_hello(c.hello().map(|i| i.name)))
        }
    }
}

/// The record's file stem after a run, one rule for `run --out`, `record` and `check`: `--name`,
/// else `reference` for the in-process reference, else the child's `hello` name.
pub fn stem_after(
    common: &Common,
    subject: &Subject,
    record: &Record,
) -> Result<String, HarnessError> {
    match (&common.name, subject) {
        (Some(n), _) => Ok(n.clone()),
        (None, Subject::Reference) => Ok("reference".into()),
        #[cfg(feature = "doubles")]
        (None, Subject::Double(d)) => Ok(crate::cmd::cli::double_stem(*d)),
        (None, Subject::Child(_)) => stem_of(&record.header.connector_name),
    }
}

/// Runs the gates and writes `<reports>/<stem>.{json,md,junit.xml}` when a verdict, evidence,
/// SHA or version changed (or `refresh`), so a record's diff in review always means something.
pub fn record(
    common: &Common,
    dirs: &Dirs,
    refresh: bool,
    progress: &Progress,
) -> Result<ExitCode, HarnessError> {
    let baseline = crate::cmd::finish::baseline(common)?;
    let opts = common.options(dirs);
    let dir: PathBuf = reports_dir(common.reports.clone());
    // A named record of another connector is refused before the run, when it can be.
    if let (Some(n), Subject::Reference) = (&common.name, &opts.subject) {
        guard_overwrite(&dir, n, &"echomq-rust-reference".into(), common.force)?;
    }
    let mut record = run(&opts, progress)?;
    let stem = stem_after(common, &opts.subject, &record)?;
    guard_overwrite(&dir, &stem, &record.header.connector_name, common.force)?;
    std::fs::create_dir_all(&dir).map_err(|e| HarnessError::io(dir.display().to_string(), e))?;
    let cases_to = crate::cmd::finish::cases_to(Some(&dir), Some(&stem));
    crate::cmd::finish::annotate_record(&mut record, common, &opts, baseline.as_ref(), &cases_to);
    let wrote = record.write_if_changed(&dir, &stem, refresh)?;
    output::result(&record.markdown());
    output::note(&if wrote {
        format!("wrote {}/{stem}.{{json,md,junit.xml}}", dir.display())
    } else {
        format!(
            "{}/{stem}.json: no verdict, evidence, SHA or version changed; the committed files \
             stay as they are (--refresh rewrites the figures)",
            dir.display()
        )
    });
    if crate::report::badge::write_if_changed(
        &dir,
        &stem,
        &crate::report::badge::for_record(&record),
    )? {
        output::note(&format!(
            "wrote {}/{}/{stem}.svg",
            dir.display(),
            crate::report::badge::DIR
        ));
    }
    if let Ok(true) = crate::cmd::matrix::write_schema(&dir) {
        output::note(&format!("wrote {}/record.schema.json", dir.display()));
    }
    crate::cmd::finish::say_baseline(&record);
    Ok(crate::cmd::finish::exit_code(&record, None))
}

/// Runs again with the committed record's seed and compares.
pub fn check(common: &Common, dirs: &Dirs, progress: &Progress) -> Result<ExitCode, HarnessError> {
    let baseline = crate::cmd::finish::baseline(common)?;
    let mut opts = common.options(dirs);
    let stem = stem_before(common, &opts)?;
    let path = reports_dir(common.reports.clone()).join(format!("{stem}.json"));
    let committed = Record::load(&path)?;
    opts.seed = committed.header.seed;
    opts.histories = committed.header.histories;
    opts.batch = committed.header.batch;
    let since = crate::gates::contract::since(committed.header.contract());
    if let Some(line) = since.line(
        &path.display().to_string(),
        committed.header.contract_version.is_some(),
    ) {
        output::note(&line);
    }
    let mut fresh = run(&opts, progress)?;
    let cases_to = crate::cmd::finish::cases_to(None, Some(&stem));
    crate::cmd::finish::annotate_record(&mut fresh, common, &opts, baseline.as_ref(), &cases_to);
    crate::cmd::finish::say_baseline(&fresh);
    crate::cmd::finish::say_reproduce(&fresh);
    let diffs = fresh.stable_differences(&committed);
    if diffs.is_empty() {
        output::result(&format!(
            "{}: the committed record holds ({})",
            path.display(),
            fresh.footer.summary
        ));
        return Ok(ExitCode::Pass);
    }
    for d in &diffs {
        output::error(d);
    }
    output::error(&format!(
        "{} no longer holds: regenerate with `emq-gate record`",
        path.display()
    ));
    Ok(ExitCode::GateFailed)
}
