//! What the cluster looks like around an unclean failover: a primary's replica, whether it has
//! caught up, whether the nodes agree on a promotion, and the failure detection tuned for a
//! scenario (and restored after, whatever happened).

use std::time::{Duration, Instant};

use crate::engine::Admin;
use crate::engine::health::{NodeHealth, node_snapshot};
use crate::gates::{GateContext, GateError};

/// The node timeout of a scenario: short, so a dead or stopped primary is flagged and its
/// replica promoted in a few seconds. It decides how soon the engine acts, never a verdict: the
/// progress bound is measured from the promotion the harness saw.
pub const SCENARIO_NODE_TIMEOUT_MS: u32 = 1_500;
/// How long any wait on the engine may take before the gate is an ERROR (the engine's, not the
/// connector's: no verdict depends on it).
pub const ENGINE_WITHIN: Duration = Duration::from_secs(60);

/// The real port of the replica of the primary at `primary` (real port).
pub fn replica_of(ctx: &GateContext<'_>, primary: u16) -> Result<u16, GateError> {
    let mut p = Admin::connect(&ctx.engine.node_url(primary))?;
    let id: String = p.query(&["CLUSTER", "MYID"])?;
    let lines: Vec<String> = p.query(&["CLUSTER", "REPLICAS", &id])?;
    lines
        .iter()
        .find_map(|l| {
            let addr = l.split(' ').nth(1)?;
            let port = addr.split('@').next()?.rsplit_once(':')?.1;
            port.parse::<u16>().ok()
        })
        .map(|p| ctx.engine.real_port(p))
        .ok_or_else(|| {
            GateError::instrument(format!("the primary at port {primary} has no replica"))
        })
}

/// Waits until the replica at `replica` has its link up and has read everything the primary at
/// `primary` wrote: the premise of a failover that loses nothing it need not (a replica still in
/// its first sync would lose everything).
pub fn wait_in_sync(ctx: &GateContext<'_>, primary: u16, replica: u16) -> Result<(), GateError> {
    let mut p = Admin::connect(&ctx.engine.node_url(primary))?;
    let mut r = Admin::connect(&ctx.engine.node_url(replica))?;
    let deadline = Instant::now() + ENGINE_WITHIN;
    loop {
        let head = p.info("replication")?;
        let tail = r.info("replication")?;
        let offset = |m: &std::collections::BTreeMap<String, String>, k: &str| {
            m.get(k).and_then(|v| v.parse::<u64>().ok())
        };
        if tail.get("master_link_status").map(String::as_str) == Some("up")
            && offset(&tail, "slave_repl_offset") >= offset(&head, "master_repl_offset")
            && offset(&head, "master_repl_offset").is_some()
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(GateError::instrument(format!(
                "the replica at port {replica} did not catch up with its primary at port {primary} in {} s",
                ENGINE_WITHIN.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The role `port` (real) has in `view`'s eyes, and whether it is flagged failing.
fn role_in(ctx: &GateContext<'_>, view: &NodeHealth, port: u16) -> Option<(String, bool)> {
    let ports = [port, ctx.engine.proxy_port(port)];
    view.view
        .values()
        .find(|v| {
            v.addr
                .rsplit_once(':')
                .and_then(|(_, p)| p.parse::<u16>().ok())
                .is_some_and(|p| ports.contains(&p))
        })
        .map(|v| (v.role.clone(), v.failing))
}

/// True when every node but `absent` reports `cluster_state:ok`, sees the node at `new` as a
/// primary and agrees on the epoch; and sees the node at `old` as `old_role` ("slave"), or,
/// with `old_role` empty, does not care (a dead node is flagged failing).
pub fn agreed(
    ctx: &GateContext<'_>,
    new: u16,
    old: u16,
    old_role: &str,
    absent: Option<u16>,
) -> bool {
    let mut epochs = std::collections::BTreeSet::new();
    ctx.engine
        .node_ports()
        .into_iter()
        .filter(|p| Some(*p) != absent)
        .all(|p| {
            node_snapshot(ctx.engine, p).is_ok_and(|h| {
                epochs.insert(h.current_epoch);
                let others_fine = h.view.values().all(|v| {
                    !v.failing
                        || (old_role.is_empty() && role_in(ctx, &h, old).is_some_and(|r| r.1))
                });
                h.state == "ok"
                    && role_in(ctx, &h, new).is_some_and(|(r, _)| r == "master")
                    && (old_role.is_empty()
                        || role_in(ctx, &h, old).is_some_and(|(r, f)| r == old_role && !f))
                    && others_fine
            })
        })
        && epochs.len() == 1
}

/// Polls `done` every 20 ms until it holds (`Ok(elapsed)`) or [`ENGINE_WITHIN`] passed.
pub fn wait_for(what: &str, mut done: impl FnMut() -> bool) -> Result<Duration, GateError> {
    let t0 = Instant::now();
    loop {
        if done() {
            return Ok(t0.elapsed());
        }
        if t0.elapsed() > ENGINE_WITHIN {
            return Err(GateError::instrument(format!(
                "{what} did not happen within {} s",
                ENGINE_WITHIN.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The role `INFO replication` gives the node at `port` (real), if it answers.
pub fn role(ctx: &GateContext<'_>, port: u16) -> Option<String> {
    Admin::connect(&ctx.engine.node_url(port))
        .and_then(|mut a| a.info("replication"))
        .ok()?
        .get("role")
        .cloned()
}

/// Failure detection for one scenario: a short node timeout on every node, and automatic
/// failover on the one replica only (every other replica keeps `cluster-replica-no-failover`,
/// so a neighbour starved of CPU is never promoted). Restored when dropped, whatever happened.
pub struct Tuning<'a> {
    ctx: &'a GateContext<'a>,
    replica: u16,
}

impl<'a> Tuning<'a> {
    pub fn apply(ctx: &'a GateContext<'a>, replica: u16) -> Result<Self, GateError> {
        let t = Self { ctx, replica };
        let e = ctx.engine;
        let refused = e.config_set_all(
            "cluster-node-timeout",
            &SCENARIO_NODE_TIMEOUT_MS.to_string(),
        );
        if !refused.is_empty() {
            return Err(GateError::instrument(format!(
                "nodes at ports {refused:?} refused a new cluster-node-timeout"
            )));
        }
        e.config_set(replica, "cluster-replica-validity-factor", "0")?;
        e.config_set(replica, "cluster-replica-no-failover", "no")?;
        Ok(t)
    }
}

/// Cuts the replica at `replica` off its primary at `primary`: it cannot authenticate any more
/// (a wrong `masterauth`), then its link is closed (`CLIENT KILL TYPE replica`), so what the
/// primary acknowledges from now on never reaches it.
pub fn cut_off(ctx: &GateContext<'_>, primary: u16, replica: u16) -> Result<(), GateError> {
    ctx.engine
        .config_set(replica, "masterauth", "emq-cut-off")?;
    Admin::connect(&ctx.engine.node_url(primary))?
        .query::<u64>(&["CLIENT", "KILL", "TYPE", "replica"])?;
    Ok(())
}

/// Gives the replica at `replica` the cluster's password again ([`cut_off`] undone).
pub fn reconnect(ctx: &GateContext<'_>, replica: u16) -> Result<(), GateError> {
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
        let _ = e.config_set(self.replica, "cluster-replica-no-failover", "yes");
        let _ = e.config_set(self.replica, "cluster-replica-validity-factor", "10");
        let _ = e.config_set_all(
            "cluster-node-timeout",
            &crate::engine::cluster::NODE_TIMEOUT_MS.to_string(),
        );
    }
}
