//! `emq-gate bench`'s output: the Markdown table for people, the JSON with every run, and the
//! `--min-ratio` verdict. Kept apart from the measuring, so what a column means is read in one
//! place.

use crate::cmd::bench::io_threads::{across, row_settings, setting_label, side_by_side};
use crate::cmd::bench::{BenchReport, DepthRow};
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

fn io_active(l: Option<StepLoad>) -> Option<f64> {
    l.and_then(|l| l.io_active)
}

fn zero(x: f64) -> String {
    format!("{x:.0}")
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
            "# emq-gate bench\n\nemq-gate {} ({} build), connector: {}, {} cores\n\
             engine: {} {} (valkey {}), boot {} ms\nscript: enqueue {}\nio-threads: {}\n\
             same engine, one connection each side, EVALSHA of the same SHA, keys and arguments\n\n",
            env!("CARGO_PKG_VERSION"),
            self.profile,
            self.connector,
            self.cores.map_or("n/a".into(), |c| c.to_string()),
            self.engine_kind,
            self.engine,
            self.valkey_version,
            self.boot_ms,
            self.script_sha,
            self.io_threads_line(),
        );
        self.depth_table(&mut s);
        self.io_table(&mut s);
        s.push_str(
            "\nops/s and ratio: best of the runs on each side (runs alternate, so both see the same load)\n\
             Lua ceiling: 1e6 / µs per EVALSHA (INFO commandstats after CONFIG RESETSTAT, in the connector's best run): \
             Lua runs on the main thread only, so one queue can take no more; share: the measured ops/s over each side's own ceiling\n\
             main thread CPU: used_cpu_{user,sys}_main_thread per wall second (1.00 = one core busy)\n\
             I/O threads active: used_active_time_io_thread_* per wall second, summed (n/a: no I/O thread; Valkey starts them only once the main thread is busy)\n\
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

    /// The io-threads header line: as booted, and the settings measured.
    fn io_threads_line(&self) -> String {
        let booted = setting_label(self.io_threads_booted);
        if self.io_threads_asked.is_empty() {
            format!("{booted}, as the engine booted")
        } else {
            let asked: Vec<String> = self
                .io_threads_asked
                .iter()
                .map(|n| n.to_string())
                .collect();
            format!(
                "{} one after the other on this engine (CONFIG SET io-threads; booted with {booted}, restored before the gates)",
                asked.join(", ")
            )
        }
    }

    /// The connector against valkey-benchmark, one row a depth and io-threads setting.
    fn depth_table(&self, s: &mut String) {
        s.push_str(&format!(
            "| io-threads | depth | n | {} ops/s | valkey-benchmark ops/s | ratio | Lua ceiling ops/s | share of ceiling (ours / vb) | main thread CPU (ours / vb) | I/O threads active (ours / vb) | round p50 / p99 µs | medians (ours / vb) |\n",
            self.connector
        ));
        s.push_str("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for r in &self.depths {
            s.push_str(&format!(
                "| {} | {} | {} | {:.0} | {} | {} | {} | {} | {} | {} | {} | {:.0} / {} |\n",
                setting_label(r.io_threads),
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
                pair(io_active(r.connector_load), io_active(r.engine_load), two),
                r.latency.map_or("n/a".into(), |l| format!(
                    "{:.0} / {:.0}",
                    l.p50_us, l.p99_us
                )),
                r.connector_median,
                r.engine_median.map_or("n/a".into(), |x| format!("{x:.0}")),
            ));
        }
    }

    /// With more than one io-threads setting: each figure side by side, one column a setting,
    /// and the last setting's ops/s over the first's.
    fn io_table(&self, s: &mut String) {
        let settings = row_settings(&self.depths);
        if settings.len() < 2 {
            return;
        }
        let names: Vec<String> = settings.iter().map(|&n| setting_label(n)).collect();
        let names = names.join(" / ");
        s.push_str(&format!(
            "\nio-threads {names} side by side (best runs; last / first: the last setting's ops/s over the first's)\n\n"
        ));
        s.push_str(&format!(
            "| depth | {c} ops/s | {c} last / first | valkey-benchmark ops/s | vb last / first | ratio (ours / vb) | share of ceiling (ours) | main thread CPU (ours) | I/O threads active (ours) | round p50 µs |\n\
             |---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
            c = self.connector
        ));
        let gain = |rows: &[Option<&DepthRow>], f: fn(&DepthRow) -> Option<f64>| {
            let first = rows.first().copied().flatten().and_then(f);
            let last = rows.last().copied().flatten().and_then(f);
            first
                .zip(last)
                .filter(|(a, _)| *a > 0.0)
                .map_or("n/a".into(), |(a, b)| format!("{:.2}", b / a))
        };
        for g in side_by_side(&self.depths, &settings) {
            let r = &g.rows;
            s.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                g.depth,
                across(r, |x| Some(zero(x.connector_ops_per_s))),
                gain(r, |x| Some(x.connector_ops_per_s)),
                across(r, |x| x.engine_ops_per_s.map(zero)),
                gain(r, |x| x.engine_ops_per_s),
                across(r, |x| x.ratio.map(|v| format!("{v:.3}"))),
                across(r, |x| share(x.connector_load).map(two)),
                across(r, |x| cpu(x.connector_load).map(two)),
                across(r, |x| io_active(x.connector_load).map(two)),
                across(r, |x| x.latency.map(|l| zero(l.p50_us))),
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

    /// claim → complete, and its Lua ceiling (when `--cycles`), once per io-threads setting.
    fn cycle_lines(&self, s: &mut String) {
        for c in &self.cycles {
            s.push_str(&format!(
                "\nclaim → complete (io-threads {}): {} cycles in {:.2} s = {:.0} cycles/s ({:.1} µs per cycle, two round trips)\n",
                setting_label(c.io_threads), c.cycles, c.secs, c.cycles_per_s, c.us_per_cycle
            ));
            if let Some(l) = c.load {
                s.push_str(&format!(
                    "Lua ceiling {:.0} cycles/s ({:.1} µs per EVALSHA), share {:.2}, main thread CPU {}, I/O threads active {}\n",
                    l.ceiling_per_s,
                    l.usec_per_call,
                    l.share,
                    l.main_cpu.map_or("n/a".into(), two),
                    l.io_active.map_or("n/a".into(), two)
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

#[cfg(test)]
mod tests {
    use crate::cmd::bench::io_threads::row;
    use crate::cmd::bench::{BenchReport, CycleFigure};

    fn report(depths: Vec<crate::cmd::bench::DepthRow>, asked: Vec<u32>) -> BenchReport {
        BenchReport {
            profile: "release".into(),
            cores: Some(2),
            connector: "ref".into(),
            engine_kind: "binary".into(),
            engine: "/bin/valkey-server".into(),
            valkey_version: "9.1.2".into(),
            boot_ms: 5,
            script_sha: "abc".into(),
            valkey_benchmark: None,
            note: None,
            io_threads_booted: Some(1),
            io_threads_asked: asked,
            depths,
            cycles: Vec::new(),
            spread: Vec::new(),
            gates: Vec::new(),
            gates_ms: 0,
            gate_total_ms: 0,
        }
    }

    #[test]
    fn the_header_names_the_profile_the_cores_and_the_io_threads() {
        let t = report(vec![row(16, Some(1), 100.0)], Vec::new()).text();
        assert!(
            t.contains("(release build), connector: ref, 2 cores\n"),
            "{t}"
        );
        assert!(t.contains("io-threads: 1, as the engine booted\n"), "{t}");
        // Each row names its setting, first.
        assert!(t.contains("\n| 1 | 16 | 100 | 100 | n/a |"), "{t}");
        // One setting: no side-by-side table.
        assert!(!t.contains("side by side"), "{t}");
        let j = report(vec![row(16, Some(2), 1.0)], vec![1, 2]).json();
        let v: serde_json::Value = serde_json::from_str(&j).unwrap();
        assert_eq!(v["profile"], "release");
        assert_eq!(v["depths"][0]["io_threads"], 2);
        assert_eq!(v["io_threads_asked"], serde_json::json!([1, 2]));
    }

    #[test]
    fn two_settings_print_side_by_side_with_the_gain() {
        let mut r = report(
            vec![
                row(1, Some(1), 10.0),
                row(16, Some(1), 200.0),
                row(1, Some(2), 12.0),
                row(16, Some(2), 300.0),
            ],
            vec![1, 2],
        );
        r.cycles = vec![
            CycleFigure {
                io_threads: Some(1),
                cycles: 10,
                secs: 1.0,
                cycles_per_s: 10.0,
                us_per_cycle: 100_000.0,
                load: None,
            },
            CycleFigure {
                io_threads: Some(2),
                cycles: 10,
                secs: 0.5,
                cycles_per_s: 20.0,
                us_per_cycle: 50_000.0,
                load: None,
            },
        ];
        let t = r.text();
        assert!(
            t.contains("io-threads: 1, 2 one after the other on this engine"),
            "{t}"
        );
        assert!(t.contains("io-threads 1 / 2 side by side"), "{t}");
        assert!(
            t.contains("\n| 16 | 200 / 300 | 1.50 | n/a / n/a | n/a |"),
            "{t}"
        );
        assert!(t.contains("\n| 1 | 10 / 12 | 1.20 |"), "{t}");
        assert!(
            t.contains("claim → complete (io-threads 2): 10 cycles"),
            "{t}"
        );
    }
}
