//! `emq-gate bench`'s output: the Markdown table for people, the JSON with every run, and the
//! `--min-ratio` verdict. Kept apart from the measuring, so what a column means is read in one
//! place.

use crate::cmd::bench::BenchReport;
use crate::cmd::bench_stats::StepLoad;

/// `ours / theirs` of a per-side figure, `n/a` where a side has none.
fn pair(ours: Option<f64>, theirs: Option<f64>, f: fn(f64) -> String) -> String {
    let one = |x: Option<f64>| x.map_or("n/a".to_string(), f);
    format!("{} / {}", one(ours), one(theirs))
}

fn two(x: f64) -> String {
    format!("{x:.2}")
}

fn share(l: Option<StepLoad>) -> Option<f64> {
    l.map(|l| l.share)
}

fn cpu(l: Option<StepLoad>) -> Option<f64> {
    l.and_then(|l| l.main_cpu)
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
            "# emq-gate bench\n\nemq-gate {} ({} build), connector: {}\n\
             engine: {} {} (valkey {}), boot {} ms\nscript: enqueue {}\n\
             same engine, one connection each side, EVALSHA of the same SHA, keys and arguments\n\n",
            env!("CARGO_PKG_VERSION"),
            self.profile,
            self.connector,
            self.engine_kind,
            self.engine,
            self.valkey_version,
            self.boot_ms,
            self.script_sha
        );
        self.depth_table(&mut s);
        s.push_str(
            "\nops/s and ratio: best of the runs on each side (runs alternate, so both see the same load)\n\
             Lua ceiling: 1e6 / µs per EVALSHA (INFO commandstats after CONFIG RESETSTAT, in the connector's best run): \
             Lua runs on the main thread only, so one queue can take no more; share: the measured ops/s over each side's own ceiling\n\
             main thread CPU: used_cpu_{user,sys}_main_thread per wall second (1.00 = one core busy)\n\
             round: one pipelined batch of `depth` enqueues through the connector, timed alone\n",
        );
        if let Some(n) = &self.note {
            s.push_str(&format!("\nnote: {n}\n"));
        }
        self.spread_table(&mut s);
        self.cycle_lines(&mut s);
        self.gate_table(&mut s);
        s
    }

    /// The connector against valkey-benchmark, one row a depth.
    fn depth_table(&self, s: &mut String) {
        s.push_str(&format!(
            "| depth | n | {} ops/s | valkey-benchmark ops/s | ratio | Lua ceiling ops/s | share of ceiling (ours / vb) | main thread CPU (ours / vb) | round p50 / p99 µs | medians (ours / vb) |\n",
            self.connector
        ));
        s.push_str("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for r in &self.depths {
            s.push_str(&format!(
                "| {} | {} | {:.0} | {} | {} | {} | {} | {} | {} | {:.0} / {} |\n",
                r.depth,
                r.n,
                r.connector_ops_per_s,
                r.engine_ops_per_s
                    .map_or("n/a".into(), |x| format!("{x:.0}")),
                r.ratio.map_or("n/a".into(), |x| format!("{x:.3}")),
                r.connector_load
                    .map_or("n/a".into(), |l| format!("{:.0}", l.ceiling_per_s)),
                pair(share(r.connector_load), share(r.engine_load), two),
                pair(cpu(r.connector_load), cpu(r.engine_load), two),
                r.latency.map_or("n/a".into(), |l| format!(
                    "{:.0} / {:.0}",
                    l.p50_us, l.p99_us
                )),
                r.connector_median,
                r.engine_median.map_or("n/a".into(), |x| format!("{x:.0}")),
            ));
        }
    }

    /// A cluster's batch spread over queues against a single node (a cluster only).
    fn spread_table(&self, s: &mut String) {
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
    }

    /// claim → complete, and its Lua ceiling (when `--cycles`).
    fn cycle_lines(&self, s: &mut String) {
        if let Some(c) = &self.cycle {
            s.push_str(&format!(
                "\nclaim → complete: {} cycles in {:.2} s = {:.0} cycles/s ({:.1} µs per cycle, two round trips)\n",
                c.cycles, c.secs, c.cycles_per_s, c.us_per_cycle
            ));
            if let Some(l) = c.load {
                s.push_str(&format!(
                    "Lua ceiling {:.0} cycles/s ({:.1} µs per EVALSHA), share {:.2}, main thread CPU {}\n",
                    l.ceiling_per_s,
                    l.usec_per_call,
                    l.share,
                    l.main_cpu.map_or("n/a".into(), two)
                ));
            }
        }
    }

    /// Each gate's wall time on the bench's engine (unless `--no-gates`).
    fn gate_table(&self, s: &mut String) {
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
    }
}
