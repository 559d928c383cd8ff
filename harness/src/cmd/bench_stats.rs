//! The engine's side of a measured step, as pure arithmetic over `INFO` text. Lua runs on the
//! engine's main thread only, so one queue (one hash tag, one node) can never take more scripts
//! per second than `1e6 / usec_per_call` of its `EVALSHA`: that is the ceiling a connector's
//! throughput is a share of. Reading it from `INFO commandstats` in the same run as the
//! measurement keeps the ceiling honest for this machine, this build and this load; the main
//! thread's CPU (`INFO cpu`) says how busy the engine really was while the connector drove it,
//! and the I/O threads' reads (`INFO stats`) and active time whether they took part at all.

use serde::Serialize;

/// What the bench reads from one node's `INFO cpu commandstats`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct EngineStats {
    /// `cmdstat_evalsha:calls=` since the last `CONFIG RESETSTAT`.
    pub evalsha_calls: u64,
    /// `cmdstat_evalsha:usec=`: microseconds the main thread spent inside `EVALSHA`.
    pub evalsha_usec: u64,
    /// `used_cpu_user_main_thread + used_cpu_sys_main_thread`, seconds (None where the engine
    /// does not report the main thread apart).
    pub main_cpu_s: Option<f64>,
    /// `used_active_time_main_thread`, seconds (Valkey 9: time the main thread was not idle in
    /// its event loop, whether or not the kernel gave it a core).
    pub main_active_s: Option<f64>,
    /// `io_threaded_reads_processed` (`INFO stats`): reads the I/O threads did (None where the
    /// engine has no I/O threads to report).
    pub io_reads: Option<u64>,
    /// The sum of `used_active_time_io_thread_<n>` (Valkey 9), seconds: whether the I/O threads
    /// worked at all, since Valkey starts them only once the main thread is busy.
    pub io_active_s: Option<f64>,
}

/// Parses `INFO` text (any sections; `\r\n` or `\n`). Fields it does not know are ignored, and
/// a missing `cmdstat_evalsha` line means no `EVALSHA` ran since the reset.
pub fn parse_info(text: &str) -> EngineStats {
    let mut s = EngineStats::default();
    let (mut user, mut sys) = (None, None);
    for line in text.lines() {
        let Some((k, v)) = line.trim_end_matches('\r').split_once(':') else {
            continue;
        };
        match k {
            "cmdstat_evalsha" => {
                for field in v.split(',') {
                    match field.split_once('=') {
                        Some(("calls", x)) => s.evalsha_calls = x.parse().unwrap_or(0),
                        Some(("usec", x)) => s.evalsha_usec = x.parse().unwrap_or(0),
                        _ => {}
                    }
                }
            }
            "used_cpu_user_main_thread" => user = v.parse::<f64>().ok(),
            "used_cpu_sys_main_thread" => sys = v.parse::<f64>().ok(),
            "used_active_time_main_thread" => s.main_active_s = v.parse().ok(),
            "io_threaded_reads_processed" => s.io_reads = v.parse().ok(),
            k if k.starts_with("used_active_time_io_thread_") => {
                if let Ok(x) = v.parse::<f64>() {
                    s.io_active_s = Some(s.io_active_s.unwrap_or(0.0) + x);
                }
            }
            _ => {}
        }
    }
    s.main_cpu_s = user.zip(sys).map(|(u, s)| u + s);
    s
}

/// One measured step as the engine saw it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct StepLoad {
    /// `EVALSHA` calls during the step.
    pub evalsha_calls: u64,
    /// Microseconds per `EVALSHA` during the step.
    pub usec_per_call: f64,
    /// Units (enqueues, or claim → complete cycles) per second the main thread could run if it
    /// did nothing but these scripts: `1e6 / usec per unit`.
    pub ceiling_per_s: f64,
    /// The measured rate as a share of the ceiling: the part of the wall time the main thread
    /// spent inside the scripts.
    pub share: f64,
    /// The main thread's CPU seconds per wall second (None when the engine does not say).
    pub main_cpu: Option<f64>,
    /// The main thread's active seconds per wall second (None when the engine does not say).
    pub main_active: Option<f64>,
    /// Reads the I/O threads did during the step (None when the engine does not say).
    pub io_reads: Option<u64>,
    /// The I/O threads' active seconds per wall second, summed over them (None when the engine
    /// does not say; 0 when they never started).
    pub io_active: Option<f64>,
}

