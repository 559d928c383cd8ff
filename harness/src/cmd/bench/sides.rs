//! The two sides of one measurement, the connector's batch and valkey-benchmark's, run in turn
//! on the same engine, script and database, with the engine's counters read around each. Its
//! own concept: how one figure is taken, apart from what the bench reports.

use std::path::Path;
use std::time::Instant;

use crate::cmd::bench_stats::{
    EngineStats, RoundLatency, StepLoad, busiest_load, latency_rounds, parse_info, round_latency,
};
use crate::cmd::bench_valkey::{BenchFigures, benchmark_args, run_benchmark};
pub use crate::cmd::bench_valkey::{PAYLOAD, QUEUE};
use crate::connector::{ConnectorFactory, Verbs};
use crate::engine::{Admin, Engine};
use crate::error::HarnessError;
use crate::gates::g5_pipeline::time_batch;
use crate::protocol::grammar::key;
use crate::report::output::Progress;

use super::{BenchOptions, CycleFigure, DepthRow, conn_err};

/// What both sides of a measurement share: the engine, its bench database and the script.
pub(super) struct Sides<'a> {
    pub(super) engine: &'a Engine,
    pub(super) db: u32,
    pub(super) admin: &'a mut Admin,
    pub(super) make: &'a dyn ConnectorFactory,
    pub(super) bench_bin: Option<&'a Path>,
    pub(super) sha: &'a str,
    /// The last valkey-benchmark failure replaces the report's note.
    pub(super) note: &'a mut Option<String>,
    /// The `io-threads` setting the engine runs with now: every figure is stamped with it.
    pub(super) io_threads: Option<u32>,
}

