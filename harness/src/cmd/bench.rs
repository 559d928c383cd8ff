//! Throughput, measured honestly: the connector's pipelined `EVALSHA` enqueue batch against the
//! engine's own limit — `valkey-benchmark` (built with the engine by `ci/provision`) sending the
//! same script SHA with the same keys, arguments, depth and request count, over one connection,
//! on the same engine, in the same run. G5's `batch_ops_per_s` figure comes from [`time_batch`] (in G5),
//! so the gate record and `emq-gate bench` can never disagree about how ops/s is measured.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

pub use crate::cmd::bench_valkey::{PAYLOAD, QUEUE};
use crate::cmd::bench_valkey::{benchmark_args, locate_benchmark, run_benchmark};
use crate::cmd::run::{Subject, factory};
use crate::connector::{ConnectorFactory, Verbs};
use crate::engine::{Admin, Engine, EngineOptions};
use crate::error::{ConnectorError, HarnessError};
use crate::gates::GateContext;
use crate::gates::g5_pipeline::time_batch;
use crate::protocol::bundle::Bundle;
use crate::protocol::grammar::key;
use crate::report::output::Progress;

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
}

/// One depth: ours against the engine's limit.
#[derive(Debug, Clone, Serialize)]
pub struct DepthRow {
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
}

/// claim → complete cycles, one at a time on one connection.
#[derive(Debug, Clone, Serialize)]
pub struct CycleFigure {
    pub cycles: i64,
    pub secs: f64,
    pub cycles_per_s: f64,
    /// Microseconds per cycle (two round trips).
    pub us_per_cycle: f64,
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
    pub engine_kind: String,
    pub engine: String,
    pub valkey_version: String,
    pub boot_ms: u64,
    pub script_sha: String,
    pub valkey_benchmark: Option<String>,
    pub note: Option<String>,
    pub depths: Vec<DepthRow>,
    pub cycle: Option<CycleFigure>,
    /// On a cluster: one batch over 1, 3 and 12 queues, cluster against a single node.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub spread: Vec<crate::cmd::bench_spread::SpreadRow>,
    pub gates: Vec<GateWall>,
    /// Sum of the gates' walls, ms.
    pub gates_ms: u64,
    /// Boot plus gates, ms: what `emq-gate run` costs on this engine.
    pub gate_total_ms: u64,
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s[s.len() / 2]
}

/// The fastest run: on a shared machine, the run least disturbed by other work, taken the same
/// way on both sides.
fn best(v: &[f64]) -> f64 {
    v.iter().copied().fold(0.0, f64::max)
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
    let mut note = None;
    if cluster {
        note = Some("on a cluster the engine column is empty (valkey-benchmark sends every command to one node); see the spread table".to_string());
    } else if bench_bin.is_none() {
        note = Some("valkey-benchmark not found (run ci/provision or set EMQ_VALKEY_BENCHMARK): engine column empty".to_string());
    }

    let make = factory(&Subject::Reference, &bundle);
    let mut side = Sides {
        engine: &engine,
        db,
        admin: &mut admin,
        make: make.as_ref(),
        bench_bin: bench_bin.as_deref(),
        sha: &sha,
        note: &mut note,
    };
    let mut rows = Vec::new();
    for &depth in &opts.depths {
        rows.push(side.depth(opts, depth, progress)?);
    }
    side.admin.flushdb()?;
    let cycle = if opts.cycles > 0 {
        Some(side.cycles(opts.cycles, progress)?)
    } else {
        None
    };
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
        engine_kind: match engine.tls() {
            // Both sides speak TLS to the engine's TLS port with the run's CA.
            Some(_) => format!("{:?} over TLS", engine.kind).to_lowercase(),
            None => format!("{:?}", engine.kind).to_lowercase(),
        },
        engine: engine.source.clone(),
        valkey_version: engine.valkey_version.clone(),
        boot_ms,
        script_sha: sha,
        valkey_benchmark: bench_bin.map(|p| p.display().to_string()),
        note,
        depths: rows,
        cycle,
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

/// What both sides of a measurement share: the engine, its bench database and the script.
struct Sides<'a> {
    engine: &'a Engine,
    db: u32,
    admin: &'a mut Admin,
    make: &'a dyn ConnectorFactory,
    bench_bin: Option<&'a Path>,
    sha: &'a str,
    /// The last valkey-benchmark failure replaces the report's note.
    note: &'a mut Option<String>,
}

