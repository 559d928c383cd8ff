//! `emq-gate matrix`: chosen connectors × engines, one full gate run per cell, written as
//! `reports/matrix.{json,md}` and `reports/index.html`; `--check` re-runs and compares.

use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::cmd::run::{RunOptions, Subject};
use crate::engine::named::EngineName;
use crate::engine::{EngineChoice, EngineOptions};
use crate::error::{ExitCode as Code, HarnessError};
use crate::report::matrix::{MATRIX_SCHEMA, Matrix, MatrixCell, MatrixVolatile, cell_key};
use crate::report::now_rfc3339;
use crate::report::output::{self, Progress};

/// What a matrix run needs.
#[derive(Debug, Clone)]
pub struct MatrixOptions {
    /// Connector labels: `reference`, or `<label>` run from `$EMQ_<LABEL>_CONNECTOR`.
    pub connectors: Vec<String>,
    /// Engine names, resolved through `EMQ_ENGINE_<NAME>_SERVER` / `_IMAGE`.
    pub engines: Vec<String>,
    pub kind: EngineChoice,
    pub seed: u64,
    pub histories: u32,
    pub batch: i64,
    /// Per-request timeout of a child-process connector, seconds.
    pub timeout: u64,
    pub check: bool,
    pub refresh: bool,
    /// Only re-render matrix.md and index.html from matrix.json.
    pub render: bool,
    pub reports: PathBuf,
}

/// `reference`, `python`, and each of `node`, `go` and `elixir` whose `EMQ_<LABEL>_CONNECTOR`
/// is set.
pub fn default_connectors() -> Vec<String> {
    let mut out = vec!["reference".to_string(), "python".to_string()];
    for label in ["node", "go", "elixir"] {
        if crate::settings::var_os(&crate::settings::connector_var(label)).is_some() {
            out.push(label.into());
        }
    }
    out
}

/// The connector a label names: `reference` in-process, any other through `$EMQ_<LABEL>_CONNECTOR`.
pub fn subject(label: &str, timeout: u64) -> Result<Subject, HarnessError> {
    if label == "reference" {
        return Ok(Subject::Reference);
    }
    let var = crate::settings::connector_var(label);
    let cmd = crate::settings::var(&var).ok_or_else(|| {
        HarnessError::BadInput(format!(
            "connector {label:?}: {var} is not set (run ci/provision and source ~/.cache/emq/env, \
                 or leave {label} out with --connectors)"
        ))
    })?;
    Ok(Subject::Child(crate::cmd::sources::child_spec(
        &[cmd],
        timeout,
    )))
}

/// Engine options for the engine `name` booted as `kind`.
pub fn engine_options(name: &EngineName, kind: EngineChoice) -> EngineOptions {
    if name.cluster {
        return EngineOptions {
            choice: EngineChoice::Cluster,
            valkey_server: Some(name.server_or_unset()),
            ..EngineOptions::default()
        };
    }
    let mut o = EngineOptions {
        choice: kind,
        ..EngineOptions::default()
    };
    match kind {
        EngineChoice::Binary => o.valkey_server = Some(name.server_or_unset()),
        EngineChoice::Container => o.image = name.image_or_unset(),
        _ => {
            o.valkey_server = name.server.clone();
            o.image = name.image_or_unset();
        }
    }
    o
}

/// Runs every cell, row by row, saying each as it starts and ends.
pub fn run_matrix(opts: &MatrixOptions, progress: &Progress) -> Result<Matrix, HarnessError> {
    // Resolve everything first: a typo is bad input before minutes of gates.
    let engines: Vec<EngineName> = opts
        .engines
        .iter()
        .map(|n| EngineName::resolve(n).map_err(HarnessError::BadInput))
        .collect::<Result<_, _>>()?;
    let subjects: Vec<(String, Subject)> = opts
        .connectors
        .iter()
        .map(|c| subject(c, opts.timeout).map(|s| (c.clone(), s)))
        .collect::<Result<_, _>>()?;
    let t0 = Instant::now();
    let mut m = Matrix {
        schema: MATRIX_SCHEMA.into(),
        harness_version: env!("CARGO_PKG_VERSION").into(),
        engine_kind: format!("{:?}", opts.kind).to_lowercase(),
        seed: opts.seed,
        histories: opts.histories,
        batch: opts.batch,
        connectors: opts.connectors.clone(),
        engines: opts.engines.clone(),
        cells: Vec::new(),
        volatile: MatrixVolatile {
            started: now_rfc3339(),
            ..MatrixVolatile::default()
        },
    };
    let total = subjects.len() * engines.len();
    let inner = progress.verdicts_only();
    let mut n = 0;
    for (label, subject) in &subjects {
        for engine in &engines {
            n += 1;
            let key = cell_key(label, &engine.name);
            let kind = if engine.cluster {
                EngineChoice::Cluster
            } else {
                opts.kind
            };
            progress.always(&format!(
                "cell {n}/{total}: {label} × {} ({kind:?}) ...",
                engine.name
            ));
            let started = Instant::now();
            let cell = run_cell(opts, label, subject, engine, &inner);
            let ms = started.elapsed().as_millis() as u64;
            let said = said(&cell);
            progress.always(&format!(
                "cell {n}/{total}: {key} → {said} in {:.1} s",
                ms as f64 / 1000.0
            ));
            m.volatile.cell_wall_ms.insert(key, ms);
            m.cells.push(cell);
        }
    }
    m.volatile.wall_ms = t0.elapsed().as_millis() as u64;
    m.volatile.ended = now_rfc3339();
    Ok(m)
}

