//! The time the harness held a node of the engine stopped (G8's stall, SPEC R8.10, R11.3): a
//! request in flight meanwhile gets that time on top of its timeout (R5.8), so a connector is
//! never timed out for the harness's own stall, however long the engine takes to fail over on a
//! busy machine. Pure: unit-tested without a process.

use std::time::{Duration, Instant};

/// The spans a node was held stopped, oldest first; the last may still be open.
#[derive(Debug, Default, Clone)]
pub(super) struct Holds {
    spans: Vec<(Instant, Option<Instant>)>,
}

impl Holds {
    /// A hold begins at `at` (a second begin while one is open changes nothing).
    pub(super) fn begin(&mut self, at: Instant) {
        if !matches!(self.spans.last(), Some((_, None))) {
            self.spans.push((at, None));
        }
    }

    /// The open hold ends at `at`.
    pub(super) fn end(&mut self, at: Instant) {
        if let Some((_, end @ None)) = self.spans.last_mut() {
            *end = Some(at);
        }
    }

    /// How much of `from..to` a node was held (an open hold counts up to `to`).
    pub(super) fn within(&self, from: Instant, to: Instant) -> Duration {
        self.spans
            .iter()
            .map(|&(start, end)| {
                let end = end.unwrap_or(to).min(to);
                end.saturating_duration_since(start.max(from))
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t0: Instant, ms: u64) -> Instant {
        t0 + Duration::from_millis(ms)
    }

    #[test]
    fn only_the_part_of_a_hold_inside_the_request_counts() {
        let t0 = Instant::now();
        let mut h = Holds::default();
        h.begin(at(t0, 100));
        h.end(at(t0, 300));
        h.begin(at(t0, 500));
        // Sent at 200, read at 600: 100 ms of the first hold, 100 of the open one.
        assert_eq!(
            h.within(at(t0, 200), at(t0, 600)),
            Duration::from_millis(200)
        );
        // Before any hold, and after the first one ended: none.
        assert_eq!(h.within(at(t0, 0), at(t0, 50)), Duration::ZERO);
        assert_eq!(h.within(at(t0, 300), at(t0, 450)), Duration::ZERO);
        h.end(at(t0, 700));
        assert_eq!(
            h.within(at(t0, 0), at(t0, 1_000)),
            Duration::from_millis(400)
        );
    }

    #[test]
    fn a_second_begin_or_end_changes_nothing() {
        let t0 = Instant::now();
        let mut h = Holds::default();
        h.end(at(t0, 10));
        h.begin(at(t0, 100));
        h.begin(at(t0, 200));
        h.end(at(t0, 300));
        h.end(at(t0, 400));
        assert_eq!(h.within(t0, at(t0, 1_000)), Duration::from_millis(200));
    }
}