impl Sides<'_> {
    /// One depth: `repeat` runs, ours then theirs in turn, reduced to best and median.
    fn depth(
        &mut self,
        opts: &BenchOptions,
        depth: i64,
        progress: &Progress,
    ) -> Result<DepthRow, HarnessError> {
        let n = if depth == 1 {
            (opts.n / 10).max(1)
        } else {
            opts.n
        };
        let mut ours = Vec::new();
        let mut theirs = Vec::new();
        for r in 0..opts.repeat.max(1) {
            ours.push(self.ours(n, depth)?);
            if let Some(bin) = self.bench_bin {
                match self.theirs(bin, n, depth)? {
                    Ok(rps) => theirs.push(rps),
                    Err(e) => *self.note = Some(e),
                }
            }
            progress.line(&format!(
                "depth {depth:>4} run {}: ours {:>9.0} ops/s, valkey-benchmark {}",
                r + 1,
                ours[ours.len() - 1],
                theirs
                    .last()
                    .map_or("n/a".into(), |x| format!("{x:>9.0} ops/s"))
            ));
        }
        let c = best(&ours);
        let e = (!theirs.is_empty()).then(|| best(&theirs));
        let (cm, em) = (median(&ours), (!theirs.is_empty()).then(|| median(&theirs)));
        Ok(DepthRow {
            depth,
            n,
            connector_ops_per_s: c,
            connector_runs: ours,
            engine_ops_per_s: e,
            engine_runs: theirs,
            connector_median: cm,
            engine_median: em,
            ratio: e.map(|e| c / e),
        })
    }

    /// Ours: a fresh connector and database, a warm-up, then the timed batch; ops/s.
    fn ours(&mut self, n: i64, depth: i64) -> Result<f64, HarnessError> {
        self.admin.flushdb()?;
        let mut c = self.make.make()?;
        c.connect("b", self.engine.direct_target(self.db))
            .map_err(conn_err("bench connect"))?;
        c.batch("b", QUEUE, depth.min(1000), depth, PAYLOAD)
            .map_err(conn_err("warm-up"))?;
        self.admin.flushdb()?;
        let t = time_batch(c.as_mut(), "b", QUEUE, n, depth, PAYLOAD).map_err(conn_err("batch"))?;
        if t.done != n {
            return Err(HarnessError::Engine(format!(
                "batch({n}, {depth}) replied {}",
                t.done
            )));
        }
        Ok(t.ops_per_s)
    }

    /// Theirs: the same script, keys, arguments, depth and count, one connection. The inner
    /// error is valkey-benchmark's own failure, which becomes the note rather than ending the bench.
    fn theirs(
        &mut self,
        bin: &Path,
        n: i64,
        depth: i64,
    ) -> Result<Result<f64, String>, HarnessError> {
        self.admin.flushdb()?;
        let url = self.engine.direct_target(self.db);
        let args = benchmark_args(&url, self.sha, n, depth)
            .ok_or_else(|| HarnessError::BadInput(format!("engine url {url:?}")))?;
        match run_benchmark(bin, &args) {
            Ok(rps) => {
                let seq: Option<String> = self.admin.get(&key(QUEUE, "seq"))?;
                let landed: i64 = seq.and_then(|s| s.parse().ok()).unwrap_or(0);
                if landed < n {
                    return Err(HarnessError::Engine(format!(
                        "valkey-benchmark landed {landed} of {n} enqueues at depth {depth}"
                    )));
                }
                Ok(Ok(rps))
            }
            Err(e) => Ok(Err(e)),
        }
    }

    /// `cycles` claim → complete cycles, one at a time on one connection.
    fn cycles(&mut self, cycles: i64, progress: &Progress) -> Result<CycleFigure, HarnessError> {
        progress.line(&format!("{cycles} claim → complete cycles"));
        let mut c = self.make.make()?;
        c.connect("b", self.engine.direct_target(self.db))
            .map_err(conn_err("bench connect"))?;
        c.batch("b", QUEUE, cycles, 1000, PAYLOAD)
            .map_err(conn_err("fill"))?;
        let t0 = Instant::now();
        for _ in 0..cycles {
            let job = c
                .claim("b", QUEUE, 30_000)
                .map_err(conn_err("claim"))?
                .ok_or_else(|| HarnessError::Engine("claim found no job".into()))?;
            if !c
                .complete("b", QUEUE, &job.id, job.attempts)
                .map_err(conn_err("complete"))?
            {
                return Err(HarnessError::Engine(format!(
                    "complete({}) replied false",
                    job.id
                )));
            }
        }
        let secs = t0.elapsed().as_secs_f64().max(1e-9);
        self.admin.flushdb()?;
        Ok(CycleFigure {
            cycles,
            secs,
            cycles_per_s: cycles as f64 / secs,
            us_per_cycle: secs * 1e6 / cycles as f64,
        })
    }
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
    crate::cmd::run::run_gates(&ctx, None, false, progress)
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

