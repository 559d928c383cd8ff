//! Connectors whose time is wrong by a little: each ([`Rewrite::Skew`]) rewrites the lease, delay
//! or backoff of a request on its way to the correct reference connector, the way a real
//! connector gets time wrong (a grace period, a rounding, a ms↔s mix-up, a margin taken off).
//! Every one still keeps each due (0) value due, each non-zero one non-zero, and every set's
//! order, so only scores judged to the millisecond (SPEC §1, **Time**) catch them.
//!
//! [`Rewrite::Skew`]: super::rewrite::Rewrite::Skew

use crate::connector::Request;

/// One way to get time wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeSkew {
    /// Adds 1 500 ms to every non-zero lease, delay and backoff (a "grace period").
    AddsGrace,
    /// Rounds every lease, delay and backoff up to whole seconds.
    RoundsUpToSeconds,
    /// Reads a `backoff_ms` below 1 000 as seconds (multiplies it by 1 000).
    BackoffInSeconds,
    /// Takes [`MARGIN_MS`] off every lease, delay and backoff longer than it (a "safety
    /// margin", the round trip deducted): due too early.
    SubtractsMargin,
}

/// What [`TimeSkew::AddsGrace`] adds.
pub const GRACE_MS: i64 = 1_500;
/// What [`TimeSkew::SubtractsMargin`] takes off.
pub const MARGIN_MS: i64 = 250;

impl TimeSkew {
    pub const ALL: [TimeSkew; 4] = [
        Self::AddsGrace,
        Self::RoundsUpToSeconds,
        Self::BackoffInSeconds,
        Self::SubtractsMargin,
    ];

    /// The verbs whose time it changes.
    pub fn verbs(self) -> &'static [&'static str] {
        match self {
            Self::AddsGrace | Self::RoundsUpToSeconds | Self::SubtractsMargin => {
                &["enqueue", "claim", "retry"]
            }
            Self::BackoffInSeconds => &["retry"],
        }
    }

    fn lease_or_delay(self, ms: i64) -> i64 {
        match self {
            Self::AddsGrace if ms > 0 => ms + GRACE_MS,
            Self::RoundsUpToSeconds if ms > 0 => (ms + 999) / 1000 * 1000,
            Self::SubtractsMargin if ms > MARGIN_MS => ms - MARGIN_MS,
            _ => ms,
        }
    }

    fn backoff(self, ms: i64) -> i64 {
        match self {
            Self::BackoffInSeconds if (1..1000).contains(&ms) => ms * 1000,
            other => other.lease_or_delay(ms),
        }
    }

    /// The request as this skew sends it.
    pub fn rewrite(self, request: &Request) -> Request {
        let mut req = request.clone();
        match &mut req {
            Request::Enqueue { delay_ms, .. } => *delay_ms = self.lease_or_delay(*delay_ms),
            Request::Claim { lease_ms, .. } => *lease_ms = self.lease_or_delay(*lease_ms),
            Request::Retry { backoff_ms, .. } => *backoff_ms = self.backoff(*backoff_ms),
            _ => {}
        }
        req
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn retry(backoff_ms: i64) -> Request {
        Request::Retry {
            session: "s".into(),
            queue: "q".into(),
            id: "j0000000000000001".into(),
            attempts: 1,
            backoff_ms,
            max_attempts: 3,
        }
    }

    fn backoff(r: &Request) -> i64 {
        match r {
            Request::Retry { backoff_ms, .. } => *backoff_ms,
            _ => unreachable!(),
        }
    }

    #[test]
    fn each_skew_rewrites_only_non_zero_time() {
        use TimeSkew::*;
        let cases = [
            (AddsGrace, [0, 2_000, 1_750, 3_601_500]),
            (RoundsUpToSeconds, [0, 1_000, 1_000, 3_600_000]),
            (BackoffInSeconds, [0, 500_000, 250_000, 3_600_000]),
            (SubtractsMargin, [0, 250, 250, 3_599_750]),
        ];
        for (skew, want) in cases {
            let got: Vec<i64> = [0, 500, 250, 3_600_000]
                .iter()
                .map(|ms| backoff(&skew.rewrite(&retry(*ms))))
                .collect();
            assert_eq!(got, want, "{skew:?}");
        }
        let claim = Request::Claim {
            session: "s".into(),
            queue: "q".into(),
            lease_ms: 500,
        };
        assert_eq!(BackoffInSeconds.rewrite(&claim), claim);
        assert_eq!(
            RoundsUpToSeconds.rewrite(&claim),
            Request::Claim {
                session: "s".into(),
                queue: "q".into(),
                lease_ms: 1_000
            }
        );
    }
}
