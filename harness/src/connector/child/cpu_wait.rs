//! How long a process group was ready to run but had no CPU: the kernel's run-queue delay of
//! its most delayed thread (`/proc/<pid>/task/<tid>/schedstat`, read with `procfs`). R5.9's
//! bound on an exit grows by it, so a connector starved by a busy machine (other lanes' engines,
//! a CI job's other steps) is not taken for one that lingers: a process that sleeps, blocks on
//! a join or ignores `stop` waits for no CPU, and meets the bound as it is.

use std::collections::HashMap;
use std::time::Duration;

use procfs::process::{Process, all_processes};

/// The run-queue delay, in nanoseconds, of every thread of every process in a group, by
/// thread id. Threads and processes that ended are absent.
type Delays = HashMap<i32, u64>;

/// The group's delay since [`CpuWait::start`]: each thread's delay then is the baseline, a thread
/// started later counts from zero, and a thread that ended keeps what it had when last seen. The
/// most delayed thread's wait is the group's, not the sum: an exit runs on one thread, and ten
/// threads that wait side by side did not delay it ten times over.
#[derive(Debug)]
pub(super) struct CpuWait {
    pgid: i32,
    base: Delays,
    last: Delays,
}

impl CpuWait {
    /// Takes the baseline of group `pgid` now. On a system without schedstat every reading is
    /// empty and the wait stays zero (the bound is then R5.9's as written).
    pub(super) fn start(pgid: u32) -> Self {
        let pgid = i32::try_from(pgid).unwrap_or(i32::MAX);
        let base = read(pgid);
        CpuWait {
            pgid,
            last: base.clone(),
            base,
        }
    }

    /// Reads the group again and says how long its most delayed thread waited since the baseline.
    pub(super) fn waited(&mut self) -> Duration {
        self.last.extend(read(self.pgid));
        Duration::from_nanos(since(&self.base, &self.last))
    }
}

/// The most delay one thread accumulated from `base` to `last`. Pure.
fn since(base: &Delays, last: &Delays) -> u64 {
    last.iter()
        .map(|(tid, d)| d.saturating_sub(base.get(tid).copied().unwrap_or(0)))
        .max()
        .unwrap_or(0)
}

/// The delays of group `pgid`'s threads now. Processes come and go while /proc is read, so an
/// entry that cannot be read is skipped.
fn read(pgid: i32) -> Delays {
    let mut out = Delays::new();
    let Ok(all) = all_processes() else {
        return out;
    };
    for p in all.flatten() {
        if p.stat().is_ok_and(|s| s.pgrp == pgid) {
            threads(&p, &mut out);
        }
    }
    out
}

fn threads(p: &Process, out: &mut Delays) {
    let Ok(tasks) = p.tasks() else { return };
    for t in tasks.flatten() {
        if let Ok(s) = t.schedstat() {
            out.insert(t.tid, s.run_delay);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_is_the_most_delayed_threads_since_its_baseline() {
        let base = Delays::from([(1, 100), (2, 50)]);
        // Thread 2 ended (kept at its last reading by `waited`), thread 3 is new.
        let last = Delays::from([(1, 400), (2, 80), (3, 25)]);
        assert_eq!(since(&base, &last), 300);
        let last = Delays::from([(1, 100), (2, 80), (3, 25)]);
        assert_eq!(since(&base, &last), 30);
        assert_eq!(since(&base, &base), 0);
        assert_eq!(since(&base, &Delays::new()), 0);
    }

    /// Live: more busy threads than CPUs in this test's own group must wait for one. Where the
    /// kernel keeps no schedstat the reading is empty and nothing can be said.
    #[test]
    fn busy_threads_beyond_the_cpus_wait_for_one() {
        let me = Process::myself()
            .and_then(|p| p.stat())
            .expect("/proc/self/stat");
        let mut w = CpuWait::start(me.pgrp as u32);
        if w.base.is_empty() {
            eprintln!("no schedstat on this kernel: skipped");
            return;
        }
        let n = std::thread::available_parallelism().map_or(2, |n| n.get()) * 3;
        let until = std::time::Instant::now() + Duration::from_millis(400);
        let waited = std::thread::scope(|s| {
            for _ in 0..n {
                s.spawn(|| while std::time::Instant::now() < until {});
            }
            // Read while they still run: a thread that ended is not read at all.
            std::thread::sleep(Duration::from_millis(250));
            w.waited()
        });
        assert!(waited > Duration::ZERO, "{w:?}");
    }
}
