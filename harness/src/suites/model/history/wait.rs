//! How long a history's leases, backoffs and delays are: now, soon (below a second, never whole
//! seconds) or later (never due), and the scale short waits grow by on a slow engine. Its own
//! concept: the one place a history's abstract time becomes milliseconds.

use proptest::prelude::*;
use serde::{Deserialize, Serialize};

/// A lease, backoff or delay that never comes due while a history runs: one hour.
pub const LATER_MS: i64 = 3_600_000;

/// A short lease, backoff or delay: below one second and not whole seconds, so a connector that
/// rounds to seconds or reads a backoff as seconds writes a different score. A history must end
/// within it (the runner checks, and re-runs a history that took longer): it never comes due
/// either.
pub const SOON_MS: i64 = 750;

// Below one second (a backoff read as seconds changes it) and not whole seconds (rounding does).
const _: () = assert!(SOON_MS > 0 && SOON_MS < 1000);

/// How long a lease, backoff or delay is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", from = "WaitRepr")]
pub enum Wait {
    /// 0 ms: due at once.
    Now,
    /// [`LATER_MS`].
    Later,
    /// [`SOON_MS`].
    Soon,
}

/// What a history file may say: a [`Wait`] by name, or the older `later: true/false`.
#[derive(Deserialize)]
#[serde(untagged)]
enum WaitRepr {
    Later(bool),
    Named(WaitName),
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum WaitName {
    Now,
    Later,
    Soon,
}

impl From<WaitRepr> for Wait {
    fn from(r: WaitRepr) -> Self {
        match r {
            WaitRepr::Later(false) | WaitRepr::Named(WaitName::Now) => Wait::Now,
            WaitRepr::Later(true) | WaitRepr::Named(WaitName::Later) => Wait::Later,
            WaitRepr::Named(WaitName::Soon) => Wait::Soon,
        }
    }
}

impl Wait {
    /// The milliseconds it stands for at time scale 1.
    pub fn ms(self) -> i64 {
        self.ms_at(TimeScale::ONE)
    }

    /// The milliseconds it stands for at `scale`: only [`Wait::Soon`] grows with the machine.
    pub fn ms_at(self, scale: TimeScale) -> i64 {
        match self {
            Wait::Now => 0,
            Wait::Later => LATER_MS,
            Wait::Soon => scale.soon_ms(),
        }
    }
}

/// How much longer than [`SOON_MS`] a short wait is, so that a history can end before it comes
/// due on a machine too slow for 750 ms. A power of two up to [`TimeScale::MAX`]; the runner
/// raises it when a history lasted too long to be judged (and records it), never lowers it within
/// a run. The judgement is exact at any scale: scores are checked against engine-TIME brackets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct TimeScale(u32);

impl Default for TimeScale {
    fn default() -> Self {
        Self::ONE
    }
}

impl TimeScale {
    pub const ONE: TimeScale = TimeScale(1);
    /// The stated bound: a short wait of 12 250 ms. A machine on which 80 calls take longer is
    /// too slow to judge, and the gate says so (ERROR).
    pub const MAX: TimeScale = TimeScale(16);

    /// The factor.
    pub fn get(self) -> u32 {
        self.0
    }

    /// The short wait at this scale: `SOON_MS × scale`, moved off whole seconds (by 250 ms) so a
    /// connector that rounds to seconds still writes a different score.
    pub fn soon_ms(self) -> i64 {
        let ms = SOON_MS * i64::from(self.0);
        if ms % 1000 == 0 { ms + 250 } else { ms }
    }

    /// The smallest scale above this one whose short wait is at least twice `span_ms` (how long,
    /// in engine ms, the void history ran), capped at [`TimeScale::MAX`].
    pub fn after_void(self, span_ms: i64) -> TimeScale {
        let mut s = TimeScale((self.0 * 2).min(Self::MAX.0));
        while s < Self::MAX && s.soon_ms() < span_ms.saturating_mul(2) {
            s = TimeScale(s.0 * 2);
        }
        s
    }
}

/// Waits drawn with weights (now, later, soon); shrinks towards now, then later.
pub(super) fn wait(now: u32, later: u32, soon: u32) -> impl Strategy<Value = Wait> {
    prop_oneof![
        now => Just(Wait::Now),
        later => Just(Wait::Later),
        soon => Just(Wait::Soon),
    ]
}
