//! `emq-gate matrix`: chosen connectors × engines, one full gate run per cell, written as
//! `reports/matrix.{json,md}`, `reports/index.html` and the committed records that are cells;
//! `--check` re-runs and compares. A share (`--partition`, `--cells`, `--skip-cells`) judges
//! some cells and writes them to `--out`; `matrix merge DIR...` assembles the shares.

use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::cmd::run::{RunOptions, Subject};
use crate::engine::named::EngineName;
use crate::engine::{EngineChoice, EngineOptions};
use crate::error::{ExitCode as Code, HarnessError};
use crate::gates::Verdict;
use crate::report::Record;
use crate::report::matrix::{
    MATRIX_SCHEMA, Matrix, MatrixCell, MatrixVolatile, cell_key, record_stem,
};
use crate::report::now_rfc3339;
use crate::report::output::{self, Progress};
use crate::report::shares::{self, Selection};

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
    /// The cells this run judges (all, or a share).
    pub selection: Selection,
    /// A matrix.json whose cell times cut the partition's shares (`--balance`).
    pub balance: Option<PathBuf>,
    /// Where a share (or, when given, a whole run) writes its matrix.json and cell records.
    pub out: Option<PathBuf>,
    /// Each cell's gates in lanes (`--lanes`), else on one engine.
    pub lanes: bool,
    /// The bundle and cases judged by.
    pub dirs: crate::cmd::sources::Dirs,
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
pub fn subject(label: &str, timeout: u64, bundle: &Path) -> Result<Subject, HarnessError> {
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
        bundle,
    )))
}

/// Engine options for the engine `name` booted as `kind`.
pub fn engine_options(name: &EngineName, kind: EngineChoice) -> EngineOptions {
    if name.cluster || name.sentinel {
        return EngineOptions {
            choice: if name.cluster {
                EngineChoice::Cluster
            } else {
                EngineChoice::Sentinel
            },
            valkey_server: Some(name.server_or_unset()),
            tls: name.tls,
            ..EngineOptions::default()
        };
    }
    let mut o = EngineOptions {
        choice: kind,
        tls: name.tls,
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
        .map(|c| subject(c, opts.timeout, &opts.dirs.bundle).map(|s| (c.clone(), s)))
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
        share: None,
        volatile: MatrixVolatile {
            started: now_rfc3339(),
            ..MatrixVolatile::default()
        },
    };
    let keys = shares::keys_of(&m);
    let unknown = opts.selection.unknown_cells(&keys);
    if !unknown.is_empty() {
        return Err(HarnessError::BadInput(format!(
            "no such cell in the matrix: {} (its cells: {})",
            unknown.join(", "),
            keys.join(", ")
        )));
    }
    let selection = balanced(&opts.selection, opts.balance.as_deref(), &keys)?;
    let total = keys.iter().filter(|k| selection.picks(k)).count();
    let inner = progress.verdicts_only();
    let mut n = 0;
    for (label, subject) in &subjects {
        for engine in &engines {
            let key = cell_key(label, &engine.name);
            if !selection.picks(&key) {
                continue;
            }
            n += 1;
            let kind = if engine.cluster {
                EngineChoice::Cluster
            } else if engine.sentinel {
                EngineChoice::Sentinel
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
    if !selection.is_all() {
        m = shares::share(&m, &selection);
    }
    Ok(m)
}

/// One cell: a full gate run of `subject` on `engine`; an error that stopped the run is kept.
/// `selection` with its partition cut by the cell times of the matrix.json `balance` names
/// (`--balance`), read here; as it is without one. Only the cells `--cells`/`--skip-cells`
/// leave are cut: the shares split what they judge.
fn balanced(
    selection: &Selection,
    balance: Option<&Path>,
    keys: &[String],
) -> Result<Selection, HarnessError> {
    let (Some(path), Some(p)) = (balance, selection.partition) else {
        return Ok(selection.clone());
    };
    let past = Matrix::load(path)?;
    let whole = Selection {
        partition: None,
        ..selection.clone()
    };
    let judged: Vec<String> = keys.iter().filter(|k| whole.picks(k)).cloned().collect();
    Ok(Selection {
        balanced: Some(shares::balance(&judged, &past.volatile.cell_wall_ms, p.n)),
        ..selection.clone()
    })
}

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
        one_engine: !opts.lanes,
        dirs: opts.dirs.clone(),
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
            "{} on {} ({}){}",
            r.footer.summary,
            r.header.engine_label(),
            r.header.connector_name,
            time_scale(r).map_or(String::new(), |s| format!(", G7 at time scale ×{s}"))
        ),
        (None, Some(e)) => format!("{} {e}", Verdict::Error),
        (None, None) => Verdict::Error.to_string(),
    }
}

