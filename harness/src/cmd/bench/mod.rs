//! Throughput, measured honestly: the connector's pipelined `EVALSHA` enqueue batch against the
//! engine's own limit — `valkey-benchmark` (built with the engine by `ci/provision`) sending the
//! same script SHA with the same keys, arguments, depth and request count, over one connection,
//! on the same engine, in the same run. G5's `batch_ops_per_s` figure comes from [`time_batch`] (in G5),
//! so the gate record and `emq-gate bench` can never disagree about how ops/s is measured.
//! Beside that ratio, each step is read from the engine's own counters (`bench_stats`): the Lua
//! ceiling of a queue on this engine and the share of it the connector reached, because a PASS
//! costs what the connector takes and the ceiling says what it could have taken.
//! With `--io-threads`, the same steps run once per I/O-thread setting on the same engine, the
//! setting changed between them with `CONFIG SET io-threads` ([`io_threads`]), each row saying which.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::cmd::bench_stats::{RoundLatency, StepLoad, build_profile};
use crate::cmd::bench_valkey::{BenchFigures, locate_benchmark};
pub use crate::cmd::bench_valkey::{PAYLOAD, QUEUE};
use crate::cmd::run::{Subject, factory};
use crate::connector::{ConnectorFactory, Verbs};
use crate::engine::{Admin, Engine, EngineOptions};
use crate::error::{ConnectorError, HarnessError};
use crate::gates::GateContext;
use crate::protocol::bundle::Bundle;
use crate::report::output::Progress;
use io_threads::{io_threads_of, setting_label, settings};

pub mod io_threads;
mod sides;

use sides::Sides;

/// The database the bench owns on a booted engine (the gates own 901..=908).
pub const BENCH_DB: u32 = 950;

/// What to measure.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    pub engine: EngineOptions,
    /// Enqueues per measured batch at depth ≥ 16 (depth 1 uses a tenth: it is round-trip bound).
    pub n: i64,
    /// Measurements per depth and side (alternating); the best and the median are reported.
    pub repeat: u32,
    /// The depths to compare.
    pub depths: Vec<i64>,
    /// claim → complete cycles to time (0 skips).
    pub cycles: i64,
    /// Also run the eight gates on the same engine and report each one's wall time.
    pub gates: bool,
    pub seed: u64,
    pub histories: u32,
    pub batch: i64,
    /// The bundle and cases judged by.
    pub dirs: crate::cmd::sources::Dirs,
    /// A child-process connector's command and arguments (empty: the in-process reference),
    /// spawned as `emq-gate run` spawns it.
    pub connector: Vec<String>,
    /// Per-request timeout for a child-process connector, seconds.
    pub timeout: u64,
    /// The `io-threads` settings to measure, one after the other on the same engine (empty: as
    /// the engine booted, unchanged).
    pub io_threads: Vec<u32>,
}

/// One depth: ours against the engine's limit.
#[derive(Debug, Clone, Serialize)]
pub struct DepthRow {
    /// `io-threads` as the engine reported it for this row (None when it does not say).
    pub io_threads: Option<u32>,
    pub depth: i64,
    pub n: i64,
    /// Best-of-runs ops/s of the reference connector's `batch`.
    pub connector_ops_per_s: f64,
    pub connector_median: f64,
    /// Every run, ops/s (runs alternate: ours, then valkey-benchmark, per repeat).
    pub connector_runs: Vec<f64>,
    /// Best-of-runs rps of `valkey-benchmark` (None when it is not installed or failed).
    pub engine_ops_per_s: Option<f64>,
    pub engine_median: Option<f64>,
    pub engine_runs: Vec<f64>,
    /// connector / engine, best of runs on each side.
    pub ratio: Option<f64>,
    /// The engine's view of the connector's best run: the Lua ceiling, the share of it reached,
    /// the main thread's CPU (None when INFO could not be read).
    pub connector_load: Option<StepLoad>,
    /// The same for valkey-benchmark's best run.
    pub engine_load: Option<StepLoad>,
    /// Every run's load, in the order of the runs.
    pub connector_run_loads: Vec<Option<StepLoad>>,
    pub engine_run_loads: Vec<Option<StepLoad>>,
    /// valkey-benchmark's own figures of its best run (its latency is per request).
    pub engine_figures: Option<BenchFigures>,
    /// p50 / p99 of one pipelined round of `depth` enqueues through the connector's `batch`.
    pub latency: Option<RoundLatency>,
}

