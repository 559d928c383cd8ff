//! The engine's topology: its nodes ([`NodeId`]), their roles ([`Role`]) as the nodes report
//! them, and the questions every gate asks of them (which node serves a key, a primary's replica,
//! whether a replica has caught up, whether the nodes agree on a promotion). Gates speak
//! [`NodeId`]; the ports a node has (its own, the one it announces, the harness's way in) stay
//! here and in [`crate::engine::proxied::Node`]. The engine's words for roles (`master`, `slave`)
//! are read here only.
//!
//! The parsing is pure and unit-tested ([`view`]); the queries here read the live engine.

pub mod shards;
pub mod view;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

pub use view::{NodeId, NodeView, Role, SentinelId, parse_nodes, port_of_addr};

use crate::engine::admin::Admin;
use crate::engine::health::{NodeHealth, node_snapshot};
use crate::engine::proxied::Node;
use crate::engine::{Engine, Handle};
use crate::error::HarnessError;
use crate::faults::Proxy;

/// How long any wait on the engine may take before it is the engine's error (no verdict depends
/// on it: a gate that meets it is an ERROR).
pub const ENGINE_WITHIN: Duration = Duration::from_secs(60);

/// Polls `done` every 20 ms until it holds (`Ok(elapsed)`) or [`ENGINE_WITHIN`] passed.
pub fn wait_until(what: &str, mut done: impl FnMut() -> bool) -> Result<Duration, HarnessError> {
    try_wait_until(what, || Ok(done()))
}

