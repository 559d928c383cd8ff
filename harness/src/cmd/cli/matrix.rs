//! `matrix` and `summary`'s flags: which engines and connectors make the grid, and how it is
//! printed. Their own concept: the only commands that judge many subjects at once.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::RunArgs;
use crate::engine::EngineChoice;

/// How `summary` prints its grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Coloured on a terminal unless NO_COLOR.
    Text,
    Json,
}

/// `emq-gate matrix`'s flags.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct MatrixArgs {
    #[command(subcommand)]
    pub action: Option<MatrixAction>,
    /// Connectors (rows): `reference`, or a label run from $EMQ_<LABEL>_CONNECTOR
    /// [default: reference,python, and each of node, go, elixir whose EMQ_<LABEL>_CONNECTOR is set].
    #[arg(long, value_delimiter = ',')]
    pub connectors: Option<Vec<String>>,
    /// Engines (columns) by name, through EMQ_ENGINE_<NAME>_SERVER / _IMAGE; `<name>-cluster`
    /// is a Valkey Cluster of that engine's binary.
    #[arg(
        long,
        value_delimiter = ',',
        default_values_t = crate::engine::named::DEFAULT_NAMES.map(String::from)
    )]
    pub engines: Vec<String>,
    /// How each engine is booted.
    #[arg(long, value_enum, default_value = "binary")]
    pub engine: EngineChoice,
    #[command(flatten)]
    pub run: RunArgs,
    /// Re-run with the committed matrix's connectors, engines and seed and compare verdicts,
    /// evidence, SHAs and versions (what CI runs); writes nothing.
    #[arg(long)]
    pub check: bool,
    /// Rewrite the files even when only times and rates changed.
    #[arg(long)]
    pub refresh: bool,
    /// Run nothing: render matrix.md, index.html and the badges again from the committed
    /// matrix.json (after a change to the page's renderer).
    #[arg(long, conflicts_with = "check")]
    pub render: bool,
    /// Where matrix.json, matrix.md and index.html live [default: this repository's reports/].
    #[arg(long)]
    pub reports: Option<PathBuf>,
    /// Judge only share K of N (K/N, 1-based): each cell lands in exactly one share, by a hash
    /// of its name. Needs --out; `matrix merge` assembles the shares.
    #[arg(long, value_name = "K/N", requires = "out")]
    pub partition: Option<crate::report::shares::Partition>,
    /// Cut the --partition shares by each cell's wall time in this matrix.json (the committed
    /// reports/matrix.json), heaviest first to the share with the least time so far, instead of
    /// by a hash: shares that end together. Every share must be given the same file.
    #[arg(long, value_name = "MATRIX_JSON", requires = "partition")]
    pub balance: Option<PathBuf>,
    /// Judge only these cells (CONNECTOR×ENGINE or CONNECTOR:ENGINE, comma-separated). Needs --out.
    #[arg(long, value_delimiter = ',', value_parser = crate::report::shares::parse_cell, requires = "out")]
    pub cells: Vec<String>,
    /// Judge every cell but these (as --cells). Needs --out.
    #[arg(long, value_delimiter = ',', value_parser = crate::report::shares::parse_cell, requires = "out")]
    pub skip_cells: Vec<String>,
    /// Run each cell's gates in lanes (as `run` does), each lane on an engine of its own; without
    /// it a cell runs every gate on one engine. The records are the same either way.
    #[arg(long)]
    pub lanes: bool,
    /// Write this run's matrix.json and each cell's record (<connector>-<engine>.json) here, and
    /// only here (the committed matrix stays as it is): a share for `matrix merge`, or a run of
    /// some cells.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// `emq-gate matrix`'s subcommands.
#[derive(Debug, Subcommand)]
pub enum MatrixAction {
    /// Assemble the shares (`matrix --partition/--cells/--skip-cells --out DIR`) into one matrix:
    /// every cell from exactly one share (a missing or twice-judged cell is an error naming it);
    /// written as reports/matrix.{json,md}, index.html and the records that are cells, or, with
    /// --check, compared with them exactly as `matrix --check` does.
    Merge {
        /// The shares' --out directories.
        #[arg(required = true, value_name = "DIR")]
        dirs: Vec<PathBuf>,
        /// Compare with the committed matrix and records; write nothing.
        #[arg(long)]
        check: bool,
        /// Rewrite the files even when only times and rates changed.
        #[arg(long)]
        refresh: bool,
        /// Where the committed matrix and records live [default: this repository's reports/].
        #[arg(long)]
        reports: Option<PathBuf>,
    },
}

impl MatrixArgs {
    /// Matrix options from the flags, judged by the bundle and cases in `dirs`.
    pub fn options(&self, dirs: &crate::cmd::sources::Dirs) -> crate::cmd::matrix::MatrixOptions {
        crate::cmd::matrix::MatrixOptions {
            dirs: dirs.clone(),
            connectors: self
                .connectors
                .clone()
                .unwrap_or_else(crate::cmd::matrix::default_connectors),
            engines: self.engines.clone(),
            kind: self.engine,
            seed: self.run.seed,
            histories: self.run.histories,
            batch: self.run.batch,
            timeout: self.run.timeout,
            check: self.check,
            refresh: self.refresh,
            render: self.render,
            reports: self
                .reports
                .clone()
                .unwrap_or_else(|| crate::repo_relative("reports")),
            selection: crate::report::shares::Selection {
                partition: self.partition,
                cells: self.cells.clone(),
                skip: self.skip_cells.clone(),
                balanced: None,
            },
            balance: self.balance.clone(),
            out: self.out.clone(),
            lanes: self.lanes,
        }
    }
}
