//! Engine events that are not a connector's doing. A gate's verdict judges the connector, so an
//! engine that restarted, evicted keys, or (on a cluster) failed over, flagged a node failing or
//! moved a slot during the gate makes the gate ERROR (infrastructure), naming the event, never
//! FAIL. [`crate::gates::run_gate`] takes a [`Health`] before and after each gate; a gate that
//! changes the engine on purpose (G8's failover) takes a new baseline once its change is done.
//!
//! The comparison is pure ([`Health::events_since`]) and unit-tested; [`snapshot`] is the I/O.

use std::collections::BTreeMap;

use crate::engine::Engine;
use crate::engine::admin::Admin;
use crate::engine::topology::view::NodeId;
use crate::engine::topology::view::{NodeView, Role, parse_nodes};
use crate::error::HarnessError;

/// What one node says of itself and (on a cluster) of the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeHealth {
    /// `INFO server` `run_id`: a new one means the server restarted.
    pub run_id: String,
    /// `INFO stats` `evicted_keys`.
    pub evicted_keys: u64,
    /// `CLUSTER INFO` `cluster_current_epoch` (0 on a single engine).
    pub current_epoch: u64,
    /// `CLUSTER INFO` `cluster_state` (empty on a single engine).
    pub state: String,
    /// This node's view of every node: id → (role, slots, failing).
    pub view: BTreeMap<String, NodeView>,
}

/// Every node's health, by port (or the single engine's one entry).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Health {
    pub nodes: BTreeMap<u16, Result<NodeHealth, String>>,
}

impl Health {
    /// The events between `before` and `self`, in words; empty when nothing happened.
    pub fn events_since(&self, before: &Health) -> Vec<String> {
        let mut out = Vec::new();
        for (port, now) in &self.nodes {
            let then = before.nodes.get(port);
            match (then, now) {
                (_, Err(e)) => out.push(format!("the engine at port {port} did not answer: {e}")),
                (Some(Ok(a)), Ok(b)) => node_events(*port, a, b, &mut out),
                _ => {}
            }
        }
        out
    }
}

fn node_events(port: u16, a: &NodeHealth, b: &NodeHealth, out: &mut Vec<String>) {
    if a.run_id != b.run_id {
        out.push(format!(
            "the engine at port {port} restarted (run_id {} became {})",
            short(&a.run_id),
            short(&b.run_id)
        ));
    }
    if b.evicted_keys > a.evicted_keys {
        out.push(format!(
            "the engine at port {port} evicted {} keys",
            b.evicted_keys - a.evicted_keys
        ));
    }
    if a.current_epoch != b.current_epoch {
        out.push(format!(
            "the cluster epoch seen at port {port} moved from {} to {} (a failover or a slot change)",
            a.current_epoch, b.current_epoch
        ));
    }
    if !b.state.is_empty() && b.state != "ok" {
        out.push(format!(
            "the node at port {port} reports cluster_state:{}",
            b.state
        ));
    }
    for (id, v) in &b.view {
        let was = a.view.get(id);
        if v.failing && !was.is_some_and(|w| w.failing) {
            out.push(format!("port {port} flags the node at {} failing", v.addr));
        }
        if let Some(w) = was {
            if w.role != v.role {
                out.push(format!(
                    "port {port} sees the node at {} change role from {} to {}",
                    v.addr, w.role, v.role
                ));
            } else if w.slots != v.slots {
                out.push(format!(
                    "port {port} sees the slots of the node at {} change from {:?} to {:?}",
                    v.addr, w.slots, v.slots
                ));
            }
        }
    }
}

fn short(id: &str) -> &str {
    id.get(..8).unwrap_or(id)
}

fn node_health(admin: &mut Admin, cluster: bool) -> Result<NodeHealth, HarnessError> {
    let server = admin.info("server")?;
    let stats = admin.info("stats")?;
    let mut h = NodeHealth {
        run_id: server.get("run_id").cloned().unwrap_or_default(),
        evicted_keys: stats
            .get("evicted_keys")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
        ..NodeHealth::default()
    };
    if cluster {
        let info: String = admin.query(&["CLUSTER", "INFO"])?;
        let field = |k: &str| {
            crate::engine::cluster::info_field(&info, k)
                .unwrap_or_default()
                .to_string()
        };
        h.current_epoch = field("cluster_current_epoch").parse().unwrap_or(0);
        h.state = field("cluster_state");
        let nodes: String = admin.query(&["CLUSTER", "NODES"])?;
        h.view = parse_nodes(&nodes);
    }
    Ok(h)
}