/// claim → complete cycles, one at a time on one connection.
#[derive(Debug, Clone, Serialize)]
pub struct CycleFigure {
    /// `io-threads` as the engine reported it for these cycles.
    pub io_threads: Option<u32>,
    pub cycles: i64,
    pub secs: f64,
    pub cycles_per_s: f64,
    /// Microseconds per cycle (two round trips).
    pub us_per_cycle: f64,
    /// The engine's view: the ceiling in cycles per second (claim's and complete's scripts).
    pub load: Option<StepLoad>,
}

/// One gate's wall time.
#[derive(Debug, Clone, Serialize)]
pub struct GateWall {
    pub id: crate::gates::GateId,
    pub name: String,
    pub verdict: crate::gates::Verdict,
    pub wall_ms: u64,
}

/// Everything `emq-gate bench` measured.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    /// `debug` or `release`: the profile this emq-gate (and so the reference connector) was
    /// built with.
    pub profile: String,
    /// Cores this process may use (`available_parallelism`): the engine, the connector and
    /// valkey-benchmark share them, and I/O threads need one of their own to help.
    pub cores: Option<usize>,
    /// The measured connector's hello name (`reference` for the in-process one).
    pub connector: String,
    pub engine_kind: String,
    pub engine: String,
    pub valkey_version: String,
    pub boot_ms: u64,
    pub script_sha: String,
    pub valkey_benchmark: Option<String>,
    pub note: Option<String>,
    /// `io-threads` as the engine booted (before any `--io-threads` setting, and again for the
    /// gates).
    pub io_threads_booted: Option<u32>,
    /// The settings `--io-threads` asked for, in the order measured (empty: as booted).
    pub io_threads_asked: Vec<u32>,
    /// Every depth of every setting, each row naming its setting.
    pub depths: Vec<DepthRow>,
    /// claim → complete, once per setting (empty with `--cycles 0`).
    pub cycles: Vec<CycleFigure>,
    /// On a cluster: one batch over 1, 3 and 12 queues, cluster against a single node.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub spread: Vec<crate::cmd::bench_spread::SpreadRow>,
    pub gates: Vec<GateWall>,
    /// Sum of the gates' walls, ms.
    pub gates_ms: u64,
    /// Boot plus gates, ms: what `emq-gate run` costs on this engine.
    pub gate_total_ms: u64,
}

fn conn_err(what: &str) -> impl Fn(ConnectorError) -> HarnessError + '_ {
    move |e| HarnessError::Engine(format!("{what}: {e}"))
}

