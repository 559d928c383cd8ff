//! `emq-gate`: the command line. Parsing here; work in `run`; printing in `output`.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::cmd::run::{RunOptions, Subject};
use crate::connector::child::ChildSpec;
use crate::engine::{DEFAULT_IMAGE, EngineChoice, EngineOptions};

const EXIT_CODES: &str = "\
EXIT CODES:
    0  every judged gate passed (run), the record still holds (check), the smoke test passed
    1  a gate failed, the record no longer holds, or the smoke test found a problem
    2  bad input: a malformed case file, bad arguments, a missing or drifted bundle
    3  infrastructure: no engine could be started or reached

ENVIRONMENT (a flag wins over its variable; a bad value is an error):
    EMQ_ENGINE            --engine: auto | container | binary | url
    EMQ_ENGINE_URL        --url: redis://[:password@]host:port[/db]
    EMQ_ENGINE_NAME       --engine-name: valkey-9.1 | valkey-8.1 | redis-7.0, through
                          EMQ_ENGINE_<NAME>_SERVER / _IMAGE (written by ci/provision)
    EMQ_ALLOW_FLUSH       --allow-flush: 1 lets the harness flush a url database with foreign keys
    EMQ_VALKEY_IMAGE      --image: the container image (default valkey/valkey:9.1.2)
    EMQ_VALKEY_SERVER     --valkey-server: the binary engine's valkey-server
    EMQ_VALKEY_BENCHMARK  valkey-benchmark for `bench` (default: beside valkey-server)
    EMQ_SEED              --seed: G7 and G8's seed (default 1)
    EMQ_BUNDLE_DIR        the bundle directory (default: this repository's bundle/)
    EMQ_CASES_DIR         the case corpus (default: this repository's cases/)
    EMQ_CACHE             where ci/provision builds and records paths (default ~/.cache/emq)
    The README's table also lists the variables the test suite reads.";

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
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the eight gates against a connector and print the record (Markdown) on stdout.
    Run {
        #[command(flatten)]
        common: Common,
        /// Also write <name>.json, .md and .junit.xml into this directory.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Regenerate the committed record under reports/ (reports/<name>.json, .md, .junit.xml);
    /// the files stay untouched when no verdict, evidence, SHA or version changed.
    Record {
        #[command(flatten)]
        common: Common,
        /// Rewrite the files even when only times and rates changed.
        #[arg(long)]
        refresh: bool,
    },
    /// Run again with the committed record's seed and compare: verdicts, evidence, SHAs, versions.
    Check {
        #[command(flatten)]
        common: Common,
    },
    /// Connectors × engines: a full gate run per cell, written as reports/matrix.{json,md} and
    /// reports/index.html (untouched when nothing stable changed); --check re-runs and compares.
    Matrix(MatrixArgs),
    /// The connectors × engines grid of gate records and matrices (e.g. reports/*.json).
    Summary {
        /// Record or matrix JSON files; other JSON (the schema) is skipped.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// text (coloured on a terminal unless NO_COLOR) or json.
        #[arg(long, default_value = "text", value_parser = ["text", "json"])]
        format: String,
    },
    /// A few seconds' check for connector authors: hello, connect, each verb once, a short pipeline.
    Smoke {
        #[command(flatten)]
        engine: EngineArgs,
        /// Per-request timeout in seconds.
        #[arg(long, default_value_t = 10)]
        timeout: u64,
        /// The connector command and its arguments (after `--`).
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// The rule catalogue: every numbered rule of bundle/SPEC.md, the gate checks and cases that
    /// enforce it, and the broken connector the gate must catch (or why none can break it).
    Rules,
    /// Throughput against the engine's own limit: the reference connector's pipelined EVALSHA
    /// enqueue batch and valkey-benchmark (same SHA, keys, depth, one connection) on one engine,
    /// a claim → complete cycle, and each gate's wall time.
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
        #[arg(long, default_value_t = 1, env = "EMQ_SEED")]
        seed: u64,
    },
}

/// `emq-gate matrix`'s flags.
#[derive(Debug, Args)]
pub struct MatrixArgs {
    /// Connectors (rows): `reference`, or a label run from $EMQ_<LABEL>_CONNECTOR
    /// [default: reference,python, and node when EMQ_NODE_CONNECTOR is set].
    #[arg(long, value_delimiter = ',')]
    pub connectors: Option<Vec<String>>,
    /// Engines (columns) by name, through EMQ_ENGINE_<NAME>_SERVER / _IMAGE.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "valkey-9.1,valkey-8.1,redis-7.0"
    )]
    pub engines: Vec<String>,
    /// How each engine is booted.
    #[arg(long, value_enum, default_value = "binary")]
    pub engine: EngineChoice,
    /// Seed for G7 and G8.
    #[arg(long, default_value_t = 1, env = "EMQ_SEED")]
    pub seed: u64,
    /// G7 histories.
    #[arg(long, default_value_t = 256)]
    pub histories: u32,
    /// G5 batch size.
    #[arg(long, default_value_t = 100_000)]
    pub batch: i64,
    /// Per-request timeout for a child-process connector, seconds.
    #[arg(long, default_value_t = 10)]
    pub timeout: u64,
    /// Re-run with the committed matrix's connectors, engines and seed and compare verdicts,
    /// evidence, SHAs and versions (what CI runs); writes nothing.
    #[arg(long)]
    pub check: bool,
    /// Rewrite the files even when only times and rates changed.
    #[arg(long)]
    pub refresh: bool,
    /// Run nothing: render matrix.md and index.html again from the committed matrix.json
    /// (after a change to the page's renderer).
    #[arg(long, conflicts_with = "check")]
    pub render: bool,
    /// Where matrix.json, matrix.md and index.html live [default: this repository's reports/].
    #[arg(long)]
    pub reports: Option<PathBuf>,
}

