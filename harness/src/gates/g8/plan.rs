//! G8's crash schedule (issue #24): drawn from a seeded stream of its own, apart from the
//! worker's steps, so it does not depend on the replies and the gate knows its process kills
//! before the loop.

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

/// Connection kills the crash phase injects.
pub(super) const CRASHES: u32 = 100;

/// One step's crash, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Crash {
    None,
    /// The connector process is killed before the step (a killable connector only).
    Process,
    /// Its engine connections are killed before the call (`None`, acknowledged first) or this
    /// many µs into it.
    Connections(Option<u64>),
}

/// The seeded crash schedule, drawn apart from the worker's steps so it does not depend on the
/// replies: G8 knows its process kills before the loop and starts their replacements at once,
/// so a connector with a slow start-up pays it about once, not once per kill (issue #24).
pub(super) struct Plan {
    rng: StdRng,
    seed: u64,
    killable: bool,
}

impl Plan {
    pub(super) fn new(seed: u64, killable: bool) -> Self {
        Self {
            rng: StdRng::seed_from_u64(seed ^ 0x6338_6372_6173_6821),
            seed,
            killable,
        }
    }

    pub(super) fn next(&mut self) -> Crash {
        if !self.rng.random_bool(0.3) {
            Crash::None
        } else if self.killable && self.rng.random_bool(0.2) {
            Crash::Process
        } else if self.rng.random_bool(0.3) {
            Crash::Connections(None)
        } else {
            Crash::Connections(Some(self.rng.random_range(0..600)))
        }
    }

    /// The process kills the whole schedule draws before its [`CRASHES`]th connection kill, and
    /// a fifth more: a connection kill that finds no connection (one that landed between a
    /// reconnect's steps) does not count, so the loop runs on a little past the first estimate.
    pub(super) fn process_kills(&self) -> usize {
        let (mut plan, mut conns, mut procs) = (Self::new(self.seed, self.killable), 0, 0);
        while conns < CRASHES + CRASHES / 5 {
            match plan.next() {
                Crash::Process => procs += 1,
                Crash::Connections(_) => conns += 1,
                Crash::None => {}
            }
        }
        procs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schedule_is_seeded_and_counts_its_process_kills() {
        let draw = |seed| {
            let mut p = Plan::new(seed, true);
            (0..500).map(|_| p.next()).collect::<Vec<_>>()
        };
        assert_eq!(draw(1), draw(1));
        assert_ne!(draw(1), draw(2));
        let plan = Plan::new(1, true);
        let (mut p, mut conns, mut procs) = (Plan::new(1, true), 0, 0);
        while conns < CRASHES + CRASHES / 5 {
            match p.next() {
                Crash::Process => procs += 1,
                Crash::Connections(_) => conns += 1,
                Crash::None => {}
            }
        }
        assert_eq!(plan.process_kills(), procs);
        assert!(procs > 5, "a killable connector is killed often: {procs}");
        assert_eq!(Plan::new(1, false).process_kills(), 0);
    }
}