/// One cell: a full gate run of `subject` on `engine`; an error that stopped the run is kept.
fn run_cell(
    opts: &MatrixOptions,
    label: &str,
    subject: &Subject,
    engine: &EngineName,
    inner: &Progress,
) -> MatrixCell {
    let run = RunOptions {
        engine: engine_options(engine, opts.kind),
        subject: subject.clone(),
        seed: opts.seed,
        histories: opts.histories,
        batch: opts.batch,
        only: None,
        fail_fast: false,
    };
    match crate::cmd::run::run(&run, inner) {
        Ok(record) => MatrixCell {
            connector: label.to_string(),
            engine: engine.name.clone(),
            record: Some(record),
            error: None,
        },
        Err(e) => MatrixCell {
            connector: label.to_string(),
            engine: engine.name.clone(),
            record: None,
            error: Some(e.to_string()),
        },
    }
}

/// A finished cell in a few words: its summary, engine and connector, or its error.
fn said(cell: &MatrixCell) -> String {
    match (&cell.record, &cell.error) {
        (Some(r), _) => format!(
            "{} on {} ({})",
            r.footer.summary,
            r.header.engine_label(),
            r.header.connector_name
        ),
        (None, Some(e)) => format!("ERROR {e}"),
        (None, None) => "ERROR".into(),
    }
}

/// Writes the record schema beside the records when it changed. True when it wrote.
pub fn write_schema(dir: &std::path::Path) -> Result<bool, HarnessError> {
    let path = dir.join("record.schema.json");
    let want = crate::report::schema::record_schema();
    if std::fs::read_to_string(&path).is_ok_and(|have| have == want) {
        return Ok(false);
    }
    std::fs::write(&path, want).map_err(|e| HarnessError::io(path.display().to_string(), e))?;
    Ok(true)
}

/// The command: run (or re-run with the committed parameters and compare), write, summarize.
pub fn matrix(opts: &MatrixOptions, progress: &Progress) -> Result<Code, HarnessError> {
    let path = opts.reports.join("matrix.json");
    if opts.render {
        return render(opts, &path);
    }
    if opts.check {
        return check(opts, &path, progress);
    }
    run_and_write(opts, &path, progress)
}

/// `--render`: matrix.md and index.html again from the committed matrix.json.
fn render(opts: &MatrixOptions, path: &Path) -> Result<Code, HarnessError> {
    let m = Matrix::load(path)?;
    m.write_if_changed(&opts.reports, true)?;
    output::note(&format!(
        "rendered {}/{{matrix.md,index.html}} from matrix.json",
        opts.reports.display()
    ));
    Ok(Code::Pass)
}

/// `--check`: the committed matrix's cells again with its parameters, compared.
fn check(opts: &MatrixOptions, path: &Path, progress: &Progress) -> Result<Code, HarnessError> {
    let committed = Matrix::load(path)?;
    let kind = <EngineChoice as clap::ValueEnum>::from_str(&committed.engine_kind, true).map_err(
        |_| {
            HarnessError::BadInput(format!(
                "{}: engine_kind {:?}",
                path.display(),
                committed.engine_kind
            ))
        },
    )?;
    let again = MatrixOptions {
        connectors: committed.connectors.clone(),
        engines: committed.engines.clone(),
        kind,
        seed: committed.seed,
        histories: committed.histories,
        batch: committed.batch,
        ..opts.clone()
    };
    let fresh = run_matrix(&again, progress)?;
    output::result(&crate::report::summary::text(
        &fresh.grid(),
        output::stdout_color(),
    ));
    let diffs = fresh.stable_differences(&committed);
    if diffs.is_empty() {
        output::note(&format!(
            "{}: the committed matrix holds ({} cells, {:.1} s)",
            path.display(),
            fresh.cells.len(),
            fresh.volatile.wall_ms as f64 / 1000.0
        ));
        return Ok(Code::Pass);
    }
    for d in &diffs {
        output::error(d);
    }
    output::error(&format!(
        "{} no longer holds: regenerate with `emq-gate matrix`",
        path.display()
    ));
    Ok(Code::GateFailed)
}

/// Every cell run, the grid printed, the files written when something stable changed.
fn run_and_write(
    opts: &MatrixOptions,
    path: &Path,
    progress: &Progress,
) -> Result<Code, HarnessError> {
    let m = run_matrix(opts, progress)?;
    output::result(&crate::report::summary::text(
        &m.grid(),
        output::stdout_color(),
    ));
    if m.write_if_changed(&opts.reports, opts.refresh)? {
        output::note(&format!(
            "wrote {}/{{matrix.json,matrix.md,index.html}} in {:.1} s",
            opts.reports.display(),
            m.volatile.wall_ms as f64 / 1000.0
        ));
    } else {
        output::note(&format!(
            "{}: no verdict, evidence, SHA or version changed; the committed files stay as they are \
             (--refresh rewrites the figures) ({:.1} s)",
            path.display(),
            m.volatile.wall_ms as f64 / 1000.0
        ));
    }
    if write_schema(&opts.reports)? {
        output::note(&format!(
            "wrote {}/record.schema.json",
            opts.reports.display()
        ));
    }
    Ok(m.grid().verdict().into())
}