impl MatrixArgs {
    pub fn options(&self) -> crate::cmd::matrix::MatrixOptions {
        crate::cmd::matrix::MatrixOptions {
            connectors: self
                .connectors
                .clone()
                .unwrap_or_else(crate::cmd::matrix::default_connectors),
            engines: self.engines.clone(),
            kind: self.engine,
            seed: self.seed,
            histories: self.histories,
            batch: self.batch,
            timeout: self.timeout,
            check: self.check,
            refresh: self.refresh,
            render: self.render,
            reports: self
                .reports
                .clone()
                .unwrap_or_else(|| crate::repo_relative("reports")),
        }
    }
}

/// Engine selection flags.
#[derive(Debug, Args)]
pub struct EngineArgs {
    /// Which engine to judge on.
    #[arg(long, value_enum, default_value = "auto", env = "EMQ_ENGINE")]
    pub engine: EngineChoice,
    /// An existing server (engine url); never flushed when it holds foreign keys unless --allow-flush.
    #[arg(long, env = "EMQ_ENGINE_URL")]
    pub url: Option<String>,
    /// Let the harness flush a url database that holds keys it did not make.
    #[arg(long, env = "EMQ_ALLOW_FLUSH")]
    pub allow_flush: bool,
    /// The container image.
    #[arg(long, default_value = DEFAULT_IMAGE, env = "EMQ_VALKEY_IMAGE")]
    pub image: String,
    /// The valkey-server binary (binary engine).
    #[arg(long, env = "EMQ_VALKEY_SERVER")]
    pub valkey_server: Option<PathBuf>,
    /// An engine by name (valkey-9.1, valkey-8.1, redis-7.0), through EMQ_ENGINE_<NAME>_SERVER
    /// (binary engine) or _IMAGE (container engine); wins over --valkey-server and --image.
    #[arg(long, env = "EMQ_ENGINE_NAME", value_parser = parse_engine_name)]
    pub engine_name: Option<crate::engine::named::EngineName>,
}

fn parse_engine_name(s: &str) -> Result<crate::engine::named::EngineName, String> {
    crate::engine::named::EngineName::resolve(s)
}

/// Flags shared by run, record and check.
#[derive(Debug, Args)]
pub struct Common {
    #[command(flatten)]
    pub engine: EngineArgs,
    /// The record's name (file stem under reports/ or --out).
    #[arg(long, default_value = "reference")]
    pub name: String,
    /// Seed for G7 and G8.
    #[arg(long, default_value_t = 1, env = "EMQ_SEED")]
    pub seed: u64,
    /// G7 histories.
    #[arg(long, default_value_t = 256)]
    pub histories: u32,
    /// G5 batch size (at least 100 000 certifies).
    #[arg(long, default_value_t = 100_000)]
    pub batch: i64,
    /// Only these gates (e.g. G1,G5); the rest are reported ERROR.
    #[arg(long, value_delimiter = ',')]
    pub gates: Option<Vec<String>>,
    /// Per-request timeout for a child-process connector, seconds.
    #[arg(long, default_value_t = 10)]
    pub timeout: u64,
    /// Judge a connector in another runtime: its command and arguments after `--`
    /// (default: the in-process reference connector).
    #[arg(last = true)]
    pub connector: Vec<String>,
}

impl EngineArgs {
    /// Engine options from the flags (clap has already read the environment).
    pub fn options(&self) -> EngineOptions {
        let mut o = EngineOptions {
            choice: self.engine,
            url: self.url.clone().filter(|u| !u.is_empty()),
            image: self.image.clone(),
            valkey_server: self.valkey_server.clone(),
            allow_flush: self.allow_flush,
        };
        if let Some(name) = &self.engine_name {
            let named = crate::cmd::matrix::engine_options(name, self.engine);
            o.image = named.image;
            o.valkey_server = named.valkey_server;
        }
        o
    }
}

/// A child spec from a command line.
pub fn child_spec(command: &[String], timeout: u64) -> ChildSpec {
    ChildSpec::new(command.iter().cloned()).with_timeout(Duration::from_secs(timeout))
}

impl Common {
    /// Run options from the flags.
    pub fn options(&self) -> RunOptions {
        RunOptions {
            engine: self.engine.options(),
            subject: if self.connector.is_empty() {
                Subject::Reference
            } else {
                Subject::Child(child_spec(&self.connector, self.timeout))
            },
            seed: self.seed,
            histories: self.histories,
            batch: self.batch,
            only: self.gates.clone(),
        }
    }
}
