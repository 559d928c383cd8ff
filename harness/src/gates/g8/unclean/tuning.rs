//! The engine tuned for an unclean failover: failure detection for one scenario (restored
//! after, whatever happened), and a replica cut off its primary. A cluster's nodes detect the
//! failure themselves (a short node timeout); behind Sentinel the Sentinels do, already within
//! seconds (`down-after-milliseconds` 2 s), and the tuning pins the replica they promote. What the cluster looks like
//! (a primary's replica, whether it caught up, whether the nodes agree) is the engine's
//! topology (`crate::engine::topology`).

use crate::engine::topology::NodeId;
use crate::gates::{GateContext, GateError};

/// The node timeout of a scenario: short, so a dead or stopped primary is flagged and its
/// replica promoted in a few seconds. It decides how soon the engine acts, never a verdict: the
/// progress bound is measured from the promotion the harness saw.
pub const SCENARIO_NODE_TIMEOUT_MS: u32 = 1_500;
/// Failure detection for one scenario: on a cluster a short node timeout on every node, and
/// automatic failover on the one replica only (every other replica keeps
/// `cluster-replica-no-failover`, so a neighbour starved of CPU is never promoted); behind
/// Sentinel the one replica the Sentinels may promote ([`crate::engine::Engine::pin_promotion`]).
/// Restored when dropped, whatever happened.
pub struct Tuning<'a> {
    ctx: &'a GateContext<'a>,
    replica: NodeId,
}

impl<'a> Tuning<'a> {
    pub fn apply(ctx: &'a GateContext<'a>, replica: NodeId) -> Result<Self, GateError> {
        let t = Self { ctx, replica };
        let e = ctx.engine;
        if !e.is_cluster() {
            e.pin_promotion(replica)?;
            return Ok(t);
        }
        let refused = e.config_set_all(
            "cluster-node-timeout",
            &SCENARIO_NODE_TIMEOUT_MS.to_string(),
        );
        if !refused.is_empty() {
            return Err(GateError::instrument(format!(
                "{} refused a new cluster-node-timeout",
                refused
                    .iter()
                    .map(|n| format!("{n} (port {})", e.port_of(*n)))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        e.config_set(replica, "cluster-replica-validity-factor", "0")?;
        e.config_set(replica, "cluster-replica-no-failover", "no")?;
        Ok(t)
    }
}

/// Cuts `replica` off `primary`: it cannot authenticate any more (a wrong `masterauth`), then its
/// link is closed (`CLIENT KILL TYPE replica`), so what the primary acknowledges from now on never
/// reaches it.
pub fn cut_off(ctx: &GateContext<'_>, primary: NodeId, replica: NodeId) -> Result<(), GateError> {
    ctx.engine
        .config_set(replica, "masterauth", "emq-cut-off")?;
    ctx.engine
        .node_admin(primary)?
        .query::<u64>(&["CLIENT", "KILL", "TYPE", "replica"])?;
    Ok(())
}

/// Gives `replica` the cluster's password again ([`cut_off`] undone).
pub fn reconnect(ctx: &GateContext<'_>, replica: NodeId) -> Result<(), GateError> {
    Ok(ctx.engine.config_set(
        replica,
        "masterauth",
        ctx.engine.password().unwrap_or_default(),
    )?)
}

impl Drop for Tuning<'_> {
    fn drop(&mut self) {
        let e = self.ctx.engine;
        let _ = e.config_set(self.replica, "masterauth", e.password().unwrap_or_default());
        if !e.is_cluster() {
            e.unpin_promotion();
            return;
        }
        let _ = e.config_set(self.replica, "cluster-replica-no-failover", "yes");
        let _ = e.config_set(self.replica, "cluster-replica-validity-factor", "10");
        let _ = e.config_set_all(
            "cluster-node-timeout",
            &crate::engine::cluster::NODE_TIMEOUT_MS.to_string(),
        );
    }
}

/// [`crate::engine::topology::wait_until`], as the gate's error.
pub fn wait_for(what: &str, done: impl FnMut() -> bool) -> Result<std::time::Duration, GateError> {
    Ok(crate::engine::topology::wait_until(what, done)?)
}