/// The load of a step that did `units` of work in `wall_s` seconds between `before` (read just
/// after `CONFIG RESETSTAT`) and `after`. None when no `EVALSHA` ran (nothing to divide by).
pub fn step_load(
    before: &EngineStats,
    after: &EngineStats,
    units: u64,
    wall_s: f64,
) -> Option<StepLoad> {
    let calls = after.evalsha_calls.saturating_sub(before.evalsha_calls);
    let usec = after.evalsha_usec.saturating_sub(before.evalsha_usec);
    if calls == 0 || usec == 0 || units == 0 || wall_s <= 0.0 {
        return None;
    }
    let per_unit = usec as f64 / units as f64;
    let busy = |a: Option<f64>, b: Option<f64>| a.zip(b).map(|(a, b)| (b - a).max(0.0) / wall_s);
    Some(StepLoad {
        evalsha_calls: calls,
        usec_per_call: usec as f64 / calls as f64,
        ceiling_per_s: 1e6 / per_unit,
        share: usec as f64 / (wall_s * 1e6),
        main_cpu: busy(before.main_cpu_s, after.main_cpu_s),
        main_active: busy(before.main_active_s, after.main_active_s),
        io_reads: before
            .io_reads
            .zip(after.io_reads)
            .map(|(b, a)| a.saturating_sub(b)),
        io_active: busy(before.io_active_s, after.io_active_s),
    })
}

/// On a cluster the step's queue lives on one primary: the load of the node that ran the most
/// `EVALSHA` calls (`before` and `after` in the same node order).
pub fn busiest_load(
    before: &[EngineStats],
    after: &[EngineStats],
    units: u64,
    wall_s: f64,
) -> Option<StepLoad> {
    before
        .iter()
        .zip(after)
        .max_by_key(|(b, a)| a.evalsha_calls.saturating_sub(b.evalsha_calls))
        .and_then(|(b, a)| step_load(b, a, units, wall_s))
}

/// Latency of one pipelined round (`depth` enqueues written, then their replies read).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RoundLatency {
    pub depth: i64,
    pub rounds: usize,
    pub p50_us: f64,
    pub p99_us: f64,
}

/// Nearest-rank percentile `p` (0..=100) of `v`; 0 for no samples.
pub fn percentile(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * s.len() as f64).ceil() as usize;
    s[rank.clamp(1, s.len()) - 1]
}

/// p50 and p99 of per-round wall times in microseconds.
pub fn round_latency(depth: i64, samples_us: &[f64]) -> RoundLatency {
    RoundLatency {
        depth,
        rounds: samples_us.len(),
        p50_us: percentile(samples_us, 50.0),
        p99_us: percentile(samples_us, 99.0),
    }
}

/// How many rounds the latency step times: enough for a p99 (at least 100), never more enqueues
/// than a throughput batch of `n` (at most 1000 rounds).
pub fn latency_rounds(n: i64, depth: i64) -> usize {
    (n / depth.max(1)).clamp(100, 1000) as usize
}

