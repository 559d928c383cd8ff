//! A failover the harness has the Sentinels make under G8's crew (the graceful one, the kill and
//! the stall, SPEC R11.3): which replica they promote, pinned so a scenario knows it before the
//! fault, and how soon they act, shortened for the scenario and restored after.
//!
//! Sentinel promotes the replica with the lowest non-zero `replica-priority` (then the largest
//! offset), and reads a replica's priority in its `INFO` only every `info-period` (10 s). So the
//! pin sets the priority on the nodes, then waits until every Sentinel has read it: a replica the
//! Sentinels still think promotable could win on its offset (the kill scenario's candidate is
//! the one cut off, so it is always behind).

use super::PRIMARY_NAME;
use super::queries::{held_up, noting};
use crate::engine::Engine;
use crate::engine::topology::view::parse_sentinel_entry;
use crate::engine::topology::{NodeId, try_wait_until};
use crate::error::HarnessError;

/// A promotable replica's priority (Valkey's default).
const PROMOTABLE: &str = "100";

/// The Sentinels' periods (`SENTINEL DEBUG`) during a scenario, and Valkey's defaults restored
/// after: `INFO` each second, so a priority is read at once; hello messages each half second, so
/// a woken old primary is turned into a replica 2 s after it answers again (four periods),
/// not 8 s.
const SCENARIO_PERIODS: [(&str, &str); 2] = [("info-period", "1000"), ("publish-period", "500")];
const DEFAULT_PERIODS: [(&str, &str); 2] = [("info-period", "10000"), ("publish-period", "2000")];

impl Engine {
    /// Makes `candidate` the only replica the Sentinels may promote (every other data node's
    /// `replica-priority` 0), shortens their periods, and waits until every Sentinel has read
    /// every priority.
    pub fn pin_promotion(&self, candidate: NodeId) -> Result<(), HarnessError> {
        for id in self.nodes() {
            let priority = if id == candidate { PROMOTABLE } else { "0" };
            self.config_set(id, "replica-priority", priority)?;
        }
        let failed = self.sentinel_periods(&SCENARIO_PERIODS);
        if let Some(e) = failed.into_iter().next() {
            return Err(e);
        }
        let what = format!(
            "every Sentinel reading that only {candidate} (port {}) may be promoted",
            self.port_of(candidate)
        );
        // A Sentinel that does not answer once is asked again, as every wait on them does.
        let mut missing = String::new();
        try_wait_until(&what, || {
            Ok(noting(&mut missing, self.priorities_read(candidate)))
        })
        .map_err(|e| held_up(e, &missing))?;
        Ok(())
    }

    /// Every data node promotable again, the Sentinels' periods Valkey's defaults: what
    /// [`Engine::pin_promotion`] changed, undone on every node and Sentinel that answers (one
    /// that does not keeps none from it).
    pub fn unpin_promotion(&self) {
        let _ = self.config_set_all("replica-priority", PROMOTABLE);
        let _ = self.sentinel_periods(&DEFAULT_PERIODS);
    }

    /// `SENTINEL DEBUG` with `periods` on every Sentinel; the errors of those that refused.
    fn sentinel_periods(&self, periods: &[(&str, &str)]) -> Vec<HarnessError> {
        let mut args = vec!["SENTINEL", "DEBUG"];
        args.extend(periods.iter().flat_map(|(k, v)| [*k, *v]));
        self.sentinels()
            .into_iter()
            .filter_map(|id| {
                self.sentinel_admin(id)
                    .and_then(|mut a| a.query::<String>(&args))
                    .err()
            })
            .collect()
    }

    /// `Ok` when every Sentinel lists each replica with the priority [`Engine::pin_promotion`]
    /// gave it; else which Sentinel does not yet, or did not answer.
    fn priorities_read(&self, candidate: NodeId) -> Result<(), String> {
        for id in self.sentinels() {
            let entries: Vec<std::collections::BTreeMap<String, String>> = self
                .sentinel_admin(id)
                .and_then(|mut a| a.query(&["SENTINEL", "REPLICAS", PRIMARY_NAME]))
                .map_err(|e| format!("{id}: {e}"))?;
            for e in entries.iter().map(parse_sentinel_entry) {
                let node = e.port.and_then(|p| self.node_at(p));
                let promotable = e.priority.is_some_and(|p| p > 0);
                if let Some(n) = node.filter(|n| promotable != (*n == candidate)) {
                    return Err(format!("{id} reads {n}'s priority as {:?}", e.priority));
                }
            }
        }
        Ok(())
    }
}