/// Boots the engine, compares depth by depth, times claim → complete, then (optionally) runs the
/// gates on the same engine.
pub fn bench(opts: &BenchOptions, progress: &Progress) -> Result<BenchReport, HarnessError> {
    let bundle = Arc::new(opts.dirs.load_bundle()?);
    let engine = crate::cmd::run::boot(&opts.engine, progress)?;
    let db = if engine.has_databases() { BENCH_DB } else { 0 };
    let mut admin = engine.prepare_db(db)?;
    let sha = load_enqueue(&mut admin, &bundle)?;
    let cluster = engine.is_cluster();
    // On a cluster valkey-benchmark sends every command to one node: no reference for a queue
    // that lives elsewhere. The spread table compares the cluster with a single node instead.
    let bench_bin = locate_benchmark(Some(&engine)).filter(|_| !cluster);
    let mut note = engine_note(cluster, bench_bin.is_some());
    let make = factory(&subject(opts), &bundle);
    let connector = connector_name(make.as_ref())?;
    let mut side = Sides {
        engine: &engine,
        db,
        admin: &mut admin,
        make: make.as_ref(),
        bench_bin: bench_bin.as_deref(),
        sha: &sha,
        note: &mut note,
        io_threads: None,
    };
    let booted_io = io_threads_now(side.admin);
    let asked = settings(&opts.io_threads);
    let (rows, cycles) = measure(&mut side, opts, booted_io, &asked, progress)?;
    drop(admin);
    let spread = if cluster {
        crate::cmd::bench_spread::spread(
            &engine,
            opts.engine.valkey_server.clone(),
            &bundle,
            opts.n,
            opts.repeat,
            progress,
        )?
    } else {
        Vec::new()
    };
    let gates = if opts.gates {
        gate_walls(opts, &engine, &bundle, make.as_ref(), progress)
    } else {
        Vec::new()
    };
    let gates_ms = gates.iter().map(|g| g.wall_ms).sum();
    let boot_ms = duration_ms(engine.boot_time);
    Ok(BenchReport {
        profile: build_profile().to_string(),
        cores: std::thread::available_parallelism().ok().map(|n| n.get()),
        connector,
        engine_kind: engine_kind(&engine),
        engine: engine.source.clone(),
        valkey_version: engine.valkey_version.clone(),
        boot_ms,
        script_sha: sha,
        valkey_benchmark: bench_bin.map(|p| p.display().to_string()),
        note,
        io_threads_booted: booted_io,
        io_threads_asked: asked,
        depths: rows,
        cycles,
        spread,
        gate_total_ms: if gates.is_empty() {
            0
        } else {
            boot_ms + gates_ms
        },
        gates,
        gates_ms,
    })
}

/// Every depth and the claim → complete cycles, once per `io-threads` setting asked (the booted
/// one when none is), then the engine set back as booted: the gates judge it as `run` boots it.
fn measure(
    side: &mut Sides<'_>,
    opts: &BenchOptions,
    booted_io: Option<u32>,
    asked: &[u32],
    progress: &Progress,
) -> Result<(Vec<DepthRow>, Vec<CycleFigure>), HarnessError> {
    let plan: Vec<Option<u32>> = if asked.is_empty() {
        vec![None]
    } else {
        asked.iter().copied().map(Some).collect()
    };
    let (mut rows, mut cycles) = (Vec::new(), Vec::new());
    for want in plan {
        side.io_threads = match want {
            Some(n) => set_io_threads(side.admin, n)?,
            None => booted_io,
        };
        progress.line(&format!("io-threads {}", setting_label(side.io_threads)));
        for &depth in &opts.depths {
            rows.push(side.depth(opts, depth, progress)?);
        }
        side.admin.flushdb()?;
        if opts.cycles > 0 {
            cycles.push(side.cycles(opts.cycles, progress)?);
        }
    }
    if let Some(b) = booted_io.filter(|&b| side.io_threads != Some(b)) {
        set_io_threads(side.admin, b)?;
    }
    Ok((rows, cycles))
}

/// `io-threads` as the engine says now, on every node (None when it does not say: a user
/// without `CONFIG`, nodes that disagree).
fn io_threads_now(admin: &mut Admin) -> Option<u32> {
    admin
        .query_each::<Vec<String>>(&["CONFIG", "GET", "io-threads"])
        .ok()
        .and_then(|r| io_threads_of(&r))
}

