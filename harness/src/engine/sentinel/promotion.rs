//! An unclean failover the harness lets the Sentinels make (G8's kill and stall, SPEC R11.3):
//! which replica they promote, pinned so a scenario knows it before the fault, and how soon they
//! act, shortened for the scenario and restored after.
//!
//! Sentinel promotes the replica with the lowest non-zero `replica-priority` (then the largest
//! offset), and reads a replica's priority in its `INFO` only every `info-period` (10 s). So the
//! pin sets the priority on the nodes, then waits until every Sentinel has read it: a replica the
//! Sentinels still think promotable could win on its offset (the kill scenario's candidate is
//! the one cut off, so it is always behind).

use super::PRIMARY_NAME;
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
        self.sentinel_periods(&SCENARIO_PERIODS)?;
        let what = format!(
            "every Sentinel reading that only {candidate} (port {}) may be promoted",
            self.port_of(candidate)
        );
        try_wait_until(&what, || self.priorities_read(candidate))?;
        Ok(())
    }

    /// Every data node promotable again, the Sentinels' periods Valkey's defaults: what
    /// [`Engine::pin_promotion`] changed, undone on the nodes and Sentinels that answer.
    pub fn unpin_promotion(&self) {
        let _ = self.config_set_all("replica-priority", PROMOTABLE);
        let _ = self.sentinel_periods(&DEFAULT_PERIODS);
    }

    fn sentinel_periods(&self, periods: &[(&str, &str)]) -> Result<(), HarnessError> {
        let mut args = vec!["SENTINEL", "DEBUG"];
        args.extend(periods.iter().flat_map(|(k, v)| [*k, *v]));
        for id in self.sentinels() {
            self.sentinel_admin(id)?.query::<String>(&args)?;
        }
        Ok(())
    }

    /// True when every Sentinel lists each replica with the priority [`Engine::pin_promotion`]
    /// gave it.
    fn priorities_read(&self, candidate: NodeId) -> Result<bool, HarnessError> {
        for id in self.sentinels() {
            let entries: Vec<std::collections::BTreeMap<String, String>> = self
                .sentinel_admin(id)?
                .query(&["SENTINEL", "REPLICAS", PRIMARY_NAME])?;
            for e in entries.iter().map(parse_sentinel_entry) {
                let node = e.port.and_then(|p| self.node_at(p));
                let promotable = e.priority.is_some_and(|p| p > 0);
                if node.is_some_and(|n| promotable != (n == candidate)) {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }
}