/// The build profile of this emq-gate: a debug build's connector is slower, and a figure that
/// does not say which one it came from cannot be compared.
pub fn build_profile() -> &'static str {
    if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What valkey-server 9.1.2 printed for `INFO cpu` and `INFO commandstats`.
    const INFO_9_1: &str = "# CPU\r\nused_cpu_sys:0.008927\r\nused_cpu_user:0.171510\r\n\
        used_cpu_sys_children:0.000000\r\nused_cpu_user_children:0.000000\r\n\
        used_cpu_sys_main_thread:0.008589\r\nused_cpu_user_main_thread:0.171768\r\n\
        used_active_time_main_thread:0.251276\r\n\r\n# Commandstats\r\n\
        cmdstat_config|get:calls=2,usec=11,usec_per_call=5.50,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_evalsha:calls=100000,usec=107195,usec_per_call=1.07,rejected_calls=0,failed_calls=0\r\n";

    #[test]
    fn parses_valkey_9_1_info() {
        let s = parse_info(INFO_9_1);
        assert_eq!(s.evalsha_calls, 100_000);
        assert_eq!(s.evalsha_usec, 107_195);
        assert!((s.main_cpu_s.unwrap() - 0.180357).abs() < 1e-9);
        assert_eq!(s.main_active_s, Some(0.251276));
    }

    /// What valkey-server 9.1.2 printed with `io-threads 2` after a pipelined load.
    const INFO_9_1_IO: &str = "# Stats\r\nio_threaded_reads_processed:172153\r\n\
        io_threaded_writes_processed:172151\r\n# CPU\r\n\
        used_cpu_sys_main_thread:1.5\r\nused_cpu_user_main_thread:2.5\r\n\
        used_active_time_main_thread:4.125548\r\nused_active_time_io_thread_1:4.334911\r\n\
        used_active_time_io_thread_2:0.5\r\n";

    #[test]
    fn io_threads_reads_and_active_time_are_summed_over_the_threads() {
        let s = parse_info(INFO_9_1_IO);
        assert_eq!(s.io_reads, Some(172_153));
        assert!((s.io_active_s.unwrap() - 4.834911).abs() < 1e-9);
        // io-threads 1: the reads counter, no thread of its own.
        let one = parse_info("io_threaded_reads_processed:0\r\nused_active_time_main_thread:1\r\n");
        assert_eq!((one.io_reads, one.io_active_s), (Some(0), None));
        let before = EngineStats {
            evalsha_calls: 0,
            evalsha_usec: 0,
            io_reads: Some(100),
            io_active_s: Some(1.0),
            ..EngineStats::default()
        };
        let after = EngineStats {
            evalsha_calls: 10,
            evalsha_usec: 10,
            io_reads: Some(350),
            io_active_s: Some(1.5),
            ..EngineStats::default()
        };
        let l = step_load(&before, &after, 10, 2.0).unwrap();
        assert_eq!(l.io_reads, Some(250));
        assert!((l.io_active.unwrap() - 0.25).abs() < 1e-12);
    }

    #[test]
    fn an_engine_without_main_thread_fields_or_evalsha_gives_none_and_zero() {
        let s = parse_info("# CPU\nused_cpu_sys:1.0\nused_cpu_user:2.0\n# Commandstats\n");
        assert_eq!(s, EngineStats::default());
        // `cmdstat_eval` is not `cmdstat_evalsha`.
        let e = parse_info("cmdstat_eval:calls=5,usec=50,usec_per_call=10.00\n");
        assert_eq!(e.evalsha_calls, 0);
    }

    #[test]
    fn step_load_is_the_ceiling_and_the_share_of_the_wall_inside_lua() {
        let before = EngineStats {
            main_cpu_s: Some(1.0),
            main_active_s: Some(0.0),
            ..EngineStats::default()
        };
        let after = EngineStats {
            evalsha_calls: 1000,
            evalsha_usec: 2000,
            main_cpu_s: Some(1.003),
            main_active_s: Some(0.0035),
            ..EngineStats::default()
        };
        // 1000 enqueues in 4 ms: 250 000/s against a ceiling of 1e6 / 2 µs = 500 000/s.
        let l = step_load(&before, &after, 1000, 0.004).unwrap();
        assert_eq!(l.usec_per_call, 2.0);
        assert_eq!(l.ceiling_per_s, 500_000.0);
        assert!((l.share - 0.5).abs() < 1e-12);
        assert!((l.main_cpu.unwrap() - 0.75).abs() < 1e-9);
        assert!((l.main_active.unwrap() - 0.875).abs() < 1e-9);
        // No I/O threads reported on either side: none.
        assert_eq!((l.io_reads, l.io_active), (None, None));
        // Two scripts per claim → complete cycle: the ceiling is in cycles.
        let c = step_load(&before, &after, 500, 0.004).unwrap();
        assert_eq!(c.ceiling_per_s, 250_000.0);
        assert_eq!(step_load(&before, &before, 1000, 0.004), None);
    }

    #[test]
    fn a_cluster_step_is_judged_on_the_node_that_ran_it() {
        let idle = EngineStats::default();
        let busy = EngineStats {
            evalsha_calls: 10,
            evalsha_usec: 40,
            ..idle
        };
        let one = EngineStats {
            evalsha_calls: 1,
            evalsha_usec: 1,
            ..idle
        };
        let l = busiest_load(&[idle; 3], &[one, busy, idle], 10, 1.0).unwrap();
        assert_eq!(l.usec_per_call, 4.0);
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), 50.0);
        assert_eq!(percentile(&v, 99.0), 99.0);
        assert_eq!(percentile(&[7.0], 99.0), 7.0);
        assert_eq!(percentile(&[], 50.0), 0.0);
        let r = round_latency(16, &[3.0, 1.0, 2.0]);
        assert_eq!((r.rounds, r.p50_us, r.p99_us), (3, 2.0, 3.0));
    }

    #[test]
    fn latency_rounds_stay_between_100_and_1000() {
        assert_eq!(latency_rounds(100_000, 1), 1000);
        assert_eq!(latency_rounds(100_000, 1000), 100);
        assert_eq!(latency_rounds(100_000, 250), 400);
        assert_eq!(latency_rounds(10, 0), 100);
    }
}
