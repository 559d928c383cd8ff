//! `emq-gate`: the command line. Parsing here; work in `run`; printing in `output`.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::settings;

mod common;
mod matrix;

#[cfg(feature = "doubles")]
pub use common::double_stem;
pub use common::{
    BATCH, Common, EngineArgs, HISTORIES, RunArgs, SEED, TIMEOUT_SECS, engine_name_help,
    engine_options_from_env, parse_gate,
};
pub use matrix::{Format, MatrixAction, MatrixArgs};

const EXIT_CODES: &str = concat!(
    "\
EXIT CODES:
    0  every gate run passed (run; --gates and --rerun-failed leave the others NOT RUN), the record
       still holds (check), the smoke test passed, no verdict changed (diff)
    1  a gate failed, the record no longer holds, the smoke test found a problem, or a gate's,
       rule's, case's or cell's verdict changed (diff; figures alone never make it 1)
    2  bad input: a malformed case file, bad arguments, a missing or drifted bundle
    3  infrastructure: no engine could be started or reached
    4  no verdict: nothing failed, but a gate or a cell is ERROR (it could not be judged;
       a gate NOT RUN is none)
    5  only expected failures (run or record --baseline): gates failed, every failure is one
       the baseline names, and every gate was judged; a failure it does not name is 1
       (check --baseline keeps check's codes: whether the record holds)

EXPECTED FAILURES (run, record, check --baseline FILE), a YAML file:
    expected:
      - id: G5          # a gate, or a rule (R4.11): `emq-gate rules` lists them
        reason: redis-py's incr() sends INCRBY in the probe; fixed in 2.1
    A rule expects its own G6 cases, and the FAIL lines of the gates its checks name that
    cite it (R5.13) or cite no rule.
    The record stays FAIL n/8 and says how many failures were expected; an entry whose
    gate or rule passed is reported as an unexpected pass (remove it). An unknown id is bad
    input naming file:line (exit 2).

REPRODUCING: every gate that did not pass ends with `reproduce: <one command line>`; a
    failing G6 case's YAML is written beside the record (<out>/<name>.failed-cases/, or
    $TMPDIR/emq-gate-failed-cases/<name>/ for run without --out), and G7's line replays its
    kept history through EMQ_G7_REPLAY.

ENVIRONMENT (a flag wins over its variable; a bad value is an error):
    EMQ_ENGINE            --engine: auto | container | binary | url
    EMQ_ENGINE_URL        --url: redis://[:password@]host:port[/db]
    EMQ_ENGINE_NAME       --engine-name: an engine by name (listed under --help of run),
                          through EMQ_ENGINE_<NAME>_SERVER / _IMAGE (written by ci/provision)
    EMQ_ALLOW_FLUSH       --allow-flush: 1 lets the harness flush a url database with foreign keys
    EMQ_VALKEY_IMAGE      --image: the container image (default valkey/valkey:",
    crate::engine::version::valkey!(),
    ")
    EMQ_VALKEY_SERVER     --valkey-server: the binary engine's valkey-server
    EMQ_VALKEY_BENCHMARK  valkey-benchmark for `bench` (default: beside valkey-server)
    EMQ_SEED              --seed: G7 and G8's seed (default 1)
    EMQ_BUNDLE_DIR        --bundle: the bundle directory (default: the one built in; a child
                          connector is always given EMQ_BUNDLE_DIR and EMQ_BUNDLE_VERSION)
    EMQ_CASES_DIR         --cases: the case corpus (default: the one built in)
    EMQ_REPORTS_DIR       --reports: where record writes and check reads
    EMQ_G7_CASE_OUT       where G7 keeps a failure's case and history (default $TMPDIR/emq-gate-g7)
    EMQ_G7_REPLAY         a kept G7 history (<case>.history.json) that G7 replays first
    EMQ_CACHE             where ci/provision builds and records paths (default ~/.cache/emq)
    The README's table also lists the variables the test suite reads."
);

/// Certifies EchoMQ connectors: boots a pinned Valkey, replays the cases and interleavings against
/// a connector, checks the bundle's SHAs and the declared-keys law on the live engine, and writes
/// the `PASS n/8` gate record.
#[derive(Debug, Parser)]
#[command(name = "emq-gate", version, after_help = EXIT_CODES)]
pub struct Cli {
    /// No progress lines (CI); results and errors still print.
    #[arg(long, short, global = true)]
    pub quiet: bool,
    #[command(subcommand)]
    pub command: Command,
    /// Judge by the bundle in DIR (default: the one built into emq-gate).
    #[arg(long, global = true, env = settings::BUNDLE_DIR, value_name = "DIR")]
    pub bundle: Option<PathBuf>,
    /// Replay the cases in DIR (default: the corpus built into emq-gate).
    #[arg(long, global = true, env = settings::CASES_DIR, value_name = "DIR")]
    pub cases: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the eight gates against a connector and print the record (Markdown) on stdout.
    Run {
        #[command(flatten)]
        common: Common,
        /// Also write <name>.json, .md, .junit.xml and badges/<name>.svg into this directory.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Run only the gates RECORD (a record's JSON) did not pass, with its seed, histories,
        /// batch and engine (by name, unless --engine-name); exit 0 when each of them passes.
        #[arg(long, value_name = "RECORD", conflicts_with = "gates")]
        rerun_failed: Option<PathBuf>,
    },
    /// Write the record <reports>/<name>.{json,md,junit.xml} and its badge
    /// <reports>/badges/<name>.svg: --reports, else the reports/ of the
    /// EchoMQ checkout around the current directory, else ./reports. The name is --name, else
    /// `reference`, else the connector's hello name; another connector's record needs --force.
    /// The files stay untouched when no verdict, evidence, SHA or version changed (--refresh).
    Record {
        #[command(flatten)]
        common: Common,
        /// Rewrite the files even when only times and rates changed.
        #[arg(long)]
        refresh: bool,
    },
    /// Run again with the committed record's seed and compare: verdicts, evidence, SHAs, versions
    /// (the record is found as `record` writes it).
    Check {
        #[command(flatten)]
        common: Common,
    },
    /// Connectors × engines: a full gate run per cell, written as reports/matrix.{json,md},
    /// reports/index.html (untouched when nothing stable changed) and a badge per cell and per
    /// record in reports/badges/; --check re-runs and compares (the badges too).
    Matrix(MatrixArgs),
    /// What changed between two records or two matrices (JSON): each side's contract, the gates,
    /// rules and cases whose verdict changed, and the figures that moved beyond their noise (one
    /// side at least twice the other, and 10 or more apart). Exit 0: no verdict changed; 1: one
    /// did (a figure alone never makes it 1).
    Diff {
        /// The earlier record or matrix.json.
        old: PathBuf,
        /// The later one.
        new: PathBuf,
    },
    /// The connectors × engines grid of gate records and matrices (e.g. reports/*.json).
    Summary {
        /// Record or matrix JSON files; other JSON (the schema) is skipped.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// text (coloured on a terminal unless NO_COLOR) or json.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// A few seconds' check for connector authors: hello, connect, each verb once, a short pipeline.
    Smoke {
        #[command(flatten)]
        engine: EngineArgs,
        /// Per-request timeout in seconds.
        #[arg(long, default_value_t = TIMEOUT_SECS)]
        timeout: u64,
        /// The connector command and its arguments (after `--`).
        #[arg(last = true, required = true)]
        command: Vec<String>,
        /// Append every request and reply to FILE as JSON lines with timestamps.
        #[arg(long, value_name = "FILE")]
        wire_log: Option<PathBuf>,
    },
    /// The rule catalogue: every numbered rule of bundle/SPEC.md, the gate checks and cases that
    /// enforce it, and the broken connector the gate must catch (or why none can break it).
    Rules,
    /// Throughput against the engine's own limit: a connector's pipelined EVALSHA enqueue batch
    /// and valkey-benchmark (same SHA, keys, depth, one connection) on one engine, each as a
    /// share of the Lua ceiling, a round's latency, a claim → complete cycle, and each gate's
    /// wall time.
    Bench {
        #[command(flatten)]
        engine: EngineArgs,
        /// Enqueues per measured batch (depth 1 uses a tenth).
        #[arg(long, default_value_t = 100_000)]
        n: i64,
        /// Pipeline depths to compare.
        #[arg(long, value_delimiter = ',', default_value = "1,16,100,1000")]
        depths: Vec<i64>,
        /// Runs per depth and side, alternating; the best (and the median) is reported.
        #[arg(long, default_value_t = 5)]
        repeat: u32,
        /// claim → complete cycles to time (0 skips).
        #[arg(long, default_value_t = 20_000)]
        cycles: i64,
        /// Skip running the eight gates for their wall times.
        #[arg(long)]
        no_gates: bool,
        /// Print JSON instead of Markdown.
        #[arg(long)]
        json: bool,
        /// Exit 1 when a depth ≥ 16 reaches less than this share of valkey-benchmark.
        #[arg(long)]
        min_ratio: Option<f64>,
        /// Seed for G7 and G8 in the gate run.
        #[arg(long, default_value_t = SEED, env = settings::SEED)]
        seed: u64,
        /// Per-request timeout for a child-process connector, seconds.
        #[arg(long, default_value_t = TIMEOUT_SECS)]
        timeout: u64,
        /// Measure once per Valkey `io-threads` setting, one after the other on the same engine
        /// (`CONFIG SET io-threads`: Valkey 9 only), each row naming its setting; bare
        /// `--io-threads` is `1,2`: off, then the main thread and one I/O thread, one a core on
        /// two cores. Default: the engine as booted.
        #[arg(long, value_name = "N,..", value_delimiter = ',', num_args = 0..=1,
              default_missing_value = "1,2",
              value_parser = clap::value_parser!(u32)
                  .range(1..=crate::cmd::bench::io_threads::MAX_IO_THREADS))]
        io_threads: Vec<u32>,
        /// Measure a connector in another runtime: its command and arguments after `--`, spawned
        /// as `run` spawns it (default: the in-process reference connector).
        #[arg(last = true)]
        connector: Vec<String>,
    },
    /// Replay cases (all, or those whose name contains FILTER) against a connector, one trial per
    /// case, with the test target's diffs; exit 1 when a case fails.
    Cases {
        #[command(flatten)]
        engine: EngineArgs,
        /// Only cases whose trial name (`reference::<id>` or `connector::<id>`) contains this.
        filter: Option<String>,
        /// List the selected cases instead of running them.
        #[arg(long)]
        list: bool,
        /// FILTER must match the whole trial name.
        #[arg(long)]
        exact: bool,
        /// Cases run at once (each with its own connector process).
        #[arg(long)]
        threads: Option<usize>,
        /// Per-request timeout in seconds.
        #[arg(long, default_value_t = TIMEOUT_SECS)]
        timeout: u64,
        /// Append every request and reply to FILE as JSON lines with timestamps.
        #[arg(long, value_name = "FILE")]
        wire_log: Option<PathBuf>,
        /// The connector command and its arguments (after `--`; default: the reference).
        #[arg(last = true)]
        command: Vec<String>,
    },
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::{Cli, Command};
    use crate::gates::GateId;

    #[test]
    fn engine_name_help_lists_every_engine_name() {
        use clap::CommandFactory;
        let mut cmd = Cli::command();
        let run = cmd.find_subcommand_mut("run").expect("run");
        let help = run.render_long_help().to_string();
        for name in crate::engine::named::DEFAULT_NAMES {
            assert!(help.contains(name), "{name} missing from:\n{help}");
        }
    }

    #[test]
    fn gates_parse_into_ids_and_an_unknown_one_is_refused() {
        let cli = Cli::try_parse_from(["emq-gate", "run", "--gates", "g1,G8"]).unwrap();
        let Command::Run { common, .. } = cli.command else {
            panic!("not run")
        };
        assert_eq!(common.gates, Some(vec![GateId::G1, GateId::G8]));
        let e = Cli::try_parse_from(["emq-gate", "run", "--gates", "G1,G9"]).unwrap_err();
        assert_eq!(e.exit_code(), crate::error::ExitCode::BadInput as i32);
        assert!(
            e.to_string()
                .contains("unknown gate \"G9\" (known: G1, G2, G3, G4, G5, G6, G7, G8)"),
            "{e}"
        );
    }
}
