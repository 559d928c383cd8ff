//! What is done to a booted node ([`crate::engine::proxied::Node`]), for G8's unclean failover
//! (SPEC R8.10) and a Sentinel engine's: killed (SIGKILL), stopped and woken (SIGSTOP,
//! SIGCONT), restarted on its port and directory so that it rejoins as a replica; the cluster's failure detection tuned for a scenario and restored after; and a node's
//! replication position, read on a side connection.

use rustix::process::Signal;

use crate::engine::Engine;
pub use crate::engine::admin::side::{ReplPosition, SideReader, parse_position};
use crate::engine::topology::NodeId;
use crate::error::HarnessError;

/// What a promoted replica took over (`INFO replication` on the new primary): the old primary's
/// history (`master_replid2`) up to `second_repl_offset - 1`, and its own new history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TakeOver {
    pub replid: String,
    pub replid2: String,
    pub second_repl_offset: u64,
}

/// `INFO replication` fields as a map (the admin's parsing).
fn field(
    info: &std::collections::BTreeMap<String, String>,
    k: &str,
) -> Result<String, HarnessError> {
    info.get(k)
        .cloned()
        .ok_or_else(|| HarnessError::Engine(format!("INFO replication names no {k}")))
}

impl Engine {
    /// SIGKILL to node `id`; it stays dead until [`Engine::restart_node`].
    pub fn kill_node(&self, id: NodeId) -> Result<(), HarnessError> {
        self.booted_node(id)?.server.kill();
        Ok(())
    }

    /// SIGSTOP (`stop`) or SIGCONT to node `id`.
    pub fn pause_node(&self, id: NodeId, stop: bool) -> Result<(), HarnessError> {
        let signal = if stop { Signal::STOP } else { Signal::CONT };
        self.booted_node(id)?.server.signal(signal);
        Ok(())
    }

    /// Starts node `id` again on its port and directory, announcing its proxy as before. A
    /// cluster's node rejoins by its `nodes.conf`, and a peer's newer epoch for its slots makes it
    /// a replica; a Sentinel engine's comes back a primary of nothing, which its Sentinels turn
    /// into a replica of the primary they know.
    pub fn restart_node(&self, id: NodeId) -> Result<(), HarnessError> {
        let node = self.booted_node(id)?;
        node.server.restart(&node.announce)
    }

    /// `CONFIG SET name value` on every node that answers; the nodes that did not.
    pub fn config_set_all(&self, name: &str, value: &str) -> Vec<NodeId> {
        self.nodes()
            .into_iter()
            .filter(|id| self.config_set(*id, name, value).is_err())
            .collect()
    }

    /// `CONFIG SET name value` on node `id`, again on a fresh connection when the node closes one
    /// under it ([`Engine::on_node`]).
    pub fn config_set(&self, id: NodeId, name: &str, value: &str) -> Result<(), HarnessError> {
        self.on_node(id, &format!("CONFIG SET {name}"), |a| {
            a.query::<()>(&["CONFIG", "SET", name, value])
        })
    }

    /// What node `id` took over when it was promoted.
    pub fn take_over(&self, id: NodeId) -> Result<TakeOver, HarnessError> {
        let info = self.node_info(id, "replication")?;
        Ok(TakeOver {
            replid: field(&info, "master_replid")?,
            replid2: field(&info, "master_replid2")?,
            second_repl_offset: field(&info, "second_repl_offset")?
                .parse::<i64>()
                .map_err(|_| HarnessError::Engine("second_repl_offset is no number".into()))?
                .max(0) as u64,
        })
    }
}