impl Sides<'_> {
    /// One depth: `repeat` runs, ours then theirs in turn, reduced to best and median; then the
    /// latency of single rounds at this depth.
    pub(super) fn depth(
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
        let (mut ours, mut our_loads) = (Vec::new(), Vec::new());
        let (mut theirs, mut their_loads, mut figures) = (Vec::new(), Vec::new(), Vec::new());
        for r in 0..opts.repeat.max(1) {
            let (ops, load) = self.ours(n, depth)?;
            ours.push(ops);
            our_loads.push(load);
            if let Some(bin) = self.bench_bin {
                match self.theirs(bin, n, depth)? {
                    Ok((f, load)) => {
                        theirs.push(f.rps);
                        their_loads.push(load);
                        figures.push(f);
                    }
                    Err(e) => *self.note = Some(e),
                }
            }
            let share = |l: Option<&Option<StepLoad>>| {
                l.copied()
                    .flatten()
                    .map_or(String::new(), |l| format!(" ({:.2} of ceiling)", l.share))
            };
            progress.line(&format!(
                "depth {depth:>4} run {}: ours {:>9.0} ops/s{}, valkey-benchmark {}{}",
                r + 1,
                ours[ours.len() - 1],
                share(our_loads.last()),
                theirs
                    .last()
                    .map_or("n/a".into(), |x| format!("{x:>9.0} ops/s")),
                share(their_loads.last()),
            ));
        }
        let rounds = latency_rounds(opts.n, depth);
        let latency = self.rounds(depth, rounds)?;
        progress.line(&format!(
            "depth {depth:>4}: {rounds} rounds, p50 {:.0} µs, p99 {:.0} µs",
            latency.p50_us, latency.p99_us
        ));
        let c = best(&ours);
        let e = (!theirs.is_empty()).then(|| best(&theirs));
        let (cm, em) = (median(&ours), (!theirs.is_empty()).then(|| median(&theirs)));
        let at = |loads: &[Option<StepLoad>], runs: &[f64]| best_at(runs).and_then(|i| loads[i]);
        Ok(DepthRow {
            io_threads: self.io_threads,
            depth,
            n,
            connector_ops_per_s: c,
            connector_load: at(&our_loads, &ours),
            engine_load: at(&their_loads, &theirs),
            engine_figures: best_at(&theirs).map(|i| figures[i]),
            connector_runs: ours,
            connector_run_loads: our_loads,
            engine_ops_per_s: e,
            engine_runs: theirs,
            engine_run_loads: their_loads,
            connector_median: cm,
            engine_median: em,
            ratio: e.map(|e| c / e),
            latency: Some(latency),
        })
    }

    /// A fresh connector with its bench session open.
    fn connected(&mut self) -> Result<Box<dyn crate::connector::Connector>, HarnessError> {
        let mut c = self.make.make()?;
        c.connect("b", self.engine.direct_target(self.db))
            .map_err(conn_err("bench connect"))?;
        Ok(c)
    }

    /// Ours: a fresh connector and database, a warm-up, then the timed batch; ops/s and what the
    /// engine saw of it.
    fn ours(&mut self, n: i64, depth: i64) -> Result<(f64, Option<StepLoad>), HarnessError> {
        self.admin.flushdb()?;
        let mut c = self.connected()?;
        c.batch("b", QUEUE, depth.min(1000), depth, PAYLOAD)
            .map_err(conn_err("warm-up"))?;
        self.admin.flushdb()?;
        let start = self.stats_start();
        let t = time_batch(c.as_mut(), "b", QUEUE, n, depth, PAYLOAD).map_err(conn_err("batch"))?;
        let load = self.load_since(start, n as u64, t.secs);
        if t.done != n {
            return Err(HarnessError::Engine(format!(
                "batch({n}, {depth}) replied {}",
                t.done
            )));
        }
        Ok((t.ops_per_s, load))
    }

    /// Theirs: the same script, keys, arguments, depth and count, one connection. The inner
    /// error is valkey-benchmark's own failure, which becomes the note rather than ending the bench.
    #[allow(clippy::type_complexity)]
    fn theirs(
        &mut self,
        bin: &Path,
        n: i64,
        depth: i64,
    ) -> Result<Result<(BenchFigures, Option<StepLoad>), String>, HarnessError> {
        self.admin.flushdb()?;
        let url = self.engine.direct_target(self.db);
        let args = benchmark_args(&url, self.sha, n, depth)
            .ok_or_else(|| HarnessError::BadInput(format!("engine url {url:?}")))?;
        let start = self.stats_start();
        match run_benchmark(bin, &args) {
            Ok(f) => {
                // Its own clock: the wall of its requests, not of its process start.
                let load = self.load_since(start, n as u64, n as f64 / f.rps.max(1e-9));
                let seq: Option<String> = self.admin.get(&key(QUEUE, "seq"))?;
                let landed: i64 = seq.and_then(|s| s.parse().ok()).unwrap_or(0);
                if landed < n {
                    return Err(HarnessError::Engine(format!(
                        "valkey-benchmark landed {landed} of {n} enqueues at depth {depth}"
                    )));
                }
                Ok(Ok((f, load)))
            }
            Err(e) => Ok(Err(e)),
        }
    }

    /// `rounds` single pipelined rounds of `depth` enqueues, each timed on its own (the same
    /// [`time_batch`] clock): the latency a caller of the connector waits per round.
    fn rounds(&mut self, depth: i64, rounds: usize) -> Result<RoundLatency, HarnessError> {
        self.admin.flushdb()?;
        let mut c = self.connected()?;
        c.batch("b", QUEUE, depth, depth, PAYLOAD)
            .map_err(conn_err("warm-up"))?;
        let mut us = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            let t = time_batch(c.as_mut(), "b", QUEUE, depth, depth, PAYLOAD)
                .map_err(conn_err("round"))?;
            if t.done != depth {
                return Err(HarnessError::Engine(format!(
                    "batch({depth}, {depth}) replied {}",
                    t.done
                )));
            }
            us.push(t.secs * 1e6);
        }
        self.admin.flushdb()?;
        Ok(round_latency(depth, &us))
    }

    /// Zeroes the command statistics and reads every node: a step's starting point. None (and
    /// a note) when the engine refuses, e.g. a url engine's restricted user.
    fn stats_start(&mut self) -> Option<Vec<EngineStats>> {
        let r = self
            .admin
            .config_resetstat()
            .and_then(|()| stats_read(self.admin));
        self.stats_ok(r)
    }

    /// The step's load, read right after it.
    fn load_since(
        &mut self,
        start: Option<Vec<EngineStats>>,
        units: u64,
        wall_s: f64,
    ) -> Option<StepLoad> {
        let start = start?;
        let r = stats_read(self.admin);
        let end = self.stats_ok(r)?;
        busiest_load(&start, &end, units, wall_s)
    }

    fn stats_ok<T>(&mut self, r: Result<T, HarnessError>) -> Option<T> {
        r.map_err(|e| {
            if self.note.is_none() {
                *self.note = Some(format!("the engine's counters were not readable: {e}"));
            }
        })
        .ok()
    }

    /// `cycles` claim → complete cycles, one at a time on one connection.
    pub(super) fn cycles(
        &mut self,
        cycles: i64,
        progress: &Progress,
    ) -> Result<CycleFigure, HarnessError> {
        progress.line(&format!("{cycles} claim → complete cycles"));
        let mut c = self.connected()?;
        c.batch("b", QUEUE, cycles, 1000, PAYLOAD)
            .map_err(conn_err("fill"))?;
        let start = self.stats_start();
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
        let load = self.load_since(start, cycles as u64, secs);
        self.admin.flushdb()?;
        Ok(CycleFigure {
            io_threads: self.io_threads,
            cycles,
            secs,
            cycles_per_s: cycles as f64 / secs,
            us_per_cycle: secs * 1e6 / cycles as f64,
            load,
        })
    }
}

/// `INFO cpu commandstats stats` of every node (each primary of a cluster), parsed.
fn stats_read(admin: &mut Admin) -> Result<Vec<EngineStats>, HarnessError> {
    let texts: Vec<String> = admin.query_each(&["INFO", "cpu", "commandstats", "stats"])?;
    Ok(texts.iter().map(|t| parse_info(t)).collect())
}

/// The middle run (the upper one of an even count).
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

/// Where the fastest run is, so its engine figures go with it.
fn best_at(v: &[f64]) -> Option<usize> {
    (0..v.len()).max_by(|&a, &b| v[a].total_cmp(&v[b]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0]), 4.0);
    }

    #[test]
    fn best_at_is_the_fastest_run() {
        assert_eq!(best_at(&[1.0, 3.0, 2.0]), Some(1));
        assert_eq!(best_at(&[]), None);
    }
}