/// G7's time scale when it was raised above 1 (the machine was too slow for the short waits).
fn time_scale(r: &Record) -> Option<u64> {
    r.volatile
        .figures
        .get("G7")?
        .get("time_scale")?
        .as_u64()
        .filter(|&s| s > 1)
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
    let badges = crate::report::badge::write_matrix(&opts.reports, &m)?;
    output::note(&format!(
        "rendered {}/{{matrix.md,index.html}} and {badges} changed badges from matrix.json",
        opts.reports.display()
    ));
    Ok(Code::Pass)
}

/// `--check`: the committed matrix's cells (all, or the share's) again with its parameters,
/// compared with the committed matrix and with the committed records that are cells.
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
    if let Some(out) = &opts.out {
        write_out(&fresh, out)?;
    }
    output::result(&crate::report::summary::text(
        &fresh.grid(),
        output::stdout_color(),
    ));
    Ok(judge(&fresh, &committed, path, &opts.reports))
}

/// `fresh` (a whole matrix or a share) against the committed matrix and records: exit 0 when
/// every cell it judged holds, else each difference printed and exit 1.
fn judge(fresh: &Matrix, committed: &Matrix, path: &Path, reports: &Path) -> Code {
    contract_note(committed, path);
    let mut diffs = fresh.stable_differences(&committed_part(committed, fresh));
    diffs.extend(record_differences(fresh, reports));
    diffs.extend(crate::report::badge::differences(reports, fresh));
    let what = match &fresh.share {
        Some(s) => format!(
            "{} cells of {} ({})",
            s.cells.len(),
            committed.cells.len(),
            s.selection
        ),
        None => format!("{} cells", fresh.cells.len()),
    };
    if diffs.is_empty() {
        output::note(&format!(
            "{}: the committed matrix and records hold ({what}, {:.1} s)",
            path.display(),
            fresh.volatile.wall_ms as f64 / 1000.0
        ));
        return Code::Pass;
    }
    for d in &diffs {
        output::error(d);
    }
    output::error(&format!(
        "{} no longer holds ({what}): regenerate with `emq-gate matrix`",
        path.display()
    ));
    Code::GateFailed
}

/// One line when the committed matrix's oldest record is of an older contract than this
/// emq-gate's: which, and the rules its cells were never judged on.
fn contract_note(committed: &Matrix, path: &Path) {
    let oldest = committed
        .cells
        .iter()
        .filter_map(|c| c.record.as_ref())
        .min_by_key(|r| r.header.contract());
    if let Some(r) = oldest {
        let since = crate::gates::contract::since(r.header.contract());
        if let Some(line) = since.line(
            &path.display().to_string(),
            r.header.contract_version.is_some(),
        ) {
            output::note(&line);
        }
    }
}

/// The committed cells a share is compared with: its own (the whole matrix for a whole run).
fn committed_part(committed: &Matrix, fresh: &Matrix) -> Matrix {
    match &fresh.share {
        None => committed.clone(),
        Some(s) => Matrix {
            cells: committed
                .cells
                .iter()
                .filter(|c| s.cells.contains(&cell_key(&c.connector, &c.engine)))
                .cloned()
                .collect(),
            ..committed.clone()
        },
    }
}

/// Each judged cell that is a committed record (`reports/<stem>.json`) against that record.
fn record_differences(fresh: &Matrix, reports: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for c in &fresh.cells {
        let Some(stem) = record_stem(&c.connector, &c.engine) else {
            continue;
        };
        let path = reports.join(format!("{stem}.json"));
        if !path.is_file() {
            continue;
        }
        let committed = match Record::load(&path) {
            Ok(r) => r,
            Err(e) => {
                out.push(e.to_string());
                continue;
            }
        };
        match &c.record {
            Some(r) => out.extend(
                r.stable_differences(&committed)
                    .into_iter()
                    .map(|d| format!("{}: {d}", path.display())),
            ),
            None => out.push(format!(
                "{}: committed a record, now none: {}",
                path.display(),
                c.error.as_deref().unwrap_or("")
            )),
        }
    }
    out
}