impl BenchReport {
    /// True when every depth ≥ 16 reaches `min` of the engine's limit (vacuously true without
    /// valkey-benchmark).
    pub fn meets(&self, min: f64) -> bool {
        self.depths
            .iter()
            .filter(|r| r.depth >= 16)
            .all(|r| r.ratio.is_none_or(|x| x >= min))
    }

    /// The report as JSON.
    pub fn json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// The report as a Markdown table for people.
    pub fn text(&self) -> String {
        let mut s = format!(
            "# emq-gate bench\n\nengine: {} {} (valkey {}), boot {} ms\nscript: enqueue {}\n\
             same engine, one connection each side, EVALSHA of the same SHA, keys and arguments\n\n",
            self.engine_kind, self.engine, self.valkey_version, self.boot_ms, self.script_sha
        );
        s.push_str("| depth | n | reference connector ops/s | valkey-benchmark ops/s | ratio | medians (ours / engine) |\n");
        s.push_str("|---:|---:|---:|---:|---:|---:|\n");
        for r in &self.depths {
            s.push_str(&format!(
                "| {} | {} | {:.0} | {} | {} | {:.0} / {} |\n",
                r.depth,
                r.n,
                r.connector_ops_per_s,
                r.engine_ops_per_s
                    .map_or("n/a".into(), |x| format!("{x:.0}")),
                r.ratio.map_or("n/a".into(), |x| format!("{x:.3}")),
                r.connector_median,
                r.engine_median.map_or("n/a".into(), |x| format!("{x:.0}")),
            ));
        }
        s.push_str("\nops/s and ratio: best of the runs on each side (runs alternate, so both see the same load)\n");
        if let Some(n) = &self.note {
            s.push_str(&format!("\nnote: {n}\n"));
        }
        if !self.spread.is_empty() {
            s.push_str("\none batch spread over queues (depth 1000): the cluster against a single node booted from the same valkey-server in this run\n\n");
            s.push_str("| queues | primaries | n | cluster ops/s | single node ops/s | cluster / single |\n|---:|---:|---:|---:|---:|---:|\n");
            for r in &self.spread {
                s.push_str(&format!(
                    "| {} | {} | {} | {:.0} | {:.0} | {:.2} |\n",
                    r.queues, r.nodes, r.n, r.cluster_ops_per_s, r.single_ops_per_s, r.ratio
                ));
            }
        }
        if let Some(c) = &self.cycle {
            s.push_str(&format!(
                "\nclaim → complete: {} cycles in {:.2} s = {:.0} cycles/s ({:.1} µs per cycle, two round trips)\n",
                c.cycles, c.secs, c.cycles_per_s, c.us_per_cycle
            ));
        }
        if !self.gates.is_empty() {
            s.push_str("\n| gate | verdict | wall ms |\n|---|---|---:|\n");
            s.push_str(&format!("| engine boot | | {} |\n", self.boot_ms));
            for g in &self.gates {
                s.push_str(&format!(
                    "| {} {} | {} | {} |\n",
                    g.id, g.name, g.verdict, g.wall_ms
                ));
            }
            s.push_str(&format!(
                "| **total (boot + gates)** | | **{}** |\n",
                self.gate_total_ms
            ));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0]), 4.0);
    }
}