/// One cluster node's health.
pub fn node_snapshot(engine: &Engine, id: NodeId) -> Result<NodeHealth, HarnessError> {
    engine
        .node_admin(id)
        .and_then(|mut a| node_health(&mut a, true))
}

/// Reads every node's health; a node that does not answer is recorded as such, not an error.
pub fn snapshot(engine: &Engine) -> Health {
    let mut nodes = BTreeMap::new();
    if engine.kind == crate::engine::EngineKind::Sentinel {
        // Each data node's health and its own role: a failover nobody asked for shows as a
        // role that changed (SPEC §6; G8's own failover takes a new baseline).
        for id in engine.nodes() {
            let h = engine
                .node_admin(id)
                .and_then(|mut a| {
                    let mut h = node_health(&mut a, false)?;
                    if let Some(role) = Role::from_info(&a.info("replication")?) {
                        let addr = format!("127.0.0.1:{}", engine.announced_port(id));
                        let view = NodeView {
                            addr,
                            role,
                            slots: Vec::new(),
                            failing: false,
                        };
                        h.view.insert(id.to_string(), view);
                    }
                    Ok(h)
                })
                .map_err(|e| e.to_string());
            nodes.insert(engine.port_of(id), h);
        }
    } else if engine.is_cluster() {
        for id in engine.nodes() {
            let h = node_snapshot(engine, id).map_err(|e| e.to_string());
            nodes.insert(engine.port_of(id), h);
        }
    } else {
        let h = engine
            .admin(0)
            .and_then(|mut a| node_health(&mut a, false))
            .map_err(|e| e.to_string());
        nodes.insert(engine.port, h);
    }
    Health { nodes }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODES: &str = "\
a1 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460
b2 127.0.0.1:7001@17001 master - 0 0 2 connected 5461-10922
c3 127.0.0.1:7002@17002 master - 0 0 3 connected 10923-16383
d4 127.0.0.1:7003@17003 slave a1 0 0 1 connected
";

    fn health(nodes: &str, epoch: u64) -> Health {
        let h = NodeHealth {
            run_id: "r1".into(),
            evicted_keys: 0,
            current_epoch: epoch,
            state: "ok".into(),
            view: parse_nodes(nodes),
        };
        Health {
            nodes: [(7000, Ok(h))].into(),
        }
    }

    #[test]
    fn nothing_changed_is_no_event() {
        let h = health(NODES, 6);
        assert!(h.events_since(&h).is_empty());
    }

    #[test]
    fn a_failover_is_named() {
        let before = health(NODES, 6);
        let swapped = NODES
            .replace(
                "myself,master - 0 0 1 connected 0-5460",
                "myself,slave d4 0 0 1 connected",
            )
            .replace(
                "slave a1 0 0 1 connected",
                "master - 0 0 7 connected 0-5460",
            );
        let after = health(&swapped, 7);
        let ev = after.events_since(&before);
        assert!(
            ev.iter()
                .any(|e| e.contains("epoch") && e.contains("6 to 7")),
            "{ev:?}"
        );
        assert!(
            ev.iter()
                .any(|e| e.contains("127.0.0.1:7003") && e.contains("replica to primary")),
            "{ev:?}"
        );
    }

    #[test]
    fn a_failing_flag_a_slot_move_a_restart_and_an_eviction_are_named() {
        let before = health(NODES, 6);
        let mut after = health(
            &NODES
                .replace(
                    "b2 127.0.0.1:7001@17001 master",
                    "b2 127.0.0.1:7001@17001 master,fail?",
                )
                .replace("10923-16383", "10924-16383"),
            6,
        );
        if let Some(Ok(n)) = after.nodes.get_mut(&7000) {
            n.run_id = "r2".into();
            n.evicted_keys = 3;
        }
        let ev = after.events_since(&before).join("\n");
        assert!(ev.contains("127.0.0.1:7001 failing"), "{ev}");
        assert!(ev.contains("slots of the node at 127.0.0.1:7002"), "{ev}");
        assert!(ev.contains("restarted"), "{ev}");
        assert!(ev.contains("evicted 3 keys"), "{ev}");
    }

    #[test]
    fn a_node_that_does_not_answer_is_named() {
        let before = health(NODES, 6);
        let after = Health {
            nodes: [(7000, Err("connection refused".into()))].into(),
        };
        assert!(after.events_since(&before)[0].contains("did not answer"));
    }
}