/// A share's (or a whole run's) files under `dir`: `matrix.json`, `matrix.md`, `index.html`,
/// and each cell's record as `<connector>-<engine>.{json,md,junit.xml}`.
fn write_out(m: &Matrix, dir: &Path) -> Result<(), HarnessError> {
    std::fs::create_dir_all(dir).map_err(|e| HarnessError::io(dir.display().to_string(), e))?;
    m.write_if_changed(dir, true)?;
    crate::report::badge::write_matrix(dir, m)?;
    for c in &m.cells {
        if let Some(r) = &c.record {
            r.write(dir, &format!("{}-{}", c.connector, c.engine))?;
        }
    }
    output::note(&format!(
        "wrote {}/matrix.json and {} cell records ({})",
        dir.display(),
        m.cells.iter().filter(|c| c.record.is_some()).count(),
        m.share
            .as_ref()
            .map_or("every cell".to_string(), |s| s.selection.clone())
    ));
    Ok(())
}

/// Every cell run, the grid printed, the files written when something stable changed: the
/// matrix's and, for the cells that are committed records, theirs. A share writes to `--out`
/// only (the committed files are whole matrices; `matrix merge` writes them).
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
    if let Some(out) = &opts.out {
        write_out(&m, out)?;
    }
    if m.share.is_some() {
        // A share's verdict is its own cells'; one that holds no cell judged nothing wrong.
        let cells = m.grid().cells;
        if cells.is_empty() {
            output::note("this share holds no cell of the matrix");
            return Ok(Code::Pass);
        }
        return Ok(crate::gates::Verdict::of_all(cells.iter().map(|c| c.verdict)).into());
    }
    if opts.out.is_some() {
        // `--out` names where this matrix goes: the committed one (a whole matrix, perhaps of
        // other columns) is not replaced by it.
        return Ok(m.grid().verdict().into());
    }
    write_reports(&m, path, &opts.reports, opts.refresh)?;
    Ok(m.grid().verdict().into())
}

/// The committed files of a whole matrix: matrix.{json,md}, index.html, the records that are
/// cells and the record schema, each only when something stable changed (or `refresh`).
fn write_reports(
    m: &Matrix,
    path: &Path,
    reports: &Path,
    refresh: bool,
) -> Result<(), HarnessError> {
    if m.write_if_changed(reports, refresh)? {
        output::note(&format!(
            "wrote {}/{{matrix.json,matrix.md,index.html}} in {:.1} s",
            reports.display(),
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
    for c in &m.cells {
        if let (Some(stem), Some(r)) = (record_stem(&c.connector, &c.engine), &c.record)
            && r.write_if_changed(reports, &stem, refresh)?
        {
            output::note(&format!(
                "wrote {}/{stem}.{{json,md,junit.xml}}",
                reports.display()
            ));
        }
    }
    let badges = crate::report::badge::write_matrix(reports, m)?;
    if badges > 0 {
        output::note(&format!(
            "wrote {badges} badges in {}/{}",
            reports.display(),
            crate::report::badge::DIR
        ));
    }
    if write_schema(reports)? {
        output::note(&format!("wrote {}/record.schema.json", reports.display()));
    }
    Ok(())
}

/// `matrix merge [--check] DIR...`: the shares' matrix.json files assembled into one matrix,
/// every cell of its shape from exactly one share; then compared with the committed matrix and
/// records (`--check`, as `matrix --check` does), or written as them.
pub fn merge(
    dirs: &[PathBuf],
    check: bool,
    refresh: bool,
    reports: &Path,
) -> Result<Code, HarnessError> {
    let mut parts = Vec::new();
    for d in dirs {
        let p = d.join("matrix.json");
        parts.push((p.clone(), Matrix::load(&p)?));
    }
    let merged = shares::merge(&parts).map_err(HarnessError::BadInput)?;
    output::result(&crate::report::summary::text(
        &merged.grid(),
        output::stdout_color(),
    ));
    let path = reports.join("matrix.json");
    if check {
        let committed = Matrix::load(&path)?;
        return Ok(judge(&merged, &committed, &path, reports));
    }
    write_reports(&merged, &path, reports, refresh)?;
    Ok(merged.grid().verdict().into())
}