/// [`wait_until`] for a question that can fail: its first error ends the wait (a node that stops
/// answering is the engine's error, not a reason to poll on).
pub fn try_wait_until(
    what: &str,
    mut done: impl FnMut() -> Result<bool, HarnessError>,
) -> Result<Duration, HarnessError> {
    let t0 = Instant::now();
    loop {
        if done()? {
            return Ok(t0.elapsed());
        }
        if t0.elapsed() > ENGINE_WITHIN {
            return Err(HarnessError::Engine(format!(
                "{what} did not happen within {} s",
                ENGINE_WITHIN.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Engine {
    /// The nodes the harness booted one by one (a cluster's, a Sentinel engine's data nodes).
    fn booted_nodes(&self) -> &[Node] {
        match &self.handle {
            Handle::Cluster(c) => &c.nodes,
            Handle::Sentinel(s) => &s.nodes,
            _ => &[],
        }
    }

    /// Node `id` of a cluster or a Sentinel engine: only their nodes have a process, a proxy and
    /// a back of their own to kill, stop, restart or cut off.
    pub(super) fn booted_node(&self, id: NodeId) -> Result<&Node, HarnessError> {
        let nodes = self.booted_nodes();
        if nodes.is_empty() {
            return Err(HarnessError::Engine(format!(
                "{id} is a node of a cluster or a Sentinel engine: this engine is a single server"
            )));
        }
        nodes
            .get(id.index())
            .ok_or_else(|| HarnessError::Engine(format!("no {id} in this engine")))
    }

    /// Every node: a cluster's or a Sentinel engine's data nodes in boot order, or the one
    /// engine.
    pub fn nodes(&self) -> Vec<NodeId> {
        (0..self.booted_nodes().len().max(1))
            .map(NodeId::new)
            .collect()
    }

    /// The node one of whose ports is `port` (its own, announced, or the harness's way in), as a
    /// reply names it (`CLUSTER SLOTS`, `MOVED`, `CLUSTER REPLICAS`).
    pub fn node_at(&self, port: u16) -> Option<NodeId> {
        let nodes = self.booted_nodes();
        if nodes.is_empty() {
            return (port == self.port).then_some(NodeId::new(0));
        }
        nodes.iter().position(|n| n.has_port(port)).map(NodeId::new)
    }

    /// The node a cluster url names (its seed), a Sentinel engine's primary now, or the one
    /// engine.
    pub fn seed(&self) -> NodeId {
        if let Handle::Sentinel(s) = &self.handle {
            return NodeId::new(s.primary.load(std::sync::atomic::Ordering::SeqCst));
        }
        self.node_at(self.port).unwrap_or(NodeId::new(0))
    }

    /// After a failover on a Sentinel engine: `id` is the primary the harness's own connections
    /// (its admin, `MONITOR`, the gates' proxies) reach from now on. Nothing on other engines.
    pub fn set_primary(&self, id: NodeId) {
        if let Handle::Sentinel(s) = &self.handle {
            s.primary
                .store(id.index(), std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// The port `id` listens on, for evidence (a cluster's node's own; the engine's).
    pub fn port_of(&self, id: NodeId) -> u16 {
        self.booted_node(id).map_or(self.port, |n| n.port())
    }

    /// The port `id` announces to clients (its proxy's), for evidence a connector would recognise.
    pub fn announced_port(&self, id: NodeId) -> u16 {
        self.booted_node(id).map_or(self.port, |n| n.announced())
    }

    /// The harness's url of `id` (database 0, the admin user): never through a proxy, so
    /// `MONITOR`, `CLIENT KILL` and the admin see the node itself.
    pub fn node_url(&self, id: NodeId) -> String {
        let port = self.booted_node(id).map_or(self.port, |n| n.admin_port());
        super::url_of(&self.host, port, &self.admin_auth, self.db_for(0))
    }

    /// An admin connection to `id` alone.
    pub fn node_admin(&self, id: NodeId) -> Result<Admin, HarnessError> {
        Admin::connect(&self.node_url(id))
    }

    /// `ask` of node `id` on a fresh connection, asked again on another while the node closes it
    /// under the request, within [`ENGINE_WITHIN`]: behind Sentinel a failover ends with
    /// `CLIENT KILL TYPE normal` on the nodes it touched, the harness's connections included, at
    /// a moment only the Sentinel knows (after a coordinated one, later than the promotion the
    /// harness saw). For what may be asked twice: a read, a `CONFIG SET`.
    pub fn on_node<T>(
        &self,
        id: NodeId,
        what: &str,
        mut ask: impl FnMut(&mut Admin) -> Result<T, HarnessError>,
    ) -> Result<T, HarnessError> {
        let mut got = None;
        try_wait_until(&format!("{what} on {id}"), || {
            match self.node_admin(id).and_then(|mut a| ask(&mut a)) {
                Ok(v) => {
                    got = Some(v);
                    Ok(true)
                }
                Err(e) if crate::engine::ready::is_closed(&e) => Ok(false),
                Err(e) => Err(e),
            }
        })?;
        Ok(got.expect("the wait ended on an answer"))
    }

    /// `INFO section` of node `id` ([`Engine::on_node`]).
    pub fn node_info(
        &self,
        id: NodeId,
        section: &str,
    ) -> Result<BTreeMap<String, String>, HarnessError> {
        self.on_node(id, &format!("INFO {section}"), |a| a.info(section))
    }

    /// The fault proxy in front of node `id` (a cluster's or a Sentinel engine's).
    pub fn proxy_of(&self, id: NodeId) -> Result<&Proxy, HarnessError> {
        Ok(&self.booted_node(id)?.proxy)
    }

    /// The primaries `admin` last read (`CLUSTER SLOTS`), in its shard order.
    pub fn primaries(&self, admin: &Admin) -> Vec<NodeId> {
        admin
            .primaries()
            .into_iter()
            .filter_map(|p| self.node_at(p))
            .collect()
    }

    /// The primary that serves `key`, as `admin` last read the slot map.
    pub fn primary_of(&self, admin: &Admin, key: &str) -> Result<NodeId, HarnessError> {
        let port = admin.primaries()[admin.shard_of(key)];
        self.node_at(port)
            .ok_or_else(|| HarnessError::Engine(format!("no node announces port {port}")))
    }

    /// Reads the slot map again into `admin` (after a failover or a migration).
    pub fn refresh(&self, admin: &mut Admin) -> Result<(), HarnessError> {
        admin.refresh(&|port| self.url_of_port(port))
    }

    /// The harness's url of the node with `port` among its ports (`port` itself when none has).
    pub(super) fn url_of_port(&self, port: u16) -> String {
        match self.node_at(port) {
            Some(id) => self.node_url(id),
            None => super::url_of(&self.host, port, &self.admin_auth, self.db_for(0)),
        }
    }

    /// The replica of primary `primary` (`CLUSTER REPLICAS`: `CLUSTER SLOTS` leaves out a
    /// replica that has had no data yet); on a Sentinel engine the first its `INFO replication`
    /// lists.
    pub fn replica_of(&self, primary: NodeId) -> Result<NodeId, HarnessError> {
        let mut p = self.node_admin(primary)?;
        if let Handle::Sentinel(_) = &self.handle {
            return view::replica_ports(&p.info("replication")?)
                .into_iter()
                .find_map(|port| self.node_at(port))
                .ok_or_else(|| {
                    HarnessError::Engine(format!("the primary {primary} has no replica"))
                });
        }
        let id: String = p.query(&["CLUSTER", "MYID"])?;
        let lines: Vec<String> = p.query(&["CLUSTER", "REPLICAS", &id])?;
        lines
            .iter()
            .find_map(|l| self.node_at(port_of_addr(l.split(' ').nth(1)?)?))
            .ok_or_else(|| HarnessError::Engine(format!("the primary {primary} has no replica")))
    }

    /// The role `INFO replication` gives `id`, if it answers.
    pub fn role(&self, id: NodeId) -> Option<Role> {
        Role::from_info(
            &self
                .node_admin(id)
                .and_then(|mut a| a.info("replication"))
                .ok()?,
        )
    }

    /// Waits until `replica` has its link up and has read everything `primary` wrote: the
    /// premise of a failover that loses nothing it need not (a replica still in its first sync
    /// would lose everything).
    pub fn wait_in_sync(&self, primary: NodeId, replica: NodeId) -> Result<(), HarnessError> {
        let offset =
            |m: &BTreeMap<String, String>, k: &str| m.get(k).and_then(|v| v.parse::<u64>().ok());
        let what = format!(
            "the replica {replica} (port {}) catching up with its primary {primary} (port {})",
            self.port_of(replica),
            self.port_of(primary)
        );
        // The two connections are opened again after a node closed one: behind Sentinel a
        // failover ends with `CLIENT KILL TYPE normal` on the nodes it touched, the harness's own
        // connections included, at a moment only the Sentinel knows.
        let mut cons: Option<(Admin, Admin)> = None;
        try_wait_until(&what, || {
            let step = (|| {
                let (p, r) = match &mut cons {
                    Some(c) => c,
                    None => cons.insert((self.node_admin(primary)?, self.node_admin(replica)?)),
                };
                Ok::<_, HarnessError>((p.info("replication")?, r.info("replication")?))
            })();
            let (head, tail) = match step {
                Ok(both) => both,
                Err(e) if crate::engine::ready::is_closed(&e) => {
                    cons = None;
                    return Ok(false);
                }
                Err(e) => return Err(e),
            };
            Ok(
                tail.get("master_link_status").map(String::as_str) == Some("up")
                    && offset(&head, "master_repl_offset").is_some()
                    && offset(&tail, "slave_repl_offset") >= offset(&head, "master_repl_offset"),
            )
        })
        .map(drop)
    }

    /// The role `view` gives `id`, and whether it flags it failing.
    pub fn role_in(&self, view: &NodeHealth, id: NodeId) -> Option<(Role, bool)> {
        view.view
            .values()
            .find(|v| v.port().and_then(|p| self.node_at(p)) == Some(id))
            .map(|v| (v.role, v.failing))
    }

    /// Waits until the engine agrees that `new` took over from `old`: on a cluster every node but
    /// `old` sees `new` a primary (`old` may be flagged failing); behind Sentinel every Sentinel
    /// names `new`, which says it is the primary, and the harness's own connections follow it
    /// ([`Engine::set_primary`]). An error when the Sentinels named another node.
    pub fn wait_promotion(&self, new: NodeId, old: NodeId) -> Result<Duration, HarnessError> {
        if !matches!(self.handle, Handle::Sentinel(_)) {
            return wait_until("the promotion agreed by every other node", || {
                self.agreed(new, old, None, Some(old))
            });
        }
        let t0 = Instant::now();
        let named = self.wait_for_new_primary(old)?;
        if named != new {
            return Err(HarnessError::Engine(format!(
                "the Sentinels promoted {named} (port {}), not {new} (port {}), the only replica with a priority",
                self.port_of(named),
                self.port_of(new)
            )));
        }
        self.set_primary(new);
        Ok(t0.elapsed())
    }

    /// Waits until `old` is a replica of `new` as the engine sees it: on a cluster every node
    /// agrees; behind Sentinel `old` follows `new` with its link up (the Sentinels turned it).
    /// `what` names the step for the error of a wait that ran out.
    pub fn wait_demotion(
        &self,
        what: &str,
        old: NodeId,
        new: NodeId,
    ) -> Result<Duration, HarnessError> {
        let t0 = Instant::now();
        if matches!(self.handle, Handle::Sentinel(_)) {
            self.wait_following(old, new)
                .map_err(|e| HarnessError::Engine(format!("{what}: {e}")))?;
            return Ok(t0.elapsed());
        }
        wait_until(what, || self.agreed(new, old, Some(Role::Replica), None))
    }

    /// Waits until the engine is whole again after a failover from `old` to `new`: every replica
    /// caught up with `new` (behind Sentinel also every Sentinel settled on it).
    /// The time spent waiting on the nodes to agree (the replicas catching up is not counted, as
    /// before Sentinel). `what` names the step.
    pub fn wait_whole(
        &self,
        what: &str,
        new: NodeId,
        old: NodeId,
    ) -> Result<Duration, HarnessError> {
        if matches!(self.handle, Handle::Sentinel(_)) {
            let t0 = Instant::now();
            self.wait_settled(new)
                .map_err(|e| HarnessError::Engine(format!("{what}: {e}")))?;
            return Ok(t0.elapsed());
        }
        let waited = self.wait_demotion(what, old, new)?;
        self.wait_in_sync(new, old)?;
        Ok(waited)
    }

    /// True when every node but `absent` reports `cluster_state:ok`, sees `new` as a primary,
    /// agrees on the epoch, and flags no node failing; and sees `old` as `old_role`, or, with
    /// `None`, does not care (a dead `old` may be flagged failing).
    pub fn agreed(
        &self,
        new: NodeId,
        old: NodeId,
        old_role: Option<Role>,
        absent: Option<NodeId>,
    ) -> bool {
        let mut epochs = std::collections::BTreeSet::new();
        self.nodes()
            .into_iter()
            .filter(|n| Some(*n) != absent)
            .all(|n| {
                node_snapshot(self, n).is_ok_and(|h| {
                    epochs.insert(h.current_epoch);
                    let old_seen = self.role_in(&h, old);
                    let others_fine = h.view.values().all(|v| {
                        !v.failing || (old_role.is_none() && old_seen.is_some_and(|r| r.1))
                    });
                    h.state == "ok"
                        && self
                            .role_in(&h, new)
                            .is_some_and(|(r, _)| r == Role::Primary)
                        && old_role.is_none_or(|want| old_seen == Some((want, false)))
                        && others_fine
                })
            })
            && epochs.len() == 1
    }
}
