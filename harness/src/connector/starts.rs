//! How many connector processes a run started, by gate and by reason: a runtime with a real
//! start-up cost (a JVM, the BEAM, heavy imports) pays it once per start, so the record says how
//! often that was and why (issue #24). Only a factory that starts processes keeps a ledger; the
//! in-process reference has none, and its records carry no such figure.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Why a connector process was started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StartReason {
    /// The run's first process (the header's `hello`).
    First,
    /// A gate held more connectors at once than were idle (two connectors side by side).
    Concurrent,
    /// The harness killed one on purpose (G8's crash phase), or starts the replacement of a
    /// planned kill ahead of time.
    Killed,
    /// One timed out, and was killed.
    Timeout,
    /// One died: it exited, closed a pipe, or broke the protocol.
    Died,
    /// An explicit [`crate::connector::child::ChildConnector::restart`].
    Restart,
    /// A gate stopped one to judge how it ends (G1, R5.9).
    Stopped,
}

impl StartReason {
    /// The name the record uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::First => "first",
            Self::Concurrent => "concurrent",
            Self::Killed => "killed",
            Self::Timeout => "timeout",
            Self::Died => "died",
            Self::Restart => "restart",
            Self::Stopped => "stopped",
        }
    }
}

/// The label of starts before the first gate (the header's `hello`).
pub const BEFORE_GATES: &str = "run";

/// Process starts, per gate (or [`BEFORE_GATES`]) and reason.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Starts {
    /// Every process started in the run.
    pub total: u64,
    /// Per reason (`first`, `concurrent`, `killed`, `timeout`, `died`, `restart`).
    pub by_reason: BTreeMap<String, u64>,
    /// Per gate id (`run`: before the first gate), then per reason.
    pub by_gate: BTreeMap<String, BTreeMap<String, u64>>,
}

impl Starts {
    /// Adds `other`'s starts to these: a run's lanes each have a factory of their own.
    pub fn merge(&mut self, other: &Starts) {
        self.total += other.total;
        for (k, n) in &other.by_reason {
            *self.by_reason.entry(k.clone()).or_default() += n;
        }
        for (g, rs) in &other.by_gate {
            let mine = self.by_gate.entry(g.clone()).or_default();
            for (k, n) in rs {
                *mine.entry(k.clone()).or_default() += n;
            }
        }
    }

    /// Notes one start in `gate` for `reason`.
    pub fn note(&mut self, gate: &str, reason: StartReason) {
        self.total += 1;
        *self.by_reason.entry(reason.as_str().into()).or_default() += 1;
        *self
            .by_gate
            .entry(gate.into())
            .or_default()
            .entry(reason.as_str().into())
            .or_default() += 1;
    }

    /// The starts in `gate`, per reason (empty when none).
    pub fn in_gate(&self, gate: &str) -> BTreeMap<String, u64> {
        self.by_gate.get(gate).cloned().unwrap_or_default()
    }

    /// `12 (run: first 1; G1: concurrent 1; G8: killed 10)`.
    pub fn describe(&self) -> String {
        let per: Vec<String> = self
            .by_gate
            .iter()
            .map(|(g, r)| {
                let rs: Vec<String> = r.iter().map(|(k, n)| format!("{k} {n}")).collect();
                format!("{g}: {}", rs.join(", "))
            })
            .collect();
        if per.is_empty() {
            self.total.to_string()
        } else {
            format!("{} ({})", self.total, per.join("; "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_add_up_by_gate_and_reason() {
        let mut s = Starts::default();
        s.note(BEFORE_GATES, StartReason::First);
        s.note("G8", StartReason::Killed);
        s.note("G8", StartReason::Killed);
        s.note("G1", StartReason::Concurrent);
        assert_eq!(s.total, 4);
        assert_eq!(s.by_reason["killed"], 2);
        assert_eq!(s.in_gate("G8")["killed"], 2);
        assert!(s.in_gate("G2").is_empty());
        assert_eq!(
            s.describe(),
            "4 (G1: concurrent 1; G8: killed 2; run: first 1)"
        );
    }
}