/// Sets `io-threads` on every node and reads it back: the setting the next rows are measured
/// with. Valkey 9 changes it at runtime; Valkey 8.1 and Redis refuse it as immutable.
fn set_io_threads(admin: &mut Admin, n: u32) -> Result<Option<u32>, HarnessError> {
    admin
        .query_each::<()>(&["CONFIG", "SET", "io-threads", &n.to_string()])
        .map_err(|e| {
            // The engine's own words, without a second `engine:`.
            let why = match e {
                HarnessError::Engine(m) => m,
                other => other.to_string(),
            };
            HarnessError::Engine(format!(
                "config set io-threads {n}: {why} (valkey 9 changes io-threads at runtime, older engines do not)"
            ))
        })?;
    let now = io_threads_now(admin);
    if now != Some(n) {
        return Err(HarnessError::Engine(format!(
            "io-threads reads {} after config set io-threads {n}",
            setting_label(now)
        )));
    }
    Ok(now)
}

/// The measured connector's name, from its `hello`.
fn connector_name(make: &dyn ConnectorFactory) -> Result<String, HarnessError> {
    make.make()
        .map_err(|e| HarnessError::ConnectorStart(e.to_string()))?
        .hello()
        .map(|h| h.name)
        .map_err(conn_err("hello"))
}

/// The engine's kind as the report names it.
fn engine_kind(engine: &Engine) -> String {
    match engine.tls() {
        // Both sides speak TLS to the engine's TLS port with the run's CA.
        Some(_) => format!("{:?} over TLS", engine.kind).to_lowercase(),
        None => format!("{:?}", engine.kind).to_lowercase(),
    }
}

/// Why the engine column is empty, when it is.
fn engine_note(cluster: bool, has_benchmark: bool) -> Option<String> {
    if cluster {
        Some("on a cluster the engine column is empty (valkey-benchmark sends every command to one node); see the spread table".to_string())
    } else if !has_benchmark {
        Some("valkey-benchmark not found (run ci/provision or set EMQ_VALKEY_BENCHMARK): engine column empty".to_string())
    } else {
        None
    }
}

/// Who is measured: the reference, or the child connector `-- CMD` names.
fn subject(opts: &BenchOptions) -> Subject {
    if opts.connector.is_empty() {
        Subject::Reference
    } else {
        Subject::Child(crate::cmd::sources::child_spec(
            &opts.connector,
            opts.timeout,
            &opts.dirs.bundle,
        ))
    }
}

/// Loads the bundle's enqueue script; the SHA the engine reports must be the bundle's.
fn load_enqueue(admin: &mut Admin, bundle: &Bundle) -> Result<String, HarnessError> {
    let script = bundle.script("enqueue");
    let sha = admin.script_load(&script.source)?;
    if sha != script.sha1 {
        return Err(HarnessError::Engine(format!(
            "the engine loaded enqueue as {sha}, the bundle says {}",
            script.sha1
        )));
    }
    Ok(sha)
}

/// The eight gates on the bench's engine, each one's wall time.
fn gate_walls(
    opts: &BenchOptions,
    engine: &Engine,
    bundle: &Arc<Bundle>,
    make: &dyn ConnectorFactory,
    progress: &Progress,
) -> Vec<GateWall> {
    let say = |m: &str| progress.line(m);
    let ctx = GateContext {
        engine,
        bundle,
        cases: opts.dirs.cases.clone(),
        factory: make,
        seed: opts.seed,
        histories: opts.histories,
        batch: opts.batch,
        progress: &say,
    };
    // valkey-benchmark's own CONFIG GET, refused to the connector's user, is the instrument's,
    // not the connector's: the gates judge only what comes after (SPEC R4.19).
    if engine.has_acl_users()
        && let Err(e) = engine.admin(0).and_then(|mut a| a.acl_log_take())
    {
        progress.line(&format!("bench: ACL LOG RESET failed: {e}"));
    }
    crate::cmd::run::run_gates(
        &ctx,
        &crate::gates::lanes::every_gate(),
        None,
        false,
        progress,
    )
    .into_iter()
    .map(|o| GateWall {
        verdict: o.verdict,
        wall_ms: duration_ms(o.wall),
        id: o.id,
        name: o.name,
    })
    .collect()
}

fn duration_ms(d: Duration) -> u64 {
    d.as_millis() as u64
}
